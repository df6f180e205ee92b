/**
 * Argument and result types of {@link policyLoss}, shared by the loss kinds in this folder.
 *
 * @module
 */
import type { AggMode } from '../aggregate.js';
import type { Compat, Semantics } from '../compat.js';
import type { FloatArray } from '../inputs.js';
import type { RolloutCorrection } from './rollout_correction.js';

/**
 * The built-in loss families (verl's `loss_mode` names `vanilla` and `geo_mean` are accepted as aliases);
 * `listPolicyLosses()` also lists the kinds registered with `registerPolicyLoss`.
 *
 * @category Losses
 */
export type PolicyLossKind =
  | 'ppo' | 'vanilla' | 'gspo' | 'sapo' | 'gpg' | 'cispo' | 'gmpo' | 'geo_mean'
  | 'clip_cov' | 'kl_cov' | 'dppo_tv' | 'dppo_kl' | 'dro';

/**
 * Every built-in {@link PolicyLossKind} name, aliases included.
 *
 * @category Losses
 */
export const POLICY_LOSS_KINDS: readonly PolicyLossKind[] = [
  'ppo', 'vanilla', 'gspo', 'sapo', 'gpg', 'cispo', 'gmpo', 'geo_mean', 'clip_cov', 'kl_cov', 'dppo_tv', 'dppo_kl', 'dro',
];

/**
 * Arguments of {@link policyLoss}. Everything per token is length N = `offsets[R]`.
 *
 * @category Losses
 */
export interface PolicyLossArgs {
  /** Current policy log-probs ℓ (the variable the gradient is taken with respect to). */
  logprob: FloatArray;
  /** Old / behaviour policy log-probs ℓ_old. */
  oldLogprob: FloatArray;
  /** Per-token advantages (broadcast row advantages with `segmentBroadcast`). */
  advantages: FloatArray;
  /** Packed rows, Int32Array of length R+1. */
  offsets: Int32Array;
  /** Optional 0/1 loss mask (1 = a generated token that counts). */
  mask?: Uint8Array;
  /**
   * The loss (default `'ppo'`): a built-in {@link PolicyLossKind} or a name registered with {@link registerPolicyLoss}.
   *
   * @defaultValue `'ppo'`
   */
  kind?: PolicyLossKind | (string & {});
  /**
   * ε_low (default 0.2; verl's `clip_ratio_low ?? clip_ratio`). Must be >= 0.
   *
   * @defaultValue `0.2`
   */
  clipLow?: number;
  /**
   * ε_high (default = clipLow; verl's `clip_ratio_high ?? clip_ratio`). Must be >= 0.
   *
   * @defaultValue `clipLow`
   */
  clipHigh?: number;
  /**
   * Dual-clip constant c for A < 0 (ppo; default 3, must be > 1) or the DPPO truncation (default 20).
   *
   * @defaultValue `3` (ppo's dual clip; `20` for the DPPO truncation)
   */
  clipC?: number;
  /**
   * ±clamp of the log-ratio before exp (default 20; `null` = none, verl-agent's PPO).
   *
   * @defaultValue `20`
   */
  logRatioClamp?: number | null;
  /**
   * Aggregation mode (default `'token-mean'`; GSPO and SAPO always use `'seq-mean-token-mean'`, GMPO its own).
   *
   * @defaultValue `'token-mean'`
   */
  agg?: AggMode;
  /**
   * Global token count for `token-mean` across micro-batches / ranks.
   *
   * @defaultValue this call's valid tokens
   */
  globalTokens?: number;
  /**
   * Global non-empty row count for the `seq-mean-*` modes (and GMPO's row mean: then all rows of the global batch).
   *
   * @defaultValue this call's non-empty rows
   */
  globalRows?: number;
  /**
   * `seq-mean-token-sum-norm` divisor (default: the longest row's length).
   *
   * @defaultValue the longest row's length
   */
  lossScaleFactor?: number;
  /**
   * Data-parallel multiplier (verl's `dp_size`, default 1).
   *
   * @defaultValue `1`
   */
  dpSize?: number;
  /**
   * Which peer to follow (docs/compat.md): `'verl'` (default), `'verl-legacy'`, `'verl-agent'` (aggregation,
   * PPO clamp), or `'trl'`: the arguments are then those of {@link trlLoss} (TRL's `GRPOTrainer` losses).
   *
   * @defaultValue `'verl'`
   */
  compat?: Compat;
  /** @deprecated Use `compat` (same values but `'trl'`). */
  semantics?: Semantics;
  /** Per-token importance weights applied (detached) to each token's loss, e.g. from rollout correction. */
  isWeights?: FloatArray;
  /**
   * Compute rollout-correction weights inside the loss (see {@link RolloutCorrection}); with its
   * `rejection`, the rejected tokens also leave the loss mask (and so the aggregation's token counts and
   * the loss metrics), as verl's rejection sampling does.
   */
  rolloutCorrection?: RolloutCorrection;
  /**
   * SAPO temperature for A > 0 (default 1.0).
   *
   * @defaultValue `1`
   */
  tauPos?: number;
  /**
   * SAPO temperature for A <= 0 (default 1.05).
   *
   * @defaultValue `1.05`
   */
  tauNeg?: number;
  /**
   * Clip-Cov: share of valid tokens whose gradient is removed (default 2e-4).
   *
   * @defaultValue `2e-4`
   */
  clipCovRatio?: number;
  /**
   * Clip-Cov: lower covariance bound (default 1.0).
   *
   * @defaultValue `1`
   */
  clipCovLb?: number;
  /**
   * Clip-Cov: upper covariance bound (default 5.0).
   *
   * @defaultValue `5`
   */
  clipCovUb?: number;
  /**
   * Clip-Cov: seed of the random pick among candidates (default 0). When every candidate is picked the
   * result does not depend on it; otherwise the pick is a seeded partial Fisher-Yates shuffle (verl
   * uses `torch.randperm`, which cannot be reproduced bit for bit).
   *
   * @defaultValue `0`
   */
  seed?: number;
  /**
   * KL-Cov: share of valid tokens that get the |δ| penalty (default 2e-4).
   *
   * @defaultValue `2e-4`
   */
  klCovRatio?: number;
  /**
   * KL-Cov: coefficient of |δ| (default 1.0, verl's function fallback; its config uses 0.1).
   *
   * @defaultValue `1`
   */
  ppoKlCoef?: number;
  /** DRO: β (required, > 0). */
  droBeta?: number;
  /**
   * @deprecated Use `compat` (`flavor: 'trl'` is `compat: 'trl'`). `'verl'` (default) or `'trl'`: with
   * `'trl'` the arguments are those of {@link trlLoss}.
   *
   * @defaultValue `'verl'`
   */
  flavor?: 'verl' | 'trl';
  /**
   * Use the fused native kernel when it applies (default true).
   *
   * @defaultValue `true`
   */
  native?: boolean;
  /**
   * Gradient output to fill instead of allocating one (same float type as `logprob`, length N, not
   * overlapping an input), returned as `grad`; its contents are unspecified after an error. Reusing one
   * across steps saves the allocation and its first-touch page faults, a large share of the fused
   * pass's time at 10^7 tokens. verl losses only (not `compat: 'trl'`).
   */
  out?: FloatArray;
}

