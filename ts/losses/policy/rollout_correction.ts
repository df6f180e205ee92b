/**
 * Rollout-correction importance weights (verl's rollout correction): `π_old / π_rollout` per token or
 * per row, truncated (TIS) or masked (IcePop), applied detached to each token's policy loss; and verl's
 * rejection sampling, which drops tokens or rows whose rollout/train divergence is out of bounds from
 * the loss mask.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { type FloatArray, finite, floats, rowsOf } from '../inputs.js';

/**
 * Rollout/train mismatch correction (verl's rollout correction): importance weights
 * `π_old / π_rollout` per token (`level: 'token'`) or per row (`'sequence'`, the product over the row's
 * valid tokens), computed from a ±20-clamped log ratio and applied (detached) to each token's loss.
 *
 * In verl's terms (`compute_rollout_correction_weights`): `level` is `rollout_is`; `mode: 'truncate'` with
 * `threshold: u` is `rollout_is_threshold = u` (TIS); `mode: 'mask'` with `lower: l, threshold: u` is
 * `rollout_is_threshold = "l_u"` (IcePop / masked IS); `batchNormalize` is `rollout_is_batch_normalize`.
 * `rejection` is `rollout_rs` with `rollout_rs_threshold` (`compute_rollout_rejection_mask`), see there.
 *
 * @category Losses
 */
export interface RolloutCorrection {
  /** Log-probs under the rollout (inference) policy, per token. */
  rolloutLogprob: FloatArray;
  /**
   * `'token'` (default) or `'sequence'`; `null` computes no importance weights (verl's `rollout_is: null`):
   * every valid token gets weight 1, only `rejection` and the diagnostics apply, and `threshold`, `mode`,
   * `lower` and `batchNormalize` are refused.
   *
   * @defaultValue `'token'`
   */
  level?: 'token' | 'sequence' | null;
  /**
   * Upper threshold, > 0 (default 2.0).
   *
   * @defaultValue `2`
   */
  threshold?: number;
  /**
   * `'truncate'` (default; TIS: `min(w, threshold)`) or `'mask'` (masked IS / IcePop: weights outside
   * `[lower, threshold]` become 0).
   *
   * @defaultValue `'truncate'`
   */
  mode?: 'truncate' | 'mask';
  /** Lower bound, in `(0, threshold]`: required with `mode: 'mask'`, refused with `'truncate'`. */
  lower?: number;
  /**
   * Divide the applied weights by their mean (over valid tokens at token level; over the rows with a
   * valid token, each row's mean weight, at sequence level), unless that mean is <= 1e-8.
   *
   * @defaultValue `false`
   */
  batchNormalize?: boolean;
  /**
   * Rejection sampling (verl's `rollout_rs` / `rollout_rs_threshold`, `compute_rollout_rejection_mask`): a
   * token is kept only if every criterion keeps it, and the result's `mask` (verl's modified
   * `response_mask`) replaces the loss mask, so rejected tokens leave the loss and its token counts. The
   * importance weights and their metrics still use the given mask, as in verl. With `δ` the log ratio
   * `ℓ_old − ℓ_rollout` clamped to ±20, a criterion's statistic per token is
   * `k1 = −δ`, `k2 = δ² / 2` or `k3 = e^δ − 1 − δ`, taken per token (`level: 'token'`, verl's `token_kN`)
   * or per row over its valid tokens: summed (`'sequence-sum'`, `seq_sum_kN`), averaged
   * (`'sequence-mean'`, `seq_mean_kN`: for `k1` the geometric mean of the ratios) or maximised
   * (`'sequence-max'`, `seq_max_k2` / `seq_max_k3`; there is no `k1` form), a rejected row losing all its
   * tokens. `k1` keeps `ln lower ≤ k1 ≤ ln threshold`, i.e. bounds on the ratio `π_rollout / π_old` (its
   * product over the row for the sum, its geometric mean for the mean); `k2` / `k3` keep values
   * `≤ threshold`. verl's option string `"token_k1,seq_max_k3"` with `rollout_rs_threshold: "0.5_2,0.01"`
   * is `[{ statistic: 'k1', level: 'token', lower: 0.5, threshold: 2 }, { statistic: 'k3', level:
   * 'sequence-max', threshold: 0.01 }]`. Each criterion may appear once.
   *
   * The metrics (verl's `compute_rs_metrics` and the masked fractions), with `name` the verl option
   * (`token_k1`, `seq_mean_k3`, ...), `s` the statistic per token (a row's value on each of its tokens at
   * sequence level), `v_i` per row (its value at sequence level, the mean of `s` over its tokens at token
   * level), over the rows with a valid token, `hi` = `ln threshold` for `k1`, else `threshold`, and
   * `lo` = `ln lower` for `k1`, else 0: `rollout_rs_<name>_mean` = m(s); `_max` / `_min` over the `v_i`
   * (sequence level) or the valid tokens' `s` (token level); `_fraction_high` / `_fraction_low` = share of
   * `v_i` (sequence level) or of valid tokens (token level) above `hi` / below `lo` (`_fraction_low` is 0
   * but for `k1`); `_std` = the standard deviation of `s` clamped to `[lo, hi]` over the valid tokens (0
   * with one); `_seq_mean`, `_seq_std` (unbiased, 0 for one row), `_seq_max`, `_seq_min`,
   * `_seq_max_deviation` (max `|v_i|`) and `_seq_fraction_high` (and `_seq_fraction_low` for `k1`) of the
   * `v_i`; `_masked_fraction` = share of valid tokens the criterion rejects, `_seq_masked_fraction` = share
   * of rows with a valid token where it rejects one. Over all criteria: `rollout_rs_masked_fraction` (of
   * valid tokens) and `rollout_rs_seq_masked_fraction` (of every row, empty ones included, as verl).
   */
  rejection?: ReadonlyArray<{
    /** `'k1'`, `'k2'` or `'k3'` (the suffix of verl's option name). */
    statistic: 'k1' | 'k2' | 'k3';
    /**
     * `'token'` (default), `'sequence-sum'`, `'sequence-mean'` or `'sequence-max'` (verl's `token_`,
     * `seq_sum_`, `seq_mean_`, `seq_max_`).
     *
     * @defaultValue `'token'`
     */
    level?: 'token' | 'sequence-sum' | 'sequence-mean' | 'sequence-max';
    /** Upper bound, > 0: on the ratio for `k1`, on the statistic for `k2` / `k3`. */
    threshold: number;
    /**
     * `k1` only: lower bound on the ratio, in `(0, threshold]` (verl's `"lower_upper"` threshold form).
     *
     * @defaultValue `1 / threshold`
     */
    lower?: number;
  }>;
}

