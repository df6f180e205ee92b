/**
 * TRL `GRPOTrainer._compute_loss` semantics over packed rows: loss types grpo, bnpo, dr_grpo, dapo,
 * cispo, sapo, luspo, vespo; token- or sequence-level importance sampling; two-sided `delta`; `beta`
 * with TRL's per-token k3 KL (no clamps) added before the reduction; top-entropy-quantile masking;
 * the off-policy sequence mask; bias-corrected KL; the entropy bonus; gradient-accumulation
 * normalisers. Returns the loss, d loss / d logprob (and d loss / d entropy) and TRL's metrics.
 *
 * @module
 */
import { fail } from '../core/errors.js';
import * as v from '../core/validate.js';
import { FloatArray, finite, floats, rowsOf, sameType } from './inputs.js';

/**
 * TRL's `loss_type`.
 *
 * @category Losses
 */
export type TrlLossType = 'grpo' | 'bnpo' | 'dr_grpo' | 'dapo' | 'cispo' | 'sapo' | 'luspo' | 'vespo';
const LOSS_TYPES: readonly TrlLossType[] = ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'luspo', 'vespo'];

/**
 * Arguments of {@link trlLoss}. Per-token arrays have length N = `offsets[R]`.
 *
 * @category Losses
 */
export interface TrlLossArgs {
  /** Current policy log-probs ℓ (temperature-scaled, as TRL computes them). */
  logprob: FloatArray;
  /** Old policy log-probs; omit for on-policy training (TRL then uses sg(ℓ): ratio 1). */
  oldLogprob?: FloatArray;
  /** Reference log-probs (required when `beta != 0`). */
  refLogprob?: FloatArray;
  /**
   * Sampling (inference) log-probs for the off-policy mask (default: the old log-probs).
   *
   * @defaultValue the old log-probs
   */
  samplingLogprob?: FloatArray;
  /** Per-token entropies (required for the entropy mask and the entropy bonus; also logged). */
  entropy?: FloatArray;
  /** Advantages: one per row (length R, TRL's shape) or one per token (length N). */
  advantages: ArrayLike<number>;
  /** Packed rows, Int32Array of length R+1. For TRL's padded layout, give every row the padded length. */
  offsets: Int32Array;
  /** TRL's `completion_mask` (times `tool_mask`), 0/1. */
  mask?: Uint8Array;
  /**
   * Loss type (default `'dapo'`, TRL's default).
   *
   * @defaultValue `'dapo'`
   */
  lossType?: TrlLossType;
  /**
   * `'token'` (default) or `'sequence'` (GSPO) importance sampling.
   *
   * @defaultValue `'token'`
   */
  importanceSampling?: 'token' | 'sequence';
  /**
   * ε (default 0.2).
   *
   * @defaultValue `0.2`
   */
  epsilon?: number;
  /**
   * ε_high (default ε; for cispo the absolute cap on the ratio, recommended 5.0).
   *
   * @defaultValue `epsilon`
   */
  epsilonHigh?: number;
  /** Two-sided clipping (INTELLECT-2): the ratio is capped at `delta` (> 1 + ε_high recommended). */
  delta?: number;
  /**
   * KL coefficient (default 0).
   *
   * @defaultValue `0`
   */
  beta?: number;
  /**
   * Keep only the top-`q` entropy share of valid tokens (default 1 = off; 0 keeps the max-entropy token).
   *
   * @defaultValue `1`
   */
  topEntropyQuantile?: number;
  /** Off-policy sequence mask threshold (DeepSeek-V3.2); rows with A < 0 and mean KL above it are dropped. */
  offPolicyMaskThreshold?: number;
  /**
   * Multiply the KL by the importance ratio (DeepSeek-V3.2's unbiased KL).
   *
   * @defaultValue `false`
   */
  useBiasCorrectionKl?: boolean;
  /**
   * Entropy bonus coefficient (default 0 = off): `loss −= coef · mean entropy`.
   *
   * @defaultValue `0`
   */
  entropyCoef?: number;
  /**
   * SAPO temperature for A > 0 (default 1.0).
   *
   * @defaultValue `1`
   */
  sapoTemperaturePos?: number;
  /**
   * SAPO temperature for A <= 0 (default 1.05).
   *
   * @defaultValue `1.05`
   */
  sapoTemperatureNeg?: number;
  /**
   * VESPO k for A >= 0 (default 2).
   *
   * @defaultValue `2`
   */
  vespoKPos?: number;
  /**
   * VESPO λ for A >= 0 (default 3).
   *
   * @defaultValue `3`
   */
  vespoLambdaPos?: number;
  /**
   * VESPO k for A < 0 (default 3).
   *
   * @defaultValue `3`
   */
  vespoKNeg?: number;
  /**
   * VESPO λ for A < 0 (default 2).
   *
   * @defaultValue `2`
   */
  vespoLambdaNeg?: number;
  /**
   * dr_grpo's constant (TRL `max_completion_length`; default: the longest row's length).
   *
   * @defaultValue the longest row's length
   */
  maxCompletionLength?: number;
  /**
   * Gradient-accumulation steps dividing grpo/bnpo/dr_grpo/sapo/luspo losses (default 1).
   *
   * @defaultValue `1`
   */
  gradientAccumulationSteps?: number;
  /**
   * dapo/cispo/vespo: active tokens of the whole generation batch over all processes (default: this call's).
   *
   * @defaultValue this call's active tokens
   */
  numItemsInBatch?: number;
  /**
   * Number of processes dividing `numItemsInBatch` (default 1).
   *
   * @defaultValue `1`
   */
  numProcesses?: number;
}

