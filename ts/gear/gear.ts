/**
 * GEAR — granularity-adaptive advantage reweighting from self-distillation (arXiv 2605.11853), as the
 * **GEAR-proposed** design of this library.
 *
 * What comes from the paper (its public abstract and summaries): the trajectory-level GRPO advantage is
 * reshaped with token- and segment-level signals from self-distillation; the signal is the token-level
 * reverse KL between the on-policy student and the same model conditioned on the ground truth (the
 * teacher); divergence spikes mark the onset of a deviation and anchor adaptive segments; aligned tokens
 * keep token-level credit; token entropy marks segment boundaries; the divergence at the departure point
 * modulates the whole segment's advantage through local credit weights.
 *
 * What is ours (the paper's rules, thresholds and hyperparameters are not public): the z-score / quantile
 * spike test, the entropy boundary rules, the weight function `1 + alpha * min(D_anchor / D_ref, 1)`, the
 * sign modes, the per-row normalisation that keeps the trajectory's total credit equal to GRPO's, the
 * ablations, the log-ratio anchor signal (`anchorSignal: 'logratio'`) and every default value. Each is a
 * switch of {@link GearOptions}.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import { syncOp } from '../core/invoke.js';
import * as v from '../core/validate.js';
import type { AdvantageEstimatorDefinition } from '../advantages/registry.js';
import type { OptionsSchema } from '../registry/schema.js';
import { type GearOptions, type ResolvedGearOptions, resolveGearOptions } from './options.js';

// ---- native contract: the GEAR scan ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** @internal */
export interface GearScanParams {
  advantages: Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  /** Absent with anchorSignal 1 (the logratio then sets N). */
  divergence?: Float32Array | null;
  entropy: Float32Array;
  logratio?: Float32Array | null;
  /** Every option, enumerations by name (read by name into gear::GearParams). */
  options: ResolvedGearOptions;
  out?: { advantages?: Float32Array | null; weights?: Float32Array | null; segmentId?: Int32Array | null } | null;
}
/** @internal */
export interface GearScanQuantiles {
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}
/** gear::GearDiagnostics by name. @internal */
export interface GearScanDiagnostics {
  validTokens: number;
  peaks: number;
  segments: number;
  tokensInSegments: number;
  weightMin: number;
  weightMax: number;
  entropyThreshold: number;
  entropyLowThreshold: number;
  dRef: number;
  peakKlThreshold: number;
  fixedSegmentLength: number;
  klQuantiles: GearScanQuantiles;
  entropyQuantiles: GearScanQuantiles;
}
/** @internal */
export interface GearScanResult {
  advantages: Float32Array;
  weights: Float32Array;
  segmentId: Int32Array;
  anchors: Int32Array;
  diagnostics: GearScanDiagnostics;
}

declare module '../core/addon_types.js' {
  interface NativeAddon {
    gearScan(params: GearScanParams): GearScanResult;
  }
}
// Writes `out` (every other array of its parameter object is read: ts/core/invoke.ts).
const gearScanOp = syncOp('gearScan', { writes: ['out'] });

/**
 * Inputs of {@link gear}: one row per trajectory (or per agent step), packed as in the rest of the library.
 *
 * @category GEAR
 */
export interface GearInput {
  /** Per row: the trajectory-level (GRPO) advantage. Length R. */
  advantages: ArrayLike<number>;
  /** Int32Array of length R+1: row r owns tokens `[offsets[r], offsets[r+1])`. */
  offsets: Int32Array;
  /** Optional Uint8Array of 0/1, length N: 1 = a generated token (counts), 0 = tool output / padding. */
  mask?: Uint8Array;
  /** Per token: reverse KL(student ‖ ground-truth-conditioned teacher), >= 0 (values in [-1e-6, 0) are clamped to 0; +Infinity is capped at `klCap`). */
  divergence: Float32Array;
  /** Per token: the student's entropy, finite and >= 0 (same tolerance). */
  entropy: Float32Array;
  /**
   * Per token: teacher minus student log-prob of the sampled token (needed by `signMode: 'rlsd'` and `anchorSignal: 'logratio'`; NaN rejected).
   * The log-ratio anchor signal is `max(0, −logratio)`: `−Infinity` (a teacher log-prob of `−Infinity`) is capped at `klCap`, `+Infinity` gives 0.
   */
  logratio?: Float32Array;
  /** GEAR options; see {@link GearOptions}. */
  options?: GearOptions;
  /** Output arrays to fill instead of allocating (length N each, three distinct buffers); reuse them across steps. */
  out?: { advantages?: Float32Array; weights?: Float32Array; segmentId?: Int32Array };
}

/**
 * Inputs of {@link gear} with the log-ratio anchor signal: `logratio` is required and `divergence` may be
 * left out (the signal never reads it; when given, only its length is checked).
 *
 * @category GEAR
 */
