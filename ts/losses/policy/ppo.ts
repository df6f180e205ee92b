/**
 * PPO clip loss with dual clip (verl `compute_policy_loss_vanilla`, loss mode `vanilla`):
 * `min(max(−Aρ, −A clip(ρ, 1−ε_low, 1+ε_high)), −A c)` for A < 0, ρ = exp(clamp(ℓ − ℓ_old, ±20)).
 * float32 inputs without importance weights take the fused native pass instead (see `ppo_native.ts`).
 *
 * @module
 */
import type { FloatArray } from '../inputs.js';
import { CLIP_RANGE, type ClipRangeOptions, clipRange } from './clip.js';
import { type Terms, asTerms, clampD, maxGrad, minGrad, ratioStats } from './grad.js';
import { type KindOptions, builtinPolicyLoss } from './registry.js';

/**
 * Options of kind `ppo` (and the clip options of the other clipped kinds).
 *
 * @category Losses
 */
export interface PpoOptions extends ClipRangeOptions {
  /**
   * Dual-clip constant c for A < 0 (ppo; default 3, must be > 1) or the DPPO truncation (default 20, > 0).
   *
   * @defaultValue `3` (ppo's dual clip; `20` for the DPPO truncation)
   */
  clipC?: number;
  /**
   * ±clamp of the log-ratio before exp (default 20; `null` = none, verl-agent's PPO, which is also the
   * default under `compat: 'verl-agent'`).
   *
   * @defaultValue `20`
   */
  logRatioClamp?: number | null;
}

/** @internal The clip settings of the PPO terms, resolved. */
export interface PpoSettings { lo: number; hi: number; c: number; clamp: number }

/** @internal The PPO settings of resolved arguments (`null` clamp = none). */
export function ppoSettings(args: Readonly<Record<string, unknown>>): PpoSettings {
  const o = args as KindOptions<PpoOptions>;
  const { lo, hi } = clipRange(args);
  return { lo, hi, c: o.clipC, clamp: o.logRatioClamp === null ? Infinity : o.logRatioClamp };
}

/** @internal Per-token terms of `ppo`. */
export function ppoTerms(lp: FloatArray, old: FloatArray, A: FloatArray, mask: Uint8Array | undefined, o: PpoSettings, dual: boolean): Terms {
  const n = lp.length;
  const L = new Float64Array(n);
  const dL = new Float64Array(n);
  const ratio = new Float64Array(n);
  let clipN = 0, lowerN = 0, kl = 0, cnt = 0;
  for (let t = 0; t < n; t++) {
    const a = A[t]!;
    const [x, dx] = clampD(lp[t]! - old[t]!, -o.clamp, o.clamp);
    const r = Math.exp(x);
    ratio[t] = r;
    const L1 = -a * r;
    const [rc, drc] = clampD(r, 1 - o.lo, 1 + o.hi);
    const L2 = -a * rc;
    const d1 = -a * r * dx;
    const d2 = -a * r * dx * drc;
    const Lc = Math.max(L1, L2);
    const dc = maxGrad(L1, L2, d1, d2);
    let Lt = Lc, dt = dc;
    let lower = 0;
    if (dual && a < 0) {
      const L3 = -a * o.c;
      Lt = Math.min(L3, Lc);
      dt = minGrad(L3, Lc, 0, dc);
      lower = Lc > L3 ? 1 : 0;
    }
    L[t] = Lt;
    dL[t] = dt;
    if (mask === undefined || mask[t]) {
      clipN += L2 > L1 ? 1 : 0;
      lowerN += lower;
      kl += -x;
      cnt++;
    }
  }
  const metrics: Record<string, number> = {
    pg_clipfrac: clipN / (cnt + 1e-8),
    pg_clipfrac_lower: lowerN / (cnt + 1e-8),
    ppo_kl: kl / (cnt + 1e-8),
  };
  ratioStats(n, mask, (t) => ratio[t]!, metrics);
  return { L, dL, metrics };
}

/** @internal Kind `ppo`. */
export const ppo = builtinPolicyLoss<PpoOptions>()({
  name: 'ppo',
  aliases: ['vanilla'],
  description: 'PPO clip with dual clip (verl vanilla)',
  options: {
    ...CLIP_RANGE,
    clipC: { type: 'number', min: 1, minOpen: true, default: 3, description: 'dual-clip constant c for A < 0' },
    logRatioClamp: { type: 'number', min: 0, minOpen: true, nullable: true, default: 20, description: '±clamp of the log-ratio (null: none)' },
  },
  terms: (c) => asTerms(ppoTerms(c.logprob, c.oldLogprob, c.advantages, c.mask, ppoSettings(c.args), true)),
});
