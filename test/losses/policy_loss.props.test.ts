// policyLoss properties: an independent float64 reference per kind (value and gradient by central
// differences of the reference surrogate, with verl's stop-gradients frozen at the base point), micro-batch
// invariance with global normalisers (fast-check), and bad input.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import { expectClose, expectCloseScalar } from '../helpers/peer.js';
import { expectGearError, fdGrad, randomBatch } from './helpers.js';

type Batch = ReturnType<typeof randomBatch>;
const clip = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);

/** Reference per-token aggregation weights (verl agg_loss, current semantics). */
function refWeights(off: Int32Array, mask: Uint8Array, mode: rl.AggMode): number[] {
  const rows = off.length - 1;
  const cnt: number[] = [];
  let nTok = 0, nSeq = 0, T = 0;
  for (let i = 0; i < rows; i++) {
    let c = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) c += mask[t]!;
    cnt.push(c); nTok += c; if (c > 0) nSeq++;
    T = Math.max(T, off[i + 1]! - off[i]!);
  }
  const w: number[] = [];
  for (let i = 0; i < rows; i++) {
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      if (!mask[t]) { w.push(0); continue; }
      switch (mode) {
        case 'token-mean': w.push(1 / nTok); break;
        case 'token-sum': w.push(1); break;
        case 'seq-mean-token-sum': w.push(1 / nSeq); break;
        case 'seq-mean-token-mean': w.push(1 / (cnt[i]! + 1e-8) / nSeq); break;
        case 'seq-mean-token-sum-norm': w.push(1 / nSeq / T); break;
      }
    }
  }
  return w;
}

const P = { lo: 0.2, hi: 0.28, c: 3, tauPos: 1.0, tauNeg: 1.05, droBeta: 0.5 };

/** The reference loss as a function of ℓ, with detached quantities taken from the base point lp0. */
function refLoss(kind: rl.PolicyLossKind, b: Batch, lp: Float64Array, lp0: Float64Array, mode: rl.AggMode): number {
  const { off, old, adv: A, mask } = b;
  const n = lp.length;
  const rows = off.length - 1;
  const L = new Float64Array(n);
  let agg = mode;
  for (let i = 0; i < rows; i++) {
    let s0 = 0, len = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) { s0 += (lp0[t]! - old[t]!) * mask[t]!; len += mask[t]!; }
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      const a = A[t]!;
      const d = lp[t]! - old[t]!;
      const r = Math.exp(clip(d, -20, 20));
      const r0 = Math.exp(clip(lp0[t]! - old[t]!, -20, 20));
      switch (kind) {
        case 'ppo': {
          const lc = Math.max(-a * r, -a * clip(r, 1 - P.lo, 1 + P.hi));
          L[t] = a < 0 ? Math.min(-a * P.c, lc) : lc;
          break;
        }
        case 'gspo': {
          const sr = Math.exp(Math.min(lp[t]! - lp0[t]! + s0 / Math.max(len, 1), 10));
          L[t] = Math.max(-a * sr, -a * clip(sr, 1 - P.lo, 1 + P.hi));
          agg = 'seq-mean-token-mean';
          break;
        }
        case 'sapo': {
          const tau = a > 0 ? P.tauPos : P.tauNeg;
          L[t] = -a * (4 / tau) / (1 + Math.exp(-tau * (r - 1)));
          agg = 'seq-mean-token-mean';
          break;
        }
        case 'gpg': L[t] = -a * lp[t]!; break;
        case 'cispo': L[t] = -clip(r0, 1 - P.lo, 1 + P.hi) * a * lp[t]!; break;
        case 'dro': L[t] = -(lp[t]! * a - 0.5 * P.droBeta * d * d); break;
        case 'dppo_tv': {
          const p0 = Math.exp(lp0[t]!), q = Math.exp(old[t]!);
          const keep = a > 0 ? p0 - q <= P.hi : p0 - q >= -P.lo;
          L[t] = keep ? -a * Math.min(r0, 20) * lp[t]! : 0;
          break;
        }
        default: throw new Error(kind);
      }
    }
  }
  const w = refWeights(off, mask, agg);
  let s = 0;
  for (let t = 0; t < n; t++) if (w[t]) s += w[t]! * L[t]!;
  return s;
}

