/**
 * The arguments of TRL's `GRPOTrainer` losses ({@link trlLoss}, `policyLoss({ compat: 'trl' })`): their
 * types, and their reading (stage 1 of every TRL loss type: each argument read once, checked, and the
 * per-token advantages and row lengths derived).
 *
 * @module
 */
import { fail } from '../../core/errors.js';
import * as v from '../../core/validate.js';
import { type FloatArray, finite, floats, rowsOf } from '../inputs.js';

/**
 * TRL's `loss_type`.
 *
 * @category Losses
 */
export type TrlLossType = 'grpo' | 'bnpo' | 'dr_grpo' | 'dapo' | 'cispo' | 'sapo' | 'luspo' | 'vespo';
/** @internal TRL's loss types, in the order they are listed (each is the policy-loss kind `trl.<type>`). */
export const TRL_LOSS_TYPES: readonly TrlLossType[] = ['grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo', 'luspo', 'vespo'];

/**
 * Arguments of {@link trlLoss}. Per-token arrays have length N = `offsets[R]`.
 *
 * @category Losses
 */
export interface TrlLossArgs {
  /** Current policy log-probs ℓ (temperature-scaled, as TRL computes them). */
  logprob: FloatArray;
  /** Old policy log-probs; omit for on-policy training (TRL then uses sg(ℓ): ratio 1). */
  oldLogprob?: FloatArray;
  /** Reference log-probs (required when `beta != 0`). */
  refLogprob?: FloatArray;
  /**
   * Sampling (inference) log-probs for the off-policy mask (default: the old log-probs).
   *
   * @defaultValue the old log-probs
   */
  samplingLogprob?: FloatArray;
  /** Per-token entropies (required for the entropy mask and the entropy bonus; also logged). */
  entropy?: FloatArray;
  /** Advantages: one per row (length R, TRL's shape) or one per token (length N). */
  advantages: ArrayLike<number>;
  /** Packed rows, Int32Array of length R+1. For TRL's padded layout, give every row the padded length. */
  offsets: Int32Array;
  /** TRL's `completion_mask` (times `tool_mask`), 0/1. */
  mask?: Uint8Array;
  /**
   * Loss type (default `'dapo'`, TRL's default).
   *
   * @defaultValue `'dapo'`
   */
  lossType?: TrlLossType;
  /**
   * `'token'` (default) or `'sequence'` (GSPO) importance sampling.
   *
   * @defaultValue `'token'`
   */
  importanceSampling?: 'token' | 'sequence';
  /**
   * ε (default 0.2).
   *
   * @defaultValue `0.2`
   */
  epsilon?: number;
  /**
   * ε_high (default ε; for cispo the absolute cap on the ratio, recommended 5.0).
   *
   * @defaultValue `epsilon`
   */
  epsilonHigh?: number;
  /** Two-sided clipping (INTELLECT-2): the ratio is capped at `delta` (> 1 + ε_high recommended). */
  delta?: number;
  /**
   * KL coefficient (default 0).
   *
   * @defaultValue `0`
   */
  beta?: number;
  /**
   * Keep only the top-`q` entropy share of valid tokens (default 1 = off; 0 keeps the max-entropy token).
   *
   * @defaultValue `1`
   */
  topEntropyQuantile?: number;
  /** Off-policy sequence mask threshold (DeepSeek-V3.2); rows with A < 0 and mean KL above it are dropped. */
  offPolicyMaskThreshold?: number;
  /**
   * Multiply the KL by the importance ratio (DeepSeek-V3.2's unbiased KL).
   *
   * @defaultValue `false`
   */
  useBiasCorrectionKl?: boolean;
  /**
   * Entropy bonus coefficient (default 0 = off): `loss −= coef · mean entropy`.
   *
   * @defaultValue `0`
   */
  entropyCoef?: number;
  /**
   * SAPO temperature for A > 0 (default 1.0).
   *
   * @defaultValue `1`
   */
  sapoTemperaturePos?: number;
  /**
   * SAPO temperature for A <= 0 (default 1.05).
   *
   * @defaultValue `1.05`
   */
  sapoTemperatureNeg?: number;
  /**
   * VESPO k for A >= 0 (default 2).
   *
   * @defaultValue `2`
   */
  vespoKPos?: number;
  /**
   * VESPO λ for A >= 0 (default 3).
   *
   * @defaultValue `3`
   */
  vespoLambdaPos?: number;
  /**
   * VESPO k for A < 0 (default 3).
   *
   * @defaultValue `3`
   */
  vespoKNeg?: number;
  /**
   * VESPO λ for A < 0 (default 2).
   *
   * @defaultValue `2`
   */
  vespoLambdaNeg?: number;
  /**
   * dr_grpo's constant (TRL `max_completion_length`; default: the longest row's length).
   *
   * @defaultValue the longest row's length
   */
  maxCompletionLength?: number;
  /**
   * Gradient-accumulation steps dividing grpo/bnpo/dr_grpo/sapo/luspo losses (default 1).
   *
   * @defaultValue `1`
   */
  gradientAccumulationSteps?: number;
  /**
   * dapo/cispo/vespo: active tokens of the whole generation batch over all processes (default: this call's).
   *
   * @defaultValue this call's active tokens
   */
  numItemsInBatch?: number;
  /**
   * Number of processes dividing `numItemsInBatch` (default 1).
   *
   * @defaultValue `1`
   */
  numProcesses?: number;
}

