/**
 * What the native addon runs on, and its thread count.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { native } from '../core/addon.js';
import { numOpt } from '../core/validate.js';
import type { CudaDevice } from '../cuda/index.js';

/**
 * A CPU instruction set of the kernels. x86-64 has `'baseline' < 'avx2' < 'avx512'`, aarch64 has
 * `'baseline' < 'neon'`; `'baseline'` is the portable scalar build of the same kernels.
 *
 * @category Backend
 */
export type Isa = 'baseline' | 'avx2' | 'avx512' | 'neon';

/**
 * Description of the loaded native backend.
 *
 * @category Backend
 */
export interface BackendInfo {
  /**
   * `'cpu'`, `'cuda'` for the CUDA module (the CPU kernels plus the device ones), or `'host-device'` for
   * the CPU module with its host device (`GEAR_RL_VARIANT=host-device`: a test double of a GPU whose
   * device memory is host memory and whose kernels are the CPU ones).
   */
  variant: 'cpu' | 'cuda' | 'host-device';
  /** Instruction set the CPU kernels use now: one of {@link BackendInfo.isas}. */
  isa: Isa | string;
  /**
   * Every instruction set this CPU runs, lowest first (`'baseline'` always first): the values
   * {@link setIsa} accepts without clamping. Tests and benchmarks loop over it to cover every path.
   */
  isas: Isa[];
  /** Threads in the addon's pool. */
  threads: number;
  /** Package version the binary was built from. */
  version: string;
  /**
   * The CUDA devices in use (`variant: 'cuda'`, or the two host devices of `'host-device'`; empty for the
   * CPU module). Host arrays still run on the CPU kernels of {@link BackendInfo.isa}; device tensors and
   * `device: 'cuda'` calls run on these.
   */
  devices: CudaDevice[];
}

/**
 * Reports the native variant, instruction set, thread count and version.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const { variant, isa, isas, threads, version, devices } = rl.backend();
 * console.log(`${variant} ${isa} (of ${isas.join(', ')}), ${threads} threads, v${version}`);
 * for (const d of devices) console.log(`cuda:${d.index} ${d.name} (${d.arch})`);
 * ```
 * @category Backend
 */
export function backend(): BackendInfo {
  const b = native.backend();
  return {
    variant: b.variant as BackendInfo['variant'],
    isa: b.isa,
    isas: (b.isas ?? [b.isa]) as Isa[],
    threads: b.threads,
    version: b.version,
    devices: native.cudaDevices?.().devices ?? [],
  };
}

/**
 * Sets the number of threads of the addon's pool (default: the number of CPUs, or the
 * `GEAR_RL_NUM_THREADS` environment variable). Results are bit-identical for every thread count.
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const before = rl.backend().threads;
 * rl.setNumThreads(2);
 * console.log(rl.backend().threads); // 2
 * rl.setNumThreads(before);
 * ```
 * @category Backend
 */
export function setNumThreads(n: number): void {
  // numOpt treats undefined as "use the default"; here a count is required.
  if (n === undefined) fail('ERR_OPTION', 'threads', 'an integer >= 1 <= 1024', n);
  native.setNumThreads({ threads: numOpt(n, 'threads', 1, { min: 1, max: 1024, int: true }) });
}

/**
 * Forces the kernels' instruction set (`GEAR_RL_ISA` does the same at load); clamped to the best one
 * the CPU supports. Returns the instruction set in effect. An instruction set of another architecture
 * (`'neon'` on x86-64, `'avx2'` on aarch64) throws `ERR_OPTION`. Meant for testing and benchmarking
 * every path; the setting is process-wide (every thread and worker of the process shares it).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const { isa, isas } = rl.backend();
 * console.log(rl.setIsa('baseline')); // 'baseline': the portable scalar kernels
 * rl.setIsa(isa as rl.Isa);           // back to the best one (isas lists what this CPU runs)
 * console.log(isas);
 * ```
 * @category Backend
 */
export function setIsa(isa: Isa): string {
  return native.setIsa({ isa });
}
