/**
 * GEAR's options, declared once: the {@link GearOptions} interface users read (its TSDoc) and the schema
 * its keys, bounds and defaults derive from ({@link GEAR_DEFAULTS}, {@link GEAR_OPTION_KEYS},
 * {@link resolveGearOptions}, the options table of docs/gear.md). The native scan reads the same options
 * by name (`GEAR_OPTIONS` in native/src/cpu/gear_scan.h); `test/gear/options.test.ts` holds the two
 * sides together.
 *
 * @module
 */
import * as v from '../core/validate.js';
import { KL_CAP_DEFAULT, KL_CAP_RULE } from '../core/logits.js';
import { type OptionSpec, type ResolvedOptions, resolveOptions } from '../registry/schema.js';

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

/** The largest float32: the scan caps the divergence in float32, so a cap must be one. */
const F32_MAX = 3.4028234663852886e38;
const UNIT = { min: 0, max: 1 } as const;
const INT32_MAX = 2147483647;

/**
 * The schema of {@link GearOptions}: each option's type, bounds and default (none: unset), in the order
 * the options are checked and listed. @internal
 */
export const GEAR_OPTION_SCHEMA = Object.freeze({
  klCap: { type: 'number', ...KL_CAP_RULE, max: F32_MAX, default: KL_CAP_DEFAULT },
  peakRule: { type: 'string', values: ['zscore', 'quantile'], default: 'zscore' },
  peakZ: { type: 'number', min: 0, finite: true, default: 2 },
  peakMinKl: { type: 'number', min: 0, finite: true, default: 0.25 },
  peakQuantile: { type: 'number', ...UNIT, default: 0.95 },
  entropyQuantile: { type: 'number', ...UNIT, default: 0.8 },
  entropyThreshold: { type: 'number', min: 0 },
  segmentEnd: { type: 'string', values: ['next_fork', 'entropy_settles'], default: 'next_fork' },
  entropyLowQuantile: { type: 'number', ...UNIT, default: 0.5 },
  entropyLowThreshold: { type: 'number', min: 0 },
  maxSegmentLength: { type: 'number', min: 1, max: INT32_MAX, int: true, default: 256 },
  alpha: { type: 'number', min: 0, finite: true, default: 1 },
  dRefQuantile: { type: 'number', ...UNIT, default: 0.95 },
  signMode: { type: 'string', values: ['symmetric', 'negative_only', 'rlsd'], default: 'symmetric' },
  epsW: { type: 'number', min: 0, max: 1, maxOpen: true, default: 0.2 },
  normalize: { type: 'string', values: ['mean_one', 'none'], default: 'mean_one' },
  ablation: { type: 'string', values: ['none', 'random_anchors', 'fixed_length', 'token_only'], default: 'none' },
  seed: { type: 'number', min: 0, max: 4294967295, int: true, default: 0 },
  fixedSegmentLength: { type: 'number', min: 0, max: INT32_MAX, int: true, default: 0 },
  anchorSignal: { type: 'string', values: ['divergence', 'logratio'], default: 'divergence' },
} as const satisfies { readonly [K in keyof GearOptions]-?: OptionSpec });

/**
 * {@link GearOptions} with every default filled in (absolute thresholds may stay `undefined`).
 *
 * @category GEAR
 */
export interface ResolvedGearOptions extends Required<Omit<GearOptions, 'entropyThreshold' | 'entropyLowThreshold'>> {
  /** See {@link GearOptions.entropyThreshold}: unset, the `entropyQuantile` quantile applies. */
  entropyThreshold: number | undefined;
  /** See {@link GearOptions.entropyLowThreshold}: unset, the `entropyLowQuantile` quantile applies. */
  entropyLowThreshold: number | undefined;
}

// The schema's values are the interface's types, option by option (a mismatch fails to compile).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type SchemaValues = { [K in keyof GearOptions]-?: (typeof GEAR_OPTION_SCHEMA)[K] extends { values: readonly (infer E)[] } ? E : number };
const schemaMatchesInterface: Same<SchemaValues, { [K in keyof GearOptions]-?: Exclude<GearOptions[K], undefined> }> = true;
// ... and the options it leaves unset (no default) are those ResolvedGearOptions may leave undefined
const unsetMatch: Same<ResolvedOptions<typeof GEAR_OPTION_SCHEMA>, ResolvedGearOptions> = true;
void schemaMatchesInterface, unsetMatch;

/**
 * The option keys `gear` accepts.
 *
 * @category GEAR
 */
export const GEAR_OPTION_KEYS: readonly (keyof GearOptions)[] = Object.freeze(Object.keys(GEAR_OPTION_SCHEMA) as (keyof GearOptions)[]);

/**
 * The defaults of {@link GearOptions} (the table in docs/gear.md). Absolute thresholds are unset (`undefined`).
 *
 * @category GEAR
 */
export const GEAR_DEFAULTS: Readonly<ResolvedGearOptions> = Object.freeze(
  Object.fromEntries(GEAR_OPTION_KEYS.map((k) => [k, (GEAR_OPTION_SCHEMA[k] as OptionSpec).default])) as unknown as ResolvedGearOptions,
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
  return resolveOptions(GEAR_OPTION_SCHEMA, (options ?? {}) as Record<string, unknown>, 'options.') as ResolvedGearOptions;
}

/**
 * The options table of docs/gear.md (markdown), from the schema: each option, what it accepts and its
 * default. @internal
 */
export function gearOptionsTable(): string {
  const rows = GEAR_OPTION_KEYS.map((k) => {
    const s: OptionSpec = GEAR_OPTION_SCHEMA[k];
    const accepts = s.values ? s.values.map((x) => `\`'${x}'\``).join(', ') : v.numRule(s);
    const dflt = s.default === undefined ? 'unset' : `\`${typeof s.default === 'string' ? `'${s.default}'` : s.default}\``;
    return `| \`${k}\` | ${accepts} | ${dflt} |`;
  });
  return ['| option | accepts | default |', '| --- | --- | --- |', ...rows].join('\n');
}
