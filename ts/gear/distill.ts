/**
 * Optional self-distillation loss term of the GEAR-proposed design (docs/gear.md, the distillation row;
 * off by default): `distillCoef * token-mean(D_t)` with D the full-vocabulary reverse KL
 * KL(student ‖ ground-truth-conditioned teacher) — the OPSD objective with beta = 1 — and its gradient
 * through the student logits (the teacher gets none). Whether the GEAR paper adds such a term is not
 * public; this is ours.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { divergence, divergenceBackward } from '../ops/divergence.js';
import type { Divergence } from '../ops/divergence.js';
import type { AnyLogits, Logits } from '../ops/token_stats.js';
import type { DeviceLogits } from '../core/device.js';
import * as v from '../core/validate.js';
import { KL_CAP_DEFAULT, checkKlCap, checkLogits } from '../core/logits.js';

/**
 * Arguments of {@link distillLoss}.
 *
 * @category GEAR
 */
export interface DistillArgs<L extends AnyLogits = Logits> {
  /** Student logits, one row per response token (the rows that predict them); host arrays or a {@link DeviceLogits}. */
  student: L;
  /** Teacher logits at the same positions, same shape, dtype and place. */
  teacher: L;
  /** Optional 0/1 mask per row: only mask-1 rows count. */
  mask?: Uint8Array;
  /** Loss coefficient (`distill_coef`; >= 0). 0 gives loss 0 and a zero gradient. */
  distillCoef: number;
  /**
   * Sampling temperature both logits are divided by (default 1).
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /**
   * Cap on the divergence in nats (default 20, GEAR's `klCap`); capped rows get no gradient.
   *
   * @defaultValue `20`
   */
  klCap?: number;
  /** The forward `divergence(student, teacher, { kind: 'reverse_kl', temperature, klCap })` if already computed. */
  stats?: Divergence;
}

/**
 * Result of {@link distillLoss}.
 *
 * @category GEAR
 */
export interface DistillResult<G = Float32Array> {
  /** `distillCoef * sum_t m_t D_t / sum_t m_t` (0 without valid rows). */
  loss: number;
  /** dLoss/d(student logits), `rows * vocab`, float32 (a {@link DeviceLogits} for device logits). */
  grad: G;
  /** Per row: D_t (capped reverse KL). */
  divergence: Float32Array;
  /** Rows that count (mask 1). */
  validTokens: number;
}

/**
 * OPSD-style self-distillation term: token-mean reverse KL(student ‖ teacher) over valid rows, times
 * `distillCoef`, with its gradient with respect to the student logits (through `divergenceBackward`).
 * Add `loss` to the policy loss and `grad` to the student logits' gradient.
 *
 * @param a logits, mask, coefficient, temperature, cap and optional forward statistics
 * @returns the loss, the gradient over the student logits, the per-row divergence and the valid count
 * @throws GearError `ERR_OPTION` on a bad coefficient / option, `ERR_SHAPE` on mismatched shapes, and the
 *   logits errors of `divergence`
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * const rows = 5, vocab = 16;
 * const random = () => Float32Array.from({ length: rows * vocab }, () => 2 * Math.random());
 * const student = { data: random(), rows, vocab };
 * const teacher = { data: random(), rows, vocab };
 * const { loss, grad, divergence, validTokens } = rl.distillLoss({ student, teacher, distillCoef: 0.1, klCap: 20 });
 * console.log(loss, divergence, validTokens, grad.length); // grad: d loss / d student logits, rows * vocab
 * ```
 * @category GEAR
 */
export function distillLoss(a: DistillArgs<Logits>): DistillResult;
export function distillLoss(a: DistillArgs<DeviceLogits>): DistillResult<DeviceLogits<'float32'>>;
export function distillLoss(a: DistillArgs<AnyLogits>): DistillResult<Float32Array | DeviceLogits<'float32'>>;
export function distillLoss(a: DistillArgs<AnyLogits>): DistillResult<Float32Array | DeviceLogits<'float32'>> {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'distillLoss(a)', 'an object', a);
  v.knownKeys(a, 'distillLoss(a)', ['student', 'teacher', 'mask', 'distillCoef', 'temperature', 'klCap', 'stats']);
  // Each argument (and each field of the logits and of `stats`) read once, before anything is checked:
  // the forward, the checks and the backward all see the same values.
  const student = checkLogits(a.student, 'student').logits, teacher = checkLogits(a.teacher, 'teacher').logits;
  const { mask: mask0, distillCoef, temperature, klCap: cap, stats: stats0 } = a;
  const given = stats0 === undefined ? undefined : readStats(stats0);
  if (distillCoef === undefined) fail('ERR_OPTION', 'distillCoef', 'a number >= 0', undefined);
  const coef = v.numOpt(distillCoef, 'distillCoef', 0, { min: 0, finite: true });
  const klCap = checkKlCap(cap, 'klCap', KL_CAP_DEFAULT);
  const opts = { kind: 'reverse_kl' as const, temperature: temperature ?? 1, klCap };
  const stats = given ?? divergence(student, teacher, opts);
  const rows = student.rows;
  v.f32(stats.value, 'stats.value', rows);
  const mask = v.optMask(mask0, 'mask', rows);
  return distillChecked(student, teacher, mask, coef, opts, stats);
}

/**
 * @internal {@link distillLoss} over checked inputs: `stats` the forward of `student` and `teacher`
 * with `opts` (its `value` of length `student.rows`), `mask` a 0/1 mask of that length.
 */
export function distillChecked(
  student: AnyLogits, teacher: AnyLogits, mask: Uint8Array | undefined, coef: number,
  opts: { kind: 'reverse_kl'; temperature: number; klCap: number }, stats: Divergence,
): DistillResult<Float32Array | DeviceLogits<'float32'>> {
  const rows = student.rows;
  const value = stats.value;
  let nv = 0;
  let sum = 0;
  for (let r = 0; r < rows; r++) {
    if (mask && !mask[r]) continue;
    nv++;
    sum += value[r]!;
  }
  const g = new Float32Array(rows);
  if (nv > 0 && coef > 0) {
    const w = coef / nv;
    for (let r = 0; r < rows; r++) g[r] = mask && !mask[r] ? 0 : w;
  }
  const grad = divergenceBackward(student, teacher, g, { ...opts, stats });
  return { loss: nv > 0 ? (coef * sum) / nv : 0, grad, divergence: value, validTokens: nv };
}

/** `stats` of a forward pass, read once (every field of a {@link Divergence}). */
function readStats(x: unknown): Divergence {
  if (x === null || typeof x !== 'object') fail('ERR_DTYPE', 'stats', 'the Divergence of the forward pass', x);
  const s = x as Divergence;
  const { value, studentEntropy, studentLogsumexp, teacherLogsumexp, studentLogprob, teacherLogprob } = s;
  const out: Divergence = { value, studentEntropy, studentLogsumexp, teacherLogsumexp };
  if (studentLogprob !== undefined) out.studentLogprob = studentLogprob;
  if (teacherLogprob !== undefined) out.teacherLogprob = teacherLogprob;
  return out;
}
