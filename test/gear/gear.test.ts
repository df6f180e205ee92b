import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';
import { type GearOptions, resolveGearOptions } from '../../ts/gear/options.js';
import { gearReference, quantileRef } from '../helpers/gear_reference.js';

// ---------- random batches (deterministic from a seed) ----------
function lcg(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

interface Batch {
  advantages: Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array;
  divergence: Float32Array;
  entropy: Float32Array;
  logratio: Float32Array;
}

function makeBatch(seed: number, lens: number[], advs: number[], maskP: number, withMask = true): Batch {
  const r = lcg(seed);
  const offsets = new Int32Array(lens.length + 1);
  lens.forEach((l, i) => (offsets[i + 1] = offsets[i]! + l));
  const n = offsets[lens.length]!;
  const divergence = new Float32Array(n), entropy = new Float32Array(n), logratio = new Float32Array(n);
  const mask = new Uint8Array(n);
  for (let t = 0; t < n; t++) {
    const u = r();
    // mostly aligned tokens, some spikes (some above the 20-nat cap), some exact zeros
    divergence[t] = u < 0.1 ? 1 + r() * 24 : u < 0.2 ? 0 : r() * 0.3;
    entropy[t] = r() < 0.1 ? 0 : r() * 3;
    logratio[t] = (r() - 0.5) * 4;
    mask[t] = r() < maskP ? 0 : 1;
  }
  return {
    advantages: Float64Array.from(advs), offsets, mask: withMask ? mask : undefined, divergence, entropy, logratio,
  };
}

const batchArb = fc.record({
  rows: fc.array(
    fc.record({
      len: fc.integer({ min: 0, max: 24 }),
      A: fc.oneof(fc.constant(0), fc.double({ min: -3, max: 3, noNaN: true, noDefaultInfinity: true })),
    }),
    { minLength: 1, maxLength: 7 },
  ),
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  maskP: fc.constantFrom(0, 0.15, 0.4),
  withMask: fc.boolean(),
});

const optionsArb: fc.Arbitrary<GearOptions> = fc.record({
  peakRule: fc.constantFrom('zscore' as const, 'quantile' as const),
  peakZ: fc.constantFrom(0, 1, 1.5, 2),
  peakMinKl: fc.constantFrom(0, 0.1, 0.25),
  segmentEnd: fc.constantFrom('next_fork' as const, 'entropy_settles' as const),
  maxSegmentLength: fc.integer({ min: 1, max: 8 }),
  alpha: fc.constantFrom(0, 0.5, 1, 3),
  signMode: fc.constantFrom('symmetric' as const, 'negative_only' as const, 'rlsd' as const),
  ablation: fc.constantFrom('none' as const, 'random_anchors' as const, 'fixed_length' as const, 'token_only' as const),
  seed: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
  klCap: fc.constantFrom(20, 5),
});

function batchOf(b: { rows: { len: number; A: number }[]; seed: number; maskP: number; withMask: boolean }) {
  return makeBatch(b.seed, b.rows.map((x) => x.len), b.rows.map((x) => x.A), b.maskP, b.withMask);
}

const valid = (b: Batch, t: number) => (b.mask ? b.mask[t] === 1 : true);
const f32 = Math.fround;

/** Checks every structural invariant of section 10.3 on one native result. */
function checkInvariants(b: Batch, o: GearOptions, res: rl.GearResult) {
  const R = b.offsets.length - 1;
  const meanOne = (o.normalize ?? 'mean_one') === 'mean_one';
  // segments: contiguous, valid, inside one row, first token = anchor, ids numbered in token order
  const seen = new Map<number, number[]>();
  for (let t = 0; t < res.segmentId.length; t++) {
    const s = res.segmentId[t]!;
    if (s >= 0) (seen.get(s) ?? seen.set(s, []).get(s)!).push(t);
  }
  expect(seen.size).toBe(res.anchors.length);
  let prevAnchor = -1;
  for (let s = 0; s < res.anchors.length; s++) {
    const toks = seen.get(s)!;
    expect(toks[0]).toBe(res.anchors[s]);
    expect(res.anchors[s]!).toBeGreaterThan(prevAnchor);
    prevAnchor = res.anchors[s]!;
    const row = rowOf(b.offsets, toks[0]!);
    toks.forEach((t, k) => {
      expect(t).toBe(toks[0]! + k); // contiguous: never crosses a mask gap
      expect(valid(b, t)).toBe(true);
      expect(rowOf(b.offsets, t)).toBe(row); // never crosses a row boundary
      expect(res.weights[t]).toBe(res.weights[toks[0]!]); // constant within a segment (exactly)
    });
    expect(toks.length).toBeLessThanOrEqual(o.ablation === 'fixed_length' ? Infinity : (o.maxSegmentLength ?? 256));
  }
  for (let r = 0; r < R; r++) {
    const A = b.advantages[r]!;
    let sum = 0, nv = 0;
    for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++) {
      if (!valid(b, t)) {
        expect(res.weights[t]).toBe(0);
        expect(res.advantages[t]).toBe(0);
        expect(res.segmentId[t]).toBe(-1);
        continue;
      }
      nv++;
      sum += res.advantages[t]!;
      const w = res.weights[t]!;
      if (A === 0) expect(Object.is(res.advantages[t], A)).toBe(true); // +0 -> +0, -0 -> -0 (as GRPO)
      else {
        // sign preserved: never flipped, and never lost unless A underflows float32
        expect(res.advantages[t]! * Math.sign(A)).toBeGreaterThanOrEqual(0);
        if (Math.abs(A) >= 1e-30) expect(Math.sign(res.advantages[t]!)).toBe(Math.sign(A));
      }
      if (meanOne) {
        const [lo, hi] = o.signMode === 'rlsd'
          ? [(1 - (o.epsW ?? 0.2)) / (1 + (o.epsW ?? 0.2)), (1 + (o.epsW ?? 0.2)) / (1 - (o.epsW ?? 0.2))]
          : [1 / (1 + (o.alpha ?? 1)), 1 + (o.alpha ?? 1)];
        expect(w).toBeGreaterThanOrEqual(f32(lo) * (1 - 1e-6));
        expect(w).toBeLessThanOrEqual(f32(hi) * (1 + 1e-6));
      }
    }
    if (meanOne && nv > 0) {
      expect(Math.abs(sum - A * nv)).toBeLessThanOrEqual(1e-6 * Math.abs(A) * nv + 1e-12);
      if (nv === 1) expect(res.weights[firstValid(b, r)]).toBe(1); // one-token response
    }
  }
}

