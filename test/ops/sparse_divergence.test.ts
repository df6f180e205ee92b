// sparseDivergence / sparseDivergenceBackward / sampledTokenKl against TRL's SDPO top-k vectors, the float64
// reference (test/helpers/sparse_reference.ts), the dense op (k = vocab), finite differences, the
// data-processing lower bound and the entropy bounds on random full distributions.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';
import { eachIsa, restoreBackendAfterAll } from '../helpers/isa.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';
import { type Kind, maxScaledError, randomLogits, rng } from '../helpers/reference.js';
import {
  type RefSparseOptions, type RefTopk, f32Topk, fullEntropy, logSoftmaxRows, projectOnto, refSparse, refSparseGradFd, sharedCells,
  topkOf,
} from '../helpers/sparse_reference.js';

restoreBackendAfterAll();

const KINDS: [Kind, number][] = [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.5], ['jsd', 0.1], ['jsd', 1], ['jsd', 0]];
const SUPPORTS = ['tail', 'renormalize'] as const;

/** The float64 values the native op actually sees (its inputs are float32). */
const asSeen = (x: RefTopk): RefTopk => ({ ...x, logprobs: Float64Array.from(Float32Array.from(x.logprobs)) });

/**
 * n tokens over `vocab` ids: student and teacher full distributions (related, some -Infinity entries),
 * each side's own top-k (teacher k differs), a few rows padded (fewer entries than k).
 */
function makeCase(seed: number, n: number, vocab: number, ks: number, kt: number) {
  const zs = randomLogits(seed, n, vocab);
  const zt = randomLogits(seed + 1, n, vocab);
  for (let i = 0; i < zt.length; i++) zt[i] = 0.5 * zt[i]! + 0.5 * zs[i]!;
  for (let r = 0; r < n; r += 7) zs[r * vocab + 1] = -Infinity;
  const ls = logSoftmaxRows(zs, n, vocab), lt = logSoftmaxRows(zt, n, vocab);
  const s = topkOf(ls, n, vocab, ks), t = topkOf(lt, n, vocab, kt);
  // padding: the last entry of every 5th row (the list then holds k - 1 ids)
  for (let r = 0; r < n; r += 5) { s.ids[r * ks + ks - 1] = -1; s.logprobs[r * ks + ks - 1] = -Infinity; }
  for (let r = 2; r < n; r += 5) { t.ids[r * kt + kt - 1] = -1; t.logprobs[r * kt + kt - 1] = -Infinity; }
  return { zs, zt, ls, lt, s: asSeen(s), t: asSeen(t) };
}

describe('sparseDivergence: TRL SDPO top-k vectors', () => {
  const peer = loadPeer('trl_sdpo_divergence.json');
  const cases = peer.cases.filter((c: any) => c.function === 'compute_topk_self_distillation_loss');
  it('has the top-k cases', () => expect(cases.length).toBeGreaterThanOrEqual(16));
  for (const c of cases as any[]) {
    it(c.name, () => {
      const [b, tt, vocab] = c.inputs.student_logits.shape as number[];
      const n = b! * tt!;
      const ls = logSoftmaxRows(data(c.inputs.student_logits), n, vocab!);
      const lt = logSoftmaxRows(data(c.inputs.teacher_logits), n, vocab!);
      const k = c.params.distillation_topk as number;
      const s = topkOf(ls, n, vocab!, k);
      const t = projectOnto(s, lt, n, vocab!);  // TRL: the teacher at the student's top-k ids
      const opts = { kind: (c.params.distillation_alpha === 1 ? 'reverse_kl' : 'forward_kl') as Kind,
        support: c.params.distillation_add_tail ? 'tail' as const : 'renormalize' as const };
      const d = rl.sparseDivergence(f32Topk(s), f32Topk(t), { ...opts, vocab: vocab! });
      const want = data(c.outputs.divergence) as number[];
      for (let r = 0; r < n; r++) {
        // TRL's forward KL is NaN where the teacher has -Infinity (F.kl_div); here 0 log 0 = 0: the reference decides.
        const e = Number.isNaN(want[r]!) ? refSparse(asSeen(s), asSeen(t), n, opts)[r]! : want[r]!;
        expectClose([d.value[r]!], [e], { rtol: 2e-5, atol: 2e-6, what: `${c.name} value[${r}]` });
      }
      // Gradient w.r.t. the student logits: chain d/dlogprob through logprob_i = z_i - lse(z).
      const wantG = data(c.outputs.grad_student_logits) as number[];
      if (!wantG.every(Number.isFinite)) return;
      const g = rl.sparseDivergenceBackward(f32Topk(s), f32Topk(t), new Float32Array(n).fill(1), opts);
      const gz = new Float64Array(n * vocab!);
      for (let r = 0; r < n; r++) {
        let sum = 0;
        for (let j = 0; j < k; j++) sum += g[r * k + j]!;
        for (let v = 0; v < vocab!; v++) gz[r * vocab! + v] = -Math.exp(ls[r * vocab! + v]!) * sum;
        for (let j = 0; j < k; j++) gz[r * vocab! + s.ids[r * k + j]!] += g[r * k + j]!;
      }
      expectClose(gz, wantG, { rtol: 1e-4, atol: 2e-6, what: `${c.name} grad` });
    });
  }

  it("add_tail_bucket's clamp (mass near one): the bucket keeps log-mass log(-expm1(-1e-7))", () => {
    const c = peer.cases.find((x: any) => x.name === 'add_tail_bucket/mass_near_one') as any;
    const withTail = data(c.outputs.log_probs_with_tail) as number[];
    const lp = data(c.inputs.log_probs) as number[];
    const teacher = [Math.log(0.5), Math.log(0.25)];
    const d = rl.sparseDivergence({ ids: Int32Array.of(0, 1), logprobs: Float32Array.from(lp), k: 2 },
      { ids: Int32Array.of(0, 1), logprobs: Float32Array.from(teacher), k: 2 });
    // reverse KL over [top-k..., bucket] with the teacher's bucket log(1 - 0.75)
    const tl = [...teacher, Math.log(0.25)];
    const lpf = [...Float32Array.from(lp)];
    let want = 0;
    for (let j = 0; j < 3; j++) {
      const a = j < 2 ? lpf[j]! : withTail[2]!;
      want += Math.exp(a) * (a - tl[j]!);
    }
    expectClose([d.value[0]!], [want], { rtol: 1e-6, what: 'value' });
  });

  it("add_tail_bucket's input summing past 1 is not a list of log-probs here: ERR_OPTION", () => {
    const c = peer.cases.find((x: any) => x.name === 'add_tail_bucket/few_tokens') as any;
    const lp = Float32Array.from(data(c.inputs.log_probs) as number[]);
    expect(() => rl.sparseDivergence({ ids: Int32Array.of(0, 1, 2), logprobs: lp, k: 3 },
      { ids: Int32Array.of(0, 1, 2), logprobs: lp, k: 3 })).toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
  });
});

