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

// ---- native contract: the GEAR scan ----
// What this file calls in the addon; the `declare module` block adds it to NativeAddon (ts/core/addon_types.ts).

/** The resolved GEAR options, enumerations as codes (native/include/gear/gear_scan.h). @internal */
export interface GearScanOptions {
  klCap: number;
  /** 0 zscore, 1 quantile. */
  peakRule: 0 | 1;
  peakZ: number;
  peakMinKl: number;
  peakQuantile: number;
  entropyQuantile: number;
  /** Absent: the batch entropyQuantile quantile. */
  entropyThreshold?: number;
  /** 0 next_fork, 1 entropy_settles. */
  segmentEnd: 0 | 1;
  maxSegmentLength: number;
  alpha: number;
  dRefQuantile: number;
  /** 0 symmetric, 1 negative_only, 2 rlsd. */
  signMode: 0 | 1 | 2;
  epsW: number;
  /** 0 mean_one, 1 none. */
  normalize: 0 | 1;
  /** 0 none, 1 random_anchors, 2 fixed_length, 3 token_only. */
  ablation: 0 | 1 | 2 | 3;
  seed: number;
  /** 0: auto. */
  fixedSegmentLength: number;
  entropyLowQuantile: number;
  /** Absent: the batch entropyLowQuantile quantile. */
  entropyLowThreshold?: number;
  /** 0 divergence, 1 logratio (absent: 0). */
  anchorSignal?: 0 | 1;
}
/** @internal */
export interface GearScanParams {
  advantages: Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  /** Absent with anchorSignal 1 (the logratio then sets N). */
  divergence?: Float32Array | null;
  entropy: Float32Array;
  logratio?: Float32Array | null;
  options: GearScanOptions;
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
 * How departure points (divergence spikes) are detected.
 *
 * @category GEAR
 */
export type GearPeakRule = 'zscore' | 'quantile';
/**
 * How a segment that starts at a departure point ends.
 *
 * @category GEAR
 */
export type GearSegmentEnd = 'next_fork' | 'entropy_settles';
/**
 * How positive and negative trajectory advantages use the weights.
 *
 * @category GEAR
 */
export type GearSignMode = 'symmetric' | 'negative_only' | 'rlsd';
/**
 * Whether weights are rescaled to mean 1 over each row's valid tokens.
 *
 * @category GEAR
 */
export type GearNormalize = 'mean_one' | 'none';
/**
 * Ablations that remove one adaptive component while keeping the same normalisation.
 *
 * @category GEAR
 */
export type GearAblation = 'none' | 'random_anchors' | 'fixed_length' | 'token_only';
/**
 * The per-token signal that places anchors and sets their weights: the reverse KL `D` (the paper's), or
 * the sampled-token log-ratio signal `s = max(0, ℓ_student(y) − ℓ_teacher(y))` (GEAR-proposed).
 *
 * @category GEAR
 */
export type GearAnchorSignal = 'divergence' | 'logratio';

/**
 * Every switch of the GEAR-proposed design (docs/gear.md, "What is ours"), camelCase, with the same
 * defaults ({@link GEAR_DEFAULTS}). Unknown keys are rejected with `ERR_OPTION`.
 *
 * @category GEAR
 */
export interface GearOptions {
  /**
   * Cap on the divergence in nats, applied in float32 before anything else (default 20; +Infinity divergences become the cap).
   *
   * @defaultValue `20`
   */
  klCap?: number;
  /**
   * `'zscore'` (default): peak if the row z-score of D is >= `peakZ`; `'quantile'`: peak if D >= the batch `peakQuantile` quantile. Both also need D >= `peakMinKl`.
   *
   * @defaultValue `'zscore'`
   */
  peakRule?: GearPeakRule;
  /**
   * z-score threshold kappa of the `'zscore'` rule (default 2.0; >= 0). The z-score uses the row's population std + 1e-6.
   *
   * @defaultValue `2`
   */
  peakZ?: number;
  /**
   * Minimum divergence of a peak in nats (default 0.25; >= 0): rows that never really diverge get no peaks.
   *
   * @defaultValue `0.25`
   */
  peakMinKl?: number;
  /**
   * Batch quantile level of the `'quantile'` rule (default 0.95; in [0, 1]).
   *
   * @defaultValue `0.95`
   */
  peakQuantile?: number;
  /**
   * Entropy threshold eta as a batch quantile of the student entropy over valid tokens (default 0.8, "top-20% forking tokens").
   *
   * @defaultValue `0.8`
   */
  entropyQuantile?: number;
  /**
   * Absolute entropy threshold eta in nats; when set it replaces `entropyQuantile` (>= 0; default unset).
   *
   * @defaultValue `undefined` (`entropyQuantile` applies)
   */
  entropyThreshold?: number;
  /**
   * `'next_fork'` (default): a segment ends before the first token with entropy >= eta; `'entropy_settles'`: it continues while entropy >= eta_low and ends before the first token below it. Both also end at a new peak, a mask gap, `maxSegmentLength` and the row end.
   *
   * @defaultValue `'next_fork'`
   */
  segmentEnd?: GearSegmentEnd;
  /**
   * eta_low of `'entropy_settles'` as a batch entropy quantile (default 0.5). Extension of section 10.3, where eta_low is fixed at the median.
   *
   * @defaultValue `0.5`
   */
  entropyLowQuantile?: number;
  /**
   * Absolute eta_low in nats; when set it replaces `entropyLowQuantile` (>= 0; default unset).
   *
   * @defaultValue `undefined` (`entropyLowQuantile` applies)
   */
  entropyLowThreshold?: number;
  /**
   * Longest segment in tokens, L_max (default 256; integer >= 1).
   *
   * @defaultValue `256`
   */
  maxSegmentLength?: number;
  /**
   * Weight strength: unit weight `1 + alpha * min(D_anchor / D_ref, 1)` (default 1.0; >= 0; 0 gives GRPO). Unused by `'rlsd'`.
   *
   * @defaultValue `1`
   */
  alpha?: number;
  /**
   * Batch quantile of D that sets the scale D_ref = max(quantile, 1e-6) (default 0.95).
   *
   * @defaultValue `0.95`
   */
  dRefQuantile?: number;
  /**
   * `'symmetric'` (default), `'negative_only'` (weights only where A < 0), `'rlsd'` (`clip(exp(sign(A) * logratio_anchor), 1 - epsW, 1 + epsW)`, needs `logratio`).
   *
   * @defaultValue `'symmetric'`
   */
  signMode?: GearSignMode;
  /**
   * Clip half-width of the `'rlsd'` weights (default 0.2; in [0, 1)).
   *
   * @defaultValue `0.2`
   */
  epsW?: number;
  /**
   * `'mean_one'` (default): weights rescaled to mean 1 over each row's valid tokens, so the row's summed advantage equals GRPO's; `'none'`: raw weights.
   *
   * @defaultValue `'mean_one'`
   */
  normalize?: GearNormalize;
  /**
   * `'none'` (default) or an ablation: `'random_anchors'` (the same number of anchors per row as the rule finds, placed uniformly at random over the row's valid tokens, seeded by `seed` and the row index), `'fixed_length'` (the same anchors, segments of `fixedSegmentLength` tokens without the entropy rule), `'token_only'` (no segments: every token weighted by its own divergence).
   *
   * @defaultValue `'none'`
   */
  ablation?: GearAblation;
  /**
   * Seed of the `'random_anchors'` ablation (default 0; integer in [0, 2^32)).
   *
   * @defaultValue `0`
   */
  seed?: number;
  /**
   * Segment length of the `'fixed_length'` ablation (integer >= 1); default 0 = the batch mean segment length the adaptive rule produces (rounded, >= 1).
   *
   * @defaultValue `0` (the batch mean segment length)
   */
  fixedSegmentLength?: number;
  /**
   * The signal the spike rule, `peakMinKl`, `dRefQuantile` and the weights read (GEAR-proposed): `'divergence'` (default, the paper's reverse KL `D`) or `'logratio'`, `s_t = max(0, −logratio_t) = max(0, ℓ_student(y_t) − ℓ_teacher(y_t))` (the teacher disbelieves the sampled token), capped at `klCap` as `D` is; needs `logratio`, and `divergence` may be left out. Segments and the entropy rules are unchanged.
   *
   * @defaultValue `'divergence'`
   */
  anchorSignal?: GearAnchorSignal;
}

/**
 * {@link GearOptions} with every default filled in (absolute thresholds may stay `undefined`).
 *
 * @category GEAR
 */
export interface ResolvedGearOptions {
  /** See {@link GearOptions.klCap}. */ klCap: number;
  /** See {@link GearOptions.peakRule}. */ peakRule: GearPeakRule;
  /** See {@link GearOptions.peakZ}. */ peakZ: number;
  /** See {@link GearOptions.peakMinKl}. */ peakMinKl: number;
  /** See {@link GearOptions.peakQuantile}. */ peakQuantile: number;
  /** See {@link GearOptions.entropyQuantile}. */ entropyQuantile: number;
  /** See {@link GearOptions.entropyThreshold}. */ entropyThreshold: number | undefined;
  /** See {@link GearOptions.segmentEnd}. */ segmentEnd: GearSegmentEnd;
  /** See {@link GearOptions.entropyLowQuantile}. */ entropyLowQuantile: number;
  /** See {@link GearOptions.entropyLowThreshold}. */ entropyLowThreshold: number | undefined;
  /** See {@link GearOptions.maxSegmentLength}. */ maxSegmentLength: number;
  /** See {@link GearOptions.alpha}. */ alpha: number;
  /** See {@link GearOptions.dRefQuantile}. */ dRefQuantile: number;
  /** See {@link GearOptions.signMode}. */ signMode: GearSignMode;
  /** See {@link GearOptions.epsW}. */ epsW: number;
  /** See {@link GearOptions.normalize}. */ normalize: GearNormalize;
  /** See {@link GearOptions.ablation}. */ ablation: GearAblation;
  /** See {@link GearOptions.seed}. */ seed: number;
  /** See {@link GearOptions.fixedSegmentLength}. */ fixedSegmentLength: number;
  /** See {@link GearOptions.anchorSignal}. */ anchorSignal: GearAnchorSignal;
}

/**
 * The defaults of {@link GearOptions} (the table in docs/gear.md). Absolute thresholds are unset (`undefined`).
 *
 * @category GEAR
 */
export const GEAR_DEFAULTS: Readonly<ResolvedGearOptions> = Object.freeze({
  klCap: 20,
  peakRule: 'zscore',
  peakZ: 2.0,
  peakMinKl: 0.25,
  peakQuantile: 0.95,
  entropyQuantile: 0.8,
  entropyThreshold: undefined,
  segmentEnd: 'next_fork',
  entropyLowQuantile: 0.5,
  entropyLowThreshold: undefined,
  maxSegmentLength: 256,
  alpha: 1.0,
  dRefQuantile: 0.95,
  signMode: 'symmetric',
  epsW: 0.2,
  normalize: 'mean_one',
  ablation: 'none',
  seed: 0,
  fixedSegmentLength: 0,
  anchorSignal: 'divergence',
});

/**
 * The option keys {@link gear} accepts.
 *
 * @category GEAR
 */
export const GEAR_OPTION_KEYS: readonly (keyof GearOptions)[] = Object.freeze(
  Object.keys(GEAR_DEFAULTS) as (keyof GearOptions)[],
);

/**
 * Validates GEAR options and fills in the defaults. Throws `ERR_OPTION` on an unknown key or a value out
 * of range.
 *
 * @param options the user's options (may be undefined)
 * @returns every option with its value
 * @example
 * ```ts
 * import { resolveGearOptions } from 'gear-rl/diagnostics';
 *
 * const o = resolveGearOptions({ alpha: 0.5, segmentEnd: 'entropy_settles' });
 * console.log(o.alpha, o.klCap, o.maxSegmentLength); // 0.5 20 256: unset options take GEAR_DEFAULTS
 * ```
 * @category GEAR
 */
export function resolveGearOptions(options?: GearOptions): ResolvedGearOptions {
  v.knownKeys(options, 'options', GEAR_OPTION_KEYS);
  const o = (options ?? {}) as Record<string, unknown>;
  const unit = { min: 0, max: 1 };
  const thr = (k: string) => (o[k] === undefined ? undefined : v.numOpt(o[k], `options.${k}`, 0, { min: 0 }));
  return {
    klCap: v.numOpt(o.klCap, 'options.klCap', 20, { min: 0, minOpen: true, max: 3.4028234663852886e38 }),
    peakRule: v.enumOpt(o.peakRule, 'options.peakRule', ['zscore', 'quantile'] as const, 'zscore'),
    peakZ: v.numOpt(o.peakZ, 'options.peakZ', 2.0, { min: 0, finite: true }),
    peakMinKl: v.numOpt(o.peakMinKl, 'options.peakMinKl', 0.25, { min: 0, finite: true }),
    peakQuantile: v.numOpt(o.peakQuantile, 'options.peakQuantile', 0.95, unit),
    entropyQuantile: v.numOpt(o.entropyQuantile, 'options.entropyQuantile', 0.8, unit),
    entropyThreshold: thr('entropyThreshold'),
    segmentEnd: v.enumOpt(o.segmentEnd, 'options.segmentEnd', ['next_fork', 'entropy_settles'] as const, 'next_fork'),
    entropyLowQuantile: v.numOpt(o.entropyLowQuantile, 'options.entropyLowQuantile', 0.5, unit),
    entropyLowThreshold: thr('entropyLowThreshold'),
    maxSegmentLength: v.numOpt(o.maxSegmentLength, 'options.maxSegmentLength', 256, { min: 1, max: 2147483647, int: true }),
    alpha: v.numOpt(o.alpha, 'options.alpha', 1.0, { min: 0, finite: true }),
    dRefQuantile: v.numOpt(o.dRefQuantile, 'options.dRefQuantile', 0.95, unit),
    signMode: v.enumOpt(o.signMode, 'options.signMode', ['symmetric', 'negative_only', 'rlsd'] as const, 'symmetric'),
    epsW: v.numOpt(o.epsW, 'options.epsW', 0.2, { min: 0, max: 1, maxOpen: true }),
    normalize: v.enumOpt(o.normalize, 'options.normalize', ['mean_one', 'none'] as const, 'mean_one'),
    ablation: v.enumOpt(o.ablation, 'options.ablation',
      ['none', 'random_anchors', 'fixed_length', 'token_only'] as const, 'none'),
    seed: v.numOpt(o.seed, 'options.seed', 0, { min: 0, max: 4294967295, int: true }),
    fixedSegmentLength: v.numOpt(o.fixedSegmentLength, 'options.fixedSegmentLength', 0,
      { min: 0, max: 2147483647, int: true }),
    anchorSignal: v.enumOpt(o.anchorSignal, 'options.anchorSignal', ['divergence', 'logratio'] as const, 'divergence'),
  };
}

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
const ENUM_CODES = {
  peakRule: { zscore: 0, quantile: 1 },
  segmentEnd: { next_fork: 0, entropy_settles: 1 },
  signMode: { symmetric: 0, negative_only: 1, rlsd: 2 },
  normalize: { mean_one: 0, none: 1 },
  ablation: { none: 0, random_anchors: 1, fixed_length: 2, token_only: 3 },
  anchorSignal: { divergence: 0, logratio: 1 },
} as const;

/** Resolved options in the native form: enumerations as their codes. @internal */
export function gearParams(o: ResolvedGearOptions): GearScanOptions {
  return {
    ...o,
    peakRule: ENUM_CODES.peakRule[o.peakRule], segmentEnd: ENUM_CODES.segmentEnd[o.segmentEnd],
    signMode: ENUM_CODES.signMode[o.signMode], normalize: ENUM_CODES.normalize[o.normalize],
    ablation: ENUM_CODES.ablation[o.ablation], anchorSignal: ENUM_CODES.anchorSignal[o.anchorSignal],
  };
}

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
  const oa = outA === undefined ? null : v.f32(outA, 'out.advantages', n);
  const ow = outW === undefined ? null : v.f32(outW, 'out.weights', n);
  const os = outS === undefined ? null : v.i32(outS, 'out.segmentId', n);
  return gearChecked({ adv, offsets: offsets as Int32Array, rows, mask: m, div, ent, lr, o, out: { advantages: oa, weights: ow, segmentId: os } });
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
    logratio: p.lr, options: gearParams(p.o), out: p.out });
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