/**
 * Result of {@link trlLoss}.
 *
 * @category Losses
 */
export interface TrlLossResult {
  /** The loss TRL back-propagates. */
  loss: number;
  /** d loss / d logprob per token (float type of `logprob`). */
  grad: FloatArray;
  /** d loss / d entropy per token, when the entropy bonus is on (else all zeros). */
  gradEntropy: FloatArray;
  /**
   * TRL's metric names: `entropy`, `kl` (beta != 0), `clip_ratio/low_mean`, `clip_ratio/high_mean`,
   * `clip_ratio/region_mean`, `clip_ratio/low_min`, `clip_ratio/high_max` (clipped loss types),
   * `cispo_clip_ratio`, `vespo/phi_seq_mean`, `policy_loss` and `entropy_coef` (entropy bonus).
   */
  metrics: Record<string, number>;
}

const KEYS = [
  'logprob', 'oldLogprob', 'refLogprob', 'samplingLogprob', 'entropy', 'advantages', 'offsets', 'mask', 'lossType',
  'importanceSampling', 'epsilon', 'epsilonHigh', 'delta', 'beta', 'topEntropyQuantile', 'offPolicyMaskThreshold',
  'useBiasCorrectionKl', 'entropyCoef', 'sapoTemperaturePos', 'sapoTemperatureNeg', 'vespoKPos', 'vespoLambdaPos',
  'vespoKNeg', 'vespoLambdaNeg', 'maxCompletionLength', 'gradientAccumulationSteps', 'numItemsInBatch', 'numProcesses',
  // aliases accepted through policyLoss({ compat: 'trl' })
  'clipLow', 'clipHigh',
] as const;

const f32 = Math.fround;

/**
 * torch.quantile (linear interpolation) over float32 values, computed as torch does in float32.
 *
 * @example
 * ```ts
 * import { quantileLinear } from 'gear-rl/diagnostics';
 *
 * console.log(quantileLinear([1, 2, 3, 4], 0.5)); // 2.5, as torch.quantile
 * ```
 * @category Losses
 */
