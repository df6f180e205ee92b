/**
 * TRL `GRPOTrainer`'s advantage block (`_generate_and_score_completions`): several reward functions,
 * NaN for unscorable samples, `scale_rewards` group / batch / none, and the two multi-objective
 * aggregations.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type GroupId, type GroupIndex, batchStats, components, groupIndex, groupStatsOf, rewardsArg, scaled } from './groups.js';
import { type AdvantageEstimatorDefinition, estimatorArgs } from './registry.js';
import { DATA, OPT_DATA, epsilonOption } from './row_args.js';

/**
 * Arguments of {@link trlAdvantages}.
 *
 * @category Advantages
 */
export interface TrlAdvantagesArgs {
  /** One array per reward function, each with one value per row; NaN = the function could not score
   *  that row (TRL's `None`). A row that is NaN for every function is unscorable and gets 0. */
  rewards: ArrayLike<number>[];
  /**
   * Weight per reward function (default 1 each).
   *
   * @defaultValue 1 for every reward function
   */
  weights?: ArrayLike<number>;
  /** Group id per row. Give either `groups` or `numGenerations` (TRL: consecutive blocks of G rows). */
  groups?: ArrayLike<GroupId>;
  /** TRL's `num_generations`: rows `[kG, (k+1)G)` form group k; the row count must be a multiple. */
  numGenerations?: number;
  /**
   * `'group'` (default; TRL `True`), `'batch'`, or `'none'` (TRL `False`, Dr. GRPO).
   *
   * @defaultValue `'group'`
   */
  scaleRewards?: 'group' | 'batch' | 'none';
  /**
   * `'sum_then_normalize'` (default) or `'normalize_then_sum'` (GDPO-style).
   *
   * @defaultValue `'sum_then_normalize'`
   */
  aggregation?: 'sum_then_normalize' | 'normalize_then_sum';
  /**
   * Added to the std before dividing (default 1e-4 as TRL).
   *
   * @defaultValue `1e-4`
   */
  epsilon?: number;
}

/**
 * Result of {@link trlAdvantages}.
 *
 * @category Advantages
 */
export interface TrlAdvantages {
  /** One advantage per row (NaN results replaced by 0, as TRL's `nan_to_num`). */
  advantages: Float64Array;
  /** The std each row was scaled by (group std for `'group'` and `'none'`, batch std otherwise). */
  std: Float64Array;
  /** 1 where that std is 0 within 1e-8 (TRL's `is_std_zero`, used for its logging). */
  isStdZero: Uint8Array;
}

function groupNanStd(x: Float64Array, idx: GroupIndex): Float64Array {
  const st = groupStatsOf(x, idx, { skipNaN: true });
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const g = idx.ids[i]!;
    // A group of one row: TRL special-cases G = 1 to a std of 0; otherwise nanstd over < 2 values is NaN.
    out[i] = idx.sizes[g] === 1 ? 0 : st.count[g]! < 2 ? NaN : st.std[g]!;
  }
  return out;
}

const TRL_OPTIONS = Object.freeze({
  rewards: DATA, weights: OPT_DATA, groups: OPT_DATA,
  numGenerations: { type: 'number', int: true, min: 1, description: 'rows per group, consecutive (instead of groups)' },
  scaleRewards: { type: 'string', values: ['group', 'batch', 'none'], default: 'group', description: "TRL's scale_rewards" },
  aggregation: { type: 'string', values: ['sum_then_normalize', 'normalize_then_sum'], default: 'sum_then_normalize', description: 'how several reward functions combine' },
  epsilon: epsilonOption(1e-4),
} as const);

/**
 * TRL's GRPO advantages. `sum_then_normalize`: `r = nansum_k(w_k r_k)` (unscorable rows NaN),
 * `A = (r - nanmean_g) / (std + epsilon)` with the group's or the batch's `nanstd` (Bessel), or
 * `r - nanmean_g` for `'none'`. `normalize_then_sum`: each function normalised per group
 * `(r_k - nanmean_g) / (nanstd_g + epsilon)`, weighted nansum, then normalised over the batch. NaN
 * results become 0. Computed in float64 (TRL works in float32; results agree to float32 precision).
 *
 * @param a reward functions' values, weights, groups, options
 * @returns advantages, the std used per row and the is-std-zero flags
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // TRL GRPOTrainer: two reward functions, groups of num_generations consecutive rows
 * const { advantages, std, isStdZero } = rl.trlAdvantages({
 *   rewards: [[1, 0, 1, 1], [0.5, NaN, 0, 0.5]], // NaN: that function could not score the row
 *   weights: [1, 0.2],
 *   numGenerations: 2,
 * });
 * console.log(advantages, std, isStdZero);
 * ```
 * @category Advantages
 */
