/**
 * GEAR from an inference server's sparse log-probs: the student's and the teacher's top-k lists (and,
 * where known, the chosen token's log-prob on each side) feed {@link gearAdvantages} through the native
 * sparse reverse KL. An **approximation** of {@link gearFromLogits}: the divergence is the tail-bucket
 * reverse KL (a lower bound of the full one) and the entropy a bound computed from the student's top-k;
 * docs/gear.md ("From server log-probs (sparse)") measures how far its segments and weights move from
 * the full-logit path.
 *
 * With the log-ratio anchor signal (`options.anchorSignal: 'logratio'`) GEAR needs no teacher top-k: the
 * chosen token's log-prob on each side gives the anchor signal exactly, and the student's top-k gives the
 * entropy bound. That is GEAR from server log-probs alone (docs/server.md).
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { sparseDivergence } from '../ops/sparse_divergence.js';
import type { SparseDivergence, SparseSupport } from '../ops/sparse_divergence.js';
import type { SparseTopK } from '../server/common.js';
import { checkModesMatch, readLogprobMode } from '../server/mode.js';
import type { LogprobMode } from '../server/mode.js';
import { gearAdvantagesArg, gearOutArg, gearChecked, gearMaskArg } from './gear.js';
import type { GearResult } from './gear.js';
import { type GearOptions, resolveGearOptions } from './options.js';

/**
 * Arguments of {@link gearFromSparse}.
 * @category GEAR
 */
export interface GearFromSparseInput {
  /** The student's (rollout policy's) top-k log-probs, one token per packed position: `n = offsets[R]`. */
  student: SparseTopK;
  /**
   * The ground-truth-conditioned teacher's top-k log-probs at the same positions. Optional with
   * `options.anchorSignal: 'logratio'`, which reads only the chosen tokens' log-probs (then `signals.divergence`
   * is absent).
   */
  teacher?: SparseTopK;
  /**
   * Student log-prob of each sampled token (Float32Array of `n`, finite on valid tokens); with
   * `teacherLogprob`, gives the `logratio` signal.
   */
  studentLogprob?: Float32Array;
  /**
   * Teacher log-prob of each sampled token (Float32Array of `n`): NaN or `+Infinity` on a valid token is
   * `ERR_NON_FINITE`; `−Infinity` (the teacher rules the token out) gives the largest log-ratio signal,
   * capped at `klCap`.
   */
  teacherLogprob?: Float32Array;
  /**
   * How each side's log-probs were computed (from the parsers' `mode`, or a packed batch's `logprobMode` /
   * `teacherLogprobMode`). When both are given they must match (`logprobModesMatch`), else `ERR_OPTION`:
   * a log-ratio of a raw and a processed log-prob, or of two temperatures, is not a log-ratio of one
   * distribution.
   */
  modes?: { student?: LogprobMode | null; teacher?: LogprobMode | null };
  /** Per row of the batch: the trajectory-level (GRPO) advantage. */
  advantages: ArrayLike<number>;
  /** Packed-row offsets, length R+1. */
  offsets: Int32Array;
  /** Optional 0/1 mask per token. */
  mask?: Uint8Array;
  /** Vocabulary size (checks ids; needed by `entropy: 'upper'` and `'mid'`). */
  vocab?: number;
  /**
   * Which student-entropy estimate GEAR's boundary rules read: the `'lower'` bound (default), the `'upper'` bound or their `'mid'`point.
   *
   * @defaultValue `'lower'`
   */
  entropy?: 'lower' | 'upper' | 'mid';
  /**
   * `'tail'` (default) or `'renormalize'` (see `sparseDivergence`).
   *
   * @defaultValue `'tail'`
   */
  support?: SparseSupport;
  /** GEAR options (its `klCap` also caps the divergence). */
  options?: GearOptions;
  /**
   * A previous result of this function for the same token count, whose arrays this call overwrites
   * (the sparse statistics, the signals, the advantages, weights and segment ids): a training loop that
   * passes each step's result back allocates nothing per step but the anchor list. The previous result's
   * arrays then hold this call's values.
   */
  out?: GearFromSparseResult | GearFromSparseLogratioResult;
}