export function quantileLinear(values: ArrayLike<number>, q: number): number {
  const vals = v.numArray(values, 'values');
  if (q === undefined) fail('ERR_OPTION', 'q', 'a number in [0, 1]', q);
  v.numOpt(q, 'q', 0, { min: 0, max: 1 });
  const s = Float32Array.from(vals).sort();
  const n = s.length;
  if (n === 0) return NaN;
  const pos = f32(q * (n - 1));
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, n - 1);
  const w = f32(pos - lo);
  const a = s[lo]!, b = s[hi]!;
  // torch.lerp's two-sided form
  return w < 0.5 ? f32(a + f32(w * f32(b - a))) : f32(b - f32(f32(b - a) * f32(1 - w)));
}

/** Validated inputs and options of one {@link trlLoss} call (stage 1). */
interface TrlInputs {
  a: TrlLossArgs;
  lp: FloatArray; old: FloatArray; samp: FloatArray; ref: FloatArray | undefined; H: FloatArray | undefined;
  A: Float64Array; rowAdv: boolean; mask: Uint8Array | undefined; off: Int32Array;
  n: number; rows: number; onPolicy: boolean; len: Float64Array; nTok: number; maxLen: number;
  lossType: TrlLossType; level: 'token' | 'sequence';
  eps: number; epsHigh: number; delta: number | undefined; beta: number; q: number; opThr: number | undefined;
  biasKl: boolean; entCoef: number; tPos: number; tNeg: number; kPos: number; lPos: number; kNeg: number; lNeg: number;
  nMb: number; nProc: number; mcl: number;
  mk: (t: number) => number;
}

