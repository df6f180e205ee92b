// The statistics of the GEAR experiments on synthetic data with known answers: the AUROC, the bootstrap
// interval of a mean, the weighted cosine, and the declared decision rules applied to paired AUCs.
import { describe, expect, it } from 'vitest';
import { Rng } from '../../examples/env/rng.js';
import { DECISION_ARMS, LOGRATIO_ARMS, decide } from '../../examples/report/decision.js';
import { auroc, bootstrapMean, weightedCosine } from '../../examples/report/stats.js';

/** Standard normal CDF (Abramowitz–Stegun 7.1.26 on erf, |error| < 1.5e-7). */
function phi(x: number): number {
  const z = Math.abs(x) / Math.SQRT2, t = 1 / (1 + 0.3275911 * z);
  const erf = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-z * z);
  return x >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
}

describe('AUROC', () => {
  it('hand-computed cases: separation, reversal, ties, undefined', () => {
    expect(auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1])).toBe(1);
    expect(auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1])).toBe(0);
    expect(auroc([1, 1, 1, 1], [0, 1, 0, 1])).toBe(0.5);
    // positives 0.5, 0.3; negatives 0.4, 0.1, 0.3: pairs (0.5 > all three) 3, (0.3 > 0.1) 1, (0.3 = 0.3) 0.5 -> 4.5 / 6.
    expect(auroc([0.5, 0.4, 0.3, 0.1, 0.3], [true, false, true, false, false])).toBeCloseTo(4.5 / 6, 12);
    expect(auroc([1, 2], [1, 1])).toBeNaN();
    expect(auroc([1, 2], [0, 0])).toBeNaN();
    expect(() => auroc([1], [1, 0])).toThrow();
  });

  it('two normal samples a distance d apart: AUROC = Φ(d / √2)', () => {
    const rng = new Rng(7);
    for (const d of [0, 0.5, 1.5]) {
      const s: number[] = [], y: boolean[] = [];
      for (let i = 0; i < 4000; i++) { s.push(rng.normal()); y.push(false); s.push(rng.normal() + d); y.push(true); }
      // sd of the estimate about sqrt(1/12 (1/n + 1/m)) ≈ 0.0065 at d = 0; 5 sd.
      expect(Math.abs(auroc(s, y) - phi(d / Math.SQRT2))).toBeLessThan(0.033);
    }
  });
});

describe('bootstrap interval of a mean', () => {
  it('the mean exactly; NaN values left out; one value gives a zero-width interval; none gives NaN', () => {
    const b = bootstrapMean([1, 2, 3, NaN, 6]);
    expect(b.n).toBe(4);
    expect(b.mean).toBe(3);
    expect(b.lo).toBeLessThanOrEqual(3);
    expect(b.hi).toBeGreaterThanOrEqual(3);
    expect(bootstrapMean([5])).toEqual({ n: 1, mean: 5, lo: 5, hi: 5 });
    expect(bootstrapMean([2, 2, 2])).toEqual({ n: 3, mean: 2, lo: 2, hi: 2 });
    expect(Number.isNaN(bootstrapMean([NaN]).mean)).toBe(true);
    expect(bootstrapMean([1, 4, 2, 8], { seed: 3 })).toEqual(bootstrapMean([1, 4, 2, 8], { seed: 3 }));
  });

  it('on normal data the 95 % interval is about mean ± 1.96 σ/√n, and covers the true mean about 95 % of the time', () => {
    const rng = new Rng(11);
    let covered = 0, width = 0;
    const trials = 300, n = 40;
    for (let k = 0; k < trials; k++) {
      const xs = Array.from({ length: n }, () => 2 + rng.normal());
      const b = bootstrapMean(xs, { resamples: 1000, seed: k + 1 });
      if (b.lo <= 2 && 2 <= b.hi) covered++;
      width += b.hi - b.lo;
    }
    // Expected width 2 · 1.96 / √40 ≈ 0.620 (the percentile bootstrap runs a little narrow at n = 40).
    expect(width / trials).toBeGreaterThan(0.56);
    expect(width / trials).toBeLessThan(0.66);
    // Coverage ~ Binomial(300, 0.95), sd 0.0126; the percentile interval undercovers slightly: [0.88, 0.99].
    expect(covered / trials).toBeGreaterThan(0.88);
    expect(covered / trials).toBeLessThan(0.99);
  });
});

