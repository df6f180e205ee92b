// The credit measurement: its figures on hand-built inputs with hand-computed values (label shares,
// anchor precision and recall, the gradient weights and the logit-space cosine against an explicit
// float64 construction), and its controls on a real batch: each changes what it should and nothing else.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { AnswerChain } from '../../examples/env/answer_chain.js';
import { Rng } from '../../examples/env/rng.js';
import type { EnvTask, Environment } from '../../examples/env/types.js';
import { agentCosine, anchorMetrics, creditAdvantages, gradientWeights, labelShares, measureCredit } from '../../examples/trainer/measure.js';
import { STRONG_FAMILY } from '../../examples/trainer/methods.js';
import { LABEL, type KnownCreditEnv } from '../../examples/trainer/oracle.js';
import { collect, pack } from '../../examples/trainer/rollout.js';
import { warmStart } from '../../examples/trainer/train.js';

const { filler: F, decision: D, forced: C, departure: X, doomed: Z, observation: O } = LABEL;

describe('credit figures by hand', () => {
  it('label shares of |A|·w over agent tokens', () => {
    const a = [1, -2, 0.5, 3, -1, 7];
    const w = [0.5, 1, 1, 0.1, 1, 1];
    const labels = Uint8Array.of(F, X, D, C, Z, O);
    // |a|·w = 0.5, 2, 0.5, 0.3, 1 (the observation's 7 does not count): total 4.3.
    const s = labelShares(a, w, labels);
    expect(s.filler).toBeCloseTo(0.5 / 4.3, 12);
    expect(s.departure).toBeCloseTo(2 / 4.3, 12);
    expect(s.decision).toBeCloseTo(0.5 / 4.3, 12);
    expect(s.forced).toBeCloseTo(0.3 / 4.3, 12);
    expect(s.doomed).toBeCloseTo(1 / 4.3, 12);
    expect(Object.values(labelShares([0, 0], [1, 1], Uint8Array.of(F, D))).every(Number.isNaN)).toBe(true);
  });

  it('anchor precision, recall and segment coverage', () => {
    // Two rows of 6 tokens. Row 0 departs at 2 (unit 2..3), row 1 departs at 7 (unit 7..8).
    const labels = Uint8Array.of(F, F, X, Z, Z, Z, /**/ D, X, Z, Z, Z, Z);
    const inUnit = Uint8Array.of(0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0);
    const unitOf = Int32Array.of(-1, -1, 0, 0, -1, -1, -1, 1, 1, -1, -1, -1);
    // Anchors at 3 (in unit 0), 5 (a doomed token outside the unit) and 6 (on track); segments: 3..4, 5, 6.
    const segmentId = Int32Array.of(-1, -1, -1, 0, 0, 1, 2, -1, -1, -1, -1, -1);
    const m = anchorMetrics([3, 5, 6], segmentId, labels, inUnit, unitOf, 2, 2);
    expect(m.precision).toBeCloseTo(1 / 3, 12);
    expect(m.recall).toBe(0.5);
    // Doomed tokens: 3, 4, 5, 8, 9, 10, 11 (7); in segments: 3, 4, 5.
    expect(m.doomedInSegments).toBeCloseTo(3 / 7, 12);
    // On-track tokens (not departure, not doomed): 0, 1, 6; in segments: 6.
    expect(m.onTrackInSegments).toBeCloseTo(1 / 3, 12);
    expect(m.anchorsPerRow).toBe(1.5);
    expect(m.segmentLength).toBeCloseTo(4 / 3, 12);
    const none = anchorMetrics([], new Int32Array(12).fill(-1), labels, inUnit, unitOf, 2, 2);
    expect([none.precision, none.recall, none.doomedInSegments]).toEqual([NaN, 0, 0]);
  });

  it('gradient weights and the logit-space cosine equal an explicit float64 construction', () => {
    const rng = new Rng(5);
    const rows = 9, V = 7;
    const data = Float32Array.from({ length: rows * V }, () => 3 * rng.normal());
    const targets = Int32Array.from({ length: rows }, () => rng.int(V));
    const { p, g } = gradientWeights({ data, rows, vocab: V }, targets);
    const a = Array.from({ length: rows }, () => rng.normal()), b = Array.from({ length: rows }, () => rng.normal());
    const labels = Uint8Array.from({ length: rows }, (_, i) => (i === 4 ? O : D));
    // Explicit: per agent row the gradient of the logits is A_t (e_y - softmax); concatenate and take the cosine.
    const ga: number[] = [], gb: number[] = [];
    for (let r = 0; r < rows; r++) {
      const z = Array.from(data.subarray(r * V, r * V + V));
      const m = Math.max(...z);
      const e = z.map((x) => Math.exp(x - m));
      const s = e.reduce((x, y) => x + y, 0);
      const q = e.map((x) => x / s);
      expect(p[r]).toBeCloseTo(q[targets[r]!]!, 12);
      expect(g[r]).toBeCloseTo(q.reduce((acc, qj, j) => acc + ((j === targets[r] ? 1 : 0) - qj) ** 2, 0), 12);
      if (labels[r] === O) continue;
      for (let j = 0; j < V; j++) {
        const d = (j === targets[r] ? 1 : 0) - q[j]!;
        ga.push(a[r]! * d);
        gb.push(b[r]! * d);
      }
    }
    const dot = ga.reduce((s, x, i) => s + x * gb[i]!, 0);
    const cos = dot / Math.sqrt(ga.reduce((s, x) => s + x * x, 0) * gb.reduce((s, x) => s + x * x, 0));
    expect(agentCosine(a, b, g, labels)).toBeCloseTo(cos, 12);
    // A token sampled with p = 1 carries no gradient: changing its advantage does not move the cosine.
    const sure = Float32Array.from(data);
    sure[0 * V + targets[0]!] = 80;
    const gs = gradientWeights({ data: sure, rows, vocab: V }, targets).g;
    expect(gs[0]).toBeLessThan(1e-20);
    const a2 = a.slice();
    a2[0] = 1000;
    expect(agentCosine(a2, b, gs, labels)).toBeCloseTo(agentCosine(a, b, gs, labels), 12);
  });
});