describe('sparseDivergence against the float64 reference', () => {
  const { s, t } = makeCase(11, 60, 40, 8, 6);
  for (const [kind, beta] of KINDS) {
    for (const support of SUPPORTS) {
      it(`${kind} beta=${beta} ${support}`, () => {
        const o: RefSparseOptions = { kind, beta, support };
        const want = refSparse(s, t, 60, o);
        expect(want.some((x) => x > 0.05)).toBe(true);
        // Every ISA path of this CPU (baseline, AVX2 and AVX-512 builds of the per-entry passes).
        eachIsa((isa) => {
          const d = rl.sparseDivergence(f32Topk(s), f32Topk(t), { ...o, vocab: 40 });
          expect(maxScaledError(d.value, want), isa).toBeLessThan(2e-6);
        });
      });
    }
  }

  it('coverage: tails, shared masses and counts', () => {
    const d = rl.sparseDivergence(f32Topk(s), f32Topk(t));
    for (let r = 0; r < 60; r++) {
      const own = (x: RefTopk) => 1 - Array.from(x.logprobs.subarray(r * x.k, (r + 1) * x.k), Math.exp).reduce((a, b) => a + b, 0);
      expect(d.studentTail[r]).toBeCloseTo(Math.max(0, own(s)), 6);
      expect(d.teacherTail[r]).toBeCloseTo(Math.max(0, own(t)), 6);
      const tIds = new Set(t.ids.subarray(r * 6, r * 6 + 6));
      let cnt = 0, ms = 0, mt = 0;
      for (let i = 0; i < 8; i++) {
        const id = s.ids[r * 8 + i]!;
        if (id < 0 || !tIds.has(id)) continue;
        cnt++;
        ms += Math.exp(s.logprobs[r * 8 + i]!);
        mt += Math.exp(t.logprobs[r * 6 + t.ids.subarray(r * 6, r * 6 + 6).indexOf(id)]!);
      }
      expect(d.shared[r]).toBe(cnt);
      expect(d.studentSharedMass[r]).toBeCloseTo(ms, 6);
      expect(d.teacherSharedMass[r]).toBeCloseTo(mt, 6);
    }
  });

  it('klCap caps the value; +Infinity for a true support mismatch', () => {
    // student mass 0.5 on id 3, where the teacher lists -Infinity
    const st = { ids: Int32Array.of(3, 4), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.5)), k: 2 };
    const te = { ids: Int32Array.of(3, 4), logprobs: Float32Array.of(-Infinity, Math.log(0.9)), k: 2 };
    expect(rl.sparseDivergence(st, te).value[0]).toBe(Infinity);
    expect(rl.sparseDivergence(st, te, { klCap: 5 }).value[0]).toBe(5);
    expect(rl.sparseDivergence(st, te, { kind: 'forward_kl' }).value[0]).toBeGreaterThan(0);
    expect(Number.isFinite(rl.sparseDivergence(st, te, { kind: 'jsd' }).value[0])).toBe(true);
  });

  it('no tokens: empty results; a log-prob far below -708 keeps its value in the log terms', () => {
    const empty = { ids: new Int32Array(0), logprobs: new Float32Array(0), k: 3 };
    const d = rl.sparseDivergence(empty, empty);
    expect(d.value.length).toBe(0);
    expect(rl.sparseDivergenceBackward(empty, empty, new Float32Array(0)).length).toBe(0);
    // the teacher's log-prob of id 2 is -800 (its mass underflows to 0): KL = 0.5 (log 0.5 + 800) + a ~1e-6 bucket term
    const st = { ids: Int32Array.of(1, 2), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.5)), k: 2 };
    const te = { ids: Int32Array.of(1, 2), logprobs: Float32Array.of(Math.log(0.5), -800), k: 2 };
    expectClose([rl.sparseDivergence(st, te).value[0]!], [0.5 * (Math.log(0.5) + 800)], { rtol: 1e-6, what: 'reverse KL' });
    expect(rl.sparseDivergence(st, te, { support: 'renormalize' }).value[0]).toBeCloseTo(0.5 * Math.log(0.5) + 0.5 * (800 + Math.log(0.25)), 3);
  });

  it('no shared id: the bucket is everything (0); renormalised has no common conditional (0)', () => {
    const st = { ids: Int32Array.of(1, 2), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.2)), k: 2 };
    const te = { ids: Int32Array.of(5, 6), logprobs: Float32Array.of(Math.log(0.9), Math.log(0.05)), k: 2 };
    for (const support of SUPPORTS) {
      const d = rl.sparseDivergence(st, te, { support });
      expect(d.value[0]).toBe(0);
      expect(d.shared[0]).toBe(0);
    }
  });
});

