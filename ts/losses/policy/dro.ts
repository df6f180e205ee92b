/**
 * DRO (verl `compute_policy_loss_dro`): `−(ℓ·A − ½β(ℓ − ℓ_old)²)`.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { maskedMeanEps } from '../inputs.js';
import { type Terms, asTerms, ratioStats } from './grad.js';
import { type KindOptions, builtinPolicyLoss } from './registry.js';

/**
 * Options of kind `dro`.
 *
 * @category Losses
 */
export interface DroOptions {
  /** DRO: β (required with kind `dro`, > 0). */
  droBeta?: number;
}

/** @internal Per-token terms of `dro`. */
export function droTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: KindOptions<DroOptions>): Terms {
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

/** @internal Kind `dro`. */
export const dro = builtinPolicyLoss<DroOptions>()({
  name: 'dro',
  description: 'DRO −(ℓA − ½βδ²)',
  options: { droBeta: { type: 'number', min: 0, minOpen: true, required: true, description: 'β (required, > 0)' } },
  terms: (c) => asTerms(droTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, c.args as KindOptions<DroOptions>)),
});
