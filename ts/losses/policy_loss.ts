/**
 * Policy-gradient losses with verl semantics (PPO clip with dual clip, GSPO, SAPO, GPG, CISPO, GMPO,
 * Clip-Cov, KL-Cov, DPPO-TV/KL, DRO), each returning the loss, d loss / d logprob per token and the
 * metrics verl logs. TRL's `GRPOTrainer` losses are reachable with `flavor: 'trl'` (see {@link trlLoss}).
 *
 * The TypeScript path is float64 throughout. Float32 inputs give a float32 gradient; float64 inputs a
 * float64 one. The common case (kind `ppo`, float32, no importance weights) runs in one fused native pass
 * whose per-token math is float32 (as verl's torch loss), with float64 sums (see {@link policyLoss}).
 *
 * @module
 */
import { GearError, fail } from '../core/errors.js';
import { abortable, native } from '../core/addon.js';
import * as v from '../core/validate.js';
import { AGG_MODES, AggMode, AggregateOptions, aggWeights, checkAggOptions } from './aggregate.js';
import { FloatArray, SEMANTICS, Semantics, finite, floats, maskedMeanEps, rowsOf, sameType } from './common.js';
import { mulberry32 } from '../core/prng.js';
import { TrlLossArgs, trlLoss } from './trl_loss.js';

/** The loss families (verl's `loss_mode` names `vanilla` and `geo_mean` are accepted as aliases). */
export type PolicyLossKind =
  | 'ppo' | 'vanilla' | 'gspo' | 'sapo' | 'gpg' | 'cispo' | 'gmpo' | 'geo_mean'
  | 'clip_cov' | 'kl_cov' | 'dppo_tv' | 'dppo_kl' | 'dro';

/** Every accepted {@link PolicyLossKind}. */
export const POLICY_LOSS_KINDS: readonly PolicyLossKind[] = [
  'ppo', 'vanilla', 'gspo', 'sapo', 'gpg', 'cispo', 'gmpo', 'geo_mean', 'clip_cov', 'kl_cov', 'dppo_tv', 'dppo_kl', 'dro',
];

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

/** Arguments of {@link policyLoss}. Everything per token is length N = `offsets[R]`. */
export interface PolicyLossArgs {
  /** Current policy log-probs ℓ (the variable the gradient is taken with respect to). */
  logprob: FloatArray;
  /** Old / behaviour policy log-probs ℓ_old. */
  oldLogprob: FloatArray;
  /** Per-token advantages (broadcast row advantages with `segmentBroadcast`). */
  advantages: FloatArray;
  /** Packed rows, Int32Array of length R+1. */
  offsets: Int32Array;
  /** Optional 0/1 loss mask (1 = a generated token that counts). */
  mask?: Uint8Array;
  /** The loss (default `'ppo'`). */
  kind?: PolicyLossKind;
  /** ε_low (default 0.2; verl's `clip_ratio_low ?? clip_ratio`). Must be >= 0. */
  clipLow?: number;
  /** ε_high (default = clipLow; verl's `clip_ratio_high ?? clip_ratio`). Must be >= 0. */
  clipHigh?: number;
  /** Dual-clip constant c for A < 0 (ppo; default 3, must be > 1) or the DPPO truncation (default 20). */
  clipC?: number;
  /** ±clamp of the log-ratio before exp (default 20; `null` = none, verl-agent's PPO). */
  logRatioClamp?: number | null;
  /** Aggregation mode (default `'token-mean'`; GSPO and SAPO always use `'seq-mean-token-mean'`, GMPO its own). */
  agg?: AggMode;
  /** Global token count for `token-mean` across micro-batches / ranks. */
  globalTokens?: number;
  /** Global non-empty row count for the `seq-mean-*` modes (and GMPO's row mean: then all rows of the global batch). */
  globalRows?: number;
  /** `seq-mean-token-sum-norm` divisor (default: the longest row's length). */
  lossScaleFactor?: number;
  /** Data-parallel multiplier (verl's `dp_size`, default 1). */
  dpSize?: number;
  /** Which verl version's semantics (aggregation, PPO clamp); default `'verl'`. */
  semantics?: Semantics;
  /** Per-token importance weights applied (detached) to each token's loss, e.g. from rollout correction. */
  isWeights?: FloatArray;
  /** Compute rollout-correction weights inside the loss (see {@link RolloutCorrection}). */
  rolloutCorrection?: RolloutCorrection;
  /** SAPO temperature for A > 0 (default 1.0). */
  tauPos?: number;
  /** SAPO temperature for A <= 0 (default 1.05). */
  tauNeg?: number;
  /** Clip-Cov: share of valid tokens whose gradient is removed (default 2e-4). */
  clipCovRatio?: number;
  /** Clip-Cov: lower covariance bound (default 1.0). */
  clipCovLb?: number;
  /** Clip-Cov: upper covariance bound (default 5.0). */
  clipCovUb?: number;
  /**
   * Clip-Cov: seed of the random pick among candidates (default 0). When every candidate is picked the
   * result does not depend on it; otherwise the pick is a seeded partial Fisher-Yates shuffle (verl
   * uses `torch.randperm`, which cannot be reproduced bit for bit).
   */
  seed?: number;
  /** KL-Cov: share of valid tokens that get the |δ| penalty (default 2e-4). */
  klCovRatio?: number;
  /** KL-Cov: coefficient of |δ| (default 1.0, verl's function fallback; its config uses 0.1). */
  ppoKlCoef?: number;
  /** DRO: β (required, > 0). */
  droBeta?: number;
  /** `'verl'` (default) or `'trl'`: with `'trl'` the arguments are those of {@link trlLoss}. */
  flavor?: 'verl' | 'trl';
  /** Use the fused native kernel when it applies (default true). */
  native?: boolean;
  /**
   * Gradient output to fill instead of allocating one (same float type as `logprob`, length N, not
   * overlapping an input), returned as `grad`; its contents are unspecified after an error. Reusing one
   * across steps saves the allocation and its first-touch page faults, a large share of the fused
   * pass's time at 10^7 tokens. Verl flavor only.
   */
  out?: FloatArray;
}