describe('sparseDivergence: properties on full distributions', () => {
  const V = 48, N = 80;
  const zs = randomLogits(21, N, V), zt = randomLogits(22, N, V, 2);
  for (let i = 0; i < zt.length; i++) zt[i] = 0.7 * zt[i]! + 0.3 * zs[i]!;
  const ls = logSoftmaxRows(zs, N, V), lt = logSoftmaxRows(zt, N, V);
  const f32 = (x: Float64Array) => Float32Array.from(x);

  it('the tail-bucket divergence is a lower bound of the full one (data-processing inequality), every kind and k', () => {
    for (const [kind, beta] of KINDS) {
      const dense = rl.divergence({ data: f32(ls), rows: N, vocab: V }, { data: f32(lt), rows: N, vocab: V }, { kind, beta }).value;
      for (const [ks, kt] of [[1, 1], [5, 5], [20, 8], [3, 30]] as const) {
        const d = rl.sparseDivergence(f32Topk(topkOf(ls, N, V, ks)), f32Topk(topkOf(lt, N, V, kt)), { kind, beta, tailClamp: 0 });
        for (let r = 0; r < N; r++) expect(d.value[r]!, `${kind} ${beta} k=${ks}/${kt} row ${r}`).toBeLessThanOrEqual(dense[r]! * (1 + 1e-5) + 1e-6);
      }
    }
  });

  it('k = vocab is exact: equals the dense op for every kind and both supports (sorted-matching path)', () => {
    // 48 * 48 entries per row exceed the quadratic matching limit: this runs the sorted path
    const s = f32Topk(topkOf(ls, N, V, V)), t = f32Topk(topkOf(lt, N, V, V));
    for (const [kind, beta] of KINDS) {
      const dense = rl.divergence({ data: f32(ls), rows: N, vocab: V }, { data: f32(lt), rows: N, vocab: V }, { kind, beta }).value;
      for (const support of SUPPORTS) {
        const d = rl.sparseDivergence(s, t, { kind, beta, support, vocab: V });
        expect(maxScaledError(d.value, dense), `${kind} ${beta} ${support}`).toBeLessThan(1e-5);
      }
    }
  });

  it('with no tail the renormalised and tail variants agree', () => {
    // each row's support: 6 ids (others -Infinity), both lists cover it
    const K = 6;
    const zs2 = randomLogits(31, N, V), zt2 = randomLogits(32, N, V);
    for (let r = 0; r < N; r++) for (let v = K; v < V; v++) { zs2[r * V + v] = -Infinity; zt2[r * V + v] = -Infinity; }
    const s = f32Topk(topkOf(logSoftmaxRows(zs2, N, V), N, V, K)), t = f32Topk(topkOf(logSoftmaxRows(zt2, N, V), N, V, K + 2));
    for (const [kind, beta] of KINDS) {
      // the default clamp: with 0, a float32 rounding-level tail on one side only would be a support mismatch
      const a = rl.sparseDivergence(s, t, { kind, beta, support: 'tail' });
      const b = rl.sparseDivergence(s, t, { kind, beta, support: 'renormalize' });
      expect(maxScaledError(a.value, b.value), `${kind} ${beta}`).toBeLessThan(1e-5);
      expect(Math.max(...a.value)).toBeGreaterThan(0.01);
    }
  });

  it('entropy bounds hold on every random full distribution, and each is attained', () => {
    const r = rng(5);
    let lowGap = 0, n = 0;
    for (let trial = 0; trial < 300; trial++) {
      const vocab = 2 + Math.floor(r() * 200);
      const k = 1 + Math.floor(r() * Math.min(vocab, 40));
      const scale = [0.3, 1, 3, 8][trial % 4]!;
      const lp = logSoftmaxRows(randomLogits(1000 + trial, 1, vocab, scale), 1, vocab);
      const h = fullEntropy(lp, 1, vocab)[0]!;
      const d = rl.sparseDivergence(f32Topk(topkOf(lp, 1, vocab, k)), f32Topk(topkOf(lp, 1, vocab, k)), { vocab });
      const tol = 2e-6 * Math.max(1, h);  // float32 inputs and outputs
      expect(d.entropyLower[0]!, `trial ${trial}`).toBeLessThanOrEqual(h + tol);
      expect(d.entropyUpper[0]!, `trial ${trial}`).toBeGreaterThanOrEqual(h - tol);
      lowGap += h - d.entropyLower[0]!;
      n++;
    }
    expect(lowGap / n).toBeGreaterThan(0);  // not trivially equal
    // Attained: the top-k then floor(tau/m) ids at m and the rest r (lower); the tail spread evenly (upper).
    const top = [0.4, 0.2, 0.1], m = 0.1, tau = 0.3, vocab = 12;
    const lo = [...top, m, m, m * 0.999, (tau - 2 * m - m * 0.999)];
    const hi = [...top, ...Array(vocab - 3).fill(tau / (vocab - 3))];
    const ent = (p: number[]) => -p.reduce((s2, x) => s2 + (x > 0 ? x * Math.log(x) : 0), 0);
    const list = { ids: Int32Array.of(0, 1, 2), logprobs: Float32Array.from(top, Math.log), k: 3 };
    const d = rl.sparseDivergence(list, list, { vocab });
    expect(d.entropyLower[0]).toBeCloseTo(ent([...top, m, m, tau - 2 * m]), 5);
    expect(d.entropyLower[0]!).toBeLessThanOrEqual(ent(lo) + 1e-6);
    expect(d.entropyUpper[0]).toBeCloseTo(ent(hi), 5);
    expect(rl.sparseDivergence(list, list).entropyUpper[0]).toBe(Infinity);  // vocabulary unknown
  });
});