/** Stage 1: argument checks, per-token advantages and row lengths. */
function trlInputs(args: TrlLossArgs & { clipLow?: number; clipHigh?: number }): TrlInputs {
  if (args === null || typeof args !== 'object') fail('ERR_OPTION', 'trlLoss', 'an arguments object', args);
  v.knownKeys(args, 'trlLoss', KEYS);
  // each argument read once, in a fixed order, before anything is checked
  const a = {} as TrlLossArgs & { clipLow?: number; clipHigh?: number };
  for (const k of KEYS) (a as unknown as Record<string, unknown>)[k] = (args as unknown as Record<string, unknown>)[k];
  a.advantages = v.readList(a.advantages) as ArrayLike<number>;
  const lp = floats(a.logprob, 'logprob');
  const n = lp.length;
  const rows = rowsOf(a.offsets, n);
  const off = a.offsets;
  const mask = v.optMask(a.mask, 'mask', n);
  const onPolicy = a.oldLogprob === undefined;
  const old = onPolicy ? lp : floats(a.oldLogprob, 'oldLogprob', n);
  const lossType = v.enumOpt(a.lossType, 'lossType', LOSS_TYPES, 'dapo');
  const level = v.enumOpt(a.importanceSampling, 'importanceSampling', ['token', 'sequence'] as const, 'token');
  const eps = v.numOpt(a.epsilon ?? a.clipLow, 'epsilon', 0.2, { min: 0 });
  const epsHigh = v.numOpt(a.epsilonHigh ?? a.clipHigh, 'epsilonHigh', eps, { min: 0 });
  const delta = a.delta === undefined ? undefined : v.numOpt(a.delta, 'delta', 0, { min: 0, minOpen: true });
  const beta = v.numOpt(a.beta, 'beta', 0);
  const q = v.numOpt(a.topEntropyQuantile, 'topEntropyQuantile', 1, { min: 0, max: 1 });
  const opThr = a.offPolicyMaskThreshold === undefined ? undefined : v.numOpt(a.offPolicyMaskThreshold, 'offPolicyMaskThreshold', 0);
  const biasKl = a.useBiasCorrectionKl ?? false;
  if (typeof biasKl !== 'boolean') fail('ERR_OPTION', 'useBiasCorrectionKl', 'a boolean', biasKl);
  const entCoef = v.numOpt(a.entropyCoef, 'entropyCoef', 0);
  const tPos = v.numOpt(a.sapoTemperaturePos, 'sapoTemperaturePos', 1.0, { min: 0, minOpen: true });
  const tNeg = v.numOpt(a.sapoTemperatureNeg, 'sapoTemperatureNeg', 1.05, { min: 0, minOpen: true });
  const kPos = v.numOpt(a.vespoKPos, 'vespoKPos', 2);
  const lPos = v.numOpt(a.vespoLambdaPos, 'vespoLambdaPos', 3);
  const kNeg = v.numOpt(a.vespoKNeg, 'vespoKNeg', 3);
  const lNeg = v.numOpt(a.vespoLambdaNeg, 'vespoLambdaNeg', 2);
  const nMb = v.numOpt(a.gradientAccumulationSteps, 'gradientAccumulationSteps', 1, { min: 1, int: true });
  const nProc = v.numOpt(a.numProcesses, 'numProcesses', 1, { min: 1, int: true });
  let maxLen = 0;
  for (let i = 0; i < rows; i++) maxLen = Math.max(maxLen, off[i + 1]! - off[i]!);
  const mcl = v.numOpt(a.maxCompletionLength, 'maxCompletionLength', Math.max(maxLen, 1), { min: 0, minOpen: true });

  // advantages: per row (TRL's (B,1)) or per token ((B,T))
  const advIn = v.numArray(a.advantages, 'advantages');
  const rowAdv = advIn.length === rows && !(advIn.length === n && rows !== n) ? true : advIn.length === n ? false : fail(
    'ERR_SHAPE', 'advantages.length', `the row count ${rows} or the token count ${n}`, advIn.length);
  const A = new Float64Array(n);
  for (let i = 0; i < rows; i++) for (let t = off[i]!; t < off[i + 1]!; t++) A[t] = rowAdv ? advIn[i]! : advIn[t]!;
  finite(rowAdv ? advIn : A, 'advantages', rowAdv ? undefined : mask);

  const ref = beta !== 0 ? floats(a.refLogprob ?? fail('ERR_OPTION', 'refLogprob', 'an array when beta != 0', undefined), 'refLogprob', n) : undefined;
  const needH = q < 1 || entCoef !== 0;
  const H = a.entropy === undefined
    ? (needH ? fail('ERR_OPTION', 'entropy', 'an array (needed by topEntropyQuantile < 1 or entropyCoef != 0)', undefined) : undefined)
    : floats(a.entropy, 'entropy', n);
  const samp = a.samplingLogprob === undefined ? old : floats(a.samplingLogprob, 'samplingLogprob', n);
  finite(lp, 'logprob', mask);
  if (!onPolicy) finite(old, 'oldLogprob', mask);
  if (ref) finite(ref, 'refLogprob', mask);
  if (H) finite(H, 'entropy', mask);
  if (a.samplingLogprob !== undefined) finite(samp, 'samplingLogprob', mask);

  const mk = (t: number) => (mask === undefined ? 1 : mask[t]!);
  const len = new Float64Array(rows);
  let nTok = 0;
  for (let i = 0; i < rows; i++) {
    let c = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) c += mk(t);
    len[i] = c;
    nTok += c;
  }
  return {
    a, lp, old, samp, ref, H, A, rowAdv, mask, off, n, rows, onPolicy, len, nTok, maxLen, lossType, level,
    eps, epsHigh, delta, beta, q, opThr, biasKl, entCoef, tPos, tNeg, kPos, lPos, kNeg, lNeg, nMb, nProc, mcl, mk,
  };
}

/** Stage 2: the top-entropy-quantile token mask (undefined when off). */
function entropyMask(p: TrlInputs): Uint8Array | undefined {
  const { n, q, H, mk } = p;
  let emask: Uint8Array | undefined;
  if (q < 1 && H) {
    const vals: number[] = [];
    for (let t = 0; t < n; t++) if (mk(t)) vals.push(H[t]!);
    emask = new Uint8Array(n);
    if (vals.length > 0) {
      const thr = quantileLinear(vals, 1 - q);
      for (let t = 0; t < n; t++) emask[t] = mk(t) && H[t]! * mk(t) >= thr ? 1 : 0;
    }
  }
  return emask;
}

