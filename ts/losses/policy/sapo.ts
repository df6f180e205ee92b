/**
 * SAPO (verl `compute_policy_loss_sapo`): soft gate `−σ(τ(ρ − 1))·(4/τ)·A`, τ = `tauPos` for A > 0 and
 * `tauNeg` otherwise; always `seq-mean-token-mean`.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { type Terms, asTerms, clampD, ratioStats } from './grad.js';
import { type KindOptions, builtinPolicyLoss } from './registry.js';

/**
 * Options of kind `sapo`.
 *
 * @category Losses
 */
export interface SapoOptions {
  /**
   * SAPO temperature for A > 0 (default 1.0).
   *
   * @defaultValue `1`
   */
  tauPos?: number;
  /**
   * SAPO temperature for A <= 0 (default 1.05).
   *
   * @defaultValue `1.05`
   */
  tauNeg?: number;
}

/** @internal Per-token terms of `sapo`. */
export function sapoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: KindOptions<SapoOptions>): Terms {
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

/** @internal Kind `sapo`. */
export const sapo = builtinPolicyLoss<SapoOptions>()({
  name: 'sapo',
  description: 'SAPO soft-gated ratio',
  options: {
    tauPos: { type: 'number', min: 0, minOpen: true, default: 1.0, description: 'temperature for A > 0' },
    tauNeg: { type: 'number', min: 0, minOpen: true, default: 1.05, description: 'temperature for A <= 0' },
  },
  terms: (c) => asTerms(sapoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, c.args as KindOptions<SapoOptions>)),
});