describe('sparseDivergenceBackward', () => {
  const { s, t } = makeCase(41, 24, 30, 7, 9);
  for (const [kind, beta] of KINDS) {
    for (const support of SUPPORTS) {
      it(`matches float64 finite differences: ${kind} beta=${beta} ${support}`, () => {
        const o: RefSparseOptions = { kind, beta, support };
        const w = Float32Array.from({ length: 24 }, (_, i) => 0.5 + (i % 3));
        const fd = refSparseGradFd(s, t, 24, o);
        for (let i = 0; i < fd.length; i++) fd[i] = fd[i]! * w[Math.floor(i / 7)]!;
        expect(fd.some((x) => Math.abs(x) > 1e-3)).toBe(true);
        eachIsa((isa) => {
          const g = rl.sparseDivergenceBackward(f32Topk(s), f32Topk(t), w, o);
          expect(maxScaledError(g, fd), isa).toBeLessThan(2e-5);
        });
      });
    }
  }

  it('capped tokens get a zero gradient; +Infinity without a cap is ERR_NON_FINITE', () => {
    const st = { ids: Int32Array.of(3, 4, 1, 2), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.5), Math.log(0.6), Math.log(0.3)), k: 2 };
    const te = { ids: Int32Array.of(3, 4, 1, 2), logprobs: Float32Array.of(-Infinity, Math.log(0.9), Math.log(0.3), Math.log(0.6)), k: 2 };
    const g = rl.sparseDivergenceBackward(st, te, Float32Array.of(1, 1), { klCap: 5 });
    expect([g[0], g[1]]).toEqual([0, 0]);
    expect(Math.abs(g[2]!)).toBeGreaterThan(0);
    expect(() => rl.sparseDivergenceBackward(st, te, Float32Array.of(1, 1))).toThrow(expect.objectContaining({ code: 'ERR_NON_FINITE' }));
  });
});

