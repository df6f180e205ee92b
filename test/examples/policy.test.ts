import { describe, expect, it } from 'vitest';
import { Policy, type RowSpec } from '../../examples/model/policy.js';
import { Rng } from '../../examples/env/rng.js';

const cfg = { vocab: 7, positions: 9, hidden1: 5, hidden2: 4 };

function randomSpec(rng: Rng): RowSpec {
  const seqs: number[][] = [], from: number[] = [], to: number[] = [];
  for (let s = 0; s < 3; s++) {
    const len = 3 + rng.int(6);
    seqs.push(Array.from({ length: len }, () => rng.int(cfg.vocab)));
    from.push(1 + rng.int(2));
    to.push(len - rng.int(2));
  }
  return { seqs, from, to };
}

/** Float64 reference forward written out directly from the equations (independent of the class). */
function refLogits(p: Float32Array[], seq: number[], t: number): number[] {
  const { vocab: V, hidden1: H1, hidden2: H2 } = cfg;
  const [E, b1, W2, b2, Wo, bo, T] = p as Float32Array[];
  const a1 = Array.from(b1!, Number);
  for (let q = 0; q < t; q++) for (let j = 0; j < H1; j++) a1[j]! += E![(q * V + seq[q]!) * H1 + j]! + (T ? T[seq[q]! * H1 + j]! : 0);
  const h1 = a1.map(Math.tanh);
  const h2 = Array.from({ length: H2 }, (_, k) => Math.tanh(b2![k]! + h1.reduce((s, h, j) => s + W2![k * H1 + j]! * h, 0)));
  return Array.from({ length: V }, (_, v) => bo![v]! + h2.reduce((s, h, k) => s + Wo![v * H2 + k]! * h, 0));
}

describe.each([false, true])('demo policy network (token embedding %s)', (tokenEmbedding) => {
  it('forward equals the float64 reference and the incremental context', () => {
    const rng = new Rng(3);
    const pol = new Policy({ ...cfg, tokenEmbedding }, undefined, 11);
    expect(pol.params.length).toBe(tokenEmbedding ? 7 : 6);
    const spec = randomSpec(rng);
    const out = pol.forward(spec);
    let r = 0;
    spec.seqs.forEach((s, i) => {
      const ctx = pol.context();
      for (let t = 0; t < spec.from[i]!; t++) pol.push(ctx, s[t]!);
      for (let t = spec.from[i]!; t < spec.to[i]!; t++, r++) {
        const ref = refLogits(pol.params, s as number[], t);
        const inc = new Float32Array(cfg.vocab);
        pol.next(ctx, inc);
        pol.push(ctx, s[t]!);
        for (let v = 0; v < cfg.vocab; v++) {
          expect(out.logits[r * cfg.vocab + v]).toBeCloseTo(ref[v]!, 5);
          expect(inc[v]).toBe(out.logits[r * cfg.vocab + v]);
        }
      }
    });
    expect(r).toBe(out.rows);
  });

  it('backward equals central finite differences of a float64 softmax cross-entropy', () => {
    const rng = new Rng(9);
    const pol = new Policy({ ...cfg, tokenEmbedding }, undefined, 4);
    const spec = randomSpec(rng);
    const { vocab: V } = cfg;
    // Loss: sum over rows of w_r * (-log softmax(logits_r)[y_r]), computed in float64 from the reference.
    const targets: number[] = [], weights: number[] = [];
    spec.seqs.forEach((s, i) => { for (let t = spec.from[i]!; t < spec.to[i]!; t++) { targets.push(s[t]!); weights.push(rng.next() - 0.3); } });
    const loss = () => {
      let L = 0, r = 0;
      spec.seqs.forEach((s, i) => {
        for (let t = spec.from[i]!; t < spec.to[i]!; t++, r++) {
          const z = refLogits(pol.params, s as number[], t);
          const m = Math.max(...z);
          const lse = m + Math.log(z.reduce((a, x) => a + Math.exp(x - m), 0));
          L += weights[r]! * (lse - z[targets[r]!]!);
        }
      });
      return L;
    };
    const fwd = pol.forward(spec);
    const dlogits = new Float32Array(fwd.rows * V);
    for (let r = 0; r < fwd.rows; r++) {
      const z = Array.from(fwd.logits.subarray(r * V, (r + 1) * V));
      const m = Math.max(...z);
      const e = z.map((x) => Math.exp(x - m));
      const sum = e.reduce((a, x) => a + x, 0);
      for (let v = 0; v < V; v++) dlogits[r * V + v] = weights[r]! * (e[v]! / sum - (v === targets[r] ? 1 : 0));
    }
    pol.zeroGrad();
    pol.backward(fwd, dlogits);
    let checked = 0, maxErr = 0, maxG = 0;
    pol.params.forEach((p, ti) => {
      for (let k = 0; k < p.length; k++) {
        const g = pol.grads[ti]![k]!;
        // Only check entries that matter (E has many unused rows) plus a sample of the others.
        if (g === 0 && rng.next() > 0.05) continue;
        const x = p[k]!;
        const h = 1e-2;
        p[k] = x + h; const hp = p[k]! - x; const lp = loss();
        p[k] = x - h; const hm = x - p[k]!; const lm = loss();
        p[k] = x;
        const fd = (lp - lm) / (hp + hm);
        maxErr = Math.max(maxErr, Math.abs(fd - g));
        maxG = Math.max(maxG, Math.abs(g));
        checked++;
      }
    });
    expect(checked).toBeGreaterThan(100);
    // The shared embedding gets gradient from every position its token occupies.
    if (tokenEmbedding) expect(pol.grads[6]!.some((g) => Math.abs(g) > 1e-3)).toBe(true);
    expect(maxG).toBeGreaterThan(0.01);
    expect(maxErr).toBeLessThan(2e-4 * Math.max(1, maxG));
  });

});

describe('demo policy network', () => {
  it('is deterministic given the seed and rejects bad inputs', () => {
    expect(new Policy(cfg, undefined, 5).params).toEqual(new Policy(cfg, undefined, 5).params);
    expect(new Policy(cfg, undefined, 5).params[0]).not.toEqual(new Policy(cfg, undefined, 6).params[0]);
    const pol = new Policy(cfg);
    expect(() => pol.forward({ seqs: [[1, 2]], from: [0], to: [2] })).toThrow(/row range/);
    expect(() => pol.push(pol.context(), 99)).toThrow(/token id/);
    expect(() => new Policy(cfg, [new Float32Array(3)])).toThrow(/tensors/);
    // A checkpoint without the shared token embedding does not load into a network that has one.
    expect(() => new Policy({ ...cfg, tokenEmbedding: true }, new Policy(cfg).snapshot())).toThrow(/expected 7 tensors/);
    const fwd = pol.forward({ seqs: [[1, 2, 3]], from: [1], to: [3] });
    expect(() => pol.backward(fwd, new Float32Array(3))).toThrow(/gradients/);
  });
});
