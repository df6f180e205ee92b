// Credit fidelity, batch diagnostics and paired statistics of the demo, on hand-built inputs whose
// expected values are worked out by hand in the comments.
import { describe, expect, it } from 'vitest';
import { anchorStats, creditFidelity, ranks, spearman, spikeStats, zeroVarianceGroupShare } from '../../examples/trainer/credit.js';
import { meanSe, paired, signedPm } from '../../examples/report/stats.js';
import { fitRange, niceStep } from '../../examples/report/report.js';

describe('credit fidelity', () => {
  it('splits the advantage mass by role and correlates |A| with decisiveness (hand-computed)', () => {
    // Tokens:   neutral  wrong  right  (obs)  wrong  neutral
    const adv = [0.5, -1, 2, 7, -0.5, 1];
    const roles = [0, -1, 1, 0, -1, 0];
    const mask = [1, 1, 1, 0, 1, 1];
    // Σ|A| over agent tokens = 0.5 + 1 + 2 + 0.5 + 1 = 5 (the masked 7 does not count).
    // wrong = (-1 - 0.5) / 5 = -0.3; right = 2 / 5 = 0.4; neutral = (0.5 + 1) / 5 = 0.3.
    // Spearman: |A| = [0.5, 1, 2, 0.5, 1] -> ranks [1.5, 3.5, 5, 1.5, 3.5]; decisive = [0, 1, 1, 1, 0] -> ranks
    // [1.5, 4, 4, 4, 1.5]; centred at 3: x = [-1.5, .5, 2, -1.5, .5], y = [-1.5, 1, 1, 1, -1.5];
    // Σxy = 2.25 + .5 + 2 - 1.5 - .75 = 2.5, Σx² = 9, Σy² = 7.5 -> ρ = 2.5 / sqrt(67.5).
    const f = creditFidelity(adv, roles, mask);
    expect(f.wrong).toBeCloseTo(-0.3, 12);
    expect(f.right).toBeCloseTo(0.4, 12);
    expect(f.neutral).toBeCloseTo(0.3, 12);
    expect(f.spearman).toBeCloseTo(2.5 / Math.sqrt(67.5), 12);
  });

  it('a perfect credit assigner: all mass on decisive tokens with the right signs, ρ = 1', () => {
    const f = creditFidelity([0, -1, 0, 1, 0], [0, -1, 0, 1, 0], [1, 1, 1, 1, 1]);
    expect(f).toEqual({ wrong: -0.5, right: 0.5, neutral: 0, spearman: 1, gradWrong: NaN, gradRight: NaN, gradNeutral: NaN });
    // Unequal magnitudes on the decisive tokens: |A| ranks [2, 5, 2, 4, 2], decisive ranks [2, 4.5, 2, 4.5, 2];
    // centred: x = [-1, 2, -1, 1, -1], y = [-1, 1.5, -1, 1.5, -1]; Σxy = 7.5, Σx² = 8, Σy² = 7.5 -> ρ = 7.5 / sqrt(60).
    expect(creditFidelity([0, -2, 0, 1, 0], [0, -1, 0, 1, 0], [1, 1, 1, 1, 1]).spearman).toBeCloseTo(7.5 / Math.sqrt(60), 12);
    // GRPO-like uniform advantage: |A| constant, so no rank correlation (NaN: a constant side).
    const u = creditFidelity([1, 1, 1, 1], [0, 1, 0, -1], [1, 1, 1, 1]);
    expect([u.wrong, u.right, u.neutral]).toEqual([0.25, 0.25, 0.5]);
    expect(u.spearman).toBeNaN();
    // No advantage at all (every group had equal rewards): undefined, not 0.
    expect(Object.values(creditFidelity([0, 0], [1, -1], [1, 1])).every(Number.isNaN)).toBe(true);
    expect(() => creditFidelity([1], [0, 0], [1])).toThrow(/same length/);
  });

  it('gradient-weighted shares: |A|·(1 − p), so a token sampled with p ≈ 1 counts for almost nothing (hand-computed)', () => {
    // Tokens: neutral (p 0.5), wrong (p 0.2), right (p 1: no gradient), (obs), neutral (p 0.9).
    const adv = [1, -1, 2, 5, -1];
    const roles = [0, -1, 1, 0, 0];
    const mask = [1, 1, 1, 0, 1];
    const p = [0.5, 0.2, 1, 0, 0.9];
    // A·(1-p): 0.5, -0.8, 0, (obs), -0.1; Σ|·| = 1.4. wrong = -0.8/1.4, right = 0, neutral = (0.5 + 0.1)/1.4.
    const f = creditFidelity(adv, roles, mask, p);
    expect(f.gradWrong).toBeCloseTo(-0.8 / 1.4, 12);
    expect(f.gradRight).toBe(0);
    expect(f.gradNeutral).toBeCloseTo(0.6 / 1.4, 12);
    // The unweighted shares are unchanged: Σ|A| = 5; right = 2/5.
    expect(f.right).toBeCloseTo(0.4, 12);
    expect(() => creditFidelity(adv, roles, mask, [1])).toThrow(/same length/);
  });

  it('ranks ties by their average rank; Spearman is invariant to monotone maps and flips with order', () => {
    expect(Array.from(ranks([3, 1, 3, 2]))).toEqual([3.5, 1, 3.5, 2]);
    expect(spearman([1, 2, 3, 4], [10, 20, 30, 40])).toBeCloseTo(1, 12);
    expect(spearman([1, 2, 3, 4], [1, 4, 9, 100])).toBeCloseTo(1, 12);
    expect(spearman([1, 2, 3, 4], [4, 3, 2, 1])).toBeCloseTo(-1, 12);
    // [1,2,3] vs [1,3,2]: d = [0, -1, 1], ρ = 1 - 6·2 / (3·8) = 0.5.
    expect(spearman([1, 2, 3], [1, 3, 2])).toBeCloseTo(0.5, 12);
    expect(spearman([1], [2])).toBeNaN();
  });
});

