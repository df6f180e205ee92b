/**
 * GiGPO (verl-agent `gigpo/core_gigpo.py`): episode-level group advantage plus a step-level advantage
 * over anchor-state groups, for the one-row-per-agent-step layout.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { anchorIds } from './anchors.js';
import { type AdvantageEstimatorDefinition, estimatorArgs } from './registry.js';
import { readArgs } from '../registry/schema.js';
import { DATA, OPT_DATA, epsilonOption } from './row_args.js';
import { similarityClusters } from './difflib.js';
import {
  type GroupId, type GroupIndex, type GroupStats, groupIndex, groupStatsOf, rewardsArg, scaledDenominators,
  singletonDenominator,
} from './groups.js';

/**
 * GiGPO normalisation mode (used at both levels).
 *
 * @category Advantages
 */
export type GigpoMode = 'mean_norm' | 'mean_std_norm';

/**
 * Arguments of {@link gigpo}.
 *
 * @category Advantages
 */
export interface GigpoArgs {
  /** Per row (one row = one agent step): the return of the row's whole episode. */
  episodeRewards: ArrayLike<number>;
  /** Per row: the step's own reward; discounted within the trajectory with `gamma` (float32, as
   *  verl-agent). Give this or `stepReturns`. */
  stepRewards?: ArrayLike<number>;
  /** Per row: already discounted step returns (used as they are instead of `stepRewards`). */
  stepReturns?: ArrayLike<number>;
  /** Trajectory id per row; a trajectory's rows are in time order and share one group. */
  trajectories: ArrayLike<GroupId>;
  /** Episode group id per row (rollouts started from the same initial state). */
  groups: ArrayLike<GroupId>;
  /** Anchor state per row: the observation the step acted from (strings, numbers, arrays, plain objects). */
  anchors: ArrayLike<unknown>;
  /**
   * Discount of the step returns (default 1.0 as verl-agent's config; its scripts use 0.95).
   *
   * @defaultValue `1`
   */
  gamma?: number;
  /**
   * Weight of the step-level advantage (default 1.0).
   *
   * @defaultValue `1`
   */
  stepWeight?: number;
  /**
   * `'mean_norm'` (default): subtract the group mean; `'mean_std_norm'`: also divide by std + epsilon.
   *
   * @defaultValue `'mean_norm'`
   */
  mode?: GigpoMode;
  /**
   * Added to the std (default 1e-6).
   *
   * @defaultValue `1e-6`
   */
  epsilon?: number;
  /** Default true: every step row counts in its episode group's statistics (GiGPO); false: one value
   *  per trajectory (its first row).
   *
   * @defaultValue `true`
   */
  crossStepStats?: boolean;
  /** Group text anchors by similarity instead of equality: `SequenceMatcher.ratio() >= threshold`,
   *  with `0 < threshold < 1`. */
  similarity?: { threshold: number };
}

/**
 * Result of {@link gigpo}.
 *
 * @category Advantages
 */
export interface GigpoResult {
  /** Per row: `episode + stepWeight · step`. */
  advantages: Float64Array;
  /** Per row: the episode-level advantage. */
  episode: Float64Array;
  /** Per row: the step-level advantage. */
  step: Float64Array;
  /** Per row: index of the first row of its step group. */
  stepGroups: Int32Array;
  /** Per row: the discounted step returns the step level used (float32 values). */
  stepReturns: Float32Array;
  /** How much anchor states repeat. */
  diagnostics: {
    /** Step-group size -> number of step groups of that size. */
    groupSizeHistogram: Record<number, number>;
    /** Share of rows whose step group has size 1 (0 for an empty batch). */
    singletonShare: number;
  };
}