/** GMPO reference (its own reduction: mean over all rows of −Ā_i · exp(mean clipped log-ratio)). */
function refGmpo(b: Batch, lp: Float64Array): number {
  const { off, old, adv: A, mask } = b;
  const rows = off.length - 1;
  let s = 0;
  for (let i = 0; i < rows; i++) {
    let sx = 0, sa = 0, len = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) {
      const x = lp[t]! - old[t]!;
      const a = A[t]!;
      const xs = a > 0 ? Math.min(x, P.hi) : a < 0 ? Math.max(x, -P.lo) : 0;
      sx += xs * mask[t]!; sa += a * mask[t]!; len += mask[t]!;
    }
    s += -(sa / (len + 1e-8)) * Math.exp(sx / (len + 1e-8));
  }
  return s / rows;
}

const MODES = rl.AGG_MODES;

describe('policyLoss: float64 reference and finite differences, every kind', () => {
  const kinds: rl.PolicyLossKind[] = ['ppo', 'gspo', 'sapo', 'gpg', 'cispo', 'dro', 'dppo_tv'];
  for (const kind of kinds) {
    for (const mode of MODES) {
      it(`${kind} / ${mode}`, () => {
        for (const seed of [1, 2, 3]) {
          const b = randomBatch(seed * 101 + kind.length, 7, 8, 0.45);
          const args: rl.PolicyLossArgs = {
            logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, kind, agg: mode,
            clipLow: P.lo, clipHigh: P.hi, clipC: kind === 'dppo_tv' ? 20 : P.c, droBeta: P.droBeta,
          };
          const out = rl.policyLoss(args);
          const f = (x: Float64Array) => refLoss(kind, b, x, b.lp, mode);
          expectCloseScalar(out.loss, f(b.lp), { rtol: 1e-12, atol: 1e-14, what: 'loss' });
          expectClose(out.grad, fdGrad(f, b.lp), { rtol: 1e-6, atol: 1e-8, what: 'grad vs FD' });
        }
      });
    }
  }
  it('gmpo (own reduction)', () => {
    for (const seed of [4, 5, 6]) {
      const b = randomBatch(seed, 6, 8, 0.45);
      const out = rl.policyLoss({ logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, kind: 'gmpo', clipLow: P.lo, clipHigh: P.hi });
      expectCloseScalar(out.loss, refGmpo(b, b.lp), { rtol: 1e-12, atol: 1e-14 });
      expectClose(out.grad, fdGrad((x) => refGmpo(b, x), b.lp), { rtol: 1e-6, atol: 1e-8, what: 'gmpo grad' });
    }
  });
  it('kl_cov and clip_cov: gradient equals the FD of the loss with the selection frozen', () => {
    const b = randomBatch(9, 8, 8, 0.45);
    for (const kind of ['kl_cov', 'clip_cov'] as const) {
      const base = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, kind, klCovRatio: 0.2, ppoKlCoef: 0.1, clipCovRatio: 1, clipCovLb: -0.05, clipCovUb: 0.05 };
      const out = rl.policyLoss(base);
      // perturbing one token at a time by 1e-7 does not change which tokens are selected here
      const fd = fdGrad((x) => rl.policyLoss({ ...base, logprob: x }).loss, b.lp, 1e-7);
      expectClose(out.grad, fd, { rtol: 1e-5, atol: 1e-7, what: kind });
    }
  });
});