/** Stage 3: the off-policy sequence mask, per token, from the row's mean sampling KL (all ones when off). */
function offPolicyMask(p: TrlInputs): Float64Array {
  const { n, rows, off, opThr, samp, lp, len, A, mk } = p;
  const opMask = new Float64Array(n).fill(1);
  if (opThr !== undefined) {
    for (let i = 0; i < rows; i++) {
      let s = 0;
      for (let t = off[i]!; t < off[i + 1]!; t++) s += (samp[t]! - lp[t]!) * mk(t);
      const kbar = s / Math.max(len[i]!, 1);
      for (let t = off[i]!; t < off[i + 1]!; t++) opMask[t] = A[t]! >= 0 || kbar <= opThr ? 1 : 0;
    }
  }
  return opMask;
}

/** Stage 4: importance weights, log w per token, or per row (then d log w / d ℓ_t = m_t / max(|y|, 1)). */
function logWeights(p: TrlInputs): Float64Array {
  const { n, rows, off, level, onPolicy, lp, old, len, mk } = p;
  const logw = new Float64Array(n);
  for (let i = 0; i < rows; i++) {
    if (level === 'token') {
      for (let t = off[i]!; t < off[i + 1]!; t++) logw[t] = onPolicy ? 0 : lp[t]! - old[t]!;
    } else {
      let s = 0;
      for (let t = off[i]!; t < off[i + 1]!; t++) s += (onPolicy ? 0 : lp[t]! - old[t]!) * mk(t);
      const lw = s / Math.max(len[i]!, 1);
      for (let t = off[i]!; t < off[i + 1]!; t++) logw[t] = lw;
    }
  }
  return logw;
}

/** Stage 5 (vespo only): phi per token from the row's summed clamped log ratio (zeros otherwise). */
function vespoPhi(p: TrlInputs): Float64Array {
  const { n, rows, off, lossType, onPolicy, lp, old, A, kPos, kNeg, lPos, lNeg, mk } = p;
  const phi = new Float64Array(n);
  if (lossType === 'vespo') {
    const lower = Math.log(1e-8);
    for (let i = 0; i < rows; i++) {
      let s = 0;
      for (let t = off[i]!; t < off[i + 1]!; t++) s += Math.min(Math.max(onPolicy ? 0 : lp[t]! - old[t]!, -20), 20) * mk(t);
      const lws = Math.min(Math.max(s, lower), 20);
      const ws = Math.exp(lws);
      for (let t = off[i]!; t < off[i + 1]!; t++) {
        const pos = A[t]! >= 0;
        const k = pos ? kPos : kNeg;
        const lam = Math.max(pos ? lPos : lNeg, 1e-4);
        const pt = Math.exp(lam + k * lws - lam * ws);
        phi[t] = Number.isFinite(pt) ? pt : 0;
      }
    }
  }
  return phi;
}

/** Per-token loss terms of stage 6. */
interface TrlTerms {
  /** Per-token loss L. */
  L: Float64Array;
  /** ∂L/∂ℓ (direct). */
  dDir: Float64Array;
  /** ∂L/∂log w. */
  dLw: Float64Array;
  /** The KL term per token. */
  kl: Float64Array;
  lowC: Uint8Array; highC: Uint8Array; cispoC: Uint8Array;
}

