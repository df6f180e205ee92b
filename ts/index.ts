/**
 * gear-rl: critic-free reinforcement learning for LLM agents in Node.js.
 *
 * `import * as rl from 'gear-rl'` exposes every public name at the top level.
 *
 * @packageDocumentation
 */
export { GearError } from './core/errors.js';
export type { GearErrorCode } from './core/errors.js';

// Native ops
export { backend, setNumThreads, setIsa } from './ops/backend.js';
export type { BackendInfo, Isa } from './ops/backend.js';
export { segmentReduce, segmentReduceAsync, segmentBroadcast, segmentBroadcastAsync } from './ops/segment.js';
export type { SegmentOp } from './ops/segment.js';
export type { AsyncOptions } from './core/invoke.js';
// segmentBroadcast output reuse
export type { BroadcastOptions, BroadcastAsyncOptions } from './ops/segment.js';

// Logits kernels (tokenStats, divergence)
export {
  tokenStats, tokenStatsAsync, tokenStatsBackward, tokenStatsBackwardAsync,
  tokenStatsPartial, tokenStatsPartialAsync, mergeTokenStats, mergeTokenStatsAsync,
} from './ops/token_stats.js';
export type {
  Logits, LogitsDType, TokenStats, TokenStatsOptions, TokenStatsGrad, TokenStatsBackwardOptions,
  PartialStats, TokenStatsPartialOptions,
} from './ops/token_stats.js';
export { divergence, divergenceAsync, divergenceBackward, divergenceBackwardAsync } from './ops/divergence.js';
export type {
  Divergence, DivergenceKind, DivergenceOptions, DivergenceBackwardOptions, DivergenceCommonOptions,
} from './ops/divergence.js';
export {
  sparseDivergence, sparseDivergenceAsync, sparseDivergenceBackward, sparseDivergenceBackwardAsync, sampledTokenKl,
} from './ops/sparse_divergence.js';
export type {
  SparseSupport, SparseDivergenceOptions, SparseDivergence, SampledTokenKlArgs, SampledTokenKl,
} from './ops/sparse_divergence.js';

// Benchmark utilities (bandwidth)
export { memoryBandwidth } from './ops/bandwidth.js';
export type { BandwidthMode, MemoryBandwidthOptions, MemoryBandwidthResult } from './ops/bandwidth.js';

// Losses (policy losses, TRL GRPO loss, KL penalties, aggregation)
export {
  policyLoss, policyLossAsync, rolloutCorrectionWeights, POLICY_LOSS_KINDS,
  registerPolicyLoss, unregisterPolicyLoss, getPolicyLoss, listPolicyLosses,
} from './losses/policy/index.js';
export type {
  PolicyLossArgs, PolicyLossResult, PolicyLossKind, PolicyLossAsyncOptions, RolloutCorrection, RolloutCorrectionResult,
  ResolvedPolicyLossOptions, PolicyLossDefinition, PolicyLossContext, PolicyLossTerms, PolicyLossReduction,
  RegisterPolicyLossOptions,
} from './losses/policy/index.js';
export type { OptionsSchema, OptionSpec, OptionType } from './registry/schema.js';
export { trlLoss, quantileLinear } from './losses/trl_loss.js';
export type { TrlLossArgs, TrlLossResult, TrlLossType } from './losses/trl_loss.js';
export { klPenalty, klLoss, applyKlPenalty, FixedKlController, AdaptiveKlController } from './losses/kl_penalty.js';
export type {
  KlEstimator, KlSemantics, KlPenaltyArgs, KlPenaltyResult, KlLossArgs, KlLossResult, KlController, ApplyKlPenaltyArgs,
  ApplyKlPenaltyResult,
} from './losses/kl_penalty.js';
export { aggregate, effectiveRowWeights, AGG_MODES } from './losses/aggregate.js';
export type { AggMode, AggregateOptions, AggregateResult } from './losses/aggregate.js';
export type { FloatArray } from './losses/inputs.js';
export { COMPAT_VALUES } from './losses/compat.js';
export type { Compat, Semantics } from './losses/compat.js';
export { lossGradToLogits, entropyBonus } from './losses/chain.js';
export type { LossGradToLogitsArgs, DistillTerm, EntropyBonusResult } from './losses/chain.js';

