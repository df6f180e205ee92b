/**
 * Seeded pseudo-random numbers for the examples: every random choice (task layout, warm-start data,
 * initial weights, sampled tokens) comes from one of these, so a run is reproducible from its seed.
 *
 * @module
 */

/** Mixes a 32-bit integer (the finaliser of MurmurHash3); used to derive independent streams. */
export function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** Derives a stream seed from a parent seed and any number of integer labels. */
export function deriveSeed(seed: number, ...labels: number[]): number {
  let h = mix32((seed >>> 0) ^ 0x9e3779b9);
  for (const l of labels) h = mix32((h + Math.imul((l >>> 0) | 0, 0x27d4eb2f) + 0x165667b1) >>> 0);
  return h;
}

/** Small, fast generator (mulberry32): 32-bit state, period 2^32, good enough for simulation. */
export class Rng {
  private s: number;

  /** @param seed any integer; equal seeds give equal streams. */
  constructor(seed: number) {
    this.s = mix32(seed >>> 0) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Fisher-Yates shuffle in place; returns the array. */
  shuffle<T>(a: T[]): T[] {
    for (let i = a.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = a[i]!;
      a[i] = a[j]!;
      a[j] = t;
    }
    return a;
  }

  /**
   * Samples an index from `logits` (row `row` of a row-major matrix with `vocab` columns) at
   * temperature 1 by inverse CDF over the softmax, computed in float64.
   */
  sampleLogits(logits: ArrayLike<number>, vocab: number, row = 0): number {
    const base = row * vocab;
    let max = -Infinity;
    for (let j = 0; j < vocab; j++) max = Math.max(max, logits[base + j]!);
    let sum = 0;
    for (let j = 0; j < vocab; j++) sum += Math.exp(logits[base + j]! - max);
    let u = this.next() * sum;
    for (let j = 0; j < vocab; j++) {
      u -= Math.exp(logits[base + j]! - max);
      if (u < 0) return j;
    }
    return vocab - 1;
  }
}