describe('list lengths around the vector widths (short lists are matched by vector compares)', () => {
  // Student k / teacher k pairs at and past 8, 16 and 32 entries (32: the longest vector-matched list).
  const SHAPES: [number, number][] = [[1, 1], [1, 6], [6, 1], [5, 5], [8, 8], [9, 7], [16, 16], [17, 16], [16, 17],
    [20, 20], [24, 9], [32, 32], [33, 32], [32, 33], [40, 40]];
  const N = 12;
  /**
   * makeCase's rows, then: row 0 the teacher lists the student's own ids (as many as fit, reversed: all
   * shared), row 1 no shared id, row 3 padding in the middle of the student's list, row 4 the teacher's first
   * entry padded, row 6 every student entry but the first padded.
   */
  function shapeCase(ks: number, kt: number) {
    const vocab = 2 * (ks + kt) + 8;
    const { s, t } = makeCase(100 + ks * 41 + kt, N, vocab, ks, kt);
    const setT = (r: number, j: number, id: number) => { t.ids[r * kt + j] = id; };
    const own = Array.from({ length: ks }, (_, i) => s.ids[i]!).filter((id) => id >= 0);
    const pool = [...own.slice(0, kt).reverse()];
    for (let id = 0; pool.length < kt; id++) if (!pool.includes(id)) pool.push(id);
    pool.forEach((id, j) => setT(0, j, id));
    if (t.logprobs.slice(0, kt).some((x) => x === -Infinity)) for (let j = 0; j < kt; j++) if (t.logprobs[j] === -Infinity) setT(0, j, -1);
    const srow = new Set(Array.from({ length: ks }, (_, i) => s.ids[ks + i]!));
    let next = 0;
    for (let j = 0; j < kt; j++) {
      if (t.ids[kt + j]! < 0) continue;
      while (srow.has(next)) next++;
      setT(1, j, next++);
    }
    const mid = 3 * ks + (ks >> 1);
    s.ids[mid] = -1; s.logprobs[mid] = -Infinity;
    t.ids[4 * kt] = -1; t.logprobs[4 * kt] = -Infinity;
    for (let i = 1; i < ks; i++) { s.ids[6 * ks + i] = -1; s.logprobs[6 * ks + i] = -Infinity; }
    return { s, t, vocab };
  }
  /** The entropy bounds from their definition (docs: sparseDivergence), in float64. */
  function refEntropy(s: RefTopk, r: number, vocab: number): [number, number] {
    let hk = 0, mass = 0, mn = Infinity, listed = 0;
    for (let i = 0; i < s.k; i++) {
      if (s.ids[r * s.k + i]! < 0) continue;
      listed++;
      const a = s.logprobs[r * s.k + i]!, p = Math.exp(a);
      mass += p;
      if (p > 0) { hk -= p * a; mn = Math.min(mn, p); }
    }
    const tau = Math.max(0, 1 - mass);
    if (tau === 0) return [hk, hk];
    const hi = hk + tau * (Math.log(vocab - listed) - Math.log(tau));
    if (mn === Infinity) return [hk, hi];  // nothing listed: no bound on the tail's entries
    const cnt = Math.floor(tau / mn), rem = Math.max(0, tau - cnt * mn);
    return [hk + cnt * (-mn * Math.log(mn)) + (rem > 0 ? -rem * Math.log(rem) : 0), hi];
  }

  for (const [ks, kt] of SHAPES) {
    it(`k = ${ks} / ${kt}: values, coverage, entropy bounds and gradients on every ISA`, () => {
      const { s, t, vocab } = shapeCase(ks, kt);
      const cells = Array.from({ length: N }, (_, r) => sharedCells(s, t, r));
      const listed0 = Array.from(s.ids.subarray(0, ks)).filter((id) => id >= 0).length;
      expect(cells[0]!.length).toBe(Math.min(listed0, kt));
      expect(cells[1]!.length).toBe(0);
      for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as [Kind, number][]) {
        for (const support of SUPPORTS) {
          const o: RefSparseOptions = { kind, beta, support };
          const want = refSparse(s, t, N, o);
          const fd = refSparseGradFd(s, t, N, o);
          eachIsa((isa) => {
            const what = `${isa} ${kind} ${support}`;
            const d = rl.sparseDivergence(f32Topk(s), f32Topk(t), { ...o, vocab });
            expect(maxScaledError(d.value, want), what).toBeLessThan(2e-6);
            const g = rl.sparseDivergenceBackward(f32Topk(s), f32Topk(t), new Float32Array(N).fill(1), o);
            expect(maxScaledError(g, fd), what).toBeLessThan(2e-5);
            for (let r = 0; r < N; r++) {
              expect(d.shared[r], `${what} row ${r}`).toBe(cells[r]!.length);
              const ms = cells[r]!.reduce((a, c) => a + Math.exp(c[0]), 0), mt = cells[r]!.reduce((a, c) => a + Math.exp(c[1]), 0);
              expect(Math.abs(d.studentSharedMass[r]! - ms), `${what} row ${r}`).toBeLessThan(1e-6);
              expect(Math.abs(d.teacherSharedMass[r]! - mt), `${what} row ${r}`).toBeLessThan(1e-6);
              const [lo, hi] = refEntropy(s, r, vocab);
              expect(Math.abs(d.entropyLower[r]! - lo), `${what} row ${r}`).toBeLessThan(2e-6 * Math.max(1, Math.abs(lo)));
              expect(Math.abs(d.entropyUpper[r]! - hi), `${what} row ${r}`).toBeLessThan(2e-6 * Math.max(1, Math.abs(hi)));
            }
          });
        }
      }
    });
  }

  it('extreme log-probs: top-k mass within 1e-7 of 1, entries near and past float32 exp underflow (-88) and float64 (-708)', () => {
    // Rows per k: 0 the student's mass within 1e-7 of 1 (a tail bucket of ~1e-7, where each p's own error
    // shows), 1 entries around -88 (float32 e^x underflows below -87.3) among ordinary ones, 2 every shared
    // student entry at -100 (p ~ 4e-44, below float32's normal range), 3 every shared entry on both sides
    // past -708 (the masses underflow: the log-sum path), 4 the teacher's mass within 1e-7 of 1.
    const ROWS = 5;
    for (const k of [16, 17, 20, 32]) {
      const s: RefTopk = { ids: new Int32Array(ROWS * k), logprobs: new Float64Array(ROWS * k), k };
      const t: RefTopk = { ids: new Int32Array(ROWS * k), logprobs: new Float64Array(ROWS * k), k };
      const near1 = (x: RefTopk, r: number) => {
        const w = Array.from({ length: k }, (_, j) => Math.exp(-0.3 * j));
        const sw = w.reduce((a, b) => a + b, 0);
        for (let j = 0; j < k; j++) x.logprobs[r * k + j] = Math.log((w[j]! / sw) * (1 - 1e-7));
      };
      const ordinary = (x: RefTopk, r: number, seed: number) => {
        for (let j = 0; j < k; j++) x.logprobs[r * k + j] = Math.log(0.9 / k) - 0.05 * ((j * 7 + seed) % 11);
      };
      for (let r = 0; r < ROWS; r++) {
        for (let j = 0; j < k; j++) {
          s.ids[r * k + j] = 1000 * r + 2 * j;  // the even ids
          t.ids[r * k + j] = 1000 * r + (j % 2 === 0 ? 2 * j : 2 * j + 1);  // half shared
        }
        ordinary(s, r, r);
        ordinary(t, r, r + 3);
      }
      near1(s, 0);
      [-87, -87.5, -88, -88.7, -89, -90, -103].forEach((a, j) => { s.logprobs[k + 2 * j] = a; t.logprobs[k + 2 * j + 1] = a; });
      for (let j = 0; j < k; j += 2) s.logprobs[2 * k + j] = -100;
      for (let j = 0; j < k; j += 2) { s.logprobs[3 * k + j] = -720 - j; t.logprobs[3 * k + j] = -712 - 3 * j; }
      near1(t, 4);
      const sf = f32Topk(s), tf = f32Topk(t), seen = asSeen(s);
      const vocab = 1000 * ROWS;
      for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as [Kind, number][]) {
        for (const support of SUPPORTS) {
          const o: RefSparseOptions = { kind, beta, support };
          const want = refSparse(seen, asSeen(t), ROWS, o);
          const grads: Float32Array[] = [];
          eachIsa((isa) => {
            const what = `k ${k} ${isa} ${kind} ${support}`;
            const d = rl.sparseDivergence(sf, tf, { ...o, vocab });
            expect(maxScaledError(d.value, want), what).toBeLessThan(2e-6);
            for (let r = 0; r < ROWS; r++) {
              const cells = sharedCells(seen, asSeen(t), r);
              expect(d.shared[r], `${what} row ${r}`).toBe(cells.length);
              let mass = 0;
              for (let j = 0; j < k; j++) mass += Math.exp(seen.logprobs[r * k + j]!);
              // the tail from float64 probabilities: within 1e-9 of 1 - sum even where it is ~1e-7
              expect(Math.abs(d.studentTail[r]! - Math.max(0, 1 - mass)), `${what} row ${r} tail`).toBeLessThan(1e-9 + 1e-7 * (1 - mass));
              const ms = cells.reduce((a, c) => a + Math.exp(c[0]), 0);
              expect(Math.abs(d.studentSharedMass[r]! - ms), `${what} row ${r} mass`).toBeLessThanOrEqual(1e-6 * ms + 1e-45);
              if (r !== 3) {  // log-probs past -708 count as p = 0 in the bounds (the reference's subnormals do not)
                const [lo, hi] = refEntropy(seen, r, vocab);
                expect(Math.abs(d.entropyLower[r]! - lo), `${what} row ${r}`).toBeLessThan(2e-6 * Math.max(1, Math.abs(lo)));
                expect(Math.abs(d.entropyUpper[r]! - hi), `${what} row ${r}`).toBeLessThan(2e-6 * Math.max(1, Math.abs(hi)));
              }
            }
            grads.push(rl.sparseDivergenceBackward(sf, tf, new Float32Array(ROWS).fill(1), o));
          });
          // every ISA's gradient agrees with the baseline's (float64 inside, float32 out)
          for (const g of grads.slice(1)) expect(maxScaledError(g, grads[0]!), `k ${k} ${kind} ${support} grad`).toBeLessThan(1e-5);
        }
      }
    }
  });

  it('the largest id, 2^31 - 1, is an id (no vocabulary, or vocab 2^31); -2 and vocab itself are not', () => {
    const top = 2 ** 31 - 1;
    const st = { ids: Int32Array.of(top, 0), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.2)), k: 2 };
    const te = { ids: Int32Array.of(0, top), logprobs: Float32Array.of(Math.log(0.3), Math.log(0.6)), k: 2 };
    const want = refSparse({ ...st, logprobs: Float64Array.from(st.logprobs) }, { ...te, logprobs: Float64Array.from(te.logprobs) }, 1,
      { kind: 'reverse_kl' });
    eachIsa((isa) => {
      for (const vocab of [undefined, 2 ** 31]) {
        const d = rl.sparseDivergence(st, te, { vocab });
        expect(d.shared[0], `${isa} ${vocab}`).toBe(2);
        expect(maxScaledError(d.value, want), `${isa} ${vocab}`).toBeLessThan(2e-6);
      }
      expect(() => rl.sparseDivergence(st, te, { vocab: top }), isa).toThrow(/student\[row 0, entry 0\]\.id/);
      expect(() => rl.sparseDivergence({ ...st, ids: Int32Array.of(-2, 0) }, te), isa).toThrow(expect.objectContaining({ code: 'ERR_TARGET_RANGE' }));
    });
  });

  it('the backward reports the first failing row: an infinite value before a duplicate, and after one', () => {
    const rows = (inf: number, dup: number) => {
      const st = { ids: new Int32Array(20), logprobs: new Float32Array(20), k: 2 };
      const te = { ids: new Int32Array(20), logprobs: new Float32Array(20), k: 2 };
      for (let r = 0; r < 10; r++) {
        st.ids.set([3, 4], 2 * r); st.logprobs.set([Math.log(0.5), Math.log(0.4)], 2 * r);
        te.ids.set([4, 3], 2 * r); te.logprobs.set([Math.log(0.6), r === inf ? -Infinity : Math.log(0.3)], 2 * r);
      }
      te.ids[2 * dup] = 3;
      return [st, te] as const;
    };
    eachIsa((isa) => {
      const [s1, t1] = rows(1, 5);
      expect(() => rl.sparseDivergenceBackward(s1, t1, new Float32Array(10).fill(1)), isa).toThrow(/row 1\]: expected a finite divergence/);
      const [s2, t2] = rows(5, 1);
      expect(() => rl.sparseDivergenceBackward(s2, t2, new Float32Array(10).fill(1)), isa).toThrow(/teacher\[row 1, entry 1\]\.id/);
      expect(() => rl.sparseDivergence(s2, t2), isa).toThrow(/teacher\[row 1, entry 1\]\.id/);
    });
  });

  it('a duplicate id anywhere in either list is found on every ISA, with its entry', () => {
    for (const [ks, kt] of SHAPES) {
      const { s, t } = shapeCase(ks, kt);
      const places = (k: number) => [...new Set([[0, k - 1], [k >> 1, k - 1], [0, Math.min(k - 1, 16)], [3, Math.min(k - 1, 20)]]
        .filter(([a, b]) => a! < b!).map((x) => x.join(',')))].map((x) => x.split(',').map(Number) as [number, number]);
      for (const [side, k] of [['student', ks], ['teacher', kt]] as const) {
        for (const [a, b] of places(k)) {
          const x = f32Topk(side === 'student' ? s : t);
          x.ids = Int32Array.from(x.ids);  // f32Topk shares the ids
          const row = 7;
          x.ids[row * k + b] = x.ids[row * k + a]!;
          if (x.ids[row * k + a]! < 0) continue;
          eachIsa((isa) => {
            const args = side === 'student' ? [x, f32Topk(t)] : [f32Topk(s), x];
            expect(() => rl.sparseDivergence(args[0]!, args[1]!), `${isa} ${side} ${a},${b}`)
              .toThrow(new RegExp(`${side}\\[row ${row}, entry ${b}\\]\\.id`));
            expect(() => rl.sparseDivergenceBackward(args[0]!, args[1]!, new Float32Array(N)), `${isa} ${side} ${a},${b}`)
              .toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
          });
        }
      }
    }
  });
});