/**
 * verl-agent `compute_step_discounted_returns`: within each trajectory (rows in batch order = time
 * order), `G_t = r_t + γ G_{t+1}` backwards. Like verl-agent (NumPy float32 rewards, a Python-float
 * running sum), each reward is rounded to float32, the running return is kept in float64, and each
 * stored return is rounded to float32.
 *
 * @param stepRewards reward per row
 * @param trajectories trajectory id per row
 * @param gamma discount in [0, 1]
 * @returns the discounted return per row (Float32Array)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const returns = rl.discountedStepReturns([0, 0, 1, 2], ['a', 'a', 'a', 'b'], 0.5);
 * console.log(returns); // Float32Array [0.25, 0.5, 1, 2]
 * ```
 * @category Advantages
 */
export function discountedStepReturns(stepRewards: ArrayLike<number>, trajectories: ArrayLike<GroupId>, gamma = 1): Float32Array {
  const r = rewardsArg(stepRewards, 'discountedStepReturns: stepRewards');
  const t = groupIndex(trajectories, 'discountedStepReturns: trajectories', r.length);
  const g = v.numOpt(gamma, 'discountedStepReturns: gamma', 1, { min: 0, max: 1 });
  return discount(r, t.ids, t.count, g);
}

function discount(r: ArrayLike<number>, traj: Int32Array, T: number, gamma: number): Float32Array {
  const out = new Float32Array(r.length);
  const run = new Float64Array(T);
  for (let i = r.length - 1; i >= 0; i--) {
    const t = traj[i]!;
    const x = Math.fround(r[i]!) + gamma * run[t]!;
    run[t] = x;
    out[i] = x;
  }
  return out;
}

/**
 * verl-agent `build_step_group` as dense step groups: within each episode group, rows with equal
 * anchor states (exact mode) or similar text anchors (similarity mode) share a step group.
 *
 * @param anchors anchor state per row
 * @param groups episode group id per row
 * @param similarity optional `{ threshold }` in (0, 1) for text anchors
 * @returns per row the index of the first row of its step group
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const anchors = ['look', 'go north', 'look', 'go north!'];
 * console.log(rl.stepGroups(anchors, [0, 0, 0, 0]));                       // Int32Array [0, 1, 0, 3]
 * console.log(rl.stepGroups(anchors, [0, 0, 0, 0], { threshold: 0.9 })); // Int32Array [0, 1, 0, 1]
 * ```
 * @category Advantages
 */
export function stepGroups(anchors: ArrayLike<unknown>, groups: ArrayLike<GroupId>, similarity?: { threshold: number }): Int32Array {
  if (!(Array.isArray(anchors) || v.isTypedArray(anchors))) fail('ERR_DTYPE', 'stepGroups: anchors', 'an array', anchors);
  if (!Array.isArray(anchors)) v.attached(anchors, 'stepGroups: anchors');
  const states = v.readList(anchors) as ArrayLike<unknown>;  // each read once
  const idx = groupIndex(groups, 'stepGroups: groups', states.length);
  return buildStepGroups(states, idx.ids, idx.count, similarityArg(similarity, 'stepGroups'), 'stepGroups');
}

function similarityArg(s: unknown, fn: string): number | undefined {
  if (s === undefined) return undefined;
  const o = readArgs(s, `${fn}: similarity`, ['threshold']);
  return v.numOpt(o.threshold, `${fn}: similarity.threshold`, NaN, { min: 0, max: 1, minOpen: true, maxOpen: true });
}

function buildStepGroups(anchors: ArrayLike<unknown>, gids: Int32Array, G: number, threshold: number | undefined, fn: string): Int32Array {
  const R = anchors.length;
  const first = new Int32Array(R);
  if (threshold === undefined) return exactStepGroups(anchorIds(anchors, `${fn}: anchors`), gids, G, first);
  const rowsOf: number[][] = Array.from({ length: G }, () => []);
  for (let i = 0; i < R; i++) {
    if (typeof anchors[i] !== 'string') {
      fail('ERR_DTYPE', `${fn}: anchors[${i}]`, 'a string (similarity grouping compares text observations)', anchors[i]);
    }
    rowsOf[gids[i]!]!.push(i);
  }
  for (const rows of rowsOf) {
    const texts = rows.map((i) => anchors[i] as string);
    const cl = similarityClusters(texts, threshold);
    const clusterFirst: number[] = [];
    rows.forEach((row, k) => {
      const c = cl[k]!;
      if (clusterFirst[c] === undefined) clusterFirst[c] = row;
      first[row] = clusterFirst[c]!;
    });
  }
  return first;
}

