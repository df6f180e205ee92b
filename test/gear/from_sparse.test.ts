// gearFromSparse: with k = vocab it is gearFromLogits; with a short top-k its divergence is the tail-bucket
// lower bound and its entropy the chosen bound; bad input is coded.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { maxScaledError, randomLogits, rng } from '../helpers/reference.js';
import { f32Topk, logSoftmaxRows, topkOf } from '../helpers/sparse_reference.js';

const V = 24, R = 6, L = 30, N = R * L;
const zs = randomLogits(3, N, V, 2);
const zt = randomLogits(4, N, V, 2);
const r0 = rng(9);
// the teacher agrees with the student except on a few stretches (divergence spikes)
for (let t = 0; t < N; t++) {
  const w = t % L > 10 && t % L < 14 ? 0.1 : 0.9;
  for (let v = 0; v < V; v++) zt[t * V + v] = w * zs[t * V + v]! + (1 - w) * zt[t * V + v]!;
}
const ls = logSoftmaxRows(zs, N, V), lt = logSoftmaxRows(zt, N, V);
const targets = Int32Array.from({ length: N }, () => Math.floor(r0() * V));
const offsets = Int32Array.from({ length: R + 1 }, (_, r) => r * L);
const advantages = [1, -1, 0.5, -0.5, 1, -1];
const chosen = (lp: Float64Array) => Float32Array.from(targets, (y, t) => lp[t * V + y]!);
const options: rl.GearOptions = { peakMinKl: 0.05, signMode: 'rlsd' };

