/**
 * Small statistics for the demo's tables: mean and standard error, and the paired comparison of a
 * method with GRPO over seeds (the same task and sampling streams per seed).
 *
 * @module
 */

/** Mean, sample standard deviation (n - 1) and standard error of the mean; std and se are 0 for one value. */
export function meanSe(xs: readonly number[]): { n: number; mean: number; std: number; se: number } {
  const n = xs.length;
  if (n === 0) return { n, mean: NaN, std: NaN, se: NaN };
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  const std = n > 1 ? Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1)) : 0;
  return { n, mean, std, se: std / Math.sqrt(n) };
}

/** The paired comparison of two samples over the same seeds. */
export interface Paired {
  /** Number of pairs. */
  n: number;
  /** Mean of the differences `a_i - b_i`. */
  mean: number;
  /** Sample standard deviation of the differences. */
  std: number;
  /** Standard error of the mean difference (std / sqrt(n)). */
  se: number;
  /** Paired t statistic mean / se (0 when every difference is 0; +-Infinity when se is 0 otherwise). */
  t: number;
  /** Pairs where `a` is larger. */
  wins: number;
  /** Pairs where `b` is larger. */
  losses: number;
  /** Pairs that are equal. */
  draws: number;
  /** True when |mean| <= 2 se: the demo calls the difference a tie. */
  tie: boolean;
}

/** Paired differences `a_i - b_i` (same seed i) summarised; throws when the samples differ in length. */
export function paired(a: readonly number[], b: readonly number[]): Paired {
  if (a.length !== b.length) throw new Error(`paired: ${a.length} vs ${b.length} values`);
  const d = a.map((x, i) => x - b[i]!);
  const { n, mean, std, se } = meanSe(d);
  const t = se > 0 ? mean / se : mean === 0 ? 0 : mean > 0 ? Infinity : -Infinity;
  let wins = 0, losses = 0, draws = 0;
  for (const x of d) if (x > 0) wins++; else if (x < 0) losses++; else draws++;
  return { n, mean, std, se, t, wins, losses, draws, tie: !(Math.abs(mean) > 2 * se) };
}

/** `+0.012 ± 0.034` (sign always shown). */
export function signedPm(mean: number, se: number, digits = 3): string {
  return `${mean >= 0 ? '+' : '-'}${Math.abs(mean).toFixed(digits)} ± ${se.toFixed(digits)}`;
}
