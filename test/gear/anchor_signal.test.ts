// The log-ratio anchor signal (anchorSignal: 'logratio', GEAR-proposed): the spike rule, peakMinKl, D_ref
// and the weights read s_t = max(0, -logratio_t) capped at klCap in D's place. Native scan against the
// float64 reference for every option combination, equivalence with the divergence path fed s, the
// reductions to GRPO, non-finite log-ratios, the entry points (gear, gearFromLogits, gearFromSparse, the
// raw scan, the estimator registry) on every ISA path, and the default left as it was.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';
import type { GearOptions } from '../../ts/gear/options.js';
import { gearReference } from '../helpers/gear_reference.js';
import { eachIsa, restoreBackendAfterAll } from '../helpers/isa.js';
import { maxScaledError, randomLogits } from '../helpers/reference.js';
import { f32Topk, logSoftmaxRows, topkOf } from '../helpers/sparse_reference.js';

restoreBackendAfterAll();

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

/** Random rows: mostly agreeing tokens (log-ratio near 0), some the teacher disbelieves (some beyond the cap). */
function makeBatch(seed: number, lens: number[], advs: number[], maskP: number, withMask = true): Batch {
  const r = lcg(seed);
  const offsets = new Int32Array(lens.length + 1);
  lens.forEach((l, i) => (offsets[i + 1] = offsets[i]! + l));
  const n = offsets[lens.length]!;
  const divergence = new Float32Array(n), entropy = new Float32Array(n), logratio = new Float32Array(n), mask = new Uint8Array(n);
  for (let t = 0; t < n; t++) {
    const u = r();
    divergence[t] = r() * 2;
    entropy[t] = r() < 0.1 ? 0 : r() * 3;
    logratio[t] = u < 0.1 ? -(1 + r() * 24) : u < 0.2 ? 0 : (r() - 0.6) * 0.6;
    mask[t] = r() < maskP ? 0 : 1;
  }
  return { advantages: Float64Array.from(advs), offsets, mask: withMask ? mask : undefined, divergence, entropy, logratio };
}

const LR: GearOptions = { anchorSignal: 'logratio' };
const run = (b: Batch, o: GearOptions) => rl.gear({ ...b, options: o });
const bits = (x: ArrayLike<number>) => Array.from(x);
/** The log-ratio signal as a divergence: max(0, -logratio) (NaN-free inputs). */
const signal = (lr: Float32Array) => Float32Array.from(lr, (x) => Math.max(0, -x));

function expectReference(b: Batch, o: GearOptions) {
  const res = run(b, o);
  const ref = gearReference({ ...b, options: o });
  expect(bits(res.segmentId)).toEqual(ref.segmentId);
  expect(bits(res.anchors)).toEqual(ref.anchors);
  expect(res.diagnostics.peaks).toBe(ref.peaks);
  for (let t = 0; t < ref.weights.length; t++) {
    expect(Math.abs(res.weights[t]! - ref.weights[t]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(ref.weights[t]!)));
    expect(Math.abs(res.advantages[t]! - ref.advantages[t]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(ref.advantages[t]!)));
  }
  expect(res.diagnostics.thresholds.dRef).toBeCloseTo(ref.thresholds.dRef, 5);
  expect(res.diagnostics.thresholds.peakKl).toBeCloseTo(ref.thresholds.peakKl, 5);
  return res;
}

