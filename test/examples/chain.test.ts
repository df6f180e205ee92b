// Whole-chain gradient check of the demo's training step: the library's losses (policyLoss, the
// entropy term through tokenStats, the self-distillation term through divergence) pushed through
// tokenStatsBackward / divergenceBackward and the hand-written policy must equal central finite
// differences of the same scalar loss with respect to every parameter of a tiny model.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { Policy, type RowSpec } from '../../examples/model/policy.js';
import { Rng } from '../../examples/env/rng.js';

const cfg = { vocab: 6, positions: 10, hidden1: 5, hidden2: 4 };

function setup(seed: number) {
  const rng = new Rng(seed);
  const pol = new Policy(cfg, undefined, seed);
  // Larger weights than the default initialisation so every path carries gradient.
  for (const p of pol.params) for (let i = 0; i < p.length; i++) p[i]! += 0.3 * rng.normal();
  const seqs: number[][] = [];
  const from: number[] = [], to: number[] = [];
  for (let s = 0; s < 4; s++) {
    const len = 5 + rng.int(5);
    seqs.push(Array.from({ length: len }, () => rng.int(cfg.vocab)));
    from.push(2);
    to.push(len);
  }
  const spec: RowSpec = { seqs, from, to };
  const offsets = Int32Array.from([0, ...to.map((t, i) => t - from[i]!)].map((_, i, a) => a.slice(0, i + 1).reduce((x, y) => x + y, 0)));
  const N = offsets[offsets.length - 1]!;
  const targets = Int32Array.from(seqs.flatMap((s, i) => s.slice(from[i], to[i])));
  const mask = Uint8Array.from({ length: N }, (_, i) => (i % 4 === 3 ? 0 : 1)); // "observation" tokens
  const advantages = Float32Array.from({ length: N }, (_, i) => (mask[i] ? rng.normal() : 0));
  return { rng, pol, spec, offsets, N, targets, mask, advantages };
}

const logitsOf = (fwd: { logits: Float32Array; rows: number }) => ({ data: fwd.logits, rows: fwd.rows, vocab: cfg.vocab });

/** Central differences of `loss` for every parameter; returns the largest error relative to the largest gradient. */
function compare(pol: Policy, loss: () => number): { maxErr: number; maxG: number; checked: number } {
  let maxErr = 0, maxG = 0, checked = 0;
  pol.params.forEach((p, ti) => {
    for (let k = 0; k < p.length; k++) {
      const g = pol.grads[ti]![k]!;
      const x = p[k]!;
      const h = 5e-3;
      p[k] = x + h; const up = p[k]! - x; const lp = loss();
      p[k] = x - h; const dn = x - p[k]!; const lm = loss();
      p[k] = x;
      const fd = (lp - lm) / (up + dn);
      maxErr = Math.max(maxErr, Math.abs(fd - g));
      maxG = Math.max(maxG, Math.abs(g));
      checked++;
    }
  });
  return { maxErr, maxG, checked };
}

