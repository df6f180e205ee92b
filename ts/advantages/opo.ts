/**
 * OPO (verl `opo`): length-weighted group baseline.
 *
 * @module
 */
import type { AdvantageEstimatorDefinition } from './registry.js';
import { DATA, ROW_OPTIONS, rowArgs } from './row_args.js';
import { type GroupId, type SingletonPolicy, groupStatsOf } from './groups.js';
import { lengthsArg } from './masked.js';

const OPO_OPTIONS = Object.freeze({ ...ROW_OPTIONS, lengths: DATA } as const);

/**
 * Arguments of {@link opo}.
 *
 * @category Advantages
 */
export interface OpoArgs {
  /** Outcome reward per row. */
  rewards: ArrayLike<number>;
  /** Group id per row (numbers or strings). */
  groups: ArrayLike<GroupId>;
  /** Counted (mask 1) tokens per row, the `|y_i|` of the baseline. */
  lengths: ArrayLike<number>;
  /**
   * A group of one row: `'raw'` keeps its score (baseline 0, verl, default), `'zero'` gives 0.
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
}

/**
 * OPO: `A_i = r_i - b_g` with the length-weighted baseline `b_g = Σ_j |y_j| r_j / Σ_j |y_j|` over the
 * group. Exact-tie groups give exactly 0. A group whose rows all have length 0 has no weighted mean;
 * its baseline falls back to the plain mean (verl would produce NaN there).
 *
 * @param a rewards, groups, lengths, singleton policy
 * @returns one advantage per row (Float64Array)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // length-weighted baseline per group: lengths are the counted tokens of each row
 * const adv = rl.opo({ rewards: [1, 0, 1], groups: [0, 0, 0], lengths: [10, 30, 20] });
 * console.log(adv);
 * ```
 * @category Advantages
 */
export function opo(a: OpoArgs): Float64Array {
  const { a: o, rewards, idx, singleton } = rowArgs(a, 'opo', OPO_OPTIONS);
  const lengths = lengthsArg(o.lengths, 'opo: lengths', rewards.length)!;
  const st = groupStatsOf(rewards, idx, { weights: lengths });
  const plain = groupStatsOf(rewards, idx);
  const out = new Float64Array(rewards.length);
  for (let i = 0; i < rewards.length; i++) {
    const g = idx.ids[i]!;
    if (idx.sizes[g] === 1) {
      out[i] = singleton === 'raw' ? rewards[i]! : 0;
      continue;
    }
    const b = Number.isNaN(st.mean[g]!) ? plain.mean[g]! : st.mean[g]!;
    out[i] = rewards[i]! - b;
  }
  return out;
}

/** @internal Estimator `opo`. */
export const opoEstimator: AdvantageEstimatorDefinition<OpoArgs> = {
  name: 'opo', level: 'row', description: 'length-weighted group baseline', options: OPO_OPTIONS, compute: opo,
};
