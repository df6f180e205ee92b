/**
 * CISPO (verl `compute_policy_loss_cispo`): `−sg(clip(ρ, 1−ε_low, 1+ε_high))·A·ℓ`.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { type Terms, asTerms, ratioStats } from './grad.js';
import { CLIP_RANGE, type ClipRangeOptions, clipRange } from './clip.js';
import { builtinPolicyLoss } from './registry.js';

/** @internal Per-token terms of `cispo`. */
export function cispoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: { lo: number; hi: number }): Terms {
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

/** @internal Kind `cispo`. */
export const cispo = builtinPolicyLoss<ClipRangeOptions>()({
  name: 'cispo',
  description: 'clipped IS weight times −Aℓ',
  options: CLIP_RANGE,
  terms: (c) => asTerms(cispoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, clipRange(c.args))),
});