describe('whole-chain gradient: library loss -> tokenStatsBackward/divergenceBackward -> policy', () => {
  it('PPO clipped loss (token-mean) with an entropy bonus', () => {
    const { pol, spec, offsets, targets, mask, advantages, rng } = setup(3);
    const fwd0 = pol.forward(spec);
    const stats0 = rl.tokenStats(logitsOf(fwd0), targets);
    // Old log-probs a little away from the current ones: ratios spread around 1, some clipped.
    const oldLogprob = Float32Array.from(stats0.logprob, (x) => x + 0.3 * rng.normal());
    const entCoef = 0.05;
    const count = mask.reduce((a, b) => a + b, 0);
    const lossOf = (lp: Float32Array, ent: Float32Array) => {
      const pl = rl.policyLoss({ logprob: lp, oldLogprob, advantages, offsets, mask, kind: 'ppo', clipLow: 0.2, clipHigh: 0.2, agg: 'token-mean' });
      let e = 0;
      for (let i = 0; i < ent.length; i++) if (mask[i]) e += ent[i]!;
      return { value: pl.loss - (entCoef * e) / count, pl };
    };
    const loss = () => {
      const f = pol.forward(spec);
      const s = rl.tokenStats(logitsOf(f), targets);
      return lossOf(s.logprob, s.entropy).value;
    };
    const { pl } = lossOf(stats0.logprob, stats0.entropy);
    expect(pl.metrics.pg_clipfrac).toBeGreaterThan(0); // the clipped branch is exercised
    expect(pl.metrics.pg_clipfrac).toBeLessThan(1);
    const gEnt = Float32Array.from(mask, (m) => (m ? -entCoef / count : 0));
    const dlogits = rl.tokenStatsBackward(logitsOf(fwd0), targets, { logprob: pl.grad as Float32Array, entropy: gEnt }, { stats: stats0 });
    pol.zeroGrad();
    pol.backward(fwd0, dlogits);
    const r = compare(pol, loss);
    expect(r.checked).toBe(pol.size);
    expect(r.maxG).toBeGreaterThan(1e-2);
    expect(r.maxErr).toBeLessThan(2e-3 * r.maxG);
  });

  it('Dr.GRPO aggregation (seq-mean-token-sum-norm) through the same chain', () => {
    const { pol, spec, offsets, targets, mask, advantages } = setup(8);
    const fwd0 = pol.forward(spec);
    const stats0 = rl.tokenStats(logitsOf(fwd0), targets);
    const oldLogprob = stats0.logprob.slice();
    const args = (lp: Float32Array) => ({ logprob: lp, oldLogprob, advantages, offsets, mask, kind: 'ppo' as const, agg: 'seq-mean-token-sum-norm' as const, lossScaleFactor: 12 });
    const loss = () => rl.policyLoss(args(rl.tokenStats(logitsOf(pol.forward(spec)), targets).logprob)).loss;
    const pl = rl.policyLoss(args(stats0.logprob));
    const dlogits = rl.tokenStatsBackward(logitsOf(fwd0), targets, { logprob: pl.grad as Float32Array }, { stats: stats0 });
    pol.zeroGrad();
    pol.backward(fwd0, dlogits);
    const r = compare(pol, loss);
    expect(r.maxG).toBeGreaterThan(1e-2);
    expect(r.maxErr).toBeLessThan(2e-3 * r.maxG);
  });

  it('self-distillation term: reverse KL to a fixed teacher through divergenceBackward', () => {
    const { pol, spec, targets, mask } = setup(5);
    // Teacher: the same weights with a different first token in every context (a "hint"), frozen.
    const teacherSpec: RowSpec = { ...spec, seqs: spec.seqs.map((s) => [(s[0]! + 1) % cfg.vocab, ...Array.from(s).slice(1)]) };
    const teacher = logitsOf(pol.forward(teacherSpec));
    const teacherData = { ...teacher, data: teacher.data.slice() };
    const count = mask.reduce((a, b) => a + b, 0);
    const w = Float32Array.from(mask, (m) => (m ? 1 / count : 0));
    const loss = () => {
      const d = rl.divergence(logitsOf(pol.forward(spec)), teacherData, { kind: 'reverse_kl', targets });
      let s = 0;
      for (let i = 0; i < d.value.length; i++) s += w[i]! * d.value[i]!;
      return s;
    };
    const fwd0 = pol.forward(spec);
    const d0 = rl.divergence(logitsOf(fwd0), teacherData, { kind: 'reverse_kl' });
    expect(Math.max(...d0.value)).toBeGreaterThan(1e-3);
    const dlogits = rl.divergenceBackward(logitsOf(fwd0), teacherData, w, { kind: 'reverse_kl', stats: d0 });
    pol.zeroGrad();
    pol.backward(fwd0, dlogits);
    const r = compare(pol, loss);
    expect(r.maxG).toBeGreaterThan(1e-3);
    expect(r.maxErr).toBeLessThan(2e-3 * r.maxG);
  });
});
