/**
 * Packs parsed server sequences into the rollout layout of {@link buildRolloutBatch} (same offsets,
 * mask, token ids and rewards), adding the per-token log-probs and sparse top-k the server returned —
 * the student's and, when given, the teacher's.
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { buildRolloutBatch } from '../rollout/batch.js';
import type { RolloutBatch, StepInput, TrajectoryInput } from '../rollout/batch.js';
import type { GroupId } from '../advantages/groups.js';
import { isObj, wasParsed } from './common.js';
import type { ServerSequence, SparseTopK } from './common.js';
import { describeMode, readLogprobMode } from './mode.js';
import type { LogprobMode } from './mode.js';

/**
 * An assistant turn: what the server generated (and, optionally, the teacher's scores of it).
 * @category Server ingestion
 */
export interface ServerAssistantTurn {
  /** `'assistant'`. */
  role: 'assistant';
  /** The parsed sequence (from one of the parsers). Its tokens count in the loss (mask 1). */
  response: ServerSequence;
  /** The teacher's scores of the same tokens (e.g. {@link parseVllmPromptLogprobs}); ids must match. */
  teacher?: ServerSequence;
  /**
   * The turn's reward (default 0).
   *
   * @defaultValue `0`
   */
  reward?: number;
  /** The environment state the turn acted from (GiGPO anchor). */
  anchor?: unknown;
}

/**
 * A turn the policy did not generate (tool output, observation, user message): masked out (mask 0).
 * @category Server ingestion
 */
export interface ServerContextTurn {
  /** Who produced the tokens. */
  role: 'tool' | 'observation' | 'user' | 'system';
  /** The tokens, exactly as they enter the model's context. */
  tokens: ArrayLike<number>;
}

/**
 * A turn of a conversation.
 * @category Server ingestion
 */
export type ServerTurn = ServerAssistantTurn | ServerContextTurn;

/**
 * One trajectory built from server responses.
 * @category Server ingestion
 */
export interface ServerTrajectory {
  /**
   * Trajectory id (default: its index).
   *
   * @defaultValue its index in `trajectories`
   */
  id?: GroupId;
  /** The group (prompt / initial state) it was sampled for. */
  group: GroupId;
  /** Turns in order; at least one assistant turn. */
  turns: ServerTurn[];
  /**
   * Episode return (default: the sum of the turn rewards).
   *
   * @defaultValue the sum of the turn rewards
   */
  episodeReward?: number;
  /** Ground truth, kept as given. */
  groundTruth?: unknown;
}

/**
 * Arguments of {@link packServerRollouts}.
 * @category Server ingestion
 */
export interface PackServerRolloutsInput {
  /** Trajectories (at least one). */
  trajectories: ServerTrajectory[];
  /**
   * `'conversation'` (default): one row per trajectory, context turns inside it with mask 0;
   * `'step'`: one row per assistant turn, context turns left out (they belong to the next prompt).
   *
   * @defaultValue `'conversation'`
   */
  layout?: 'step' | 'conversation';
  /**
   * Width of the packed top-k (default: the widest sequence). Narrower sequences are padded, wider
   * ones keep their first `k` alternatives (the most likely).
   *
   * @defaultValue the widest sequence's `k`
   */
  k?: number;
  /**
   * Width of the packed teacher top-k (default: the widest teacher sequence).
   *
   * @defaultValue the widest teacher sequence's `k`
   */
  teacherK?: number;
  /**
   * A batch an earlier call returned, whose memory this call reuses for its log-prob and top-k arrays
   * when it is large enough (a fresh buffer is mapped page by page on first write, which costs as much
   * as the packing itself at 10^6 tokens). That batch's log-prob and top-k arrays are overwritten.
   * When it is too small, a new buffer with 25% headroom is allocated instead.
   *
   * @defaultValue a new buffer
   */
  out?: ServerRolloutBatch;
}

/** A packed batch: {@link RolloutBatch} plus the per-token log-probs and top-k. Tokens with mask 0
 *  (context turns) have log-prob 0 and an all-padding top-k row. The log-prob and top-k arrays added
 *  here are views of one `ArrayBuffer`.
 * @category Server ingestion
 */