/**
 * Exact step groups from dense anchor ids: `first[i]` = first row with the same state in the same
 * episode group. A state usually occurs in one episode group only: remember the group and first row
 * of each state's first occurrence, and fall back to a map keyed by (state, group) for the others.
 */
function exactStepGroups(aid: Int32Array, gids: Int32Array, G: number, first: Int32Array): Int32Array {
  const R = aid.length;
  let A = 0;
  for (let i = 0; i < R; i++) if (aid[i]! >= A) A = aid[i]! + 1;
  const firstGroup = new Int32Array(A).fill(-1);
  const firstRow = new Int32Array(A);
  let other: Map<number, number> | undefined;
  for (let i = 0; i < R; i++) {
    const a = aid[i]!;
    const g = gids[i]!;
    if (firstGroup[a] === -1) {
      firstGroup[a] = g;
      firstRow[a] = i;
      first[i] = i;
    } else if (firstGroup[a] === g) {
      first[i] = firstRow[a]!;
    } else {
      other ??= new Map();
      const key = a * G + g;
      const f = other.get(key);
      if (f === undefined) {
        other.set(key, i);
        first[i] = i;
      } else {
        first[i] = f;
      }
    }
  }
  return first;
}

/**
 * The {@link GroupIndex} of step groups given as first rows (what `groupIndex(first)` returns, without
 * its lookup table): a row that is its own first row opens the next group, in row order, which is
 * the order of first appearance.
 */
function firstRowIndex(first: Int32Array): GroupIndex {
  const R = first.length;
  const ids = new Int32Array(R);
  const sizes = new Int32Array(R);
  const firstRow = new Int32Array(R);
  let G = 0;
  for (let i = 0; i < R; i++) {
    const f = first[i]!;
    const g = f === i ? G++ : ids[f]!;
    if (f === i) firstRow[g] = i;
    ids[i] = g;
    sizes[g]!++;
  }
  const rows = firstRow.slice(0, G);
  const labels: GroupId[] = Array.from(rows);
  return { ids, count: G, sizes: sizes.slice(0, G), firstRow: rows, labels };
}

/** First row whose trajectory already appeared in another episode group, or -1. */
function trajectoryConflict(traj: Int32Array, T: number, gids: Int32Array): number {
  const trajGroup = new Int32Array(T).fill(-1);
  for (let i = 0; i < traj.length; i++) {
    const t = traj[i]!;
    if (trajGroup[t] === -1) trajGroup[t] = gids[i]!;
    else if (trajGroup[t] !== gids[i]) return i;
  }
  return -1;
}

/**
 * Episode-level advantages: a group with a single counted value keeps the raw score (divided by
 * float32(1 + epsilon) when normalising by the std, as verl-agent).
 */
function episodeLevel(s: Float64Array, ids: Int32Array, st: GroupStats, std: boolean, eps: number): Float64Array {
  const R = s.length;
  const out = new Float64Array(R);
  const single = singletonDenominator(eps);
  const count = st.count;
  const mean = st.mean;
  const den = scaledDenominators(st.std, eps);
  for (let i = 0; i < R; i++) {
    const g = ids[i]!;
    if (count[g] === 1) out[i] = std ? s[i]! / single : s[i]!;
    else {
      const d = s[i]! - mean[g]!;
      out[i] = !std ? d : d === 0 ? 0 : d / den[g]!;
    }
  }
  return out;
}