/** Result of {@link policyLoss}. */
export interface PolicyLossResult<G extends FloatArray = FloatArray> {
  /** The aggregated loss. */
  loss: number;
  /** d loss / d logprob per token (same float type as `logprob`; 0 on masked tokens). */
  grad: G;
  /**
   * Metrics under stable names: `pg_clipfrac`, `pg_clipfrac_lower`, `ppo_kl` (verl's masked means, with
   * its `+1e-8`), `ratio_mean`, `ratio_min`, `ratio_max` (over valid tokens), and `rollout_is_*` when a
   * rollout correction is applied.
   */
  metrics: Record<string, number>;
}

const KEYS = [
  'logprob', 'oldLogprob', 'advantages', 'offsets', 'mask', 'kind', 'clipLow', 'clipHigh', 'clipC', 'logRatioClamp',
  'agg', 'globalTokens', 'globalRows', 'lossScaleFactor', 'dpSize', 'semantics', 'isWeights', 'rolloutCorrection',
  'tauPos', 'tauNeg', 'clipCovRatio', 'clipCovLb', 'clipCovUb', 'seed', 'klCovRatio', 'ppoKlCoef', 'droBeta', 'flavor',
  'native', 'out',
] as const;

/** Per-token loss terms before aggregation. */
interface Terms {
  L: Float64Array;   // per-token loss
  dL: Float64Array;  // d L_t / d ℓ_t
  metrics: Record<string, number>;
  forcedAgg?: AggMode;
}

/** d max(a, b) routing as torch.maximum: ties split the gradient evenly. */
function maxGrad(a: number, b: number, da: number, db: number): number {
  return a > b ? da : b > a ? db : 0.5 * (da + db);
}
function minGrad(a: number, b: number, da: number, db: number): number {
  return a < b ? da : b < a ? db : 0.5 * (da + db);
}

/** Clamp with torch's gradient convention: passes (1) inside [lo, hi] inclusive, 0 outside. */
function clampD(x: number, lo: number, hi: number): [number, number] {
  if (x < lo) return [lo, 0];
  if (x > hi) return [hi, 0];
  return [x, 1];
}

function ratioStats(n: number, mask: Uint8Array | undefined, ratio: (t: number) => number, metrics: Record<string, number>): void {
  let s = 0, c = 0, mn = Infinity, mx = -Infinity;
  for (let t = 0; t < n; t++) {
    if (mask !== undefined && mask[t] === 0) continue;
    const r = ratio(t);
    s += r; c++;
    if (r < mn) mn = r;
    if (r > mx) mx = r;
  }
  metrics.ratio_mean = c > 0 ? s / c : 0;
  metrics.ratio_min = c > 0 ? mn : 0;
  metrics.ratio_max = c > 0 ? mx : 0;
}

/** Resolved numeric options. */
interface Opts {
  kind: PolicyLossKind;
  lo: number; hi: number; c: number; clamp: number; tauPos: number; tauNeg: number;
  clipCovRatio: number; clipCovLb: number; clipCovUb: number; seed: number;
  klCovRatio: number; ppoKlCoef: number; droBeta: number;
}

function ppoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts, dual: boolean): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const ratio = new Float64Array(n);
  let clipN = 0, lowerN = 0, kl = 0, cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const [x, dx] = clampD(lp[t]! - old[t]!, -o.clamp, o.clamp);
    const r = Math.exp(x);
    ratio[t] = r;
    const L1 = -a * r;
    const [rc, drc] = clampD(r, 1 - o.lo, 1 + o.hi);
    const L2 = -a * rc;
    const d1 = -a * r * dx;
    const d2 = -a * r * dx * drc;
    const Lc = Math.max(L1, L2);
    const dc = maxGrad(L1, L2, d1, d2);
    let Lt = Lc, dt = dc;
    let lower = 0;
    if (dual && a < 0) {
      const L3 = -a * o.c;
      Lt = Math.min(L3, Lc);
      dt = minGrad(L3, Lc, 0, dc);
      lower = Lc > L3 ? 1 : 0;
    }
    L[t] = Lt;
    dL[t] = dt;
    if (mask === undefined || mask[t]) {
      clipN += L2 > L1 ? 1 : 0;
      lowerN += lower;
      kl += -x;
      cnt++;
    }
  }
  const metrics: Record<string, number> = {
    pg_clipfrac: clipN / (cnt + 1e-8),
    pg_clipfrac_lower: lowerN / (cnt + 1e-8),
    ppo_kl: kl / (cnt + 1e-8),
  };
  ratioStats(n, mask, (t) => ratio[t]!, metrics);
  return { L, dL, metrics };
}

function gspoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, o: Opts): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const ratio = new Float64Array(n);
  const rows = offsets.length - 1;
  let clipN = 0, kl = 0, cnt = 0;
  for (let i = 0; i < rows; i++) {
    let s = 0, len = 0;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      const mt = mask === undefined ? 1 : mask[t]!;
      s += (lp[t]! - old[t]!) * mt;
      len += mt;
    }
    const seq = s / Math.max(len, 1);
    // log s_{i,t} = ℓ − sg(ℓ) + sg(seq), clamped at max 10: value seq, gradient s_{i,t}
    const x = Math.min(seq, 10);
    const dx = seq > 10 ? 0 : 1;
    const r = Math.exp(x);
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      const a = A[t]!;
      ratio[t] = r;
      const L1 = -a * r;
      const [rc, drc] = clampD(r, 1 - o.lo, 1 + o.hi);
      const L2 = -a * rc;
      L[t] = Math.max(L1, L2);
      dL[t] = maxGrad(L1, L2, -a * r * dx, -a * r * dx * drc);
      if (mask === undefined || mask[t]) {
        clipN += L2 > L1 ? 1 : 0;
        kl += -(lp[t]! - old[t]!);
        cnt++;
      }
    }
  }
  const metrics: Record<string, number> = {
    pg_clipfrac: clipN / (cnt + 1e-8), pg_clipfrac_lower: 0, ppo_kl: kl / (cnt + 1e-8),
  };
  ratioStats(n, mask, (t) => ratio[t]!, metrics);
  return { L, dL, metrics, forcedAgg: 'seq-mean-token-mean' };
}

function sapoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const ratio = new Float64Array(n);
  let kl = 0, cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const [x, dx] = clampD(lp[t]! - old[t]!, -20, 20);
    const r = Math.exp(x);
    ratio[t] = r;
    const tau = a > 0 ? o.tauPos : o.tauNeg;
    const sg = 1 / (1 + Math.exp(-tau * (r - 1)));
    L[t] = -sg * (4 / tau) * a;
    dL[t] = -a * 4 * sg * (1 - sg) * r * dx;
    if (mask === undefined || mask[t]) { kl += -x; cnt++; }
  }
  const metrics: Record<string, number> = { pg_clipfrac: 0, pg_clipfrac_lower: 0, ppo_kl: kl / (cnt + 1e-8) };
  ratioStats(n, mask, (t) => ratio[t]!, metrics);
  return { L, dL, metrics, forcedAgg: 'seq-mean-token-mean' };
}

function gpgTerms(lp: FloatArray, A: FloatArray): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  for (let t = 0; t < n; t++) { L[t] = -lp[t]! * A[t]!; dL[t] = -A[t]!; }
  return { L, dL, metrics: {} };
}

function cispoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const ratio = new Float64Array(n);
  let clipN = 0, kl = 0, cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const x = Math.min(Math.max(lp[t]! - old[t]!, -20), 20);
    const r = Math.exp(x);
    ratio[t] = r;
    const w = Math.min(Math.max(r, 1 - o.lo), 1 + o.hi);
    L[t] = -w * a * lp[t]!;
    dL[t] = -w * a;
    if (mask === undefined || mask[t]) { clipN += r !== w ? 1 : 0; kl += -x; cnt++; }
  }
  const metrics: Record<string, number> = { pg_clipfrac: clipN / (cnt + 1e-8), pg_clipfrac_lower: 0, ppo_kl: kl / (cnt + 1e-8) };
  ratioStats(n, mask, (t) => ratio[t]!, metrics);
  return { L, dL, metrics };
}

function dppoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts, tv: boolean): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const ratio = new Float64Array(n);
  let invalidN = 0, lowerN = 0, kl = 0, cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const x = Math.min(Math.max(lp[t]! - old[t]!, -20), 20);
    const r = Math.exp(x);
    ratio[t] = r;
    const w = Math.min(r, o.c);
    const p = Math.exp(lp[t]!);
    const q = Math.exp(old[t]!);
    let valid: boolean;
    if (tv) {
      valid = a > 0 ? p - q <= o.hi : p - q >= -o.lo;
    } else {
      const bkl = q * (old[t]! - lp[t]!) + (1 - q) * Math.log((1 - q + 1e-8) / (1 - p + 1e-8));
      valid = a > 0 ? bkl <= o.hi || p <= q : bkl <= o.lo || p >= q;
    }
    const vm = valid ? 1 : 0;
    L[t] = -a * w * lp[t]! * vm;
    dL[t] = -a * w * vm;
    if (mask === undefined || mask[t]) {
      invalidN += 1 - vm;
      lowerN += (r > o.c ? 1 : 0) * vm;
      kl += -x;
      cnt++;
    }
  }
  const metrics: Record<string, number> = {
    pg_clipfrac: invalidN / (cnt + 1e-8), pg_clipfrac_lower: lowerN / (cnt + 1e-8), ppo_kl: kl / (cnt + 1e-8),
  };
  ratioStats(n, mask, (t) => ratio[t]!, metrics);
  return { L, dL, metrics };
}

function droTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  for (let t = 0; t < n; t++) {
    const d = lp[t]! - old[t]!;
    L[t] = -(lp[t]! * A[t]! - 0.5 * o.droBeta * d * d);
    dL[t] = -(A[t]! - o.droBeta * d);
  }
  const metrics: Record<string, number> = { ppo_kl: maskedMeanEps((t) => -(lp[t]! - old[t]!), n, mask) };
  ratioStats(n, mask, (t) => Math.exp(lp[t]! - old[t]!), metrics);
  return { L, dL, metrics };
}

function klCovTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const valid: number[] = [];
  for (let t = 0; t < n; t++) {
    const d = lp[t]! - old[t]!;
    const r = Math.exp(d);
    L[t] = -A[t]! * r;
    dL[t] = -A[t]! * r;
    if (mask === undefined || mask[t]) valid.push(t);
  }
  if (valid.length > 0) {
    let ma = 0, ml = 0;
    for (const t of valid) { ma += A[t]!; ml += lp[t]!; }
    ma /= valid.length; ml /= valid.length;
    const k = Math.max(1, Math.floor(valid.length * o.klCovRatio));
    // top-k by covariance, ties broken by position (stable)
    const order = valid.map((t, j) => ({ t, j, c: (A[t]! - ma) * (lp[t]! - ml) }));
    order.sort((x, y) => (y.c - x.c) || (x.j - y.j));
    for (let j = 0; j < k && j < order.length; j++) {
      const t = order[j]!.t;
      const d = lp[t]! - old[t]!;
      L[t] = L[t]! + o.ppoKlCoef * Math.abs(d);
      dL[t] = dL[t]! + o.ppoKlCoef * (d > 0 ? 1 : d < 0 ? -1 : 0);
    }
  }
  const metrics: Record<string, number> = { ppo_kl: maskedMeanEps((t) => Math.abs(lp[t]! - old[t]!), n, mask) };
  ratioStats(n, mask, (t) => Math.exp(lp[t]! - old[t]!), metrics);
  return { L, dL, metrics };
}

function clipCovTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const byOrigin = new Uint8Array(n);
  let cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const r = Math.exp(lp[t]! - old[t]!);
    const L1 = -a * r;
    const [rc, drc] = clampD(r, 1 - o.lo, 1 + o.hi);
    const L2 = -a * rc;
    L[t] = Math.max(L1, L2);
    dL[t] = maxGrad(L1, L2, -a * r, -a * r * drc);
    const mt = mask === undefined ? 1 : mask[t]!;
    byOrigin[t] = L2 > L1 && mt ? 1 : 0;
    cnt += mt;
  }
  const mA = maskedMeanEps((t) => A[t]!, n, mask);
  const mL = maskedMeanEps((t) => lp[t]!, n, mask);
  const cand: number[] = [];
  for (let t = 0; t < n; t++) {
    if ((mask !== undefined && mask[t] === 0) || byOrigin[t]) continue;
    const cov = (A[t]! - mA) * (lp[t]! - mL);
    if (cov < o.clipCovUb && cov > o.clipCovLb) cand.push(t);
  }
  const clipNum = Math.max(Math.floor(o.clipCovRatio * cnt), 1);
  let picked: number[];
  if (clipNum >= cand.length) {
    picked = cand;
  } else {
    const rnd = mulberry32(o.seed);
    const arr = cand.slice();
    for (let j = 0; j < clipNum; j++) {
      const k = j + Math.floor(rnd() * (arr.length - j));
      const tmp = arr[j]!; arr[j] = arr[k]!; arr[k] = tmp;
    }
    picked = arr.slice(0, clipNum);
  }
  for (const t of picked) { L[t] = L[t]! * 0; dL[t] = 0; }
  const metrics: Record<string, number> = {
    pg_clipfrac: picked.length / (cnt + 1e-8),
    ppo_kl: maskedMeanEps((t) => -(lp[t]! - old[t]!), n, mask),
  };
  ratioStats(n, mask, (t) => Math.exp(lp[t]! - old[t]!), metrics);
  return { L, dL, metrics };
}

