/**
 * GRPO family: `grpo` (verl `compute_grpo_outcome_advantage` / TRL's group and batch scaling / Dr. GRPO),
 * verl's vectorised float32 variant (`grpo_vectorized` + `group_mean_std`) and `grpoPassK`.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { type AdvantageEstimatorDefinition, estimatorArgs } from './registry.js';
import { ROW_OPTIONS, epsilonOption, rowArgs } from './row_args.js';
import {
  type GroupId, type SingletonPolicy, batchStats, contiguousGroups, groupIndex, groupStatsOf, rewardsArg,
  STD_FLOOR, runMoments, runStarts, scaled, singletonDenominator, sortedRunStarts,
} from './groups.js';

/**
 * How `grpo` scales the centred rewards.
 *
 * @category Advantages
 */
export type GrpoScale = 'group' | 'batch' | 'none';

const GRPO_OPTIONS = Object.freeze({
  ...ROW_OPTIONS,
  scale: { type: 'string', values: ['group', 'batch', 'none'] satisfies GrpoScale[], default: 'group', description: 'divide by the group std, the batch std, or nothing' },
  epsilon: epsilonOption(1e-6),
  precision: { type: 'string', values: ['float64', 'float32'], default: 'float64', description: "'float32': verl's vectorised GRPO" },
  varianceFloor: { type: 'number', min: 0, default: 0, description: "variance floor of precision 'float32'" },
} as const);

/**
 * Arguments of {@link grpo}.
 *
 * @category Advantages
 */
export interface GrpoArgs {
  /** Outcome reward per row (verl: the unmasked row sum of `token_level_rewards`). */
  rewards: ArrayLike<number>;
  /** Group id per row (rows sampled from the same prompt); numbers or strings, rows need not be contiguous. */
  groups: ArrayLike<GroupId>;
  /** `'group'` (default): divide by the group's std + epsilon; `'batch'`: by the std of every reward in
   *  the batch + epsilon (TRL `scale_rewards='batch'`; a one-row batch gives 0 as TRL); `'none'`: no
   *  division (Dr. GRPO).
   *
   * @defaultValue `'group'`
   */
  scale?: GrpoScale;
  /**
   * Added to the std before dividing (default 1e-6 as verl; TRL uses 1e-4).
   *
   * @defaultValue `1e-6`
   */
  epsilon?: number;
  /** A group of one row: `'raw'` keeps its score as verl (`r / float32(1 + epsilon)` under group
   *  scaling), `'zero'` gives 0 as TRL. Default `'raw'`.
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
  /** `'float64'` (default). `'float32'` reproduces verl's vectorised GRPO (`grpo_vectorized`), which
   *  computes group statistics and advantages in float32 through `group_mean_std`.
   *
   * @defaultValue `'float64'`
   */
  precision?: 'float64' | 'float32';
  /** Variance floor of `group_mean_std` for `precision: 'float32'`: std = sqrt(max(var, floor)). Current
   *  verl passes 0 (default); legacy verl passed epsilon (1e-6, i.e. a std floor of 1e-3).
   *
   * @defaultValue `0`
   */
  varianceFloor?: number;
}

/**
 * Group-relative advantages: `A = (r - mean_g) / (std_g + epsilon)` (unbiased std, two-pass float64),
 * or `r - mean_g` with `scale: 'none'`. Exact-tie groups give exactly 0.
 *
 * @param a rewards, groups and options
 * @returns one advantage per row (Float64Array); broadcast to tokens with `segmentBroadcast`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two prompts, three sampled responses each
 * const rewards = [1, 0, 0, 1, 1, 0.5];
 * const groups = ['p1', 'p1', 'p1', 'p2', 'p2', 'p2'];
 * // (r - mean) / (std + 1e-6) within each group
 * console.log(rl.grpo({ rewards, groups }));
 * // Dr. GRPO: r - mean
 * console.log(rl.grpo({ rewards, groups, scale: 'none' }));
 * // TRL's conventions
 * console.log(rl.grpo({ rewards, groups, epsilon: 1e-4, singleton: 'zero' }));
 * ```
 * @category Advantages
 */