/**
 * Result of {@link rolloutCorrectionWeights}.
 *
 * @category Losses
 */
export interface RolloutCorrectionResult {
  /**
   * Applied (detached) per-token weights, 0 on masked tokens; normalised when `batchNormalize` is set;
   * 1 on every valid token with `level: null`. Rejection does not change them.
   */
  weights: Float64Array;
  /**
   * With `rejection`: the mask with rejected tokens set to 0 (verl's modified `response_mask`), the mask
   * the loss then uses; absent otherwise.
   */
  mask?: Uint8Array;
  /**
   * verl's metrics (`compute_is_metrics`, none with `level: null`; the `rollout_rs_*` metrics of
   * {@link RolloutCorrection.rejection} with rejection), of the weights before normalisation. With `m(x) = Σ_valid x /
   * (count + 1e-8)` (verl's `masked_mean`), `w` the applied and `r` the raw (pre-truncation) weights,
   * `lo = lower` (mask mode) or `1 / threshold` (truncate mode):
   * - `rollout_is_mean` = m(w); `rollout_is_std` = √max(0, m(w²) − m(w)²) (0 with a single valid token);
   *   `rollout_is_eff_sample_size` = 1 / m((w / (m(w) + 1e-8))²) (`Infinity` when every weight is 0,
   *   where verl's division raises).
   * - token level: `rollout_is_max` / `rollout_is_min` over the valid tokens' `w`;
   *   `rollout_is_ratio_fraction_high` = m(r > threshold), `rollout_is_ratio_fraction_low` = m(r < lo).
   * - sequence level, over every row (a row without a valid token has log-ratio sum 0):
   *   `rollout_is_max` = exp(min(max_i S_i, 20)), `rollout_is_min` = exp(min_i S_i) with `S_i` the row's
   *   unclamped log-ratio sum; `rollout_is_ratio_fraction_high` / `_low` = share of rows with
   *   `S_i > ln threshold` / `S_i < ln lo`.
   * - per row, `q_i` = the row's m(w) (0 for a row without a valid token), over every row:
   *   `rollout_is_seq_mean`, `rollout_is_seq_std` (unbiased; 0 for one row), `rollout_is_seq_max`,
   *   `rollout_is_seq_min`, `rollout_is_seq_max_deviation` = max |q_i − 1|; and with the rows' m(r):
   *   `rollout_is_seq_fraction_high` (> threshold), `rollout_is_seq_fraction_low` (< lo).
   * - mask mode: `rollout_is_oob_ratio` = m(r < lower or r > threshold).
   * - `batchNormalize`: `rollout_is_batch_norm_factor` (the divisor, or 1 when the mean was <= 1e-8).
   */
  metrics: Record<string, number>;
  /**
   * verl's off-policy diagnostics (`compute_offpolicy_metrics`) of the rollout/train mismatch, with
   * `ℓ_old`, `ℓ_roll`, the log ratio `δ = ℓ_old − ℓ_roll`, `m(x)` as above and per row `a_i`, `b_i` the
   * rows' m(ℓ_old), m(ℓ_roll) (0 for a row without a valid token), averaged over every row:
   * `training_ppl` = mean exp(−a_i), `training_log_ppl` = mean(−a_i), `rollout_ppl`, `rollout_log_ppl`
   * likewise with `b_i`; `kl` = m(ℓ_roll − ℓ_old); `k3_kl` = m(e^δ − δ − 1) (unclamped: `Infinity` for a
   * huge ratio); with `d_i = b_i − a_i`: `log_ppl_diff` = mean d_i, `log_ppl_abs_diff` = mean |d_i|,
   * `log_ppl_diff_max`, `log_ppl_diff_min`, `ppl_ratio` = mean exp(d_i); `chi2_token` =
   * m(exp(2·clamp(δ, ±20))) − 1 and `chi2_seq` = mean exp(2·clamp(S_i, ±20)) − 1 with `S_i` the row's
   * log-ratio sum.
   */
  offPolicy: Record<string, number>;
}

