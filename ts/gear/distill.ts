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
  if (a.distillCoef === undefined) fail('ERR_OPTION', 'distillCoef', 'a number >= 0', undefined);
  const coef = v.numOpt(a.distillCoef, 'distillCoef', 0, { min: 0, finite: true });
  const klCap = v.numOpt(a.klCap, 'klCap', 20, { min: 0, minOpen: true });
  const opts = { kind: 'reverse_kl' as const, temperature: a.temperature ?? 1, klCap };
  const stats = a.stats ?? divergence(a.student, a.teacher, opts);
  const rows = a.student.rows;
  v.f32(stats.value, 'stats.value', rows);
  const mask = v.optMask(a.mask, 'mask', rows);
  let nv = 0;
  let sum = 0;
  for (let r = 0; r < rows; r++) {
    if (mask && !mask[r]) continue;
    nv++;
    sum += stats.value[r]!;
  }
  const g = new Float32Array(rows);
  if (nv > 0 && coef > 0) {
    const w = coef / nv;
    for (let r = 0; r < rows; r++) g[r] = mask && !mask[r] ? 0 : w;
  }
  const grad = divergenceBackward(a.student, a.teacher, g, { ...opts, stats });
  return { loss: nv > 0 ? (coef * sum) / nv : 0, grad, divergence: stats.value, validTokens: nv };
}