/**
 * Result of {@link gearFromSparse}: the {@link GearResult} plus the token signals it was computed from.
 * @category GEAR
 */
export interface GearFromSparseResult extends GearResult {
  /** The per-token signals fed to `gear`. */
  signals: {
    /** Capped sparse reverse KL(student ‖ teacher). */
    divergence: Float32Array;
    /** The chosen student-entropy estimate. */
    entropy: Float32Array;
    /** Teacher minus student log-prob of the sampled token (only with both chosen log-probs). */
    logratio?: Float32Array;
  };
  /** The full output of the sparse divergence pass (coverage, entropy bounds). */
  stats: SparseDivergence;
}

/**
 * Result of {@link gearFromSparse} without a teacher top-k (`anchorSignal: 'logratio'`): no divergence.
 * @category GEAR
 */
export interface GearFromSparseLogratioResult extends GearResult {
  /** The per-token signals fed to `gear`. */
  signals: {
    /** No teacher top-k, no divergence. */
    divergence?: undefined;
    /** The chosen student-entropy estimate. */
    entropy: Float32Array;
    /** Teacher minus student log-prob of the sampled token. */
    logratio: Float32Array;
  };
  /**
   * The student's sparse pass alone (coverage, entropy bounds); its divergence and teacher fields are 0
   * (it ran against an all-padding list).
   */
  stats: SparseDivergence;
}

/**
 * Server top-k log-probs to GEAR-proposed advantages in one call: `sparseDivergence(student, teacher,
 * { kind: 'reverse_kl', support, klCap })` gives D and the student-entropy bounds, the chosen tokens'
 * log-probs give the log-ratio, then `gearAdvantages(...)` reweights the advantages.
 *
 * @param a both sides' top-k, optional chosen log-probs, batch layout, GEAR options
 * @returns the GEAR result, the signals and the sparse divergence statistics
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // one row of three tokens, top-2 per side (ids and log-probs as a server returns them)
 * const lp = (...p: number[]) => Float32Array.from(p, Math.log);
 * const student = { ids: Int32Array.of(5, 1, 8, 2, 3, 4), logprobs: lp(0.7, 0.2, 0.6, 0.3, 0.9, 0.05), k: 2 };
 * const teacher = { ids: Int32Array.of(5, 1, 2, 8, 3, 4), logprobs: lp(0.6, 0.3, 0.9, 0.05, 0.8, 0.1), k: 2 };
 * const r = rl.gearFromSparse({
 *   student, teacher, advantages: [1], offsets: Int32Array.of(0, 3), vocab: 16,
 *   options: { peakMinKl: 0.1 },
 * });
 * console.log(r.advantages.length, r.signals.divergence[1]! > r.signals.divergence[0]!); // 3 true
 *
 * // GEAR from the chosen tokens' log-probs alone (no teacher top-k): the log-ratio anchor signal
 * const s = rl.gearFromSparse({
 *   student, studentLogprob: lp(0.7, 0.3, 0.9), teacherLogprob: lp(0.6, 0.01, 0.8),
 *   advantages: [-1], offsets: Int32Array.of(0, 3), vocab: 16, options: { anchorSignal: 'logratio', peakMinKl: 0.1 },
 * });
 * console.log(Array.from(s.anchors)); // [1]: the teacher disbelieves the second token
 * ```
 * @category GEAR
 */
