/**
 * GPG (verl `gpg`): group-centred rewards scaled by the share of non-zero rewards in the batch.
 *
 * @module
 */
import type { AdvantageEstimatorDefinition } from './registry.js';
import { ROW_OPTIONS, rowArgs } from './row_args.js';
import { type GroupId, type SingletonPolicy, groupStatsOf } from './groups.js';

/**
 * Arguments of {@link gpg}.
 *
 * @category Advantages
 */
export interface GpgArgs {
  /** Outcome reward per row. */
  rewards: ArrayLike<number>;
  /** Group id per row (numbers or strings). */
  groups: ArrayLike<GroupId>;
  /**
   * A group of one row: `'raw'` (default, verl: mean 0) or `'zero'`.
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
}

/**
 * GPG: `A_i = α (r_i - mean_g)` with `α = B / max(#{i : r_i ≠ 0}, 1)` over the whole batch of B rows
 * (verl's `f_norm` is 1). Exact-tie groups give exactly 0.
 *
 * @param a rewards, groups, singleton policy
 * @returns one advantage per row (Float64Array)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const adv = rl.gpg({ rewards: [1, 0, 0, 0], groups: ['a', 'a', 'b', 'b'] });
 * console.log(adv);
 * ```
 * @category Advantages
 */
export function gpg(a: GpgArgs): Float64Array {
  const { rewards, idx, singleton } = rowArgs(a, 'gpg', ROW_OPTIONS);
  let nonzero = 0;
  for (let i = 0; i < rewards.length; i++) if (rewards[i] !== 0) nonzero++;
  const alpha = rewards.length / Math.max(nonzero, 1);
  const st = groupStatsOf(rewards, idx);
  const out = new Float64Array(rewards.length);
  for (let i = 0; i < rewards.length; i++) {
    const g = idx.ids[i]!;
    if (idx.sizes[g] === 1) {
      out[i] = singleton === 'raw' ? alpha * rewards[i]! : 0;
      continue;
    }
    const d = rewards[i]! - st.mean[g]!;
    out[i] = d === 0 ? 0 : alpha * d;
  }
  return out;
}

/** @internal Estimator `gpg`. */
export const gpgEstimator: AdvantageEstimatorDefinition<GpgArgs> = {
  name: 'gpg', level: 'row', description: 'GPG group-mean baseline', options: ROW_OPTIONS, compute: gpg,
};