export interface GearLogratioInput extends Omit<GearInput, 'divergence' | 'logratio' | 'options'> {
  /** Unused by the log-ratio anchor signal (optional; its length is checked when given). */
  divergence?: Float32Array;
  /** Per token: teacher minus student log-prob of the sampled token; the anchor signal is `max(0, −logratio)`. */
  logratio: Float32Array;
  /** GEAR options with `anchorSignal: 'logratio'`. */
  options: GearOptions & { anchorSignal: 'logratio' };
}

/**
 * Exact batch quantiles (over valid tokens, linear interpolation) reported in the diagnostics.
 *
 * @category GEAR
 */
export interface GearQuantiles {
  /** Median. */
  p50: number;
  /** 90th percentile. */
  p90: number;
  /** 95th percentile. */
  p95: number;
  /** 99th percentile. */
  p99: number;
  /** Maximum. */
  max: number;
}

/**
 * Per-call diagnostics of {@link gear}: what a researcher watches while tuning the thresholds.
 *
 * @category GEAR
 */
export interface GearDiagnostics {
  /** Departure points the rule found (in `'random_anchors'`: the random anchors placed; in `'token_only'`: found, but none opens a segment). */
  peaks: number;
  /** Segments (each starts at an anchor). */
  segments: number;
  /** Valid tokens inside segments. */
  tokensInSegments: number;
  /** `tokensInSegments / segments` (0 without segments). */
  meanSegmentLength: number;
  /** Smallest final weight over valid tokens (0 when there are none). */
  weightMin: number;
  /** Largest final weight over valid tokens (0 when there are none). */
  weightMax: number;
  /** Valid (mask 1) tokens in the batch. */
  validTokens: number;
  /** `tokensInSegments / validTokens` (0 without valid tokens). */
  segmentTokenFraction: number;
  /** `peaks / rows` (0 without rows). */
  peaksPerRow: number;
  /** Thresholds actually used in this call. */
  thresholds: {
    /** eta: entropy at or above which a token is a new fork (`'next_fork'`). */
    entropy: number;
    /** eta_low: entropy below which a continuation has settled (`'entropy_settles'`). */
    entropyLow: number;
    /** D_ref: the divergence (or log-ratio signal) that maps to the full weight `1 + alpha`. */
    dRef: number;
    /** The batch `peakQuantile` quantile of D or the log-ratio signal (used by `peakRule: 'quantile'`). */
    peakKl: number;
    /** Segment length used by `ablation: 'fixed_length'` (0 otherwise). */
    fixedSegmentLength: number;
  };
  /** Quantiles of the capped anchor signal over valid tokens: the divergence, or with `anchorSignal: 'logratio'` the log-ratio signal. */
  klQuantiles: GearQuantiles;
  /** Quantiles of the student entropy over valid tokens. */
  entropyQuantiles: GearQuantiles;
}

/**
 * Result of {@link gear}.
 *
 * @category GEAR
 */
export interface GearResult {
  /** Per token: `A_row * weight`, 0 on masked tokens (float32). */
  advantages: Float32Array;
  /** Per token: the final (normalised) weight, 0 on masked tokens. */
  weights: Float32Array;
  /** Per token: -1 for aligned and masked tokens, else the index of its segment (numbered over the batch in token order). */
  segmentId: Int32Array;
  /** Token index of each segment's departure point (its first token), indexed by segment id. */
  anchors: Int32Array;
  /** Counts, weight range, thresholds and quantiles of this call. */
  diagnostics: GearDiagnostics;
}

