// klPenalty / applyKlPenalty / controllers / rollout correction / trlLoss: float64 references, finite
// differences and bad input.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import { expectClose, expectCloseScalar } from '../helpers/peer.js';
import { expectGearError, fdGrad, randomBatch } from './helpers.js';

describe('klPenalty', () => {
  const b = randomBatch(21, 6, 8, 3);
  const ests: rl.KlEstimator[] = ['k1', 'abs', 'k2', 'k3', 'kl', 'mse', 'low_var_kl', 'k1+', 'k3+', 'abs+'];
  for (const semantics of ['verl', 'verl-agent', 'trl'] as const) {
    it(`gradient = d Σ kl / d logprob by finite differences (${semantics})`, () => {
      for (const estimator of ests) {
        const out = rl.klPenalty({ logprob: b.lp, refLogprob: b.old, estimator, semantics });
        if (estimator.endsWith('+')) {
          // straight-through: value of the base, gradient of k2 (= d)
          const base = rl.klPenalty({ logprob: b.lp, refLogprob: b.old, estimator: estimator.slice(0, -1) as rl.KlEstimator, semantics });
          expect([...out.kl]).toEqual([...base.kl]);
          expectClose(out.grad, Array.from(b.lp, (x, t) => x - b.old[t]!), { rtol: 1e-15 });
          continue;
        }
        const f = (x: Float64Array) => rl.klPenalty({ logprob: x, refLogprob: b.old, estimator, semantics }).kl.reduce((s, v) => s + v, 0);
        expectClose(out.grad, fdGrad(f, b.lp), { rtol: 1e-6, atol: 1e-8, what: estimator });
      }
    });
  }
  it('k3 clamps: verl clamps the exponent at ±20 and the value at ±10; verl-agent only the value; TRL nothing', () => {
    const lp = new Float64Array([-30, 0, -5]);
    const ref = new Float64Array([0, -30, 0]);
    const k3 = (u: number) => Math.exp(u) - u - 1;
    const verl = rl.klPenalty({ logprob: lp, refLogprob: ref, estimator: 'k3' }).kl;
    expect([...verl]).toEqual([10, Math.min(k3(-20), 10), 10]);
    const agent = rl.klPenalty({ logprob: lp, refLogprob: ref, estimator: 'k3', semantics: 'verl-agent' }).kl;
    expect([...agent]).toEqual([10, 10 > k3(-30) ? k3(-30) : 10, 10]);
    const trl = rl.klPenalty({ logprob: lp, refLogprob: ref, estimator: 'k3', semantics: 'trl' }).kl;
    expect([...trl]).toEqual([k3(30), k3(-30), k3(5)]);
  });
  it('bad input', () => {
    const x = new Float32Array(3);
    expectGearError(() => rl.klPenalty({ logprob: x, refLogprob: new Float32Array(2), estimator: 'k1' }), 'ERR_SHAPE');
    expectGearError(() => rl.klPenalty({ logprob: x, refLogprob: x, estimator: 'full' as any }), 'ERR_OPTION');
    expectGearError(() => rl.klPenalty({ logprob: x, refLogprob: x, estimator: 'k4' as any }), 'ERR_OPTION');
    expectGearError(() => rl.klPenalty({ logprob: x, refLogprob: x, estimator: 'k3+', semantics: 'verl-legacy' }), 'ERR_OPTION');
    expectGearError(() => rl.klPenalty({ logprob: new Float32Array([NaN, 0, 0]), refLogprob: x, estimator: 'k1' }), 'ERR_NON_FINITE');
    expectGearError(() => rl.klPenalty({ logprob: [0, 0, 0] as any, refLogprob: x, estimator: 'k1' }), 'ERR_DTYPE');
  });
});

