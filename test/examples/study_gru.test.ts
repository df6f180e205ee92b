// The study's GRU: its backward pass against central finite differences of a float64 loss, for every
// parameter tensor.
import { describe, expect, it } from 'vitest';
import { Gru, type GruRows } from '../../examples/study/gru.js';
import { Rng } from '../../examples/env/rng.js';

describe('study GRU backward', () => {
  const cfg = { vocab: 7, embed: 5, hidden: 6 };
  const spec: GruRows = { seqs: [[0, 3, 1, 4, 6, 2], [5, 1, 1, 2]], from: [2, 1], to: [6, 4] };
  // A linear functional of the logits plus a quadratic term, so that dL/dlogits is not constant.
  const rng = new Rng(7);
  const gru0 = new Gru(cfg, 3);
  const rows = gru0.forward(spec).rows;
  const w = Float64Array.from({ length: rows * cfg.vocab }, () => rng.normal());
  const loss = (g: Gru): number => {
    const { logits } = g.forward(spec);
    let l = 0;
    for (let i = 0; i < logits.length; i++) l += w[i]! * logits[i]! + 0.1 * logits[i]! * logits[i]!;
    return l;
  };

  it('matches finite differences on every parameter tensor', () => {
    const g = new Gru(cfg, 3);
    const c = g.forward(spec);
    const dl = Float64Array.from(c.logits, (x, i) => w[i]! + 0.2 * x);
    g.zeroGrad();
    g.backward(c, dl);
    const names = ['E', 'Wi', 'bi', 'Wh', 'bh', 'Wo', 'bo'];
    for (let p = 0; p < g.params.length; p++) {
      const P = g.params[p]!;
      let worst = 0, checked = 0;
      for (let i = 0; i < P.length; i += Math.max(1, Math.floor(P.length / 23))) {
        const x = P[i]!;
        P[i] = x + 1e-2; const xp = P[i]!; const lp = loss(g);
        P[i] = x - 1e-2; const xm = P[i]!; const lm = loss(g);
        P[i] = x;
        // The float32 parameter holds the perturbed value rounded: divide by the real step.
        const fd = (lp - lm) / (xp - xm);
        const an = g.grads[p]![i]!;
        worst = Math.max(worst, Math.abs(fd - an) / Math.max(1e-3, Math.abs(fd)));
        checked++;
      }
      expect(checked, names[p]).toBeGreaterThan(3);
      expect(worst, names[p]).toBeLessThan(2e-3);
    }
  });

  it('step() gives the same logits as forward()', () => {
    const g = new Gru(cfg, 5);
    const seq = spec.seqs[0]!;
    const c = g.forward({ seqs: [seq], from: [1], to: [seq.length] });
    let h = g.start();
    const lg = new Float64Array(cfg.vocab);
    for (let t = 0; t + 1 < seq.length; t++) {
      h = g.step(h, seq[t]!, lg);
      for (let v = 0; v < cfg.vocab; v++) expect(lg[v]).toBeCloseTo(c.logits[t * cfg.vocab + v]!, 12);
    }
  });

  it('carries information across steps (the state is used)', () => {
    const g = new Gru(cfg, 5);
    const a = g.forward({ seqs: [[1, 2, 2, 2, 2]], from: [4], to: [5] }).logits;
    const b = g.forward({ seqs: [[3, 2, 2, 2, 2]], from: [4], to: [5] }).logits;
    let diff = 0;
    for (let v = 0; v < cfg.vocab; v++) diff += Math.abs(a[v]! - b[v]!);
    expect(diff).toBeGreaterThan(1e-4);
  });
});