/** GMPO (verl `geo_mean`): its own reduction (mean over all rows); returns value and per-token gradient. */
function gmpo(lp: FloatArray, old: FloatArray, A: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined,
  o: Opts, isw: Float64Array | undefined, globalRows: number | undefined): { value: number; g: Float64Array; metrics: Record<string, number> } {
  const n = lp.length;
  const rows = offsets.length - 1;
  // verl averages over this call's rows; `globalRows` makes micro-batches add up to the full batch
  const denom = globalRows ?? rows;
  const g = new Float64Array(n);
  const gx = new Float64Array(n);
  let value = 0;
  let hiN = 0, loN = 0;
  for (let i = 0; i < rows; i++) {
    let sx = 0, sa = 0, len = 0, slw = 0;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      const mt = mask === undefined ? 1 : mask[t]!;
      const a = A[t]!;
      const x = lp[t]! - old[t]!;
      const sgn = a > 0 ? 1 : a < 0 ? -1 : 0;
      const [xc, inR] = clampD(x, -o.lo, o.hi);
      const p = sgn * x, q = sgn * xc;
      const mn = Math.min(p, q);
      const xs = sgn * mn;
      // d x*/d x = sgn · d min(p, q)/d x, with torch's even split on ties
      gx[t] = sgn * minGrad(p, q, sgn, sgn * inR);
      sx += xs * mt;
      sa += a * mt;
      len += mt;
      if (isw) slw += Math.log(isw[t]! + 1e-10) * mt;
      if (mt) {
        const clipped = x !== xc;
        if (clipped && a > 0) hiN++;
        if (clipped && a < 0) loN++;
      }
    }
    const ratio = Math.exp(sx / (len + 1e-8));
    const abar = sa / (len + 1e-8);
    const sw = isw ? Math.exp(slw / (len + 1e-8)) : 1;
    value += -abar * ratio * sw;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) {
      const mt = mask === undefined ? 1 : mask[t]!;
      g[t] = mt ? (-abar * ratio * sw * gx[t]!) / (len + 1e-8) / denom : 0;
    }
  }
  let cnt = 0;
  for (let t = 0; t < n; t++) cnt += mask === undefined ? 1 : mask[t]!;
  const metrics: Record<string, number> = {
    pg_clipfrac: hiN / (cnt + 1e-8), pg_clipfrac_lower: loN / (cnt + 1e-8),
    ppo_kl: maskedMeanEps((t) => -(lp[t]! - old[t]!), n, mask),
  };
  ratioStats(n, mask, (t) => Math.exp(lp[t]! - old[t]!), metrics);
  return { value: rows > 0 ? value / denom : 0, g, metrics };
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

function resolveOpts(a: PolicyLossArgs, kind: PolicyLossKind, sem: Semantics): Opts {
  const lo = v.numOpt(a.clipLow, 'clipLow', 0.2, { min: 0, finite: true });
  const hi = v.numOpt(a.clipHigh, 'clipHigh', lo, { min: 0, finite: true });
  const isDppo = kind === 'dppo_tv' || kind === 'dppo_kl';
  const c = isDppo
    ? v.numOpt(a.clipC, 'clipC', 20, { min: 0, minOpen: true })
    : v.numOpt(a.clipC, 'clipC', 3, { min: 1, minOpen: true });
  let clamp: number;
  if (a.logRatioClamp === null) clamp = Infinity;
  else if (a.logRatioClamp === undefined) clamp = sem === 'verl-agent' ? Infinity : 20;
  else clamp = v.numOpt(a.logRatioClamp, 'logRatioClamp', 20, { min: 0, minOpen: true });
  const droBeta = kind === 'dro'
    ? (a.droBeta === undefined ? fail('ERR_OPTION', 'droBeta', 'a number > 0 (required for kind dro)', undefined)
      : v.numOpt(a.droBeta, 'droBeta', 0, { min: 0, minOpen: true }))
    : 0;
  return {
    kind, lo, hi, c, clamp,
    tauPos: v.numOpt(a.tauPos, 'tauPos', 1.0, { min: 0, minOpen: true }),
    tauNeg: v.numOpt(a.tauNeg, 'tauNeg', 1.05, { min: 0, minOpen: true }),
    clipCovRatio: v.numOpt(a.clipCovRatio, 'clipCovRatio', 2e-4, { min: 0, minOpen: true }),
    clipCovLb: v.numOpt(a.clipCovLb, 'clipCovLb', 1.0),
    clipCovUb: v.numOpt(a.clipCovUb, 'clipCovUb', 5.0),
    seed: v.numOpt(a.seed, 'seed', 0, { int: true, min: 0, max: 2 ** 32 - 1 }),
    klCovRatio: v.numOpt(a.klCovRatio, 'klCovRatio', 2e-4, { min: 0, minOpen: true }),
    ppoKlCoef: v.numOpt(a.ppoKlCoef, 'ppoKlCoef', 1.0),
    droBeta,
  };
}