describe('determinism and async', () => {
  const { s, t } = makeCase(51, 3000, 64, 20, 20);
  it('bit-identical for 1 and 2 threads and for the async form', async () => {
    const before = rl.backend().threads;
    try {
      rl.setNumThreads(1);
      const a = rl.sparseDivergence(f32Topk(s), f32Topk(t), { kind: 'jsd' });
      const ga = rl.sparseDivergenceBackward(f32Topk(s), f32Topk(t), new Float32Array(3000).fill(1), { kind: 'jsd' });
      rl.setNumThreads(2);
      const b = rl.sparseDivergence(f32Topk(s), f32Topk(t), { kind: 'jsd' });
      const gb = rl.sparseDivergenceBackward(f32Topk(s), f32Topk(t), new Float32Array(3000).fill(1), { kind: 'jsd' });
      const c = await rl.sparseDivergenceAsync(f32Topk(s), f32Topk(t), { kind: 'jsd' });
      const gc = await rl.sparseDivergenceBackwardAsync(f32Topk(s), f32Topk(t), new Float32Array(3000).fill(1), { kind: 'jsd' });
      expect(Buffer.from(b.value.buffer)).toEqual(Buffer.from(a.value.buffer));
      expect(Buffer.from(c.value.buffer)).toEqual(Buffer.from(a.value.buffer));
      expect(Buffer.from(c.entropyLower.buffer)).toEqual(Buffer.from(a.entropyLower.buffer));
      expect(Buffer.from(gb.buffer)).toEqual(Buffer.from(ga.buffer));
      expect(Buffer.from(gc.buffer)).toEqual(Buffer.from(ga.buffer));
    } finally {
      rl.setNumThreads(before);
    }
  });

  it('an aborted async call rejects with ERR_ABORTED', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(rl.sparseDivergenceAsync(f32Topk(s), f32Topk(t), { signal: ac.signal })).rejects.toMatchObject({ code: 'ERR_ABORTED' });
  });
});