describe('gearFromSparse', () => {
  it('with k = vocab it reproduces gearFromLogits (segments, weights, advantages)', () => {
    const full = rl.gearFromLogits({
      student: { data: Float32Array.from(ls), rows: N, vocab: V }, teacher: { data: Float32Array.from(lt), rows: N, vocab: V },
      targets, advantages, offsets, options,
    });
    const sp = rl.gearFromSparse({
      student: f32Topk(topkOf(ls, N, V, V)), teacher: f32Topk(topkOf(lt, N, V, V)),
      studentLogprob: chosen(ls), teacherLogprob: chosen(lt), advantages, offsets, vocab: V, options,
    });
    expect(full.diagnostics.segments).toBeGreaterThan(0);
    expect(maxScaledError(sp.signals.divergence, full.signals.divergence)).toBeLessThan(1e-5);
    expect(maxScaledError(sp.signals.entropy, full.signals.entropy)).toBeLessThan(1e-5);
    expect(maxScaledError(sp.signals.logratio!, full.signals.logratio)).toBeLessThan(1e-6);
    expect(Array.from(sp.segmentId)).toEqual(Array.from(full.segmentId));
    expect(maxScaledError(sp.weights, full.weights)).toBeLessThan(1e-4);
    expect(maxScaledError(sp.advantages, full.advantages)).toBeLessThan(1e-4);
  });

  it('with a short top-k: the divergence is the tail-bucket lower bound, the entropy the chosen bound', () => {
    const dense = rl.divergence({ data: Float32Array.from(ls), rows: N, vocab: V }, { data: Float32Array.from(lt), rows: N, vocab: V });
    const s = f32Topk(topkOf(ls, N, V, 5)), t = f32Topk(topkOf(lt, N, V, 5));
    const base = { student: s, teacher: t, advantages, offsets, vocab: V, options: { peakMinKl: 0.05 } };
    const lo = rl.gearFromSparse(base);
    const hi = rl.gearFromSparse({ ...base, entropy: 'upper' });
    const mid = rl.gearFromSparse({ ...base, entropy: 'mid' });
    for (let i = 0; i < N; i++) {
      expect(lo.signals.divergence[i]!).toBeLessThanOrEqual(dense.value[i]! * (1 + 1e-5) + 1e-6);
      expect(lo.signals.entropy[i]!).toBeLessThanOrEqual(dense.studentEntropy[i]! + 1e-5);
      expect(hi.signals.entropy[i]!).toBeGreaterThanOrEqual(dense.studentEntropy[i]! - 1e-5);
      expect(mid.signals.entropy[i]).toBeCloseTo((lo.signals.entropy[i]! + hi.signals.entropy[i]!) / 2, 5);
    }
    expect(lo.signals.logratio).toBeUndefined();
    expect(lo.stats.studentTail.some((x) => x > 0.05)).toBe(true);
    expect(lo.advantages.length).toBe(N);
  });

  it('rejects what it cannot compute', () => {
    const s = f32Topk(topkOf(ls, N, V, 3)), t = f32Topk(topkOf(lt, N, V, 3));
    const code = (f: () => unknown, c: string) => expect(f).toThrow(expect.objectContaining({ code: c }));
    code(() => rl.gearFromSparse({ student: s, teacher: t, advantages, offsets, options: { signMode: 'rlsd' } }), 'ERR_OPTION');
    code(() => rl.gearFromSparse({ student: s, teacher: t, advantages, offsets, entropy: 'upper' }), 'ERR_OPTION');
    code(() => rl.gearFromSparse({ student: s, teacher: t, advantages, offsets, studentLogprob: new Float32Array(N) }), 'ERR_DTYPE');
    code(() => rl.gearFromSparse({ student: s, teacher: t, advantages, offsets: Int32Array.of(0, N - 1) }), 'ERR_OFFSETS');
    code(() => rl.gearFromSparse({ student: s, teacher: t, advantages, offsets, extra: 1 } as never), 'ERR_OPTION');
  });

  describe('out: a previous result whose arrays the call writes again', () => {
    const s = f32Topk(topkOf(ls, N, V, 5)), t = f32Topk(topkOf(lt, N, V, 5));
    const s2 = f32Topk(topkOf(lt, N, V, 5)), t2 = f32Topk(topkOf(ls, N, V, 5));  // another step: sides swapped
    const arrays = (r: rl.GearFromSparseResult | rl.GearFromSparseLogratioResult) => ({
      advantages: r.advantages, weights: r.weights, segmentId: r.segmentId, ...r.stats,
      ...Object.fromEntries(Object.entries(r.signals).map(([k, x]) => [`signals.${k}`, x])),
    });
    const values = (r: Parameters<typeof arrays>[0]) => Object.fromEntries(Object.entries(arrays(r)).map(([k, x]) => [k, Array.from(x as Float32Array)]));
    const cases: [string, (step: 0 | 1) => Parameters<typeof rl.gearFromSparse>[0]][] = [
      ['teacher top-k, entropy lower', (k) => ({ student: k ? s2 : s, teacher: k ? t2 : t, advantages, offsets, vocab: V, options: { peakMinKl: 0.05 } })],
      ['teacher top-k, entropy mid, rlsd', (k) => ({ student: k ? s2 : s, teacher: k ? t2 : t, studentLogprob: chosen(k ? lt : ls),
        teacherLogprob: chosen(k ? ls : lt), advantages, offsets, vocab: V, entropy: 'mid', options })],
      ['log-ratio only', (k) => ({ student: k ? s2 : s, studentLogprob: chosen(k ? lt : ls), teacherLogprob: chosen(k ? ls : lt),
        advantages, offsets, options: { anchorSignal: 'logratio', peakMinKl: 0.05 } })],
    ];
    for (const [name, input] of cases) {
      it(`${name}: bit for bit the fresh call's values, in the previous result's arrays`, () => {
        const first = rl.gearFromSparse(input(0));
        const kept = arrays(first);
        const fresh = rl.gearFromSparse(input(1));
        const again = rl.gearFromSparse({ ...input(1), out: first });
        expect(values(again)).toEqual(values(fresh));
        expect(values(first)).not.toEqual(values(rl.gearFromSparse(input(0))));  // overwritten: the second step's values
        for (const [k, x] of Object.entries(arrays(again))) expect(x, k).toBe(kept[k as keyof typeof kept]);
        expect(Array.from(again.anchors)).toEqual(Array.from(fresh.anchors));
        expect(again.diagnostics).toEqual(fresh.diagnostics);
      });
    }

    it("a 'lower' result handed to a 'mid' call: the mid entropy gets an array of its own", () => {
      const base = { student: s, teacher: t, advantages, offsets, vocab: V };
      const lower = rl.gearFromSparse(base);
      expect(lower.signals.entropy).toBe(lower.stats.entropyLower);
      const mid = rl.gearFromSparse({ ...base, entropy: 'mid', out: lower });
      expect(mid.signals.entropy).not.toBe(mid.stats.entropyLower);
      expect(values(mid)).toEqual(values(rl.gearFromSparse({ ...base, entropy: 'mid' })));
    });

    it('a result of another token count, or not a result, is a coded error', () => {
      const base = { student: s, teacher: t, advantages, offsets, vocab: V };
      const short = rl.gearFromSparse({ student: f32Topk(topkOf(ls, L, V, 5)), teacher: f32Topk(topkOf(lt, L, V, 5)),
        advantages: [1], offsets: Int32Array.of(0, L) });
      expect(() => rl.gearFromSparse({ ...base, out: short })).toThrow(expect.objectContaining({ code: 'ERR_SHAPE', message: expect.stringContaining('out.value.length') }));
      expect(() => rl.gearFromSparse({ ...base, out: 7 as never })).toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
      expect(() => rl.gearFromSparse({ ...base, out: { stats: {} } as never })).toThrow(expect.objectContaining({ code: 'ERR_OPTION', message: expect.stringContaining('out.signals') }));
    });
  });
});
