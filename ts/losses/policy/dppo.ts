/**
 * DPPO-TV / DPPO-KL (verl `compute_policy_loss_dppo_tv` / `_dppo_kl`): a trust region on the
 * probability divergence (total variation, or binary KL) masks tokens outside it; the rest get the
 * truncated IS weight `min(ρ, c)` times −Aℓ.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { type Terms, asTerms, ratioStats } from './grad.js';
import { CLIP_RANGE, clipRange } from './clip.js';
import type { PpoOptions } from './ppo.js';
import { type KindOptions, builtinPolicyLoss } from './registry.js';

/** The options of both DPPO kinds: the trust region's bounds, and `clipC` as the IS truncation. */
type DppoOptions = Pick<PpoOptions, 'clipLow' | 'clipHigh' | 'clipC'>;
const DPPO_OPTIONS = Object.freeze({
  ...CLIP_RANGE,
  clipC: { type: 'number', min: 0, minOpen: true, default: 20, description: 'IS truncation' },
} as const);

/** The DPPO settings of resolved arguments. */
function dppoSettings(args: Readonly<Record<string, unknown>>): { lo: number; hi: number; c: number } {
  return { ...clipRange(args), c: (args as KindOptions<DppoOptions>).clipC };
}

/** @internal Per-token terms of `dppo`. */
export function dppoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: { lo: number; hi: number; c: number }, tv: boolean): Terms {
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

/** @internal Kind `dppo_tv`. */
export const dppoTv = builtinPolicyLoss<DppoOptions>()({
  name: 'dppo_tv',
  description: 'probability trust region (total variation) with truncated IS',
  options: DPPO_OPTIONS,
  terms: (c) => asTerms(dppoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, dppoSettings(c.args), true)),
});
/** @internal Kind `dppo_kl`. */
export const dppoKl = builtinPolicyLoss<DppoOptions>()({
  name: 'dppo_kl',
  description: 'probability trust region (binary KL) with truncated IS',
  options: DPPO_OPTIONS,
  terms: (c) => asTerms(dppoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, dppoSettings(c.args), false)),
});
