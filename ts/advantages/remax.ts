/**
 * ReMax (verl `remax`): reward-to-go minus the greedy rollout's reward.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { rewardsArg } from './groups.js';
import { type AdvantageEstimatorDefinition, estimatorArgs } from './registry.js';
import { DATA, TOKEN_OPTIONS } from './row_args.js';

const REMAX_OPTIONS = Object.freeze({
  ...TOKEN_OPTIONS, baselines: DATA,
  precision: { type: 'string', values: ['float32', 'float64'], default: 'float32', description: 'output precision' },
} as const);

/**
 * Arguments of {@link remax}.
 *
 * @category Advantages
 */
export interface RemaxArgs {
  /** Reward per token (packed rows). */
  tokenRewards: Float32Array | Float64Array;
  /** Packed-row offsets, length R + 1. */
  offsets: Int32Array;
  /**
   * 1 = generated token; all ones when omitted.
   *
   * @defaultValue all ones
   */
  mask?: Uint8Array;
  /** Per row: the reward of the greedy (argmax) rollout for the same prompt. */
  baselines: ArrayLike<number>;
  /**
   * Output precision: `'float32'` (default) or `'float64'`.
   *
   * @defaultValue `'float32'`
   */
  precision?: 'float32' | 'float64';
}

/**
 * ReMax: `A_t = Σ_{t' >= t} R_{t'} m_{t'} - b_row` on counted tokens, 0 on masked ones. (verl leaves the
 * reward-to-go itself on masked tokens that precede counted ones; losses never read those.)
 *
 * @param a token rewards, offsets, mask, greedy baselines
 * @returns per-token advantages (Float32Array, or Float64Array with `precision: 'float64'`)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // baselines: the reward of a greedy rollout for each row's prompt
 * const adv = rl.remax({
 *   tokenRewards: Float32Array.of(0, 1, 0, 0, 0.5),
 *   offsets: Int32Array.of(0, 2, 5),
 *   baselines: [0.5, 0.5],
 * });
 * console.log(adv); // Float32Array [0.5, 0.5, 0, 0, 0]
 * ```
 * @category Advantages
 */
export function remax(a: RemaxArgs & { precision: 'float64' }): Float64Array;
/** With the default `precision: 'float32'`: the advantages as a Float32Array (described with the first signature). */
export function remax(a: RemaxArgs): Float32Array;
export function remax(a: RemaxArgs): Float32Array | Float64Array {
  const o = estimatorArgs(REMAX_OPTIONS, a, 'remax');
  const baselines = v.readList(o.baselines); // its getters run before the token arrays are checked
  const x = o.tokenRewards;
  if (!(v.isTyped(x, Float32Array) || v.isTyped(x, Float64Array))) fail('ERR_DTYPE', 'remax: tokenRewards', 'Float32Array or Float64Array', x);
  v.attached(x, 'remax: tokenRewards');
  v.allFinite(x, 'remax: tokenRewards');
  const off = o.offsets as Int32Array;
  const R = v.offsets(off, 'remax: offsets', x.length);
  const mask = v.optMask(o.mask, 'remax: mask', x.length);
  const b = rewardsArg(baselines, 'remax: baselines', R);
  const out = o.precision === 'float64' ? new Float64Array(x.length) : new Float32Array(x.length);
  for (let r = 0; r < R; r++) {
    let run = 0;
    for (let t = off[r + 1]! - 1; t >= off[r]!; t--) {
      if (mask && !mask[t]) continue;
      run += x[t]!;
      out[t] = run - b[r]!;
    }
  }
  return out;
}

/** @internal Estimator `remax`. */
export const remaxEstimator: AdvantageEstimatorDefinition<RemaxArgs> = {
  name: 'remax', level: 'token', description: 'reward-to-go minus the greedy rollout baseline', options: REMAX_OPTIONS, compute: remax,
};