describe('batch diagnostics', () => {
  it('share of zero-variance groups', () => {
    // Groups 0 (1,1), 2 (0,0) and 3 (1,1) are all-equal; group 1 (0,1) is not: 3 / 4.
    expect(zeroVarianceGroupShare([1, 1, 0, 1, 0, 0, 1, 1], [0, 0, 1, 1, 2, 2, 3, 3])).toBe(0.75);
    expect(zeroVarianceGroupShare([], [])).toBeNaN();
  });

  it('share of step rows in anchor groups of size > 1, and with differing returns', () => {
    // Task group 0: trajectories 0 (s0 -> s1, reward 1 at its last step), 1 (s0 -> s1, reward 0), 2 (s2).
    // γ = 0.5: returns traj 0 = [0.5, 1], traj 1 = [0, 0], traj 2 = [0].
    // Anchor groups: {s0: rows 0, 2; returns 0.5 vs 0}, {s1: rows 1, 3; 1 vs 0}, {s2: row 4, alone}.
    // Task group 1: trajectories 3 and 4 both at anchor x with return 0: grouped, equal returns.
    const steps = {
      anchors: ['s0', 's1', 's0', 's1', 's2', 'x', 'x'], groupIndex: Int32Array.from([0, 0, 0, 0, 0, 1, 1]),
      stepRewards: [0, 1, 0, 0, 0, 0, 0], trajectoryIndex: Int32Array.from([0, 0, 1, 1, 2, 3, 4]),
    };
    const s = anchorStats(steps, 0.5);
    expect(s.grouped).toBeCloseTo(6 / 7, 12);
    expect(s.informative).toBeCloseTo(4 / 7, 12);
    // The same anchor in different task groups is a different state.
    const t = anchorStats({ ...steps, groupIndex: Int32Array.from([0, 0, 1, 1, 2, 3, 4]) }, 0.5);
    expect([t.grouped, t.informative]).toEqual([0, 0]);
  });

  it('GEAR spikes per episode and the share on decisive tokens', () => {
    // Spikes at tokens 1 (wrong), 4 (neutral), 6 (right) over 2 episodes: 1.5 per episode, 2 / 3 decisive.
    const s = spikeStats(Int32Array.from([1, 4, 6]), [0, -1, 0, 0, 0, 0, 1], 2);
    expect(s.perEpisode).toBe(1.5);
    expect(s.decisiveShare).toBeCloseTo(2 / 3, 12);
    expect(spikeStats(new Int32Array(0), [], 4)).toEqual({ perEpisode: 0, decisiveShare: NaN });
  });
});

