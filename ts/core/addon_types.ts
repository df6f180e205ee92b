/**
 * The contract between the TypeScript layer and the native addon: every function the addon exports,
 * each taking ONE object of named parameters and returning a named result (or a Promise of it when
 * `async` is true). The native side reads each property by name (native/src/core/args.h) and re-checks
 * everything memory safety needs; the wrappers in `ts/ops`, `ts/optim`, `ts/losses` and `ts/gear`
 * check types, shapes and options first.
 *
 * Enumerations cross as small integer codes, named here.
 *
 * @internal
 * @module
 */
import type { GearErrorCode } from './errors.js';

/** Native dtype code of a logits buffer: 0 float32 (Float32Array), 1 bfloat16, 2 float16 (Uint16Array). */
export type DTypeCode = 0 | 1 | 2;

/** A logits buffer of `rows * vocab` elements in host memory. */
export interface NativeHostLogits {
  data: Float32Array | Uint16Array;
  rows: number;
  vocab: number;
  dtype: DTypeCode;
}
/** A device tensor, by its id in the CUDA module's tensor table (shape and dtype live there). */
export interface NativeTensorRef {
  tensor: number;
}
/** Logits in host memory or on a device. */
export type NativeLogits = NativeHostLogits | NativeTensorRef;
/** A device tensor as the CUDA module describes it. */
export interface NativeTensor extends NativeTensorRef {
  device: number;
  rows: number;
  vocab: number;
  dtype: DTypeCode;
  bytes: number;
}

/**
 * Where a logits call runs: -1 (or absent) the CPU, >= 0 that CUDA device (host logits are staged
 * through it). Calls on device tensors run on their device.
 */
export interface DeviceControl {
  device?: number;
}

/**
 * Sync/async switch and abort flag, accepted by every op with an async form. The flag is an Int32Array
 * the caller sets to 1 (Atomics.store) to abort; kernels poll it between blocks of rows.
 */
export interface AsyncControl {
  /** true: run on the libuv pool and return a Promise of the result. */
  async?: boolean;
  abort?: Int32Array | null;
}

// ---- module setup and introspection ----

export interface SetErrorClassParams {
  /** Constructed as `new errorClass(code, message)` for every native error. */
  errorClass: new (code: GearErrorCode, message: string) => Error;
}
export interface SetNumThreadsParams {
  threads: number;
}
export interface SetIsaParams {
  isa: string;
}
export interface BackendResult {
  variant: string;
  isa: string;
  detectedIsa: string;
  isas?: string[];
  /** The CUDA module: its usable device count. */
  devices?: number;
  threads: number;
  version: string;
}
export interface CudaDeviceResult {
  index: number;
  name: string;
  arch: string;
  multiprocessors: number;
  totalBytes: number;
}
export interface CudaDevicesResult {
  count: number;
  /** The CUDA error when there is no usable device. */
  error: string;
  runtimeVersion: number;
  driverVersion: number;
  devices: CudaDeviceResult[];
}
export interface CudaDeviceParams {
  device: number;
}
export interface CudaMemoryResult {
  device: number;
  freeBytes: number;
  totalBytes: number;
  poolReservedBytes: number;
  poolUsedBytes: number;
  tensors: number;
  tensorBytes: number;
}
export interface CudaUploadParams extends AsyncControl {
  logits: NativeHostLogits;
  device: number;
}
export interface CudaDownloadParams extends AsyncControl, NativeTensorRef {
  out?: Float32Array | Uint16Array | null;
}
export interface CudaDownloadResult {
  data: Float32Array | Uint16Array;
}
export interface CudaDisposeParams extends NativeTensorRef {
  /** The garbage collector's path: free now, or when the last running call using it ends. */
  whenFree?: boolean;
}
export interface CudaAllocHostParams {
  bytes: number;
}
/** 0 read, 1 read2, 2 copy, 3 copyPlain (ts/ops/bandwidth.ts). */
export type BandwidthModeCode = 0 | 1 | 2 | 3;
export interface MemoryBandwidthParams {
  mode: BandwidthModeCode;
  bytes: number;
  threads: number;
  reps: number;
}
export interface MemoryBandwidthResult {
  /** One rate per repetition, GB/s. */
  gbps: Float64Array;
}

// ---- token statistics ----

