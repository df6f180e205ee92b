/**
 * GEAR from an inference server's sparse log-probs: the student's and the teacher's top-k lists (and,
 * where known, the chosen token's log-prob on each side) feed {@link gearAdvantages} through the native
 * sparse reverse KL. An **approximation** of {@link gearFromLogits}: the divergence is the tail-bucket
 * reverse KL (a lower bound of the full one) and the entropy a bound computed from the student's top-k;
 * docs/gear.md ("From server log-probs (sparse)") measures how far its segments and weights move from
 * the full-logit path.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { sparseDivergence } from '../ops/sparse_divergence.js';
import type { SparseDivergence, SparseSupport } from '../ops/sparse_divergence.js';
import type { SparseTopK } from '../server/common.js';
import { gearAdvantages, resolveGearOptions } from './gear.js';
import type { GearOptions, GearResult } from './gear.js';

/**
 * Arguments of {@link gearFromSparse}.
 * @category GEAR
 */
export interface GearFromSparseInput {
  /** The student's (rollout policy's) top-k log-probs, one token per packed position: `n = offsets[R]`. */
  student: SparseTopK;
  /** The ground-truth-conditioned teacher's top-k log-probs at the same positions. */
  teacher: SparseTopK;
  /** Student log-prob of each sampled token (Float32Array of `n`); with `teacherLogprob`, gives the `logratio` signal. */
  studentLogprob?: Float32Array;
  /** Teacher log-prob of each sampled token (Float32Array of `n`). */
  teacherLogprob?: Float32Array;
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
 * console.log(r.advantages.length, r.signals.divergence[1] > r.signals.divergence[0]); // 3 true
 * ```
 * @category GEAR
 */
export function gearFromSparse(a: GearFromSparseInput): GearFromSparseResult {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'gearFromSparse(a)', 'an object', a);
  v.knownKeys(a, 'gearFromSparse(a)', ['student', 'teacher', 'studentLogprob', 'teacherLogprob', 'advantages', 'offsets',
    'mask', 'vocab', 'entropy', 'support', 'options']);
  const o = resolveGearOptions(a.options);
  const entropy = v.enumOpt(a.entropy, 'entropy', ['lower', 'upper', 'mid'] as const, 'lower');
  if (entropy !== 'lower' && a.vocab === undefined) fail('ERR_OPTION', 'vocab', `a vocabulary size for entropy '${entropy}'`, a.vocab);
  const stats = sparseDivergence(a.student, a.teacher,
    { kind: 'reverse_kl', support: a.support ?? 'tail', klCap: o.klCap, ...(a.vocab === undefined ? {} : { vocab: a.vocab }) });
  const n = stats.value.length;
  v.offsets(a.offsets, 'offsets', n);
  let logratio: Float32Array | undefined;
  if (a.studentLogprob !== undefined || a.teacherLogprob !== undefined) {
    const sl = v.f32(a.studentLogprob, 'studentLogprob', n);
    const tl = v.f32(a.teacherLogprob, 'teacherLogprob', n);
    logratio = new Float32Array(n);
    for (let t = 0; t < n; t++) logratio[t] = tl[t]! - sl[t]!;
  } else if (o.signMode === 'rlsd') {
    fail('ERR_OPTION', 'studentLogprob / teacherLogprob', "the chosen tokens' log-probs for signMode 'rlsd'", undefined);
  }
  let h = stats.entropyLower;
  if (entropy === 'upper') h = stats.entropyUpper;
  else if (entropy === 'mid') {
    h = new Float32Array(n);
    for (let t = 0; t < n; t++) h[t] = 0.5 * (stats.entropyLower[t]! + stats.entropyUpper[t]!);
  }
  const res = gearAdvantages({
    advantages: a.advantages, offsets: a.offsets, mask: a.mask, divergence: stats.value, entropy: h,
    ...(logratio ? { logratio } : {}), options: a.options,
  });
  return { ...res, signals: { divergence: stats.value, entropy: h, ...(logratio ? { logratio } : {}) }, stats };
}
