/**
 * Registers the built-in advantage estimators under verl's estimator names (`grpo`, `rloo`,
 * `reinforce_plus_plus`, ...) plus `trl`, `gigpo` and `gear`.
 *
 * @module
 */
import { gearAdvantages, type GearInput } from '../gear/gear.js';
import type { OptionsSchema } from '../registry/schema.js';
import { gdpo, type GdpoArgs } from './gdpo.js';
import { gigpo, type GigpoArgs } from './gigpo.js';
import { gpg, type GpgArgs } from './gpg.js';
import { grpo, grpoPassK, type GrpoArgs, type GrpoPassKArgs } from './grpo.js';
import { opo, type OpoArgs } from './opo.js';
import {
  reinforcePlusPlus, reinforcePlusPlusBaseline, type ReinforcePlusPlusArgs, type ReinforcePlusPlusBaselineArgs,
} from './reinforce.js';
import { registerBuiltinEstimator } from './registry.js';
import { remax, type RemaxArgs } from './remax.js';
import { rloo, type RlooArgs } from './rloo.js';
import { trlAdvantages, type TrlAdvantagesArgs } from './trl.js';

// Data arguments are checked by the estimators themselves (types, lengths, finiteness); the schemas
// name them and check the scalar options.
const DATA = { type: 'any', required: true } as const;
const OPT_DATA = { type: 'any' } as const;
const SINGLETON = { type: 'string', values: ['raw', 'zero'], description: "singleton groups: 'raw' (verl) or 'zero' (TRL)" } as const;
const EPS = { type: 'number', min: 0, description: 'added to the std' } as const;
const ROW: OptionsSchema = { rewards: DATA, groups: DATA, singleton: SINGLETON };
const TOKEN: OptionsSchema = {
  tokenRewards: DATA, offsets: DATA, mask: OPT_DATA, precision: { type: 'string', values: ['float32', 'float64'] },
};

registerBuiltinEstimator<GrpoArgs>({
  name: 'grpo', level: 'row', description: 'group-relative (r − mean) / (std + ε)',
  options: {
    ...ROW, scale: { type: 'string', values: ['group', 'batch', 'none'] }, epsilon: EPS,
    precision: { type: 'string', values: ['float64', 'float32'] }, varianceFloor: { type: 'number', min: 0 },
  },
  compute: grpo,
});
registerBuiltinEstimator<GrpoPassKArgs>({
  name: 'grpo_passk', level: 'row', description: 'pass@k: only the best row of each group',
  options: { ...ROW, scale: { type: 'string', values: ['group', 'none'] }, epsilon: EPS, k: { type: 'number', int: true, min: 1 } },
  compute: grpoPassK,
});
registerBuiltinEstimator<RlooArgs>({ name: 'rloo', level: 'row', description: 'leave-one-out baseline', options: ROW, compute: rloo });
registerBuiltinEstimator<OpoArgs>({
  name: 'opo', level: 'row', description: 'length-weighted group baseline', options: { ...ROW, lengths: DATA }, compute: opo,
});
registerBuiltinEstimator<GpgArgs>({ name: 'gpg', level: 'row', description: 'GPG group-mean baseline', options: ROW, compute: gpg });
registerBuiltinEstimator<ReinforcePlusPlusBaselineArgs>({
  name: 'reinforce_plus_plus_baseline', level: 'row', description: 'group-mean baseline, then batch whitening',
  options: { ...ROW, lengths: OPT_DATA }, compute: reinforcePlusPlusBaseline,
});
registerBuiltinEstimator<ReinforcePlusPlusArgs>({
  name: 'reinforce_plus_plus', level: 'token', description: 'whitened discounted token returns',
  options: {
    ...TOKEN, gamma: { type: 'number' }, baselines: OPT_DATA,
    compat: { type: 'string', values: ['verl', 'verl-legacy', 'verl-agent'] }, semantics: { type: 'string', values: ['current', 'legacy'] },
  },
  compute: reinforcePlusPlus,
});
registerBuiltinEstimator<RemaxArgs>({
  name: 'remax', level: 'token', description: 'reward-to-go minus the greedy rollout baseline',
  options: { ...TOKEN, baselines: DATA }, compute: remax,
});
registerBuiltinEstimator<GdpoArgs>({
  name: 'gdpo', level: 'row', description: 'per-component GRPO, weighted sum, whitened',
  options: { ...ROW, weights: OPT_DATA, lengths: OPT_DATA, epsilon: EPS }, compute: gdpo,
});
registerBuiltinEstimator<TrlAdvantagesArgs>({
  name: 'trl', level: 'row', description: "TRL GRPOTrainer's advantages (several reward functions)",
  options: {
    rewards: DATA, weights: OPT_DATA, groups: OPT_DATA, numGenerations: { type: 'number', int: true, min: 1 },
    scaleRewards: { type: 'string', values: ['group', 'batch', 'none'] },
    aggregation: { type: 'string', values: ['sum_then_normalize', 'normalize_then_sum'] }, epsilon: EPS,
  },
  compute: trlAdvantages,
});
registerBuiltinEstimator<GigpoArgs>({
  name: 'gigpo', level: 'row', description: 'GiGPO episode + anchor-state step advantages (row = agent step)',
  options: {
    episodeRewards: DATA, stepRewards: OPT_DATA, stepReturns: OPT_DATA, trajectories: DATA, groups: DATA, anchors: DATA,
    gamma: { type: 'number' }, stepWeight: { type: 'number' }, mode: { type: 'string', values: ['mean_norm', 'mean_std_norm'] },
    epsilon: EPS, crossStepStats: { type: 'boolean' }, similarity: { type: 'object' },
  },
  compute: gigpo,
});
registerBuiltinEstimator<GearInput>({
  name: 'gear', level: 'token', description: 'GEAR-proposed divergence-anchored segment reweighting',
  options: {
    advantages: DATA, offsets: DATA, mask: OPT_DATA, divergence: DATA, entropy: DATA, logratio: OPT_DATA,
    options: { type: 'object' }, out: { type: 'object' },
  },
  compute: gearAdvantages,
});
