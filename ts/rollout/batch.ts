/**
 * Rollout batches: friendly per-trajectory objects (groups, trajectories, steps or turns with token
 * ids, masks, rewards and anchor states) packed into the layout every estimator and loss takes
 * (`offsets`, `mask`, per-row ids). Two layouts:
 *
 * - `'step'` — one row per agent step (verl-agent / GiGPO): the row holds the step's response tokens.
 * - `'conversation'` — one row per whole multi-turn trajectory (verl multi-turn, TRL tool masks): the
 *   row holds every turn's response tokens followed by the observation / tool-output tokens that came
 *   back, the latter with mask 0.
 *
 * Token ids are copied exactly as given: nothing is re-tokenised, merged or trimmed.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import type { GroupId } from '../advantages/groups.js';

/**
 * One agent step (verl-agent) or one assistant turn (multi-turn conversation).
 *
 * @category Rollout
 */
export interface StepInput {
  /** Response token ids exactly as sampled (integers >= 0). */
  tokens: ArrayLike<number>;
  /** Per-token 0/1 (or boolean) loss mask, same length as `tokens`; all ones when omitted. Use 0 for
   *  tool-call output the model did not generate.
   *
   * @defaultValue all ones
   */
  mask?: ArrayLike<number | boolean>;
  /**
   * The step's own reward (default 0).
   *
   * @defaultValue `0`
   */
  reward?: number;
  /** The environment state the step acted from (GiGPO anchor): string, number, array or plain object. */
  anchor?: unknown;
  /** Tokens the environment or tool returned after this step. In the `'conversation'` layout they
   *  follow the step's tokens in the same row with mask 0; in the `'step'` layout they belong to the
   *  next step's prompt and are not part of any row. */
  observation?: ArrayLike<number>;
}

/**
 * One trajectory (episode / conversation).
 *
 * @category Rollout
 */
export interface TrajectoryInput {
  /**
   * Trajectory id (default: its index in `trajectories`). Must be unique.
   *
   * @defaultValue its index in `trajectories`
   */
  id?: GroupId;
  /** Id of the group (prompt / initial environment state) it was sampled for. */
  group: GroupId;
  /** Steps in time order (at least one). */
  steps: StepInput[];
  /**
   * Episode return (default: the sum of the step rewards).
   *
   * @defaultValue the sum of the step rewards
   */
  episodeReward?: number;
  /** Ground truth for this trajectory (kept as given, per row). */
  groundTruth?: unknown;
}

/**
 * A group (prompt or initial state) that trajectories refer to.
 *
 * @category Rollout
 */
export interface GroupInput {
  /** Group id (unique). */
  id: GroupId;
  /** Prompt token ids (kept as given). */
  prompt?: ArrayLike<number>;
  /** Ground truth shared by the group's trajectories (a trajectory's own `groundTruth` wins). */
  groundTruth?: unknown;
}

/**
 * Arguments of {@link buildRolloutBatch}.
 *
 * @category Rollout
 */
export interface RolloutBatchInput {
  /** Trajectories (at least one). */
  trajectories: TrajectoryInput[];
  /** Declared groups. When given, every trajectory must refer to one of them (else `ERR_GROUP`);
   *  omitted, the groups are the distinct `group` values of the trajectories. */
  groups?: GroupInput[];
  /**
   * `'step'` (default): one row per step; `'conversation'`: one row per trajectory.
   *
   * @defaultValue `'step'`
   */
  layout?: 'step' | 'conversation';
}

/**
 * A packed rollout batch. Per-row arrays have length `rows`, per-token arrays length `tokens`.
 *
 * @category Rollout
 */