/**
 * Result of {@link trlLoss}.
 *
 * @category Losses
 */
export interface TrlLossResult {
  /** The loss TRL back-propagates. */
  loss: number;
  /** d loss / d logprob per token (float type of `logprob`). */
  grad: FloatArray;
  /** d loss / d entropy per token, when the entropy bonus is on (else all zeros). */
  gradEntropy: FloatArray;
  /**
   * TRL's metric names: `entropy`, `kl` (beta != 0), `clip_ratio/low_mean`, `clip_ratio/high_mean`,
   * `clip_ratio/region_mean`, `clip_ratio/low_min`, `clip_ratio/high_max` (clipped loss types),
   * `cispo_clip_ratio`, `vespo/phi_seq_mean`, `policy_loss` and `entropy_coef` (entropy bonus).
   */
  metrics: Record<string, number>;
}

const KEYS = [
  'logprob', 'oldLogprob', 'refLogprob', 'samplingLogprob', 'entropy', 'advantages', 'offsets', 'mask', 'lossType',
  'importanceSampling', 'epsilon', 'epsilonHigh', 'delta', 'beta', 'topEntropyQuantile', 'offPolicyMaskThreshold',
  'useBiasCorrectionKl', 'entropyCoef', 'sapoTemperaturePos', 'sapoTemperatureNeg', 'vespoKPos', 'vespoLambdaPos',
  'vespoKNeg', 'vespoLambdaNeg', 'maxCompletionLength', 'gradientAccumulationSteps', 'numItemsInBatch', 'numProcesses',
  // aliases accepted through policyLoss({ compat: 'trl' })
  'clipLow', 'clipHigh',
] as const;

/**
 * @internal Validated inputs and options of one TRL loss call (stage 1), as the TRL kinds of the
 * policy-loss registry read them.
 */
export interface TrlInputs {
  lp: FloatArray; old: FloatArray; samp: FloatArray; ref: FloatArray | undefined; H: FloatArray | undefined;
  A: Float64Array; rowAdv: boolean; mask: Uint8Array | undefined; off: Int32Array;
  n: number; rows: number; onPolicy: boolean; len: Float64Array; nTok: number; maxLen: number;
  lossType: TrlLossType; level: 'token' | 'sequence';
  eps: number; epsHigh: number; delta: number | undefined; beta: number; q: number; opThr: number | undefined;
  biasKl: boolean; entCoef: number; tPos: number; tNeg: number; kPos: number; lPos: number; kNeg: number; lNeg: number;
  nMb: number; nProc: number; mcl: number;
  /** Active tokens of the whole generation batch (`numItemsInBatch`, default this call's). */
  numItems: number;
  mk: (t: number) => number;
}