describe('applyKlPenalty and KL controllers', () => {
  it('R − β·kl·m, current_kl = mean over rows of masked row means, fixed controller unchanged', () => {
    const b = randomBatch(3, 5, 6);
    const R = Float32Array.from(b.lp, (_, t) => (t % 3) * 0.5);
    const ctl = new rl.FixedKlController(0.05);
    const out = rl.applyKlPenalty({ tokenRewards: R, oldLogprob: b.lp, refLogprob: b.old, offsets: b.off, mask: b.mask, controller: ctl, estimator: 'kl' });
    let sumRows = 0;
    for (let i = 0; i < 5; i++) {
      let s = 0, c = 0;
      for (let t = b.off[i]!; t < b.off[i + 1]!; t++) {
        const k = b.mask[t] ? b.lp[t]! - b.old[t]! : 0;
        expect(out.rewards[t]).toBe(Math.fround(R[t]! - 0.05 * k));
        s += k; c += b.mask[t]!;
      }
      sumRows += s / (c + 1e-8);
    }
    expectCloseScalar(out.currentKl, sumRows / 5, { rtol: 1e-12 });
    expect(out.beta).toBe(0.05);
    expect(ctl.value).toBe(0.05);
  });
  it('adaptive controller follows verl: β·(1 + clip(kl/target − 1, ±0.2)·n/horizon)', () => {
    const c = new rl.AdaptiveKlController(0.1, 0.1, 1000);
    c.update(0.15, 100); // error 0.5 -> clipped to 0.2
    expectCloseScalar(c.value, 0.1 * (1 + 0.2 * 100 / 1000), { rtol: 1e-15 });
    c.update(0.09, 50); // error -0.1
    expectCloseScalar(c.value, 0.1 * 1.02 * (1 - 0.1 * 50 / 1000), { rtol: 1e-14 });
    expectGearError(() => new rl.AdaptiveKlController(0.1, 0), 'ERR_OPTION');
    expectGearError(() => c.update(NaN, 1), 'ERR_OPTION');
  });
});

describe('rollout correction', () => {
  const b = randomBatch(8, 6, 8, 0.5);
  const roll = Float64Array.from(b.old, (x, t) => x + ((t % 5) - 2) * 0.4);
  it('token TIS, token masked IS and sequence TIS weights', () => {
    const tis = rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll, threshold: 1.5 });
    const mis = rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll, threshold: 1.5, lower: 0.6, mode: 'mask' });
    const seq = rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll, threshold: 2, level: 'sequence' });
    for (let i = 0; i < 6; i++) {
      let s = 0;
      for (let t = b.off[i]!; t < b.off[i + 1]!; t++) if (b.mask[t]) s += b.old[t]! - roll[t]!;
      for (let t = b.off[i]!; t < b.off[i + 1]!; t++) {
        const w = Math.exp(b.old[t]! - roll[t]!);
        expect(tis.weights[t]).toBe(b.mask[t] ? Math.min(w, 1.5) : 0);
        expect(mis.weights[t]).toBe(b.mask[t] && w >= 0.6 && w <= 1.5 ? w : 0);
        expect(seq.weights[t]).toBe(b.mask[t] ? Math.min(Math.exp(Math.min(Math.max(s, -20), 20)), 2) : 0);
      }
    }
  });
  it('weights multiply each token\'s loss and gradient inside policyLoss (every kind with per-token terms)', () => {
    for (const kind of ['ppo', 'cispo', 'gpg', 'sapo'] as const) {
      const a = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, kind };
      const w = rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll, threshold: 1.5 }).weights;
      const viaRc = rl.policyLoss({ ...a, rolloutCorrection: { rolloutLogprob: roll, threshold: 1.5 } });
      const viaW = rl.policyLoss({ ...a, isWeights: w });
      expect(viaRc.loss).toBe(viaW.loss);
      const plain = rl.policyLoss({ ...a, native: false });
      const ones = rl.policyLoss({ ...a, isWeights: new Float64Array(b.n).fill(1) });
      expectCloseScalar(ones.loss, plain.loss, { rtol: 1e-15 });
      for (let t = 0; t < b.n; t++) expect(viaW.grad[t]).toBe(plain.grad[t]! * w[t]!);
      expect(viaRc.metrics.rollout_is_max).toBeLessThanOrEqual(1.5);
    }
  });
  it('bad input', () => {
    expectGearError(() => rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll, threshold: 0 }), 'ERR_OPTION');
    expectGearError(() => rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll.slice(1) }), 'ERR_SHAPE');
    expectGearError(() => rl.rolloutCorrectionWeights(b.old, b.off, b.mask, { rolloutLogprob: roll, level: 'row' as any }), 'ERR_OPTION');
    expectGearError(() => rl.policyLoss({ logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, isWeights: new Float64Array(b.n).fill(-1) }), 'ERR_OPTION');
  });
});

