// trlLoss (and policyLoss with flavor 'trl') against TRL GRPOTrainer._compute_loss golden vectors.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { expectClose, expectCloseScalar, loadPeer, type PeerCase } from '../helpers/peer.js';
import { f64, padded, scalar, u8 } from './helpers.js';

// Metrics TRL computes in float32 (`.float()`) are compared at the README's float32 tolerance.
const F32_METRICS = new Set([
  'clip_ratio/low_mean', 'clip_ratio/high_mean', 'clip_ratio/region_mean', 'clip_ratio/low_min', 'clip_ratio/high_max',
  'cispo_clip_ratio', 'vespo/phi_seq_mean',
]);

function argsOf(c: PeerCase): rl.TrlLossArgs {
  const p = c.params;
  const { off } = padded(c.inputs.per_token_logps);
  const a: rl.TrlLossArgs = {
    logprob: f64(c.inputs.per_token_logps),
    entropy: f64(c.inputs.entropies),
    refLogprob: f64(c.inputs.ref_per_token_logps),
    advantages: f64(c.inputs.advantages),
    offsets: off,
    mask: u8(c.inputs.completion_mask),
    lossType: p.loss_type,
    numItemsInBatch: scalar(c.inputs.num_items_in_batch),
  };
  if (c.inputs.old_per_token_logps !== null && c.inputs.old_per_token_logps !== undefined && p.old_per_token_logps !== null) {
    a.oldLogprob = f64(c.inputs.old_per_token_logps);
  }
  if (p.importance_sampling_level !== undefined) a.importanceSampling = p.importance_sampling_level;
  if (p.beta !== undefined) a.beta = p.beta;
  if (p.epsilon_low !== undefined) a.epsilon = p.epsilon_low;
  if (p.epsilon_high !== undefined) a.epsilonHigh = p.epsilon_high;
  if (p.max_completion_length !== undefined) a.maxCompletionLength = p.max_completion_length;
  if (p.args_delta !== undefined) a.delta = p.args_delta;
  if (p.top_entropy_quantile !== undefined) a.topEntropyQuantile = p.top_entropy_quantile;
  if (p.off_policy_mask_threshold !== undefined) a.offPolicyMaskThreshold = p.off_policy_mask_threshold;
  if (p.args_use_bias_correction_kl !== undefined) a.useBiasCorrectionKl = p.args_use_bias_correction_kl;
  if (p.args_sapo_temperature_pos !== undefined) a.sapoTemperaturePos = p.args_sapo_temperature_pos;
  if (p.args_sapo_temperature_neg !== undefined) a.sapoTemperatureNeg = p.args_sapo_temperature_neg;
  if (p.current_gradient_accumulation_steps !== undefined) a.gradientAccumulationSteps = p.current_gradient_accumulation_steps;
  if (p.entropy_coef !== undefined) a.entropyCoef = p.entropy_coef;
  return a;
}

describe('trl_grpo_loss.json', () => {
  const cases = loadPeer('trl_grpo_loss.json').cases;
  it('has every case', () => expect(cases.length).toBe(40));
  for (const c of cases) {
    it(c.name, () => {
      const a = argsOf(c);
      const out = rl.trlLoss(a);
      const o = c.outputs!;
      expectCloseScalar(out.loss, scalar(o.loss), { rtol: 1e-12, atol: 1e-15, what: 'loss' });
      expectClose(out.grad, f64(o.grad_per_token_logps), { rtol: 1e-10, atol: 1e-15, what: 'grad' });
      if (o.grad_entropies !== undefined) {
        expectClose(out.gradEntropy, f64(o.grad_entropies), { rtol: 1e-12, atol: 1e-15, what: 'grad_entropies' });
      }
      for (const [k, want] of Object.entries(o.metrics as Record<string, number[]>)) {
        expect(out.metrics[k], `metric ${k}`).toBeDefined();
        const rtol = F32_METRICS.has(k) ? 1e-6 : 1e-12;
        expectCloseScalar(out.metrics[k]!, want[0]!, { rtol, atol: 1e-15, what: k });
      }
      // the same through policyLoss({ flavor: 'trl' })
      const via = rl.policyLoss({ flavor: 'trl', ...(a as any) });
      expect(via.loss).toBe(out.loss);
    });
  }
});
