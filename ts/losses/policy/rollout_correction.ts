/**
 * Rollout-correction importance weights (verl's rollout correction): `π_old / π_rollout` per token or
 * per row, truncated (TIS) or masked (IcePop), applied detached to each token's policy loss.
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
 */
export interface RolloutCorrection {
  /** Log-probs under the rollout (inference) policy, per token. */
  rolloutLogprob: FloatArray;
  /** `'token'` (default) or `'sequence'`. */
  level?: 'token' | 'sequence';
  /** Upper threshold (default 2.0). */
  threshold?: number;
  /**
   * `'truncate'` (default; TIS: `min(w, threshold)`) or `'mask'` (masked IS / IcePop: weights outside
   * `[lower, threshold]` become 0).
   */
  mode?: 'truncate' | 'mask';
  /** Lower bound for `mode: 'mask'` (default 0). */
  lower?: number;
  /** Normalise the applied weights to mean 1 over valid tokens (token level) or rows (sequence level). */
  batchNormalize?: boolean;
}

/** Result of {@link rolloutCorrectionWeights}. */
export interface RolloutCorrectionResult {
  /** Applied (detached) per-token weights, 0 on masked tokens. */
  weights: Float64Array;
  /** `rollout_is_mean`, `rollout_is_min`, `rollout_is_max` (applied weights over valid tokens) and
   * `rollout_is_masked_fraction` (share of valid tokens whose weight was truncated or masked). */
  metrics: Record<string, number>;
}

/**
 * Rollout-correction importance weights (verl `compute_rollout_correction_weights`): the log ratio
 * `ℓ_old − ℓ_rollout`, per token or summed per row, clamped to ±20, exponentiated, then truncated at
 * `threshold` (TIS) or zeroed outside `[lower, threshold]` (masked IS); optionally normalised to mean 1.
 *
 * @param oldLogprob the training policy's log-probs (ℓ_old)
 * @param offsets packed rows
 * @param mask optional 0/1 mask
 * @param rc rollout log-probs and the correction's options
 * @returns the weights and their metrics
 */
export function rolloutCorrectionWeights(
  oldLogprob: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, rc: RolloutCorrection,
): RolloutCorrectionResult {
  v.argsObject(rc, 'rolloutCorrection');
  v.knownKeys(rc, 'rolloutCorrection', ['rolloutLogprob', 'level', 'threshold', 'mode', 'lower', 'batchNormalize']);
  const old = floats(oldLogprob, 'oldLogprob');
  const n = old.length;
  const rows = rowsOf(offsets, n);
  const mk = v.optMask(mask, 'mask', n);
  const roll = floats(rc.rolloutLogprob, 'rolloutCorrection.rolloutLogprob', n);
  finite(roll, 'rolloutCorrection.rolloutLogprob', mk);
  const level = v.enumOpt(rc.level, 'rolloutCorrection.level', ['token', 'sequence'] as const, 'token');
  const mode = v.enumOpt(rc.mode, 'rolloutCorrection.mode', ['truncate', 'mask'] as const, 'truncate');
  const upper = v.numOpt(rc.threshold, 'rolloutCorrection.threshold', 2.0, { min: 0, minOpen: true });
  const lower = v.numOpt(rc.lower, 'rolloutCorrection.lower', 0, { min: 0, max: upper });
  const w = new Float64Array(n);
  const raw = new Float64Array(n);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    if (level === 'sequence') {
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mk === undefined || mk[t]) s += old[t]! - roll[t]!;
    }
    const rowW = Math.exp(Math.min(Math.max(s, -20), 20));
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      if (mk !== undefined && mk[t] === 0) continue;
      raw[t] = level === 'sequence' ? rowW : Math.exp(Math.min(Math.max(old[t]! - roll[t]!, -20), 20));
    }
  }
  let changed = 0, cnt = 0, s = 0, mn = Infinity, mx = -Infinity;
  for (let t = 0; t < n; t++) {
    if (mk !== undefined && mk[t] === 0) continue;
    const r = raw[t]!;
    const x = mode === 'truncate' ? Math.min(r, upper) : r >= lower && r <= upper ? r : 0;
    w[t] = x;
    if (x !== r) changed++;
    cnt++; s += x;
    mn = Math.min(mn, x); mx = Math.max(mx, x);
  }
  if (rc.batchNormalize === true && cnt > 0) {
    let mean: number;
    if (level === 'token') mean = s / (cnt + 1e-8);
    else {
      let rs = 0, rn = 0;
      for (let i = 0; i < rows; i++) {
        let c = 0, ws = 0;
        for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mk === undefined || mk[t]) { c++; ws += w[t]!; }
        if (c > 0) { rs += ws / (c + 1e-8); rn++; }
      }
      mean = rs / Math.max(rn, 1e-8);
    }
    if (mean > 1e-8) for (let t = 0; t < n; t++) w[t] = w[t]! / mean;
  } else if (rc.batchNormalize !== undefined && typeof rc.batchNormalize !== 'boolean') {
    fail('ERR_OPTION', 'rolloutCorrection.batchNormalize', 'a boolean', rc.batchNormalize);
  }
  return {
    weights: w,
    metrics: {
      rollout_is_mean: cnt > 0 ? s / (cnt + 1e-8) : 0,
      rollout_is_min: cnt > 0 ? mn : 0,
      rollout_is_max: cnt > 0 ? mx : 0,
      rollout_is_masked_fraction: cnt > 0 ? changed / cnt : 0,
    },
  };
}
