/**
 * gear-rl: critic-free reinforcement learning for LLM agents in Node.js.
 *
 * `import * as rl from 'gear-rl'` exposes what a training loop calls: the logits kernels, the advantage
 * estimators, the losses, the optimizers, rollout packing and server ingestion. Three subpaths hold the
 * rest: `gear-rl/diagnostics` (the statistics the estimators are built from), `gear-rl/similarity`
 * (GiGPO's text similarity and anchor keys) and `gear-rl/report` (the GEAR batch visualiser).
 *
 * @module gear-rl
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
// The GPU: logits kept on a CUDA device, pinned host memory, the device pool
export * as cuda from './cuda/index.js';
export { DeviceLogits } from './core/device.js';
export type { AnyLogits } from './core/logits.js';
export type { Device, HostArray } from './core/device.js';
export {
  sparseDivergence, sparseDivergenceAsync, sparseDivergenceBackward, sparseDivergenceBackwardAsync, sampledTokenKl,
} from './ops/sparse_divergence.js';
export type {
  SparseSupport, SparseDivergenceOptions, SparseDivergenceForwardOptions, SparseDivergence, SampledTokenKlArgs, SampledTokenKl,
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
  RegisterPolicyLossOptions, ClipRangeOptions, PpoOptions, SapoOptions, ClipCovOptions, KlCovOptions, DroOptions,
} from './losses/policy/index.js';
export type { OptionsSchema, OptionSpec, OptionType } from './registry/schema.js';
export { trlLoss } from './losses/trl_loss.js';
export type { TrlLossArgs, TrlLossResult, TrlLossType } from './losses/trl_loss.js';
export { klPenalty, klLoss, applyKlPenalty, FixedKlController, AdaptiveKlController } from './losses/kl_penalty.js';
export type {
  KlEstimator, KlSemantics, KlPenaltyArgs, KlPenaltyResult, KlLossArgs, KlLossResult, KlController, ApplyKlPenaltyArgs,
  ApplyKlPenaltyResult,
} from './losses/kl_penalty.js';
export { aggregate, AGG_MODES } from './losses/aggregate.js';
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
export { grpo, grpoPassK } from './advantages/grpo.js';
export type { GrpoArgs, GrpoScale, GrpoPassKArgs } from './advantages/grpo.js';
export { rloo } from './advantages/rloo.js';
export type { RlooArgs } from './advantages/rloo.js';
export { opo } from './advantages/opo.js';
export type { OpoArgs } from './advantages/opo.js';
export { gpg } from './advantages/gpg.js';
export type { GpgArgs } from './advantages/gpg.js';
export { reinforcePlusPlusBaseline, reinforcePlusPlus } from './advantages/reinforce.js';
export type { ReinforcePlusPlusBaselineArgs, ReinforcePlusPlusArgs } from './advantages/reinforce.js';
export { remax } from './advantages/remax.js';
export type { RemaxArgs } from './advantages/remax.js';
export { gdpo } from './advantages/gdpo.js';
export type { GdpoArgs } from './advantages/gdpo.js';
export { trlAdvantages } from './advantages/trl.js';
export type { TrlAdvantagesArgs, TrlAdvantages } from './advantages/trl.js';
export { gigpo, discountedStepReturns, stepGroups } from './advantages/gigpo.js';
export type { GigpoArgs, GigpoResult, GigpoMode } from './advantages/gigpo.js';
export type { GroupId, SingletonPolicy } from './advantages/groups.js';

// GEAR (GEAR-proposed reweighting, teacher context, distillation term; the visualiser is gear-rl/report)
import './gear/estimator.js'; // computeAdvantages('gear', ...)
export { gearAdvantages, gear } from './gear/gear.js';
export type { GearInput, GearLogratioInput, GearResult, GearDiagnostics, GearQuantiles } from './gear/gear.js';
export { GEAR_DEFAULTS, GEAR_OPTION_KEYS } from './gear/options.js';
export type {
  GearOptions, ResolvedGearOptions, GearPeakRule, GearSegmentEnd, GearSignMode, GearNormalize, GearAblation, GearAnchorSignal,
} from './gear/options.js';
export {
  teacherInput, teacherMessages, formatReference, gatherRows, DEFAULT_TEACHER_TEMPLATE,
} from './gear/teacher.js';
export type { ChatMessage, TeacherReference, TeacherInputArgs, TeacherInput, LogitsRows } from './gear/teacher.js';
export { gearFromLogits } from './gear/from_logits.js';
export type { GearFromLogitsInput, GearFromLogitsResult } from './gear/from_logits.js';
export { gearFromSparse } from './gear/from_sparse.js';
export type { GearFromSparseInput, GearFromSparseResult, GearFromSparseLogratioResult } from './gear/from_sparse.js';
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