function rowOf(off: Int32Array, t: number) {
  let r = 0;
  while (off[r + 1]! <= t) r++;
  return r;
}
function firstValid(b: Batch, r: number) {
  for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++) if (valid(b, t)) return t;
  return -1;
}

function run(b: Batch, options: GearOptions) {
  return rl.gear({ ...b, logratio: b.logratio, options });
}

function expectMatchesReference(b: Batch, options: GearOptions) {
  const res = run(b, options);
  const ref = gearReference({ ...b, options });
  expect(Array.from(res.segmentId)).toEqual(ref.segmentId);
  expect(Array.from(res.anchors)).toEqual(ref.anchors);
  expect(res.diagnostics.peaks).toBe(ref.peaks);
  for (let t = 0; t < ref.weights.length; t++) {
    expect(Math.abs(res.weights[t]! - ref.weights[t]!)).toBeLessThanOrEqual(2e-7 * Math.abs(ref.weights[t]!) + 1e-12);
    expect(Math.abs(res.advantages[t]! - ref.advantages[t]!)).toBeLessThanOrEqual(2e-7 * Math.abs(ref.advantages[t]!) + 1e-12);
  }
  const th = res.diagnostics.thresholds;
  expect(th.entropy).toBe(ref.thresholds.entropy);
  expect(th.entropyLow).toBe(ref.thresholds.entropyLow);
  expect(th.dRef).toBe(ref.thresholds.dRef);
  expect(th.peakKl).toBe(ref.thresholds.peakKl);
  expect(th.fixedSegmentLength).toBe(ref.thresholds.fixedSegmentLength);
  return res;
}

function grpo(b: Batch) {
  return rl.segmentBroadcast(b.advantages, b.offsets, b.mask);
}

