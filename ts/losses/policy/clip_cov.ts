/**
 * Clip-Cov (verl `compute_policy_loss_clip_cov`): PPO clip, then a seeded random `clipCovRatio` share
 * of the tokens whose covariance lies in (clipCovLb, clipCovUb) lose their gradient.
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { maskedMeanEps } from '../inputs.js';
import { mulberry32 } from '../../core/prng.js';
import { type Terms, asTerms, clampD, maxGrad, ratioStats } from './grad.js';
import { CLIP_RANGE, type ClipRangeOptions, clipRange } from './clip.js';
import { type KindOptions, builtinPolicyLoss } from './registry.js';

/**
 * Options of kind `clip_cov` (besides the clip range).
 *
 * @category Losses
 */
export interface ClipCovOptions {
  /**
   * Clip-Cov: share of valid tokens whose gradient is removed (default 2e-4).
   *
   * @defaultValue `2e-4`
   */
  clipCovRatio?: number;
  /**
   * Clip-Cov: lower covariance bound (default 1.0).
   *
   * @defaultValue `1`
   */
  clipCovLb?: number;
  /**
   * Clip-Cov: upper covariance bound (default 5.0).
   *
   * @defaultValue `5`
   */
  clipCovUb?: number;
  /**
   * Clip-Cov: seed of the random pick among candidates (default 0). When every candidate is picked the
   * result does not depend on it; otherwise the pick is a seeded partial Fisher-Yates shuffle (verl
   * uses `torch.randperm`, which cannot be reproduced bit for bit).
   *
   * @defaultValue `0`
   */
  seed?: number;
}

/** @internal Per-token terms of `clip_cov`. */
export function clipCovTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: KindOptions<ClipCovOptions> & { lo: number; hi: number }): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const byOrigin = new Uint8Array(n);
  let cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const r = Math.exp(lp[t]! - old[t]!);
    const L1 = -a * r;
    const [rc, drc] = clampD(r, 1 - o.lo, 1 + o.hi);
    const L2 = -a * rc;
    L[t] = Math.max(L1, L2);
    dL[t] = maxGrad(L1, L2, -a * r, -a * r * drc);
    const mt = mask === undefined ? 1 : mask[t]!;
    byOrigin[t] = L2 > L1 && mt ? 1 : 0;
    cnt += mt;
  }
  const mA = maskedMeanEps((t) => A[t]!, n, mask);
  const mL = maskedMeanEps((t) => lp[t]!, n, mask);
  const cand: number[] = [];
  for (let t = 0; t < n; t++) {
    if ((mask !== undefined && mask[t] === 0) || byOrigin[t]) continue;
    const cov = (A[t]! - mA) * (lp[t]! - mL);
    if (cov < o.clipCovUb && cov > o.clipCovLb) cand.push(t);
  }
  const clipNum = Math.max(Math.floor(o.clipCovRatio * cnt), 1);
  let picked: number[];
  if (clipNum >= cand.length) {
    picked = cand;
  } else {
    const rnd = mulberry32(o.seed);
    const arr = cand.slice();
    for (let j = 0; j < clipNum; j++) {
      const k = j + Math.floor(rnd() * (arr.length - j));
      const tmp = arr[j]!; arr[j] = arr[k]!; arr[k] = tmp;
    }
    picked = arr.slice(0, clipNum);
  }
  for (const t of picked) { L[t] = L[t]! * 0; dL[t] = 0; }
  const metrics: Record<string, number> = {
    pg_clipfrac: picked.length / (cnt + 1e-8),
    ppo_kl: maskedMeanEps((t) => -(lp[t]! - old[t]!), n, mask),
  };
  ratioStats(n, mask, (t) => Math.exp(lp[t]! - old[t]!), metrics);
  return { L, dL, metrics };
}

/** @internal Kind `clip_cov`. */
export const clipCov = builtinPolicyLoss<ClipRangeOptions & ClipCovOptions>()({
  name: 'clip_cov',
  description: 'covariance-selected gradient removal',
  options: {
    ...CLIP_RANGE,
    clipCovRatio: { type: 'number', min: 0, minOpen: true, default: 2e-4, description: 'share of valid tokens' },
    clipCovLb: { type: 'number', default: 1.0, description: 'lower covariance bound' },
    clipCovUb: { type: 'number', default: 5.0, description: 'upper covariance bound' },
    seed: { type: 'number', int: true, min: 0, max: 2 ** 32 - 1, default: 0, description: 'seed of the random pick' },
  },
  terms: (c) => asTerms(clipCovTerms(c.logprob, c.oldLogprob, c.advantages, c.mask,
    { ...(c.args as KindOptions<ClipCovOptions>), ...clipRange(c.args) })),
});