/**
 * Policy-gradient loss with its gradient with respect to the current log-probs.
 *
 * Kinds (verl `core_algos`, δ = ℓ − ℓ_old): `ppo` PPO clip `max(−Aρ, −A clip(ρ, 1−ε_low, 1+ε_high))`
 * with dual clip `min(·, −A c)` for A < 0 and ρ = exp(clamp(δ, ±20)); `gspo` sequence-level ratio;
 * `sapo` soft gate; `gpg` −Aℓ; `cispo` −sg(clip(ρ))·A·ℓ; `gmpo` geometric-mean ratio per row;
 * `clip_cov` / `kl_cov` covariance-selected clipping / KL; `dppo_tv` / `dppo_kl` probability-divergence
 * trust region with truncated IS; `dro` −(ℓA − ½β δ²). The gradient reproduces autograd's, including
 * torch's even split at `max`/`min` ties and zero gradient where a clamp is active.
 *
 * Precision: float64 inputs (and every kind but `ppo`, or `ppo` with importance weights or `native: false`)
 * use the float64 TypeScript path. Kind `ppo` on float32 inputs uses the fused native pass: ratio, clip
 * terms and gradient are computed per token in float32, as verl does in torch float32 (its vector exp is
 * within ~1 ulp; the baseline ISA uses the C library's), while the loss accumulates w·L in float64 and
 * the metric sums (`ppo_kl`, `ratio_mean`) in float32 groups of a few tokens moved into float64, over a
 * fixed block partition, so results are bit-identical for any thread count. Against the float64 path
 * the loss agrees within a few float32 ulps of Σ|w·L| (each token's float32 term carries its own
 * rounding, so a loss that cancels between tokens of opposite sign can differ by more than that
 * relative to its own size) and the gradient within a few float32 ulps (1e-6 relative); a ratio within
 * rounding of a clip bound may fall on the other side. A ratio that overflows float32 (δ > 88.7 with
 * the log-ratio clamp off) gives the float64 path's zero gradient where its derivative is zero, and a
 * zero term where the advantage is zero. A large reused `out`
 * is written with streaming stores (see the README on reusing outputs).
 *
 * Bad input throws `GearError`: mismatched lengths `ERR_SHAPE`, wrong array types `ERR_DTYPE`, bad offsets
 * `ERR_OFFSETS`, NaN/Infinity on valid tokens `ERR_NON_FINITE`, unknown kinds/modes and out-of-range
 * options (negative clip values, `clipC <= 1`) `ERR_OPTION`.
 *
 * @param a inputs and options (see {@link PolicyLossArgs})
 * @returns loss, d loss / d logprob and metrics
 */
export function policyLoss(a: PolicyLossArgs & { logprob: Float32Array }): PolicyLossResult<Float32Array>;
export function policyLoss(a: PolicyLossArgs & { logprob: Float64Array }): PolicyLossResult<Float64Array>;
export function policyLoss(a: PolicyLossArgs): PolicyLossResult;
export function policyLoss(a: PolicyLossArgs): PolicyLossResult {
  const p = prepare(a);
  if ('trl' in p) return p.trl;
  if (p.useNative) {
    return policyLossPpoNative(p.lp as Float32Array, p.old as Float32Array, p.A as Float32Array, a.offsets, p.mask, p.o, p.agg, p.aggOpts,
      p.out as Float32Array | undefined);
  }
  return policyLossTs(a, p);
}

/** Validated and resolved arguments. */
interface Prepared {
  lp: FloatArray; old: FloatArray; A: FloatArray; mask: Uint8Array | undefined; kind: PolicyLossKind;
  agg: AggMode; aggOpts: AggregateOptions; o: Opts; useNative: boolean; out: FloatArray | undefined;
}

