/**
 * GDPO (current verl `gdpo`): per-reward GRPO normalisation, weighted sum, batch whitening.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { grpo } from './grpo.js';
import { components } from './groups.js';
import { type GroupId, type SingletonPolicy, groupIndex, rewardsArg } from './groups.js';
import { type AdvantageEstimatorDefinition, estimatorArgs } from './registry.js';
import { DATA, OPT_DATA, SINGLETON_OPTION, epsilonOption } from './row_args.js';
import { lengthsArg, whitenRows } from './masked.js';

/**
 * Arguments of {@link gdpo}.
 *
 * @category Advantages
 */
export interface GdpoArgs {
  /** One array per reward component, each with one value per row. */
  rewards: ArrayLike<number>[];
  /**
   * Weight per component (default 1 each).
   *
   * @defaultValue 1 for every component
   */
  weights?: ArrayLike<number>;
  /** Group id per row (numbers or strings). */
  groups: ArrayLike<GroupId>;
  /** Counted tokens per row for the token-level whitening (omitted: every row counts once). */
  lengths?: ArrayLike<number>;
  /**
   * Added to each component's group std (default 1e-6).
   *
   * @defaultValue `1e-6`
   */
  epsilon?: number;
  /**
   * Singleton-group policy of the per-component GRPO step (default `'raw'`).
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
}

const GDPO_OPTIONS = Object.freeze({
  rewards: DATA, weights: OPT_DATA, groups: DATA, lengths: OPT_DATA, epsilon: epsilonOption(1e-6), singleton: SINGLETON_OPTION,
} as const);

/**
 * GDPO: for each reward component k, GRPO advantages `(r_k - mean_g) / (std_g + epsilon)`; their
 * weighted sum `Σ_k w_k A_k`; then whitened over the batch as verl's `masked_whiten` (statistics over
 * every counted token). Throws `ERR_SHAPE` when fewer than two tokens are counted.
 *
 * @param a reward components, weights, groups, lengths
 * @returns one advantage per row (Float64Array)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two reward components (correctness, format), normalised per group separately, then summed
 * const adv = rl.gdpo({
 *   rewards: [[1, 0, 1, 0], [1, 1, 0, 0]],
 *   weights: [1, 0.5],
 *   groups: [0, 0, 0, 0],
 * });
 * console.log(adv);
 * ```
 * @category Advantages
 */
export function gdpo(a: GdpoArgs): Float64Array {
  const o = estimatorArgs(GDPO_OPTIONS, a, 'gdpo');
  if (!Array.isArray(o.rewards) || o.rewards.length === 0) {
    fail('ERR_OPTION', 'gdpo: rewards', 'a non-empty array of per-row reward arrays', o.rewards);
  }
  const comps = components(v.list(o.rewards, 'gdpo: rewards', 'an array of reward arrays'), 'gdpo: rewards', false);
  const rows = comps[0]!.length;
  comps.forEach((c, k) => {
    if (c.length !== rows) fail('ERR_SHAPE', `gdpo: rewards[${k}].length`, `${rows} (as rewards[0])`, c.length);
  });
  const K = comps.length;
  const weights = o.weights === undefined ? new Float64Array(K).fill(1) : rewardsArg(o.weights, 'gdpo: weights', K);
  groupIndex(o.groups as ArrayLike<GroupId>, 'gdpo: groups', rows);
  const lengths = lengthsArg(o.lengths, 'gdpo: lengths', rows);
  const { epsilon, singleton } = o;
  const sum = new Float64Array(rows);
  for (let k = 0; k < K; k++) {
    const adv = grpo({ rewards: comps[k]!, groups: o.groups as ArrayLike<GroupId>, epsilon, singleton });
    for (let i = 0; i < rows; i++) sum[i] += weights[k]! * adv[i]!;
  }
  return whitenRows(sum, lengths);
}

/** @internal Estimator `gdpo`. */
export const gdpoEstimator: AdvantageEstimatorDefinition<GdpoArgs> = {
  name: 'gdpo', level: 'row', description: 'per-component GRPO, weighted sum, whitened', options: GDPO_OPTIONS, compute: gdpo,
};
