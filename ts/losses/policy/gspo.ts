/**
 * GSPO (verl `compute_policy_loss_gspo`): the sequence-level ratio exp(mean_t(ℓ − ℓ_old)), clamped at
 * e^10, with the token's own gradient (ℓ − sg(ℓ) + sg(seq)); always `seq-mean-token-mean`.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { type Terms, asTerms, clampD, maxGrad, ratioStats } from './grad.js';
import { CLIP_RANGE, type ClipRangeOptions, clipRange } from './clip.js';
import { builtinPolicyLoss } from './registry.js';

/** @internal Per-token terms of `gspo`. */
export function gspoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined, o: { lo: number; hi: number }): Terms {
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

/** @internal Kind `gspo`. */
export const gspo = builtinPolicyLoss<ClipRangeOptions>()({
  name: 'gspo',
  description: 'GSPO sequence-level ratio clip',
  options: CLIP_RANGE,
  terms: (c) => asTerms(gspoTerms(c.logprob, c.oldLogprob, c.advantages, c.offsets, c.mask, clipRange(c.args))),
});
