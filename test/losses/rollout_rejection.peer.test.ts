// Rollout rejection sampling (rolloutCorrection.rejection) against verl's own compute_rollout_rejection_mask /
// compute_rs_metrics (test/fixtures/peer-vectors/verl_rollout_rejection.json, made by
// generators/verl_rollout_correction.py): the modified response mask and every metric, padded and packed;
// a float64 reference written from the definitions on random batches; the mask as policyLoss applies it; and
// the options that map to no verl setting.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { mulberry32 as rng } from '../../ts/core/prng.js';
import { data, expectCloseScalar, loadPeer, packedRollout, paddedRollout } from '../helpers/peer.js';

const file = loadPeer('verl_rollout_rejection.json');

type Criterion = NonNullable<rl.RolloutCorrection['rejection']>[number];
const LEVELS = { token: 'token', seq_sum: 'sequence-sum', seq_mean: 'sequence-mean', seq_max: 'sequence-max' } as const;

/** The library's criteria for verl's `rollout_rs` / `rollout_rs_threshold` (one threshold shared, or one each). */
function criteria(rs: string, spec: number | string): Criterion[] {
  const names = [...new Set(rs.split(',').map((s) => s.trim()).filter(Boolean))];
  let specs = typeof spec === 'number' ? [String(spec)] : spec.split(',').map((s) => s.trim()).filter(Boolean);
  if (specs.length === 1) specs = names.map(() => specs[0]!);
  if (specs.length !== names.length) throw new Error('no library form: one threshold per criterion');
  return names.map((name, i) => {
    const m = /^(token|seq_sum|seq_mean|seq_max)_(k[123])$/.exec(name)!;
    const s = specs[i]!;
    const c: Criterion = { statistic: m[2] as 'k1', level: LEVELS[m[1] as keyof typeof LEVELS], threshold: Number(s.split('_').pop()) };
    if (s.includes('_')) return { ...c, lower: Number(s.split('_')[0]) };
    return c;
  });
}


/** Metrics verl reduces with `.float().mean()` (float32) get the README's float32 tolerance. */
const rtolOf = (key: string, c: Criterion[] | null) => {
  if (key.includes('_seq_fraction_') || key === 'rollout_rs_seq_masked_fraction') return 1e-6;
  const seqLevel = c?.some((x) => x.level !== 'token' && key.startsWith(`rollout_rs_${Object.entries(LEVELS).find(([, l]) => l === x.level)![0]}_${x.statistic}_fraction_`));
  return seqLevel ? 1e-6 : 1e-12;
};

function expectMetrics(got: Record<string, number>, want: Record<string, unknown>, crit: Criterion[], what: string) {
  expect(Object.keys(got).sort(), `${what}: metric names`).toEqual(Object.keys(want).sort());
  for (const [k, e] of Object.entries(want)) {
    // verl's std is √(E[x²] − E[x]²) in float64: where the spread is tiny next to the values, the cancellation leaves
    // summation-order noise of about 1e-16 · E[x²] / std, so the std gets an absolute tolerance
    const atol = k.endsWith('_std') && !k.endsWith('_seq_std') ? 1e-11 : 1e-300;
    expectCloseScalar(got[k]!, data({ dtype: 'float64', shape: [], data: [e] })[0], { rtol: rtolOf(k, crit), atol, what: `${what}: ${k}` });
  }
}