/** Stage 6: per-token loss L, ∂L/∂ℓ (direct) and ∂L/∂log w; the KL term and its derivative. */
function tokenTerms(p: TrlInputs, logw: Float64Array, phi: Float64Array, opMask: Float64Array, emask: Uint8Array | undefined): TrlTerms {
  const { n, A, lp, lossType, eps, epsHigh, delta, tPos, tNeg, ref, biasKl, beta } = p;
  const L = new Float64Array(n);
  const dDir = new Float64Array(n);
  const dLw = new Float64Array(n);
  const kl = new Float64Array(n);
  const lowC = new Uint8Array(n), highC = new Uint8Array(n), cispoC = new Uint8Array(n);
  for (let t = 0; t < n; t++) {
    const adv = A[t]!;
    const c1 = Math.exp(logw[t]!);
    let Lt = 0, dd = 0, dw = 0;
    switch (lossType) {
      case 'cispo': {
        const w = Math.min(c1, epsHigh);
        Lt = -w * adv * lp[t]!;
        dd = -w * adv;
        cispoC[t] = c1 > epsHigh && adv > 0 ? 1 : 0;
        break;
      }
      case 'sapo': {
        // TRL builds the temperatures with torch.where on Python floats: a float32 tensor
        const tau = f32(adv > 0 ? tPos : tNeg);
        const sg = 1 / (1 + Math.exp(-tau * (c1 - 1)));
        Lt = -sg * 4 / tau * adv;
        dw = -adv * 4 * sg * (1 - sg) * c1;
        break;
      }
      case 'vespo': {
        Lt = -phi[t]! * adv * lp[t]!;
        dd = -phi[t]! * adv;
        break;
      }
      default: {
        const lo = 1 - eps, hi = 1 + epsHigh;
        const c2 = Math.min(Math.max(c1, lo), hi);
        const dc2 = c1 >= lo && c1 <= hi ? 1 : 0;
        let c1d = c1, dc1 = 1;
        if (delta !== undefined && c1 > delta) { c1d = delta; dc1 = 0; }
        const p1 = c1d * adv, p2 = c2 * adv;
        const d1 = adv * dc1, d2 = adv * dc2;
        const mn = Math.min(p1, p2);
        const dmn = p1 < p2 ? d1 : p2 < p1 ? d2 : 0.5 * (d1 + d2);
        Lt = -mn;
        dw = -dmn * c1;
        lowC[t] = c1d < lo && adv < 0 ? 1 : 0;
        highC[t] = c1d > hi && adv > 0 ? 1 : 0;
      }
    }
    const keep = opMask[t]! * (emask ? emask[t]! : 1);
    Lt *= keep; dd *= keep; dw *= keep;
    if (ref) {
      const u = ref[t]! - lp[t]!;
      const eu = Math.exp(u);
      let k3 = eu - u - 1;
      let dk = 1 - eu;
      let dkw = 0;
      if (biasKl) { dkw = k3 * c1; dk *= c1; k3 *= c1; }
      kl[t] = k3;
      Lt += beta * k3;
      dd += beta * dk;
      dw += beta * dkw;
    }
    L[t] = Lt; dDir[t] = dd; dLw[t] = dw;
  }
  return { L, dDir, dLw, kl, lowC, highC, cispoC };
}

/** Stage 7: the reduction weights r_t of the loss type (loss = Σ r_t L_t), and DAPO's normaliser. */
function reductionWeights(p: TrlInputs, seqShape: boolean): { r: Float64Array; dapoNorm: number } {
  const { a, n, rows, off, lossType, len, nTok, nMb, nProc, mcl, maxLen, mk } = p;
  const B = rows;
  const r = new Float64Array(n);
  const numItems = a.numItemsInBatch === undefined ? nTok : v.numOpt(a.numItemsInBatch, 'numItemsInBatch', nTok, { min: 0 });
  const dapoNorm = Math.max(numItems, 1) / nProc;
  const bnpoDen = Math.max(nTok, 1);
  for (let i = 0; i < rows; i++) {
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      const m = mk(t);
      switch (lossType) {
        case 'grpo': case 'sapo': r[t] = m / Math.max(len[i]!, 1) / B / nMb; break;
        case 'bnpo': r[t] = m / bnpoDen / nMb; break;
        case 'dr_grpo': r[t] = m / (B * mcl) / nMb; break;
        case 'dapo': case 'cispo': case 'vespo': r[t] = m / dapoNorm; break;
        case 'luspo':
          // (B,1): one entry per row; (B,T): every entry, padding included (TRL's mean over B·T)
          if (seqShape) r[t] = t === off[i] ? len[i]! / B / nMb : 0;
          else r[t] = len[i]! / (B * maxLen) / nMb;
          break;
      }
    }
  }
  return { r, dapoNorm };
}

