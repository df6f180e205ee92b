/**
 * DPPO-TV / DPPO-KL (verl `compute_policy_loss_dppo_tv` / `_dppo_kl`): a trust region on the
 * probability divergence (total variation, or binary KL) masks tokens outside it; the rest get the
 * truncated IS weight `min(ρ, c)` times −Aℓ.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { asTerms, ratioStats } from './grad.js';
import { registerBuiltinPolicyLoss } from './registry.js';
import { sharedOptions } from './shared_options.js';
import type { Opts, Terms } from './types.js';

/** @internal Per-token terms of `dppo`. */
export function dppoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: Opts, tv: boolean): Terms {
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

registerBuiltinPolicyLoss({
  name: 'dppo_tv',
  description: 'probability trust region (total variation) with truncated IS',
  options: sharedOptions('clipLow', 'clipHigh', 'truncation'),
  terms: (c) => asTerms(dppoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, c.options, true)),
});
registerBuiltinPolicyLoss({
  name: 'dppo_kl',
  description: 'probability trust region (binary KL) with truncated IS',
  options: sharedOptions('clipLow', 'clipHigh', 'truncation'),
  terms: (c) => asTerms(dppoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, c.options, false)),
});