export interface TokenStatsParams extends AsyncControl, DeviceControl {
  logits: NativeLogits;
  targets: Int32Array;
  temperature: number;
  out?: { logprob?: Float32Array | null; entropy?: Float32Array | null; logsumexp?: Float32Array | null } | null;
}
export interface TokenStatsResult {
  logprob: Float32Array;
  entropy: Float32Array;
  logsumexp: Float32Array;
}
export interface TokenStatsBackwardParams extends AsyncControl, DeviceControl {
  logits: NativeLogits;
  targets?: Int32Array | null;
  grad?: { logprob?: Float32Array | null; entropy?: Float32Array | null } | null;
  temperature: number;
  stats?: { logsumexp?: Float32Array | null; entropy?: Float32Array | null } | null;
  /** A host array, or a float32 device tensor of the logits' shape. */
  out?: Float32Array | NativeTensorRef | null;
  /** Write the gradient over the (float32) logits. */
  inPlace?: boolean;
}
export interface TokenStatsBackwardResult {
  /**
   * dLoss/dlogits, `rows * vocab`: the host `out` (or a new array) for host results; for device logits
   * without a host `out`, a new device tensor (or the `out` / logits reference given).
   */
  gradLogits: Float32Array | NativeTensor | NativeTensorRef;
}
export interface TokenStatsPartialParams extends AsyncControl, DeviceControl {
  shard: NativeLogits;
  targets: Int32Array;
  vocabStart: number;
  temperature: number;
}
export interface TokenStatsPartialResult {
  max: Float64Array;
  sumExp: Float64Array;
  sumExpX: Float64Array;
  targetLogit: Float64Array;
}
/** One shard's statistics, as {@link TokenStatsPartialResult} plus where the shard lies. */
export interface MergePart extends TokenStatsPartialResult {
  vocabStart: number;
  vocab: number;
}
export interface MergeTokenStatsParams extends AsyncControl {
  /** Sorted by vocabStart, tiling the vocabulary. */
  parts: MergePart[];
  rows: number;
  temperature: number;
}
export type MergeTokenStatsResult = TokenStatsResult;

// ---- divergence ----

/** 0 reverse KL, 1 forward KL, 2 JSD. */
export type DivergenceKindCode = 0 | 1 | 2;
interface DivergencePairParams extends AsyncControl, DeviceControl {
  student: NativeLogits;
  teacher: NativeLogits;
  kind: DivergenceKindCode;
  beta: number;
  temperature: number;
  klCap: number;
}
export interface DivergenceOut {
  value?: Float32Array;
  studentEntropy?: Float32Array;
  studentLogsumexp?: Float32Array;
  teacherLogsumexp?: Float32Array;
  studentLogprob?: Float32Array;
  teacherLogprob?: Float32Array;
}
export interface DivergenceParams extends DivergencePairParams {
  targets?: Int32Array | null;
  out?: DivergenceOut | null;
}
export interface DivergenceResult {
  value: Float32Array;
  studentEntropy: Float32Array;
  studentLogsumexp: Float32Array;
  teacherLogsumexp: Float32Array;
  /** Only with targets. */
  studentLogprob?: Float32Array;
  /** Only with targets. */
  teacherLogprob?: Float32Array;
}
export interface DivergenceBackwardParams extends DivergencePairParams {
  grad: Float32Array;
  stats?: { value?: Float32Array | null; studentLogsumexp?: Float32Array | null; teacherLogsumexp?: Float32Array | null } | null;
  /** A host array, or a float32 device tensor of the student's shape. */
  out?: Float32Array | NativeTensorRef | null;
}
export interface DivergenceBackwardResult {
  /** dLoss/dstudent, `rows * vocab`: a host array, or (device logits) a device tensor. */
  gradStudent: Float32Array | NativeTensor | NativeTensorRef;
}

// ---- sparse (top-k) divergence ----

/** One side's top-k lists: `ids` and `logprobs` of `n * k` (padding: id -1, log-prob -Infinity). */
export interface NativeSparseTopk {
  ids: Int32Array;
  logprobs: Float32Array;
  k: number;
}
/** 0 tail bucket, 1 renormalised over the shared ids. */
export type SparseSupportCode = 0 | 1;
interface SparseDivergenceCommonParams extends AsyncControl {
  student: NativeSparseTopk;
  teacher: NativeSparseTopk;
  n: number;
  kind: DivergenceKindCode;
  beta: number;
  support: SparseSupportCode;
  tailClamp: number;
  /** 0: unknown. */
  vocab: number;
  klCap: number;
}
export type SparseDivergenceParams = SparseDivergenceCommonParams;
export interface SparseDivergenceResult {
  value: Float32Array;
  studentTail: Float32Array;
  teacherTail: Float32Array;
  studentSharedMass: Float32Array;
  teacherSharedMass: Float32Array;
  shared: Int32Array;
  entropyLower: Float32Array;
  entropyUpper: Float32Array;
}
export interface SparseDivergenceBackwardParams extends SparseDivergenceCommonParams {
  grad: Float32Array;
}
export interface SparseDivergenceBackwardResult {
  /** dLoss/d(student top-k log-probs), `n * student.k`. */
  gradStudent: Float32Array;
}

