/**
 * What the native addon runs on, and its thread count.
 *
 * @module
 */
import { fail } from '../errors.js';
import { native } from '../native.js';
import { numOpt } from '../validate.js';

/** Description of the loaded native backend. */
export interface BackendInfo {
  /** `'cpu'` or `'cuda'`. */
  variant: 'cpu' | 'cuda';
  /** Instruction set the kernels use: `'baseline'`, `'avx2'` or `'avx512'` (or a GPU architecture). */
  isa: 'baseline' | 'avx2' | 'avx512' | string;
  /** Threads in the addon's pool. */
  threads: number;
  /** Package version the binary was built from. */
  version: string;
}

/** Reports the native variant, instruction set, thread count and version. */
export function backend(): BackendInfo {
  const b = native.backend();
  return { variant: b.variant as 'cpu' | 'cuda', isa: b.isa, threads: b.threads, version: b.version };
}

/**
 * Sets the number of threads of the addon's pool (default: the number of CPUs, or the
 * `GEAR_RL_NUM_THREADS` environment variable). Results are bit-identical for every thread count.
 */
export function setNumThreads(n: number): void {
  // numOpt treats undefined as "use the default"; here a count is required.
  if (n === undefined) fail('ERR_OPTION', 'threads', 'an integer >= 1 <= 1024', n);
  native.setNumThreads(numOpt(n, 'threads', 1, { min: 1, max: 1024, int: true }));
}

/**
 * Forces the kernels' instruction set (`GEAR_RL_ISA` does the same at load); clamped to what the CPU
 * supports. Returns the instruction set in effect. Meant for testing and benchmarking every path.
 */
export function setIsa(isa: 'baseline' | 'avx2' | 'avx512'): string {
  return native.setIsa(isa);
}