describe("gear: anchorSignal 'logratio' against the float64 reference", () => {
  const combos: GearOptions[] = [];
  for (const peakRule of ['zscore', 'quantile'] as const)
    for (const segmentEnd of ['next_fork', 'entropy_settles'] as const)
      for (const signMode of ['symmetric', 'negative_only', 'rlsd'] as const)
        for (const normalize of ['mean_one', 'none'] as const)
          for (const ablation of ['none', 'random_anchors', 'fixed_length', 'token_only'] as const)
            combos.push({ peakRule, segmentEnd, signMode, normalize, ablation, anchorSignal: 'logratio' });

  it(`${combos.length} option combinations x 3 batches, with and without the divergence`, () => {
    let anchored = 0;
    combos.forEach((o, i) => {
      for (let k = 0; k < 3; k++) {
        const lens = Array.from({ length: 3 + 2 * k }, (_, j) => ((i * 7 + j * 11 + k) % 40) + (j === 0 ? 1 : 0));
        const b = makeBatch(500 + 10 * i + k, lens, lens.map((_, j) => [1, -1, 0.5, 0, -0.25][(i + j) % 5]!), k === 2 ? 0 : 0.2, k !== 1);
        const opts: GearOptions = k === 1 ? { ...o, peakZ: 1, peakMinKl: 0.05, klCap: 5 } : o;
        const res = expectReference(b, opts);
        anchored += res.anchors.length;
        // the divergence is never read: leaving it out, or filling it with NaN, changes nothing
        const { divergence: _d, ...noD } = b;
        const without = rl.gear({ ...noD, options: { ...opts, anchorSignal: 'logratio' } });
        const nanD = run({ ...b, divergence: new Float32Array(b.divergence.length).fill(NaN) }, opts);
        for (const r of [without, nanD]) {
          expect(bits(r.advantages)).toEqual(bits(res.advantages));
          expect(bits(r.weights)).toEqual(bits(res.weights));
          expect(bits(r.segmentId)).toEqual(bits(res.segmentId));
        }
      }
    });
    expect(anchored).toBeGreaterThan(100); // the cases place anchors, not only aligned tokens
  });

  it('is the divergence path fed s = max(0, -logratio), bit for bit (radix quantiles, every thread count)', () => {
    // ~20K tokens: above the scan's small-batch cutoff, so the radix quantile path and the thread pool run
    const lens = Array.from({ length: 48 }, (_, j) => (j * 53) % 800);
    const b = makeBatch(71, lens, lens.map((_, j) => Math.cos(j)), 0.1);
    for (const o of [{}, { peakRule: 'quantile' as const, segmentEnd: 'entropy_settles' as const }, { ablation: 'fixed_length' as const }, { signMode: 'rlsd' as const }]) {
      const viaD = run({ ...b, divergence: signal(b.logratio) }, o);
      for (const threads of [1, 2]) {
        rl.setNumThreads(threads);
        const viaLr = run(b, { ...o, ...LR });
        expect(bits(viaLr.advantages)).toEqual(bits(viaD.advantages));
        expect(bits(viaLr.weights)).toEqual(bits(viaD.weights));
        expect(bits(viaLr.segmentId)).toEqual(bits(viaD.segmentId));
        expect(bits(viaLr.anchors)).toEqual(bits(viaD.anchors));
        expect(viaLr.diagnostics).toEqual(viaD.diagnostics);
      }
      expectReference(b, { ...o, ...LR });
    }
  });

  it('reductions: a teacher that agrees (logratio 0), a teacher that trusts the sample more (logratio > 0) and alpha 0 give GRPO exactly', () => {
    const b = makeBatch(9, [5, 0, 17, 30, 1], [1, 0.3, -1, 0.5, -2], 0.2);
    const grpo = bits(rl.segmentBroadcast(b.advantages, b.offsets, b.mask));
    const zero = new Float32Array(b.logratio.length), pos = Float32Array.from(b.logratio, (x) => Math.abs(x) + 0.1);
    for (const o of [{}, { peakRule: 'quantile' as const }, { ablation: 'token_only' as const }, { normalize: 'none' as const }]) {
      expect(bits(run({ ...b, logratio: zero }, { ...o, ...LR }).advantages)).toEqual(grpo);
      expect(bits(run({ ...b, logratio: pos }, { ...o, ...LR }).advantages)).toEqual(grpo);
    }
    expect(bits(run(b, { alpha: 0, ...LR }).advantages)).toEqual(grpo);
    // a constant disbelief: every token the same unit weight
    expect(bits(run({ ...b, logratio: new Float32Array(b.logratio.length).fill(-3) }, LR).advantages)).toEqual(grpo);
  });

  it('non-finite log-ratios: NaN is ERR_NON_FINITE, -Infinity is capped at klCap as D is, +Infinity gives 0', () => {
    const b = makeBatch(3, [6, 6], [1, -1], 0, false);
    const lr = Float32Array.from(b.logratio);
    lr[2] = -Infinity;
    lr[8] = Infinity;
    const capped = Float32Array.from(lr);
    capped[2] = -20;
    capped[8] = 0;
    const got = run({ ...b, logratio: lr }, LR), want = run({ ...b, logratio: capped }, LR);
    expect(bits(got.weights)).toEqual(bits(want.weights));
    expect(got.diagnostics.klQuantiles.max).toBe(20);
    expect(expectReference({ ...b, logratio: lr }, LR).anchors).toContain(2);
    const nan = Float32Array.from(b.logratio);
    nan[7] = NaN;
    expect(() => run({ ...b, logratio: nan }, LR)).toThrow(expect.objectContaining({ code: 'ERR_NON_FINITE', message: expect.stringContaining('logratio[7]') }));
    // a masked token's log-ratio is never read
    const mask = new Uint8Array(12).fill(1);
    mask[7] = 0;
    expect(() => run({ ...b, mask, logratio: nan }, LR)).not.toThrow();
  });

  it('argument errors are coded', () => {
    const b = makeBatch(4, [4, 3], [1, -1], 0);
    const code = (f: () => unknown) => { try { f(); return 'no error'; } catch (e) { return (e as { code?: string }).code; } };
    const { logratio: _l, ...noLr } = b;
    expect(code(() => rl.gear({ ...noLr, options: LR }))).toBe('ERR_OPTION');
    const { divergence: _d, ...noD } = noLr;
    expect(code(() => rl.gear({ ...noD, options: LR } as never))).toBe('ERR_OPTION');
    expect(code(() => rl.gear({ ...b, divergence: undefined } as never))).toBe('ERR_DTYPE'); // the default still needs D
    expect(code(() => run(b, { anchorSignal: 'kl' as never }))).toBe('ERR_OPTION');
    expect(code(() => run({ ...b, logratio: new Float32Array(3) }, LR))).toBe('ERR_SHAPE');
    expect(code(() => run({ ...b, logratio: new Float64Array(7) as never }, LR))).toBe('ERR_DTYPE');
    expect(code(() => run({ ...b, divergence: new Float32Array(5) }, LR))).toBe('ERR_OFFSETS'); // a given divergence still sets N
    const { divergence: _d2, ...lrOnly } = b;
    expect(code(() => rl.gear({ ...lrOnly, logratio: new Float32Array(5), options: LR }))).toBe('ERR_OFFSETS');
  });

  it('the raw scan: anchorSignal by name and required, other names refused, the divergence optional', () => {
    const b = makeBatch(5, [9, 12], [1, -0.5], 0.1);
    const opts = (extra: Record<string, unknown>) => ({
      klCap: 20, peakRule: 'zscore', peakZ: 2, peakMinKl: 0.25, peakQuantile: 0.95, entropyQuantile: 0.8, segmentEnd: 'next_fork',
      maxSegmentLength: 256, alpha: 1, dRefQuantile: 0.95, signMode: 'symmetric', epsW: 0.2, normalize: 'mean_one', ablation: 'none',
      seed: 0, fixedSegmentLength: 0, entropyLowQuantile: 0.5, ...extra,
    });
    const scan = (extra: Record<string, unknown>, over: Record<string, unknown> = {}) => native.gearScan({
      advantages: b.advantages, offsets: b.offsets, mask: b.mask, divergence: b.divergence, entropy: b.entropy,
      logratio: b.logratio, options: opts(extra), ...over,
    } as never);
    expect(bits(scan({ anchorSignal: 'divergence' }).weights)).toEqual(bits(run(b, {}).weights));
    expect(bits(scan({ anchorSignal: 'logratio' }).weights)).toEqual(bits(run(b, LR).weights));
    expect(bits(scan({ anchorSignal: 'logratio' }, { divergence: null }).weights)).toEqual(bits(run(b, LR).weights));
    const code = (f: () => unknown) => { try { f(); return 'no error'; } catch (e) { return (e as { code?: string }).code; } };
    for (const bad of [undefined, 'kl', 'Divergence', '', 0, 1]) expect(code(() => scan({ anchorSignal: bad }))).toBe('ERR_OPTION');
    expect(code(() => scan({ anchorSignal: 'logratio' }, { logratio: null }))).toBe('ERR_OPTION');
    expect(code(() => scan({ anchorSignal: 'logratio' }, { divergence: null, logratio: null }))).toBe('ERR_DTYPE');
    expect(code(() => scan({ anchorSignal: 'divergence' }, { divergence: null }))).toBe('ERR_DTYPE');
  });

  it('through the estimator registry, without a divergence', () => {
    const b = makeBatch(6, [8, 8], [1, -1], 0);
    const { divergence: _d, ...rest } = b;
    const r = rl.computeAdvantages('gear', { ...rest, options: LR }) as { tokenAdvantages: Float32Array };
    expect(bits(r.tokenAdvantages)).toEqual(bits(run(b, LR).advantages));
  });

  it("the default is the divergence: GEAR_DEFAULTS, and 'divergence' given or left out, bit for bit", () => {
    expect(rl.GEAR_DEFAULTS.anchorSignal).toBe('divergence');
    const b = makeBatch(8, [20, 15, 30], [1, -1, 0.5], 0.1);
    for (const o of [{}, { signMode: 'rlsd' as const }, { ablation: 'random_anchors' as const, seed: 3 }]) {
      const a = run(b, o), c = run(b, { ...o, anchorSignal: 'divergence' });
      expect(bits(c.advantages)).toEqual(bits(a.advantages));
      expect(bits(c.segmentId)).toEqual(bits(a.segmentId));
      expect(c.diagnostics).toEqual(a.diagnostics);
    }
  });
});