describe('trlLoss properties', () => {
  const b = randomBatch(31, 6, 7, 0.4);
  const H = Float64Array.from(b.lp, (_, t) => 0.5 + ((t * 7919) % 13) / 5);
  const ref = Float64Array.from(b.old, (x, t) => x + ((t % 3) - 1) * 0.2);
  const types: rl.TrlLossType[] = ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'sapo', 'luspo'];
  for (const lossType of types) {
    for (const importanceSampling of ['token', 'sequence'] as const) {
      it(`${lossType}/${importanceSampling}: gradient = finite differences (beta 0.04, bias-corrected KL, delta)`, () => {
        const a: rl.TrlLossArgs = {
          logprob: b.lp, oldLogprob: b.old, refLogprob: ref, entropy: H, advantages: b.rowAdv, offsets: b.off, mask: b.mask,
          lossType, importanceSampling, beta: 0.04, useBiasCorrectionKl: true, delta: 1.3, epsilonHigh: 0.28, gradientAccumulationSteps: 2,
        };
        const out = rl.trlLoss(a);
        const f = (x: Float64Array) => rl.trlLoss({ ...a, logprob: x }).loss;
        expectClose(out.grad, fdGrad(f, b.lp), { rtol: 1e-6, atol: 1e-8, what: `${lossType}/${importanceSampling}` });
      });
    }
  }
  it('on-policy (old absent) equals old = the current log-probs held fixed', () => {
    for (const lossType of ['dapo', 'grpo', 'cispo', 'sapo', 'vespo'] as const) {
      for (const importanceSampling of ['token', 'sequence'] as const) {
        const a = { logprob: b.lp, advantages: b.rowAdv, offsets: b.off, mask: b.mask, lossType, importanceSampling };
        const on = rl.trlLoss(a);
        const fixed = rl.trlLoss({ ...a, oldLogprob: Float64Array.from(b.lp) });
        expectCloseScalar(on.loss, fixed.loss, { rtol: 1e-15, atol: 1e-16 });
        expectClose(on.grad, fixed.grad, { rtol: 1e-15, atol: 1e-16 });
      }
    }
  });
  it('torch.quantile linear interpolation', () => {
    expect(diagnostics.quantileLinear([3, 1, 2, 4], 0.5)).toBe(2.5);
    expect(diagnostics.quantileLinear([3, 1, 2, 4], 1)).toBe(4);
    expect(diagnostics.quantileLinear([3, 1, 2, 4], 0)).toBe(1);
    expect(diagnostics.quantileLinear([0, 10], 0.25)).toBe(2.5);
  });
  it('bad input', () => {
    const a = { logprob: b.lp, advantages: b.rowAdv, offsets: b.off, mask: b.mask };
    expectGearError(() => rl.trlLoss({ ...a, lossType: 'ppo' as any }), 'ERR_OPTION');
    expectGearError(() => rl.trlLoss({ ...a, beta: 0.1 }), 'ERR_OPTION'); // refLogprob required
    expectGearError(() => rl.trlLoss({ ...a, topEntropyQuantile: 0.5 }), 'ERR_OPTION'); // entropy required
    expectGearError(() => rl.trlLoss({ ...a, advantages: new Float64Array(3) }), 'ERR_SHAPE');
    expectGearError(() => rl.trlLoss({ ...a, importanceSampling: 'row' as any }), 'ERR_OPTION');
    expectGearError(() => rl.trlLoss({ ...a, advantages: Float64Array.from(b.rowAdv, () => NaN) }), 'ERR_NON_FINITE');
  });
});