describe('weighted cosine', () => {
  it('hand-computed; weights as per-coordinate scales; NaN for a zero vector', () => {
    // a = (1, 0), b = (1, 1), w = (1, 3): a·b·w = 1, |a|² = 1, |b|² = 4 -> 0.5.
    expect(weightedCosine([1, 0], [1, 1], [1, 3])).toBeCloseTo(0.5, 12);
    expect(weightedCosine([1, 2], [2, 4], [5, 7])).toBeCloseTo(1, 12);
    expect(weightedCosine([1, 2], [-1, -2], [1, 1])).toBeCloseTo(-1, 12);
    expect(weightedCosine([0, 0], [1, 2], [1, 1])).toBeNaN();
    expect(weightedCosine([1, 5], [1, -5], [1, 0])).toBeCloseTo(1, 12); // a zero weight removes the coordinate
  });
});

describe('the declared decision rules', () => {
  const rng = new Rng(3);
  const seeds = 16;
  const base = Array.from({ length: seeds }, () => 0.5 + 0.05 * rng.normal());
  const plus = (d: number, noise: number) => base.map((x) => x + d + noise * rng.normal());
  const run = (arms: Record<string, number[]>) => decide((m) => arms[m], (m) => m);

  it('GEAR helps only when it beats GRPO and its shuffled control, each by more than 2 se', () => {
    const A = DECISION_ARMS;
    // +0.05 ± 0.01 noise per seed: se ≈ 0.0025, far beyond 2 se on both tests.
    const helps = run({ [A.baseline]: base, [A.gear]: plus(0.05, 0.01), [A.shuffled]: plus(0, 0.01) });
    expect(helps.h1!.helps).toBe(true);
    expect(helps.h1!.vsBaseline.ahead && helps.h1!.vsShuffled.ahead).toBe(true);
    expect(helps.lines.join('\n')).toMatch(/H1 outcome: GEAR helps/);
    // Ahead of GRPO, but the shuffled control is just as far ahead: the location does not matter.
    const gear = plus(0.05, 0.01);
    const notLocation = run({ [A.baseline]: base, [A.gear]: gear, [A.shuffled]: gear.map((x) => x + 0.002 + 0.001 * rng.normal()) });
    expect(notLocation.h1!.vsBaseline.ahead).toBe(true);
    expect(notLocation.h1!.vsShuffled.ahead).toBe(false);
    expect(notLocation.h1!.helps).toBe(false);
    expect(notLocation.lines.join('\n')).toMatch(/does not help .*not ahead of its shuffled control/);
    // A tie with GRPO.
    const tie = run({ [A.baseline]: base, [A.gear]: plus(0, 0.02), [A.shuffled]: plus(-0.05, 0.01) });
    expect(tie.h1!.helps).toBe(false);
    expect(tie.h1!.vsShuffled.ahead).toBe(true);
  });

  it('a tie of the oracle weights sends the reading to H2; a win of the oracle does not', () => {
    const A = DECISION_ARMS;
    const arms = {
      [A.baseline]: base, [A.gear]: plus(0, 0.02), [A.shuffled]: plus(0, 0.02), [A.oracle]: plus(0.001, 0.02),
      [A.strongOracle]: plus(0.04, 0.01), [A.strongGear]: plus(0.03, 0.01), [A.strongShuffled]: plus(0, 0.01),
    };
    const d = run(arms);
    expect(d.ceiling!.tie).toBe(true);
    expect(d.h2!.read).toBe(true);
    expect(d.h2!.oracleHelps).toBe(true);
    expect(d.h2!.gearHelps).toBe(true);
    expect(d.lines.join('\n')).toMatch(/a tie: by the rule, the bounded mean-one family may itself be the limit/);
    // Without H2's arms, the verdict says they were not run.
    const { [A.strongOracle]: _o, [A.strongGear]: _g, [A.strongShuffled]: _s, ...h1only } = arms;
    const n = run(h1only);
    expect(n.h2).toBeUndefined();
    expect(n.lines.join('\n')).toMatch(/H2 not tested here: its arms \(oracle-strong, gear-strong, gear-strong-shuffled\) were not run/);
    const w = run({ ...arms, [A.oracle]: plus(0.05, 0.01) });
    expect(w.ceiling!.tie).toBe(false);
    expect(w.h2!.read).toBe(false);
    expect(w.lines.join('\n')).toMatch(/reported although the ceiling check did not tie/);
  });

  it('H3: the log-ratio signal is recommended for a teacher only when it beats GRPO, its shuffled control and GEAR with D', () => {
    const A = DECISION_ARMS, F = LOGRATIO_ARMS.frozen, S = LOGRATIO_ARMS.self, G = LOGRATIO_ARMS.strong;
    const lr = plus(0.05, 0.01);
    const d = run({
      [A.baseline]: base, [F.gear]: lr, [F.shuffled]: plus(0, 0.01), [F.divergence]: plus(-0.02, 0.01),
      // self: beats GRPO and its control, ties with D
      [S.gear]: plus(0.03, 0.01), [S.shuffled]: plus(0, 0.01), [S.divergence]: plus(0.03, 0.01),
      // stronger family: beats D, but not GRPO
      [G.gear]: plus(0, 0.01), [G.shuffled]: plus(-0.03, 0.01), [G.divergence]: plus(-0.05, 0.01),
    });
    expect(d.h3!.frozen!.recommended).toBe(true);
    expect(d.h3!.self!.helps).toBe(true);
    expect(d.h3!.self!.beatsDivergence).toBe(false);
    expect(d.h3!.self!.recommended).toBe(false);
    expect(d.h3!.strong!.helps).toBe(false);
    expect(d.h3!.strong!.beatsDivergence).toBe(true);
    const text = d.lines.join('\n');
    expect(text).toMatch(/H3 outcome \(frozen answer teacher\): recommended/);
    expect(text).toMatch(/H3 outcome \(self teacher\): it helps .* not recommended over D/);
    expect(text).toMatch(/H3 outcome \(stronger family.*\): it does not help \(not ahead of GRPO beyond 2 se\); it is ahead of GEAR with D beyond 2 se, but not recommended \(GRPO\)/);
    // the rules H1 and H2 read their own arms only: H3's arms alone leave them untested
    expect(d.h1).toBeUndefined();
    // without GEAR with D, H3 is read without the comparison to it, and nothing is recommended
    const noD = run({ [A.baseline]: base, [F.gear]: lr, [F.shuffled]: plus(0, 0.01) });
    expect(noD.h3!.frozen!.helps).toBe(true);
    expect(noD.h3!.frozen!.vsDivergence).toBeUndefined();
    expect(noD.h3!.frozen!.recommended).toBe(false);
    expect(run({ [A.baseline]: base }).h3).toBeUndefined();
  });

  it('the paired numbers are the paired statistics of the per-seed differences (hand-computed)', () => {
    const A = DECISION_ARMS;
    // d = gear - grpo = [0.1, 0.3, -0.1, 0.1]: mean 0.1, sd sqrt(0.08 / 3), se = sd / 2 = 0.0816 -> 0.1 < 2 se.
    const d = decide((m) => ({ [A.baseline]: [0.5, 0.5, 0.5, 0.5], [A.gear]: [0.6, 0.8, 0.4, 0.6], [A.shuffled]: [0.5, 0.5, 0.5, 0.5] })[m], (m) => m);
    expect(d.h1!.vsBaseline.paired.mean).toBeCloseTo(0.1, 12);
    expect(d.h1!.vsBaseline.paired.se).toBeCloseTo(Math.sqrt(0.08 / 3) / 2, 12);
    expect(d.h1!.vsBaseline.ahead).toBe(false);
    expect(decide(() => undefined, (m) => m).lines).toEqual(['No decision: GRPO was not run.']);
  });
});
