// TRL's loss types are kinds of the policy-loss registry (`trl.<lossType>`): listed and looked up like the
// verl kinds, built-in (not removable), run by trlLoss and policyLoss({ compat: 'trl' }) through the
// registry, and kept apart from the verl kinds' arguments (a `kind` naming one, or a context that is not
// TRL's, is a coded error; the verl kinds' unknown-kind listing does not name them).
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { expectGearError } from './helpers.js';

const TYPES = ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'luspo', 'vespo'] as const;
const offsets = Int32Array.of(0, 3, 6);
const mask = Uint8Array.of(1, 1, 1, 1, 1, 0);
const logprob = Float64Array.of(-1, -0.4, -2, -0.3, -0.9, -1.5);
const oldLogprob = Float64Array.of(-1.1, -0.2, -2.4, -0.3, -1.3, -1.5);
const verl = { logprob, oldLogprob, advantages: Float64Array.of(1, 1, 1, -1, -1, -1), offsets };

describe('TRL loss types as policy-loss kinds', () => {
  it('are registered after the verl kinds, one per lossType, built-in', () => {
    const names = rl.listPolicyLosses();
    const trl = names.filter((n) => n.startsWith('trl.'));
    expect(trl).toEqual(TYPES.map((t) => `trl.${t}`));
    expect(names.indexOf('trl.grpo')).toBeGreaterThan(names.indexOf('dro'));
    for (const name of trl) {
      const def = rl.getPolicyLoss(name);
      expect(def.name).toBe(name);
      expect(typeof def.reduce).toBe('function');
      expect(def.terms).toBeUndefined();
      expect(def.description).toMatch(/^TRL's /);
      expectGearError(() => rl.unregisterPolicyLoss(name), 'ERR_OPTION');
    }
    // registering over one is refused like any built-in
    expectGearError(() => rl.registerPolicyLoss({ name: 'trl.dapo', reduce: () => ({ loss: 0, grad: [] }) }, { replace: true }), 'ERR_OPTION');
  });

  it('each runs under trlLoss and compat: trl by its lossType, and only there', () => {
    for (const lossType of TYPES) {
      const a = { logprob, oldLogprob, advantages: [0.7, -0.7], offsets, mask, lossType };
      const viaTrl = rl.trlLoss(a);
      expect(rl.policyLoss({ ...a, compat: 'trl' } as unknown as rl.PolicyLossArgs)).toEqual(viaTrl);
      expect(Number.isFinite(viaTrl.loss)).toBe(true);
    }
    // each lossType runs its own kind: the losses differ
    const losses = TYPES.map((lossType) => rl.trlLoss({ logprob, oldLogprob, advantages: [0.7, -0.7], offsets, mask, lossType, epsilon: 0.1 }));
    expect(new Set(losses.map((r) => r.loss)).size).toBeGreaterThanOrEqual(6);
    // a TRL kind by `kind` with verl's arguments: a coded error naming the way in
    try {
      rl.policyLoss({ ...verl, kind: 'trl.dapo' });
      expect.fail('did not throw');
    } catch (e) {
      expect((e as rl.GearError).code).toBe('ERR_OPTION');
      expect((e as Error).message).toContain("compat: 'trl', lossType: 'dapo'");
    }
    // its reduce on a context TRL's reader did not make
    const def = rl.getPolicyLoss('trl.grpo');
    const ctx = {
      logprob, oldLogprob, advantages: verl.advantages, offsets, mask: undefined, args: {}, isWeights: undefined,
      agg: 'token-mean', aggOptions: {}, options: undefined,
    } as unknown as rl.PolicyLossContext;
    expectGearError(() => def.reduce!(ctx), 'ERR_OPTION');
  });

  it('leave the verl kinds\' lookup as it was: an unknown kind lists the verl kinds only', () => {
    try {
      rl.policyLoss({ ...verl, kind: 'no_such_loss' });
      expect.fail('did not throw');
    } catch (e) {
      const msg = (e as Error).message;
      expect(msg).toMatch(/^kind: expected one of 'ppo', 'vanilla', 'gspo'/);
      expect(msg).not.toContain('trl.');
    }
    // a user kind may still use an option name TRL's arguments have (the TRL kinds declare no options)
    rl.registerPolicyLoss({ name: 'user_beta', options: { beta: { type: 'number', default: 1 } }, terms: (c) => ({ loss: c.logprob, dloss: c.logprob }) });
    try {
      expect(rl.policyLoss({ ...verl, kind: 'user_beta', beta: 2 } as rl.PolicyLossArgs).loss).toBeCloseTo((-1 - 0.4 - 2 - 0.3 - 0.9 - 1.5) / 6, 12);
    } finally {
      rl.unregisterPolicyLoss('user_beta');
    }
  });
});