describe('out: caller-owned results', () => {
  const { s, t } = makeCase(52, 500, 64, 12, 9);
  const bits = (r: rl.SparseDivergence) => Object.fromEntries(Object.entries(r).map(([k, x]) => [k, Buffer.from((x as Float32Array).buffer).toString('hex')]));
  it('the results land in the given arrays, bit for bit the allocated ones, sync and async; fields left out are allocated', async () => {
    const fresh = rl.sparseDivergence(f32Topk(s), f32Topk(t), { kind: 'jsd', vocab: 64 });
    const out = rl.sparseDivergence(f32Topk(t), f32Topk(s), { vocab: 64 });  // another call's arrays, other values
    const kept = { ...out };
    const r = rl.sparseDivergence(f32Topk(s), f32Topk(t), { kind: 'jsd', vocab: 64, out });
    expect(bits(r)).toEqual(bits(fresh));
    for (const k of Object.keys(kept) as (keyof rl.SparseDivergence)[]) expect(r[k], k).toBe(kept[k]);
    const value = new Float32Array(500).fill(NaN), shared = new Int32Array(500).fill(-7);
    const a = await rl.sparseDivergenceAsync(f32Topk(s), f32Topk(t), { kind: 'jsd', vocab: 64, out: { value, shared } });
    expect(a.value).toBe(value);
    expect(a.shared).toBe(shared);
    expect(bits(a)).toEqual(bits(fresh));
  });
  it('wrong lengths, types, unknown fields and memory shared with the inputs are coded errors', () => {
    const code = (out: unknown, c: string, msg: RegExp) => expect(() => rl.sparseDivergence(f32Topk(s), f32Topk(t), { out: out as never }))
      .toThrow(expect.objectContaining({ code: c, message: expect.stringMatching(msg) }));
    code({ value: new Float32Array(499) }, 'ERR_SHAPE', /out\.value\.length/);
    code({ shared: new Float32Array(500) }, 'ERR_DTYPE', /out\.shared/);
    code({ entropy: new Float32Array(500) }, 'ERR_OPTION', /unknown option 'entropy'/);
    code(5, 'ERR_OPTION', /out/);
    const st = f32Topk(s);
    expect(() => rl.sparseDivergence(st, f32Topk(t), { out: { value: st.logprobs.subarray(100, 600) } }))
      .toThrow(expect.objectContaining({ code: 'ERR_SHAPE', message: expect.stringMatching(/out\.value: expected memory of its own, got a view sharing memory with student\.logprobs/) }));
    const v = new Float32Array(500);
    expect(() => rl.sparseDivergence(f32Topk(s), f32Topk(t), { out: { value: v, entropyLower: v } }))
      .toThrow(expect.objectContaining({ code: 'ERR_SHAPE' }));
  });
});

