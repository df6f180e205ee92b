/**
 * RLOO (verl `rloo` / `rloo_vectorized`): leave-one-out baseline.
 *
 * @module
 */
import type { AdvantageEstimatorDefinition } from './registry.js';
import { ROW_OPTIONS, rowArgs } from './row_args.js';
import { type GroupId, type SingletonPolicy, groupStatsOf } from './groups.js';

/**
 * Arguments of {@link rloo}.
 *
 * @category Advantages
 */
export interface RlooArgs {
  /** Outcome reward per row. */
  rewards: ArrayLike<number>;
  /** Group id per row (numbers or strings). */
  groups: ArrayLike<GroupId>;
  /** A group of one row: `'raw'` keeps its score (verl's loop version, default), `'zero'` gives 0
   *  (verl's vectorised version).
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
}

/**
 * REINFORCE leave-one-out: `A_i = r_i - mean_{j≠i} r_j = n/(n-1) · (r_i - mean_g)` for groups of
 * n >= 2 rows. Exact-tie groups give exactly 0.
 *
 * @param a rewards, groups, singleton policy
 * @returns one advantage per row (Float64Array)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // leave-one-out baseline: r_i - mean of the other rows of its group
 * console.log(rl.rloo({ rewards: [1, 0, 0, 1], groups: [0, 0, 0, 1] })); // [1, -0.5, -0.5, 1]
 * ```
 * @category Advantages
 */
export function rloo(a: RlooArgs): Float64Array {
  const { rewards, idx, singleton } = rowArgs(a, 'rloo', ROW_OPTIONS);
  const st = groupStatsOf(rewards, idx);
  const out = new Float64Array(rewards.length);
  for (let i = 0; i < rewards.length; i++) {
    const g = idx.ids[i]!;
    const n = idx.sizes[g]!;
    if (n === 1) {
      out[i] = singleton === 'raw' ? rewards[i]! : 0;
      continue;
    }
    // Same evaluation order as verl: r·n/(n-1) - mean·n/(n-1); identical terms cancel exactly on ties.
    out[i] = (rewards[i]! * n) / (n - 1) - (st.mean[g]! * n) / (n - 1);
  }
  return out;
}

/** @internal Estimator `rloo`. */
export const rlooEstimator: AdvantageEstimatorDefinition<RlooArgs> = {
  name: 'rloo', level: 'row', description: 'leave-one-out baseline', options: ROW_OPTIONS, compute: rloo,
};