export interface RolloutBatch {
  /** The layout the rows follow. */
  layout: 'step' | 'conversation';
  /** Number of rows R. */
  rows: number;
  /** Number of tokens N = `offsets[R]`. */
  tokens: number;
  /** Token ids, exactly as given. */
  tokenIds: Int32Array;
  /** Row offsets, length R + 1. */
  offsets: Int32Array;
  /** 1 = generated token (counts in losses and advantages), 0 = observation / tool output. */
  mask: Uint8Array;
  /** Counted (mask 1) tokens per row. */
  lengths: Int32Array;
  /** Group id per row (as given). */
  groups: GroupId[];
  /** Dense group index per row (in order of first appearance). */
  groupIndex: Int32Array;
  /** Trajectory id per row (as given, or the trajectory's index). */
  trajectories: GroupId[];
  /** Dense trajectory index per row (its position in the input). */
  trajectoryIndex: Int32Array;
  /** Step index within the trajectory (0 for every row of the `'conversation'` layout). */
  step: Int32Array;
  /** Per row: the step's reward (`'step'`) or the sum of the trajectory's step rewards (`'conversation'`). */
  stepRewards: Float64Array;
  /** Per row: the trajectory's episode reward. */
  episodeRewards: Float64Array;
  /** Per token: each step's reward on the step's last counted token, 0 elsewhere (verl's
   *  `token_level_rewards` for multi-turn rows). A step without counted tokens passes its reward on to
   *  the next step of the row that has one, or at the end back to the row's last counted token; a row
   *  without any counted token has nowhere to put it, and its step rewards are left out. */
  tokenRewards: Float64Array;
  /** Per row: the step's anchor state (`'step'`), or the first step's (`'conversation'`); undefined if not given. */
  anchors: unknown[];
  /** Per row: the ground truth (trajectory's, else its group's), undefined if not given. */
  groundTruth: unknown[];
  /** Prompt tokens of the declared groups that have one, packed: group k owns
   *  `promptIds[promptOffsets[k] .. promptOffsets[k+1])` (empty for groups without a prompt). */
  promptIds: Int32Array;
  /** Offsets into `promptIds`, one entry per group in dense order plus one. */
  promptOffsets: Int32Array;
  /** Per step, in the order of the `'step'` layout's rows: the step's span of this batch's tokens (its
   *  tokens, then in the `'conversation'` layout its observation), as offsets of length S + 1 for S steps;
   *  equal to `offsets` in the `'step'` layout. Per-step values (GiGPO's step advantages) go over
   *  conversation rows with `segmentBroadcast(values, batch.stepOffsets, batch.mask)`. */
  stepOffsets: Int32Array;
}

/** Token ids, each read once, checked, and copied. */
function tokenIds(x: unknown, what: string): Int32Array {
  if (!(Array.isArray(x) || v.isTypedArray(x))) fail('ERR_DTYPE', what, 'an array of token ids', x);
  if (!Array.isArray(x)) v.attached(x, what);
  const a = x as ArrayLike<unknown>;
  const n = a.length;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = a[i];
    if (typeof t !== 'number' || !Number.isInteger(t)) fail('ERR_DTYPE', `${what}[${i}]`, 'an integer token id', t);
    if (t < 0 || t > 0x7fffffff) fail('ERR_TARGET_RANGE', `${what}[${i}]`, 'a token id in [0, 2^31)', t);
    out.push(t);
  }
  return Int32Array.from(out);
}

/** A 0/1 (or boolean) mask, each value read once, checked, and copied as 0/1. */
function maskOf(x: unknown, what: string, len: number): Uint8Array | undefined {
  if (x === undefined) return undefined;
  if (!(Array.isArray(x) || v.isTypedArray(x))) fail('ERR_DTYPE', what, 'an array of 0/1 values', x);
  if (!Array.isArray(x)) v.attached(x, what);
  const a = x as ArrayLike<unknown>;
  const n = a.length;
  if (n > len) fail('ERR_SHAPE', `${what}.length`, `at most the ${len} tokens it masks`, n);
  if (n !== len) fail('ERR_SHAPE', `${what}.length`, `the token count ${len}`, n);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const m = a[i];
    if (!(m === 0 || m === 1 || m === true || m === false)) fail('ERR_OPTION', `${what}[${i}]`, '0, 1, true or false', m);
    out[i] = m ? 1 : 0;
  }
  return out;
}

function finite(x: unknown, what: string, dflt: number): number {
  if (x === undefined) return dflt;
  if (typeof x !== 'number') fail('ERR_DTYPE', what, 'a number', x);
  if (!Number.isFinite(x)) fail('ERR_NON_FINITE', what, 'a finite number', x);
  return x;
}