// ---------- hand-worked examples ----------
describe('gear: hand-worked examples', () => {
  // One row of 10 tokens, A = 2, no mask, default options.
  //   D = [0, 0, 0, 0, 2, 0.5, 0, 0, 0, 0]      H = [.5, .5, .5, .5, 2, .25, .25, 1.5, .25, .25]
  // z-scores: mean = 2.5/10 = 0.25; deviations -0.25 (x8), 1.75 (t=4), 0.25 (t=5);
  //   popvar = (8*0.0625 + 3.0625 + 0.0625)/10 = 0.3625, popstd = 0.6020797...
  //   z4 = 1.75/0.6020807 = 2.9066 >= 2 and D4 = 2 >= 0.25  -> peak;   z5 = 0.415 -> not a peak.
  // eta = quantile_0.8(H): sorted H = [.25,.25,.25,.25,.5,.5,.5,.5,1.5,2], pos = 0.8*9 = 7.2
  //   -> 0.5 + 0.2*(1.5 - 0.5) = 0.7.
  // Segment from t=4: t=5 (H .25 < .7) joins, t=6 (.25) joins, t=7 (1.5 >= .7) ends it -> {4,5,6}.
  // D_ref = quantile_0.95(D): sorted D = [0 x8, 0.5, 2], pos = 8.55 -> 0.5 + 0.55*1.5 = 1.325.
  // Raw weights: segment 1 + min(2/1.325, 1) = 2 (t=5 keeps its anchor's weight although D5 = 0.5);
  //   aligned tokens 1 + 0 = 1.  Sum = 3*2 + 7*1 = 13, |V| = 10, scale = 10/13.
  // Final weights: segment 20/13 = 1.5384615, aligned 10/13 = 0.7692308; advantages x2.
  // Check: sum of advantages = 3*40/13 + 7*20/13 = 260/13 = 20 = A*|V|.
  const D = new Float32Array([0, 0, 0, 0, 2, 0.5, 0, 0, 0, 0]);
  const H = new Float32Array([0.5, 0.5, 0.5, 0.5, 2, 0.25, 0.25, 1.5, 0.25, 0.25]);
  const off = new Int32Array([0, 10]);

  it('10-token row with one spike: z-scores, segment, raw and normalised weights', () => {
    const res = rl.gear({ advantages: [2], offsets: off, divergence: D, entropy: H });
    expect(Array.from(res.segmentId)).toEqual([-1, -1, -1, -1, 0, 0, 0, -1, -1, -1]);
    expect(Array.from(res.anchors)).toEqual([4]);
    const s = f32(20 / 13), a = f32(10 / 13);
    expect(Array.from(res.weights)).toEqual([a, a, a, a, s, s, s, a, a, a]);
    expect(Array.from(res.advantages)).toEqual([40 / 13, 40 / 13, 40 / 13, 40 / 13, 80 / 13, 80 / 13, 80 / 13, 40 / 13, 40 / 13, 40 / 13]
      .map((x, i) => f32(i >= 4 && i <= 6 ? 2 * (20 / 13) : 2 * (10 / 13))));
    const d = res.diagnostics;
    expect(d.peaks).toBe(1);
    expect(d.segments).toBe(1);
    expect(d.tokensInSegments).toBe(3);
    expect(d.meanSegmentLength).toBe(3);
    expect(d.weightMin).toBe(a);
    expect(d.weightMax).toBe(s);
    expect(d.thresholds.entropy).toBeCloseTo(0.7, 12);
    expect(d.thresholds.dRef).toBeCloseTo(1.325, 12);
    expect(d.klQuantiles.max).toBe(2);
    expect(d.klQuantiles.p50).toBe(0);
    expect(d.entropyQuantiles.p50).toBe(0.5); // pos 4.5 between .5 and .5
  });

  it('token_only ablation: each token weighted by its own divergence', () => {
    // raw: t4 = 1 + min(2/1.325,1) = 2, t5 = 1 + 0.5/1.325 = 1.3773585, others 1.
    // sum = 8 + 2 + 1.3773585 = 11.3773585; scale = 10/11.3773585.
    const res = rl.gear({ advantages: [2], offsets: off, divergence: D, entropy: H, options: { ablation: 'token_only' } });
    const w5raw = 1 + 0.5 / 1.325;
    const scale = 10 / (8 + 2 + w5raw);
    expect(Array.from(res.segmentId)).toEqual(new Array(10).fill(-1));
    expect(res.anchors.length).toBe(0);
    expect(res.diagnostics.peaks).toBe(1);
    expect(res.weights[4]).toBeCloseTo(2 * scale, 6);
    expect(res.weights[5]).toBeCloseTo(w5raw * scale, 6);
    expect(res.weights[0]).toBeCloseTo(scale, 6);
  });

  it('normalize none keeps the raw weights; alpha scales them', () => {
    // alpha = 0.5: segment raw weight 1 + 0.5*1 = 1.5, aligned 1.
    const res = rl.gear({ advantages: [-1], offsets: off, divergence: D, entropy: H, options: { normalize: 'none', alpha: 0.5 } });
    expect(Array.from(res.weights)).toEqual([1, 1, 1, 1, 1.5, 1.5, 1.5, 1, 1, 1]);
    expect(Array.from(res.advantages)).toEqual([-1, -1, -1, -1, -1.5, -1.5, -1.5, -1, -1, -1]);
  });

  it('negative_only: A > 0 gives GRPO, A < 0 gets the weights', () => {
    const pos = rl.gear({ advantages: [2], offsets: off, divergence: D, entropy: H, options: { signMode: 'negative_only' } });
    expect(Array.from(pos.weights)).toEqual(new Array(10).fill(1));
    expect(Array.from(pos.segmentId)).toEqual([-1, -1, -1, -1, 0, 0, 0, -1, -1, -1]); // structure unchanged
    const neg = rl.gear({ advantages: [-2], offsets: off, divergence: D, entropy: H, options: { signMode: 'negative_only' } });
    expect(neg.weights[4]).toBe(f32(20 / 13));
    expect(neg.advantages[4]).toBe(f32(-40 / 13));
  });

  it('rlsd: clip(exp(sign(A) * logratio at the anchor), 1 - epsW, 1 + epsW)', () => {
    // logratio: anchor t4 = 1 -> exp(1) = 2.718 clipped to 1.2 for A > 0; t5 (inside the segment) ignored;
    // aligned tokens: exp(0) = 1, except t8 = -0.1 -> exp(-0.1) = 0.904837.
    // raw = [1,1,1,1,1.2,1.2,1.2,1,0.904837,1], sum = 6.904837 + 3.6 = 10.504837, scale = 10/10.504837.
    const lr = new Float32Array([0, 0, 0, 0, 1, 3, 0, 0, -0.1, 0]);
    const res = rl.gear({ advantages: [1], offsets: off, divergence: D, entropy: H, logratio: lr, options: { signMode: 'rlsd', normalize: 'none' } });
    expect(res.weights[4]).toBe(f32(1.2));
    expect(res.weights[5]).toBe(f32(1.2));
    expect(res.weights[8]).toBe(f32(Math.exp(f32(-0.1))));
    expect(res.weights[0]).toBe(1);
    // A < 0: exp(-1) = 0.3679 clipped to 0.8; t8: exp(+0.1) = 1.10517.
    const neg = rl.gear({ advantages: [-1], offsets: off, divergence: D, entropy: H, logratio: lr, options: { signMode: 'rlsd', normalize: 'none' } });
    expect(neg.weights[4]).toBe(f32(0.8));
    expect(neg.weights[8]).toBe(f32(Math.exp(-f32(-0.1))));
    const norm = rl.gear({ advantages: [1], offsets: off, divergence: D, entropy: H, logratio: lr, options: { signMode: 'rlsd' } });
    const sum = 6 + Math.exp(f32(-0.1)) + 3 * 1.2;
    expect(norm.weights[4]).toBeCloseTo((1.2 * 10) / sum, 6);
  });

  // A row of 7 tokens with a mask gap at t=5, one spike at t=2, absolute entropy threshold 1.
  //   D = [0, 0, 4, 0, 0, (masked), 0], H = 0.1 everywhere, mask = [1,1,1,1,1,0,1] -> 6 valid tokens.
  //   mean = 4/6, popstd = sqrt(5)*4/6; z2 = (4 - 4/6)/popstd = sqrt(5) = 2.236 >= 2 -> peak.
  //   The segment from t=2 takes t=3, t=4 (low entropy) and stops at the gap -> {2,3,4}; t=6 is aligned.
  //   D_ref = quantile_0.95 over valid D = [0,0,0,0,0,4]: pos 4.75 -> 0.75*4 = 3; sigma = min(4/3,1) = 1.
  //   raw: segment 2, aligned 1; sum = 3*2 + 3*1 = 9, |V| = 6 -> weights 4/3 (segment), 2/3 (aligned).
  //   With maxSegmentLength 2: segment {2,3}; sum = 2*2 + 4 = 8 -> weights 1.5 and 0.75.
  const gapD = new Float32Array([0, 0, 4, 0, 0, 9, 0]);
  const gapH = new Float32Array(7).fill(0.1);
  const gapM = new Uint8Array([1, 1, 1, 1, 1, 0, 1]);
  const gapOff = new Int32Array([0, 7]);

  it('a segment stops at a mask gap', () => {
    const res = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: gapH, options: { entropyThreshold: 1 } });
    expect(Array.from(res.segmentId)).toEqual([-1, -1, 0, 0, 0, -1, -1]);
    expect(Array.from(res.weights)).toEqual([2 / 3, 2 / 3, 4 / 3, 4 / 3, 4 / 3, 0, 2 / 3].map(f32));
    expect(res.diagnostics.thresholds.dRef).toBe(3);
  });

  it('maxSegmentLength cuts a segment', () => {
    const res = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: gapH, options: { entropyThreshold: 1, maxSegmentLength: 2 } });
    expect(Array.from(res.segmentId)).toEqual([-1, -1, 0, 0, -1, -1, -1]);
    expect(Array.from(res.weights)).toEqual([0.75, 0.75, 1.5, 1.5, 0.75, 0, 0.75]);
  });

  it("segmentEnd 'entropy_settles': the segment runs while entropy stays >= eta_low", () => {
    // H = [.1,.1,.1, 2, 2, .1, 1]: eta_low = 1.5 (absolute). From t=2: t=3 (2 >= 1.5) joins, t=4 (2) joins,
    // t=5 is masked -> ends. With H4 = 1 instead, t=4 (< 1.5) ends it -> {2,3}.
    const H1 = new Float32Array([0.1, 0.1, 0.1, 2, 2, 0.1, 1]);
    const o = { segmentEnd: 'entropy_settles', entropyLowThreshold: 1.5 } as const;
    const r1 = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: H1, options: o });
    expect(Array.from(r1.segmentId)).toEqual([-1, -1, 0, 0, 0, -1, -1]);
    const H2 = new Float32Array([0.1, 0.1, 0.1, 2, 1, 0.1, 1]);
    const r2 = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: H2, options: o });
    expect(Array.from(r2.segmentId)).toEqual([-1, -1, 0, 0, -1, -1, -1]);
  });

  it("fixed_length ablation uses the same anchors and a fixed length (auto = the adaptive mean length)", () => {
    // Adaptive: one segment of 3 tokens -> auto length 3 -> same as adaptive here; explicit length 1 -> {2}.
    const auto = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: new Float32Array(7).fill(5), options: { ablation: 'fixed_length', fixedSegmentLength: 2 } });
    // entropy 5 everywhere would end adaptive segments at once; the fixed-length rule ignores entropy.
    expect(Array.from(auto.segmentId)).toEqual([-1, -1, 0, 0, -1, -1, -1]);
    expect(auto.diagnostics.thresholds.fixedSegmentLength).toBe(2);
    const a2 = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: gapH, options: { ablation: 'fixed_length', entropyThreshold: 1 } });
    expect(a2.diagnostics.thresholds.fixedSegmentLength).toBe(3);
    expect(Array.from(a2.segmentId)).toEqual([-1, -1, 0, 0, 0, -1, -1]);
  });

  it('quantile peak rule: D >= the batch quantile and >= peakMinKl', () => {
    // valid D = [0,0,4,0,0,0], quantile_0.8: pos 4 -> 0, so every token qualifies by quantile, but only
    // t=2 has D >= 0.25 -> one peak, same segment as the z-score rule.
    const res = rl.gear({ advantages: [1], offsets: gapOff, mask: gapM, divergence: gapD, entropy: gapH, options: { entropyThreshold: 1, peakRule: 'quantile', peakQuantile: 0.8 } });
    expect(Array.from(res.segmentId)).toEqual([-1, -1, 0, 0, 0, -1, -1]);
    expect(res.diagnostics.thresholds.peakKl).toBe(0);
  });
});