export function grpo(a: GrpoArgs): Float64Array {
  const o = estimatorArgs(GRPO_OPTIONS, a, 'grpo');
  const rewards = rewardsArg(o.rewards, 'grpo: rewards');
  // Sorted integer ids (prompts in order, a prompt's rows side by side) are their own group runs;
  // any other ids are indexed (which validates them; sorted integer ids cannot fail there).
  let starts = sortedRunStarts(o.groups, rewards.length);
  const indexed = starts ? undefined : groupIndex(o.groups as ArrayLike<GroupId>, 'grpo: groups', rewards.length);
  const { singleton, scale, epsilon: eps, precision, varianceFloor: floor } = o;
  if (scale === 'group' && precision === 'float64') {
    if (!starts && contiguousGroups(indexed!.ids)) starts = runStarts(indexed!);
    if (starts) return grpoRuns(rewards, starts, eps, singleton);
  }
  const idx = indexed ?? groupIndex(o.groups as ArrayLike<GroupId>, 'grpo: groups', rewards.length);
  if (precision === 'float32') {
    if (scale === 'batch') fail('ERR_OPTION', 'grpo: scale', "'group' or 'none' with precision 'float32'", scale);
    return grpoFloat32(rewards, idx.ids, idx.count, scale === 'group', eps, floor, singleton);
  }
  const out = new Float64Array(rewards.length);
  const ids = idx.ids;
  const sizes = idx.sizes;
  const st = groupStatsOf(rewards, idx);
  const batchStd = scale === 'batch' ? batchStats(rewards).std : 0;
  if (scale === 'group') {
    const mean = st.mean;
    const std = st.std;
    const tie = st.tie;
    const single = singletonDenominator(eps);
    for (let i = 0; i < rewards.length; i++) {
      const g = ids[i]!;
      const r = rewards[i]!;
      if (sizes[g] === 1) out[i] = singleton === 'zero' ? 0 : r / single;
      else if (!tie[g]) out[i] = scaled(r - mean[g]!, std[g]!, eps);
    }
    return out;
  }
  for (let i = 0; i < rewards.length; i++) {
    const g = ids[i]!;
    const r = rewards[i]!;
    if (sizes[g] === 1) {
      if (singleton === 'zero') out[i] = 0;
      else if (scale === 'batch') out[i] = scaled(r, batchStd, eps);
      else out[i] = r;
      continue;
    }
    const num = r - st.mean[g]!;
    out[i] = scale === 'none' ? num : scaled(num, batchStd, eps);
  }
  // A batch std over fewer than two rows is undefined: like TRL's nan_to_num, those advantages are 0.
  if (scale === 'batch') for (let i = 0; i < out.length; i++) if (Number.isNaN(out[i]!)) out[i] = 0;
  return out;
}

/**
 * Group-scaled GRPO over groups that are runs of rows (`starts[g] .. starts[g + 1]`): statistics and
 * advantages of one group while its rows are in cache; exact-tie groups stay 0 without touching the
 * division. Same values as the row loop over a GroupIndex (see runMoments).
 */
function grpoRuns(rewards: Float64Array, starts: Int32Array, eps: number, singleton: SingletonPolicy): Float64Array {
  const out = new Float64Array(rewards.length);
  const single = singletonDenominator(eps);
  const m = new Float64Array(3);
  const G = starts.length - 1;
  for (let g = 0; g < G; g++) {
    const s = starts[g]!;
    const e = starts[g + 1]!;
    if (e - s === 1) {
      out[s] = singleton === 'zero' ? 0 : rewards[s]! / single;
      continue;
    }
    runMoments(rewards, s, e, m);
    if (m[2] === 1) continue;
    const mean = m[0]!;
    // scaled() with its denominator hoisted out of the row loop (the std of finite rewards is finite).
    const d = m[1]! + eps;
    const den = d > STD_FLOOR ? d : STD_FLOOR;
    for (let i = s; i < e; i++) {
      const num = rewards[i]! - mean;
      out[i] = num === 0 ? 0 : num / den;
    }
  }
  return out;
}

/** float32 group statistics of verl `group_mean_std`, shared by {@link groupMeanStd} and vectorised GRPO. */
function meanStd32(scores: Float32Array, ids: Int32Array, G: number, floor: number) {
  const f = Math.fround;
  const s1 = new Float32Array(G);
  const cnt = new Float32Array(G);
  const first = new Float32Array(G);
  const tie = new Uint8Array(G).fill(1);
  for (let i = 0; i < scores.length; i++) {
    const g = ids[i]!;
    if (cnt[g] === 0) first[g] = scores[i]!;
    else if (scores[i] !== first[g]) tie[g] = 0;
    s1[g] = f(s1[g]! + scores[i]!);
    cnt[g] = f(cnt[g]! + 1);
  }
  const mean = new Float32Array(G);
  for (let g = 0; g < G; g++) {
    if (cnt[g]! > 1) mean[g] = tie[g] ? first[g]! : f(s1[g]! / cnt[g]!);
  }
  const ss = new Float32Array(G);
  for (let i = 0; i < scores.length; i++) {
    const g = ids[i]!;
    const d = f(scores[i]! - mean[g]!);
    ss[g] = f(ss[g]! + f(d * d));
  }
  const std = new Float32Array(G);
  const fl = f(floor);
  for (let g = 0; g < G; g++) {
    if (cnt[g]! <= 1) {
      std[g] = 1;
      continue;
    }
    const variance = f(ss[g]! / Math.max(cnt[g]! - 1, 1));
    std[g] = f(Math.sqrt(variance > fl ? variance : fl));
  }
  return { mean, std, count: cnt };
}