/**
 * Result of {@link policyLoss}.
 *
 * @category Losses
 */
export interface PolicyLossResult<G extends FloatArray = FloatArray> {
  /** The aggregated loss. */
  loss: number;
  /** d loss / d logprob per token (same float type as `logprob`; 0 on masked tokens). */
  grad: G;
  /**
   * Metrics under stable names: `pg_clipfrac`, `pg_clipfrac_lower`, `ppo_kl` (verl's masked means, with
   * its `+1e-8`), `ratio_mean`, `ratio_min`, `ratio_max` (over valid tokens), and `rollout_is_*` when a
   * rollout correction is applied (`rollout_rs_*` with its rejection sampling).
   */
  metrics: Record<string, number>;
}

/** @internal The argument names of {@link policyLoss} (a registered loss may add its own). */
export const POLICY_LOSS_ARG_KEYS = [
  'logprob', 'oldLogprob', 'advantages', 'offsets', 'mask', 'kind', 'clipLow', 'clipHigh', 'clipC', 'logRatioClamp',
  'agg', 'globalTokens', 'globalRows', 'lossScaleFactor', 'dpSize', 'compat', 'semantics', 'isWeights', 'rolloutCorrection',
  'tauPos', 'tauNeg', 'clipCovRatio', 'clipCovLb', 'clipCovUb', 'seed', 'klCovRatio', 'ppoKlCoef', 'droBeta', 'flavor',
  'native', 'out',
] as const;

/** @internal Per-token loss terms of a built-in kind before aggregation. */
export interface Terms {
  L: Float64Array;   // per-token loss
  dL: Float64Array;  // d L_t / d ℓ_t
  metrics: Record<string, number>;
  forcedAgg?: AggMode;
}

/**
 * The shared numeric options of {@link policyLoss}, validated and with their defaults filled in, as a
 * registered loss receives them in {@link PolicyLossContext.options}.
 *
 * @category Losses
 */
export interface ResolvedPolicyLossOptions {
  /** The canonical kind name (aliases resolved). */
  kind: string;
  /** ε_low. */
  lo: number;
  /** ε_high. */
  hi: number;
  /** Dual-clip constant (or the DPPO truncation). */
  c: number;
  /** ±clamp of the log-ratio before exp (`Infinity` = none). */
  clamp: number;
  /** SAPO temperature for A > 0. */
  tauPos: number;
  /** SAPO temperature for A <= 0. */
  tauNeg: number;
  /** Clip-Cov share of valid tokens. */
  clipCovRatio: number;
  /** Clip-Cov lower covariance bound. */
  clipCovLb: number;
  /** Clip-Cov upper covariance bound. */
  clipCovUb: number;
  /** Clip-Cov seed. */
  seed: number;
  /** KL-Cov share of valid tokens. */
  klCovRatio: number;
  /** KL-Cov coefficient. */
  ppoKlCoef: number;
  /** DRO β (0 for the other kinds). */
  droBeta: number;
}

/** @internal Short name of {@link ResolvedPolicyLossOptions} inside the kind files. */
export type Opts = ResolvedPolicyLossOptions;