// ---------- degenerate cases (exact) ----------
describe('gear: degenerate cases hold exactly', () => {
  const shapes = [[10, 1, 0, 24, 7], [3, 3, 3], [1], [24, 24, 24, 24]];

  it('alpha = 0 gives GRPO (bit-identical to segmentBroadcast) in every mode', () => {
    shapes.forEach((lens, i) => {
      const b = makeBatch(100 + i, lens, lens.map((_, k) => (k % 3) - 1 + 0.37 * k), 0.2);
      for (const ablation of ['none', 'random_anchors', 'fixed_length', 'token_only'] as const) {
        for (const signMode of ['symmetric', 'negative_only'] as const) {
          for (const normalize of ['mean_one', 'none'] as const) {
            const res = run(b, { alpha: 0, ablation, signMode, normalize });
            expect(Array.from(res.advantages)).toEqual(Array.from(grpo(b)));
            for (let t = 0; t < res.weights.length; t++) expect(res.weights[t]).toBe(valid(b, t) ? 1 : 0);
          }
        }
      }
    });
  });

  it('zero divergence and constant divergence give GRPO', () => {
    shapes.forEach((lens, i) => {
      const b = makeBatch(200 + i, lens, lens.map((_, k) => 1.5 - k), 0.2);
      for (const c of [0, 0.3, 1.7, 25]) {
        const bc = { ...b, divergence: new Float32Array(b.divergence.length).fill(c) };
        for (const o of [{}, { peakRule: 'quantile' as const }, { peakZ: 0, peakMinKl: 0 }, { ablation: 'token_only' as const }]) {
          const res = run(bc, o);
          expect(Array.from(res.advantages)).toEqual(Array.from(grpo(b)));
        }
      }
    });
  });

  it('A = 0 gives exactly +0 on every token', () => {
    const b = makeBatch(7, [12, 5, 9], [0, 0, 0], 0.2);
    for (const signMode of ['symmetric', 'negative_only', 'rlsd'] as const) {
      const res = run(b, { signMode });
      for (const x of res.advantages) expect(Object.is(x, 0)).toBe(true);
    }
  });

  it('a one-token response gets weight 1; an empty or fully masked row is all zeros', () => {
    const b: Batch = {
      advantages: Float64Array.from([3, -2, 1, 5]), offsets: new Int32Array([0, 1, 1, 3, 5]),
      mask: new Uint8Array([1, 0, 1, 0, 0]), divergence: new Float32Array([30, 5, 9, 1, 1]),
      entropy: new Float32Array([0, 1, 1, 1, 1]), logratio: new Float32Array(5),
    };
    for (const peakRule of ['zscore', 'quantile'] as const) {
      const res = run(b, { peakRule, peakMinKl: 0 });
      expect(res.weights[0]).toBe(1);
      expect(res.advantages[0]).toBe(3);
      expect(res.weights[2]).toBe(1);
      expect(res.advantages[2]).toBe(1);
      expect(Array.from(res.weights.subarray(3))).toEqual([0, 0]);
    }
  });

  it('permuting trajectories permutes the outputs', () => {
    const lens = [9, 0, 14, 3, 20, 1];
    const b = makeBatch(31, lens, [1, -1, 0.5, -2, 2, 0.1], 0.2);
    const perm = [4, 2, 0, 5, 1, 3];
    const pb = permute(b, perm);
    for (const o of [{}, { peakRule: 'quantile' as const }, { segmentEnd: 'entropy_settles' as const }, { signMode: 'rlsd' as const },
      { ablation: 'fixed_length' as const }, { ablation: 'token_only' as const }, { peakZ: 1, peakMinKl: 0.05 }]) {
      const a = run(b, o), p = run(pb, o);
      let pt = 0;
      for (const r of perm) {
        for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++, pt++) {
          expect(p.advantages[pt]).toBe(a.advantages[t]);
          expect(p.weights[pt]).toBe(a.weights[t]);
          expect(p.segmentId[pt] >= 0).toBe(a.segmentId[t]! >= 0);
          if (a.segmentId[t]! >= 0) expect(p.anchors[p.segmentId[pt]!]! - pt).toBe(a.anchors[a.segmentId[t]!]! - t);
        }
      }
      expect(p.diagnostics.segments).toBe(a.diagnostics.segments);
    }
  });
});