/**
 * Rollout-correction importance weights (verl `compute_rollout_correction_weights`, checked against its
 * own outputs): the log ratio `ℓ_old − ℓ_rollout`, per token or summed over each row's valid tokens,
 * clamped to ±20, exponentiated, then truncated at `threshold` (TIS) or zeroed outside
 * `[lower, threshold]` (masked IS); optionally normalised to mean 1. With `rejection`, also verl's
 * rejection sampling (`compute_rollout_rejection_mask`): the mask without the rejected tokens, for the
 * loss. Every element is computed in float64. A batch without a valid token is refused (`ERR_SHAPE`),
 * as verl refuses it.
 *
 * @param oldLogprob the training policy's log-probs (ℓ_old)
 * @param offsets packed rows
 * @param mask optional 0/1 mask
 * @param rc rollout log-probs and the correction's options
 * @returns the weights, their metrics and, with rejection, the mask without the rejected tokens
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // truncated importance sampling between the trainer's old log-probs and the inference engine's
 * const oldLogprob = Float32Array.of(-1, -0.5, -2, -0.1);
 * const rolloutLogprob = Float32Array.of(-1.9, -0.5, -2.1, -0.1);
 * const { weights, metrics } = rl.rolloutCorrectionWeights(oldLogprob, Int32Array.of(0, 2, 4), undefined, {
 *   rolloutLogprob, level: 'token', mode: 'truncate', threshold: 2,
 * });
 * console.log(weights, metrics.rollout_is_mean); // weights[0] = min(exp(0.9), 2) = 2
 *
 * // rejection sampling alone (verl's rollout_rs "token_k1", threshold "0.5_2"): tokens whose ratio
 * // π_rollout / π_old leaves [0.5, 2] leave the loss mask
 * const rs = rl.rolloutCorrectionWeights(oldLogprob, Int32Array.of(0, 2, 4), undefined, {
 *   rolloutLogprob, level: null, rejection: [{ statistic: 'k1', level: 'token', lower: 0.5, threshold: 2 }],
 * });
 * console.log(rs.mask, rs.metrics.rollout_rs_masked_fraction); // Uint8Array [0, 1, 1, 1]: exp(-0.9) < 0.5
 * ```
 * @category Losses
 */