export function trlAdvantages(a: TrlAdvantagesArgs): TrlAdvantages {
  const o = estimatorArgs(TRL_OPTIONS, a, 'trlAdvantages');
  if (!Array.isArray(o.rewards) || o.rewards.length === 0) {
    fail('ERR_OPTION', 'trlAdvantages: rewards', 'a non-empty array of per-row reward arrays (one per function)', o.rewards);
  }
  const comps = components(v.list(o.rewards, 'trlAdvantages: rewards', 'an array of reward arrays'), 'trlAdvantages: rewards', true);
  const N = comps[0]!.length;
  comps.forEach((c, k) => {
    if (c.length !== N) fail('ERR_SHAPE', `trlAdvantages: rewards[${k}].length`, `${N} (as rewards[0])`, c.length);
  });
  const K = comps.length;
  const w = o.weights === undefined ? new Float64Array(K).fill(1) : rewardsArg(o.weights, 'trlAdvantages: weights', K);
  let idx: GroupIndex;
  if (o.groups !== undefined) {
    if (o.numGenerations !== undefined) fail('ERR_OPTION', 'trlAdvantages: numGenerations', 'not given together with groups', o.numGenerations);
    idx = groupIndex(o.groups as ArrayLike<GroupId>, 'trlAdvantages: groups', N);
  } else {
    const G = o.numGenerations;
    if (G === undefined) fail('ERR_OPTION', 'trlAdvantages: groups', 'groups or numGenerations', undefined);
    if (N % G !== 0) fail('ERR_SHAPE', 'trlAdvantages: rewards[0].length', `a multiple of numGenerations ${G}`, N);
    idx = groupIndex(Int32Array.from({ length: N }, (_, i) => Math.floor(i / G)), 'groups', N);
  }
  const { scaleRewards: scale, aggregation: agg, epsilon: eps } = o;

  const unscorable = new Uint8Array(N);
  for (let i = 0; i < N; i++) {
    let all = 1;
    for (let k = 0; k < K; k++) if (!Number.isNaN(comps[k]![i]!)) all = 0;
    unscorable[i] = all;
  }
  const adv = new Float64Array(N);
  let std: Float64Array;
  if (agg === 'sum_then_normalize') {
    const r = new Float64Array(N);
    for (let i = 0; i < N; i++) {
      if (unscorable[i]) {
        r[i] = NaN;
        continue;
      }
      let s = 0;
      for (let k = 0; k < K; k++) {
        const x = comps[k]![i]!;
        if (!Number.isNaN(x)) s += w[k]! * x;
      }
      r[i] = s;
    }
    const mean = groupStatsOf(r, idx, { skipNaN: true }).mean;
    if (scale === 'batch') std = new Float64Array(N).fill(batchStats(r, true).std);
    else std = groupNanStd(r, idx);
    for (let i = 0; i < N; i++) {
      const g = idx.ids[i]!;
      const d = r[i]! - mean[g]!;
      const x = scale === 'none' ? d : scaled(d, std[i]!, eps);
      adv[i] = Number.isNaN(x) ? 0 : x;
    }
  } else {
    const r = new Float64Array(N);
    for (let k = 0; k < K; k++) {
      const c = comps[k]!;
      const mean = groupStatsOf(c, idx, { skipNaN: true }).mean;
      const sd = groupNanStd(c, idx);
      for (let i = 0; i < N; i++) {
        const d = c[i]! - mean[idx.ids[i]!]!;
        const z = scaled(d, sd[i]!, eps);
        if (!Number.isNaN(z)) r[i] += w[k]! * z;
      }
    }
    for (let i = 0; i < N; i++) if (unscorable[i]) r[i] = NaN;
    const bs = batchStats(r, true);
    std = new Float64Array(N).fill(bs.std);
    for (let i = 0; i < N; i++) {
      const d = r[i]! - bs.mean;
      const x = scaled(d, bs.std, eps);
      adv[i] = Number.isNaN(x) ? 0 : x;
    }
  }
  const isStdZero = new Uint8Array(N);
  for (let i = 0; i < N; i++) isStdZero[i] = Math.abs(std[i]!) <= 1e-8 ? 1 : 0;
  return { advantages: adv, std, isStdZero };
}

/** @internal Estimator `trl`. */
export const trlEstimator: AdvantageEstimatorDefinition<TrlAdvantagesArgs> = {
  name: 'trl', level: 'row', description: "TRL GRPOTrainer's advantages (several reward functions)", options: TRL_OPTIONS, compute: trlAdvantages,
};
