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

/**
 * Area under the ROC curve of `scores` for telling `positive` items from the others: the probability
 * that a random positive scores higher than a random negative, ties counting one half (the
 * Mann–Whitney U statistic over n₊·n₋). NaN without positives or without negatives.
 */
export function auroc(scores: ArrayLike<number>, positive: ArrayLike<boolean | number>): number {
  const n = scores.length;
  if (positive.length !== n) throw new Error(`auroc: ${n} scores vs ${positive.length} labels`);
  const idx = Array.from({ length: n }, (_, i) => i).sort((a, b) => scores[a]! - scores[b]!);
  let pos = 0, rankSum = 0;
  for (let i = 0; i < n;) {
    let j = i;
    while (j + 1 < n && scores[idx[j + 1]!] === scores[idx[i]!]) j++;
    const avg = (i + j) / 2 + 1; // tied scores share their average rank
    for (let k = i; k <= j; k++) if (positive[idx[k]!]) { pos++; rankSum += avg; }
    i = j + 1;
  }
  const neg = n - pos;
  if (pos === 0 || neg === 0) return NaN;
  return (rankSum - (pos * (pos + 1)) / 2) / (pos * neg);
}

/** A mean with its bootstrap interval. */
export interface BootstrapMean {
  /** Values used (NaN values are left out). */
  n: number;
  /** Their mean. */
  mean: number;
  /** Lower end of the percentile interval. */
  lo: number;
  /** Upper end of the percentile interval. */
  hi: number;
}

/**
 * Percentile bootstrap interval of a mean: `resamples` resamples with replacement of the finite values
 * (NaN ones, e.g. batches without any positive for an AUROC, are left out), drawn from a seeded
 * generator, and the (1 − level)/2 and (1 + level)/2 quantiles of their means (linear interpolation).
 * One value gives a zero-width interval; none gives NaN.
 */
export function bootstrapMean(xs: readonly number[], opts: { resamples?: number; level?: number; seed?: number } = {}): BootstrapMean {
  const ys = xs.filter(Number.isFinite);
  const n = ys.length;
  if (n === 0) return { n, mean: NaN, lo: NaN, hi: NaN };
  const mean = ys.reduce((a, b) => a + b, 0) / n;
  const B = opts.resamples ?? 2000, level = opts.level ?? 0.95;
  // mulberry32, as the examples' Rng, without importing it here
  let s = (opts.seed ?? 1) >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const means = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    let sum = 0;
    for (let i = 0; i < n; i++) sum += ys[Math.floor(next() * n)]!;
    means[b] = sum / n;
  }
  means.sort();
  const q = (p: number) => {
    const h = (B - 1) * p, lo = Math.floor(h);
    return means[lo]! + (h - lo) * (means[Math.min(lo + 1, B - 1)]! - means[lo]!);
  };
  return { n, mean, lo: q((1 - level) / 2), hi: q((1 + level) / 2) };
}

/**
 * Cosine similarity of two vectors under per-coordinate weights w ≥ 0: Σ a·b·w / √(Σ a²·w · Σ b²·w).
 * NaN when either weighted norm is 0.
 */
export function weightedCosine(a: ArrayLike<number>, b: ArrayLike<number>, w: ArrayLike<number>): number {
  if (a.length !== b.length || a.length !== w.length) throw new Error('weightedCosine: lengths differ');
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]! * w[i]!;
    aa += a[i]! * a[i]! * w[i]!;
    bb += b[i]! * b[i]! * w[i]!;
  }
  return aa > 0 && bb > 0 ? ab / Math.sqrt(aa * bb) : NaN;
}