/** The arguments of {@link gear}, as its advantage-estimator entry declares them (each checked by gear itself). */
const GEAR_INPUT = {
  advantages: { type: 'any', required: true }, offsets: { type: 'any', required: true }, mask: { type: 'any' },
  divergence: { type: 'any' }, entropy: { type: 'any', required: true }, logratio: { type: 'any' },
  options: { type: 'object' }, out: { type: 'object' },
} as const satisfies OptionsSchema;
const INPUT_KEYS = Object.keys(GEAR_INPUT);
/**
 * GEAR-proposed advantage reweighting (GEAR, arXiv 2605.11853; the design is laid out in docs/gear.md).
 *
 * The primary name; {@link gear} is the same function under the name of the API contract.
 *
 * **From the paper** (public abstract and summaries): reshape the trajectory-level GRPO advantage with
 * the token-level reverse KL between the on-policy student and the ground-truth-conditioned teacher;
 * divergence spikes anchor adaptive segments; aligned tokens keep token-level credit; token entropy marks
 * segment boundaries; the departure point's divergence modulates the whole segment's advantage.
 *
 * **Ours (GEAR-proposed; the paper's exact rules are not public)**, per row over its valid tokens V:
 * 1. D is capped at `klCap`; a token is a departure point if its row z-score
 *    `(D - mean) / (popstd + 1e-6)` is >= `peakZ` (or D >= the batch `peakQuantile` quantile) and
 *    D >= `peakMinKl`.
 * 2. A segment starts at each departure point and takes the following tokens until (before) a new peak,
 *    a fork token with entropy >= eta (batch `entropyQuantile` quantile, or `entropyThreshold`), a mask
 *    gap, `maxSegmentLength` tokens, or the row end (`segmentEnd: 'entropy_settles'` instead ends at the
 *    first token whose entropy falls below eta_low). Other valid tokens are aligned (their own unit).
 * 3. Each unit gets `w = 1 + alpha * min(D_anchor / D_ref, 1)`, D_ref = max(batch `dRefQuantile`
 *    quantile of D, 1e-6); `'negative_only'` uses w = 1 when A >= 0; `'rlsd'` uses
 *    `clip(exp(sign(A) * logratio_anchor), 1 - epsW, 1 + epsW)`.
 * 4. `'mean_one'` rescales so the mean weight over V is exactly 1: the row's summed advantage equals
 *    `A * |V|`, as with GRPO; weights lie in `[1/(1+alpha), 1+alpha]` (`'rlsd'`:
 *    `[(1-epsW)/(1+epsW), (1+epsW)/(1-epsW)]`). Equal unit weights give exactly 1 (GRPO).
 * 5. Output `A * weight` per valid token, 0 on masked tokens.
 *
 * With `anchorSignal: 'logratio'` (GEAR-proposed, not the paper's), steps 1 and 3 read the sampled-token
 * log-ratio signal `s = max(0, −logratio)` in D's place (capped at `klCap`); `divergence` may be left out.
 *
 * Batch quantiles are exact (torch.quantile-style linear interpolation over valid tokens). The scan and
 * the scatter run natively, multithreaded over rows, with bit-identical results for any thread count.
 * Masked tokens are never read for values (their divergence / entropy may hold anything).
 *
 * @param a advantages, packed-row layout, per-token signals and options (see {@link GearInput})
 * @returns per-token advantages, weights, segment ids, anchors and diagnostics
 * @throws GearError `ERR_SHAPE` / `ERR_DTYPE` / `ERR_OFFSETS` on mismatched inputs, `ERR_NON_FINITE` on
 *   NaN divergence or logratio, non-finite entropy or advantages, `ERR_TARGET_RANGE` on divergence or
 *   entropy below -1e-6, `ERR_OPTION` on unknown or out-of-range options (or `'rlsd'` or
 *   `anchorSignal: 'logratio'` without `logratio`).
 *
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two rows (7 tokens); per token: divergence from the answer-conditioned teacher, and student entropy
 * const offsets = Int32Array.of(0, 4, 7);
 * const divergence = Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4);
 * const entropy = Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2);
 * const advantages = rl.grpo({ rewards: [1, 0], groups: [0, 0] }); // one per row
 * const r = rl.gearAdvantages({ advantages, offsets, divergence, entropy, options: { alpha: 1, peakMinKl: 0.25 } });
 * console.log(r.advantages); // per token: the row's advantage times its weight
 * console.log(r.weights, r.segmentId, r.anchors, r.diagnostics);
 * ```
 * @category GEAR
 */
export function gearAdvantages(a: GearInput | GearLogratioInput): GearResult {
  if (typeof a !== 'object' || a === null) fail('ERR_OPTION', 'gear(a)', 'an object', a);
  v.knownKeys(a, 'gear(a)', INPUT_KEYS);
  // each argument read once, in a fixed order, before anything is checked
  const { advantages, offsets, mask, divergence, entropy, logratio, options, out } = a;
  const o = resolveGearOptions(options);
  v.knownKeys(out, 'out', ['advantages', 'weights', 'segmentId']);
  const outA = out?.advantages, outW = out?.weights, outS = out?.segmentId;
  // The log-ratio anchor signal never reads the divergence: without one, the logratio sets N.
  const lrOnly = o.anchorSignal === 'logratio' && divergence === undefined;
  if (lrOnly && logratio === undefined) fail('ERR_OPTION', 'logratio', "a Float32Array (anchorSignal 'logratio')", undefined);
  const div = lrOnly ? undefined : v.f32(divergence, 'divergence');
  const n = div ? div.length : v.f32(logratio, 'logratio').length;
  const rows = v.offsets(offsets, 'offsets', n);
  const ent = v.f32(entropy, 'entropy', n);
  const adv = gearAdvantagesArg(advantages, rows);
  const m = gearMaskArg(mask, n);
  const lr = logratio === undefined ? undefined : v.f32(logratio, 'logratio', n);
  if (o.anchorSignal === 'logratio' && lr === undefined) fail('ERR_OPTION', 'logratio', "a Float32Array (anchorSignal 'logratio')", undefined);
  if (o.signMode === 'rlsd' && lr === undefined) fail('ERR_OPTION', 'logratio', "a Float32Array (signMode 'rlsd')", undefined);
  return gearChecked({ adv, offsets: offsets as Int32Array, rows, mask: m, div, ent, lr, o, out: gearOutArg(outA, outW, outS, n) });
}