describe('bad input', () => {
  const ok = () => ({ ids: Int32Array.of(1, 2), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.2)), k: 2 });
  const code = (f: () => unknown, c: string) => expect(f).toThrow(expect.objectContaining({ code: c }));
  it('rejects bad values with coded errors naming the entry, on every ISA path', () => {
    eachIsa((isa) => {
      const nan = ok(); nan.logprobs[1] = NaN;
      code(() => rl.sparseDivergence(nan, ok()), 'ERR_NON_FINITE');
      const inf = ok(); inf.logprobs[0] = Infinity;
      code(() => rl.sparseDivergence(ok(), inf), 'ERR_NON_FINITE');
      const big = ok(); big.ids[1] = 99;
      code(() => rl.sparseDivergence(big, ok(), { vocab: 50 }), 'ERR_TARGET_RANGE');
      const neg = ok(); neg.ids[0] = -2;
      code(() => rl.sparseDivergence(neg, ok()), 'ERR_TARGET_RANGE');
      const dup = ok(); dup.ids[1] = 1;
      expect(() => rl.sparseDivergence(dup, ok())).toThrow(/student\[row 0, entry 1\]\.id/);
      code(() => rl.sparseDivergence(dup, ok()), 'ERR_OPTION');
      const pad = ok(); pad.ids[1] = -1;
      code(() => rl.sparseDivergence(pad, ok()), 'ERR_OPTION');
      const mass = ok(); mass.logprobs[1] = Math.log(0.6);
      code(() => rl.sparseDivergence(ok(), mass), 'ERR_OPTION');
      // a long list (sorted checks) with a duplicate
      const long = { ids: Int32Array.from({ length: 100 }, (_, i) => i), logprobs: new Float32Array(100).fill(Math.log(0.005)), k: 100 };
      long.ids[77] = 3;
      code(() => rl.sparseDivergence(long, long), 'ERR_OPTION');
      // lists of 20: an entry inside the vector steps, at a step's edge and in the last partial step
      for (const at of [0, 7, 8, 13, 19]) {
        const list = () => ({ ids: Int32Array.from({ length: 20 }, (_, i) => 5 * i), logprobs: new Float32Array(20).fill(Math.log(0.04)), k: 20 });
        const entry = new RegExp(`student\\[row 0, entry ${at}\\]`);
        const bad: [string, (l: ReturnType<typeof list>) => void, string][] = [
          ['NaN', (l) => { l.logprobs[at] = NaN; }, 'ERR_NON_FINITE'],
          ['+Infinity', (l) => { l.logprobs[at] = Infinity; }, 'ERR_NON_FINITE'],
          ['id past the vocabulary', (l) => { l.ids[at] = 1000; }, 'ERR_TARGET_RANGE'],
          ['id -2', (l) => { l.ids[at] = -2; }, 'ERR_TARGET_RANGE'],
          ['padding with a log-prob', (l) => { l.ids[at] = -1; }, 'ERR_OPTION'],
        ];
        for (const [what, spoil, c] of bad) {
          const l = list();
          spoil(l);
          expect(() => rl.sparseDivergence(l, list(), { vocab: 1000 }), `${isa} ${what} at ${at}`)
            .toThrow(expect.objectContaining({ code: c, message: expect.stringMatching(entry) }));
        }
        // padding (-1 with -Infinity) is fine anywhere
        const pad = list();
        pad.ids[at] = -1;
        pad.logprobs[at] = -Infinity;
        expect(rl.sparseDivergence(pad, list(), { vocab: 1000 }).value[0], `${isa} padding at ${at}`).toBeGreaterThanOrEqual(0);
      }
    });
  });
  it('rejects bad shapes, types and options', () => {
    code(() => rl.sparseDivergence({ ...ok(), k: 3 }, ok()), 'ERR_SHAPE');
    code(() => rl.sparseDivergence({ ...ok(), logprobs: new Float32Array(3) }, ok()), 'ERR_SHAPE');
    code(() => rl.sparseDivergence({ ...ok(), ids: new Float32Array(2) as unknown as Int32Array }, ok()), 'ERR_DTYPE');
    code(() => rl.sparseDivergence({ ...ok(), logprobs: new Float64Array(2) as unknown as Float32Array }, ok()), 'ERR_DTYPE');
    code(() => rl.sparseDivergence(ok(), { ids: new Int32Array(4), logprobs: new Float32Array(4), k: 1 }), 'ERR_SHAPE');
    code(() => rl.sparseDivergence(ok(), ok(), { kind: 'kl' as never }), 'ERR_OPTION');
    code(() => rl.sparseDivergence(ok(), ok(), { support: 'union' as never }), 'ERR_OPTION');
    code(() => rl.sparseDivergence(ok(), ok(), { tailClamp: 1 }), 'ERR_OPTION');
    code(() => rl.sparseDivergence(ok(), ok(), { vocab: 1.5 }), 'ERR_OPTION');
    code(() => rl.sparseDivergence(ok(), ok(), { klCap: 0 }), 'ERR_OPTION');
    code(() => rl.sparseDivergence(ok(), ok(), { typo: 1 } as never), 'ERR_OPTION');
    code(() => rl.sparseDivergenceBackward(ok(), ok(), Float32Array.of(NaN)), 'ERR_NON_FINITE');
    code(() => rl.sparseDivergenceBackward(ok(), ok(), new Float32Array(2)), 'ERR_SHAPE');
  });
  it('the native layer re-checks lengths and options on its own', () => {
    const p = { student: ok(), teacher: ok(), n: 1, kind: 0 as const, beta: 0.5, support: 0 as const, tailClamp: 1e-7, vocab: 0, klCap: Infinity };
    code(() => native.sparseDivergence({ ...p, n: 2 }), 'ERR_SHAPE');
    code(() => native.sparseDivergence({ ...p, teacher: { ...ok(), k: 5 } }), 'ERR_SHAPE');
    code(() => native.sparseDivergence({ ...p, beta: 2 }), 'ERR_OPTION');
    code(() => native.sparseDivergenceBackward({ ...p, grad: new Float32Array(3) }), 'ERR_SHAPE');
    const te = { ids: Int32Array.of(2, 1), logprobs: Float32Array.of(Math.log(0.5), Math.log(0.2)), k: 2 };
    expect(native.sparseDivergence({ ...p, teacher: te }).value[0]).toBeGreaterThan(0);
  });
});

describe('sampledTokenKl', () => {
  it('k1 / k2 / k3 as klPenalty without clamps', () => {
    const s = Float32Array.of(-0.1, -2, -5, -0.7), t = Float32Array.of(-0.3, -1, -30, -0.7);
    const e = rl.sampledTokenKl({ studentLogprob: s, teacherLogprob: t });
    for (const [name, got] of [['k1', e.k1], ['k2', e.k2], ['k3', e.k3]] as const) {
      const want = rl.klPenalty({ logprob: Float64Array.from(s), refLogprob: Float64Array.from(t), estimator: name, compat: 'trl' }).kl;
      expectClose(got, want, { rtol: 1e-12, atol: 1e-15, what: name });
    }
    const d = s[0]! - t[0]!;
    expect(e.k3[0]).toBeCloseTo(Math.exp(-d) - 1 + d, 12);
    expect(e.k3[3]).toBe(0);
    expect(() => rl.sampledTokenKl({ studentLogprob: Float32Array.of(-Infinity), teacherLogprob: Float32Array.of(0) }))
      .toThrow(expect.objectContaining({ code: 'ERR_NON_FINITE' }));
    expect(() => rl.sampledTokenKl({ studentLogprob: Float32Array.of(0), teacherLogprob: new Float32Array(2) }))
      .toThrow(expect.objectContaining({ code: 'ERR_SHAPE' }));
  });
});
