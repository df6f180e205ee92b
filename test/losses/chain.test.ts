// lossGradToLogits / entropyBonus: the whole chain (policy loss + entropy bonus + self-distillation)
// against central finite differences through the logits, with a float64 softmax written here.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { expectGearError, rng } from './helpers.js';

/** float64 log-softmax stats of one row (temperature applied). */
function rowStats(z: Float64Array, o: number, V: number, T: number, target: number) {
  let mx = -Infinity;
  for (let v = 0; v < V; v++) mx = Math.max(mx, z[o + v]! / T);
  let s = 0;
  for (let v = 0; v < V; v++) s += Math.exp(z[o + v]! / T - mx);
  const lse = mx + Math.log(s);
  let H = 0;
  const logp: number[] = [];
  for (let v = 0; v < V; v++) {
    const lp = z[o + v]! / T - lse;
    logp.push(lp);
    H -= Math.exp(lp) * lp;
  }
  return { logprob: logp[target]!, entropy: H, logp };
}

describe('lossGradToLogits', () => {
  const R = 7, V = 11, T = 0.7;
  const r = rng(5);
  const off = new Int32Array([0, 3, 3, 7]);
  const mask = new Uint8Array([1, 1, 0, 1, 1, 1, 0]);
  const z = Float64Array.from({ length: R * V }, () => r() * 4 - 2);
  const zt = Float64Array.from({ length: R * V }, () => r() * 4 - 2); // teacher
  const targets = Int32Array.from({ length: R }, () => Math.floor(r() * V));
  const old = Float64Array.from({ length: R }, (_, t) => rowStats(z, t * V, V, T, targets[t]!).logprob + (r() - 0.5) * 0.3);
  const adv = new Float64Array([1.2, 1.2, 1.2, -0.7, -0.7, -0.7, -0.7]);
  const entCoef = 0.03, distCoef = 0.2;

  // total loss in float64 as a function of the student logits
  function total(zz: Float64Array): number {
    const lp = new Float64Array(R), H = new Float64Array(R), D = new Float64Array(R);
    for (let t = 0; t < R; t++) {
      const s = rowStats(zz, t * V, V, T, targets[t]!);
      const q = rowStats(zt, t * V, V, T, 0);
      lp[t] = s.logprob; H[t] = s.entropy;
      let d = 0; // reverse KL(p_s || p_t)
      for (let v = 0; v < V; v++) d += Math.exp(s.logp[v]!) * (s.logp[v]! - q.logp[v]!);
      D[t] = d;
    }
    const pl = rl.policyLoss({ logprob: lp, oldLogprob: old, advantages: adv, offsets: off, mask, agg: 'seq-mean-token-mean' }).loss;
    const eb = rl.entropyBonus(H, off, mask, entCoef, 'token-mean').value;
    const dist = distCoef * rl.aggregate(D, off, mask, 'token-mean').value;
    return pl + eb + dist;
  }

  it('equals central finite differences through the logits (policy + entropy bonus + distillation)', () => {
    const logits = { data: Float32Array.from(z), rows: R, vocab: V };
    const stats = rl.tokenStats(logits, targets, { temperature: T });
    const pl = rl.policyLoss({ logprob: Float64Array.from(stats.logprob), oldLogprob: old, advantages: adv, offsets: off, mask, agg: 'seq-mean-token-mean' });
    const g = rl.lossGradToLogits({
      logits, targets, gradLogprob: pl.grad, temperature: T, stats, entropyCoef: entCoef, offsets: off, mask,
      distill: { teacher: { data: Float32Array.from(zt), rows: R, vocab: V }, coef: distCoef },
    });
    expect(g.length).toBe(R * V);
    const h = 1e-5;
    let maxErr = 0, maxAbs = 0;
    for (let i = 0; i < R * V; i++) {
      const zp = Float64Array.from(z); zp[i] = zp[i]! + h;
      const zm = Float64Array.from(z); zm[i] = zm[i]! - h;
      const fd = (total(zp) - total(zm)) / (2 * h);
      maxErr = Math.max(maxErr, Math.abs(g[i]! - fd));
      maxAbs = Math.max(maxAbs, Math.abs(fd));
    }
    expect(maxAbs).toBeGreaterThan(1e-3);
    expect(maxErr).toBeLessThan(2e-5 * Math.max(1, maxAbs));
  });

  it('entropyBonus is −coef·agg(H) with its gradient', () => {
    const H = new Float32Array([0.5, 1, 2, 0.1, 0.3, 0.2, 9]);
    const e = rl.entropyBonus(H, off, mask, 0.1, 'seq-mean-token-mean');
    const want = -0.1 * ((0.5 + 1) / 2 + (0.1 + 0.3 + 0.2) / 3) / 2;
    expect(Math.abs(e.value - want)).toBeLessThan(1e-7);
    expect(e.gradEntropy[6]).toBe(0);
    expect(e.gradEntropy[0]).toBeCloseTo(-0.1 / 2 / 2, 6);
  });

  it('rejects bad input', () => {
    const logits = { data: Float32Array.from(z), rows: R, vocab: V };
    expectGearError(() => rl.lossGradToLogits({ logits, targets, gradLogprob: new Float32Array(R - 1) }), 'ERR_SHAPE');
    expectGearError(() => rl.lossGradToLogits({ logits, targets, gradLogprob: new Float32Array(R), entropyCoef: 0.1 }), 'ERR_OPTION');
    expectGearError(() => rl.lossGradToLogits({ logits, targets, gradLogprob: new Float32Array(R), foo: 1 } as any), 'ERR_OPTION');
    expectGearError(() => rl.entropyBonus(new Float32Array(3), new Int32Array([0, 2]), undefined, 0.1), 'ERR_OFFSETS');
  });
});