describe('rollout rejection sampling against verl (compute_rollout_rejection_mask)', () => {
  it('the vectors cover every option, chained options, the edge cases and the refusals', () => {
    const opts = new Set(file.cases.filter((c) => !c.error).flatMap((c) => (c.params.rollout_rs as string).split(',').map((s) => s.trim())));
    expect([...opts].sort()).toEqual(['seq_max_k2', 'seq_max_k3', 'seq_mean_k1', 'seq_mean_k2', 'seq_mean_k3', 'seq_sum_k1', 'seq_sum_k2',
      'seq_sum_k3', 'token_k1', 'token_k2', 'token_k3']);
    for (const part of ['combined', 'huge', 'single_valid_token', 'single_row']) expect(file.cases.some((c) => c.name.includes(part) && !c.error), part).toBe(true);
    expect(file.cases.filter((c) => c.error !== undefined).length).toBeGreaterThanOrEqual(6);
    // every kept/rejected combination occurs: some cases reject part of the batch
    expect(file.cases.some((c) => !c.error && (c.outputs!.metrics as Record<string, number>).rollout_rs_masked_fraction > 0.2 &&
      (c.outputs!.metrics as Record<string, number>).rollout_rs_masked_fraction < 0.8)).toBe(true);
  });

  for (const c of file.cases) {
    if (c.error !== undefined) {
      if (c.name === 'threshold_count_mismatch') continue; // each criterion carries its own threshold: no library form
      it(`${c.name}: refused as the peer refuses it (${c.error.split(':')[0]})`, () => {
        const p = paddedRollout(c);
        const code = c.error!.includes('at least one valid token') ? 'ERR_SHAPE' : 'ERR_OPTION';
        let err: unknown;
        try {
          rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, {
            rolloutLogprob: p.roll, level: null, rejection: criteria(c.params.rollout_rs, c.params.rollout_rs_threshold),
          });
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(rl.GearError);
        expect((err as rl.GearError).code).toBe(code);
      });
      continue;
    }
    it(`${c.name}: modified mask and metrics, padded and packed`, () => {
      const p = paddedRollout(c);
      const crit = criteria(c.params.rollout_rs, c.params.rollout_rs_threshold);
      const want = data(c.outputs!.modified_response_mask) as number[];
      const wantMetrics = c.outputs!.metrics as Record<string, unknown>;
      const r = rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, level: null, rejection: crit });
      expect(Array.from(r.mask!)).toEqual(want);
      expect(Array.from(r.weights)).toEqual(Array.from(p.mask));
      expectMetrics(r.metrics, wantMetrics, crit, c.name);

      // packed without padding: rows keep their order, an all-masked row becomes empty
      const q = packedRollout(p);
      const r2 = rl.rolloutCorrectionWeights(q.old, q.offsets, undefined, { rolloutLogprob: q.roll, level: null, rejection: crit });
      expect(Array.from(r2.mask!)).toEqual(q.idx.map((t) => want[t]!));
      expectMetrics(r2.metrics, wantMetrics, crit, `${c.name} packed`);
    });
  }

  it('with importance weights too: the weights and their metrics are those without rejection, the metrics merge', () => {
    for (const c of file.cases.filter((x) => !x.error).slice(0, 12)) {
      const p = paddedRollout(c);
      const crit = criteria(c.params.rollout_rs, c.params.rollout_rs_threshold);
      for (const is of [{ level: 'token' as const, threshold: 2 }, { level: 'sequence' as const, mode: 'mask' as const, lower: 0.5, threshold: 2 }]) {
        const both = rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, ...is, rejection: crit });
        const isOnly = rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, ...is });
        const rsOnly = rl.rolloutCorrectionWeights(p.old, p.offsets, p.mask, { rolloutLogprob: p.roll, level: null, rejection: crit });
        expect(both.weights).toEqual(isOnly.weights);
        expect(isOnly.mask).toBeUndefined();
        expect(both.mask).toEqual(rsOnly.mask);
        expect(both.metrics).toEqual({ ...isOnly.metrics, ...rsOnly.metrics });
        expect(both.offPolicy).toEqual(isOnly.offPolicy);
      }
    }
  });

  it('policyLoss drops the rejected tokens from the loss mask (aggregation counts and loss metrics included)', () => {
    let checked = 0;
    for (const c of file.cases) {
      if (c.error !== undefined) continue;
      const p = paddedRollout(c);
      const n = p.old.length;
      const crit = criteria(c.params.rollout_rs, c.params.rollout_rs_threshold);
      const peerMask = Uint8Array.from(data(c.outputs!.modified_response_mask) as number[]);
      const logprob = Float64Array.from(p.old, (x, t) => x + 0.05 * Math.sin(t));
      const advantages = Float64Array.from({ length: n }, (_, t) => Math.cos(t * 1.3));
      const a = { logprob, oldLogprob: p.old, advantages, offsets: p.offsets, kind: 'ppo' as const };
      for (const agg of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as const) {
        const viaRs = rl.policyLoss({ ...a, agg, mask: p.mask, rolloutCorrection: { rolloutLogprob: p.roll, level: null, rejection: crit } });
        const viaPeer = rl.policyLoss({ ...a, agg, mask: peerMask });
        expectCloseScalar(viaRs.loss, viaPeer.loss, { rtol: 1e-12, atol: 1e-300, what: `${c.name} ${agg} loss` });
        expect(Array.from(viaRs.grad), `${c.name} ${agg} grad`).toEqual(Array.from(viaPeer.grad));
        for (const [k, x] of Object.entries(viaPeer.metrics)) expect(viaRs.metrics[k], `${c.name} ${k}`).toBe(x);
        expect(viaRs.metrics.rollout_rs_masked_fraction).toBe((c.outputs!.metrics as Record<string, number>).rollout_rs_masked_fraction);
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(30);
  });
});