export interface ServerRolloutBatch extends RolloutBatch {
  /** Log-prob of each token under the policy that sampled it (the "old" log-probs), Float32Array N. */
  logprobs: Float32Array;
  /** The policy's top-k alternatives per token, `N x k`. */
  topK: SparseTopK;
  /** The teacher's log-prob of each token, when every assistant turn has a teacher. */
  teacherLogprobs?: Float32Array;
  /** The teacher's top-k per token, when every assistant turn has a teacher. */
  teacherTopK?: SparseTopK;
  /**
   * How `logprobs` were computed, when the responses' sequences state it (the parsers' `mode`): present
   * only then, and one mode for the whole batch (mixing modes is `ERR_OPTION`).
   */
  logprobMode?: LogprobMode;
  /** How `teacherLogprobs` were computed, when the teacher sequences state it (the prompt-log-prob parsers do). */
  teacherLogprobMode?: LogprobMode;
}

/** The one mode of a set of sequences: none stated, or the same on each (else `ERR_OPTION` at the first that differs). */
class ModeOf {
  private mode: LogprobMode | undefined;
  private first = '';
  private seen = 0;
  constructor(private readonly what: string) {}
  add(s: ServerSequence, pos: string): void {
    const m = s.mode === undefined ? undefined : readLogprobMode(s.mode, `${pos}.mode`);
    if (this.seen++ === 0) {
      this.mode = m;
      this.first = pos;
      return;
    }
    const same = m === undefined ? this.mode === undefined
      : this.mode !== undefined && m.kind === this.mode.kind && m.temperature === this.mode.temperature && m.topK === this.mode.topK && m.topP === this.mode.topP;
    if (!same) {
      const say = (x: LogprobMode | undefined) => (x ? describeMode(x) : 'not stated');
      throw new GearError('ERR_OPTION', `${pos}.mode: expected one log-prob mode for every ${this.what} in a batch (${this.first}.mode: ${say(this.mode)}), got ${say(m)}`);
    }
  }
  get(): LogprobMode | undefined {
    return this.mode;
  }
}

/** Buffers made by {@link packServerRollouts}: only those are reused through `out`. */
const PACKED = new WeakSet<ArrayBuffer>();

/** The buffer behind `out` (a batch from packServerRollouts), or null without one. */
function outBuffer(out: unknown): ArrayBuffer | null {
  if (out === undefined) return null;
  const b = isObj(out) && out.logprobs instanceof Float32Array ? out.logprobs.buffer : null;
  if (!(b instanceof ArrayBuffer) || !PACKED.has(b)) fail('ERR_OPTION', 'packServerRollouts: out', 'a batch returned by packServerRollouts', out);
  return b;
}

/** `buf` when it holds `bytes` (and is still attached), else a new buffer: exact without `out`,
 *  with headroom when `out` was too small (the next step is likely as large). */
function reuse(buf: ArrayBuffer | null, bytes: number): ArrayBuffer {
  if (buf !== null && buf.byteLength >= bytes) return buf;
  const fresh = new ArrayBuffer(buf === null ? bytes : Math.ceil(bytes * 1.25 / 8) * 8);
  PACKED.add(fresh);
  return fresh;
}

function kOpt(x: unknown, what: string): number | undefined {
  if (x === undefined) return undefined;
  if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 4096) fail('ERR_OPTION', what, 'an integer in [0, 4096]', x);
  return x;
}

/** Checks a parsed sequence (it may come from user code) and returns its token count. */
function checkSeq(s: unknown, pos: string): ServerSequence {
  if (!isObj(s)) fail('ERR_DTYPE', pos, 'a ServerSequence (from a parser)', s);
  const q = s as unknown as ServerSequence;
  if (!(q.tokenIds instanceof Int32Array)) fail('ERR_DTYPE', `${pos}.tokenIds`, 'Int32Array', q.tokenIds);
  if (!(q.logprobs instanceof Float32Array)) fail('ERR_DTYPE', `${pos}.logprobs`, 'Float32Array', q.logprobs);
  const n = q.tokenIds.length;
  if (q.logprobs.length !== n) fail('ERR_SHAPE', `${pos}.logprobs.length`, String(n), q.logprobs.length);
  v.attached(q.tokenIds, `${pos}.tokenIds`);
  v.attached(q.logprobs, `${pos}.logprobs`);
  for (let i = 0; i < n; i++) {
    const lp = q.logprobs[i]!;
    if (!(lp <= 0 && lp > -Infinity)) fail(Number.isNaN(lp) || lp === -Infinity ? 'ERR_NON_FINITE' : 'ERR_OPTION', `${pos}.logprobs[${i}]`, 'a finite number ≤ 0', lp);
  }
  if (q.topK !== null && q.topK !== undefined) {
    const t = q.topK;
    if (!isObj(t)) fail('ERR_DTYPE', `${pos}.topK`, 'a SparseTopK { k, ids, logprobs } or null', t);
    if (!Number.isInteger(t.k) || t.k < 0) fail('ERR_SHAPE', `${pos}.topK.k`, 'an integer >= 0', t.k);
    if (!(t.ids instanceof Int32Array) || t.ids.length !== n * t.k) fail('ERR_SHAPE', `${pos}.topK.ids`, `Int32Array(${n * t.k})`, t.ids);
    if (!(t.logprobs instanceof Float32Array) || t.logprobs.length !== n * t.k) fail('ERR_SHAPE', `${pos}.topK.logprobs`, `Float32Array(${n * t.k})`, t.logprobs);
    v.attached(t.ids, `${pos}.topK.ids`);
    v.attached(t.logprobs, `${pos}.topK.logprobs`);
    // a parser checked every entry when it built the block; hand-built blocks are checked here
    if (wasParsed(t)) return q;
    for (let i = 0; i < t.ids.length; i++) {
      const id = t.ids[i]!;
      const lp = t.logprobs[i]!;
      // a real entry: id >= 0 and a log-prob <= 0; padding: id -1 and -Infinity
      if (id >= 0 ? !(lp <= 0 && lp > -Infinity) : id !== -1 || lp !== -Infinity) {
        fail('ERR_OPTION', `${pos}.topK[${Math.floor(i / t.k)}][${i % t.k}]`, 'an id >= 0 with a finite log-prob ≤ 0, or padding (-1, -Infinity)', `(${id}, ${lp})`);
      }
    }
  }
  return q;
}