/** Stage 8: the loss and its gradient through the direct term and the importance weights. */
function reduceTerms(p: TrlInputs, terms: TrlTerms, r: Float64Array): { loss: number; g: Float64Array } {
  const { n, rows, off, level, len, mk } = p;
  const { L, dDir, dLw } = terms;
  let loss = 0;
  const g = new Float64Array(n);
  for (let i = 0; i < rows; i++) {
    let gw = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      if (r[t] === 0) continue;
      loss += r[t]! * L[t]!;
      g[t] = r[t]! * dDir[t]!;
      if (level === 'token') g[t] = g[t]! + r[t]! * dLw[t]!;
      else gw += r[t]! * dLw[t]!;
    }
    if (level === 'sequence' && gw !== 0) {
      // d log w_i / d ℓ_t = m_t / max(|y_i|, 1); on-policy too (old = sg(ℓ): value 0, same gradient)
      const d = Math.max(len[i]!, 1);
      for (let t = off[i]!; t < off[i + 1]!; t++) g[t] = g[t]! + (gw * mk(t)) / d;
    }
  }
  return { loss, g };
}

/** Stage 9: the entropy bonus; returns the new loss and fills d loss / d entropy and its metrics. */
function entropyBonusTerm(
  p: TrlInputs, loss: number, emask: Uint8Array | undefined, dapoNorm: number, gH: FloatArray, metrics: Record<string, number>,
): number {
  const { n, H, entCoef, lossType, nMb, mk } = p;
  const policyLoss = lossType === 'dapo' || lossType === 'cispo' || lossType === 'vespo' ? loss : loss * nMb;
  if (entCoef !== 0 && H) {
    let s = 0, c = 0;
    for (let t = 0; t < n; t++) {
      const em = mk(t) * (emask ? emask[t]! : 1);
      s += H[t]! * em;
      c += em;
    }
    const den = lossType === 'dapo' || lossType === 'cispo' || lossType === 'vespo' ? dapoNorm : Math.max(c, 1) * nMb;
    loss -= entCoef * (s / den);
    for (let t = 0; t < n; t++) gH[t] = -entCoef * (mk(t) * (emask ? emask[t]! : 1)) / den;
    metrics.policy_loss = policyLoss;
    metrics.entropy_coef = entCoef;
  }
  return loss;
}

/** Stage 10: TRL's logged metrics (KL, entropy, clip ratios, CISPO / VESPO statistics). */
function trlMetrics(p: TrlInputs, terms: TrlTerms, phi: Float64Array, seqRatio: boolean, metrics: Record<string, number>): void {
  const { n, rows, off, len, nTok, ref, H, lossType, rowAdv, mk } = p;
  const { kl, lowC, highC, cispoC } = terms;
  const tokMean = (x: (t: number) => number) => {
    let s = 0;
    for (let t = 0; t < n; t++) s += x(t) * mk(t);
    return s / Math.max(nTok, 1);
  };
  if (ref) metrics.kl = tokMean((t) => kl[t]!);
  if (H) metrics.entropy = tokMean((t) => H[t]!);
  const seqVals = (x: Uint8Array): number[] => {
    const out: number[] = [];
    for (let i = 0; i < rows; i++) {
      if (seqRatio) { out.push(off[i + 1]! > off[i]! ? x[off[i]!]! : NaN); continue; }
      let s = 0;
      for (let t = off[i]!; t < off[i + 1]!; t++) s += x[t]! * mk(t);
      out.push(s / len[i]!);
    }
    return out;
  };
  const mean = (x: Uint8Array) => {
    if (seqRatio) {
      let s = 0;
      for (let i = 0; i < rows; i++) s += off[i + 1]! > off[i]! ? x[off[i]!]! : 0;
      return f32(s / Math.max(rows, 1));
    }
    return f32(tokMean((t) => x[t]!));
  };
  if (lossType === 'grpo' || lossType === 'bnpo' || lossType === 'dr_grpo' || lossType === 'dapo' || lossType === 'luspo') {
    const region = new Uint8Array(n);
    for (let t = 0; t < n; t++) region[t] = lowC[t]! | highC[t]!;
    metrics['clip_ratio/low_mean'] = mean(lowC);
    metrics['clip_ratio/high_mean'] = mean(highC);
    metrics['clip_ratio/region_mean'] = mean(region);
    const lows = seqVals(lowC).filter((x) => !Number.isNaN(x));
    const highs = seqVals(highC).filter((x) => !Number.isNaN(x));
    metrics['clip_ratio/low_min'] = lows.length ? f32(Math.min(...lows)) : NaN;
    metrics['clip_ratio/high_max'] = highs.length ? f32(Math.max(...highs)) : NaN;
  } else if (lossType === 'cispo') {
    metrics.cispo_clip_ratio = mean(cispoC);
  } else if (lossType === 'vespo') {
    if (rowAdv) {
      let s = 0;
      for (let i = 0; i < rows; i++) s += off[i + 1]! > off[i]! ? phi[off[i]!]! : 0;
      metrics['vespo/phi_seq_mean'] = s / Math.max(rows, 1);
    } else metrics['vespo/phi_seq_mean'] = tokMean((t) => phi[t]!);
  }
}