export function rolloutCorrectionWeights(
  oldLogprob: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, rc: RolloutCorrection,
): RolloutCorrectionResult {
  const s = readRolloutCorrection(rc);
  const old = floats(oldLogprob, 'oldLogprob');
  const n = old.length;
  const rows = rowsOf(offsets, n);
  const mk = v.optMask(mask, 'mask', n);
  const roll = floats(s.rolloutLogprob, 'rolloutCorrection.rolloutLogprob', n);
  finite(old, 'oldLogprob', mk);
  finite(roll, 'rolloutCorrection.rolloutLogprob', mk);
  return rolloutCorrectionOf(old, roll, offsets, rows, mk, s);
}

/** @internal A {@link RolloutCorrection} read once, its options checked; `rolloutLogprob` is checked with the other arrays. */
export interface RolloutCorrectionSettings {
  rolloutLogprob: unknown;
  level: 'token' | 'sequence' | null;
  mode: 'truncate' | 'mask';
  upper: number;
  lower: number;
  batchNormalize: boolean;
  criteria: Criterion[] | null;
}

/**
 * @internal Reads a {@link RolloutCorrection} argument: every field once, in a fixed order, then the
 * options' checks (no JavaScript of the caller's runs after the reads).
 */
export function readRolloutCorrection(rc: unknown): RolloutCorrectionSettings {
  v.argsObject(rc, 'rolloutCorrection');
  v.knownKeys(rc as object, 'rolloutCorrection', ['rolloutLogprob', 'level', 'threshold', 'mode', 'lower', 'batchNormalize', 'rejection']);
  const r = rc as Record<string, unknown>;
  const rolloutLogprob = r.rolloutLogprob, level0 = r.level, threshold = r.threshold, mode0 = r.mode, lower0 = r.lower;
  const batchNormalize = r.batchNormalize, rejection = r.rejection;
  const criteria = rejection === undefined ? null : rejectionCriteria(rejection);
  if (level0 === null) {
    for (const [k, x] of [['threshold', threshold], ['mode', mode0], ['lower', lower0], ['batchNormalize', batchNormalize]] as const) {
      if (x !== undefined) fail('ERR_OPTION', `rolloutCorrection.${k}`, 'no importance-weight option with level null (no weights)', x);
    }
  }
  const level = level0 === null ? null : v.enumOpt(level0, 'rolloutCorrection.level', ['token', 'sequence'] as const, 'token');
  const mode = v.enumOpt(mode0, 'rolloutCorrection.mode', ['truncate', 'mask'] as const, 'truncate');
  const upper = v.numOpt(threshold, 'rolloutCorrection.threshold', 2.0, { min: 0, minOpen: true });
  if (batchNormalize !== undefined && typeof batchNormalize !== 'boolean') {
    fail('ERR_OPTION', 'rolloutCorrection.batchNormalize', 'a boolean', batchNormalize);
  }
  let lower: number;
  if (mode === 'mask') {
    if (lower0 === undefined) fail('ERR_OPTION', 'rolloutCorrection.lower', `a number in (0, ${upper}] with mode 'mask'`, lower0);
    lower = v.numOpt(lower0, 'rolloutCorrection.lower', 0, { min: 0, minOpen: true, max: upper });
  } else {
    if (lower0 !== undefined) fail('ERR_OPTION', 'rolloutCorrection.lower', "no lower bound with mode 'truncate' (use mode 'mask')", lower0);
    lower = 1 / upper; // only the metrics' "low" fractions use it, as verl's
  }
  return { rolloutLogprob, level, mode, upper, lower, batchNormalize: batchNormalize === true, criteria };
}

/**
 * @internal The weights, metrics and rejection mask over checked inputs: `old` and `roll` of length N,
 * finite on valid tokens, `offsets` of `rows` rows over N, `mk` a 0/1 mask of length N.
 */