describe('controls on a real batch: each changes what it should and nothing else', () => {
  // A shorter chain, so a short warm-start already succeeds about a third of the time.
  const env = new AnswerChain({ items: 3, fillers: 2, forced: 2, digits: 4, words: 6 });
  const policy = warmStart(env as unknown as Environment, { steps: 300, batch: 32, eps: 0.35, lr: 0.03, seed: 1 }).policy;
  const rng = new Rng(2);
  const tasks: EnvTask[] = Array.from({ length: 6 }, (_, i) => env.makeTask(100 + i));
  const b = pack(env as unknown as Environment, collect(env as unknown as Environment, policy, tasks, 8, rng));
  const f = policy.forward(b.studentRows);
  const student = { data: f.logits, rows: f.rows, vocab: policy.cfg.vocab };
  const c = creditAdvantages(env as unknown as KnownCreditEnv, policy, b, student, 17);
  const conv = b.conversation;
  const rows = conv.rows;
  const R = c.results;
  const gear = R['gear-answer'] as rl.GearResult;
  const segsPerRow = (segmentId: Int32Array, anchors: ArrayLike<number>) => {
    const n = new Array(rows).fill(0);
    for (const a of Array.from(anchors)) for (let r = 0; r < rows; r++) if (a >= conv.offsets[r]! && a < conv.offsets[r + 1]!) n[r]++;
    void segmentId;
    return n;
  };

  it('the batch has departures, anchors and both outcomes', () => {
    expect(b.known!.departures.start.length).toBeGreaterThan(10);
    expect(b.known!.departures.start.length).toBeLessThan(rows - 5);
    expect(gear.anchors.length).toBeGreaterThan(5);
    expect(Array.from(c.row).filter((a) => a !== 0).length).toBeGreaterThan(rows / 2);
  });

  it('GRPO and every mean-one method keep each row\'s total advantage (A·|V|) and its sign', () => {
    for (const k of ['gear-answer', 'gear-solution', 'gear-irrelevant', 'shuffled', 'random-anchors', 'fixed-length', 'token-only', 'oracle'] as const) {
      const a = R[k].advantages;
      for (let r = 0; r < rows; r++) {
        let s = 0, n = 0;
        for (let t = conv.offsets[r]!; t < conv.offsets[r + 1]!; t++) {
          s += a[t]!; n++;
          if (c.row[r] !== 0) expect(Math.sign(a[t]!)).toBe(Math.sign(c.row[r]!));
        }
        expect(s, k).toBeCloseTo(c.row[r]! * n, 3);
      }
    }
  });

  it('shuffled: the same divergence values per row at other places, hence the same number of spikes', () => {
    const sh = R.shuffled as rl.GearResult;
    const d = gear.signals.divergence;
    for (let r = 0; r < rows; r++) {
      const lo = conv.offsets[r]!, hi = conv.offsets[r + 1]!;
      expect(Array.from(c.shuffledDivergence.subarray(lo, hi)).sort()).toEqual(Array.from(d.subarray(lo, hi)).sort());
    }
    expect(c.shuffledDivergence).not.toEqual(d);
    expect(sh.diagnostics.peaks).toBe(gear.diagnostics.peaks);
    expect(sh.diagnostics.thresholds).toEqual(gear.diagnostics.thresholds);
  });

  it('random_anchors: as many anchors per row as GEAR finds, at other places', () => {
    const ra = R['random-anchors'] as rl.GearResult;
    expect(segsPerRow(ra.segmentId, ra.anchors)).toEqual(segsPerRow(gear.segmentId, gear.anchors));
    expect(Array.from(ra.anchors)).not.toEqual(Array.from(gear.anchors));
  });

  it('fixed_length: GEAR\'s anchors, one segment length for all', () => {
    const fl = R['fixed-length'] as rl.GearResult;
    expect(Array.from(fl.anchors)).toEqual(Array.from(gear.anchors));
    const L = fl.diagnostics.thresholds.fixedSegmentLength;
    expect(L).toBeGreaterThan(1);
    const len = new Array(fl.anchors.length).fill(0);
    for (const s of fl.segmentId) if (s >= 0) len[s]++;
    len.forEach((l, s) => {
      // Shorter only where the next anchor or the row end cuts it.
      const a = fl.anchors[s]!;
      const end = Math.min(conv.offsets.find((o) => o > a)!, s + 1 < fl.anchors.length ? fl.anchors[s + 1]! : Infinity);
      expect(l).toBe(Math.min(L, end - a));
    });
  });

  it('token_only: no segments, and each weight is the token\'s own divergence weight', () => {
    const to = R['token-only'] as rl.GearResult;
    expect(to.anchors.length).toBe(0);
    expect(to.segmentId.every((s) => s === -1)).toBe(true);
    const dRef = to.diagnostics.thresholds.dRef;
    for (let r = 0; r < rows; r++) {
      const lo = conv.offsets[r]!, hi = conv.offsets[r + 1]!;
      const raw = Array.from({ length: hi - lo }, (_, i) => 1 + Math.min(gear.signals.divergence[lo + i]! / dRef, 1));
      const mean = raw.reduce((x, y) => x + y, 0) / raw.length;
      raw.forEach((w, i) => expect(to.weights[lo + i]).toBeCloseTo(raw.every((x) => x === raw[0]) ? 1 : w / mean, 5));
    }
  });

  it('oracle weights: anchors exactly at the departures, segments their units, GRPO on rows without one', () => {
    const or = R.oracle;
    const dep = b.known!.departures;
    expect(Array.from(or.anchors!)).toEqual(Array.from(dep.start));
    for (let s = 0; s < dep.start.length; s++) {
      for (let t = dep.start[s]!; t < dep.start[s]! + dep.length[s]!; t++) expect(or.segmentId![t]).toBe(s);
    }
    const grpo = R.grpo.advantages;
    for (let r = 0; r < rows; r++) {
      if (b.known!.departureOf[r]! >= 0) continue;
      for (let t = conv.offsets[r]!; t < conv.offsets[r + 1]!; t++) expect(or.advantages[t]).toBe(grpo[t]);
    }
    // The strong family: raw weights, 1 + 3 on the departure units and exactly 1 elsewhere.
    const st = R['oracle-strong'];
    for (let t = 0; t < conv.tokens; t++) expect(st.weights![t]).toBe(or.segmentId![t]! >= 0 ? 1 + STRONG_FAMILY.alpha : 1);
  });

  it('the strong GEAR family keeps GEAR\'s anchors and segments and changes only the weights', () => {
    const gs = R['gear-strong'] as rl.GearResult, gss = R['gear-strong-shuffled'] as rl.GearResult, sh = R.shuffled as rl.GearResult;
    expect(Array.from(gs.segmentId)).toEqual(Array.from(gear.segmentId));
    expect(Array.from(gss.segmentId)).toEqual(Array.from(sh.segmentId));
    expect(gs.diagnostics.weightMin).toBeGreaterThanOrEqual(1);
    expect(gs.diagnostics.weightMax).toBeLessThanOrEqual(1 + STRONG_FAMILY.alpha);
    expect(Array.from(gs.weights)).not.toEqual(Array.from(gear.weights));
  });

  it('the log-ratio methods: anchors where the teacher disbelieves the sampled token, their own shuffled control, the strong family', () => {
    const lr = R['gear-lr-answer'] as rl.GearResult, lrs = R['gear-lr-shuffled'] as rl.GearResult, lrStrong = R['gear-lr-strong'] as rl.GearResult;
    const sig = c.gear.answer!.signals;
    const s = Float32Array.from(sig.logratio, (x) => Math.max(0, -x));
    // the same as the divergence path fed s
    const viaD = rl.gearAdvantages({ advantages: c.row, offsets: conv.offsets, mask: conv.mask, divergence: s, entropy: sig.entropy });
    expect(Array.from(lr.advantages)).toEqual(Array.from(viaD.advantages));
    expect(lr.anchors.length).toBeGreaterThan(0);
    for (const a of Array.from(lr.anchors)) expect(s[a]!).toBeGreaterThanOrEqual(0.25); // peakMinKl reads s
    // the shuffle permutes the log-ratio within rows: as many spikes, other places
    expect(lrs.diagnostics.peaks).toBe(lr.diagnostics.peaks);
    expect(Array.from(lrs.anchors)).not.toEqual(Array.from(lr.anchors));
    expect(Array.from(lrStrong.segmentId)).toEqual(Array.from(lr.segmentId));
    expect(lrStrong.diagnostics.weightMin).toBeGreaterThanOrEqual(1);
    // each teacher view's own log-ratio
    const irr = R['gear-lr-irrelevant'] as rl.GearResult;
    expect(Array.from(irr.advantages)).toEqual(Array.from(rl.gearAdvantages({ advantages: c.row, offsets: conv.offsets, mask: conv.mask,
      entropy: sig.entropy, logratio: c.gear.irrelevant!.signals.logratio, options: { anchorSignal: 'logratio' } }).advantages));
  });

  it('the teachers differ only in their prompt: the student side (entropy) is the same for every view', () => {
    expect(c.gear.solution!.signals.entropy).toEqual(c.gear.answer!.signals.entropy);
    expect(c.gear.irrelevant!.signals.divergence).not.toEqual(c.gear.answer!.signals.divergence);
  });

  it('a whole measurement is deterministic in its seed', () => {
    const cfg = { batches: 1, tasks: 3, groupSize: 4, rollouts: 2, seed: 3, sweep: { peakZ: [2], entropyQuantile: [0.8] }, bootstrap: 10 };
    const m1 = measureCredit(env as unknown as KnownCreditEnv, policy.params, cfg);
    expect(measureCredit(env as unknown as KnownCreditEnv, policy.params, cfg)).toEqual(m1);
    expect(Object.keys(m1.batches[0]!.methods)).toHaveLength(19); // 13, and the 6 log-ratio methods
    expect(Object.keys(m1.batches[0]!.sweepLogratio)).toEqual(Object.keys(m1.batches[0]!.sweep));
  });
});