function grpoFloat32(
  rewards: Float64Array, ids: Int32Array, G: number, norm: boolean, eps: number, floor: number, singleton: SingletonPolicy,
): Float64Array {
  const f = Math.fround;
  const s = Float32Array.from(rewards);
  const { mean, std, count } = meanStd32(s, ids, G, floor);
  const out = new Float64Array(s.length);
  const e = f(eps);
  for (let i = 0; i < s.length; i++) {
    const g = ids[i]!;
    if (count[g]! <= 1 && singleton === 'zero') continue;
    const num = f(s[i]! - mean[g]!);
    if (num === 0) continue;
    out[i] = norm ? f(num / f(std[g]! + e)) : num;
  }
  return out;
}

/**
 * verl `group_mean_std` (float32): per dense group index, `mean = Σx / n`, two-pass
 * `var = Σ(x - mean)² / max(n - 1, 1)`, `std = sqrt(max(var, eps))`; groups with at most one value get
 * mean 0, std 1. Exact-tie groups get their value as mean (so `x - mean` is exactly 0).
 *
 * @param scores one score per row (converted to float32)
 * @param groups group id per row (any numbers or strings)
 * @param eps variance floor (verl's argument; default 1e-6)
 * @returns mean, std and count per group, in the groups' order of first appearance, as Float32Array
 * @example
 * ```ts
 * import { groupMeanStd } from 'gear-rl/diagnostics';
 *
 * const { mean, std, count, labels } = groupMeanStd([1, 0, 3, 5], [7, 7, 9, 9]);
 * console.log(labels, mean, std, count); // [7, 9]  [0.5, 4]  [0.707..., 1.414...]  [2, 2]
 * ```
 * @category Advantages
 */
export function groupMeanStd(
  scores: ArrayLike<number>, groups: ArrayLike<GroupId>, eps = 1e-6,
): { mean: Float32Array; std: Float32Array; count: Float32Array; labels: GroupId[] } {
  const r = rewardsArg(scores, 'groupMeanStd: scores');
  const idx = groupIndex(groups, 'groupMeanStd: groups', r.length);
  const floor = v.numOpt(eps, 'groupMeanStd: eps', 1e-6, { min: 0 });
  return { ...meanStd32(Float32Array.from(r), idx.ids, idx.count, floor), labels: idx.labels };
}

/**
 * Arguments of {@link grpoPassK}.
 *
 * @category Advantages
 */
export interface GrpoPassKArgs {
  /** Outcome reward per row. */
  rewards: ArrayLike<number>;
  /** Group id per row; every group needs at least two rows. */
  groups: ArrayLike<GroupId>;
  /**
   * `'group'` (default, verl `norm_adv_by_std_in_grpo: true`) divides by std + epsilon; `'none'` does not.
   *
   * @defaultValue `'group'`
   */
  scale?: 'group' | 'none';
  /**
   * Added to the std (default 1e-6).
   *
   * @defaultValue `1e-6`
   */
  epsilon?: number;
  /**
   * Accepted for a uniform signature; pass@k has no singleton groups (they throw `ERR_GROUP`).
   *
   * @defaultValue `'raw'`
   */
  singleton?: SingletonPolicy;
  /** The k of pass@k (an integer >= 1). verl's estimator credits the best row of each group whatever
   *  k is (k is the group size there), so it is validated but does not change the result.
   *
   * @defaultValue `1`
   */
  k?: number;
}

const GRPO_PASSK_OPTIONS = Object.freeze({
  ...ROW_OPTIONS,
  scale: { type: 'string', values: ['group', 'none'], default: 'group', description: 'divide by the group std, or not' },
  epsilon: epsilonOption(1e-6),
  k: { type: 'number', int: true, min: 1, default: 1, description: 'the k of pass@k (checked; the result does not depend on it)' },
} as const);

/**
 * GRPO pass@k (verl `grpo_passk`): in each group only the best row gets a non-zero advantage,
 * `r_max - r_second` (divided by std + epsilon under `scale: 'group'`); a tie for the best gives 0.
 * Groups of one row throw `ERR_GROUP` (verl raises).
 *
 * @param a rewards, groups and options
 * @returns one advantage per row (Float64Array)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // only the best row of each group gets r_max - r_second (over std + epsilon)
 * const adv = rl.grpoPassK({ rewards: [0.2, 0.9, 0.5, 1, 0, 0], groups: [0, 0, 0, 1, 1, 1], k: 3 });
 * console.log(adv);
 * ```
 * @category Advantages
 */
