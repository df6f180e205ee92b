/**
 * `gear-rl/diagnostics`: the statistics the estimators and losses are built from, for inspecting a
 * batch or reproducing a peer's intermediate values: group indices and group / batch statistics,
 * verl's masked moments and whitening, its vectorised-GRPO group statistics and index mapping, TRL's
 * quantile, the aggregation's effective row weights, REINFORCE++'s token returns, and the GEAR options
 * resolved with their defaults.
 *
 * ```ts
 * import { groupStats, maskedWhiten } from 'gear-rl/diagnostics';
 * ```
 *
 * @module gear-rl/diagnostics
 */
export { groupIndex, groupStats, batchStats, STD_FLOOR } from './advantages/groups.js';
export type { GroupIndex, GroupStats } from './advantages/groups.js';
export { groupMeanStd, asTorchIndex } from './advantages/grpo.js';
export { maskedMean, maskedRowMean, maskedVar, maskedWhiten } from './advantages/masked.js';
export { tokenReturns } from './advantages/reinforce.js';
export { quantileLinear } from './losses/trl_loss.js';
export { effectiveRowWeights } from './losses/aggregate.js';
export { resolveGearOptions } from './gear/options.js';