function prepare(a: PolicyLossArgs): Prepared | { trl: PolicyLossResult } {
  if (a === null || typeof a !== 'object') fail('ERR_OPTION', 'policyLoss', 'an arguments object', a);
  const flavor = v.enumOpt(a.flavor, 'flavor', ['verl', 'trl'] as const, 'verl');
  if (flavor === 'trl') {
    const { flavor: _f, ...rest } = a as PolicyLossArgs & Record<string, unknown>;
    return { trl: trlLoss(rest as unknown as TrlLossArgs) };
  }
  v.knownKeys(a, 'policyLoss', KEYS);
  const lp = floats(a.logprob, 'logprob');
  const n = lp.length;
  const old = floats(a.oldLogprob, 'oldLogprob', n);
  const A = floats(a.advantages, 'advantages', n);
  rowsOf(a.offsets, n);
  let kind = v.enumOpt(a.kind, 'kind', POLICY_LOSS_KINDS, 'ppo');
  if (kind === 'vanilla') kind = 'ppo';
  if (kind === 'geo_mean') kind = 'gmpo';
  // The fused native pass validates the mask values and the finiteness of valid tokens itself, in the
  // same pass over memory; the TS path checks them before computing.
  const useNative = a.native !== false && kind === 'ppo' && a.isWeights === undefined && a.rolloutCorrection === undefined &&
    lp instanceof Float32Array && old instanceof Float32Array && A instanceof Float32Array;
  if (a.native !== undefined && typeof a.native !== 'boolean') fail('ERR_OPTION', 'native', 'a boolean', a.native);
  let mask: Uint8Array | undefined;
  if (useNative && a.mask !== undefined) {
    if (!(a.mask instanceof Uint8Array)) fail('ERR_DTYPE', 'mask', 'Uint8Array', a.mask);
    if (a.mask.length !== n) fail('ERR_SHAPE', 'mask.length', String(n), a.mask.length);
    mask = a.mask;
  } else {
    mask = v.optMask(a.mask, 'mask', n);
  }
  const sem = v.enumOpt(a.semantics, 'semantics', SEMANTICS, 'verl');
  const agg = v.enumOpt(a.agg, 'agg', AGG_MODES, 'token-mean');
  const aggOpts: AggregateOptions = checkAggOptions({
    globalTokens: a.globalTokens, globalRows: a.globalRows, lossScaleFactor: a.lossScaleFactor, dpSize: a.dpSize, semantics: sem,
  }, 'policyLoss');
  const o = resolveOpts(a, kind, sem);
  let out: FloatArray | undefined;
  if (a.out !== undefined) {
    out = lp instanceof Float64Array ? v.f64(a.out, 'out', n) : v.f32(a.out, 'out', n);
    for (const [x, what] of [[lp, 'logprob'], [old, 'oldLogprob'], [A, 'advantages']] as const) {
      const overlap = x.buffer === out.buffer && x.byteOffset < out.byteOffset + out.byteLength &&
        out.byteOffset < x.byteOffset + x.byteLength;
      if (overlap) fail('ERR_OPTION', 'out', `an array not overlapping ${what}`, out);
    }
  }
  return { lp, old, A, mask, kind, agg, aggOpts, o, useNative, out };
}

function policyLossTs(a: PolicyLossArgs, p: Prepared): PolicyLossResult {
  const { lp, old, A, mask, kind, agg, aggOpts, o } = p;
  const n = lp.length;
  finite(lp, 'logprob', mask);
  finite(old, 'oldLogprob', mask);
  finite(A, 'advantages', mask);

  let isw: Float64Array | undefined;
  let extra: Record<string, number> = {};
  if (a.isWeights !== undefined) {
    const w = floats(a.isWeights, 'isWeights', n);
    finite(w, 'isWeights', mask);
    for (let t = 0; t < n; t++) if ((mask === undefined || mask[t]) && w[t]! < 0) fail('ERR_OPTION', `isWeights[${t}]`, '>= 0', w[t]);
    isw = Float64Array.from(w);
  }
  if (a.rolloutCorrection !== undefined) {
    if (isw !== undefined) fail('ERR_OPTION', 'rolloutCorrection', 'not together with isWeights', 'both');
    const rc = rolloutCorrectionWeights(old, a.offsets, mask, a.rolloutCorrection);
    isw = rc.weights;
    extra = rc.metrics;
  }

  if (kind === 'gmpo') {
    const rows = a.offsets.length - 1;
    if (aggOpts.globalRows !== undefined && aggOpts.globalRows < rows) {
      fail('ERR_OPTION', 'globalRows', `>= the ${rows} rows of this call (GMPO averages over all rows)`, aggOpts.globalRows);
    }
    const r = gmpo(lp, old, A, a.offsets, mask, o, isw, aggOpts.globalRows);
    const grad = p.out ?? sameType(lp, n);
    for (let t = 0; t < n; t++) grad[t] = r.g[t]!;
    return { loss: r.value, grad, metrics: { ...r.metrics, ...extra } };
  }

  let terms: Terms;
  switch (kind) {
    case 'ppo': terms = ppoTerms(lp, old, A, mask, o, true); break;
    case 'gspo': terms = gspoTerms(lp, old, A, a.offsets, mask, o); break;
    case 'sapo': terms = sapoTerms(lp, old, A, mask, o); break;
    case 'gpg': terms = gpgTerms(lp, A); break;
    case 'cispo': terms = cispoTerms(lp, old, A, mask, o); break;
    case 'dppo_tv': terms = dppoTerms(lp, old, A, mask, o, true); break;
    case 'dppo_kl': terms = dppoTerms(lp, old, A, mask, o, false); break;
    case 'dro': terms = droTerms(lp, old, A, mask, o); break;
    case 'kl_cov': terms = klCovTerms(lp, old, A, mask, o); break;
    case 'clip_cov': terms = clipCovTerms(lp, old, A, mask, o); break;
    default: throw new GearError('ERR_OPTION', `kind: unsupported ${kind}`);
  }
  const { w, nan } = aggWeights(a.offsets, mask, terms.forcedAgg ?? agg, aggOpts);
  let loss = 0;
  const grad = p.out?.fill(0) ?? sameType(lp, n); // the loop below writes only tokens with weight
  for (let t = 0; t < n; t++) {
    const wt = w[t]!;
    if (wt === 0) continue;
    const s = isw === undefined ? 1 : isw[t]!;
    loss += wt * terms.L[t]! * s;
    grad[t] = wt * terms.dL[t]! * s;
  }
  return { loss: nan ? NaN : loss, grad, metrics: { ...terms.metrics, ...extra } };
}

