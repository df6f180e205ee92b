// gearFromLogits (logits -> divergence -> gear), the self-distillation term with its gradient, and an
// end-to-end alignment check with a toy causal "model" over teacher / student sequences.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { gearReference } from '../helpers/gear_reference.js';

function lcg(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

// float64 reference of one row: reverse KL, student entropy, log-probs, d KL / d z_student
function refRow(zs: ArrayLike<number>, zt: ArrayLike<number>, T: number, y: number) {
  const V = zs.length;
  const lse = (z: ArrayLike<number>) => {
    let m = -Infinity;
    for (let v = 0; v < V; v++) m = Math.max(m, z[v]! / T);
    let s = 0;
    for (let v = 0; v < V; v++) s += Math.exp(z[v]! / T - m);
    return m + Math.log(s);
  };
  const ls = lse(zs), lt = lse(zt);
  const a = Array.from({ length: V }, (_, v) => zs[v]! / T - ls);
  const b = Array.from({ length: V }, (_, v) => zt[v]! / T - lt);
  let D = 0, H = 0;
  for (let v = 0; v < V; v++) {
    const p = Math.exp(a[v]!);
    D += p * (a[v]! - b[v]!);
    H -= p * a[v]!;
  }
  const grad = a.map((av, v) => (Math.exp(av) * ((av - b[v]!) - D)) / T);
  return { D, H, ls: a[y]!, lt: b[y]!, grad };
}

function randomLogits(seed: number, rows: number, vocab: number, scale = 3) {
  const r = lcg(seed);
  return { data: Float32Array.from({ length: rows * vocab }, () => (r() - 0.5) * 2 * scale), rows, vocab };
}

describe('distillLoss (OPSD-style reverse KL term)', () => {
  const rows = 9, vocab = 17, T = 1.3, coef = 0.7;
  const s = randomLogits(1, rows, vocab), t = randomLogits(2, rows, vocab);
  const mask = new Uint8Array([1, 1, 0, 1, 1, 1, 0, 1, 1]);
  const nv = 7;
  const row = (z: Float32Array, r: number) => z.subarray(r * vocab, (r + 1) * vocab);

  it('loss is coef * token-mean of the reverse KL; gradient matches float64 analytic and finite differences', () => {
    const out = rl.distillLoss({ student: s, teacher: t, mask, distillCoef: coef, temperature: T });
    let want = 0;
    for (let r = 0; r < rows; r++) if (mask[r]) want += refRow(row(s.data, r), row(t.data, r), T, 0).D;
    want = (coef * want) / nv;
    expect(out.loss).toBeCloseTo(want, 5);
    expect(out.validTokens).toBe(nv);
    for (let r = 0; r < rows; r++) {
      const g = refRow(row(s.data, r), row(t.data, r), T, 0).grad;
      for (let v = 0; v < vocab; v++) {
        const w = mask[r] ? (coef / nv) * g[v]! : 0;
        expect(Math.abs(out.grad[r * vocab + v]! - w)).toBeLessThanOrEqual(2e-6 + 1e-4 * Math.abs(w));
      }
    }
    // finite differences of the float64 loss, a few coordinates
    const lossAt = (z: Float64Array) => {
      let acc = 0;
      for (let r = 0; r < rows; r++) if (mask[r]) acc += refRow(z.subarray(r * vocab, (r + 1) * vocab), row(t.data, r), T, 0).D;
      return (coef * acc) / nv;
    };
    const z0 = Float64Array.from(s.data);
    const h = 1e-4;
    for (const k of [0, 5, 20, 40, 77, 100, 152]) {
      const zp = z0.slice(), zm = z0.slice();
      zp[k]! += h;
      zm[k]! -= h;
      const fd = (lossAt(zp) - lossAt(zm)) / (2 * h);
      expect(Math.abs(out.grad[k]! - fd)).toBeLessThanOrEqual(1e-5 + 1e-3 * Math.abs(fd));
    }
  });

  it('coef 0 gives loss 0 and a zero gradient; capped rows get no gradient; reuses given stats', () => {
    const zero = rl.distillLoss({ student: s, teacher: t, distillCoef: 0 });
    expect(zero.loss).toBe(0);
    expect(zero.grad.every((x) => x === 0)).toBe(true);
    // teacher with -Infinity where the student has mass on row 0: D = +inf, capped at klCap = 2
    const t2 = { ...t, data: t.data.slice() };
    t2.data[3] = -Infinity;
    const capped = rl.distillLoss({ student: s, teacher: t2, distillCoef: 1, klCap: 2 });
    expect(capped.divergence[0]).toBe(2);
    expect(Array.from(capped.grad.subarray(0, vocab)).every((x) => x === 0)).toBe(true);
    const stats = rl.divergence(s, t, { kind: 'reverse_kl', temperature: T, klCap: 20 });
    const a = rl.distillLoss({ student: s, teacher: t, mask, distillCoef: coef, temperature: T, stats });
    const b = rl.distillLoss({ student: s, teacher: t, mask, distillCoef: coef, temperature: T });
    expect(a.loss).toBe(b.loss);
    // reusing the forward statistics only changes float32 rounding
    a.grad.forEach((x, i) => expect(Math.abs(x - b.grad[i]!)).toBeLessThanOrEqual(1e-7 + 1e-5 * Math.abs(b.grad[i]!)));
  });

  it('bad input throws GearError', () => {
    const c = (f: () => unknown) => { try { f(); } catch (e) { return (e as rl.GearError).code; } return 'no error'; };
    expect(c(() => rl.distillLoss({ student: s, teacher: t, distillCoef: -1 }))).toBe('ERR_OPTION');
    expect(c(() => rl.distillLoss({ student: s, teacher: t } as rl.DistillArgs))).toBe('ERR_OPTION');
    expect(c(() => rl.distillLoss({ student: s, teacher: randomLogits(3, rows, vocab + 1), distillCoef: 1 }))).toBe('ERR_SHAPE');
    expect(c(() => rl.distillLoss({ student: s, teacher: t, mask: new Uint8Array(3), distillCoef: 1 }))).toBe('ERR_SHAPE');
    expect(c(() => rl.distillLoss({ student: s, teacher: t, distillCoef: 1, klcap: 3 } as never))).toBe('ERR_OPTION');
  });
});

describe('gearFromLogits', () => {
  it('signals equal the float64 reference; the result equals gear() on them', () => {
    const vocab = 23, lens = [12, 7, 15], T = 0.9;
    const offsets = Int32Array.from([0, 12, 19, 34]);
    const N = 34;
    const r = lcg(9);
    const s = randomLogits(4, N, vocab, 2);
    // teacher = student plus a perturbation that is large on a few positions (departures)
    const t = { ...s, data: s.data.slice() };
    for (let i = 0; i < N; i++) {
      const big = i === 4 || i === 15 || i === 25;
      for (let v = 0; v < vocab; v++) t.data[i * vocab + v]! += (r() - 0.5) * (big ? 12 : 0.3);
    }
    const targets = Int32Array.from({ length: N }, () => Math.floor(r() * vocab));
    const mask = Uint8Array.from({ length: N }, (_, i) => (i === 9 || i === 10 ? 0 : 1));
    const advantages = [1, -0.5, 0.8];
    expect(lens.reduce((x, y) => x + y, 0)).toBe(N);
    for (const options of [{}, { signMode: 'rlsd' as const }, { peakZ: 1.5, segmentEnd: 'entropy_settles' as const }]) {
      const out = rl.gearFromLogits({ student: s, teacher: t, targets, advantages, offsets, mask, temperature: T, options, distillCoef: 0.5 });
      for (let i = 0; i < N; i++) {
        const ref = refRow(s.data.subarray(i * vocab, (i + 1) * vocab), t.data.subarray(i * vocab, (i + 1) * vocab), T, targets[i]!);
        expect(out.signals.divergence[i]).toBeCloseTo(ref.D, 5);
        expect(out.signals.entropy[i]).toBeCloseTo(ref.H, 5);
        expect(out.signals.logratio[i]).toBeCloseTo(ref.lt - ref.ls, 5);
      }
      const direct = rl.gear({ advantages, offsets, mask, divergence: out.signals.divergence, entropy: out.signals.entropy, logratio: out.signals.logratio, options });
      expect(Array.from(out.advantages)).toEqual(Array.from(direct.advantages));
      expect(Array.from(out.segmentId)).toEqual(Array.from(direct.segmentId));
      const ref = gearReference({ advantages, offsets, mask, divergence: out.signals.divergence, entropy: out.signals.entropy, logratio: out.signals.logratio, options });
      expect(Array.from(out.segmentId)).toEqual(ref.segmentId);
      expect(out.distill).toBeDefined();
      const d = rl.distillLoss({ student: s, teacher: t, mask, distillCoef: 0.5, temperature: T });
      expect(out.distill!.loss).toBe(d.loss);
    }
    // the perturbed positions are found as departures with the default rule
    const def = rl.gearFromLogits({ student: s, teacher: t, targets, advantages, offsets, mask, temperature: T });
    expect(Array.from(def.anchors)).toEqual(expect.arrayContaining([4, 25]));
    expect(def.distill).toBeUndefined();
  });

  it('bad input throws GearError', () => {
    const s = randomLogits(5, 4, 5), t = randomLogits(6, 4, 5);
    const base = { student: s, teacher: t, targets: new Int32Array(4), advantages: [1], offsets: new Int32Array([0, 4]) };
    const c = (f: () => unknown) => { try { f(); } catch (e) { return (e as rl.GearError).code; } return 'no error'; };
    expect(c(() => rl.gearFromLogits(base))).toBe('no error');
    expect(c(() => rl.gearFromLogits({ ...base, offsets: new Int32Array([0, 3]) }))).toBe('ERR_OFFSETS');
    expect(c(() => rl.gearFromLogits({ ...base, targets: new Int32Array([0, 0, 0, 9]) }))).toBe('ERR_TARGET_RANGE');
    expect(c(() => rl.gearFromLogits({ ...base, options: { alpha: -1 } }))).toBe('ERR_OPTION');
    expect(c(() => rl.gearFromLogits({ ...base, distillCoef: -1 }))).toBe('ERR_OPTION');
    expect(c(() => rl.gearFromLogits({ ...base, temperature: 0 }))).toBe('ERR_OPTION');
  });
});

// A toy causal "language model": the logits at position p depend on every token up to p, so a teacher
// sequence with extra context gives different logits, while identical contexts give identical logits.
function toyLM(ids: Int32Array, vocab: number): { data: Float32Array; rows: number; vocab: number } {
  const data = new Float32Array(ids.length * vocab);
  let h = 2166136261;
  for (let p = 0; p < ids.length; p++) {
    h = Math.imul(h ^ ids[p]!, 16777619) >>> 0;
    // recent tokens dominate; the prefix hash adds a small context effect
    for (let v = 0; v < vocab; v++) data[p * vocab + v] = Math.sin(ids[p]! * 0.7 + v * 1.3) * 2 + ((h >>> (v % 24)) & 7) * 0.05;
  }
  return { data, rows: ids.length, vocab };
}

describe('teacher context end to end (toy causal model)', () => {
  const vocab = 40;
  const prompt = [1, 11, 12, 13, 2, 3];
  const responses = [[21, 22, 23, 24, 25, 26], [27, 28, 29]];

  function batch(reference: number[]) {
    const student: number[] = [], teacher: number[] = [];
    let targets: number[] = [];
    const offsets = [0];
    const sLog: Float32Array[] = [], tLog: Float32Array[] = [];
    for (const response of responses) {
      const ti = rl.teacherInput({ prompt, insertAt: 4, response, reference, vocab });
      sLog.push(rl.gatherRows(toyLM(ti.studentIds, vocab), ti.studentRows).data);
      tLog.push(rl.gatherRows(toyLM(ti.teacherIds, vocab), ti.teacherRows).data);
      student.push(...ti.studentIds);
      teacher.push(...ti.teacherIds);
      targets = targets.concat(response);
      offsets.push(offsets[offsets.length - 1]! + response.length);
    }
    const N = targets.length;
    const cat = (xs: Float32Array[]) => { const o = new Float32Array(N * vocab); let k = 0; for (const x of xs) { o.set(x, k); k += x.length; } return o; };
    return {
      student: { data: cat(sLog), rows: N, vocab }, teacher: { data: cat(tLog), rows: N, vocab },
      targets: Int32Array.from(targets), offsets: Int32Array.from(offsets), advantages: [0.7, -1.1],
    };
  }

  it('an empty reference gives identical logits at the aligned rows, hence D = 0 and exactly GRPO', () => {
    const b = batch([]);
    expect(Array.from(b.teacher.data)).toEqual(Array.from(b.student.data));
    const out = rl.gearFromLogits(b);
    expect(out.signals.divergence.every((x) => x === 0)).toBe(true);
    expect(Array.from(out.advantages)).toEqual(Array.from(rl.segmentBroadcast(b.advantages, b.offsets)));
  });

  it('a reference changes the teacher logits but the rows stay aligned with the sampled tokens', () => {
    const b = batch([31, 32, 33]);
    const out = rl.gearFromLogits(b);
    expect(out.signals.divergence.some((x) => x > 0)).toBe(true);
    // aligned rows: the teacher's log-prob of each target comes from the row that predicts it
    for (let i = 0; i < b.targets.length; i++) {
      const row = b.teacher.data.subarray(i * vocab, (i + 1) * vocab);
      const ref = refRow(b.student.data.subarray(i * vocab, (i + 1) * vocab), row, 1, b.targets[i]!);
      expect(out.signals.logratio[i]).toBeCloseTo(ref.lt - ref.ls, 5);
    }
  });
});
