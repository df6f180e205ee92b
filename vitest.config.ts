import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The emulated platform suites: the kernel suites again under qemu-aarch64, under Wine and on an
 * AVX2-only CPU model under qemu-x86_64. About 20 minutes of CPU on 2 cores together, so `npm test`
 * leaves them to `npm run test:platforms` (vitest.platforms.config.ts); the README's test command and CI
 * run both.
 */
export const PLATFORM_SUITES = ['test/platform/aarch64.test.ts', 'test/platform/win32.test.ts', 'test/platform/avx2_cpu.test.ts'];

/** What both configurations share. */
export const shared = {
  reporters: ['default', './test/helpers/summary-reporter.ts'],
  testTimeout: 120_000,
  hookTimeout: 600_000,
  // Native kernels use their own thread pool; two vitest workers match the two cores.
  pool: 'forks' as const,
  maxWorkers: 2,
};

export default defineConfig({
  test: { ...shared, include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...PLATFORM_SUITES] },
});
