// The GEAR controls: the within-row shuffle of a per-token signal (same values, other places) and GEAR's
// weight family on given segments (the oracle weights). Each control must change what it claims and
// nothing else; gearFromSegments must reproduce gearAdvantages when given its own units and signals.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { GearError } from '../../ts/core/errors.js';
import { gearReference, quantileRef } from '../helpers/gear_reference.js';

function lcg(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** A batch of rows with spikes, a mask with gaps, and entropies (deterministic from a seed). */
function batch(seed: number, lens: number[]) {
  const r = lcg(seed);
  const offsets = Int32Array.from([0, ...lens.map((_, i) => lens.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
  const n = offsets[lens.length]!;
  const divergence = Float32Array.from({ length: n }, () => (r() < 0.12 ? 1 + 6 * r() : 0.2 * r()));
  const entropy = Float32Array.from({ length: n }, () => 2 * r());
  const mask = Uint8Array.from({ length: n }, () => (r() < 0.15 ? 0 : 1));
  const advantages = Float64Array.from(lens, () => (r() - 0.5) * 3);
  return { offsets, divergence, entropy, mask, advantages, n };
}

const sorted = (xs: ArrayLike<number>) => Array.from(xs).sort((a, b) => a - b);

describe('shuffleWithinRows', () => {
  it('permutes each row\'s valid values among its valid tokens; masked tokens and row totals stay put', () => {
    const b = batch(3, [12, 0, 7, 30, 1]);
    const s = rl.shuffleWithinRows(b.divergence, b.offsets, { mask: b.mask, seed: 9 });
    expect(s).not.toBe(b.divergence);
    let moved = 0;
    for (let r = 0; r + 1 < b.offsets.length; r++) {
      const lo = b.offsets[r]!, hi = b.offsets[r + 1]!;
      const valid = (x: Float32Array) => Array.from(x.subarray(lo, hi)).filter((_, i) => b.mask[lo + i]);
      expect(sorted(valid(s))).toEqual(sorted(valid(b.divergence)));
      for (let t = lo; t < hi; t++) {
        if (!b.mask[t]) expect(s[t]).toBe(b.divergence[t]);
        else if (s[t] !== b.divergence[t]) moved++;
      }
    }
    expect(moved).toBeGreaterThan(10); // the places did change
  });

  it('is deterministic in its seed, differs across seeds, and the input is not modified', () => {
    const b = batch(5, [40, 25]);
    const copy = b.divergence.slice();
    const a1 = rl.shuffleWithinRows(b.divergence, b.offsets, { seed: 1 });
    expect(rl.shuffleWithinRows(b.divergence, b.offsets, { seed: 1 })).toEqual(a1);
    expect(rl.shuffleWithinRows(b.divergence, b.offsets, { seed: 2 })).not.toEqual(a1);
    expect(rl.shuffleWithinRows(b.divergence, b.offsets)).toEqual(rl.shuffleWithinRows(b.divergence, b.offsets, { seed: 0 }));
    expect(b.divergence).toEqual(copy);
  });

  it('each permutation is uniform: every position of a 3-token row takes every value about equally often', () => {
    const x = Float32Array.of(0, 1, 2), off = Int32Array.of(0, 3);
    const counts = [[0, 0, 0], [0, 0, 0], [0, 0, 0]];
    const n = 6000;
    for (let seed = 0; seed < n; seed++) {
      const s = rl.shuffleWithinRows(x, off, { seed });
      for (let t = 0; t < 3; t++) counts[t]![s[t]!]!++;
    }
    // Each cell ~ Binomial(6000, 1/3): sd ≈ 36.5; 5 sd.
    for (const row of counts) for (const c of row) expect(Math.abs(c - n / 3)).toBeLessThan(5 * 36.5);
  });

  it('as GEAR\'s no-location control: the same spikes and spike heights per row, the same D_ref, other places', () => {
    const b = batch(11, [30, 30, 30, 30]);
    const o = { advantages: b.advantages, offsets: b.offsets, mask: b.mask, entropy: b.entropy };
    const g = rl.gearAdvantages({ ...o, divergence: b.divergence, options: { ablation: 'token_only' } });
    const s = rl.gearAdvantages({ ...o, divergence: rl.shuffleWithinRows(b.divergence, b.offsets, { mask: b.mask, seed: 4 }), options: { ablation: 'token_only' } });
    expect(s.diagnostics.peaks).toBe(g.diagnostics.peaks);
    expect(s.diagnostics.thresholds.dRef).toBe(g.diagnostics.thresholds.dRef);
    expect(s.diagnostics.klQuantiles).toEqual(g.diagnostics.klQuantiles);
    for (let r = 0; r < 4; r++) {
      const lo = b.offsets[r]!, hi = b.offsets[r + 1]!;
      // token_only weights depend only on each token's own D: the row's weights are permuted, not changed.
      const w = (x: Float32Array) => sorted(Array.from(x.subarray(lo, hi)).filter((_, i) => b.mask[lo + i]));
      expect(w(s.weights)).toEqual(w(g.weights));
    }
    expect(Array.from(s.weights)).not.toEqual(Array.from(g.weights));
  });

  it('rejects bad input with coded GearErrors', () => {
    const off = Int32Array.of(0, 2);
    const code = (f: () => unknown) => { try { f(); } catch (e) { expect(e).toBeInstanceOf(GearError); return (e as GearError).code; } return 'none'; };
    expect(code(() => rl.shuffleWithinRows(new Float64Array(2) as unknown as Float32Array, off))).toBe('ERR_DTYPE');
    expect(code(() => rl.shuffleWithinRows(new Float32Array(3), off))).toBe('ERR_OFFSETS');
    expect(code(() => rl.shuffleWithinRows(new Float32Array(2), off, { seed: -1 }))).toBe('ERR_OPTION');
    expect(code(() => rl.shuffleWithinRows(new Float32Array(2), off, { seed: 1.5 }))).toBe('ERR_OPTION');
    expect(code(() => rl.shuffleWithinRows(new Float32Array(2), off, { mask: Uint8Array.of(1, 2) }))).toBe('ERR_OPTION');
    expect(code(() => rl.shuffleWithinRows(new Float32Array(2), off, { bogus: 1 } as never))).toBe('ERR_OPTION');
    expect(code(() => rl.shuffleWithinRows(new Float32Array(2), off, null as never))).toBe('ERR_OPTION');
  });
});

describe('gearFromSegments', () => {
  it('the documented example, by hand: the departure segment of row 1 gets 1 + alpha, renormalised to mean 1', () => {
    const r = rl.gearFromSegments({ advantages: [0.8, -0.8], offsets: Int32Array.of(0, 4, 8), segments: { start: Int32Array.of(5), length: Int32Array.of(2) } });
    // row 1 raw weights 1, 2, 2, 1 (sum 6, 4 tokens): scaled by 4/6.
    expect(Array.from(r.weights)).toEqual([1, 1, 1, 1, 2 / 3, 4 / 3, 4 / 3, 2 / 3].map(Math.fround));
    expect(Array.from(r.advantages)).toEqual([0.8, 0.8, 0.8, 0.8, -0.8 * 2 / 3, -0.8 * 4 / 3, -0.8 * 4 / 3, -0.8 * 2 / 3].map(Math.fround));
    expect(Array.from(r.segmentId)).toEqual([-1, -1, -1, -1, -1, 0, 0, -1]);
  });

  it('reproduces gearAdvantages given its own segments and signals (sigma = min(D / D_ref, 1)), for every option', () => {
    let segments = 0, weighted = 0;
    for (const seed of [1, 2, 3, 4]) {
      const b = batch(seed, [25, 9, 40, 1, 17]);
      for (const options of [{}, { alpha: 0.4 }, { normalize: 'none' as const }, { signMode: 'negative_only' as const, alpha: 2 },
        { peakZ: 1, entropyQuantile: 0.95 }]) {
        const g = rl.gearAdvantages({ advantages: b.advantages, offsets: b.offsets, mask: b.mask, divergence: b.divergence, entropy: b.entropy, options });
        const dRef = g.diagnostics.thresholds.dRef;
        const sigma = (t: number) => Math.min(Math.min(b.divergence[t]!, 20) / dRef, 1);
        const S = g.anchors.length;
        const length = new Int32Array(S);
        for (const id of g.segmentId) if (id >= 0) length[id]!++;
        const tokenStrength = Float32Array.from({ length: b.n }, (_, t) => sigma(t));
        const strength = Float32Array.from(g.anchors, (a) => sigma(a));
        // A segment's span is contiguous in valid tokens; masked tokens inside the span are skipped by both.
        const span = Int32Array.from(g.anchors, (a, s) => { let t = a, c = 0; while (c < length[s]!) { if (b.mask[t]) c++; t++; } return t - a; });
        const f = rl.gearFromSegments({
          advantages: b.advantages, offsets: b.offsets, mask: b.mask, segments: { start: g.anchors, length: span, strength }, tokenStrength,
          ...('alpha' in options ? { alpha: options.alpha } : {}), ...('normalize' in options ? { normalize: options.normalize } : {}),
          ...('signMode' in options ? { signMode: options.signMode } : {}),
        });
        segments += S;
        for (let t = 0; t < b.n; t++) {
          if (g.weights[t] !== 1 && g.weights[t] !== 0) weighted++;
          expect(f.weights[t]).toBeCloseTo(g.weights[t]!, 5);
          expect(f.advantages[t]).toBeCloseTo(g.advantages[t]!, 5);
          expect(f.segmentId[t]).toBe(g.segmentId[t]);
        }
      }
    }
    expect(segments).toBeGreaterThan(40); // the comparison covered real segments and weights
    expect(weighted).toBeGreaterThan(500);
  });

  it('agrees with the float64 reference of GEAR on rows with one known segment (its anchor the only spike)', () => {
    // One spike per row, constant low entropy after it up to a fork token: the reference's unit is the known segment.
    const D = Float32Array.of(0, 0, 5, 0, 0, 0, 0, 0, /* row 1 */ 0, 0, 0, 0, 0, 3, 0, 0);
    const H = Float32Array.of(1, 1, 1, 0, 0, 1, 1, 1, /* row 1 */ 1, 1, 1, 1, 1, 1, 0, 1);
    const off = Int32Array.of(0, 8, 16);
    const ref = gearReference({ advantages: [1.5, -0.5], offsets: off, divergence: D, entropy: H, options: { entropyThreshold: 0.5, peakZ: 1 } });
    const dRef = Math.max(quantileRef(Array.from(D), 0.95), 1e-6);
    const sigma = Float32Array.from(D, (d) => Math.min(d / dRef, 1));
    const f = rl.gearFromSegments({
      advantages: [1.5, -0.5], offsets: off, tokenStrength: sigma,
      segments: { start: Int32Array.of(2, 13), length: Int32Array.of(3, 2), strength: Float32Array.of(sigma[2]!, sigma[13]!) },
    });
    expect(ref.anchors).toEqual([2, 13]);
    for (let t = 0; t < 16; t++) expect(f.weights[t]).toBeCloseTo(ref.weights[t]!, 6);
  });

  it('no segments gives GRPO exactly; the mean-one row sums equal A·|V|; masked tokens get 0', () => {
    const b = batch(8, [10, 20, 5]);
    const none = rl.gearFromSegments({ advantages: b.advantages, offsets: b.offsets, mask: b.mask, segments: { start: new Int32Array(0), length: new Int32Array(0) } });
    expect(Array.from(none.advantages)).toEqual(Array.from(rl.segmentBroadcast(b.advantages, b.offsets, b.mask)));
    const f = rl.gearFromSegments({ advantages: b.advantages, offsets: b.offsets, mask: b.mask, alpha: 3, segments: { start: Int32Array.of(2, 12, 31), length: Int32Array.of(4, 3, 2) } });
    for (let r = 0; r < 3; r++) {
      let sum = 0, valid = 0;
      for (let t = b.offsets[r]!; t < b.offsets[r + 1]!; t++) {
        if (!b.mask[t]) { expect(f.weights[t]).toBe(0); expect(f.advantages[t]).toBe(0); expect(f.segmentId[t]).toBe(-1); continue; }
        sum += f.advantages[t]!; valid++;
      }
      expect(sum).toBeCloseTo(b.advantages[r]! * valid, 4);
    }
    // 'none': raw weights 1 + alpha on the segments, 1 elsewhere.
    const raw = rl.gearFromSegments({ advantages: [1], offsets: Int32Array.of(0, 5), alpha: 3, normalize: 'none', segments: { start: Int32Array.of(1), length: Int32Array.of(2), strength: Float32Array.of(0.5) } });
    expect(Array.from(raw.weights)).toEqual([1, 2.5, 2.5, 1, 1]);
  });

  it('negative_only leaves rows with A >= 0 at weight 1 and weights the others', () => {
    const seg = { start: Int32Array.of(0, 4), length: Int32Array.of(1, 1) };
    const f = rl.gearFromSegments({ advantages: [1, -1], offsets: Int32Array.of(0, 3, 6), segments: seg, signMode: 'negative_only' });
    expect(Array.from(f.weights.subarray(0, 3))).toEqual([1, 1, 1]);
    expect(Array.from(f.weights.subarray(3, 6))).toEqual([0.75, 1.5, 0.75]);
  });

  it('rejects segments outside a row, overlapping or empty, strengths outside [0, 1] and bad options', () => {
    const off = Int32Array.of(0, 3, 6);
    const run = (segments: rl.GearSegments, extra: Partial<rl.GearFromSegmentsInput> = {}) => {
      try { rl.gearFromSegments({ advantages: [1, 1], offsets: off, segments, ...extra }); } catch (e) { expect(e).toBeInstanceOf(GearError); return (e as GearError).code; }
      return 'none';
    };
    const seg = (s: number[], l: number[]) => ({ start: Int32Array.from(s), length: Int32Array.from(l) });
    expect(run(seg([2], [2]))).toBe('ERR_OPTION'); // crosses into row 1
    expect(run(seg([6], [1]))).toBe('ERR_OPTION'); // past the end
    expect(run(seg([0, 1], [2, 1]))).toBe('ERR_OPTION'); // overlap
    expect(run(seg([0], [0]))).toBe('ERR_OPTION'); // empty
    expect(run(seg([0], [1, 1]))).toBe('ERR_SHAPE');
    expect(run({ ...seg([0], [1]), strength: Float32Array.of(1.5) })).toBe('ERR_OPTION');
    expect(run({ ...seg([0], [1]), strength: Float32Array.of(NaN) })).toBe('ERR_NON_FINITE');
    expect(run(seg([0], [1]), { alpha: -1 })).toBe('ERR_OPTION');
    expect(run(seg([0], [1]), { normalize: 'row' as never })).toBe('ERR_OPTION');
    expect(run(seg([0], [1]), { advantages: [1, NaN] })).toBe('ERR_NON_FINITE');
    expect(run(seg([0], [1]), { advantages: [1] })).toBe('ERR_SHAPE');
    expect(run(seg([0], [1]), { tokenStrength: new Float32Array(5) })).toBe('ERR_SHAPE');
    expect(run(seg([0], [1]), { bogus: 1 } as never)).toBe('ERR_OPTION');
    expect(run(seg([3], [3]))).toBe('none');
  });
});