/** An `n x k` block in `buf` at byte `at`, left unpadded: every row is written by {@link copyTop} or
 *  {@link padRows}. */
function block(buf: ArrayBuffer, at: number, n: number, k: number): SparseTopK {
  return { k, ids: new Int32Array(buf, at, n * k), logprobs: new Float32Array(buf, at + 4 * n * k, n * k) };
}

/** Pads rows `[at, at + n)` of `dst` entirely. */
function padRows(dst: SparseTopK, at: number, n: number): void {
  const K = dst.k;
  dst.ids.fill(-1, at * K, (at + n) * K);
  dst.logprobs.fill(-Infinity, at * K, (at + n) * K);
}

/** Copies `n` rows of a top-k block (width `src.k`) into `dst` (width `dst.k`) at token `at`, padding
 *  what the source does not cover. */
function copyTop(src: SparseTopK | null | undefined, dst: SparseTopK, at: number, n: number): void {
  const K = dst.k;
  if (K === 0) return;
  if (!src || src.k === 0) {
    padRows(dst, at, n);
    return;
  }
  if (src.k === K) {
    dst.ids.set(src.ids, at * K);
    dst.logprobs.set(src.logprobs, at * K);
    return;
  }
  const w = Math.min(src.k, K);
  for (let i = 0; i < n; i++) {
    const s = i * src.k;
    const d = (at + i) * K;
    for (let j = 0; j < w; j++) {
      dst.ids[d + j] = src.ids[s + j]!;
      dst.logprobs[d + j] = src.logprobs[s + j]!;
    }
    for (let j = w; j < K; j++) {
      dst.ids[d + j] = -1;
      dst.logprobs[d + j] = -Infinity;
    }
  }
}

/**
 * Packs trajectories of server responses into a {@link ServerRolloutBatch}: the rollout layout of
 * {@link buildRolloutBatch} (its offsets, mask, token ids, rewards, groups and anchors — it does the
 * packing) plus, per token, the sampled log-prob and top-k alternatives, and the teacher's when every
 * assistant turn carries one. Assistant tokens have mask 1; tool / observation / user tokens mask 0.
 * Token ids are used exactly as the server returned them. Validation is complete before anything is
 * returned: a teacher whose ids differ from its response (`ERR_TARGET_RANGE`, with the position), a
 * teacher on some turns only (`ERR_OPTION`), a trajectory without an assistant turn (`ERR_SHAPE`).
 *
 * @param input trajectories, layout and top-k widths
 * @returns the packed batch
 * @throws GearError `ERR_SHAPE`, `ERR_DTYPE`, `ERR_OPTION`, `ERR_TARGET_RANGE`, `ERR_NON_FINITE`, `ERR_GROUP`
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 * const response = { meta_info: { output_token_logprobs: [[-0.5, 11, null], [-0.1, 12, null]] } };
 * const [seq] = rl.parseSglang(response);
 * const batch = rl.packServerRollouts({ trajectories: [{ group: 'q1', turns: [
 *   { role: 'assistant', response: seq!, reward: 1 },
 *   { role: 'tool', tokens: [90, 91] },
 * ] }] });
 * console.log(Array.from(batch.mask), Array.from(batch.logprobs)); // [1, 1, 0, 0] [-0.5, -0.10000000149011612, 0, 0]
 * ```
 * @category Server ingestion
 */
