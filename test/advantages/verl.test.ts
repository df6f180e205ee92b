import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import { GearError } from '../../ts/core/errors.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';
import { expectRowsMatch, pack } from './adapter.js';

const ATOL = 1e-14; // last-ulp cancellation residue the peer leaves where exact ties give 0 here

describe('grpo vs verl compute_grpo_outcome_advantage', () => {
  for (const file of ['verl_grpo_advantage.json', 'verl_legacy_grpo_advantage.json']) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        const adv = rl.grpo({
          rewards: p.scores, groups: p.groups,
          scale: c.params.norm_adv_by_std_in_grpo ? 'group' : 'none',
          epsilon: c.params.epsilon ?? 1e-6,
        });
        expectRowsMatch(p, adv, c.outputs!.advantages, c.name, 1e-12, ATOL);
      });
    }
  }
});

describe('grpo precision float32 vs verl grpo_vectorized', () => {
  for (const [file, floor] of [['verl_grpo_vectorized_advantage.json', 0], ['verl_legacy_grpo_vectorized_advantage.json', 1e-6]] as const) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        // verl's trainer passes only `config` to grpo_vectorized (core_algos.py), so its norm_adv_by_std_in_grpo
        // keeps the default True and it always normalises by std; the vectors pin the function itself.
        const adv = rl.grpo({
          rewards: p.scores, groups: p.groups, precision: 'float32', varianceFloor: floor,
          scale: c.params.norm_adv_by_std_in_grpo ? 'group' : 'none', epsilon: c.params.epsilon,
        });
        expectRowsMatch(p, adv, c.outputs!.advantages, c.name, 1e-6, 1e-7);
      });
    }
  }
});

describe('groupMeanStd vs verl group_mean_std', () => {
  for (const c of loadPeer('verl_group_mean_std.json').cases.filter((c) => c.function === 'group_mean_std')) {
    it(c.name, () => {
      const r = diagnostics.groupMeanStd(data(c.inputs.scores), data(c.inputs.gidx), c.params.eps);
      expectClose(r.mean, data(c.outputs!.mean), { rtol: 1e-6, atol: 1e-7, what: 'mean' });
      expectClose(r.std, data(c.outputs!.std), { rtol: 1e-6, what: 'std' });
      expectClose(r.count, data(c.outputs!.count), { what: 'count' });
    });
  }
});

describe('asTorchIndex vs verl as_torch_index', () => {
  for (const c of loadPeer('verl_group_mean_std.json').cases.filter((c) => c.function === 'as_torch_index')) {
    it(c.name, () => {
      expect(Array.from(diagnostics.asTorchIndex(data(c.inputs.index)))).toEqual(data(c.outputs!.gidx));
    });
  }
  it('ranks non-integer floats and rejects mixed labels', () => {
    expect(Array.from(diagnostics.asTorchIndex([0.5, 2.25, 0.5]))).toEqual([0, 1, 0]);
    expect(() => diagnostics.asTorchIndex([1, 'a'])).toThrow(GearError);
  });
});

describe('grpoPassK vs verl grpo_passk', () => {
  for (const file of ['verl_grpo_passk_advantage.json', 'verl_legacy_grpo_passk_advantage.json']) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        const call = () => rl.grpoPassK({
          rewards: p.scores, groups: p.groups, epsilon: c.params.epsilon,
          scale: c.params['config.norm_adv_by_std_in_grpo'] ? 'group' : 'none',
        });
        if (c.error) {
          expect(call).toThrow(GearError);
          try { call(); } catch (e) { expect((e as GearError).code).toBe('ERR_GROUP'); }
          return;
        }
        expectRowsMatch(p, call(), c.outputs!.advantages, c.name, 1e-12, ATOL);
      });
    }
  }
});

describe('rloo vs verl', () => {
  for (const [file, singleton] of [
    ['verl_rloo_advantage.json', 'raw'], ['verl_legacy_rloo_advantage.json', 'raw'],
    ['verl_rloo_vectorized_advantage.json', 'zero'], ['verl_legacy_rloo_vectorized_advantage.json', 'zero'],
  ] as const) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        expectRowsMatch(p, rl.rloo({ rewards: p.scores, groups: p.groups, singleton }), c.outputs!.advantages, c.name, 1e-12, ATOL);
      });
    }
  }
});

describe('reinforcePlusPlusBaseline vs verl', () => {
  for (const file of ['verl_reinforce_pp_baseline_advantage.json', 'verl_legacy_reinforce_pp_baseline_advantage.json']) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        const adv = rl.reinforcePlusPlusBaseline({ rewards: p.scores, groups: p.groups, lengths: p.lengths });
        expectRowsMatch(p, adv, c.outputs!.advantages, c.name, 1e-9, 1e-12);
      });
    }
  }
});