/** Step-level advantages: a step group of one row gets 0. */
function stepLevel(returns: Float32Array, sidx: GroupIndex, st: GroupStats, std: boolean, eps: number): Float64Array {
  const R = returns.length;
  const out = new Float64Array(R);
  const ids = sidx.ids;
  const sizes = sidx.sizes;
  const mean = st.mean;
  const den = scaledDenominators(st.std, eps);
  for (let i = 0; i < R; i++) {
    const g = ids[i]!;
    if (sizes[g] === 1) continue;
    const d = returns[i]! - mean[g]!;
    out[i] = !std ? d : d === 0 ? 0 : d / den[g]!;
  }
  return out;
}

/** `episode + w · step` per row. */
function combine(episode: Float64Array, step: Float64Array, w: number): Float64Array {
  const out = new Float64Array(episode.length);
  for (let i = 0; i < out.length; i++) out[i] = episode[i]! + w * step[i]!;
  return out;
}

/** Step-group size -> number of step groups of that size, and the number of rows in singletons. */
function sizeHistogram(sizes: Int32Array): { histogram: Record<number, number>; singletonRows: number } {
  let max = 0;
  for (let g = 0; g < sizes.length; g++) if (sizes[g]! > max) max = sizes[g]!;
  const counts = new Int32Array(max + 1);
  for (let g = 0; g < sizes.length; g++) counts[sizes[g]!]!++;
  const histogram: Record<number, number> = {};
  for (let n = 1; n <= max; n++) if (counts[n]) histogram[n] = counts[n]!;
  return { histogram, singletonRows: counts[1] ?? 0 };
}

const GIGPO_OPTIONS = Object.freeze({
  episodeRewards: DATA, stepRewards: OPT_DATA, stepReturns: OPT_DATA, trajectories: DATA, groups: DATA, anchors: DATA,
  gamma: { type: 'number', min: 0, max: 1, default: 1, description: 'step-return discount' },
  stepWeight: { type: 'number', finite: true, default: 1, description: 'weight of the step-level advantage' },
  mode: { type: 'string', values: ['mean_norm', 'mean_std_norm'], default: 'mean_norm', description: 'centre, or centre and scale' },
  epsilon: epsilonOption(1e-6),
  crossStepStats: { type: 'boolean', default: true, description: 'every step row counts in its episode group' },
  similarity: { type: 'object', description: '{ threshold }: text anchors grouped by similarity' },
} as const);

/**
 * GiGPO advantages. Episode level: per episode group, `A^E = s - mean` (`mean_norm`) or
 * `(s - mean) / (std + epsilon)` (`mean_std_norm`), a group with a single value keeps its raw score
 * (divided by float32(1 + epsilon) under `mean_std_norm`, as verl-agent). Step level: the discounted
 * step returns normalised the same way over anchor-state step groups, a step group of one row gets 0.
 * `A = A^E + stepWeight · A^S`. Exact-tie groups give exactly 0 at either level.
 *
 * @param a per-row rewards, ids and anchors, and options
 * @returns advantages, both levels, step groups, step returns and step-group diagnostics
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // one row per agent step: two episodes (trajectories t0, t1) from the same start state (group g)
 * const r = rl.gigpo({
 *   episodeRewards: [1, 1, 0, 0],
 *   stepRewards: [0, 1, 0, 0],
 *   trajectories: ['t0', 't0', 't1', 't1'],
 *   groups: ['g', 'g', 'g', 'g'],
 *   anchors: ['start', 'room A', 'start', 'room B'], // the observation each step acted from
 *   gamma: 0.95,
 * });
 * console.log(r.advantages, r.episode, r.step, r.diagnostics.singletonShare);
 * ```
 * @category Advantages
 */
