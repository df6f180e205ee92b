/**
 * Memory-bandwidth probe: the "floor" that memory-bound kernels are measured against. A benchmark
 * utility, not part of the training path.
 *
 * @module
 */
import { native } from '../core/addon.js';
import * as v from '../core/validate.js';

/**
 * Access pattern measured by {@link memoryBandwidth}.
 *
 * @category Backend
 */
export type BandwidthMode = 'read' | 'read2' | 'copy' | 'copyPlain';
const MODES: readonly BandwidthMode[] = ['read', 'read2', 'copy', 'copyPlain'];

// ---- native contract: the bandwidth probe ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** 0 read, 1 read2, 2 copy, 3 copyPlain, the order of the modes above. @internal */
export type BandwidthModeCode = 0 | 1 | 2 | 3;
/** @internal */
export interface MemoryBandwidthParams {
  mode: BandwidthModeCode;
  bytes: number;
  threads: number;
  reps: number;
}
/** What the addon returns ({@link MemoryBandwidthResult} is the public result). @internal */
export interface MemoryBandwidthNativeResult {
  /** One rate per repetition, GB/s. */
  gbps: Float64Array;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    memoryBandwidth(params: MemoryBandwidthParams): MemoryBandwidthNativeResult;
  }
}

/**
 * Options of {@link memoryBandwidth}.
 *
 * @category Backend
 */
export interface MemoryBandwidthOptions {
  /**
   * `'read'`: one sequential read stream per thread; `'read2'`: two interleaved read streams per
   * thread (more cache misses in flight, usually the higher read figure); `'copy'`: copy with
   * non-temporal stores; `'copyPlain'`: copy with regular stores. Default `'read2'`.
   *
   * @defaultValue `'read2'`
   */
  mode?: BandwidthMode;
  /**
   * Buffer size per array in bytes; keep it far above the last-level cache. Default 512 MiB.
   *
   * @defaultValue `536870912` (512 MiB)
   */
  bytes?: number;
  /**
   * Threads started for the probe (independent of the addon's pool). Default 2.
   *
   * @defaultValue `2`
   */
  threads?: number;
  /**
   * Timed repetitions after one untimed warm-up pass. Default 5.
   *
   * @defaultValue `5`
   */
  reps?: number;
}

/**
 * Result of {@link memoryBandwidth}.
 *
 * @category Backend
 */
export interface MemoryBandwidthResult {
  /** The access pattern measured. */
  mode: BandwidthMode;
  /** Median over the repetitions, in GB/s (1e9 bytes per second). Copies count bytes read + written. */
  gbs: number;
  /** Best repetition, in GB/s. */
  maxGbs: number;
  /** Every repetition, in GB/s, in the order measured. */
  samples: number[];
  /** Buffer size per array actually used (rounded down to whole cache lines per thread), in bytes. */
  bytes: number;
  /** Threads used. */
  threads: number;
}

/**
 * Measures this machine's memory bandwidth with native SSE2 loops, in the calling process. The buffers
 * are allocated and touched before timing, so page faults are not counted. Runs synchronously (it owns
 * its threads and should not overlap other work). Used by the benchmarks to report every kernel as a
 * percentage of the bandwidth measured in the same run.
 *
 * @param opts access pattern, buffer size, threads, repetitions
 * @returns median and per-repetition GB/s
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // a quick probe; use the defaults (512 MiB buffers, 5 repetitions) for a real figure
 * const r = rl.memoryBandwidth({ mode: 'read2', bytes: 4 << 20, threads: 1, reps: 2 });
 * console.log(`${r.gbs.toFixed(1)} GB/s (best ${r.maxGbs.toFixed(1)})`);
 * ```
 * @category Backend
 */
export function memoryBandwidth(opts: MemoryBandwidthOptions = {}): MemoryBandwidthResult {
  v.knownKeys(opts, 'memoryBandwidth options', ['mode', 'bytes', 'threads', 'reps']);
  const mode = v.enumOpt(opts.mode, 'mode', MODES, 'read2');
  const threads = v.numOpt(opts.threads, 'threads', 2, { min: 1, max: 1024, int: true });
  const bytes = v.numOpt(opts.bytes, 'bytes', 512 * 2 ** 20, { min: 128 * threads, max: 2 ** 40, int: true });
  const reps = v.numOpt(opts.reps, 'reps', 5, { min: 1, max: 1000, int: true });
  const raw = native.memoryBandwidth({ mode: MODES.indexOf(mode) as BandwidthModeCode, bytes, threads, reps }).gbps;
  const samples = Array.from(raw);
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const gbs = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  const used = Math.floor(bytes / threads / 128) * 128 * threads;
  return { mode, gbs, maxGbs: sorted[sorted.length - 1]!, samples, bytes: used, threads };
}
