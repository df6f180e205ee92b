/**
 * GMPO (verl `compute_policy_loss_geo_mean`): the geometric mean of the per-token clipped ratios of a row,
 * `exp(mean_t sgn(A)·min(sgn(A)·δ, sgn(A)·clip(δ, −ε_low, ε_high)))`, times the row's mean advantage;
 * averaged over all rows (`globalRows` when given), its own reduction.
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import { type FloatArray, maskedMeanEps } from '../inputs.js';
import { clampD, minGrad, ratioStats } from './grad.js';
import { CLIP_RANGE, type ClipRangeOptions, clipRange } from './clip.js';
import { builtinPolicyLoss } from './registry.js';

/** @internal GMPO (verl `geo_mean`): its own reduction (mean over all rows); returns value and per-token gradient. */
export function gmpoReduce(lp: FloatArray, old: FloatArray, A: FloatArray, offsets: Int32Array, mask: Uint8Array | undefined,
  o: { lo: number; hi: number }, isw: Float64Array | undefined, globalRows: number | undefined): { value: number; g: Float64Array; metrics: Record<string, number> } {
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

/** @internal Kind `gmpo`. */
export const gmpo = builtinPolicyLoss<ClipRangeOptions>()({
  name: 'gmpo',
  aliases: ['geo_mean'],
  description: 'GMPO geometric-mean ratio per row (its own reduction)',
  options: CLIP_RANGE,
  reduce: (c) => {
    const rows = c.offsets.length - 1;
    if (c.aggOptions.globalRows !== undefined && c.aggOptions.globalRows < rows) {
      fail('ERR_OPTION', 'globalRows', `>= the ${rows} rows of this call (GMPO averages over all rows)`, c.aggOptions.globalRows);
    }
    const r = gmpoReduce(c.logprob, c.oldLogprob, c.advantages, c.offsets, c.mask, clipRange(c.args), c.isWeights, c.aggOptions.globalRows);
    return { loss: r.value, grad: r.g, metrics: r.metrics };
  },
});
