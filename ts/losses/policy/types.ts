/**
 * Argument and result types of {@link policyLoss}: its arguments extend the options interface of each
 * built-in kind (declared in the kind's file, below this one).
 *
 * @module
 */
import type { AggMode } from '../aggregate.js';
import type { Compat, Semantics } from '../compat.js';
import type { FloatArray } from '../inputs.js';
import type { ClipCovOptions } from './clip_cov.js';
import type { DroOptions } from './dro.js';
import type { KlCovOptions } from './kl_cov.js';
import type { PpoOptions } from './ppo.js';
import type { RolloutCorrection } from './rollout_correction.js';
import type { SapoOptions } from './sapo.js';

/**
 * The built-in loss families (verl's `loss_mode` names `vanilla` and `geo_mean` are accepted as aliases);
 * `listPolicyLosses()` also lists TRL's loss types (`trl.dapo`, ...: they run with `compat: 'trl'`) and
 * the kinds registered with `registerPolicyLoss`.
 *
 * @category Losses
 */
export type PolicyLossKind =
  | 'ppo' | 'vanilla' | 'gspo' | 'sapo' | 'gpg' | 'cispo' | 'gmpo' | 'geo_mean'
  | 'clip_cov' | 'kl_cov' | 'dppo_tv' | 'dppo_kl' | 'dro';

/**
 * Arguments of {@link policyLoss}. Everything per token is length N = `offsets[R]`. The options of
 * each built-in kind are declared with that kind ({@link PpoOptions} for the clipped kinds,
 * {@link SapoOptions}, {@link ClipCovOptions}, {@link KlCovOptions}, {@link DroOptions}); every one of
 * them is checked whichever kind runs, so a typo never passes silently.
 *
 * @category Losses
 */
export interface PolicyLossArgs extends PpoOptions, SapoOptions, ClipCovOptions, KlCovOptions, DroOptions {
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