export function packServerRollouts(input: PackServerRolloutsInput): ServerRolloutBatch {
  if (!isObj(input)) fail('ERR_OPTION', 'packServerRollouts', 'an options object', input);
  for (const key of Object.keys(input)) {
    if (!['trajectories', 'layout', 'k', 'teacherK', 'out'].includes(key)) fail('ERR_OPTION', `packServerRollouts: ${key}`, 'a known option', key);
  }
  const layout = input.layout ?? 'conversation';
  if (layout !== 'step' && layout !== 'conversation') fail('ERR_OPTION', 'packServerRollouts: layout', "'step' or 'conversation'", layout);
  const trajs = input.trajectories;
  if (!Array.isArray(trajs) || trajs.length === 0) fail('ERR_SHAPE', 'packServerRollouts: trajectories', 'a non-empty array', trajs);
  const kUser = kOpt(input.k, 'packServerRollouts: k');
  const tkUser = kOpt(input.teacherK, 'packServerRollouts: teacherK');
  const outBuf = outBuffer(input.out);

  // Validate every turn and build buildRolloutBatch's input.
  let kMax = 0;
  let tkMax = 0;
  let withTeacher = -1; // -1 unknown, 0 none, 1 all
  const studentMode = new ModeOf('response'), teacherMode = new ModeOf('teacher');
  const rolloutTrajs: TrajectoryInput[] = trajs.map((t, ti) => {
    const w = `trajectories[${ti}]`;
    if (!isObj(t)) fail('ERR_DTYPE', w, 'a trajectory object', t);
    for (const key of Object.keys(t)) {
      if (!['id', 'group', 'turns', 'episodeReward', 'groundTruth'].includes(key)) fail('ERR_OPTION', `${w}.${key}`, 'a known trajectory field', key);
    }
    if (!Array.isArray(t.turns) || t.turns.length === 0) fail('ERR_SHAPE', `${w}.turns`, 'a non-empty array of turns', t.turns);
    const steps: StepInput[] = [];
    let assistants = 0;
    t.turns.forEach((u, ui) => {
      const wu = `${w}.turns[${ui}]`;
      if (!isObj(u)) fail('ERR_DTYPE', wu, 'a turn object', u);
      if (u.role === 'assistant') {
        const a = u as ServerAssistantTurn;
        for (const key of Object.keys(a)) {
          if (!['role', 'response', 'teacher', 'reward', 'anchor'].includes(key)) fail('ERR_OPTION', `${wu}.${key}`, 'a known assistant-turn field', key);
        }
        const r = checkSeq(a.response, `${wu}.response`);
        studentMode.add(r, `${wu}.response`);
        if (r.topK) kMax = Math.max(kMax, r.topK.k);
        const has = a.teacher !== undefined ? 1 : 0;
        if (withTeacher === -1) withTeacher = has;
        else if (withTeacher !== has) fail('ERR_OPTION', `${wu}.teacher`, withTeacher ? 'a teacher on every assistant turn (the earlier ones have one)' : 'no teacher (the earlier assistant turns have none)', a.teacher);
        if (a.teacher !== undefined) {
          const te = checkSeq(a.teacher, `${wu}.teacher`);
          teacherMode.add(te, `${wu}.teacher`);
          if (te.tokenIds.length !== r.tokenIds.length) fail('ERR_SHAPE', `${wu}.teacher.tokenIds.length`, `${r.tokenIds.length} (the response's tokens)`, te.tokenIds.length);
          for (let i = 0; i < r.tokenIds.length; i++) {
            if (te.tokenIds[i] !== r.tokenIds[i]) fail('ERR_TARGET_RANGE', `${wu}.teacher.tokenIds[${i}]`, `${r.tokenIds[i]} (the response's token)`, te.tokenIds[i]);
          }
          if (te.topK) tkMax = Math.max(tkMax, te.topK.k);
        }
        assistants++;
        steps.push({ tokens: r.tokenIds, reward: a.reward, anchor: a.anchor });
      } else if (u.role === 'tool' || u.role === 'observation' || u.role === 'user' || u.role === 'system') {
        for (const key of Object.keys(u)) {
          if (key !== 'role' && key !== 'tokens') fail('ERR_OPTION', `${wu}.${key}`, 'a known context-turn field (role, tokens)', key);
        }
        const toks = contextTokens(u.tokens, `${wu}.tokens`);
        if (layout === 'step') {
          // not part of any row (they belong to the next prompt)
        } else if (steps.length === 0) {
          steps.push({ tokens: toks, mask: new Uint8Array(toks?.length ?? 0) });
        } else {
          steps[steps.length - 1]!.observation = concat(steps[steps.length - 1]!.observation, toks);
        }
      } else {
        fail('ERR_OPTION', `${wu}.role`, "'assistant', 'tool', 'observation', 'user' or 'system'", u.role);
      }
    });
    if (assistants === 0) fail('ERR_SHAPE', `${w}.turns`, 'at least one assistant turn', `${t.turns.length} context turns`);
    const tr: TrajectoryInput = { group: t.group, steps };
    if (t.id !== undefined) tr.id = t.id;
    if (t.episodeReward !== undefined) tr.episodeReward = t.episodeReward;
    if (t.groundTruth !== undefined) tr.groundTruth = t.groundTruth;
    return tr;
  });

  const batch = buildRolloutBatch({ trajectories: rolloutTrajs, layout });
  const N = batch.tokens;
  const K = kUser ?? kMax;
  const TK = tkUser ?? tkMax;
  const teacher = withTeacher === 1;
  // One ArrayBuffer for every output array (see `builder` in common.ts: fewer backing stores, less GC).
  const bytes = 4 * (N + 2 * N * K + (teacher ? N + 2 * N * TK : 0));
  const buf = reuse(outBuf, bytes);
  const logprobs = new Float32Array(buf, 0, N);
  const topK = block(buf, 4 * N, N, K);
  const tLogprobs = teacher ? new Float32Array(buf, 4 * (N + 2 * N * K), N) : undefined;
  const tTop = teacher ? block(buf, 4 * (2 * N + 2 * N * K), N, TK) : undefined;

  // The same walk as buildRolloutBatch's packing: turns in order, context turns only in 'conversation'.
  let n = 0;
  for (const t of trajs) {
    for (const u of t.turns) {
      if (u.role === 'assistant') {
        const r = u.response;
        const len = r.tokenIds.length;
        logprobs.set(r.logprobs, n);
        copyTop(r.topK, topK, n, len);
        if (teacher) {
          tLogprobs!.set(u.teacher!.logprobs, n);
          copyTop(u.teacher!.topK, tTop!, n, len);
        }
        n += len;
      } else if (layout === 'conversation') {
        const len = u.tokens.length;
        // written even in a fresh buffer: `out` hands back an earlier batch's values
        logprobs.fill(0, n, n + len);
        padRows(topK, n, len);
        if (teacher) {
          tLogprobs!.fill(0, n, n + len);
          padRows(tTop!, n, len);
        }
        n += len;
      }
    }
  }
  if (n !== N) throw new Error(`packServerRollouts: internal layout mismatch (${n} != ${N})`);
  const out: ServerRolloutBatch = { ...batch, logprobs, topK };
  if (teacher) {
    out.teacherLogprobs = tLogprobs;
    out.teacherTopK = tTop;
  }
  const sm = studentMode.get(), tm = teacher ? teacherMode.get() : undefined;
  if (sm) out.logprobMode = sm;
  if (tm) out.teacherLogprobMode = tm;
  return out;
}

function concat(a: ArrayLike<number> | undefined, b: ArrayLike<number>): ArrayLike<number> {
  if (a === undefined) return b;
  if (!Array.isArray(b) && !ArrayBuffer.isView(b)) return b; // let buildRolloutBatch report it
  const out = new Array<number>(a.length + b.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]!;
  for (let i = 0; i < b.length; i++) out[a.length + i] = b[i]!;
  return out;
}

function contextTokens(x: unknown, pos: string): ArrayLike<number> {
  if (!Array.isArray(x) && !(ArrayBuffer.isView(x) && !(x instanceof DataView))) fail('ERR_DTYPE', pos, 'an array of token ids', x);
  if (!Array.isArray(x)) v.attached(x as ArrayBufferView, pos);
  const a = x as ArrayLike<unknown>;
  for (let i = 0; i < a.length; i++) {
    const t = a[i];
    if (typeof t !== 'number' || !Number.isInteger(t)) fail('ERR_DTYPE', `${pos}[${i}]`, 'an integer token id', t);
    if (t < 0 || t > 0x7fffffff) fail('ERR_TARGET_RANGE', `${pos}[${i}]`, 'a token id in [0, 2^31)', t);
  }
  return a as ArrayLike<number>;
}