const AGG_INDEX: Record<AggMode, number> = {
  'token-mean': 0, 'token-sum': 1, 'seq-mean-token-sum': 2, 'seq-mean-token-mean': 3, 'seq-mean-token-sum-norm': 4,
};
const SEM_INDEX: Record<Semantics, number> = { verl: 0, 'verl-legacy': 1, 'verl-agent': 2 };

/** The fused native PPO pass (float32 in, float32 per-token math and gradient, float64 accumulation). */
function ppoNativeArgs(o: Opts, agg: AggMode, ao: AggregateOptions) {
  const sem = ao.semantics ?? 'verl';
  if (sem !== 'verl' && agg === 'token-sum') {
    fail('ERR_OPTION', 'mode', `one of the ${sem} modes (token-sum exists in current verl only)`, agg);
  }
  const params = new Float64Array([
    o.lo, o.hi, o.c, Number.isFinite(o.clamp) ? o.clamp : -1,
    ao.globalTokens ?? -1, ao.globalRows ?? -1, ao.lossScaleFactor ?? -1, ao.dpSize ?? 1,
  ]);
  return { params, agg: AGG_INDEX[agg], sem: SEM_INDEX[sem] };
}

/** Turns the kernel's stats (loss, tokens, clipped, lower, Σ−x, Σρ, min ρ, max ρ, nan) into a result. */
function ppoResult(r: { grad: Float32Array; stats: Float64Array }): PolicyLossResult {
  const s = r.stats;
  const cnt = s[1]!;
  return {
    loss: s[8] ? NaN : s[0]!,
    grad: r.grad,
    metrics: {
      pg_clipfrac: s[2]! / (cnt + 1e-8),
      pg_clipfrac_lower: s[3]! / (cnt + 1e-8),
      ppo_kl: s[4]! / (cnt + 1e-8),
      ratio_mean: cnt > 0 ? s[5]! / cnt : 0,
      ratio_min: cnt > 0 ? s[6]! : 0,
      ratio_max: cnt > 0 ? s[7]! : 0,
    },
  };
}

function policyLossPpoNative(
  lp: Float32Array, old: Float32Array, A: Float32Array, offsets: Int32Array, mask: Uint8Array | undefined,
  o: Opts, agg: AggMode, ao: AggregateOptions, out: Float32Array | undefined,
): PolicyLossResult {
  const p = ppoNativeArgs(o, agg, ao);
  return ppoResult(native.policyLossPpo(lp, old, A, offsets, mask ?? null, p.params, p.agg, p.sem, out ?? null, false, null));
}

/** Options of {@link policyLossAsync}. */
export interface PolicyLossAsyncOptions {
  /** Aborting rejects the Promise with `ERR_ABORTED`. */
  signal?: AbortSignal;
}

/**
 * Async form of {@link policyLoss}: the fused native PPO pass runs off the main thread (abortable);
 * the other kinds compute synchronously and resolve.
 *
 * @param a the same arguments as {@link policyLoss}
 * @param opts `signal` to abort
 * @returns a Promise of the same result
 */
export async function policyLossAsync(a: PolicyLossArgs, opts: PolicyLossAsyncOptions = {}): Promise<PolicyLossResult> {
  const p = prepare(a);
  if ('trl' in p) return p.trl;
  if (!p.useNative) return policyLossTs(a, p);
  const q = ppoNativeArgs(p.o, p.agg, p.aggOpts);
  return ppoResult(await abortable(opts.signal, (flag) =>
    native.policyLossPpo(p.lp, p.old, p.A, a.offsets, p.mask ?? null, q.params, q.agg, q.sem, p.out ?? null, true, flag) as
      Promise<{ grad: Float32Array; stats: Float64Array }>));
}