export function rolloutCorrectionOf(
  old: FloatArray, roll: FloatArray, offsets: Int32Array, rows: number, mk: Uint8Array | undefined, s: RolloutCorrectionSettings,
): RolloutCorrectionResult {
  const n = old.length;
  const { level, mode, upper, lower, criteria } = s;
  const valid = (t: number) => mk === undefined || mk[t] !== 0;

  // Raw weights r (0 on masked tokens), each row's unclamped log-ratio sum, the valid-token counts.
  const raw = new Float64Array(n);
  const rowSum = new Float64Array(rows);
  const rowCount = new Float64Array(rows);
  let count = 0;
  for (let i = 0; i < rows; i++) {
    let s = 0, c = 0;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (valid(t)) { s += old[t]! - roll[t]!; c++; }
    rowSum[i] = s;
    rowCount[i] = c;
    count += c;
    const rowW = Math.exp(clamp20(s));
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      if (valid(t)) raw[t] = level === 'sequence' ? rowW : Math.exp(clamp20(old[t]! - roll[t]!));
    }
  }
  if (count === 0) fail('ERR_SHAPE', 'mask', 'at least one valid token for the rollout correction', 'none');
  const den = count + 1e-8;
  const mean = (f: (t: number) => number) => {
    let s = 0;
    for (let t = 0; t < n; t++) if (valid(t)) s += f(t);
    return s / den;
  };
  const metrics: Record<string, number> = {};
  const w = new Float64Array(n);
  if (level === null) {
    for (let t = 0; t < n; t++) w[t] = valid(t) ? 1 : 0;
  } else {
    for (let t = 0; t < n; t++) {
      const r = raw[t]!;
      w[t] = mode === 'truncate' ? Math.min(r, upper) : r >= lower && r <= upper ? r : 0;
    }

    const wMean = mean((t) => w[t]!);
    metrics.rollout_is_mean = wMean;
    if (level === 'token') {
      metrics.rollout_is_ratio_fraction_high = mean((t) => (raw[t]! > upper ? 1 : 0));
      metrics.rollout_is_ratio_fraction_low = mean((t) => (raw[t]! < lower ? 1 : 0));
      let mx = -Infinity, mn = Infinity;
      for (let t = 0; t < n; t++) if (valid(t)) { mx = Math.max(mx, w[t]!); mn = Math.min(mn, w[t]!); }
      metrics.rollout_is_max = mx;
      metrics.rollout_is_min = mn;
    } else {
      let mx = -Infinity, mn = Infinity, hi = 0, lo = 0;
      const lnUpper = Math.log(upper), lnLower = Math.log(lower);
      for (let i = 0; i < rows; i++) {
        const s = rowSum[i]!;
        mx = Math.max(mx, s); mn = Math.min(mn, s);
        if (s > lnUpper) hi++;
        if (s < lnLower) lo++;
      }
      metrics.rollout_is_max = Math.exp(Math.min(mx, SAFETY_BOUND));
      metrics.rollout_is_min = Math.exp(mn);
      metrics.rollout_is_ratio_fraction_high = hi / rows;
      metrics.rollout_is_ratio_fraction_low = lo / rows;
    }
    // The applied weights are already within [0, threshold]: verl's clamp before std / ESS changes nothing.
    metrics.rollout_is_std = count > 1 ? Math.sqrt(Math.max(0, mean((t) => w[t]! * w[t]!) - wMean * wMean)) : 0;
    const essDen = wMean + 1e-8;
    metrics.rollout_is_eff_sample_size = 1 / mean((t) => (w[t]! / essDen) ** 2);

    // Per-row means q_i (0 for a row without a valid token) of the applied and the raw weights.
    const q = new Float64Array(rows), qRaw = new Float64Array(rows);
    for (let i = 0; i < rows; i++) {
      let sw = 0, sr = 0;
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (valid(t)) { sw += w[t]!; sr += raw[t]!; }
      q[i] = sw / (rowCount[i]! + 1e-8);
      qRaw[i] = sr / (rowCount[i]! + 1e-8);
    }
    let qs = 0, qmx = -Infinity, qmn = Infinity, dev = 0, qhi = 0, qlo = 0;
    for (let i = 0; i < rows; i++) {
      qs += q[i]!;
      qmx = Math.max(qmx, q[i]!); qmn = Math.min(qmn, q[i]!);
      dev = Math.max(dev, Math.abs(q[i]! - 1));
      if (qRaw[i]! > upper) qhi++;
      if (qRaw[i]! < lower) qlo++;
    }
    const qMean = qs / rows;
    let qv = 0;
    for (let i = 0; i < rows; i++) qv += (q[i]! - qMean) ** 2;
    metrics.rollout_is_seq_mean = qMean;
    metrics.rollout_is_seq_std = rows > 1 ? Math.sqrt(qv / (rows - 1)) : 0;
    metrics.rollout_is_seq_max = qmx;
    metrics.rollout_is_seq_min = qmn;
    metrics.rollout_is_seq_max_deviation = dev;
    metrics.rollout_is_seq_fraction_high = qhi / rows;
    metrics.rollout_is_seq_fraction_low = qlo / rows;
    if (mode === 'mask') metrics.rollout_is_oob_ratio = mean((t) => (raw[t]! < lower || raw[t]! > upper ? 1 : 0));

    if (s.batchNormalize) {
      let norm: number;
      if (level === 'token') norm = wMean;
      else {
        let rs = 0, rn = 0;
        for (let i = 0; i < rows; i++) if (rowCount[i]! > 0) { rs += q[i]!; rn++; }
        norm = rs / Math.max(rn, 1e-8);
      }
      if (norm > 1e-8) {
        for (let t = 0; t < n; t++) w[t] = w[t]! / norm;
        metrics.rollout_is_batch_norm_factor = norm;
      } else {
        metrics.rollout_is_batch_norm_factor = 1;
      }
    }
  }
  const out: RolloutCorrectionResult = { weights: w, metrics, offPolicy: offPolicyMetrics(old, roll, offsets, rows, valid, rowSum, rowCount, mean) };
  if (criteria !== null) out.mask = rejectionMask(criteria, old, roll, offsets, rows, valid, rowCount, count, metrics);
  return out;
}