function permute(b: Batch, perm: number[]): Batch {
  const lens = perm.map((r) => b.offsets[r + 1]! - b.offsets[r]!);
  const offsets = new Int32Array(perm.length + 1);
  lens.forEach((l, i) => (offsets[i + 1] = offsets[i]! + l));
  const take = <T extends Float32Array | Uint8Array>(x: T): T => {
    const out = new (x.constructor as { new (n: number): T })(x.length);
    let k = 0;
    for (const r of perm) for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++) out[k++] = x[t]!;
    return out;
  };
  return {
    advantages: Float64Array.from(perm.map((r) => b.advantages[r]!)), offsets,
    mask: b.mask ? take(b.mask) : undefined, divergence: take(b.divergence), entropy: take(b.entropy), logratio: take(b.logratio),
  };
}

// ---------- property tests ----------
describe('gear: property tests (fast-check)', () => {
  it('invariants hold on random batches and options; native equals the float64 reference', () => {
    fc.assert(
      fc.property(batchArb, optionsArb, fc.constantFrom('mean_one' as const, 'none' as const), (bb, o, normalize) => {
        const b = batchOf(bb);
        const opts = { ...o, normalize };
        const res = expectMatchesReference(b, opts);
        checkInvariants(b, opts, res);
      }),
      { numRuns: 400 },
    );
  });

  it('alpha = 0, zero and constant divergence give GRPO exactly on random batches', () => {
    fc.assert(
      fc.property(batchArb, optionsArb, fc.double({ min: 0, max: 30, noNaN: true }), (bb, o, c) => {
        const b = batchOf(bb);
        const want = Array.from(grpo(b));
        const { signMode: _s, ...rest } = o;
        expect(Array.from(run(b, { ...rest, alpha: 0 }).advantages)).toEqual(want);
        const bc = { ...b, divergence: new Float32Array(b.divergence.length).fill(c) };
        expect(Array.from(run(bc, rest).advantages)).toEqual(want);
        const b0 = { ...b, divergence: new Float32Array(b.divergence.length) };
        expect(Array.from(run(b0, rest).advantages)).toEqual(want);
      }),
      { numRuns: 200 },
    );
  });

  it('A = 0 gives 0 and permutations permute outputs on random batches', () => {
    fc.assert(
      fc.property(batchArb, optionsArb, fc.integer({ min: 0, max: 1e9 }), (bb, o, ps) => {
        const b = batchOf(bb);
        const zero = { ...b, advantages: new Float64Array(b.advantages.length) };
        for (const x of run(zero, o).advantages) expect(Object.is(x, 0)).toBe(true);
        if (o.ablation === 'random_anchors') return; // seeded by row index: not equivariant by design
        const R = b.advantages.length;
        const r = lcg(ps + 1);
        const perm = Array.from({ length: R }, (_, i) => i).sort(() => r() - 0.5);
        const a = run(b, o), p = run(permute(b, perm), o);
        let pt = 0;
        for (const row of perm) for (let t = b.offsets[row]!; t < b.offsets[row + 1]!; t++, pt++) {
          expect(p.advantages[pt]).toBe(a.advantages[t]);
          expect(p.segmentId[pt]! >= 0).toBe(a.segmentId[t]! >= 0);
        }
      }),
      { numRuns: 200 },
    );
  });
});

