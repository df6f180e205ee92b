// policyLoss against the verl, legacy-verl and verl-agent golden vectors: loss, gradient and metrics.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { expectClose, expectCloseScalar, loadPeer, type PeerCase } from '../helpers/peer.js';
import { expectGearError, f64, padded, scalar, u8 } from './helpers.js';

const KIND: Record<string, rl.PolicyLossKind> = {
  compute_policy_loss_vanilla: 'ppo', compute_policy_loss: 'ppo', compute_policy_loss_gspo: 'gspo',
  compute_policy_loss_sapo: 'sapo', compute_policy_loss_gpg: 'gpg', compute_policy_loss_cispo: 'cispo',
  compute_policy_loss_geo_mean: 'gmpo', compute_policy_loss_dppo_tv: 'dppo_tv', compute_policy_loss_dppo_kl: 'dppo_kl',
  compute_policy_loss_dro: 'dro', compute_policy_loss_kl_cov: 'kl_cov', compute_policy_loss_clip_cov: 'clip_cov',
};

function argsOf(c: PeerCase, semantics: rl.Semantics): rl.PolicyLossArgs {
  const p = c.params;
  const { off } = padded(c.inputs.log_prob);
  const base = p.clip_ratio ?? p.cliprange ?? 0.2;
  const args: rl.PolicyLossArgs = {
    logprob: f64(c.inputs.log_prob), oldLogprob: f64(c.inputs.old_log_prob), advantages: f64(c.inputs.advantages),
    offsets: off, mask: u8(c.inputs.response_mask), kind: KIND[c.function]!, semantics,
    clipLow: p.clip_ratio_low ?? p.cliprange_low ?? base,
    clipHigh: p.clip_ratio_high ?? p.cliprange_high ?? base,
  };
  if (p.clip_ratio_c !== undefined) args.clipC = p.clip_ratio_c;
  const mode = String(p.loss_agg_mode ?? 'token-mean');
  if (!mode.includes('ignored')) args.agg = mode as rl.AggMode;
  const pl = p.policy_loss ?? {};
  if (pl.dro_beta !== undefined) args.droBeta = pl.dro_beta;
  if (pl.kl_cov_ratio !== undefined) args.klCovRatio = pl.kl_cov_ratio;
  if (pl.ppo_kl_coef !== undefined) args.ppoKlCoef = pl.ppo_kl_coef;
  if (pl.clip_cov_ratio !== undefined) args.clipCovRatio = pl.clip_cov_ratio;
  if (pl.clip_cov_lb !== undefined) args.clipCovLb = pl.clip_cov_lb;
  if (pl.clip_cov_ub !== undefined) args.clipCovUb = pl.clip_cov_ub;
  return args;
}

function check(c: PeerCase, semantics: rl.Semantics) {
  const args = argsOf(c, semantics);
  const out = rl.policyLoss(args);
  const o = c.outputs!;
  expectCloseScalar(out.loss, scalar(o.loss), { rtol: 1e-12, atol: 1e-15, what: 'loss' });
  expectClose(out.grad, f64(o.grad_log_prob), { rtol: 1e-10, atol: 1e-15, what: 'grad' });
  const metrics: Record<string, number> = {};
  for (const [k, val] of Object.entries(o.metrics ?? {})) metrics[k.replace('actor/', '')] = val as number;
  for (const k of ['pg_clipfrac', 'ppo_kl', 'pg_clipfrac_lower']) if (o[k] !== undefined) metrics[k] = scalar(o[k]);
  for (const [k, want] of Object.entries(metrics)) {
    expect(out.metrics[k], `metric ${k}`).toBeDefined();
    expectCloseScalar(out.metrics[k]!, want, { rtol: 1e-12, atol: 1e-15, what: k });
  }
  // the float32 path (native for ppo) agrees with the float64 result to float32 accuracy
  if (args.kind === 'ppo') {
    const o32 = rl.policyLoss({
      ...args, logprob: Float32Array.from(args.logprob), oldLogprob: Float32Array.from(args.oldLogprob),
      advantages: Float32Array.from(args.advantages),
    });
    expect(o32.grad).toBeInstanceOf(Float32Array);
    const ref32 = rl.policyLoss({
      ...args, native: false, logprob: Float32Array.from(args.logprob), oldLogprob: Float32Array.from(args.oldLogprob),
      advantages: Float32Array.from(args.advantages),
    });
    // native per-token math is float32 (as verl's torch loss), the reference float64 on the same inputs
    expectCloseScalar(o32.loss, ref32.loss, { rtol: 1e-6, atol: 1e-12, what: 'native loss' });
    expectClose(o32.grad, ref32.grad, { rtol: 1e-6, atol: 1e-9, what: 'native grad' });
  }
}

function suite(file: string, semantics: rl.Semantics, filter: (c: PeerCase) => boolean = () => true) {
  describe(`${file} (${semantics})`, () => {
    const cases = loadPeer(file).cases.filter(filter);
    it('has cases', () => expect(cases.length).toBeGreaterThan(0));
    for (const c of cases) {
      it(c.name, () => {
        if (c.error !== undefined) {
          // every error case is an out-of-range option
          expectGearError(() => rl.policyLoss({ ...argsOf({ ...c, inputs: dummyInputs() }, semantics), clipC: c.params.clip_ratio_c }), 'ERR_OPTION');
          return;
        }
        check(c, semantics);
      });
    }
  });
}

function dummyInputs() {
  const t = (d: number[]) => ({ dtype: 'float64', shape: [1, d.length], data: d });
  return { log_prob: t([-1, -2]), old_log_prob: t([-1, -2]), advantages: t([1, 1]), response_mask: t([1, 1]) };
}

suite('verl_policy_loss_vanilla.json', 'verl');
suite('verl_policy_loss_gspo.json', 'verl');
suite('verl_policy_loss_others.json', 'verl');
suite('verl_legacy_policy_loss_vanilla.json', 'verl-legacy');
suite('verl_legacy_policy_loss_gspo.json', 'verl-legacy');
suite('verl_agent_core_algos.json', 'verl-agent', (c) => c.function.startsWith('compute_policy_loss'));
