/**
 * The built-in advantage estimators, in the order they are listed: verl's estimator names (`grpo`,
 * `rloo`, `reinforce_plus_plus`, ...), then `trl` and `gigpo`; `gear` comes after them, registered by
 * `ts/gear/estimator.ts` (GEAR sits above this folder). Each estimator's file declares its definition
 * (level and option schema, the one place its option names, bounds and defaults are written) next to
 * the function that reads its arguments against it; adding an estimator is that file plus one entry here.
 *
 * @module
 */
import { gdpoEstimator } from './gdpo.js';
import { gigpoEstimator } from './gigpo.js';
import { gpgEstimator } from './gpg.js';
import { grpoEstimator, grpoPassKEstimator } from './grpo.js';
import { opoEstimator } from './opo.js';
import { reinforcePlusPlusBaselineEstimator, reinforcePlusPlusEstimator } from './reinforce.js';
import { type AdvantageEstimatorDefinition, registerBuiltinEstimator } from './registry.js';
import { remaxEstimator } from './remax.js';
import { rlooEstimator } from './rloo.js';
import { trlEstimator } from './trl.js';

for (const def of [
  grpoEstimator, grpoPassKEstimator, rlooEstimator, opoEstimator, gpgEstimator, reinforcePlusPlusBaselineEstimator,
  reinforcePlusPlusEstimator, remaxEstimator, gdpoEstimator, trlEstimator, gigpoEstimator,
] as AdvantageEstimatorDefinition<never>[]) registerBuiltinEstimator(def);
