// Longer or load-sensitive runs kept out of `npm test` (see each file's header): `npm run test:workers`.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.stress.ts'],
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    testTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