function idArg(x: unknown, what: string): GroupId {
  if (typeof x === 'string' || (typeof x === 'number' && !Number.isNaN(x))) return x;
  return fail('ERR_GROUP', what, 'a number or string id', x);
}

/** A trajectory read once: every field, every step and every step's arrays (checked and copied). */
interface Traj { id: GroupId; group: GroupId; steps: Step[]; episodeReward: number | undefined; groundTruth: unknown }
/** A step read once. */
interface Step { tokens: Int32Array; mask: Uint8Array | undefined; reward: number; anchor: unknown; observation: Int32Array | undefined }
/** A declared group read once. */
interface Group { id: GroupId; prompt: Int32Array | undefined; groundTruth: unknown }

/** Each element of an array-valued argument read once (a hole reads as undefined and is refused by the caller's checks). */
function elements(x: unknown[]): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < x.length; i++) out.push(x[i]);
  return out;
}

/** Stage 2: reads and checks one trajectory and its steps (token ids and masks copied). */
function readTrajectory(t: unknown, ti: number): Traj {
  const w = `trajectories[${ti}]`;
  if (typeof t !== 'object' || t === null) fail('ERR_DTYPE', w, 'a trajectory object', t);
  v.knownKeys(t, w, ['id', 'group', 'steps', 'episodeReward', 'groundTruth']);
  const { id: id0, group: g0, steps: steps0, episodeReward, groundTruth } = t as TrajectoryInput;
  const id = id0 === undefined ? ti : idArg(id0, `${w}.id`);
  const group = idArg(g0, `${w}.group`);
  if (!Array.isArray(steps0) || steps0.length === 0) fail('ERR_SHAPE', `${w}.steps`, 'a non-empty array of steps', steps0);
  const ep = episodeReward === undefined ? undefined : finite(episodeReward, `${w}.episodeReward`, 0);
  const steps = elements(steps0).map((s, si): Step => {
    const ws = `${w}.steps[${si}]`;
    if (typeof s !== 'object' || s === null) fail('ERR_DTYPE', ws, 'a step object', s);
    v.knownKeys(s, ws, ['tokens', 'mask', 'reward', 'anchor', 'observation']);
    const { tokens: tk, mask, reward, anchor, observation } = s as StepInput;
    const tokens = tokenIds(tk, `${ws}.tokens`);
    return {
      tokens, mask: maskOf(mask, `${ws}.mask`, tokens.length), reward: finite(reward, `${ws}.reward`, 0), anchor,
      observation: observation === undefined ? undefined : tokenIds(observation, `${ws}.observation`),
    };
  });
  return { id, group, steps, episodeReward: ep, groundTruth };
}

/** Declared groups by id, with their index in `input.groups`. */
interface Declared {
  byId: Map<GroupId, number>;
  list: Group[];
}

/** Stage 1: the declared groups (unique ids, valid prompts). */
function declaredGroups(groups: unknown): Declared {
  const declared = new Map<GroupId, number>();
  const groupList: Group[] = [];
  if (groups !== undefined) {
    if (!Array.isArray(groups)) fail('ERR_DTYPE', 'buildRolloutBatch: groups', 'an array of groups', groups);
    elements(groups).forEach((g, k) => {
      if (typeof g !== 'object' || g === null) fail('ERR_DTYPE', `groups[${k}]`, 'a group object', g);
      v.knownKeys(g, `groups[${k}]`, ['id', 'prompt', 'groundTruth']);
      const { id: id0, prompt, groundTruth } = g as GroupInput;
      const id = idArg(id0, `groups[${k}].id`);
      if (declared.has(id)) fail('ERR_GROUP', `groups[${k}].id`, 'a unique group id', id);
      declared.set(id, k);
      groupList.push({ id, prompt: prompt === undefined ? undefined : tokenIds(prompt, `groups[${k}].prompt`), groundTruth });
    });
  }
  return { byId: declared, list: groupList };
}