export function gigpo(a: GigpoArgs): GigpoResult {
  const fn = 'gigpo';
  const o = estimatorArgs(GIGPO_OPTIONS, a, fn);
  const { mode, gamma, stepWeight: w, epsilon: eps } = o;
  const threshold = similarityArg(o.similarity, fn);
  const s = rewardsArg(o.episodeRewards, `${fn}: episodeRewards`);
  const R = s.length;
  const idx = groupIndex(o.groups as ArrayLike<GroupId>, `${fn}: groups`, R);
  const traj = groupIndex(o.trajectories as ArrayLike<GroupId>, `${fn}: trajectories`, R);
  if (!(Array.isArray(o.anchors) || v.isTypedArray(o.anchors))) fail('ERR_DTYPE', `${fn}: anchors`, 'an array', o.anchors);
  if (!Array.isArray(o.anchors)) v.attached(o.anchors, `${fn}: anchors`);
  const anchors = v.readList(o.anchors) as ArrayLike<unknown>;  // each state read once
  if (anchors.length !== R) fail('ERR_SHAPE', `${fn}: anchors.length`, `the row count ${R}`, anchors.length);
  const cross = o.crossStepStats;

  // A trajectory belongs to one episode group.
  const bad = trajectoryConflict(traj.ids, traj.count, idx.ids);
  if (bad >= 0) {
    const t = traj.ids[bad]!;
    throw new GearError('ERR_GROUP', `${fn}: trajectories[${bad}]: expected trajectory ${JSON.stringify(traj.labels[t])} ` +
      `to stay in group ${JSON.stringify(idx.labels[idx.ids[traj.firstRow[t]!]!])}, got group ${JSON.stringify(idx.labels[idx.ids[bad]!])}`);
  }

  let returns: Float32Array;
  if (o.stepReturns !== undefined) {
    if (o.stepRewards !== undefined) fail('ERR_OPTION', `${fn}: stepReturns`, 'not given together with stepRewards', 'both');
    returns = Float32Array.from(rewardsArg(o.stepReturns, `${fn}: stepReturns`, R));
  } else {
    if (o.stepRewards === undefined) fail('ERR_OPTION', `${fn}: stepRewards`, 'per-row step rewards (or stepReturns)', undefined);
    returns = discount(rewardsArg(o.stepRewards, `${fn}: stepRewards`, R), traj.ids, traj.count, gamma);
  }

  // Episode level.
  const contributes = new Uint8Array(cross ? 0 : R);
  if (!cross) {
    const seen = new Uint8Array(traj.count);
    for (let i = 0; i < R; i++) {
      if (!seen[traj.ids[i]!]) {
        seen[traj.ids[i]!] = 1;
        contributes[i] = 1;
      }
    }
  }
  let est;
  if (cross) est = groupStatsOf(s, idx);
  else {
    const masked = new Float64Array(R);
    for (let i = 0; i < R; i++) masked[i] = contributes[i] ? s[i]! : NaN;
    est = groupStatsOf(masked, idx, { skipNaN: true });
  }
  const std = mode === 'mean_std_norm';
  const episode = episodeLevel(s, idx.ids, est, std, eps);

  // Step level.
  const stepGroupsOut = buildStepGroups(anchors, idx.ids, idx.count, threshold, fn);
  const sidx = firstRowIndex(stepGroupsOut);
  const step = stepLevel(returns, sidx, groupStatsOf(returns, sidx), std, eps);
  const { histogram, singletonRows } = sizeHistogram(sidx.sizes);
  const advantages = combine(episode, step, w);
  return {
    advantages, episode, step, stepGroups: stepGroupsOut, stepReturns: returns,
    diagnostics: { groupSizeHistogram: histogram, singletonShare: R ? singletonRows / R : 0 },
  };
}

/** @internal Estimator `gigpo`. */
export const gigpoEstimator: AdvantageEstimatorDefinition<GigpoArgs> = {
  name: 'gigpo', level: 'row', description: 'GiGPO episode + anchor-state step advantages (row = agent step)',
  options: GIGPO_OPTIONS, compute: gigpo,
};
