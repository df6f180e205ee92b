/**
 * Gradient helpers of the loss kinds: torch's autograd conventions at `max` / `min` ties and at active
 * clamps, and the ratio metrics every kind reports.
 *
 * @module
 */
import type { AggMode } from '../aggregate.js';
import type { PolicyLossTerms } from './registry.js';

/** @internal Per-token loss terms of a built-in kind before aggregation. */
export interface Terms {
  L: Float64Array;   // per-token loss
  dL: Float64Array;  // d L_t / d ℓ_t
  metrics: Record<string, number>;
  forcedAgg?: AggMode;
}

/** d max(a, b) routing as torch.maximum: ties split the gradient evenly. */
export function maxGrad(a: number, b: number, da: number, db: number): number {
  return a > b ? da : b > a ? db : 0.5 * (da + db);
}
/** d min(a, b) routing as torch.minimum: ties split the gradient evenly. */
export function minGrad(a: number, b: number, da: number, db: number): number {
  return a < b ? da : b < a ? db : 0.5 * (da + db);
}

/** Clamp with torch's gradient convention: passes (1) inside [lo, hi] inclusive, 0 outside. */
export function clampD(x: number, lo: number, hi: number): [number, number] {
  if (x < lo) return [lo, 0];
  if (x > hi) return [hi, 0];
  return [x, 1];
}

/** Writes `ratio_mean`, `ratio_min`, `ratio_max` over valid tokens into `metrics`. */
export function ratioStats(n: number, mask: Uint8Array | undefined, ratio: (t: number) => number, metrics: Record<string, number>): void {
  let s = 0, c = 0, mn = Infinity, mx = -Infinity;
  for (let t = 0; t < n; t++) {
    if (mask !== undefined && mask[t] === 0) continue;
    const r = ratio(t);
    s += r; c++;
    if (r < mn) mn = r;
    if (r > mx) mx = r;
  }
  metrics.ratio_mean = c > 0 ? s / c : 0;
  metrics.ratio_min = c > 0 ? mn : 0;
  metrics.ratio_max = c > 0 ? mx : 0;
}

/** @internal A built-in kind's terms in the registry's {@link PolicyLossTerms} shape (no copy). */
export function asTerms(t: Terms): PolicyLossTerms {
  return { loss: t.L, dloss: t.dL, metrics: t.metrics, agg: t.forcedAgg };
}