/** Stage 3: unique trajectory ids, declared groups, and the rows and tokens of the layout. */
function sizeBatch(
  trajs: Traj[], layout: 'step' | 'conversation', groupsDeclared: boolean, declared: Declared,
): { rows: number; tokens: number; steps: number } {
  const seenTraj = new Set<GroupId>();
  let rows = 0;
  let steps = 0;
  let tokens = 0;
  trajs.forEach((t, ti) => {
    const w = `trajectories[${ti}]`;
    const id = t.id;
    if (seenTraj.has(id)) fail('ERR_GROUP', `${w}.id`, 'a unique trajectory id', id);
    seenTraj.add(id);
    const g = t.group;
    if (groupsDeclared && !declared.byId.has(g)) {
      fail('ERR_GROUP', `${w}.group`, `one of the declared group ids`, g);
    }
    let convTokens = 0;
    steps += t.steps.length;
    t.steps.forEach((s, si) => {
      const ws = `${w}.steps[${si}]`;
      const toks = s.tokens;
      const obs = s.observation;
      if (layout === 'step') {
        if (toks.length === 0) fail('ERR_SHAPE', `${ws}.tokens.length`, 'at least 1 (a row cannot be empty)', 0);
        rows++;
        tokens += toks.length;
      } else {
        convTokens += toks.length + (obs ? obs.length : 0);
      }
    });
    if (layout === 'conversation') {
      if (convTokens === 0) fail('ERR_SHAPE', `${w}: tokens`, 'at least 1 (a row cannot be empty)', 0);
      rows++;
      tokens += convTokens;
    }
    if (tokens > 0x7fffffff) fail('ERR_SHAPE', 'buildRolloutBatch: total tokens', 'at most 2^31 - 1', tokens);
  });
  return { rows, tokens, steps };
}

/** Stage 4: dense group indices, declared order first, then first appearance. */
function groupOrder(declared: Declared, trajs: Traj[]): Map<GroupId, number> {
  const gIndex = new Map<GroupId, number>();
  for (const g of declared.list) gIndex.set(g.id, gIndex.size);
  for (const t of trajs) if (!gIndex.has(t.group)) gIndex.set(t.group, gIndex.size);
  return gIndex;
}

/** Stage 5: the zero-filled batch arrays. */
function allocBatch(layout: 'step' | 'conversation', rows: number, tokens: number, groups: number, steps: number): RolloutBatch {
  return {
    layout, rows, tokens,
    tokenIds: new Int32Array(tokens), offsets: new Int32Array(rows + 1), mask: new Uint8Array(tokens),
    lengths: new Int32Array(rows), groups: new Array(rows), groupIndex: new Int32Array(rows),
    trajectories: new Array(rows), trajectoryIndex: new Int32Array(rows), step: new Int32Array(rows),
    stepRewards: new Float64Array(rows), episodeRewards: new Float64Array(rows), tokenRewards: new Float64Array(tokens),
    anchors: new Array(rows), groundTruth: new Array(rows),
    promptIds: new Int32Array(0), promptOffsets: new Int32Array(groups + 1), stepOffsets: new Int32Array(steps + 1),
  };
}

/** Writes tokens row by row and places each step's reward on its last counted token. */
class RowWriter {
  /** Current row. */
  r = 0;
  /** Next token. */
  n = 0;
  /** Last counted token of the current row. */
  private lastCounted = -1;
  /** Reward of steps without counted tokens, carried to the next one that has some. */
  private pending = 0;

  constructor(private readonly out: RolloutBatch) {}

  /** Appends tokens (mask 0 throughout when `fixed` is 0); returns how many count. */
  put(toks: ArrayLike<number>, mask: Uint8Array | undefined, fixed?: 0): number {
    const out = this.out;
    let c = 0;
    for (let i = 0; i < toks.length; i++) {
      out.tokenIds[this.n] = toks[i]!;
      const m = fixed === 0 ? 0 : mask === undefined ? 1 : mask[i] ? 1 : 0;
      if (m) this.lastCounted = this.n;
      out.mask[this.n++] = m;
      c += m;
    }
    return c;
  }

  /** Places a step's reward (plus any carried over) on the step's last counted token. */
  reward(counted: number, x: number): void {
    if (counted > 0) {
      this.out.tokenRewards[this.lastCounted] += this.pending + x;
      this.pending = 0;
    } else {
      this.pending += x;
    }
  }