// Advantage estimators (ts/advantages)
export {
  registerAdvantageEstimator, unregisterAdvantageEstimator, getAdvantageEstimator, listAdvantageEstimators,
} from './advantages/registry.js';
export type {
  AdvantageEstimatorDefinition, EstimatorLevel, EstimatorOutput, RegisterEstimatorOptions,
} from './advantages/registry.js';
export { computeAdvantages } from './advantages/compute.js';
export type { AdvantageResult, TokenLayout } from './advantages/compute.js';
export { grpo, grpoPassK, groupMeanStd, asTorchIndex } from './advantages/grpo.js';
export type { GrpoArgs, GrpoScale, GrpoPassKArgs } from './advantages/grpo.js';
export { rloo } from './advantages/rloo.js';
export type { RlooArgs } from './advantages/rloo.js';
export { opo } from './advantages/opo.js';
export type { OpoArgs } from './advantages/opo.js';
export { gpg } from './advantages/gpg.js';
export type { GpgArgs } from './advantages/gpg.js';
export { reinforcePlusPlusBaseline, reinforcePlusPlus, tokenReturns } from './advantages/reinforce.js';
export type { ReinforcePlusPlusBaselineArgs, ReinforcePlusPlusArgs } from './advantages/reinforce.js';
export { remax } from './advantages/remax.js';
export type { RemaxArgs } from './advantages/remax.js';
export { gdpo } from './advantages/gdpo.js';
export type { GdpoArgs } from './advantages/gdpo.js';
export { trlAdvantages } from './advantages/trl.js';
export type { TrlAdvantagesArgs, TrlAdvantages } from './advantages/trl.js';
export { gigpo, discountedStepReturns, stepGroups } from './advantages/gigpo.js';
export type { GigpoArgs, GigpoResult, GigpoMode } from './advantages/gigpo.js';
export { anchorKey, anchorIds } from './advantages/anchors.js';
export type { AnchorState } from './advantages/anchors.js';
export { sequenceMatcherRatio, quickRatio, realQuickRatio, similarityClusters, PreparedText } from './advantages/difflib.js';
export { groupIndex, groupStats, batchStats, STD_FLOOR } from './advantages/groups.js';
export type { GroupId, GroupIndex, GroupStats, SingletonPolicy } from './advantages/groups.js';
export { maskedMean, maskedRowMean, maskedVar, maskedWhiten } from './advantages/masked.js';

// GEAR (GEAR-proposed reweighting, teacher context, distillation term, visualiser)
export { gearAdvantages, gear, resolveGearOptions, GEAR_DEFAULTS, GEAR_OPTION_KEYS } from './gear/gear.js';
export type {
  GearOptions, ResolvedGearOptions, GearInput, GearResult, GearDiagnostics, GearQuantiles,
  GearPeakRule, GearSegmentEnd, GearSignMode, GearNormalize, GearAblation,
} from './gear/gear.js';
export {
  saveBatch, loadBatch, toSavedBatch, fromSavedBatch, renderReport, writeReport,
  SAVED_BATCH_FORMAT, SAVED_BATCH_VERSION, REPORT_SCALES,
} from './gear/visualize.js';
export type { SavedBatch, GearBatchRecord, ReportOptions, ReportMetric, ReportOrder, JsonNumber } from './gear/visualize.js';
export {
  teacherInput, teacherMessages, formatReference, gatherRows, DEFAULT_TEACHER_TEMPLATE,
} from './gear/teacher.js';
export type { ChatMessage, TeacherReference, TeacherInputArgs, TeacherInput, LogitsRows } from './gear/teacher.js';
export { gearFromLogits } from './gear/from_logits.js';
export type { GearFromLogitsInput, GearFromLogitsResult } from './gear/from_logits.js';
export { gearFromSparse } from './gear/from_sparse.js';
export type { GearFromSparseInput, GearFromSparseResult } from './gear/from_sparse.js';
export { distillLoss } from './gear/distill.js';
export { shuffleWithinRows, gearFromSegments, type ShuffleWithinRowsOptions, type GearSegments, type GearFromSegmentsInput, type GearFromSegmentsResult } from './gear/controls.js';
export type { DistillArgs, DistillResult } from './gear/distill.js';

// Optimizers (AdamW / Adam / SGD, gradient clipping, learning-rate schedules)
export * from './optim/index.js';

// Rollout batches (ts/rollout)
export { buildRolloutBatch, rowLengths, lastTokenValues } from './rollout/batch.js';
export type { RolloutBatch, RolloutBatchInput, TrajectoryInput, StepInput, GroupInput } from './rollout/batch.js';

// Inference-server responses -> packed rollouts (ts/server)
export * from './server/index.js';

// Tensor adapters: onnxruntime / tfjs tensors as logits views (ts/adapters)
export { logitsFromOrt, logitsFromTfjs } from './adapters/index.js';
export type { OrtTensorLike, TfjsTensorLike, TensorLogitsOptions, TensorRowRange } from './adapters/index.js';