export function gearFromSparse(a: GearFromSparseInput & { teacher: SparseTopK }): GearFromSparseResult;
export function gearFromSparse(a: GearFromSparseInput & { teacher?: undefined }): GearFromSparseLogratioResult;
export function gearFromSparse(a: GearFromSparseInput): GearFromSparseResult | GearFromSparseLogratioResult;
export function gearFromSparse(a: GearFromSparseInput): GearFromSparseResult | GearFromSparseLogratioResult {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'gearFromSparse(a)', 'an object', a);
  v.knownKeys(a, 'gearFromSparse(a)', ['student', 'teacher', 'studentLogprob', 'teacherLogprob', 'advantages', 'offsets',
    'mask', 'vocab', 'entropy', 'support', 'options', 'modes', 'out']);
  // Each argument read once, before anything is checked (the student's top-k too: its fields feed the
  // sparse pass and, without a teacher, the padding list); the GEAR options are resolved and the offsets,
  // advantages and mask checked once, here, for the whole call.
  const { student: s0, teacher, studentLogprob, teacherLogprob, advantages, offsets, mask, vocab, entropy: which, support, options, modes,
    out: prev0 } = a;
  const prev = previous(prev0);
  const student = (s0 !== null && typeof s0 === 'object' ? { ...s0 } : s0) as SparseTopK;
  const o = resolveGearOptions(options);
  const byLogratio = o.anchorSignal === 'logratio';
  const entropy = v.enumOpt(which, 'entropy', ['lower', 'upper', 'mid'] as const, 'lower');
  if (entropy !== 'lower' && vocab === undefined) fail('ERR_OPTION', 'vocab', `a vocabulary size for entropy '${entropy}'`, vocab);
  if (teacher === undefined && !byLogratio) fail('ERR_OPTION', 'teacher', "the teacher's top-k (or options.anchorSignal 'logratio', which reads only the chosen log-probs)", undefined);
  checkModes(modes);
  const sparseOpts = { kind: 'reverse_kl' as const, support: support ?? 'tail', klCap: o.klCap, ...(vocab === undefined ? {} : { vocab }) };
  // Without a teacher top-k, the student's pass alone (against an all-padding list) gives its entropy bounds.
  const stats = sparseDivergence(student, teacher ?? paddingTopK(student), { ...sparseOpts, ...(prev.stats ? { out: prev.stats } : {}) });
  const n = stats.value.length;
  const rows = v.offsets(offsets, 'offsets', n);
  let logratio: Float32Array | undefined;
  if (studentLogprob !== undefined || teacherLogprob !== undefined) {
    logratio = sampledLogratio(studentLogprob, teacherLogprob, mask, n,
      reuse(prev.logratio, n, [...Object.values(stats), studentLogprob, teacherLogprob]));
  } else if (o.signMode === 'rlsd' || byLogratio) {
    fail('ERR_OPTION', 'studentLogprob / teacherLogprob', `the chosen tokens' log-probs for ${byLogratio ? "anchorSignal 'logratio'" : "signMode 'rlsd'"}`, undefined);
  }
  let h = stats.entropyLower;
  if (entropy === 'upper') h = stats.entropyUpper;
  else if (entropy === 'mid') {
    h = reuse(prev.entropy, n, [...Object.values(stats), logratio]) ?? new Float32Array(n);
    for (let t = 0; t < n; t++) h[t] = 0.5 * (stats.entropyLower[t]! + stats.entropyUpper[t]!);
  }
  const divergence = teacher === undefined ? undefined : stats.value;
  const adv = gearAdvantagesArg(advantages, rows);
  const m = gearMaskArg(mask, n);
  const res = gearChecked({ adv, offsets: offsets as Int32Array, rows, mask: m, div: divergence, ent: h, lr: logratio, o,
    out: gearOutArg(prev.advantages, prev.weights, prev.segmentId, n) });
  return { ...res, signals: { ...(divergence ? { divergence } : {}), entropy: h, ...(logratio ? { logratio } : {}) }, stats } as GearFromSparseResult;
}

/** The arrays of a previous result (`out`), each read once; which of them fit is decided where they are used. */
function previous(out: unknown): {
  stats?: Partial<SparseDivergence>; logratio?: unknown; entropy?: unknown; advantages?: unknown; weights?: unknown; segmentId?: unknown;
} {
  if (out === undefined) return {};
  if (typeof out !== 'object' || out === null) fail('ERR_OPTION', 'out', 'a previous result of gearFromSparse', out);
  const { stats, signals, advantages, weights, segmentId } = out as Record<string, unknown>;
  if (typeof stats !== 'object' || stats === null) fail('ERR_OPTION', 'out.stats', 'the sparse statistics of a previous result', stats);
  if (typeof signals !== 'object' || signals === null) fail('ERR_OPTION', 'out.signals', 'the signals of a previous result', signals);
  const { logratio, entropy } = signals as Record<string, unknown>;
  // a result's stats hold the eight SparseDivergence arrays (plus nothing else): handed on as they are
  const st = stats as Record<string, unknown>;
  const picked: Record<string, unknown> = {};
  for (const k of ['value', 'studentTail', 'teacherTail', 'studentSharedMass', 'teacherSharedMass', 'shared', 'entropyLower', 'entropyUpper']) {
    picked[k] = st[k];
  }
  return { stats: picked as Partial<SparseDivergence>, logratio, entropy, advantages, weights, segmentId };
}