  /** Ends the row: a reward still carried goes back to the row's last counted token, if it has one. */
  endRow(): void {
    if (this.pending !== 0 && this.lastCounted >= this.out.offsets[this.r]!) this.out.tokenRewards[this.lastCounted] += this.pending;
    this.pending = 0;
    this.out.offsets[++this.r] = this.n;
  }
}

/** Stage 6: packs every trajectory's rows: ids, tokens, masks, rewards, anchors, ground truth. */
function packRows(
  out: RolloutBatch, trajs: Traj[], layout: 'step' | 'conversation', gIndex: Map<GroupId, number>, declared: Declared,
): void {
  const w = new RowWriter(out);
  let step = 0;
  trajs.forEach((t, ti) => {
    const id = t.id;
    const gi = gIndex.get(t.group)!;
    const dg = declared.byId.has(t.group) ? declared.list[declared.byId.get(t.group)!] : undefined;
    const truth = t.groundTruth !== undefined ? t.groundTruth : dg?.groundTruth;
    let sum = 0;
    for (const s of t.steps) sum += s.reward;
    const episode = t.episodeReward ?? sum;
    const row = (step: number, reward: number, anchor: unknown) => {
      const r = w.r;
      out.groups[r] = t.group;
      out.groupIndex[r] = gi;
      out.trajectories[r] = id;
      out.trajectoryIndex[r] = ti;
      out.step[r] = step;
      out.stepRewards[r] = reward;
      out.episodeRewards[r] = episode;
      out.anchors[r] = anchor;
      out.groundTruth[r] = truth;
    };
    if (layout === 'step') {
      t.steps.forEach((s, si) => {
        row(si, s.reward, s.anchor);
        const c = w.put(s.tokens, s.mask);
        out.lengths[w.r] = c;
        w.reward(c, s.reward);
        w.endRow();
        out.stepOffsets[++step] = w.n;
      });
    } else {
      row(0, sum, t.steps[0]!.anchor);
      let c = 0;
      for (const s of t.steps) {
        const k = w.put(s.tokens, s.mask);
        w.reward(k, s.reward);
        c += k;
        if (s.observation) w.put(s.observation, undefined, 0);
        out.stepOffsets[++step] = w.n;
      }
      out.lengths[w.r] = c;
      w.endRow();
    }
  });
}

/** Stage 7: the prompt tokens of the declared groups, packed in dense group order. */
function packPrompts(out: RolloutBatch, declared: Declared, gIndex: Map<GroupId, number>): void {
  let pn = 0;
  for (const g of declared.list) pn += g.prompt ? g.prompt.length : 0;
  out.promptIds = new Int32Array(pn);
  let p = 0;
  for (const [gid, k] of gIndex) {
    const g = declared.byId.has(gid) ? declared.list[declared.byId.get(gid)!] : undefined;
    if (g?.prompt) for (let i = 0; i < g.prompt.length; i++) out.promptIds[p++] = g.prompt[i]!;
    out.promptOffsets[k + 1] = p;
  }
}

/**
 * Packs trajectories into a {@link RolloutBatch}. Validates everything: unknown group references and
 * duplicate ids (`ERR_GROUP`), masks whose length differs from their tokens (`ERR_SHAPE`), empty rows
 * (`ERR_SHAPE`), non-integer or negative token ids (`ERR_DTYPE` / `ERR_TARGET_RANGE`), non-finite
 * rewards (`ERR_NON_FINITE`).
 *
 * @param input trajectories, optional declared groups, layout
 * @returns the packed batch
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two agent episodes for the same task; each step: the tokens the policy sampled, then the tool's reply
 * const batch = rl.buildRolloutBatch({
 *   trajectories: [
 *     { group: 'task-1', steps: [
 *       { tokens: [11, 12, 13], anchor: 'start', observation: [90, 91] },
 *       { tokens: [14, 15], anchor: 'after search', reward: 1 },
 *     ] },
 *     { group: 'task-1', steps: [{ tokens: [21, 22], anchor: 'start', reward: 0 }] },
 *   ],
 *   layout: 'conversation', // one row per trajectory, tool tokens masked; 'step' = one row per step
 * });
 * console.log(batch.rows, batch.offsets, batch.mask); // 2  [0, 7, 9]  [1, 1, 1, 0, 0, 1, 1, 1, 1]
 * const adv = rl.grpo({ rewards: batch.episodeRewards, groups: batch.groups });
 * const perToken = rl.segmentBroadcast(adv, batch.offsets, batch.mask);
 * console.log(perToken);
 * ```
 * @category Rollout
 */