/** The rejection sampling written out from its definition, in float64, one criterion at a time. */
function reference(old: ArrayLike<number>, roll: ArrayLike<number>, offsets: Int32Array, mask: Uint8Array, crit: Criterion[]) {
  const rows = offsets.length - 1;
  const keep = Uint8Array.from(mask);
  const stat = (t: number, k: string) => {
    const d = Math.max(-20, Math.min(20, old[t]! - roll[t]!));
    return k === 'k1' ? -d : k === 'k2' ? d * d / 2 : Math.expm1(d) - d;
  };
  for (const c of crit) {
    const lo = c.statistic === 'k1' ? Math.log(c.lower ?? 1 / c.threshold) : -Infinity;
    const hi = c.statistic === 'k1' ? Math.log(c.threshold) : c.threshold;
    const ok = (x: number) => x >= lo && x <= hi;
    for (let i = 0; i < rows; i++) {
      const ts: number[] = [];
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mask[t]) ts.push(t);
      const xs = ts.map((t) => stat(t, c.statistic));
      if (c.level === 'token') {
        ts.forEach((t, j) => { if (!ok(xs[j]!)) keep[t] = 0; });
        continue;
      }
      const sum = xs.reduce((s, x) => s + x, 0);
      const v = c.level === 'sequence-sum' ? sum : c.level === 'sequence-mean' ? sum / ts.length : Math.max(...xs);
      if (ts.length > 0 && !ok(v)) for (const t of ts) keep[t] = 0;
    }
  }
  return keep;
}