/**
 * TRL `GRPOTrainer` loss (see the module comment). The layout is packed rows; TRL's padded `(B, T)`
 * layout is the special case where every row has the padded length T and the mask marks padding.
 * Two TRL quirks are reproduced on purpose: `luspo` with a per-token loss averages over all B·T
 * entries including padding, and `dr_grpo` divides by `B · maxCompletionLength`.
 *
 * @param a inputs and TRL options
 * @returns loss, gradients and metrics
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // TRL GRPOTrainer layout: one advantage per row, padded rows with a completion mask
 * const offsets = Int32Array.of(0, 3, 6);
 * const mask = Uint8Array.of(1, 1, 1, 1, 1, 0);
 * const logprob = Float32Array.of(-1, -0.4, -2, -0.3, -0.9, 0);
 * const { loss, grad, metrics } = rl.trlLoss({
 *   logprob, oldLogprob: logprob, advantages: [0.7, -0.7], offsets, mask,
 *   lossType: 'dapo', epsilon: 0.2, epsilonHigh: 0.28,
 * });
 * console.log(loss, grad, metrics['clip_ratio/region_mean']);
 * ```
 * @category Losses
 */
export function trlLoss(a: TrlLossArgs & { clipLow?: number; clipHigh?: number }): TrlLossResult {
  const p = trlInputs(a);
  const emask = entropyMask(p);
  const opMask = offPolicyMask(p);
  const logw = logWeights(p);
  const phi = vespoPhi(p);

  // Is the ratio (B,1)-shaped (clip metrics per row), and is TRL's per-token loss (B,1)-shaped (luspo)?
  const { lossType, level, beta, rowAdv, lp, n } = p;
  const seqRatio = rowAdv && level === 'sequence';
  const seqShape = seqRatio && beta === 0 && emask === undefined &&
    (lossType === 'grpo' || lossType === 'bnpo' || lossType === 'dr_grpo' || lossType === 'dapo' || lossType === 'luspo' || lossType === 'sapo');

  const terms = tokenTerms(p, logw, phi, opMask, emask);
  const { r, dapoNorm } = reductionWeights(p, seqShape);
  const red = reduceTerms(p, terms, r);
  const metrics: Record<string, number> = {};
  const gH = sameType(lp, n);
  const loss = entropyBonusTerm(p, red.loss, emask, dapoNorm, gH, metrics);
  trlMetrics(p, terms, phi, seqRatio, metrics);

  const grad = sameType(lp, n);
  for (let t = 0; t < n; t++) grad[t] = red.g[t]!;
  return { loss, grad, gradEntropy: gH, metrics };
}