describe('paired statistics', () => {
  it('mean ± se, t, seed wins and the 2-se tie rule on a hand-computable example', () => {
    // d = a - b = [0.1, 0, 0.3, -0.1]: mean 0.075; deviations .025, -.075, .225, -.175, squares sum 0.0875;
    // sd = sqrt(0.0875 / 3) = 0.170783; se = sd / 2 = 0.0853913; t = 0.878310; |mean| < 2 se -> a tie.
    const p = paired([0.7, 0.6, 0.8, 0.5], [0.6, 0.6, 0.5, 0.6]);
    expect(p.n).toBe(4);
    expect(p.mean).toBeCloseTo(0.075, 12);
    expect(p.std).toBeCloseTo(Math.sqrt(0.0875 / 3), 12);
    expect(p.se).toBeCloseTo(Math.sqrt(0.0875 / 3) / 2, 12);
    expect(p.t).toBeCloseTo(0.075 / (Math.sqrt(0.0875 / 3) / 2), 10);
    expect([p.wins, p.losses, p.draws, p.tie]).toEqual([2, 1, 1, true]);
    // d = [1, 2, 3]: mean 2, sd 1, se 1/sqrt(3), t = 2 sqrt(3) = 3.464; 2 > 2 se = 1.155 -> not a tie.
    const q = paired([1, 2, 3], [0, 0, 0]);
    expect(q.se).toBeCloseTo(1 / Math.sqrt(3), 12);
    expect(q.t).toBeCloseTo(2 * Math.sqrt(3), 12);
    expect([q.wins, q.losses, q.draws, q.tie]).toEqual([3, 0, 0, false]);
    // Exactly on the boundary |mean| = 2 se counts as a tie: d = [3, 1] -> mean 2, sd sqrt(2), se 1, t = 2.
    expect(paired([3, 1], [0, 0])).toMatchObject({ mean: 2, se: 1, t: 2, tie: true });
    // Identical samples: t = 0, a tie; a constant non-zero difference: infinite t, not a tie.
    expect(paired([1, 2], [1, 2])).toMatchObject({ t: 0, tie: true, draws: 2 });
    expect(paired([2, 3], [1, 2])).toMatchObject({ t: Infinity, tie: false, wins: 2 });
    expect(() => paired([1], [1, 2])).toThrow(/1 vs 2/);
    expect(meanSe([2, 4, 9])).toEqual({ n: 3, mean: 5, std: Math.sqrt(13), se: Math.sqrt(13 / 3) });
    expect(signedPm(0.0123, 0.004)).toBe('+0.012 ± 0.004');
    expect(signedPm(-0.5, 0.25, 2)).toBe('-0.50 ± 0.25');
  });
});

describe('plot axes', () => {
  it('fits the y-range to the data with a small margin and picks nice tick steps', () => {
    const [lo, hi] = fitRange([0.5, 0.9], 0.05);
    expect(lo).toBeCloseTo(0.48, 12);
    expect(hi).toBeCloseTo(0.92, 12);
    const [c, d] = fitRange([0.2, 0.99], 0.1, [0, 1]); // margin 0.079; the top is clamped at 1
    expect(c).toBeCloseTo(0.121, 12);
    expect(d).toBe(1);
    const [a, b] = fitRange([0.5, 0.5], 0.05, undefined, 0.02);
    expect([a, b].map((x) => +x.toFixed(6))).toEqual([0.489, 0.511]);
    expect(niceStep(0.4, 5)).toBeCloseTo(0.1, 12);
    expect(niceStep(0.11, 5)).toBeCloseTo(0.025, 12);
    expect(niceStep(60, 6)).toBe(10);
  });
});
