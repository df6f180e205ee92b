// The peer switch under its one name, `compat`, and its deprecated aliases (`semantics`, `flavor`):
// each alias gives bit-identical results to the compat value it maps onto, and contradictions throw.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { expectGearError } from './helpers.js';

const offsets = new Int32Array([0, 3, 3, 7]);
const mask = new Uint8Array([1, 1, 0, 1, 1, 1, 0]);
const logprob = new Float64Array([-1.2, -0.3, -2, -0.8, -1.1, -0.05, -3]);
const oldLogprob = new Float64Array([-1.0, -0.5, -2, -0.9, -0.7, -0.2, -3]);
const advantages = new Float64Array([0.5, 0.5, 0.5, -1, -1, -1, -1]);

describe('compat', () => {
  it('policyLoss: compat equals the deprecated semantics, and compat: trl equals flavor: trl', () => {
    for (const c of rl.COMPAT_VALUES.filter((x) => x !== 'trl')) {
      for (const agg of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'] as const) {
        const base = { logprob, oldLogprob, advantages, offsets, mask, agg };
        expect(rl.policyLoss({ ...base, compat: c })).toEqual(rl.policyLoss({ ...base, semantics: c }));
      }
    }
    const trl = { logprob, oldLogprob, advantages, offsets, mask, lossType: 'grpo' } as unknown as rl.PolicyLossArgs;
    expect(rl.policyLoss({ ...trl, compat: 'trl' })).toEqual(rl.policyLoss({ ...trl, flavor: 'trl' }));
    expect(rl.policyLoss({ ...trl, compat: 'trl', flavor: 'trl' })).toEqual(rl.policyLoss({ ...trl, flavor: 'trl' }));
    const base = { logprob, oldLogprob, advantages, offsets, mask };
    expectGearError(() => rl.policyLoss({ ...base, compat: 'verl', semantics: 'verl-agent' }), 'ERR_OPTION');
    expectGearError(() => rl.policyLoss({ ...trl, compat: 'verl', flavor: 'trl' }), 'ERR_OPTION');
    expectGearError(() => rl.policyLoss({ ...base, compat: 'peer' as rl.Compat }), 'ERR_OPTION');
  });

  it('aggregate, klPenalty and reinforcePlusPlus take compat too', () => {
    const values = new Float32Array([1, 2, 3, 4, 5, 6, 7]);
    for (const c of ['verl', 'verl-legacy', 'verl-agent'] as const) {
      expect(rl.aggregate(values, offsets, mask, 'seq-mean-token-sum-norm', { compat: c }))
        .toEqual(rl.aggregate(values, offsets, mask, 'seq-mean-token-sum-norm', { semantics: c }));
    }
    expectGearError(() => rl.aggregate(values, offsets, mask, 'token-mean', { compat: 'verl', semantics: 'verl-legacy' }), 'ERR_OPTION');
    const lp = new Float32Array([-1, -2, -0.5]), ref = new Float32Array([-1.5, -1, -0.5]);
    for (const c of rl.COMPAT_VALUES) {
      expect(rl.klPenalty({ logprob: lp, refLogprob: ref, estimator: 'k3', compat: c }))
        .toEqual(rl.klPenalty({ logprob: lp, refLogprob: ref, estimator: 'k3', semantics: c }));
    }
    const tokenRewards = new Float32Array([0, 0, 1, 0, 0, 0, 2]);
    const cur = rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 0.9, semantics: 'current' });
    const legacy = rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 0.9, semantics: 'legacy' });
    expect(rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 0.9, compat: 'verl' })).toEqual(cur);
    expect(rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 0.9, compat: 'verl-legacy' })).toEqual(legacy);
    expect(rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 0.9, compat: 'verl-agent' })).toEqual(legacy);
    expectGearError(() => rl.reinforcePlusPlus({ tokenRewards, offsets, mask, compat: 'verl', semantics: 'legacy' }), 'ERR_OPTION');
  });
});