// ---------- the entry points that compute the log-ratio themselves, on every ISA path ----------
describe("gearFromLogits and gearFromSparse with anchorSignal 'logratio', on every ISA", () => {
  const V = 20, R = 5, L = 24, N = R * L;
  const zs = Float32Array.from(randomLogits(31, N, V, 2)), zt = Float32Array.from(randomLogits(32, N, V, 2));
  const r0 = lcg(33);
  const targets = Int32Array.from({ length: N }, () => Math.floor(r0() * V));
  // the teacher disbelieves the sampled token at a few positions
  for (let t = 0; t < N; t++) if (t % L === 7 || t % L === 15) zt[t * V + targets[t]!] = zt[t * V + targets[t]!]! - 6;
  const offsets = Int32Array.from({ length: R + 1 }, (_, r) => r * L);
  const advantages = [1, -1, 0.5, -0.5, 1];
  const mask = Uint8Array.from({ length: N }, (_, t) => (t % 11 === 3 ? 0 : 1));
  const student = { data: zs, rows: N, vocab: V }, teacher = { data: zt, rows: N, vocab: V };

  it('gearFromLogits: the scan on its own signals, the float64 reference, and GRPO when teacher = student', () => {
    const grpo = bits(rl.segmentBroadcast(advantages, offsets, mask));
    eachIsa(() => {
      for (const o of [LR, { ...LR, segmentEnd: 'entropy_settles' as const }, { ...LR, signMode: 'rlsd' as const }]) {
        const g = rl.gearFromLogits({ student, teacher, targets, advantages, offsets, mask, options: o });
        const viaGear = rl.gear({ advantages, offsets, mask, entropy: g.signals.entropy, logratio: g.signals.logratio, options: o });
        expect(bits(g.advantages)).toEqual(bits(viaGear.advantages));
        expect(bits(g.segmentId)).toEqual(bits(viaGear.segmentId));
        const ref = gearReference({ advantages, offsets, mask, entropy: g.signals.entropy, logratio: g.signals.logratio, options: o });
        expect(bits(g.segmentId)).toEqual(ref.segmentId);
        expect(maxScaledError(g.weights, ref.weights)).toBeLessThan(1e-6);
        expect(g.anchors.length).toBeGreaterThan(0);
        // teacher = student: the log-ratio is 0 everywhere, GEAR is GRPO bit for bit
        const self = rl.gearFromLogits({ student, teacher: student, targets, advantages, offsets, mask, options: o });
        if (o.signMode !== 'rlsd') expect(bits(self.advantages)).toEqual(grpo);
        expect(self.anchors.length).toBe(0);
      }
      // the temperature reaches both log-probs
      const hot = rl.gearFromLogits({ student, teacher, targets, advantages, offsets, mask, temperature: 1.7, options: LR });
      const lp = (z: Float32Array, T: number) => logSoftmaxRows(Float64Array.from(z, (x) => x / T), N, V);
      const ls = lp(zs, 1.7), lt = lp(zt, 1.7);
      const want = Float32Array.from(targets, (y, t) => lt[t * V + y]! - ls[t * V + y]!);
      expect(maxScaledError(hot.signals.logratio, want)).toBeLessThan(1e-5);
    });
  });

  it('gearFromSparse: the log-ratio from the chosen log-probs, the teacher top-k optional, equal to the full-logit path at k = vocab', () => {
    const ls = logSoftmaxRows(zs, N, V), lt = logSoftmaxRows(zt, N, V);
    const chosen = (lp: Float64Array) => Float32Array.from(targets, (y, t) => lp[t * V + y]!);
    const studentLogprob = chosen(ls), teacherLogprob = chosen(lt);
    eachIsa(() => {
      const full = rl.gearFromLogits({ student, teacher, targets, advantages, offsets, mask, options: LR });
      const withTeacher = rl.gearFromSparse({
        student: f32Topk(topkOf(ls, N, V, V)), teacher: f32Topk(topkOf(lt, N, V, V)), studentLogprob, teacherLogprob,
        advantages, offsets, mask, vocab: V, options: LR,
      });
      const alone = rl.gearFromSparse({ student: f32Topk(topkOf(ls, N, V, V)), studentLogprob, teacherLogprob, advantages, offsets, mask, vocab: V, options: LR });
      expect(bits(alone.segmentId)).toEqual(bits(full.segmentId));
      expect(maxScaledError(alone.weights, full.weights)).toBeLessThan(1e-5);
      expect(maxScaledError(alone.signals.logratio!, full.signals.logratio)).toBeLessThan(1e-6);
      expect(bits(alone.advantages)).toEqual(bits(withTeacher.advantages));
      expect(alone.signals.divergence).toBeUndefined();
      expect(withTeacher.signals.divergence).toBeDefined();
      // a short student top-k: the entropy bound still comes from it alone
      const short = rl.gearFromSparse({ student: f32Topk(topkOf(ls, N, V, 4)), studentLogprob, teacherLogprob, advantages, offsets, mask, vocab: V, options: LR });
      const dense = rl.divergence(student, student);
      for (let t = 0; t < N; t++) expect(short.signals.entropy[t]!).toBeLessThanOrEqual(dense.studentEntropy[t]! + 1e-5);
      expect(short.anchors.length).toBeGreaterThan(0);
    });
  });
});