export function grpoPassK(a: GrpoPassKArgs): Float64Array {
  const { a: o, rewards, idx } = rowArgs(a, 'grpoPassK', GRPO_PASSK_OPTIONS);
  const { scale, epsilon: eps } = o;
  for (let g = 0; g < idx.count; g++) {
    if (idx.sizes[g]! < 2) {
      throw new GearError('ERR_GROUP',
        `grpoPassK: groups: expected at least 2 rows per group, got 1 for group ${JSON.stringify(idx.labels[g])}`);
    }
  }
  const st = groupStatsOf(rewards, idx);
  const best = new Int32Array(idx.count).fill(-1);
  const top = new Float64Array(idx.count).fill(-Infinity);
  const second = new Float64Array(idx.count).fill(-Infinity);
  for (let i = 0; i < rewards.length; i++) {
    const g = idx.ids[i]!;
    const r = rewards[i]!;
    if (r > top[g]!) {
      second[g] = top[g]!;
      top[g] = r;
      best[g] = i;
    } else if (r > second[g]!) {
      second[g] = r;
    }
  }
  const out = new Float64Array(rewards.length);
  for (let g = 0; g < idx.count; g++) {
    const num = top[g]! - second[g]!;
    out[best[g]!] = scale === 'group' ? scaled(num, st.std[g]!, eps) : num;
  }
  return out;
}

/** @internal Estimator `grpo`. */
export const grpoEstimator: AdvantageEstimatorDefinition<GrpoArgs> = {
  name: 'grpo', level: 'row', description: 'group-relative (r − mean) / (std + ε)', options: GRPO_OPTIONS, compute: grpo,
};
/** @internal Estimator `grpo_passk`. */
export const grpoPassKEstimator: AdvantageEstimatorDefinition<GrpoPassKArgs> = {
  name: 'grpo_passk', level: 'row', description: 'pass@k: only the best row of each group', options: GRPO_PASSK_OPTIONS, compute: grpoPassK,
};

/**
 * verl `as_torch_index`: maps group labels to integer indices as verl's vectorised estimators do.
 * Integer labels are kept as they are; floats within 1e-6 of an integer are rounded to it; any other
 * labels (strings, or floats that are not near-integers) are replaced by their rank among the sorted
 * distinct labels (strings by code point, as Python sorts them).
 *
 * @param labels one label per row (all numbers, or all strings)
 * @returns one integer index per row
 * @example
 * ```ts
 * import { asTorchIndex } from 'gear-rl/diagnostics';
 *
 * console.log(asTorchIndex([3, 3, 8]));         // Int32Array [3, 3, 8]: integers kept
 * console.log(asTorchIndex(['b', 'a', 'b']));   // Int32Array [1, 0, 1]: ranks of the sorted labels
 * ```
 * @category Advantages
 */
export function asTorchIndex(labels: ArrayLike<GroupId>): Int32Array {
  if (!(Array.isArray(labels) || v.isTypedArray(labels))) fail('ERR_DTYPE', 'asTorchIndex: labels', 'an array', labels);
  const n = labels.length;
  const out = new Int32Array(n);
  const allNum = Array.from({ length: n }, (_, i) => typeof labels[i] === 'number').every(Boolean);
  const allStr = Array.from({ length: n }, (_, i) => typeof labels[i] === 'string').every(Boolean);
  if (!allNum && !allStr) fail('ERR_DTYPE', 'asTorchIndex: labels', 'all numbers or all strings', labels);
  if (allNum) {
    let nearInt = true;
    for (let i = 0; i < n; i++) {
      const x = labels[i] as number;
      if (!Number.isFinite(x) || Math.abs(x - Math.round(x)) > 1e-6 || Math.abs(Math.round(x)) > 0x7fffffff) nearInt = false;
    }
    if (nearInt) {
      for (let i = 0; i < n; i++) out[i] = Math.round(labels[i] as number);
      return out;
    }
  }
  const distinct = [...new Set(Array.from({ length: n }, (_, i) => labels[i]!))];
  distinct.sort(allNum
    ? (a, b) => (a as number) - (b as number)
    : (a, b) => {
      const x = [...(a as string)].map((c) => c.codePointAt(0)!);
      const y = [...(b as string)].map((c) => c.codePointAt(0)!);
      for (let k = 0; k < Math.min(x.length, y.length); k++) if (x[k] !== y[k]) return x[k]! - y[k]!;
      return x.length - y.length;
    });
  const rank = new Map(distinct.map((d, k) => [d, k]));
  for (let i = 0; i < n; i++) out[i] = rank.get(labels[i]!)!;
  return out;
}