export function buildRolloutBatch(input: RolloutBatchInput): RolloutBatch {
  if (typeof input !== 'object' || input === null) fail('ERR_OPTION', 'buildRolloutBatch', 'an options object', input);
  v.knownKeys(input, 'buildRolloutBatch', ['trajectories', 'groups', 'layout']);
  // The whole input is read once, field by field and element by element, and copied (token ids and
  // masks checked as they are copied): the passes below never read the caller's objects again.
  const { trajectories: trajs0, groups, layout: layout0 } = input;
  const layout = v.enumOpt(layout0, 'buildRolloutBatch: layout', ['step', 'conversation'] as const, 'step');
  if (!Array.isArray(trajs0) || trajs0.length === 0) {
    fail('ERR_SHAPE', 'buildRolloutBatch: trajectories', 'a non-empty array of trajectories', trajs0);
  }
  const declared = declaredGroups(groups);
  const trajs = elements(trajs0).map(readTrajectory);
  const { rows, tokens, steps } = sizeBatch(trajs, layout, groups !== undefined, declared);
  const gIndex = groupOrder(declared, trajs);
  const out = allocBatch(layout, rows, tokens, gIndex.size, steps);
  packRows(out, trajs, layout, gIndex, declared);
  packPrompts(out, declared, gIndex);
  return out;
}

/**
 * Counted (mask 1) tokens per packed row — the `lengths` that OPO, REINFORCE++-baseline and GDPO take.
 *
 * @param offsets packed-row offsets, length R + 1
 * @param mask optional 0/1 mask of length N (all ones when omitted)
 * @returns Int32Array of length R
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const lengths = rl.rowLengths(Int32Array.of(0, 3, 5), Uint8Array.of(1, 0, 1, 1, 1));
 * console.log(lengths); // Int32Array [2, 2]
 * ```
 * @category Rollout
 */
export function rowLengths(offsets: Int32Array, mask?: Uint8Array): Int32Array {
  const R = v.offsets(offsets, 'offsets');
  const m = v.optMask(mask, 'mask', offsets[R]!);
  const out = new Int32Array(R);
  for (let r = 0; r < R; r++) {
    if (!m) out[r] = offsets[r + 1]! - offsets[r]!;
    else for (let t = offsets[r]!; t < offsets[r + 1]!; t++) out[r] += m[t]!;
  }
  return out;
}

/**
 * Places one value per row on the row's last counted token (how verl and verl-agent put an outcome
 * reward into `token_level_rewards`); every other token gets 0. A row without counted tokens gets
 * nothing.
 *
 * @param values one value per row
 * @param offsets packed-row offsets, length R + 1
 * @param mask optional 0/1 mask of length N
 * @returns per-token values (Float64Array, length N)
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // outcome rewards onto each row's last generated token (verl's token_level_rewards)
 * const tokenRewards = rl.lastTokenValues([1, 0.5], Int32Array.of(0, 3, 5), Uint8Array.of(1, 1, 0, 1, 1));
 * console.log(tokenRewards); // Float64Array [0, 1, 0, 0, 0.5]
 * ```
 * @category Rollout
 */
export function lastTokenValues(values: ArrayLike<number>, offsets: Int32Array, mask?: Uint8Array): Float64Array {
  const read = v.readList(values); // its getters run before the offsets and the mask are checked
  const R = v.offsets(offsets, 'offsets');
  const vals = v.numArray(read, 'values', R);
  const N = offsets[R]!;
  const m = v.optMask(mask, 'mask', N);
  const out = new Float64Array(N);
  for (let r = 0; r < R; r++) {
    for (let t = offsets[r + 1]! - 1; t >= offsets[r]!; t--) {
      if (!m || m[t]) {
        out[t] = vals[r]!;
        break;
      }
    }
  }
  return out;
}
