import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { GearError } from '../../ts/core/errors.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';
import { expectRowsMatch, pack } from './adapter.js';

const gigpoFile = loadPeer('verl_agent_gigpo.json');
const byName = new Map(gigpoFile.cases.map((c) => [c.name, c]));

describe('GiGPO vs verl-agent core_gigpo', () => {
  for (const c of gigpoFile.cases) {
    it(`${c.function} ${c.name}`, () => {
      switch (c.function) {
        case 'compute_step_discounted_returns': {
          const active = data(c.inputs.active_masks) as boolean[];
          expect(active.every((x) => x === true)).toBe(true);
          const r = rl.discountedStepReturns(data(c.inputs.rewards), data(c.inputs.traj_uid), c.params.gamma);
          expect(r).toBeInstanceOf(Float32Array);
          // float32 rewards, float64 running return, float32 stores: bit-exact with verl-agent.
          expect(Array.from(r)).toEqual(data(c.outputs!.step_returns));
          return;
        }
        case 'episode_norm_reward': {
          const p = pack(c);
          const r = rl.gigpo({
            episodeRewards: p.scores, stepReturns: new Float64Array(p.B), trajectories: data(c.inputs.traj_index),
            groups: p.groups, anchors: p.groups.map((_, i) => i), stepWeight: 0,
            mode: c.params.remove_std ? 'mean_norm' : 'mean_std_norm', epsilon: c.params.epsilon,
            crossStepStats: c.params.compute_mean_std_cross_steps,
          });
          expectRowsMatch(p, r.episode, c.outputs!.episode_advantages, c.name, 1e-12, 1e-14);
          return;
        }
        case 'build_step_group': {
          if (c.error) {
            expect(() => rl.stepGroups(['a', 'b'], [0, 0], { threshold: c.params.similarity_thresh })).toThrow(GearError);
            return;
          }
          const sim = c.params.enable_similarity ? { threshold: c.params.similarity_thresh } : undefined;
          const g = rl.stepGroups(data(c.inputs.anchor_obs), data(c.inputs.index), sim);
          expect(Array.from(g)).toEqual(data(c.outputs!.step_group_first_row));
          return;
        }
        case 'step_norm_reward': {
          const p = pack(c);
          const ids = data(c.inputs.index) as number[];
          // Step groups given canonically: anchors = the step-group id, one episode group.
          const r = rl.gigpo({
            episodeRewards: new Float64Array(p.B), stepReturns: data(c.inputs.step_rewards),
            trajectories: ids.map((_, i) => i), groups: ids.map(() => 0), anchors: ids,
            mode: c.params.remove_std ? 'mean_norm' : 'mean_std_norm', epsilon: c.params.epsilon,
          });
          expect(Array.from(r.stepGroups)).toEqual(ids);
          // The peer computes the step level in float32.
          expectRowsMatch(p, r.step, c.outputs!.step_advantages, c.name, 1e-6, 1e-6);
          return;
        }
        case 'compute_gigpo_outcome_advantage': {
          if (c.error) {
            expect(() => rl.gigpo({
              episodeRewards: [1], stepRewards: [1], trajectories: [0], groups: [0], anchors: ['s'], mode: c.params.mode,
            })).toThrow(GearError);
            return;
          }
          const p = pack(c);
          const sim = c.params.enable_similarity ? { threshold: c.params.similarity_thresh } : undefined;
          const common = {
            episodeRewards: p.scores, trajectories: data(c.inputs.traj_index), groups: p.groups,
            anchors: data(c.inputs.anchor_obs), stepWeight: c.params.step_advantage_w, mode: c.params.mode,
            epsilon: c.params.epsilon, similarity: sim,
          };
          const fromReturns = rl.gigpo({ ...common, stepReturns: data(c.inputs.step_rewards) });
          expectRowsMatch(p, fromReturns.advantages, c.outputs!.advantages, c.name, 1e-6, 1e-6);
          // End to end from the raw step rewards of the same data set, discounted here with gamma.
          const dataset = c.name.split('/')[0];
          const raw = byName.get(`${dataset}/discounted_returns/gamma=${c.params.gamma_for_step_rewards}`)!;
          const fromRewards = rl.gigpo({ ...common, stepRewards: data(raw.inputs.rewards), gamma: c.params.gamma_for_step_rewards });
          expectClose(fromRewards.stepReturns, data(c.inputs.step_rewards), { rtol: 1e-6, atol: 1e-7, what: 'step returns' });
          expectRowsMatch(p, fromRewards.advantages, c.outputs!.advantages, c.name, 1e-6, 1e-6);
          return;
        }
        default:
          throw new Error(`unhandled peer function ${c.function}`);
      }
    });
  }
});

describe('trlAdvantages vs TRL GRPOTrainer advantage block', () => {
  for (const c of loadPeer('trl_grpo_advantage.json').cases) {
    it(`${c.function} ${c.name}`, () => {
      expect(c.function).toBe('advantage_block');
      const t = c.inputs.rewards_per_func;
      const [N, K] = t.shape as [number, number];
      const flat = data(t) as number[];
      const rewards = Array.from({ length: K }, (_, k) => Array.from({ length: N }, (_, i) => flat[i * K + k]!));
      const r = rl.trlAdvantages({
        rewards, weights: data(c.params.reward_weights), numGenerations: c.params.num_generations,
        scaleRewards: c.params.scale_rewards, aggregation: c.params.multi_objective_aggregation,
      });
      expectClose(r.advantages, data(c.outputs!.advantages), { rtol: 1e-6, atol: 1e-6, what: 'advantages' });
      expectClose(r.std, data(c.outputs!.std_rewards), { rtol: 1e-6, atol: 1e-7, what: 'std' });
      expect(Array.from(r.isStdZero, Boolean)).toEqual(data(c.outputs!.is_std_zero));
      // The same result through explicit group ids.
      const G = c.params.num_generations as number;
      const viaGroups = rl.trlAdvantages({
        rewards, weights: data(c.params.reward_weights), groups: Array.from({ length: N }, (_, i) => `p${Math.floor(i / G)}`),
        scaleRewards: c.params.scale_rewards, aggregation: c.params.multi_objective_aggregation,
      });
      expect(Array.from(viaGroups.advantages)).toEqual(Array.from(r.advantages));
    });
  }
});
