/**
 * KL-Cov (verl `compute_policy_loss_kl_cov`): the `klCovRatio` share of valid tokens with the largest
 * covariance (A − mean A)(ℓ − mean ℓ) get the penalty `ppoKlCoef·|ℓ − ℓ_old|` on top of −Aρ.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { maskedMeanEps } from '../inputs.js';
import { type Terms, asTerms, ratioStats } from './grad.js';
import { type KindOptions, builtinPolicyLoss } from './registry.js';

/**
 * Options of kind `kl_cov`.
 *
 * @category Losses
 */
export interface KlCovOptions {
  /**
   * KL-Cov: share of valid tokens that get the |δ| penalty (default 2e-4).
   *
   * @defaultValue `2e-4`
   */
  klCovRatio?: number;
  /**
   * KL-Cov: coefficient of |δ| (default 1.0, verl's function fallback; its config uses 0.1).
   *
   * @defaultValue `1`
   */
  ppoKlCoef?: number;
}

/** @internal Per-token terms of `kl_cov`. */
export function klCovTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: KindOptions<KlCovOptions>): Terms {
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

/** @internal Kind `kl_cov`. */
export const klCov = builtinPolicyLoss<KlCovOptions>()({
  name: 'kl_cov',
  description: 'covariance-selected |δ| penalty',
  options: {
    klCovRatio: { type: 'number', min: 0, minOpen: true, default: 2e-4, description: 'share of valid tokens penalised' },
    ppoKlCoef: { type: 'number', default: 1.0, description: 'coefficient of |δ|' },
  },
  terms: (c) => asTerms(klCovTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, c.args as KindOptions<KlCovOptions>)),
});