describe('policyLoss: micro-batching with global normalisers never changes the loss or the gradient', () => {
  const kinds: rl.PolicyLossKind[] = ['ppo', 'gspo', 'sapo', 'gpg', 'cispo', 'dro', 'dppo_tv', 'dppo_kl', 'gmpo'];
  it('property over random batches, split points, kinds and modes (float64 and the native float32 path)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: 2, max: 12 }), fc.constantFrom(...kinds),
        fc.constantFrom(...MODES), fc.array(fc.integer({ min: 1, max: 11 }), { minLength: 1, maxLength: 3 }), fc.boolean(),
        (seed, rows, kind, mode, cuts, use32) => {
          const b = randomBatch(seed, rows, 7, 0.4);
          const conv = (x: Float64Array) => (use32 ? Float32Array.from(x) : x);
          let nTok = 0, nSeq = 0, T = 0;
          for (let i = 0; i < rows; i++) {
            let c = 0;
            for (let t = b.off[i]!; t < b.off[i + 1]!; t++) c += b.mask[t]!;
            nTok += c; if (c > 0) nSeq++;
            T = Math.max(T, b.off[i + 1]! - b.off[i]!);
          }
          fc.pre(nTok > 0); // an all-masked batch has no global normaliser
          const common = {
            kind, agg: mode, clipLow: 0.2, clipHigh: 0.28, droBeta: 0.5, lossScaleFactor: T,
            globalTokens: nTok, globalRows: kind === 'gmpo' ? rows : nSeq,
          };
          const full = rl.policyLoss({ logprob: conv(b.lp), oldLogprob: conv(b.old), advantages: conv(b.adv), offsets: b.off, mask: b.mask, ...common });
          const bounds = [0, ...[...new Set(cuts.map((c) => c % rows))].filter((c) => c > 0).sort((x, y) => x - y), rows];
          let loss = 0;
          const grad = new Float64Array(b.n);
          for (let k = 0; k + 1 < bounds.length; k++) {
            const r0 = bounds[k]!, r1 = bounds[k + 1]!;
            const t0 = b.off[r0]!, t1 = b.off[r1]!;
            const off = Int32Array.from(b.off.subarray(r0, r1 + 1), (x) => x - t0);
            const part = rl.policyLoss({
              logprob: conv(b.lp.slice(t0, t1)), oldLogprob: conv(b.old.slice(t0, t1)), advantages: conv(b.adv.slice(t0, t1)),
              offsets: off, mask: b.mask.slice(t0, t1), ...common,
            });
            loss += part.loss;
            grad.set(part.grad, t0);
          }
          expect(Math.abs(loss - full.loss)).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(full.loss)));
          for (let t = 0; t < b.n; t++) expect(grad[t]).toBe(full.grad[t]);
        },
      ),
      { numRuns: 300, seed: 42 },
    );
  });
  it('aggregate: the same invariance for every mode', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: 2, max: 10 }), fc.constantFrom(...MODES), fc.integer({ min: 1, max: 9 }),
        (seed, rows, mode, cut) => {
          const b = randomBatch(seed, rows, 6);
          let nTok = 0, nSeq = 0;
          for (let i = 0; i < rows; i++) {
            let c = 0;
            for (let t = b.off[i]!; t < b.off[i + 1]!; t++) c += b.mask[t]!;
            nTok += c; if (c > 0) nSeq++;
          }
          fc.pre(nTok > 0); // an all-masked batch has no global normaliser
          const o = { globalTokens: nTok, globalRows: nSeq, lossScaleFactor: 7 };
          const full = rl.aggregate(b.lp, b.off, b.mask, mode, o);
          const c = cut % rows || 1;
          const tc = b.off[c]!;
          const p1 = rl.aggregate(b.lp.slice(0, tc), b.off.slice(0, c + 1), b.mask.slice(0, tc), mode, o);
          const p2 = rl.aggregate(b.lp.slice(tc), Int32Array.from(b.off.subarray(c), (x) => x - tc), b.mask.slice(tc), mode, o);
          expect(Math.abs(p1.value + p2.value - full.value)).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(full.value)));
          expect([...p1.grad, ...p2.grad]).toEqual([...full.grad]);
        }),
      { numRuns: 300, seed: 7 },
    );
  });
});