describe('reinforcePlusPlus vs verl (current) and legacy verl', () => {
  for (const [file, semantics] of [['verl_reinforce_pp_advantage.json', 'current'], ['verl_legacy_reinforce_pp_advantage.json', 'legacy']] as const) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        const args = { tokenRewards: p.tokenRewards, offsets: p.offsets, mask: p.mask, gamma: c.params['config.gamma'], semantics };
        const adv64 = rl.reinforcePlusPlus({ ...args, precision: 'float64' });
        expectClose(adv64, data(c.outputs!.advantages), { rtol: 1e-10, atol: 1e-12, what: 'advantages' });
        const adv32 = rl.reinforcePlusPlus(args);
        expect(adv32).toBeInstanceOf(Float32Array);
        expectClose(adv32, (data(c.outputs!.advantages) as number[]).map(Math.fround), { rtol: 2 ** -23, atol: 1e-7, what: 'f32' });
        const ret = diagnostics.tokenReturns(args);
        const peerRet = data(c.outputs!.returns) as number[];
        // Compare returns where verl keeps them (counted tokens; legacy also keeps them on masked ones).
        expectClose(ret, peerRet, { rtol: 1e-12, atol: 1e-15, what: 'returns' });
      });
    }
  }
  it('current and legacy differ on multi-turn observation gaps', () => {
    const c = loadPeer('verl_reinforce_pp_advantage.json').cases.find((c) => c.name.startsWith('multi_turn_obs_gaps'))!;
    const p = pack(c);
    const a = rl.reinforcePlusPlus({ tokenRewards: p.tokenRewards, offsets: p.offsets, mask: p.mask, gamma: 0.9, precision: 'float64' });
    const b = rl.reinforcePlusPlus({ tokenRewards: p.tokenRewards, offsets: p.offsets, mask: p.mask, gamma: 0.9, semantics: 'legacy', precision: 'float64' });
    expect([...a].some((x, i) => Math.abs(x - b[i]!) > 1e-6)).toBe(true);
  });
});

describe('remax vs verl', () => {
  for (const file of ['verl_remax_advantage.json', 'verl_legacy_remax_advantage.json']) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        const adv = rl.remax({ tokenRewards: p.tokenRewards, offsets: p.offsets, mask: p.mask, baselines: data(c.inputs.reward_baselines), precision: 'float64' });
        const e = data(c.outputs!.advantages) as number[];
        // verl leaves reward-to-go on masked tokens before counted ones; here those are 0.
        expectClose(adv, e.map((x, t) => (p.mask[t] ? x : 0)), { rtol: 1e-12, atol: 1e-15, what: 'remax' });
      });
    }
  }
});

describe('opo and gpg vs verl', () => {
  for (const file of ['verl_opo_advantage.json', 'verl_legacy_opo_advantage.json']) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        expectRowsMatch(p, rl.opo({ rewards: p.scores, groups: p.groups, lengths: p.lengths }), c.outputs!.advantages, c.name, 1e-12, ATOL);
      });
    }
  }
  for (const file of ['verl_gpg_advantage.json', 'verl_legacy_gpg_advantage.json']) {
    for (const c of loadPeer(file).cases) {
      it(`${file} ${c.name}`, () => {
        const p = pack(c);
        expectRowsMatch(p, rl.gpg({ rewards: p.scores, groups: p.groups }), c.outputs!.advantages, c.name, 1e-12, ATOL);
      });
    }
  }
});

describe('gdpo vs verl', () => {
  for (const c of loadPeer('verl_gdpo_advantage.json').cases) {
    it(c.name, () => {
      const p = pack(c);
      const keys: string[] | undefined = c.params.gdpo_reward_keys;
      const rewards = keys ? keys.map((k) => data(c.inputs[k]) as number[]) : [Array.from(p.scores)];
      const weights: number[] | undefined = c.params.gdpo_reward_weights ?? undefined;
      const adv = rl.gdpo({ rewards, weights, groups: p.groups, lengths: p.lengths });
      // With reward keys the peer's per-key scores are float32 tensors (README: 1e-6 for float32 paths).
      expectRowsMatch(p, adv, c.outputs!.advantages, c.name, keys ? 1e-6 : 1e-9, 1e-12);
    });
  }
});

describe('grpo across steps vs verl-agent compute_grpo_outcome_advantage with traj_index', () => {
  for (const c of loadPeer('verl_agent_core_algos.json').cases.filter((c) => c.function === 'compute_grpo_outcome_advantage')) {
    it(c.name, () => {
      const p = pack(c);
      const traj = data(c.inputs.traj_index) as string[];
      const r = rl.gigpo({
        episodeRewards: p.scores, stepReturns: new Float64Array(p.B), trajectories: traj, groups: p.groups,
        anchors: traj.map((_, i) => i), stepWeight: 0,
        mode: c.params.norm_adv_by_std_in_grpo ? 'mean_std_norm' : 'mean_norm',
        crossStepStats: c.params.compute_mean_std_cross_steps,
      });
      expectRowsMatch(p, r.episode, c.outputs!.advantages, c.name, 1e-12, ATOL);
    });
  }
});