/**
 * A previous signal array to write again: a Float32Array of `n` sharing no buffer with `avoid` (this call's
 * statistics and inputs: a `'lower'` result's entropy signal is its own `stats.entropyLower`); else
 * `undefined` (a new one).
 */
function reuse(x: unknown, n: number, avoid: readonly unknown[]): Float32Array | undefined {
  if (!(x instanceof Float32Array) || x.length !== n) return undefined;
  for (const a of avoid) if (ArrayBuffer.isView(a) && a.buffer === x.buffer) return undefined;
  return x;
}

/**
 * One all-padding top-1 list, grown as needed and handed out as views: the sparse pass only reads it. Held
 * for the process (8 bytes per token of the largest call): a weak hold would be dropped by every full
 * collection, and the list rebuilt on the next step.
 */
let padding: { ids: Int32Array; logprobs: Float32Array } | undefined;

/** An all-padding top-1 list of the student's length (the student's sparse pass without a teacher). */
function paddingTopK(student: SparseTopK): SparseTopK {
  const k = typeof student === 'object' && student !== null && Number.isInteger(student.k) && student.k > 0 ? student.k : 1;
  const n = student?.ids instanceof Int32Array ? Math.floor(student.ids.length / k) : 0;
  if (padding === undefined || padding.ids.length < n) {
    padding = { ids: new Int32Array(n).fill(-1), logprobs: new Float32Array(n).fill(-Infinity) };
  }
  return { k: 1, ids: padding.ids.subarray(0, n), logprobs: padding.logprobs.subarray(0, n) };
}

/** `modes`: each side's mode checked, and the two matched when both are given. */
function checkModes(modes: GearFromSparseInput['modes']): void {
  if (modes === undefined) return;
  v.knownKeys(modes, 'modes', ['student', 'teacher']);
  const s = modes.student == null ? null : readLogprobMode(modes.student, 'modes.student');
  const t = modes.teacher == null ? null : readLogprobMode(modes.teacher, 'modes.teacher');
  if (s && t) checkModesMatch(s, t, 'modes', ['student', 'teacher']);
}

/**
 * `teacherLogprob − studentLogprob` per token, the log-probs checked on valid tokens: the student's
 * finite (it sampled the token), the teacher's neither NaN nor `+Infinity` (`−Infinity` passes: GEAR caps
 * the signal it gives at `klCap`).
 */
function sampledLogratio(sl0: unknown, tl0: unknown, mask: unknown, n: number, into?: Float32Array): Float32Array {
  const sl = v.f32(sl0, 'studentLogprob', n);
  const tl = v.f32(tl0, 'teacherLogprob', n);
  // an invalid mask is reported by gear; here it only spares masked tokens the checks
  const m = mask instanceof Uint8Array && mask.length === n ? mask : undefined;
  const out = into ?? new Float32Array(n);
  for (let t = 0; t < n; t++) {
    const s = sl[t]!, q = tl[t]!;
    if (!(m && m[t] === 0)) {
      if (!Number.isFinite(s)) fail('ERR_NON_FINITE', `studentLogprob[${t}]`, 'a finite log-prob (the student sampled this token)', s);
      if (Number.isNaN(q) || q === Infinity) fail('ERR_NON_FINITE', `teacherLogprob[${t}]`, 'a log-prob (a number < +Infinity; -Infinity is capped)', q);
    }
    out[t] = q - s;
  }
  return out;
}
