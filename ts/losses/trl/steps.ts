/**
 * The steps every TRL loss type shares (TRL `GRPOTrainer._compute_loss`): the entropy and off-policy
 * masks, the importance weights, the per-token terms with the KL added, the reduction, the entropy bonus
 * and the metrics every type logs. What a loss type adds (its per-token term, its reduction weights, its
 * own metrics) is its kind in `./kinds.ts`.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import type { FloatArray } from '../inputs.js';
import type { TrlInputs } from './args.js';

/** @internal float32 rounding, where TRL computes in float32. */
export const f32 = Math.fround;

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

/** @internal Stage 2: the top-entropy-quantile token mask (undefined when off). */
export function entropyMask(p: TrlInputs): Uint8Array | undefined {
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

/** @internal Stage 3: the off-policy sequence mask, per token, from the row's mean sampling KL (all ones when off). */
export function offPolicyMask(p: TrlInputs): Float64Array {
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

/** @internal Stage 4: importance weights, log w per token, or per row (then d log w / d ℓ_t = m_t / max(|y|, 1)). */
export function logWeights(p: TrlInputs): Float64Array {
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

/** @internal Per-token loss terms (stage 6), and the flags the loss types' metrics count. */
export interface TrlTerms {
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

/** @internal One token's term of a loss type, before the masks and the KL: L, ∂L/∂ℓ (direct), ∂L/∂log w. */
export interface TokenTerm { L: number; dd: number; dw: number }

/**
 * @internal A loss type's term at token t (advantage adv, importance ratio c1 = w_t), written to `out`;
 * it may set the token's clip flags in `terms`. `phi`: the loss type's per-token factor (VESPO's).
 */
export type TermFn = (p: TrlInputs, t: number, adv: number, c1: number, phi: Float64Array, out: TokenTerm, terms: TrlTerms) => void;

/** @internal Stage 6: the loss type's term per token, kept by the masks, plus the KL term and its derivative. */
export function tokenTerms(
  p: TrlInputs, term: TermFn, logw: Float64Array, phi: Float64Array, opMask: Float64Array, emask: Uint8Array | undefined,
): TrlTerms {
  const { n, A, lp, ref, biasKl, beta } = p;
  const terms: TrlTerms = {
    L: new Float64Array(n), dDir: new Float64Array(n), dLw: new Float64Array(n), kl: new Float64Array(n),
    lowC: new Uint8Array(n), highC: new Uint8Array(n), cispoC: new Uint8Array(n),
  };
  const { L, dDir, dLw, kl } = terms;
  const o: TokenTerm = { L: 0, dd: 0, dw: 0 };
  for (let t = 0; t < n; t++) {
    const c1 = Math.exp(logw[t]!);
    term(p, t, A[t]!, c1, phi, o, terms);
    let Lt = o.L, dd = o.dd, dw = o.dw;
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
  return terms;
}

/** @internal The normalisers a loss type's reduction weights divide by. */
export interface Normalisers {
  /** Rows (TRL's batch size B). */
  B: number;
  /** Valid tokens per row. */
  len: Float64Array;
  /** BNPO's divisor: the call's valid tokens (at least 1). */
  bnpoDen: number;
  /** Gradient-accumulation steps. */
  nMb: number;
  /** `maxCompletionLength`. */
  mcl: number;
  /** DAPO's divisor: the batch's active tokens over the processes. */
  dapoNorm: number;
  /** The longest row. */
  maxLen: number;
  off: Int32Array;
  /** Whether TRL's per-token loss is (B,1)-shaped: a per-row ratio and nothing per token (no KL, no entropy mask). */
  seqShape: boolean;
}

/** @internal A loss type's reduction weight r_t of token t of row i (loss = Σ r_t L_t); m is the token's mask. */
export type WeightFn = (m: number, i: number, t: number, R: Normalisers) => number;

/** @internal Stage 7: the reduction weights of the loss type, and DAPO's normaliser. */
export function reductionWeights(p: TrlInputs, weight: WeightFn, seqShape: boolean): { r: Float64Array; dapoNorm: number } {
  const { n, rows, off, len, nTok, nMb, nProc, mcl, maxLen, numItems, mk } = p;
  const r = new Float64Array(n);
  const dapoNorm = Math.max(numItems, 1) / nProc;
  const R: Normalisers = { B: rows, len, bnpoDen: Math.max(nTok, 1), nMb, mcl, dapoNorm, maxLen, off, seqShape };
  for (let i = 0; i < rows; i++) {
    for (let t = off[i]!; t < off[i + 1]!; t++) r[t] = weight(mk(t), i, t, R);
  }
  return { r, dapoNorm };
}

/** @internal Stage 8: the loss and its gradient through the direct term and the importance weights. */
export function reduceTerms(p: TrlInputs, terms: TrlTerms, r: Float64Array): { loss: number; g: Float64Array } {
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

/**
 * @internal Stage 9: the entropy bonus; returns the new loss and fills d loss / d entropy and its metrics.
 * `batchNorm`: the loss type divides by the batch's active tokens (DAPO's normaliser), not by the
 * gradient-accumulation steps.
 */
export function entropyBonusTerm(
  p: TrlInputs, batchNorm: boolean, loss: number, emask: Uint8Array | undefined, dapoNorm: number, gH: FloatArray,
  metrics: Record<string, number>,
): number {
  const { n, H, entCoef, nMb, mk } = p;
  const policyLoss = batchNorm ? loss : loss * nMb;
  if (entCoef !== 0 && H) {
    let s = 0, c = 0;
    for (let t = 0; t < n; t++) {
      const em = mk(t) * (emask ? emask[t]! : 1);
      s += H[t]! * em;
      c += em;
    }
    const den = batchNorm ? dapoNorm : Math.max(c, 1) * nMb;
    loss -= entCoef * (s / den);
    for (let t = 0; t < n; t++) gH[t] = -entCoef * (mk(t) * (emask ? emask[t]! : 1)) / den;
    metrics.policy_loss = policyLoss;
    metrics.entropy_coef = entCoef;
  }
  return loss;
}

/** @internal The means TRL logs its metrics with. */
export interface MetricStats {
  /** The mean of x over the valid tokens. */
  tokMean(x: (t: number) => number): number;
  /** A 0/1 flag's mean in float32: over the valid tokens, or over the rows when the ratio is per row (each row's first token). */
  mean(x: Uint8Array): number;
  /** A 0/1 flag per row: its mean over the row's valid tokens, or its value at the row's first token when the ratio is per row (NaN for an empty row). */
  seqVals(x: Uint8Array): number[];
}

/** @internal Stage 10: the metrics every loss type logs (KL, entropy), and the means the others are taken with. */
export function trlMetrics(p: TrlInputs, terms: TrlTerms, seqRatio: boolean, metrics: Record<string, number>): MetricStats {
  const { n, rows, off, len, nTok, ref, H, mk } = p;
  const { kl } = terms;
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
  return { tokMean, mean, seqVals };
}
