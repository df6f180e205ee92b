// The registries from a user's side: an estimator and a policy loss registered through the package
// entry only, run by name, and used for one training step of the demo's policy network.
import { afterAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { Policy, type RowSpec } from '../../examples/model/policy.js';
import { Rng } from '../../examples/env/rng.js';

function expectCode(f: () => unknown, code: string): void {
  try {
    f();
  } catch (e) {
    expect(e, String(e)).toBeInstanceOf(rl.GearError);
    expect((e as rl.GearError).code, (e as Error).message).toBe(code);
    return;
  }
  expect.fail(`did not throw (expected ${code})`);
}

// A user estimator: reward minus the group mean, times `scale` (row level).
let estimatorCalls = 0;
const centred = (a: { rewards: ArrayLike<number>; groups: ArrayLike<number>; scale?: number }): Float64Array => {
  estimatorCalls++;
  const sum = new Map<number, [number, number]>();
  for (let i = 0; i < a.rewards.length; i++) {
    const s = sum.get(a.groups[i]!) ?? [0, 0];
    sum.set(a.groups[i]!, [s[0] + a.rewards[i]!, s[1] + 1]);
  }
  return Float64Array.from(a.rewards, (r, i) => {
    const [s, c] = sum.get(a.groups[i]!)!;
    return (r - s / c) * (a.scale ?? 1);
  });
};

// A user loss: the plain policy gradient −k·A·ℓ with its own option `pgScale` (k).
let lossCalls = 0;
const linearPg: rl.PolicyLossDefinition = {
  name: 'user_linear_pg',
  description: 'scaled plain policy gradient',
  options: { pgScale: { type: 'number', min: 0, minOpen: true, description: 'k (default 1)' } },
  terms: (c) => {
    lossCalls++;
    const k = (c.args.pgScale as number | undefined) ?? 1;
    const n = c.logprob.length;
    const loss = new Float64Array(n), dloss = new Float64Array(n);
    for (let t = 0; t < n; t++) { loss[t] = -k * c.advantages[t]! * c.logprob[t]!; dloss[t] = -k * c.advantages[t]!; }
    return { loss, dloss, metrics: { user_scale: k } };
  },
};

rl.registerAdvantageEstimator({
  name: 'user_centred',
  level: 'row',
  options: { rewards: { type: 'any', required: true }, groups: { type: 'any', required: true }, scale: { type: 'number', min: 0, minOpen: true } },
  compute: centred,
});
rl.registerPolicyLoss(linearPg);

afterAll(() => {
  rl.unregisterAdvantageEstimator('user_centred');
  rl.unregisterPolicyLoss('user_linear_pg');
});

describe('registries', () => {
  it('list the built-ins and the user entries', () => {
    expect(rl.listPolicyLosses()).toEqual(expect.arrayContaining(['ppo', 'gspo', 'gmpo', 'dro', 'user_linear_pg']));
    expect(rl.listAdvantageEstimators()).toEqual(expect.arrayContaining(['grpo', 'rloo', 'reinforce_plus_plus', 'gigpo', 'gear', 'user_centred']));
    expect(rl.getPolicyLoss('vanilla').name).toBe('ppo');
    expect(rl.getAdvantageEstimator('grpo').level).toBe('row');
    expect(rl.getAdvantageEstimator('remax').level).toBe('token');
  });

  it('runs built-in estimators by name with one result shape, whatever their level', () => {
    const offsets = new Int32Array([0, 2, 5, 6, 9]);
    const mask = new Uint8Array([1, 1, 1, 0, 1, 1, 1, 1, 0]);
    const rewards = [1, 0, 0.5, 2], groups = [0, 0, 1, 1];
    const row = rl.computeAdvantages('grpo', { rewards, groups }, { offsets, mask });
    expect(row.level).toBe('row');
    expect(row.rowAdvantages).toEqual(rl.grpo({ rewards, groups }));
    expect(row.tokenAdvantages).toEqual(rl.segmentBroadcast(rl.grpo({ rewards, groups }), offsets, mask));

    const tokenRewards = new Float32Array([0, 1, 0, 0, 2, 0, 1, 0, 3]);
    const tok = rl.computeAdvantages('reinforce_plus_plus', { tokenRewards, offsets, mask, gamma: 0.9 });
    expect(tok.level).toBe('token');
    expect(tok.rowAdvantages).toBeUndefined();
    expect(tok.tokenAdvantages).toEqual(rl.reinforcePlusPlus({ tokenRewards, offsets, mask, gamma: 0.9 }));
  });

  it('train the demo policy one step with a user estimator and a user loss', () => {
    const cfg = { vocab: 7, positions: 9, hidden1: 6, hidden2: 5 };
    const rng = new Rng(17);
    const seqs: number[][] = [], from: number[] = [], to: number[] = [];
    for (let r = 0; r < 6; r++) {
      seqs.push(Array.from({ length: 7 }, () => rng.int(cfg.vocab)));
      from.push(2);
      to.push(5 + rng.int(3));
    }
    const spec: RowSpec = { seqs, from, to };
    const offsets = new Int32Array(7);
    for (let r = 0; r < 6; r++) offsets[r + 1] = offsets[r]! + to[r]! - from[r]!;
    const targets = new Int32Array(offsets[6]!);
    for (let r = 0, i = 0; r < 6; r++) for (let t = from[r]!; t < to[r]!; t++) targets[i++] = seqs[r]![t]!;
    const mask = new Uint8Array(targets.length).fill(1);
    mask[1] = 0;
    const rewards = [1, 0, 0, 1, 1, 0], groups = [0, 0, 0, 1, 1, 1];

    // Gradient reaching the params for a loss kind (same policy, same batch).
    const step = (kind: string, extra: Record<string, unknown>) => {
      const policy = new Policy(cfg, undefined, 5);
      const before = policy.params.map((p) => p.slice());
      const fwd = policy.forward(spec);
      const logits: rl.Logits = { data: fwd.logits, rows: fwd.rows, vocab: cfg.vocab };
      const stats = rl.tokenStats(logits, targets);
      const adv = rl.computeAdvantages('user_centred', { rewards, groups, scale: 2 }, { offsets, mask });
      const pl = rl.policyLoss({
        logprob: stats.logprob, oldLogprob: stats.logprob, advantages: adv.tokenAdvantages, offsets, mask, kind, ...extra,
      });
      const dlogits = rl.tokenStatsBackward(logits, targets, { logprob: pl.grad as Float32Array }, { stats });
      policy.zeroGrad();
      policy.backward(fwd, dlogits);
      const grads = policy.grads.map((g) => g.slice());
      new rl.AdamW(policy.params, { lr: 0.01, weightDecay: 0 }).step(policy.grads);
      return { pl, adv, grads, before, after: policy.params, stats };
    };

    const calls0 = estimatorCalls, losses0 = lossCalls;
    const user = step('user_linear_pg', { pgScale: 0.5 });
    expect(estimatorCalls).toBe(calls0 + 1);
    expect(lossCalls).toBe(losses0 + 1);
    expect(user.pl.metrics.user_scale).toBe(0.5);
    expect(user.adv.rowAdvantages).toEqual(centred({ rewards, groups, scale: 2 }));

    // The loss is the token mean of −k·A·ℓ over valid tokens; its gradient −k·A / count.
    let count = 0, want = 0;
    for (let t = 0; t < targets.length; t++) if (mask[t]) count++;
    for (let t = 0; t < targets.length; t++) if (mask[t]) want += (-0.5 * user.adv.tokenAdvantages[t]! * user.stats.logprob[t]!) / count;
    expect(user.pl.loss).toBeCloseTo(want, 12);
    for (let t = 0; t < targets.length; t++) {
      expect(user.pl.grad[t]).toBe(mask[t] ? Math.fround((-0.5 * user.adv.tokenAdvantages[t]!) / count) : 0);
    }

    // Through the network: exactly half the built-in GPG's gradient (−A·ℓ), and the update moved the params.
    const gpg = step('gpg', {});
    let nonzero = 0;
    user.grads.forEach((g, k) => g.forEach((x, i) => {
      expect(x).toBeCloseTo(0.5 * gpg.grads[k]![i]!, 7);
      if (x !== 0) nonzero++;
    }));
    expect(nonzero).toBeGreaterThan(0);
    expect(user.after.some((p, k) => p.some((x, i) => x !== user.before[k]![i]))).toBe(true);
  });

  it('validate user options with coded errors', () => {
    const n = 3;
    const base = {
      logprob: new Float32Array(n).fill(-1), oldLogprob: new Float32Array(n).fill(-1),
      advantages: new Float32Array([1, -1, 0.5]), offsets: new Int32Array([0, 3]),
    };
    expectCode(() => rl.policyLoss({ ...base, kind: 'user_linear_pg', pgScale: -1 } as rl.PolicyLossArgs), 'ERR_OPTION');
    expectCode(() => rl.policyLoss({ ...base, kind: 'ppo', pgScale: 1 } as rl.PolicyLossArgs), 'ERR_OPTION');
    expectCode(() => rl.policyLoss({ ...base, kind: 'no_such_loss' }), 'ERR_OPTION');
    expectCode(() => rl.computeAdvantages('no_such_estimator', {}), 'ERR_OPTION');
    expectCode(() => rl.computeAdvantages('user_centred', { rewards: [1, 0], groups: [0, 0] }), 'ERR_OPTION'); // no layout
    expectCode(() => rl.computeAdvantages('user_centred', { groups: [0] }, { offsets: new Int32Array([0, 1]) }), 'ERR_OPTION');
    expectCode(() => rl.computeAdvantages('user_centred', { rewards: [1], groups: [0], scale: 0 }, { offsets: new Int32Array([0, 1]) }), 'ERR_OPTION');
    // An output that does not fit the layout.
    expectCode(() => rl.computeAdvantages('user_centred', { rewards: [1, 0], groups: [0, 0] }, { offsets: new Int32Array([0, 1]) }), 'ERR_SHAPE');
  });

  it('reject bad registrations with coded errors', () => {
    const terms = linearPg.terms!;
    expectCode(() => rl.registerPolicyLoss({ name: 'ppo', terms }), 'ERR_OPTION');              // built-in
    expectCode(() => rl.registerPolicyLoss({ name: 'user_x', aliases: ['vanilla'], terms }), 'ERR_OPTION');
    expectCode(() => rl.registerPolicyLoss({ ...linearPg }), 'ERR_OPTION');                      // taken
    expectCode(() => rl.registerPolicyLoss({ name: 'bad name', terms }), 'ERR_OPTION');
    expectCode(() => rl.registerPolicyLoss({ name: 'user_none' }), 'ERR_OPTION');                // neither terms nor reduce
    expectCode(() => rl.registerPolicyLoss({ name: 'user_both', terms, reduce: () => ({ loss: 0, grad: [] }) }), 'ERR_OPTION');
    expectCode(() => rl.registerPolicyLoss({ name: 'user_shadow', options: { clipLow: { type: 'number' } }, terms }), 'ERR_OPTION');
    expectCode(() => rl.registerPolicyLoss({ name: 'user_schema', options: { k: { type: 'float' as 'number' } }, terms }), 'ERR_OPTION');
    expectCode(() => rl.registerPolicyLoss({ name: 'user_field', terms, extra: 1 } as rl.PolicyLossDefinition), 'ERR_OPTION');
    expectCode(() => rl.unregisterPolicyLoss('ppo'), 'ERR_OPTION');

    const compute = () => [0];
    expectCode(() => rl.registerAdvantageEstimator({ name: 'grpo', level: 'row', compute }), 'ERR_OPTION');
    expectCode(() => rl.registerAdvantageEstimator({ name: 'user_lvl', level: 'sequence' as 'row', compute }), 'ERR_OPTION');
    expectCode(() => rl.registerAdvantageEstimator({ name: 'user_fn', level: 'row', compute: 1 as unknown as typeof compute }), 'ERR_OPTION');
    expectCode(() => rl.registerAdvantageEstimator({ name: 'user_centred', level: 'row', compute }), 'ERR_OPTION');
    expectCode(() => rl.unregisterAdvantageEstimator('grpo'), 'ERR_OPTION');

    // replace: true swaps a user entry; a loss whose output has the wrong length is caught.
    rl.registerPolicyLoss({ name: 'user_short', terms: () => ({ loss: [0], dloss: [0] }) });
    rl.registerPolicyLoss({ name: 'user_short', terms: () => ({ loss: [0, 0], dloss: [0] }) }, { replace: true });
    const args = {
      logprob: new Float32Array(2), oldLogprob: new Float32Array(2), advantages: new Float32Array(2), offsets: new Int32Array([0, 2]),
    };
    expectCode(() => rl.policyLoss({ ...args, kind: 'user_short' }), 'ERR_SHAPE');
    expect(rl.unregisterPolicyLoss('user_short')).toBe(true);
    expect(rl.listPolicyLosses()).not.toContain('user_short');
  });
});