describe('clip_cov selection', () => {
  const b = randomBatch(77, 10, 9, 0.4);
  const a = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, kind: 'clip_cov' as const, clipCovLb: -10, clipCovUb: 10 };
  it('picks max(int(ratio·Σm), 1) candidates, reproducibly for a seed', () => {
    const all = rl.policyLoss({ ...a, clipCovRatio: 1 });
    const nValid = b.mask.reduce((s, x) => s + x, 0);
    const candidates = Math.round(all.metrics.pg_clipfrac! * (nValid + 1e-8));
    expect(candidates).toBeGreaterThan(4);
    const ratio = 3.5 / nValid; // int(3.5) = 3 tokens
    const one = rl.policyLoss({ ...a, clipCovRatio: ratio, seed: 5 });
    expect(Math.round(one.metrics.pg_clipfrac! * (nValid + 1e-8))).toBe(3);
    const again = rl.policyLoss({ ...a, clipCovRatio: ratio, seed: 5 });
    expect([...again.grad]).toEqual([...one.grad]);
    const none = rl.policyLoss({ ...a, clipCovLb: 1e9, clipCovUb: 2e9 }); // no candidate at all
    const picks = new Set<string>();
    for (let seed = 0; seed < 20; seed++) {
      const r = rl.policyLoss({ ...a, clipCovRatio: ratio, seed });
      picks.add(Array.from(r.grad, (g, t) => (g === 0 && none.grad[t] !== 0 ? 1 : 0)).join(''));
    }
    expect(picks.size).toBeGreaterThan(1);
  });
});

describe('trlLoss with per-token advantages', () => {
  const b = randomBatch(55, 5, 6, 0.4);
  it('equals the per-row form for token-level losses', () => {
    for (const lossType of ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'vespo'] as const) {
      const a = { logprob: b.lp, oldLogprob: b.old, offsets: b.off, mask: b.mask, lossType };
      const row = rl.trlLoss({ ...a, advantages: b.rowAdv });
      const tok = rl.trlLoss({ ...a, advantages: b.adv });
      expectCloseScalar(tok.loss, row.loss, { rtol: 1e-14, atol: 1e-16 });
      expectClose(tok.grad, row.grad, { rtol: 1e-14, atol: 1e-16 });
    }
  });
});

describe('klLoss (verl use_kl_loss term)', () => {
  const b = randomBatch(41, 6, 8, 0.8);
  it('equals coef · aggregate(klPenalty) with the chain-rule gradient, and FD', () => {
    for (const estimator of ['low_var_kl', 'k1', 'mse', 'k3+'] as const) {
      for (const agg of rl.AGG_MODES) {
        const r = rl.klLoss({ logprob: b.lp, refLogprob: b.old, offsets: b.off, mask: b.mask, estimator, coef: 0.04, agg });
        const k = rl.klPenalty({ logprob: b.lp, refLogprob: b.old, estimator });
        const ag = rl.aggregate(k.kl, b.off, b.mask, agg);
        expectCloseScalar(r.kl, ag.value, { rtol: 1e-13, atol: 1e-16 });
        expectCloseScalar(r.value, 0.04 * ag.value, { rtol: 1e-13, atol: 1e-16 });
        expectClose(r.grad, Array.from(k.grad, (g, t) => 0.04 * ag.grad[t]! * g), { rtol: 1e-13, atol: 1e-16 });
        if (!estimator.endsWith('+')) {
          const f = (x: Float64Array) => rl.klLoss({ logprob: x, refLogprob: b.old, offsets: b.off, mask: b.mask, estimator, coef: 0.04, agg }).value;
          expectClose(r.grad, fdGrad(f, b.lp), { rtol: 1e-6, atol: 1e-9, what: `${estimator}/${agg}` });
        }
      }
    }
    expectGearError(() => rl.klLoss({ logprob: b.lp, refLogprob: b.old, offsets: b.off, estimator: 'full' as any }), 'ERR_OPTION');
    expectGearError(() => rl.klLoss({ logprob: b.lp, refLogprob: b.old.slice(1), offsets: b.off }), 'ERR_SHAPE');
  });
});