// ---------- native vs reference for every option combination ----------
describe('gear: native equals the float64 reference for every option combination', () => {
  const combos: GearOptions[] = [];
  for (const peakRule of ['zscore', 'quantile'] as const)
    for (const segmentEnd of ['next_fork', 'entropy_settles'] as const)
      for (const signMode of ['symmetric', 'negative_only', 'rlsd'] as const)
        for (const normalize of ['mean_one', 'none'] as const)
          for (const ablation of ['none', 'random_anchors', 'fixed_length', 'token_only'] as const)
            combos.push({ peakRule, segmentEnd, signMode, normalize, ablation });
  it(`${combos.length} combinations x 4 batches (plus absolute thresholds and lower peakZ)`, () => {
    combos.forEach((o, i) => {
      for (let k = 0; k < 4; k++) {
        const lens = Array.from({ length: 3 + k * 2 }, (_, j) => ((i * 7 + j * 13 + k) % 40) + (j === 0 ? 1 : 0));
        const b = makeBatch(1000 + i * 10 + k, lens, lens.map((_, j) => [1, -1, 0, 0.5, -0.25][(i + j) % 5]!), k === 3 ? 0 : 0.2, k !== 2);
        const extra: GearOptions = k === 1 ? { entropyThreshold: 1.2, entropyLowThreshold: 0.6 } : k === 2 ? { peakZ: 1, peakMinKl: 0.05, seed: 12345 } : {};
        const opts = { ...o, ...extra };
        checkInvariants(b, opts, expectMatchesReference(b, opts));
      }
    });
  });

  it('a larger batch (64 rows x up to 600 tokens) across threads', () => {
    // ~19K tokens: above the kernel's small-batch cutoff (4096), so the radix quantile path runs; the
    // option-combination batches above stay below it and take the plain-copy path.
    const lens = Array.from({ length: 64 }, (_, j) => (j * 37) % 600);
    expect(lens.reduce((x, y) => x + y, 0)).toBeGreaterThan(4096);
    const b = makeBatch(77, lens, lens.map((_, j) => Math.sin(j)), 0.1);
    for (const o of [{}, { ablation: 'random_anchors' as const, seed: 9 }, { peakRule: 'quantile' as const, segmentEnd: 'entropy_settles' as const }]) {
      expectMatchesReference(b, o);
      const t1 = (rl.setNumThreads(1), run(b, o));
      rl.setNumThreads(2);
      const t2 = run(b, o);
      expect(Array.from(t1.advantages)).toEqual(Array.from(t2.advantages));
      expect(Array.from(t1.segmentId)).toEqual(Array.from(t2.segmentId));
    }
  });
});

