// rolloutCorrectionWeights against verl's own compute_rollout_correction_weights / compute_is_metrics
// (test/fixtures/peer-vectors/verl_rollout_correction.json, made by generators/verl_rollout_correction.py):
// weights, every metric and the off-policy diagnostics, token and sequence level, TIS and IcePop, batch normalisation, all-masked
// rows, ratios beyond the ±20 bound; the padded batch and the same batch packed without its padding; and
// the weights as policyLoss applies them.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { type PeerCase, data, expectClose, expectCloseScalar, loadPeer, packedRollout, paddedRollout } from '../helpers/peer.js';

const file = loadPeer('verl_rollout_correction.json');

/** The library's options for the peer's `rollout_is` / `rollout_is_threshold` / batch normalisation. */
function options(c: PeerCase) {
  const th = c.params.rollout_is_threshold as number | string;
  const level = c.params.rollout_is as 'token' | 'sequence';
  const batchNormalize = c.params.rollout_is_batch_normalize as boolean;
  if (typeof th === 'string' && th.includes('_')) {
    const [lo, up] = th.split('_').map(Number) as [number, number];
    return { level, mode: 'mask' as const, lower: lo, threshold: up, batchNormalize };
  }
  return { level, mode: 'truncate' as const, threshold: Number(th), batchNormalize };
}


/** Metrics verl builds with `.float().mean()` (float32) get the README's float32 tolerance. */
const rtolOf = (key: string, level: string) =>
  (key.endsWith('fraction_high') || key.endsWith('fraction_low')) && (level === 'sequence' || key.includes('_seq_')) ? 1e-6 : 1e-12;

function expectMetrics(got: Record<string, number>, want: Record<string, unknown>, level: string, what: string) {
  expect(Object.keys(got).sort(), `${what}: metric names`).toEqual(Object.keys(want).sort());
  for (const [k, e] of Object.entries(want)) {
    expectCloseScalar(got[k]!, data({ dtype: 'float64', shape: [], data: [e] })[0], { rtol: rtolOf(k, level), atol: 1e-300, what: `${what}: ${k}` });
  }
}

describe('rollout correction against verl (compute_rollout_correction_weights)', () => {
  it('the vectors cover token and sequence level, TIS and IcePop, normalisation and the edge cases', () => {
    const names = file.cases.map((c) => c.name);
    for (const level of ['token', 'sequence']) {
      for (const part of ['tis', 'icepop', 'batch_normalize', 'all_masked_rows', 'huge_ratios', 'single_valid_token', 'no_valid_token']) {
        expect(names.some((n) => n.startsWith(level) && n.includes(part)), `${level} ${part}`).toBe(true);
      }
    }
    expect(file.cases.filter((c) => c.error !== undefined).length).toBeGreaterThanOrEqual(4);
  });

  for (const c of file.cases) {
    if (c.error !== undefined) {
      it(`${c.name}: refused as the peer refuses it (${c.error.split(':')[0]})`, () => {
        const p = paddedRollout(c);
        const code = c.error!.includes('at least one valid token') ? 'ERR_SHAPE' : 'ERR_OPTION';
        const call = () => {
          const level = c.params.rollout_is as never;
          const th = c.params.rollout_is_threshold as number | string;
          const o = typeof th === 'string' && th.includes('_')
            ? { mode: 'mask' as const, lower: Number(th.split('_')[0]), threshold: Number(th.split('_')[1]) }
            : { threshold: Number(th) };
          return rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, level, ...o });
        };
        expect(call).toThrow(rl.GearError);
        try { call(); } catch (e) { expect((e as rl.GearError).code).toBe(code); }
      });
      continue;
    }
    it(`${c.name}: weights and metrics, padded and packed`, () => {
      const p = paddedRollout(c);
      const o = options(c);
      const want = data(c.outputs!.rollout_is_weights) as number[];
      const wantMetrics = c.outputs!.metrics as Record<string, unknown>;
      const r = rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, ...o });
      expectClose(r.weights, want, { rtol: 1e-12, what: `${c.name} weights` });
      expectMetrics(r.metrics, wantMetrics, o.level, c.name);
      expectMetrics(r.offPolicy, c.outputs!.offpolicy_metrics as Record<string, unknown>, 'token', `${c.name} off-policy`);

      const q = packedRollout(p);
      const r2 = rl.rolloutCorrectionWeights(q.old, q.offsets, undefined, { rolloutLogprob: q.roll, ...o });
      expectClose(r2.weights, q.idx.map((t) => want[t]!), { rtol: 1e-12, what: `${c.name} packed weights` });
      expectMetrics(r2.metrics, wantMetrics, o.level, `${c.name} packed`);
      expectMetrics(r2.offPolicy, c.outputs!.offpolicy_metrics as Record<string, unknown>, 'token', `${c.name} packed off-policy`);
    });
  }

  it('policyLoss applies the peer\'s weights to each token\'s loss and gradient, and reports the metrics', () => {
    let checked = 0;
    for (const c of file.cases) {
      if (c.error !== undefined) continue;
      const p = paddedRollout(c);
      const o = options(c);
      const n = p.old.length;
      const logprob = Float64Array.from(p.old, (x, t) => x + 0.05 * Math.sin(t));
      const advantages = Float64Array.from({ length: n }, (_, t) => Math.cos(t * 1.3));
      const a = { logprob, oldLogprob: p.old, advantages, offsets: p.offsets, mask: p.mask, kind: 'ppo' as const };
      const viaRc = rl.policyLoss({ ...a, rolloutCorrection: { rolloutLogprob: p.roll, ...o } });
      const viaPeer = rl.policyLoss({ ...a, isWeights: Float64Array.from(data(c.outputs!.rollout_is_weights) as number[]) });
      expectCloseScalar(viaRc.loss, viaPeer.loss, { rtol: 1e-12, atol: 1e-300, what: `${c.name} loss` });
      expectClose(viaRc.grad, viaPeer.grad, { rtol: 1e-12, atol: 1e-300, what: `${c.name} grad` });
      expect(viaRc.metrics.rollout_is_eff_sample_size).toBe(rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, ...o }).metrics.rollout_is_eff_sample_size);
      checked++;
    }
    expect(checked).toBeGreaterThan(20);
  });

  it('options that map to no verl setting are refused', () => {
    const c = file.cases[0]!;
    const p = paddedRollout(c);
    const base = { rolloutLogprob: p.roll };
    const code = (f: () => unknown) => { try { f(); return 'none'; } catch (e) { return (e as rl.GearError).code; } };
    expect(code(() => rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { ...base, mode: 'mask' }))).toBe('ERR_OPTION'); // IcePop needs its lower bound
    expect(code(() => rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { ...base, lower: 0.5 }))).toBe('ERR_OPTION'); // TIS has none
    expect(code(() => rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { ...base, batchNormalize: 1 as never }))).toBe('ERR_OPTION');
    expect(code(() => rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { ...base, mode: 'mask', lower: 3, threshold: 2 }))).toBe('ERR_OPTION');
  });
});