/** verl's `compute_offpolicy_metrics` (see {@link RolloutCorrectionResult.offPolicy}). */
function offPolicyMetrics(
  old: FloatArray, roll: FloatArray, offsets: Int32Array, rows: number, valid: (t: number) => boolean,
  rowSum: Float64Array, rowCount: Float64Array, mean: (f: (t: number) => number) => number,
): Record<string, number> {
  let tp = 0, tl = 0, rp = 0, rlp = 0, dSum = 0, dAbs = 0, dMax = -Infinity, dMin = Infinity, ratio = 0, chiSeq = 0;
  for (let i = 0; i < rows; i++) {
    let so = 0, sr = 0;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (valid(t)) { so += old[t]!; sr += roll[t]!; }
    const a = so / (rowCount[i]! + 1e-8), b = sr / (rowCount[i]! + 1e-8), d = b - a;
    tp += Math.exp(-a); tl += -a; rp += Math.exp(-b); rlp += -b;
    dSum += d; dAbs += Math.abs(d); dMax = Math.max(dMax, d); dMin = Math.min(dMin, d); ratio += Math.exp(d);
    chiSeq += Math.exp(2 * clamp20(rowSum[i]!));
  }
  return {
    training_ppl: tp / rows,
    training_log_ppl: tl / rows,
    kl: mean((t) => roll[t]! - old[t]!),
    k3_kl: mean((t) => { const x = old[t]! - roll[t]!; return Math.exp(x) - x - 1; }),
    rollout_ppl: rp / rows,
    rollout_log_ppl: rlp / rows,
    log_ppl_diff: dSum / rows,
    log_ppl_abs_diff: dAbs / rows,
    log_ppl_diff_max: dMax,
    log_ppl_diff_min: dMin,
    ppl_ratio: ratio / rows,
    chi2_token: mean((t) => Math.exp(clamp20(old[t]! - roll[t]!)) ** 2) - 1,
    chi2_seq: chiSeq / rows - 1,
  };
}

/** verl's SAFETY_BOUND: log ratios are clamped to ±20 before exponentiating. */
const SAFETY_BOUND = 20;
const clamp20 = (x: number) => Math.min(Math.max(x, -SAFETY_BOUND), SAFETY_BOUND);

/** @internal One resolved rejection criterion: verl's option `name`, its statistic and bounds. */
export interface Criterion {
  name: string;
  statistic: 'k1' | 'k2' | 'k3';
  level: 'token' | 'sequence-sum' | 'sequence-mean' | 'sequence-max';
  upper: number;
  /** k1 only (else 0, unused). */
  lower: number;
}

const RS_LEVELS = ['token', 'sequence-sum', 'sequence-mean', 'sequence-max'] as const;
const RS_PREFIX = { token: 'token', 'sequence-sum': 'seq_sum', 'sequence-mean': 'seq_mean', 'sequence-max': 'seq_max' } as const;