/** @internal Stage 1: argument checks, per-token advantages and row lengths. */
export function trlInputs(args: TrlLossArgs & { clipLow?: number; clipHigh?: number }): TrlInputs {
  if (args === null || typeof args !== 'object') fail('ERR_OPTION', 'trlLoss', 'an arguments object', args);
  v.knownKeys(args, 'trlLoss', KEYS);
  // each argument read once, in a fixed order, before anything is checked
  const a = {} as TrlLossArgs & { clipLow?: number; clipHigh?: number };
  for (const k of KEYS) (a as unknown as Record<string, unknown>)[k] = (args as unknown as Record<string, unknown>)[k];
  a.advantages = v.readList(a.advantages) as ArrayLike<number>;
  const lp = floats(a.logprob, 'logprob');
  const n = lp.length;
  const rows = rowsOf(a.offsets, n);
  const off = a.offsets;
  const mask = v.optMask(a.mask, 'mask', n);
  const onPolicy = a.oldLogprob === undefined;
  const old = onPolicy ? lp : floats(a.oldLogprob, 'oldLogprob', n);
  const lossType = v.enumOpt(a.lossType, 'lossType', TRL_LOSS_TYPES, 'dapo');
  const level = v.enumOpt(a.importanceSampling, 'importanceSampling', ['token', 'sequence'] as const, 'token');
  const eps = v.numOpt(a.epsilon ?? a.clipLow, 'epsilon', 0.2, { min: 0 });
  const epsHigh = v.numOpt(a.epsilonHigh ?? a.clipHigh, 'epsilonHigh', eps, { min: 0 });
  const delta = a.delta === undefined ? undefined : v.numOpt(a.delta, 'delta', 0, { min: 0, minOpen: true });
  const beta = v.numOpt(a.beta, 'beta', 0);
  const q = v.numOpt(a.topEntropyQuantile, 'topEntropyQuantile', 1, { min: 0, max: 1 });
  const opThr = a.offPolicyMaskThreshold === undefined ? undefined : v.numOpt(a.offPolicyMaskThreshold, 'offPolicyMaskThreshold', 0);
  const biasKl = a.useBiasCorrectionKl ?? false;
  if (typeof biasKl !== 'boolean') fail('ERR_OPTION', 'useBiasCorrectionKl', 'a boolean', biasKl);
  const entCoef = v.numOpt(a.entropyCoef, 'entropyCoef', 0);
  const tPos = v.numOpt(a.sapoTemperaturePos, 'sapoTemperaturePos', 1.0, { min: 0, minOpen: true });
  const tNeg = v.numOpt(a.sapoTemperatureNeg, 'sapoTemperatureNeg', 1.05, { min: 0, minOpen: true });
  const kPos = v.numOpt(a.vespoKPos, 'vespoKPos', 2);
  const lPos = v.numOpt(a.vespoLambdaPos, 'vespoLambdaPos', 3);
  const kNeg = v.numOpt(a.vespoKNeg, 'vespoKNeg', 3);
  const lNeg = v.numOpt(a.vespoLambdaNeg, 'vespoLambdaNeg', 2);
  const nMb = v.numOpt(a.gradientAccumulationSteps, 'gradientAccumulationSteps', 1, { min: 1, int: true });
  const nProc = v.numOpt(a.numProcesses, 'numProcesses', 1, { min: 1, int: true });
  let maxLen = 0;
  for (let i = 0; i < rows; i++) maxLen = Math.max(maxLen, off[i + 1]! - off[i]!);
  const mcl = v.numOpt(a.maxCompletionLength, 'maxCompletionLength', Math.max(maxLen, 1), { min: 0, minOpen: true });

  // advantages: per row (TRL's (B,1)) or per token ((B,T))
  const advIn = v.numArray(a.advantages, 'advantages');
  const rowAdv = advIn.length === rows && !(advIn.length === n && rows !== n) ? true : advIn.length === n ? false : fail(
    'ERR_SHAPE', 'advantages.length', `the row count ${rows} or the token count ${n}`, advIn.length);
  const A = new Float64Array(n);
  for (let i = 0; i < rows; i++) for (let t = off[i]!; t < off[i + 1]!; t++) A[t] = rowAdv ? advIn[i]! : advIn[t]!;
  finite(rowAdv ? advIn : A, 'advantages', rowAdv ? undefined : mask);

  const ref = beta !== 0 ? floats(a.refLogprob ?? fail('ERR_OPTION', 'refLogprob', 'an array when beta != 0', undefined), 'refLogprob', n) : undefined;
  const needH = q < 1 || entCoef !== 0;
  const H = a.entropy === undefined
    ? (needH ? fail('ERR_OPTION', 'entropy', 'an array (needed by topEntropyQuantile < 1 or entropyCoef != 0)', undefined) : undefined)
    : floats(a.entropy, 'entropy', n);
  const samp = a.samplingLogprob === undefined ? old : floats(a.samplingLogprob, 'samplingLogprob', n);
  finite(lp, 'logprob', mask);
  if (!onPolicy) finite(old, 'oldLogprob', mask);
  if (ref) finite(ref, 'refLogprob', mask);
  if (H) finite(H, 'entropy', mask);
  if (a.samplingLogprob !== undefined) finite(samp, 'samplingLogprob', mask);

  const mk = (t: number) => (mask === undefined ? 1 : mask[t]!);
  const len = new Float64Array(rows);
  let nTok = 0;
  for (let i = 0; i < rows; i++) {
    let c = 0;
    for (let t = off[i]!; t < off[i + 1]!; t++) c += mk(t);
    len[i] = c;
    nTok += c;
  }
  // Checked last: every check above comes first whichever arguments are bad.
  const numItems = a.numItemsInBatch === undefined ? nTok : v.numOpt(a.numItemsInBatch, 'numItemsInBatch', nTok, { min: 0 });
  return {
    lp, old, samp, ref, H, A, rowAdv, mask, off, n, rows, onPolicy, len, nTok, maxLen, lossType, level,
    eps, epsHigh, delta, beta, q, opThr, biasKl, entCoef, tPos, tNeg, kPos, lPos, kNeg, lNeg, nMb, nProc, mcl, numItems, mk,
  };
}