describe('aggregate and effectiveRowWeights', () => {
  it('token-mean over zero valid tokens is 0 with a zero gradient (every mode)', () => {
    const off = new Int32Array([0, 2, 3]);
    for (const mode of MODES) {
      const r = rl.aggregate(new Float32Array([1, 2, 3]), off, new Uint8Array([0, 0, 0]), mode);
      expect(r.value).toBe(0);
      expect([...r.grad]).toEqual([0, 0, 0]);
    }
  });
  it('reports each mode\'s length bias per row', () => {
    const off = new Int32Array([0, 1, 5, 5]); // rows of 1, 4 and 0 tokens
    expect([...diagnostics.effectiveRowWeights(off, undefined, 'token-mean')]).toEqual([0.2, 0.8, 0]);
    expect([...diagnostics.effectiveRowWeights(off, undefined, 'token-sum')]).toEqual([1, 4, 0]);
    expect([...diagnostics.effectiveRowWeights(off, undefined, 'seq-mean-token-sum')]).toEqual([0.5, 2, 0]);
    const stm = diagnostics.effectiveRowWeights(off, undefined, 'seq-mean-token-mean');
    expectClose(stm, [0.5, 0.5, 0], { rtol: 1e-7 });
    expect([...diagnostics.effectiveRowWeights(off, undefined, 'seq-mean-token-sum-norm')]).toEqual([0.5 / 4, 2 / 4, 0]);
    expect([...diagnostics.effectiveRowWeights(off, undefined, 'seq-mean-token-sum-norm', { semantics: 'verl-legacy' })]).toEqual([0.25, 1, 0]);
  });
  it('verl-agent seq-mean-token-mean with an empty row is NaN, as the peer', () => {
    const r = rl.aggregate(new Float64Array([1, 2]), new Int32Array([0, 2, 2]), undefined, 'seq-mean-token-mean', { semantics: 'verl-agent' });
    expect(r.value).toBeNaN();
  });
});

describe('policyLoss: bad input', () => {
  const b = randomBatch(3, 4, 6);
  const f32 = (x: Float64Array) => Float32Array.from(x);
  const base = { logprob: f32(b.lp), oldLogprob: f32(b.old), advantages: f32(b.adv), offsets: b.off, mask: b.mask };
  for (const native of [true, false]) {
    it(`throws GearError with codes (native ${native})`, () => {
      const a = { ...base, native };
      expectGearError(() => rl.policyLoss({ ...a, oldLogprob: new Float32Array(b.n + 1) }), 'ERR_SHAPE');
      expectGearError(() => rl.policyLoss({ ...a, advantages: new Float32Array(b.n - 1) }), 'ERR_SHAPE');
      expectGearError(() => rl.policyLoss({ ...a, mask: new Uint8Array(b.n + 2) }), 'ERR_SHAPE');
      expectGearError(() => rl.policyLoss({ ...a, logprob: Array.from(base.logprob) as any }), 'ERR_DTYPE');
      expectGearError(() => rl.policyLoss({ ...a, offsets: new Int32Array([0, b.n + 1]) }), 'ERR_OFFSETS');
      expectGearError(() => rl.policyLoss({ ...a, clipC: 1 }), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, clipC: 0.5 }), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, clipLow: -0.1 }), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, clipHigh: -0.1 }), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, kind: 'ppo2' as any }), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, agg: 'mean' as any }), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, clip_low: 0.1 } as any), 'ERR_OPTION');
      expectGearError(() => rl.policyLoss({ ...a, globalTokens: 1 }), 'ERR_OPTION');
      const badA = f32(b.adv);
      const t = b.mask.indexOf(1);
      badA[t] = NaN;
      expectGearError(() => rl.policyLoss({ ...a, advantages: badA }), 'ERR_NON_FINITE');
      const badL = f32(b.lp);
      badL[t] = Infinity;
      expectGearError(() => rl.policyLoss({ ...a, logprob: badL }), 'ERR_NON_FINITE');
      const badM = b.mask.slice();
      badM[0] = 2;
      expectGearError(() => rl.policyLoss({ ...a, mask: badM }), 'ERR_OPTION');
    });
  }
  it('NaN on a masked-out token is ignored (as verl masked sums)', () => {
    const a = f32(b.adv);
    const t = b.mask.indexOf(0);
    a[t] = NaN;
    const r = rl.policyLoss({ ...base, advantages: a });
    expect(Number.isFinite(r.loss)).toBe(true);
    expect(r.grad[t]).toBe(0);
  });
  it('dro requires droBeta; unknown kinds of the other options are rejected', () => {
    expectGearError(() => rl.policyLoss({ ...base, kind: 'dro' }), 'ERR_OPTION');
    expectGearError(() => rl.policyLoss({ ...base, semantics: 'verl2' as any }), 'ERR_OPTION');
    expectGearError(() => rl.policyLoss({ ...base, agg: 'token-sum', semantics: 'verl-legacy' }), 'ERR_OPTION');
  });
});