/** Checks `rolloutCorrection.rejection` as verl's `_parse_rollout_rs_thresholds` does. */
function rejectionCriteria(x: unknown): Criterion[] {
  const what = 'rolloutCorrection.rejection';
  if (!Array.isArray(x) || x.length === 0) fail('ERR_OPTION', what, 'a non-empty array of criteria { statistic, level, threshold, lower? }', x);
  const seen = new Set<string>();
  if (x.length > v.MAX_LIST_LENGTH) fail('ERR_SHAPE', `${what}.length`, `at most ${v.MAX_LIST_LENGTH}`, x.length);
  // each element and each field read once (a hole reads as undefined and is refused)
  const items: Record<string, unknown>[] = [];
  for (let i = 0; i < x.length; i++) {
    const w = `${what}[${i}]`;
    const c0: unknown = x[i];
    v.argsObject(c0, w);
    v.knownKeys(c0 as object, w, ['statistic', 'level', 'threshold', 'lower']);
    const r = c0 as Record<string, unknown>;
    items.push({ statistic: r.statistic, level: r.level, threshold: r.threshold, lower: r.lower });
  }
  return items.map((c, i) => {
    const w = `${what}[${i}]`;
    if (c.statistic === undefined) fail('ERR_OPTION', `${w}.statistic`, "one of 'k1', 'k2', 'k3'", undefined);
    const statistic = v.enumOpt(c.statistic, `${w}.statistic`, ['k1', 'k2', 'k3'] as const, 'k1');
    const level = v.enumOpt(c.level, `${w}.level`, RS_LEVELS, 'token');
    if (level === 'sequence-max' && statistic === 'k1') {
      fail('ERR_OPTION', `${w}.statistic`, "'k2' or 'k3' with level 'sequence-max' (verl has no seq_max_k1)", statistic);
    }
    if (c.threshold === undefined) fail('ERR_OPTION', `${w}.threshold`, 'an upper bound > 0 (required)', undefined);
    const upper = v.numOpt(c.threshold, `${w}.threshold`, 0, { min: 0, minOpen: true });
    let lower = 0;
    if (statistic === 'k1') {
      if (c.lower === undefined) {
        lower = 1 / upper;
        if (!(lower > 0 && lower <= upper)) {
          fail('ERR_OPTION', `${w}.lower`, `a lower bound in (0, ${upper}] (the default 1 / threshold = ${lower} is not)`, undefined);
        }
      } else {
        lower = v.numOpt(c.lower, `${w}.lower`, 0, { min: 0, minOpen: true, max: upper });
      }
    } else if (c.lower !== undefined) {
      fail('ERR_OPTION', `${w}.lower`, `no lower bound with statistic '${statistic}' (only k1 has one)`, c.lower);
    }
    const name = `${RS_PREFIX[level]}_${statistic}`;
    if (seen.has(name)) fail('ERR_OPTION', w, `a criterion not given before (${name} appears twice)`, name);
    seen.add(name);
    return { name, statistic, level, upper, lower };
  });
}

/**
 * verl's `compute_rollout_rejection_mask` with `compute_rs_metrics`: the mask with rejected tokens
 * zeroed; adds the `rollout_rs_*` metrics to `metrics` (see {@link RolloutCorrection.rejection}).
 */
