/**
 * Paired statistics over seeds: each method against a baseline run on the same tasks and sampling
 * streams.
 *
 * @module
 */

/** The paired comparison of one metric. */
export interface Paired {
  /** Seeds compared. */
  n: number;
  /** Mean of the per-seed differences (method − baseline). */
  mean: number;
  /** Standard error of that mean (sample standard deviation / √n). */
  se: number;
  /** mean / se (0 when both are 0; ±Infinity when only se is 0). */
  t: number;
  /** Seeds where the method is ahead, behind, level. */
  wins: number;
  losses: number;
  ties: number;
  /** True when |mean| ≤ 2 se: the difference is not told apart from seed noise. */
  tie: boolean;
}

/** Paired statistics of `method[i] − baseline[i]`. */
export function paired(method: readonly number[], baseline: readonly number[]): Paired {
  if (method.length !== baseline.length || method.length < 2) throw new Error('paired: need two equal-length lists of at least 2 seeds');
  const n = method.length;
  const d = method.map((m, i) => m - baseline[i]!);
  const mean = d.reduce((a, x) => a + x, 0) / n;
  const sd = Math.sqrt(d.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1));
  const se = sd / Math.sqrt(n);
  const t = se > 0 ? mean / se : mean === 0 ? 0 : Math.sign(mean) * Infinity;
  return {
    n, mean, se, t,
    wins: d.filter((x) => x > 0).length, losses: d.filter((x) => x < 0).length, ties: d.filter((x) => x === 0).length,
    tie: Math.abs(mean) <= 2 * se,
  };
}

/** "+0.012 ± 0.008 (t 1.5, 18/10/2)": the difference, its standard error, t and wins/losses/level. */
export function formatPaired(p: Paired): string {
  const s = (x: number) => (x >= 0 ? '+' : '') + x.toFixed(3);
  return `${s(p.mean)} ± ${p.se.toFixed(3)} (t ${Number.isFinite(p.t) ? p.t.toFixed(1) : p.t > 0 ? '∞' : '−∞'}, ${p.wins}/${p.losses}/${p.ties})`;
}