// ---------- exact quantiles ----------
describe('gear: exact batch quantiles (radix selection)', () => {
  it('equal the sort-based reference on random, duplicated, negative and zero-heavy data', () => {
    const qs = Float64Array.from([0, 0.01, 0.1, 0.25, 0.5, 0.5001, 0.8, 0.95, 0.99, 1]);
    const r = lcg(5);
    // GEAR's signals are non-negative (divergence and entropy): the sets with negative values are shifted.
    const sets: Float32Array[] = [
      Float32Array.from({ length: 1000 }, () => r() * 10),
      Float32Array.from({ length: 5000 }, () => (r() < 0.7 ? 0 : r())),
      Float32Array.from({ length: 777 }, () => Math.floor(r() * 5) - 2 + 2),
      Float32Array.from({ length: 300 }, () => (r() - 0.5) * 1e-30 + 1e-30),
      Float32Array.from({ length: 1 }, () => 3.5),
      new Float32Array([1, 1.0000001, 1.0000002, 1]),
      Float32Array.from({ length: 200000 }, () => Math.exp((r() - 0.5) * 20)),
    ];
    // The quantile at level q, of the divergence (the peak threshold at peakQuantile q) and of the entropy
    // (eta at entropyQuantile q), through the public API; the five diagnostic levels come along.
    const at = (s: Float32Array, mask: Uint8Array | undefined, q: number) => rl.gear({
      advantages: [1], offsets: Int32Array.of(0, s.length), mask, divergence: s, entropy: s,
      options: { klCap: 1e30, peakRule: 'quantile', peakQuantile: q, entropyQuantile: q },
    }).diagnostics;
    const diag = ['p50', 'p90', 'p95', 'p99', 'max'] as const;
    for (const s of sets) {
      const m = Uint8Array.from(s, () => (r() < 0.8 ? 1 : 0));
      for (const mask of [undefined, m]) {
        const xs = Array.from(s).filter((_, i) => !mask || mask[i]);
        // quantileRef sorts on every call: sort once here, then read every level from the sorted copy
        const sorted = Float64Array.from(xs).sort();
        const ref = (q: number) => quantileRef(sorted as unknown as number[], q);
        expect(ref(0.37)).toBe(quantileRef(xs, 0.37));
        const levels = [0.5, 0.9, 0.95, 0.99, 1].map(ref);
        for (const q of qs) {
          const d = at(s, mask, q);
          expect(d.thresholds.peakKl).toBe(ref(q));
          expect(d.thresholds.entropy).toBe(ref(q));
          levels.forEach((want, i) => {
            expect(d.klQuantiles[diag[i]!]).toBe(want);
            expect(d.entropyQuantiles[diag[i]!]).toBe(want);
          });
        }
      }
    }
    for (const q of qs) {
      const d = at(new Float32Array(0), undefined, q);
      expect([d.thresholds.peakKl, d.thresholds.entropy, ...diag.map((k) => d.klQuantiles[k])]).toEqual(new Array(7).fill(0));
    }
  });
});

