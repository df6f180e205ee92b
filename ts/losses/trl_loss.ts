/**
 * TRL `GRPOTrainer._compute_loss` semantics over packed rows: loss types grpo, bnpo, dr_grpo, dapo,
 * cispo, sapo, luspo, vespo; token- or sequence-level importance sampling; two-sided `delta`; `beta`
 * with TRL's per-token k3 KL (no clamps) added before the reduction; top-entropy-quantile masking;
 * the off-policy sequence mask; bias-corrected KL; the entropy bonus; gradient-accumulation
 * normalisers. Returns the loss, d loss / d logprob (and d loss / d entropy) and TRL's metrics.
 *
 * Each loss type is a kind of the policy-loss registry (`trl.dapo`, ...: `./trl/kinds.ts`, over the
 * steps they share in `./trl/steps.ts`); this entry reads TRL's arguments (`./trl/args.ts`) and runs the
 * kind its `lossType` names, as `policyLoss({ compat: 'trl' })` does.
 *
 * @module
 */
import './policy/builtins.js';
import { policyLosses } from './policy/registry.js';
import { type TrlLossArgs, type TrlLossResult, trlInputs } from './trl/args.js';
import { trlContext, trlKindName } from './trl/kinds.js';

export type { TrlLossArgs, TrlLossResult, TrlLossType } from './trl/args.js';
export { quantileLinear } from './trl/steps.js';

/**
 * TRL `GRPOTrainer` loss (see the module comment). The layout is packed rows; TRL's padded `(B, T)`
 * layout is the special case where every row has the padded length T and the mask marks padding.
 * Two TRL quirks are reproduced on purpose: `luspo` with a per-token loss averages over all B·T
 * entries including padding, and `dr_grpo` divides by `B · maxCompletionLength`.
 *
 * @param a inputs and TRL options
 * @returns loss, gradients and metrics
 * @example
 * ```ts
 * import * as rl from 'gear-rl';
 *
 * // TRL GRPOTrainer layout: one advantage per row, padded rows with a completion mask
 * const offsets = Int32Array.of(0, 3, 6);
 * const mask = Uint8Array.of(1, 1, 1, 1, 1, 0);
 * const logprob = Float32Array.of(-1, -0.4, -2, -0.3, -0.9, 0);
 * const { loss, grad, metrics } = rl.trlLoss({
 *   logprob, oldLogprob: logprob, advantages: [0.7, -0.7], offsets, mask,
 *   lossType: 'dapo', epsilon: 0.2, epsilonHigh: 0.28,
 * });
 * console.log(loss, grad, metrics['clip_ratio/region_mean']);
 * ```
 * @category Losses
 */
export function trlLoss(a: TrlLossArgs & { clipLow?: number; clipHigh?: number }): TrlLossResult {
  const p = trlInputs(a);
  return policyLosses.get(trlKindName(p.lossType)).reduce!(trlContext(p)) as TrlLossResult;
}