function rejectionMask(
  criteria: Criterion[], old: FloatArray, roll: FloatArray, offsets: Int32Array, rows: number,
  valid: (t: number) => boolean, rowCount: Float64Array, count: number, metrics: Record<string, number>,
): Uint8Array {
  const n = old.length;
  const den = count + 1e-8;
  let validRows = 0;
  for (let i = 0; i < rows; i++) if (rowCount[i]! > 0) validRows++;
  const combined = new Uint8Array(n).fill(1);
  const s = new Float64Array(n); // the statistic per token (a row's value on its tokens at sequence level)
  const rowV = new Float64Array(rows); // v_i: per row
  const keep = new Uint8Array(n);
  for (const c of criteria) {
    const k1 = c.statistic === 'k1';
    const hi = k1 ? Math.log(c.upper) : c.upper;
    const lo = k1 ? Math.log(c.lower) : 0;
    const pass = (x: number) => (k1 ? x >= lo && x <= hi : x <= hi);
    // per-token statistic of the clamped log ratio (masked tokens are never read)
    for (let t = 0; t < n; t++) {
      if (!valid(t)) continue;
      const d = clamp20(old[t]! - roll[t]!);
      s[t] = c.statistic === 'k1' ? -d : c.statistic === 'k2' ? 0.5 * d * d : Math.exp(d) - 1 - d;
    }
    for (let i = 0; i < rows; i++) {
      let acc = 0, mx = -Infinity;
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (valid(t)) { acc += s[t]!; mx = Math.max(mx, s[t]!); }
      const v_ = c.level === 'sequence-sum' ? acc : c.level === 'sequence-max' ? (mx === -Infinity ? 0 : mx) : acc / (rowCount[i]! + 1e-8);
      rowV[i] = v_;
      if (c.level !== 'token') {
        const ok = pass(v_) ? 1 : 0;
        for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (valid(t)) { s[t] = v_; keep[t] = ok; }
      }
    }
    if (c.level === 'token') for (let t = 0; t < n; t++) if (valid(t)) keep[t] = pass(s[t]!) ? 1 : 0;

    const p = `rollout_rs_${c.name}`;
    let sum = 0, tmx = -Infinity, tmn = Infinity, thi = 0, tlo = 0, cs = 0, cs2 = 0, rej = 0;
    for (let t = 0; t < n; t++) {
      if (!valid(t)) continue;
      const x = s[t]!;
      sum += x;
      tmx = Math.max(tmx, x); tmn = Math.min(tmn, x);
      if (x > hi) thi++;
      if (x < lo) tlo++;
      const cl = Math.min(Math.max(x, lo), hi);
      cs += cl; cs2 += cl * cl;
      if (!keep[t]) { rej++; combined[t] = 0; }
    }
    let rs = 0, rmx = -Infinity, rmn = Infinity, dev = 0, rhi = 0, rlo = 0, rowsRej = 0;
    for (let i = 0; i < rows; i++) {
      if (rowCount[i]! === 0) continue;
      const x = rowV[i]!;
      rs += x;
      rmx = Math.max(rmx, x); rmn = Math.min(rmn, x);
      dev = Math.max(dev, Math.abs(x));
      if (x > hi) rhi++;
      if (x < lo) rlo++;
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (valid(t) && !keep[t]) { rowsRej++; break; }
    }
    const seqLevel = c.level !== 'token';
    const rMean = rs / validRows;
    let rv = 0;
    for (let i = 0; i < rows; i++) if (rowCount[i]! > 0) rv += (rowV[i]! - rMean) ** 2;
    metrics[`${p}_mean`] = sum / den;
    metrics[`${p}_max`] = seqLevel ? rmx : tmx;
    metrics[`${p}_min`] = seqLevel ? rmn : tmn;
    metrics[`${p}_fraction_high`] = seqLevel ? rhi / validRows : thi / den;
    metrics[`${p}_fraction_low`] = k1 ? (seqLevel ? rlo / validRows : tlo / den) : 0;
    const cm = cs / den;
    metrics[`${p}_std`] = count > 1 ? Math.sqrt(Math.max(0, cs2 / den - cm * cm)) : 0;
    metrics[`${p}_seq_mean`] = rMean;
    metrics[`${p}_seq_std`] = validRows > 1 ? Math.sqrt(rv / (validRows - 1)) : 0;
    metrics[`${p}_seq_max`] = rmx;
    metrics[`${p}_seq_min`] = rmn;
    metrics[`${p}_seq_max_deviation`] = dev;
    metrics[`${p}_seq_fraction_high`] = rhi / validRows;
    if (k1) metrics[`${p}_seq_fraction_low`] = rlo / validRows;
    metrics[`${p}_masked_fraction`] = rej / den;
    metrics[`${p}_seq_masked_fraction`] = rowsRej / validRows;
  }
  const out = new Uint8Array(n);
  let rej = 0, rowsRej = 0;
  for (let i = 0; i < rows; i++) {
    let any = false;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      if (!valid(t)) continue;
      if (combined[t]) out[t] = 1;
      else { rej++; any = true; }
    }
    if (any) rowsRej++;
  }
  metrics.rollout_rs_masked_fraction = rej / den;
  metrics.rollout_rs_seq_masked_fraction = rowsRej / rows;
  return out;
}