// ---------- bad input ----------
describe('gear: bad input throws GearError with a code', () => {
  const b = makeBatch(3, [5, 6], [1, -1], 0.2);
  const base = { advantages: b.advantages, offsets: b.offsets, mask: b.mask, divergence: b.divergence, entropy: b.entropy };
  const code = (f: () => unknown) => {
    try { f(); } catch (e) { expect(e).toBeInstanceOf(rl.GearError); return (e as rl.GearError).code; }
    return 'no error';
  };
  const firstValidTok = b.mask!.indexOf(1);

  it('mismatched lengths and wrong types', () => {
    expect(code(() => rl.gear({ ...base, entropy: new Float32Array(10) }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gear({ ...base, advantages: [1] }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gear({ ...base, offsets: new Int32Array([0, 5, 12]) }))).toBe('ERR_OFFSETS');
    expect(code(() => rl.gear({ ...base, offsets: new Int32Array([0, 6, 5]) }))).toBe('ERR_OFFSETS');
    expect(code(() => rl.gear({ ...base, mask: new Uint8Array(3) }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gear({ ...base, logratio: new Float32Array(2) }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gear({ ...base, divergence: new Float64Array(11) as unknown as Float32Array }))).toBe('ERR_DTYPE');
    expect(code(() => rl.gear({ ...base, mask: Uint8Array.from(b.mask!, (x) => x * 2) }))).toBe('ERR_OPTION');
  });

  it('NaN divergence, non-finite entropy or advantage, NaN logratio', () => {
    const d = b.divergence.slice(); d[firstValidTok] = NaN;
    expect(code(() => rl.gear({ ...base, divergence: d }))).toBe('ERR_NON_FINITE');
    const h = b.entropy.slice(); h[firstValidTok] = Infinity;
    expect(code(() => rl.gear({ ...base, entropy: h }))).toBe('ERR_NON_FINITE');
    expect(code(() => rl.gear({ ...base, advantages: [NaN, 1] }))).toBe('ERR_NON_FINITE');
    const lr = new Float32Array(11); lr[firstValidTok] = NaN;
    expect(code(() => rl.gear({ ...base, logratio: lr, options: { signMode: 'rlsd' } }))).toBe('ERR_NON_FINITE');
    // masked tokens are never read for values
    const masked = b.mask!.indexOf(0);
    const dm = b.divergence.slice(); dm[masked] = NaN;
    expect(Array.from(rl.gear({ ...base, divergence: dm }).advantages)).toEqual(Array.from(rl.gear(base).advantages));
  });

  it('negative divergence beyond -1e-6 is rejected; tiny negatives are clamped to 0', () => {
    const d = b.divergence.slice(); d[firstValidTok] = -1e-3;
    expect(code(() => rl.gear({ ...base, divergence: d }))).toBe('ERR_TARGET_RANGE');
    const h = b.entropy.slice(); h[firstValidTok] = -0.5;
    expect(code(() => rl.gear({ ...base, entropy: h }))).toBe('ERR_TARGET_RANGE');
    const tiny = b.divergence.slice(); tiny[firstValidTok] = -5e-7;
    const zero = b.divergence.slice(); zero[firstValidTok] = 0;
    const a = rl.gear({ ...base, divergence: tiny }), z = rl.gear({ ...base, divergence: zero });
    expect(Array.from(a.advantages)).toEqual(Array.from(z.advantages));
    expect(a.diagnostics.klQuantiles).toEqual(z.diagnostics.klQuantiles);
    // +Infinity divergence is capped at klCap
    const inf = b.divergence.slice(); inf[firstValidTok] = Infinity;
    const cap = b.divergence.slice(); cap[firstValidTok] = 20;
    expect(Array.from(rl.gear({ ...base, divergence: inf }).weights)).toEqual(Array.from(rl.gear({ ...base, divergence: cap }).weights));
  });

  it('options out of range and unknown option keys', () => {
    const bad: [string, unknown][] = [
      ['klCap', 0], ['klCap', -1], ['klCap', Infinity], ['klCap', NaN], ['peakRule', 'max'], ['peakZ', -1],
      ['peakMinKl', -0.1], ['peakQuantile', 1.5], ['entropyQuantile', -0.1], ['entropyThreshold', -1],
      ['segmentEnd', 'eos'], ['maxSegmentLength', 0], ['maxSegmentLength', 2.5], ['alpha', -1], ['alpha', Infinity],
      ['dRefQuantile', 2], ['signMode', 'positive_only'], ['epsW', 1], ['epsW', -0.1], ['normalize', 'sum'],
      ['ablation', 'random'], ['seed', -1], ['seed', 1.5], ['seed', 2 ** 32], ['fixedSegmentLength', -1],
      ['entropyLowQuantile', 3], ['entropyLowThreshold', -2], ['alpha', '1'],
    ];
    for (const [k, val] of bad) expect(code(() => rl.gear({ ...base, options: { [k]: val } as GearOptions }))).toBe('ERR_OPTION');
    expect(code(() => rl.gear({ ...base, options: { peak_z: 2 } as unknown as GearOptions }))).toBe('ERR_OPTION');
    expect(code(() => rl.gear({ ...base, extra: 1 } as unknown as rl.GearInput))).toBe('ERR_OPTION');
    expect(code(() => rl.gear({ ...base, options: { signMode: 'rlsd' } }))).toBe('ERR_OPTION'); // no logratio
    try { rl.gear({ ...base, options: { alpha: -1 } }); } catch (e) {
      expect((e as Error).message).toBe('options.alpha: expected a finite number >= 0, got -1');
    }
  });

  it('caller-owned outputs are filled in place and checked', () => {
    const n = b.divergence.length;
    const out = { advantages: new Float32Array(n).fill(9), weights: new Float32Array(n).fill(9), segmentId: new Int32Array(n).fill(9) };
    const fresh = rl.gear(base);
    const res = rl.gear({ ...base, out });
    expect(res.advantages).toBe(out.advantages);
    expect(res.weights).toBe(out.weights);
    expect(res.segmentId).toBe(out.segmentId);
    expect(Array.from(out.advantages)).toEqual(Array.from(fresh.advantages));
    expect(Array.from(out.weights)).toEqual(Array.from(fresh.weights));
    expect(Array.from(out.segmentId)).toEqual(Array.from(fresh.segmentId));
    expect(code(() => rl.gear({ ...base, out: { advantages: new Float32Array(3) } }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gear({ ...base, out: { segmentId: new Float32Array(n) as unknown as Int32Array } }))).toBe('ERR_DTYPE');
    const same = new Float32Array(n);
    expect(code(() => rl.gear({ ...base, out: { advantages: same, weights: same } }))).toBe('ERR_SHAPE');
    expect(code(() => rl.gear({ ...base, out: { advantage: same } as never }))).toBe('ERR_OPTION');
  });

  it('the native layer re-checks its arguments on its own', () => {
    // every option, as the TypeScript layer sends them: resolved, enumerations by name
    const P = (over: Record<string, unknown> = {}) => ({ ...resolveGearOptions({}), ...over });
    const call = (over: Partial<Record<'adv' | 'off' | 'mask' | 'd' | 'h' | 'lr' | 'p', unknown>>) => code(() =>
      native.gearScan({ advantages: over.adv ?? b.advantages, offsets: over.off ?? b.offsets,
        mask: over.mask === undefined ? b.mask : over.mask, divergence: over.d ?? b.divergence, entropy: over.h ?? b.entropy,
        logratio: over.lr ?? null, options: over.p ?? P() } as never));
    expect(call({})).toBe('no error');
    expect(call({ off: new Int32Array([0, 5, 99]) })).toBe('ERR_OFFSETS');
    expect(call({ off: new Int32Array([1, 5, 11]) })).toBe('ERR_OFFSETS');
    expect(call({ off: new Int32Array([0, 7, 6, 11]), adv: new Float64Array(3) })).toBe('ERR_OFFSETS');
    expect(call({ adv: new Float64Array(5) })).toBe('ERR_SHAPE');
    expect(call({ h: new Float32Array(3) })).toBe('ERR_SHAPE');
    expect(call({ d: new Float64Array(11) })).toBe('ERR_DTYPE');
    expect(call({ mask: new Uint8Array(11).fill(7) })).toBe('ERR_OPTION');
    for (const [k, val] of [['klCap', 0], ['peakRule', 'max'], ['peakZ', -1], ['segmentEnd', 'eos'], ['maxSegmentLength', 0],
      ['signMode', 'positive_only'], ['epsW', 1], ['ablation', 'random'], ['seed', -1], ['fixedSegmentLength', 0.5]] as const) {
      expect(call({ p: P({ [k]: val }) })).toBe('ERR_OPTION');
    }
    expect(call({ p: P({ signMode: 'rlsd' }) })).toBe('ERR_OPTION'); // rlsd without logratio
    expect(call({ adv: Float64Array.from([Infinity, 0]) })).toBe('ERR_NON_FINITE');
    // the batch quantiles: a NaN value and a level beyond 1 (peakQuantile, entropyQuantile)
    expect(call({ d: Float32Array.from(b.divergence, (x, i) => (i === 0 ? NaN : x)), mask: null })).toBe('ERR_NON_FINITE');
    for (const k of ['peakQuantile', 'entropyQuantile']) expect(call({ p: P({ [k]: 1.5 }) })).toBe('ERR_OPTION');
  });
});