/** @internal The caller's output arrays of {@link gear} (each already read once), checked: `n` long, the field's type. */
export function gearOutArg(advantages: unknown, weights: unknown, segmentId: unknown, n: number): GearChecked['out'] {
  return {
    advantages: advantages === undefined ? null : v.f32(advantages, 'out.advantages', n),
    weights: weights === undefined ? null : v.f32(weights, 'out.weights', n),
    segmentId: segmentId === undefined ? null : v.i32(segmentId, 'out.segmentId', n),
  };
}

/** @internal The per-row advantages of {@link gear}: numbers, finite, one per row (as a Float64Array). */
export function gearAdvantagesArg(advantages: unknown, rows: number): Float64Array {
  const adv = v.numbers(advantages, 'advantages');
  if (adv.length !== rows) fail('ERR_SHAPE', 'advantages.length', `the row count ${rows}`, adv.length);
  v.allFinite(adv, 'advantages');
  return adv;
}

/** @internal The mask of {@link gear}: its type and length (its 0/1 values are checked natively, in the pass that reads them). */
export function gearMaskArg(mask: unknown, n: number): Uint8Array | undefined {
  return v.optMaskShape(mask, 'mask', n);
}

/** @internal Checked inputs of one {@link gear} call. */
export interface GearChecked {
  adv: Float64Array; offsets: Int32Array; rows: number; mask: Uint8Array | undefined;
  div: Float32Array | undefined; ent: Float32Array; lr: Float32Array | undefined; o: ResolvedGearOptions;
  out: { advantages: Float32Array | null; weights: Float32Array | null; segmentId: Int32Array | null };
}

/** @internal {@link gear} over checked inputs: the native scan, then the diagnostics. */
export function gearChecked(p: GearChecked): GearResult {
  const { rows } = p;
  const r = gearScanOp.call({ advantages: p.adv, offsets: p.offsets, mask: p.mask, divergence: p.div, entropy: p.ent,
    logratio: p.lr, options: p.o, out: p.out });
  const s = r.diagnostics;
  const valid = s.validTokens, peaks = s.peaks, segments = s.segments, inSeg = s.tokensInSegments;
  return {
    advantages: r.advantages,
    weights: r.weights,
    segmentId: r.segmentId,
    anchors: r.anchors,
    diagnostics: {
      peaks, segments, tokensInSegments: inSeg,
      meanSegmentLength: segments > 0 ? inSeg / segments : 0,
      weightMin: s.weightMin, weightMax: s.weightMax,
      validTokens: valid,
      segmentTokenFraction: valid > 0 ? inSeg / valid : 0,
      peaksPerRow: rows > 0 ? peaks / rows : 0,
      thresholds: {
        entropy: s.entropyThreshold, entropyLow: s.entropyLowThreshold, dRef: s.dRef, peakKl: s.peakKlThreshold,
        fixedSegmentLength: s.fixedSegmentLength,
      },
      klQuantiles: s.klQuantiles,
      entropyQuantiles: s.entropyQuantiles,
    },
  };
}

/**
 * The API contract's name of {@link gearAdvantages} (same function, same arguments and result). Prefer
 * `gearAdvantages` in new code: `gear` reads like the package itself.
 *
 * @param a advantages, packed-row layout, per-token signals and options (see {@link GearInput})
 * @returns per-token advantages, weights, segment ids, anchors and diagnostics
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two rows (7 tokens); per token: divergence from the answer-conditioned teacher, and student entropy
 * const offsets = Int32Array.of(0, 4, 7);
 * const divergence = Float32Array.of(0.01, 3.5, 0.02, 0.01, 0.2, 0, 4);
 * const entropy = Float32Array.of(0.3, 2, 0.1, 0.1, 1.5, 0, 0.2);
 * const advantages = rl.grpo({ rewards: [1, 0], groups: [0, 0] }); // one per row
 * const { advantages: perToken, weights } = rl.gear({ advantages, offsets, divergence, entropy });
 * console.log(perToken, weights);
 * ```
 * @category GEAR
 */
export function gear(a: GearInput | GearLogratioInput): GearResult {
  return gearAdvantages(a);
}

/** @internal The `gear` advantage estimator (token level). */
export const gearEstimator: AdvantageEstimatorDefinition<GearInput> = {
  name: 'gear', level: 'token', description: 'GEAR-proposed divergence-anchored segment reweighting',
  options: GEAR_INPUT, compute: gearAdvantages,
};
