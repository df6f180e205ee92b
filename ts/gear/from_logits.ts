/**
 * One call from student and teacher logits to GEAR-proposed advantages: the fused `divergence` pass
 * (reverse KL, student entropy and both sampled-token log-probs) feeds {@link gear}; optionally the
 * self-distillation term reuses the same forward statistics.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { divergence } from '../ops/divergence.js';
import type { Divergence } from '../ops/divergence.js';
import type { AnyLogits, Logits } from '../ops/token_stats.js';
import type { DeviceLogits } from '../core/device.js';
import * as v from '../core/validate.js';
import { checkLogits } from '../core/logits.js';
import { distillChecked } from './distill.js';
import type { DistillResult } from './distill.js';
import { gearAdvantagesArg, gearChecked, gearMaskArg } from './gear.js';
import type { GearResult } from './gear.js';
import { type GearOptions, resolveGearOptions } from './options.js';

/**
 * Arguments of {@link gearFromLogits}.
 *
 * @category GEAR
 */
export interface GearFromLogitsInput<L extends AnyLogits = AnyLogits> {
  /**
   * Student logits (the rollout policy), one row per packed token: `rows = offsets[R]`. Masked rows must
   * still hold finite logits. Host arrays, or a {@link DeviceLogits} (then the teacher's are too).
   */
  student: L;
  /** Ground-truth-conditioned teacher logits at the same positions (see `teacherInput` / `gatherRows`). */
  teacher: L;
  /** The sampled token of each row. */
  targets: Int32Array;
  /** Per row of the batch: the trajectory-level (GRPO) advantage. */
  advantages: ArrayLike<number>;
  /** Packed-row offsets, length R+1. */
  offsets: Int32Array;
  /** Optional 0/1 mask per token. */
  mask?: Uint8Array;
  /**
   * Rollout sampling temperature (default 1).
   *
   * @defaultValue `1`
   */
  temperature?: number;
  /** GEAR options (its `klCap` also caps the divergence pass). */
  options?: GearOptions;
  /**
   * When > 0, also returns the self-distillation term (see `distillLoss`). Default 0.
   *
   * @defaultValue `0`
   */
  distillCoef?: number;
}

/**
 * Result of {@link gearFromLogits}: the {@link GearResult} plus the token signals it was computed from.
 *
 * @category GEAR
 */
export interface GearFromLogitsResult<G = Float32Array> extends GearResult {
  /** The per-token signals fed to `gear`. */
  signals: {
    /** Capped reverse KL(student ‖ teacher). */
    divergence: Float32Array;
    /** Student entropy. */
    entropy: Float32Array;
    /** Teacher minus student log-prob of the sampled token. */
    logratio: Float32Array;
  };
  /** The full output of the `divergence` pass. */
  stats: Divergence;
  /** The self-distillation term, when `distillCoef > 0`. */
  distill?: DistillResult<G>;
}

/**
 * Student and teacher logits to GEAR-proposed advantages in one call: `divergence(student, teacher,
 * { kind: 'reverse_kl', targets, temperature, klCap })` gives D, the student entropy H and both
 * sampled-token log-probs (logratio = teacher − student), then `gearAdvantages(...)` reweights the advantages.
 *
 * @param a logits, sampled tokens, batch layout, temperature, GEAR options, optional `distillCoef`
 * @returns the GEAR result, the signals, the divergence statistics and the optional distillation term
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // one row of 5 response tokens; teacher logits at the same positions (see teacherInput / gatherRows)
 * const rows = 5, vocab = 16;
 * const random = () => Float32Array.from({ length: rows * vocab }, () => 2 * Math.random());
 * const student = { data: random(), rows, vocab };
 * const teacher = { data: random(), rows, vocab };
 * const r = rl.gearFromLogits({
 *   student, teacher, targets: Int32Array.of(3, 1, 4, 1, 5),
 *   advantages: [1], offsets: Int32Array.of(0, 5), distillCoef: 0.1,
 * });
 * console.log(r.advantages, r.signals.divergence, r.distill?.loss);
 * ```
 * @category GEAR
 */
export function gearFromLogits(a: GearFromLogitsInput<Logits>): GearFromLogitsResult;
export function gearFromLogits(a: GearFromLogitsInput<DeviceLogits>): GearFromLogitsResult<DeviceLogits<'float32'>>;
export function gearFromLogits(a: GearFromLogitsInput): GearFromLogitsResult<Float32Array | DeviceLogits<'float32'>>;
export function gearFromLogits(a: GearFromLogitsInput): GearFromLogitsResult<Float32Array | DeviceLogits<'float32'>> {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'gearFromLogits(a)', 'an object', a);
  v.knownKeys(a, 'gearFromLogits(a)',
    ['student', 'teacher', 'targets', 'advantages', 'offsets', 'mask', 'temperature', 'options', 'distillCoef']);
  // Each argument read once, in a fixed order, before anything is checked; the GEAR options are
  // resolved and the offsets and advantages checked once, here, for the whole call.
  const { student: s0, teacher: t0, targets, advantages, offsets, mask, temperature, options, distillCoef: coef } = a;
  const student = checkLogits(s0, 'student').logits, teacher = checkLogits(t0, 'teacher').logits;
  const o = resolveGearOptions(options);
  const distillCoef = v.numOpt(coef, 'distillCoef', 0, { min: 0, finite: true });
  if (targets === undefined) fail('ERR_DTYPE', 'targets', 'an Int32Array (the sampled token of each row)', targets);
  const fwd = { kind: 'reverse_kl' as const, temperature: temperature ?? 1, klCap: o.klCap };
  const stats = divergence(student, teacher, { ...fwd, targets });
  const rows = stats.value.length;
  const R = v.offsets(offsets, 'offsets', rows);
  const adv = gearAdvantagesArg(advantages, R);
  const m = gearMaskArg(mask, rows);
  const sl = stats.studentLogprob!, tl = stats.teacherLogprob!;
  const logratio = new Float32Array(rows);
  for (let t = 0; t < rows; t++) logratio[t] = tl[t]! - sl[t]!;
  const res = gearChecked({
    adv, offsets, rows: R, mask: m, div: stats.value, ent: stats.studentEntropy, lr: logratio, o,
    out: { advantages: null, weights: null, segmentId: null },
  });
  const out: GearFromLogitsResult<Float32Array | DeviceLogits<'float32'>> = {
    ...res, signals: { divergence: stats.value, entropy: stats.studentEntropy, logratio }, stats,
  };
  // the mask's values were checked by the scan; the forward statistics are this call's own
  if (distillCoef > 0) out.distill = distillChecked(student, teacher, m, distillCoef, fwd, stats);
  return out;
}
