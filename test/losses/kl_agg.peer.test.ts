// klPenalty and aggregate against the verl, legacy-verl and verl-agent golden vectors.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { expectClose, expectCloseScalar, loadPeer } from '../helpers/peer.js';
import { expectGearError, f64, padded, scalar, u8 } from './helpers.js';

function klSuite(file: string, semantics: rl.KlSemantics, filter: (name: string) => boolean = () => true) {
  describe(`${file} kl_penalty (${semantics})`, () => {
    const cases = loadPeer(file).cases.filter((c) => c.function === 'kl_penalty' && filter(c.name));
    it('has cases', () => expect(cases.length).toBeGreaterThan(0));
    for (const c of cases) {
      it(c.name, () => {
        const args = {
          logprob: f64(c.inputs.logprob), refLogprob: f64(c.inputs.ref_logprob),
          estimator: c.params.kl_penalty as rl.KlEstimator, semantics,
        };
        if (c.error !== undefined) {
          expectGearError(() => rl.klPenalty(args), 'ERR_OPTION');
          return;
        }
        const out = rl.klPenalty(args);
        expectClose(out.kl, f64(c.outputs!.kl), { rtol: 1e-12, atol: 1e-15, what: 'kl' });
        if (c.outputs!.grad_logprob !== undefined) {
          expectClose(out.grad, f64(c.outputs!.grad_logprob), { rtol: 1e-12, atol: 1e-15, what: 'grad' });
        }
        // float32 inputs: the same to float32 accuracy, float32 outputs
        const o32 = rl.klPenalty({ ...args, logprob: Float32Array.from(args.logprob), refLogprob: Float32Array.from(args.refLogprob) });
        expect(o32.kl).toBeInstanceOf(Float32Array);
      });
    }
  });
}

function aggSuite(file: string, semantics: rl.Semantics, filter: (fn: string) => boolean) {
  describe(`${file} agg_loss (${semantics})`, () => {
    const cases = loadPeer(file).cases.filter((c) => filter(c.function));
    it('has cases', () => expect(cases.length).toBeGreaterThan(0));
    for (const c of cases) {
      it(c.name, () => {
        const { off } = padded(c.inputs.loss_mat);
        const p = c.params;
        const opts: rl.AggregateOptions = { semantics };
        if (p.loss_scale_factor !== undefined) opts.lossScaleFactor = p.loss_scale_factor;
        if (p.batch_num_tokens !== undefined) opts.globalTokens = p.batch_num_tokens;
        if (p.global_batch_size !== undefined) opts.globalRows = p.global_batch_size;
        const vals = f64(c.inputs.loss_mat);
        const mask = u8(c.inputs.loss_mask);
        const out = rl.aggregate(vals, off, mask, p.loss_agg_mode, opts);
        expectCloseScalar(out.value, scalar(c.outputs!.loss), { rtol: 1e-12, atol: 1e-15, what: 'loss' });
        // the gradient is the derivative of the value: check by central differences (the mode is linear)
        for (let t = 0; t < vals.length; t++) {
          const xp = Float64Array.from(vals); xp[t] = xp[t]! + 1e-3;
          const xm = Float64Array.from(vals); xm[t] = xm[t]! - 1e-3;
          const fd = (rl.aggregate(xp, off, mask, p.loss_agg_mode, opts).value - rl.aggregate(xm, off, mask, p.loss_agg_mode, opts).value) / 2e-3;
          if (Number.isFinite(fd)) expect(Math.abs(out.grad[t]! - fd)).toBeLessThan(1e-9 * Math.max(1, Math.abs(fd)));
        }
      });
    }
  });
}

klSuite('verl_kl_penalty.json', 'verl');
klSuite('verl_legacy_kl_penalty.json', 'verl-legacy');
klSuite('verl_agent_core_algos.json', 'verl-agent');
aggSuite('verl_agg_loss.json', 'verl', (f) => f === 'agg_loss');
aggSuite('verl_legacy_agg_loss.json', 'verl-legacy', (f) => f === 'agg_loss');
aggSuite('verl_agent_core_algos.json', 'verl-agent', (f) => f === 'agg_loss');