// ---- packed rows ----

/** 0 sum, 1 mean, 2 max, 3 min, 4 count. */
export type SegmentOpCode = 0 | 1 | 2 | 3 | 4;
export interface SegmentReduceParams extends AsyncControl {
  values: Float32Array | Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  op: SegmentOpCode;
  out?: Float64Array | null;
}
export interface SegmentReduceResult {
  rowValues: Float64Array;
}
export interface SegmentBroadcastParams extends AsyncControl {
  rowValues: Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  out?: Float32Array | null;
}
export interface SegmentBroadcastResult {
  tokenValues: Float32Array;
}

// ---- policy loss ----

/** 0 token-mean, 1 token-sum, 2 seq-mean-token-sum, 3 seq-mean-token-mean, 4 seq-mean-token-sum-norm. */
export type AggModeCode = 0 | 1 | 2 | 3 | 4;
/** 0 verl, 1 verl-legacy, 2 verl-agent. */
export type AggSemanticsCode = 0 | 1 | 2;
export interface PolicyLossPpoParams extends AsyncControl {
  logprob: Float32Array;
  oldLogprob: Float32Array;
  advantages: Float32Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  clipLow: number;
  clipHigh: number;
  /** Dual-clip constant (> 1). */
  clipC: number;
  /** Clamp of the log-ratio; absent: no clamp. */
  logRatioClamp?: number;
  /** Absent: this call's token count. */
  globalTokens?: number;
  /** Absent: this call's row count. */
  globalRows?: number;
  /** Absent: the longest row. */
  lossScaleFactor?: number;
  /** Absent: 1. */
  dpSize?: number;
  agg: AggModeCode;
  semantics: AggSemanticsCode;
  out?: Float32Array | null;
}
/** gear::PpoStats by name, with the per-token gradient. */
export interface PolicyLossPpoResult {
  grad: Float32Array;
  loss: number;
  /** Valid tokens. */
  tokens: number;
  /** Valid tokens whose clipped term was taken (pg_clipfrac numerator). */
  clipped: number;
  /** Valid tokens with A < 0 where the dual clip was taken (pg_clipfrac_lower numerator). */
  lower: number;
  /** Sum of -clamp(log ratio) over valid tokens (ppo_kl numerator). */
  negKl: number;
  ratioSum: number;
  ratioMin: number;
  ratioMax: number;
  /** The peer's loss is NaN for this input. */
  nan: boolean;
}

// ---- GEAR ----

/** The resolved GEAR options, enumerations as codes (native/include/gear/gear_scan.h). */
export interface GearScanOptions {
  klCap: number;
  /** 0 zscore, 1 quantile. */
  peakRule: 0 | 1;
  peakZ: number;
  peakMinKl: number;
  peakQuantile: number;
  entropyQuantile: number;
  /** Absent: the batch entropyQuantile quantile. */
  entropyThreshold?: number;
  /** 0 next_fork, 1 entropy_settles. */
  segmentEnd: 0 | 1;
  maxSegmentLength: number;
  alpha: number;
  dRefQuantile: number;
  /** 0 symmetric, 1 negative_only, 2 rlsd. */
  signMode: 0 | 1 | 2;
  epsW: number;
  /** 0 mean_one, 1 none. */
  normalize: 0 | 1;
  /** 0 none, 1 random_anchors, 2 fixed_length, 3 token_only. */
  ablation: 0 | 1 | 2 | 3;
  seed: number;
  /** 0: auto. */
  fixedSegmentLength: number;
  entropyLowQuantile: number;
  /** Absent: the batch entropyLowQuantile quantile. */
  entropyLowThreshold?: number;
}
export interface GearScanParams {
  advantages: Float64Array;
  offsets: Int32Array;
  mask?: Uint8Array | null;
  divergence: Float32Array;
  entropy: Float32Array;
  logratio?: Float32Array | null;
  options: GearScanOptions;
  out?: { advantages?: Float32Array | null; weights?: Float32Array | null; segmentId?: Int32Array | null } | null;
}
export interface GearScanQuantiles {
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}
/** gear::GearDiagnostics by name. */
export interface GearScanDiagnostics {
  validTokens: number;
  peaks: number;
  segments: number;
  tokensInSegments: number;
  weightMin: number;
  weightMax: number;
  entropyThreshold: number;
  entropyLowThreshold: number;
  dRef: number;
  peakKlThreshold: number;
  fixedSegmentLength: number;
  klQuantiles: GearScanQuantiles;
  entropyQuantiles: GearScanQuantiles;
}
export interface GearScanResult {
  advantages: Float32Array;
  weights: Float32Array;
  segmentId: Int32Array;
  anchors: Int32Array;
  diagnostics: GearScanDiagnostics;
}

