/**
 * Policy-gradient losses with verl semantics (PPO clip with dual clip, GSPO, SAPO, GPG, CISPO, GMPO,
 * Clip-Cov, KL-Cov, DPPO-TV/KL, DRO), each returning the loss, d loss / d logprob per token and the
 * metrics verl logs. TRL's `GRPOTrainer` losses are reachable with `compat: 'trl'` (see {@link trlLoss}):
 * each loss type is a kind of the same registry (`trl.<lossType>`, `../trl/kinds.ts`). One file per kind
 * in this folder registers it with {@link registerPolicyLoss}; user kinds plug in the same way.
 *
 * The TypeScript path is float64 throughout. Float32 inputs give a float32 gradient; float64 inputs a
 * float64 one. The common case (kind `ppo`, float32, no importance weights) runs in one fused native pass
 * whose per-token math is float32 (as verl's torch loss), with float64 sums (see {@link policyLoss}).
 *
 * @module
 */
import type { trlLoss } from '../trl_loss.js';
import { ppoSettings } from './ppo.js';
import { policyLossPpoNative } from './ppo_native.js';
import type { registerPolicyLoss } from './registry.js';
import { policyLossTs, prepare } from './run.js';
import type { PolicyLossArgs, PolicyLossResult } from './types.js';

export { policyLossAsync } from './ppo_native.js';
export type { PolicyLossAsyncOptions } from './ppo_native.js';
export { rolloutCorrectionWeights } from './rollout_correction.js';
export type { RolloutCorrection, RolloutCorrectionResult } from './rollout_correction.js';
export { POLICY_LOSS_KINDS } from './builtins.js';
export type { PolicyLossArgs, PolicyLossResult, PolicyLossKind } from './types.js';
export type { ClipRangeOptions } from './clip.js';
export type { PpoOptions } from './ppo.js';
export type { SapoOptions } from './sapo.js';
export type { ClipCovOptions } from './clip_cov.js';
export type { KlCovOptions } from './kl_cov.js';
export type { DroOptions } from './dro.js';
export { registerPolicyLoss, unregisterPolicyLoss, getPolicyLoss, listPolicyLosses } from './registry.js';
export type {
  PolicyLossDefinition, PolicyLossContext, PolicyLossTerms, PolicyLossReduction, RegisterPolicyLossOptions,
  ResolvedPolicyLossOptions,
} from './registry.js';

/**
 * Policy-gradient loss with its gradient with respect to the current log-probs.
 *
 * Kinds (verl `core_algos`, δ = ℓ − ℓ_old): `ppo` PPO clip `max(−Aρ, −A clip(ρ, 1−ε_low, 1+ε_high))`
 * with dual clip `min(·, −A c)` for A < 0 and ρ = exp(clamp(δ, ±20)); `gspo` sequence-level ratio;
 * `sapo` soft gate; `gpg` −Aℓ; `cispo` −sg(clip(ρ))·A·ℓ; `gmpo` geometric-mean ratio per row;
 * `clip_cov` / `kl_cov` covariance-selected clipping / KL; `dppo_tv` / `dppo_kl` probability-divergence
 * trust region with truncated IS; `dro` −(ℓA − ½β δ²). The gradient reproduces autograd's, including
 * torch's even split at `max`/`min` ties and zero gradient where a clamp is active. A kind registered
 * with {@link registerPolicyLoss} runs through the same checks, weights and aggregation; its own
 * options are validated against its schema.
 *
 * Precision: float64 inputs (and every kind but `ppo`, or `ppo` with importance weights or `native: false`)
 * use the float64 TypeScript path. Kind `ppo` on float32 inputs uses the fused native pass: ratio, clip
 * terms and gradient are computed per token in float32, as verl does in torch float32 (its vector exp is
 * within ~1 ulp; the baseline ISA uses the C library's), while the loss accumulates w·L in float64 and
 * the metric sums (`ppo_kl`, `ratio_mean`) in float32 groups of a few tokens moved into float64, over a
 * fixed block partition, so results are bit-identical for any thread count. Against the float64 path
 * the loss agrees within a few float32 ulps of Σ|w·L| (each token's float32 term carries its own
 * rounding, so a loss that cancels between tokens of opposite sign can differ by more than that
 * relative to its own size) and the gradient within a few float32 ulps (1e-6 relative); a ratio within
 * rounding of a clip bound may fall on the other side. A ratio that overflows float32 (δ > 88.7 with
 * the log-ratio clamp off) gives the float64 path's zero gradient where its derivative is zero, and a
 * zero term where the advantage is zero. A large reused `out`
 * is written with streaming stores (see the README on reusing outputs).
 *
 * Bad input throws `GearError`: mismatched lengths `ERR_SHAPE`, wrong array types `ERR_DTYPE`, bad offsets
 * `ERR_OFFSETS`, NaN/Infinity on valid tokens `ERR_NON_FINITE`, unknown kinds/modes and out-of-range
 * options (negative clip values, `clipC <= 1`) `ERR_OPTION`.
 *
 * @param a inputs and options (see {@link PolicyLossArgs})
 * @returns loss, d loss / d logprob and metrics
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // two rows of 3 and 2 tokens; token 2 is a tool token (mask 0)
 * const offsets = Int32Array.of(0, 3, 5);
 * const mask = Uint8Array.of(1, 1, 0, 1, 1);
 * const logprob = Float32Array.of(-1.2, -0.7, -2, -0.3, -1.5);
 * const oldLogprob = Float32Array.of(-1.1, -0.9, -2, -0.3, -1.2);
 * const advantages = rl.segmentBroadcast([1, -1], offsets, mask);
 * const { loss, grad, metrics } = rl.policyLoss({
 *   logprob, oldLogprob, advantages, offsets, mask,
 *   kind: 'ppo', clipLow: 0.2, clipHigh: 0.28, agg: 'token-mean',
 * });
 * console.log(loss, grad, metrics.pg_clipfrac); // grad: d loss / d logprob, a Float32Array like logprob
 *
 * // other kinds take their own options; float64 inputs give a float64 gradient
 * const gspo = rl.policyLoss({ logprob: Float64Array.from(logprob), oldLogprob, advantages, offsets, mask, kind: 'gspo' });
 * console.log(gspo.grad instanceof Float64Array); // true
 * ```
 * @category Losses
 */
export function policyLoss(a: PolicyLossArgs & { logprob: Float32Array }): PolicyLossResult<Float32Array>;
/** Float64 log-probs: the float64 path, and the gradient as a Float64Array (described with the first signature). */
export function policyLoss(a: PolicyLossArgs & { logprob: Float64Array }): PolicyLossResult<Float64Array>;
/** Log-probs of either float type (described with the first signature). */
export function policyLoss(a: PolicyLossArgs): PolicyLossResult;
export function policyLoss(a: PolicyLossArgs): PolicyLossResult {
  const p = prepare(a);
  if ('trl' in p) return p.trl;
  if (p.useNative) {
    return policyLossPpoNative(p.lp as Float32Array, p.old as Float32Array, p.A as Float32Array, p.offsets, p.mask,
      ppoSettings(p.args), p.agg, p.aggOpts, p.out as Float32Array | undefined);
  }
  return policyLossTs(p);
}
