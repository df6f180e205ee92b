import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    testTimeout: 120_000,
    hookTimeout: 600_000,
    // Native kernels use their own thread pool; two vitest workers match the two cores.
    pool: 'forks',
    maxWorkers: 2,
  },
});