// ---- optimizers ----

export interface AdamStepParams extends AsyncControl {
  params: readonly Float32Array[];
  grads: readonly Float32Array[];
  expAvg: readonly Float32Array[];
  expAvgSq: readonly Float32Array[];
  /** Required with amsgrad. */
  maxExpAvgSq?: readonly Float32Array[] | null;
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** The step being taken (>= 1). */
  step: number;
  decoupled: boolean;
  amsgrad: boolean;
  maximize: boolean;
}
export interface SgdStepParams extends AsyncControl {
  params: readonly Float32Array[];
  grads: readonly Float32Array[];
  /** Required when momentum is not 0. */
  momentumBuffer?: readonly Float32Array[] | null;
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
  firstStep: boolean;
}
export interface StepResult {
  /** Parameters updated. */
  tensors: number;
}
export interface GradNormParams {
  grads: readonly Float32Array[];
}
export interface ClipGradNormParams extends AsyncControl {
  grads: readonly Float32Array[];
  maxNorm: number;
  errorIfNonfinite: boolean;
  /** A Float64Array of 1 that also receives the norm. */
  out?: Float64Array | null;
}
export interface NormResult {
  /** Total L2 norm before clipping. */
  norm: number;
}

/** An op with a sync and an async form: the result, or a Promise of it when `async` is true. */
export interface AsyncOp<P extends AsyncControl, R> {
  (params: P & { async: true }): Promise<R>;
  (params: P & { async?: false }): R;
  (params: P): R | Promise<R>;
}

/** Every function the addon exports. */
export interface NativeAddon {
  setErrorClass(params: SetErrorClassParams): void;
  backend(): BackendResult;
  setNumThreads(params: SetNumThreadsParams): void;
  setIsa(params: SetIsaParams): string;
  memoryBandwidth(params: MemoryBandwidthParams): MemoryBandwidthResult;
  tokenStats: AsyncOp<TokenStatsParams, TokenStatsResult>;
  tokenStatsBackward: AsyncOp<TokenStatsBackwardParams, TokenStatsBackwardResult>;
  tokenStatsPartial: AsyncOp<TokenStatsPartialParams, TokenStatsPartialResult>;
  mergeTokenStats: AsyncOp<MergeTokenStatsParams, MergeTokenStatsResult>;
  divergence: AsyncOp<DivergenceParams, DivergenceResult>;
  divergenceBackward: AsyncOp<DivergenceBackwardParams, DivergenceBackwardResult>;
  sparseDivergence: AsyncOp<SparseDivergenceParams, SparseDivergenceResult>;
  sparseDivergenceBackward: AsyncOp<SparseDivergenceBackwardParams, SparseDivergenceBackwardResult>;
  segmentReduce: AsyncOp<SegmentReduceParams, SegmentReduceResult>;
  segmentBroadcast: AsyncOp<SegmentBroadcastParams, SegmentBroadcastResult>;
  policyLossPpo: AsyncOp<PolicyLossPpoParams, PolicyLossPpoResult>;
  gearScan(params: GearScanParams): GearScanResult;
  adamStep: AsyncOp<AdamStepParams, StepResult>;
  sgdStep: AsyncOp<SgdStepParams, StepResult>;
  gradNorm(params: GradNormParams): NormResult;
  clipGradNorm: AsyncOp<ClipGradNormParams, NormResult>;
  // The CUDA module only.
  cudaDevices?: () => CudaDevicesResult;
  cudaMemory?: (params: CudaDeviceParams) => CudaMemoryResult;
  cudaTrim?: (params: CudaDeviceParams) => void;
  cudaUpload?: AsyncOp<CudaUploadParams, NativeTensor>;
  cudaDownload?: AsyncOp<CudaDownloadParams, CudaDownloadResult>;
  cudaDispose?: (params: CudaDisposeParams) => void;
  cudaAllocHost?: (params: CudaAllocHostParams) => ArrayBuffer;
  /** Kernel time (ms, CUDA events) of the last call on device logits; -1 when there was none. */
  cudaKernelMs?: (params: CudaDeviceParams) => number;
  /** Copy bandwidth per repetition, GB/s: mode 0 device-to-device (read + write), 1 / 2 to the device from pinned / pageable, 3 / 4 back. */
  cudaBandwidth?: (params: CudaDeviceParams & { mode: 0 | 1 | 2 | 3 | 4; bytes: number; reps: number }) => Float64Array;
}