describe('rollout rejection sampling: float64 reference and refusals', () => {
  it('a hand-worked batch: token k1 bounds on the ratio, a row rejected whole by its k3 sum', () => {
    // row 0: log ratios 0.5, -1.2 (ratio π_roll/π_old = e^-0.5, e^1.2); row 1: 0.1, 0.1, with a masked token
    const old = Float64Array.of(-1, -2, -0.5, -0.6, -9);
    const roll = Float64Array.of(-1.5, -0.8, -0.6, -0.7, 30);
    const offsets = Int32Array.of(0, 2, 5);
    const mask = Uint8Array.of(1, 1, 1, 1, 0);
    const r = rl.rolloutCorrectionWeights(old, offsets, mask, {
      rolloutLogprob: roll, level: null, rejection: [{ statistic: 'k1', threshold: 2 }],
    });
    // k1 = -0.5 (kept: ≥ ln 0.5), 1.2 (> ln 2: rejected), -0.1, -0.1 (kept)
    expect(Array.from(r.mask!)).toEqual([1, 0, 1, 1, 0]);
    // verl's masked means divide by count + 1e-8
    expect(r.metrics.rollout_rs_token_k1_masked_fraction).toBeCloseTo(1 / (4 + 1e-8), 14);
    expect(r.metrics.rollout_rs_token_k1_mean).toBeCloseTo((-0.5 + 1.2 - 0.1 - 0.1) / (4 + 1e-8), 14);
    expect(r.metrics.rollout_rs_seq_masked_fraction).toBe(1 / 2);
    // k3 summed over row 0: (e^0.5 − 1.5) + (e^−1.2 + 0.2) ≈ 0.4508 > 0.3: the whole row goes
    const s = rl.rolloutCorrectionWeights(old, offsets, mask, {
      rolloutLogprob: roll, level: null, rejection: [{ statistic: 'k3', level: 'sequence-sum', threshold: 0.3 }],
    });
    expect(Array.from(s.mask!)).toEqual([0, 0, 1, 1, 0]);
    const row0 = Math.exp(0.5) - 1.5 + Math.exp(-1.2) + 0.2;
    const row1 = 2 * (Math.exp(0.1) - 1.1);
    expect(s.metrics.rollout_rs_seq_sum_k3_seq_max).toBeCloseTo(row0, 14);
    expect(s.metrics.rollout_rs_seq_sum_k3_seq_min).toBeCloseTo(row1, 14);
    expect(s.metrics.rollout_rs_seq_sum_k3_mean).toBeCloseTo((2 * row0 + 2 * row1) / (4 + 1e-8), 14);
  });

  it('random batches, every option, chained: the mask matches the definition in float64', () => {
    const u = rng(7);
    const options: Criterion[] = [];
    for (const level of ['token', 'sequence-sum', 'sequence-mean', 'sequence-max'] as const) {
      for (const statistic of ['k1', 'k2', 'k3'] as const) if (!(level === 'sequence-max' && statistic === 'k1')) options.push({ statistic, level, threshold: 0 });
    }
    let rejected = 0, kept = 0;
    for (let trial = 0; trial < 200; trial++) {
      const rows = 1 + Math.floor(u() * 6);
      const lens = Array.from({ length: rows }, () => Math.floor(u() * 9));
      const offsets = Int32Array.from([0, ...lens.map((_, i) => lens.slice(0, i + 1).reduce((a, b) => a + b, 0))]);
      const n = offsets[rows]!;
      if (n === 0) continue;
      const old = Float64Array.from({ length: n }, () => -3 * u());
      const scale = u() < 0.1 ? 60 : 1.5; // now and then beyond the ±20 bound
      const roll = Float64Array.from(old, (x) => x + (u() - 0.5) * scale);
      const mask = Uint8Array.from({ length: n }, () => (u() < 0.85 ? 1 : 0));
      if (!mask.some((x) => x)) mask[0] = 1;
      const k = 1 + Math.floor(u() * 3);
      const picked = [...options].sort(() => u() - 0.5).slice(0, k).map((c): Criterion => {
        if (c.statistic !== 'k1') return { ...c, threshold: 0.01 + u() * (c.level === 'sequence-sum' ? 2 : 0.4) };
        const threshold = 1 + u() * 1.5;
        return u() < 0.5 ? { ...c, threshold } : { ...c, threshold, lower: 1 / threshold + u() * (threshold - 1 / threshold) * 0.5 };
      });
      const want = reference(old, roll, offsets, mask, picked);
      const got = rl.rolloutCorrectionWeights(Float32Array.from(old), offsets, mask, { rolloutLogprob: Float32Array.from(roll), level: null, rejection: picked });
      // float32 inputs: the reference reads the same float32 values
      const want32 = reference(Float32Array.from(old), Float32Array.from(roll), offsets, mask, picked);
      expect(Array.from(got.mask!), `trial ${trial}`).toEqual(Array.from(want32));
      const got64 = rl.rolloutCorrectionWeights(old, offsets, mask, { rolloutLogprob: roll, level: null, rejection: picked });
      expect(Array.from(got64.mask!), `trial ${trial} f64`).toEqual(Array.from(want));
      for (let t = 0; t < n; t++) if (mask[t]) { if (want[t]) kept++; else rejected++; }
    }
    expect(rejected).toBeGreaterThan(100);
    expect(kept).toBeGreaterThan(100);
  });

  it('options that map to no verl setting are refused with ERR_OPTION, a batch without a valid token with ERR_SHAPE', () => {
    const old = Float64Array.of(-1, -2, -0.5);
    const rolloutLogprob = Float64Array.of(-1.5, -0.8, -0.6);
    const offsets = Int32Array.of(0, 3);
    const code = (rc: Partial<rl.RolloutCorrection>, mask?: Uint8Array) => {
      try {
        rl.rolloutCorrectionWeights(old, offsets, mask, { rolloutLogprob, level: null, ...rc } as rl.RolloutCorrection);
        return 'none';
      } catch (e) {
        return `${(e as rl.GearError).code} ${(e as Error).message}`;
      }
    };
    const bad = (r: unknown) => code({ rejection: r as never });
    expect(bad([])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection: expected a non-empty array/);
    expect(bad({ statistic: 'k1', threshold: 2 })).toMatch(/^ERR_OPTION rolloutCorrection\.rejection:/);
    expect(bad([null])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]/);
    expect(bad([{ threshold: 2 }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.statistic: expected one of 'k1', 'k2', 'k3'/);
    expect(bad([{ statistic: 'k4', threshold: 2 }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.statistic/);
    expect(bad([{ statistic: 'k1', level: 'row', threshold: 2 }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.level/);
    expect(bad([{ statistic: 'k1', level: 'sequence-max', threshold: 2 }])).toMatch(/seq_max_k1/);
    expect(bad([{ statistic: 'k2' }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.threshold: expected an upper bound > 0/);
    expect(bad([{ statistic: 'k2', threshold: 0 }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.threshold/);
    expect(bad([{ statistic: 'k2', threshold: NaN }])).toMatch(/^ERR_OPTION/);
    expect(bad([{ statistic: 'k2', threshold: '1' }])).toMatch(/^ERR_OPTION/);
    expect(bad([{ statistic: 'k2', threshold: 1, lower: 0.5 }])).toMatch(/only k1 has one/);
    expect(bad([{ statistic: 'k1', threshold: 2, lower: 3 }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.lower/);
    expect(bad([{ statistic: 'k1', threshold: 2, lower: 0 }])).toMatch(/^ERR_OPTION rolloutCorrection\.rejection\[0\]\.lower/);
    expect(bad([{ statistic: 'k1', threshold: 0.5 }])).toMatch(/default 1 \/ threshold = 2 is not/);
    expect(bad([{ statistic: 'k1', threshold: Infinity }])).toMatch(/default 1 \/ threshold = 0 is not/);
    expect(bad([{ statistic: 'k1', threshold: 2, upper: 3 }])).toMatch(/unknown option 'upper'/);
    expect(bad([{ statistic: 'k1', threshold: 2 }, { statistic: 'k1', level: 'token', threshold: 3 }])).toMatch(/token_k1 appears twice/);
    // with no importance weights, their options are refused
    expect(code({ threshold: 2, rejection: [{ statistic: 'k2', threshold: 1 }] })).toMatch(/^ERR_OPTION rolloutCorrection\.threshold: expected no importance-weight option/);
    expect(code({ batchNormalize: true })).toMatch(/^ERR_OPTION rolloutCorrection\.batchNormalize/);
    expect(code({ rejection: [{ statistic: 'k2', threshold: 1 }] }, Uint8Array.of(0, 0, 0))).toMatch(/^ERR_SHAPE mask/);
    // an upper bound of Infinity with an explicit lower bound is a lower bound only
    expect(code({ rejection: [{ statistic: 'k1', threshold: Infinity, lower: 0.5 }] })).toBe('none');
  });
});
