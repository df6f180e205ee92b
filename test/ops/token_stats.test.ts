// tokenStats / tokenStatsBackward / tokenStatsPartial + mergeTokenStats against the float64 reference
// (test/helpers/reference.ts), finite differences and the peer vectors (verl, TRL), on every ISA path.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { ISAS, restoreBackendAfterAll } from '../helpers/isa.js';
import { data, expectClose, loadPeer } from '../helpers/peer.js';
import {
  type DType, encode, maxScaledError, randomLogits, refTokenStats, refTokenStatsGrad, rng,
} from '../helpers/reference.js';

const DTYPES: DType[] = ['float32', 'bfloat16', 'float16'];
const TOL = 1e-5; // abs error, scaled by max(1, |expected|) for large magnitudes (float32 outputs)

restoreBackendAfterAll();

/** Random rows with the edge rows the issue lists: masked entries, one finite entry, a +-1e4 spread. */
function makeCase(seed: number, rows: number, vocab: number) {
  const z = randomLogits(seed, rows, vocab);
  const r = rng(seed + 1);
  if (rows > 0 && vocab > 3) for (let v = 0; v < vocab; v += 3) z[v] = -Infinity; // row 0: every third masked
  if (rows > 1) {
    for (let v = 0; v < vocab; v++) z[vocab + v] = -Infinity;
    z[vocab + Math.floor(r() * vocab)] = 2.5; // row 1: a single finite entry
  }
  if (rows > 2) for (let v = 0; v < vocab; v++) z[2 * vocab + v] = (r() * 2 - 1) * 1e4; // row 2: +-1e4
  const targets = new Int32Array(rows);
  for (let i = 0; i < rows; i++) {
    let y = Math.floor(r() * vocab);
    for (let k = 0; k < vocab && z[i * vocab + y] === -Infinity; k++) y = (y + 1) % vocab; // a finite target
    targets[i] = y;
  }
  return { z, targets };
}

function logits(dataArr: Float32Array | Uint16Array, rows: number, vocab: number, dtype: DType): rl.Logits {
  return dtype === 'float32' ? { data: dataArr, rows, vocab } : { data: dataArr, rows, vocab, dtype };
}

const SHAPES: [number, number][] = [
  [0, 7], [1, 1], [5, 1], [64, 2], [5, 7], [64, 33], [5, 1000], [64, 1000], [3, 32000], [2, 151936],
];

describe('tokenStats vs the float64 reference', () => {
  for (const isa of ISAS) {
    for (const dtype of DTYPES) {
      it(`${isa} / ${dtype}: every shape, temperatures, masked rows, single-entry rows, +-1e4 spreads`, () => {
        expect(rl.setIsa(isa)).toBe(isa);
        for (const [rows, vocab] of SHAPES) {
          for (const T of vocab > 10000 ? [0.7] : [1, 0.7, 1.6]) {
            const { z, targets } = makeCase(rows * 7919 + vocab, rows, vocab);
            const { data: d, decoded } = encode(z, dtype);
            const got = rl.tokenStats(logits(d, rows, vocab, dtype), targets, { temperature: T });
            const want = refTokenStats(decoded, rows, vocab, targets, T);
            const ctx = `${isa} ${dtype} ${rows}x${vocab} T=${T}`;
            expect(maxScaledError(got.logprob, want.logprob), `${ctx} logprob`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.entropy, want.entropy), `${ctx} entropy`).toBeLessThanOrEqual(TOL);
            expect(maxScaledError(got.logsumexp, want.logsumexp), `${ctx} lse`).toBeLessThanOrEqual(TOL);
          }
        }
      });
    }
  }

  it('single finite entry: entropy 0, logprob 0; a target on a -Infinity logit has logprob -Infinity', () => {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      const z = new Float32Array(40).fill(-Infinity);
      z[17] = 3; // row 0: one finite entry
      z.set([1, 2, -Infinity, 0.5], 20); // row 1: entries 20..39, -inf except three
      const out = rl.tokenStats({ data: z, rows: 2, vocab: 20 }, new Int32Array([17, 2]));
      expect(out.entropy[0]).toBe(0);
      expect(out.logprob[0]).toBe(0);
      expect(out.logsumexp[0]).toBeCloseTo(3, 6);
      expect(out.logprob[1]).toBe(-Infinity);
      expect(Number.isFinite(out.entropy[1])).toBe(true);
    }
  });

  it('fills caller-supplied out arrays and returns them', () => {
    const { z, targets } = makeCase(3, 5, 33);
    const out = { logprob: new Float32Array(5), entropy: new Float32Array(5), logsumexp: new Float32Array(5) };
    const got = rl.tokenStats({ data: Float32Array.from(z), rows: 5, vocab: 33 }, targets, { out });
    expect(got.logprob).toBe(out.logprob);
    expect(got.entropy).toBe(out.entropy);
    expect(got.logsumexp).toBe(out.logsumexp);
    const want = refTokenStats(Float32Array.from(z), 5, 33, targets);
    expect(maxScaledError(out.entropy, want.entropy)).toBeLessThanOrEqual(TOL);
  });
});

describe('tokenStats vs peer vectors', () => {
  // The peers ran in float64 (or float32); our outputs are float32, so the comparison tolerance is the
  // float32 one (1e-5 scaled), not the README's 1e-12 for float64 paths.
  const files = ['verl_torch_functional.json', 'verl_legacy_torch_functional.json'];
  for (const file of files) {
    it(`${file}: logprobs_from_logits(_naive), entropy_from_logits(_with_chunking), gradients`, () => {
      const peer = loadPeer(file);
      let checked = 0;
      for (const c of peer.cases) {
        if (!['logprobs_from_logits', 'logprobs_from_logits_naive', 'entropy_from_logits', 'entropy_from_logits_with_chunking'].includes(c.function)) continue;
        const z = data(c.inputs.logits) as number[];
        const shape = c.inputs.logits.shape as number[];
        const vocab = shape[shape.length - 1]!;
        const rows = z.length / vocab;
        const labels = c.inputs.labels ? Int32Array.from(data(c.inputs.labels) as number[]) : new Int32Array(rows);
        const zf = Float32Array.from(z);
        const got = rl.tokenStats({ data: zf, rows, vocab }, labels);
        const hasNegInf = z.some((x) => x === -Infinity);
        if (c.outputs!.logprobs) {
          expect(maxScaledError(got.logprob, data(c.outputs!.logprobs)), c.name).toBeLessThanOrEqual(TOL);
          checked++;
        }
        if (c.outputs!.entropy) {
          const peerH = data(c.outputs!.entropy) as number[];
          if (hasNegInf) {
            // The peer gives NaN on rows with -inf logits; we give the defined value (0 log 0 = 0).
            expect(peerH.some((x) => Number.isNaN(x))).toBe(true);
            const want = refTokenStats(zf, rows, vocab, labels).entropy;
            expect(maxScaledError(got.entropy, want), c.name).toBeLessThanOrEqual(TOL);
            expect(Array.from(got.entropy).every(Number.isFinite)).toBe(true);
          } else {
            expect(maxScaledError(got.entropy, peerH), c.name).toBeLessThanOrEqual(TOL);
          }
          checked++;
        }
        if (c.outputs!.grad_logits_of_sum_entropy) {
          const g = rl.tokenStatsBackward({ data: zf, rows, vocab }, undefined, { entropy: new Float32Array(rows).fill(1) });
          expectClose(g, data(c.outputs!.grad_logits_of_sum_entropy), { atol: 2e-6, rtol: 1e-5, what: c.name });
          checked++;
        }
        if (c.outputs!.grad_logits_of_sum_logprobs) {
          const g = rl.tokenStatsBackward({ data: zf, rows, vocab }, labels, { logprob: new Float32Array(rows).fill(1) });
          expectClose(g, data(c.outputs!.grad_logits_of_sum_logprobs), { atol: 2e-6, rtol: 1e-5, what: c.name });
          checked++;
        }
      }
      expect(checked).toBeGreaterThanOrEqual(20);
    });
  }

  it('trl_utils.json: selective_log_softmax and entropy_from_logits', () => {
    const peer = loadPeer('trl_utils.json');
    let checked = 0;
    for (const c of peer.cases) {
      if (c.function !== 'selective_log_softmax' && c.function !== 'entropy_from_logits') continue;
      const z = data(c.inputs.logits) as number[];
      const shape = c.inputs.logits.shape as number[];
      const vocab = shape[shape.length - 1]!;
      const rows = z.length / vocab;
      const idx = c.inputs.index ? Int32Array.from(data(c.inputs.index) as number[]) : new Int32Array(rows);
      const zf = Float32Array.from(z);
      const got = rl.tokenStats({ data: zf, rows, vocab }, idx);
      if (c.outputs!.logps) {
        expect(maxScaledError(got.logprob, data(c.outputs!.logps)), c.name).toBeLessThanOrEqual(TOL);
      } else {
        const peerH = data(c.outputs!.entropy) as number[];
        const want = refTokenStats(zf, rows, vocab, idx).entropy;
        for (let r = 0; r < rows; r++) {
          // NaN in the peer marks a row with a -inf logit: our value is the defined entropy instead.
          const e = Number.isNaN(peerH[r]!) ? want[r]! : peerH[r]!;
          expect(Math.abs(got.entropy[r]! - e), `${c.name}[${r}]`).toBeLessThanOrEqual(TOL);
        }
      }
      checked++;
    }
    expect(checked).toBe(6);
  });
});

describe('tokenStatsBackward', () => {
  it('matches the reference formula and float64 finite differences on every ISA and dtype', () => {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      for (const dtype of DTYPES) {
        for (const [rows, vocab] of [[3, 7], [4, 33], [2, 1000], [2, 5000]] as [number, number][]) {
          const { z, targets } = makeCase(rows * 31 + vocab, rows, vocab);
          if (rows > 2) for (let v = 0; v < vocab; v++) z[2 * vocab + v] = (z[2 * vocab + v]! / 1e4) * 30; // moderate spread
          const { data: d, decoded } = encode(z, dtype);
          const r = rng(vocab);
          const gl = Float32Array.from({ length: rows }, () => r() * 2 - 1);
          const ge = Float32Array.from({ length: rows }, () => r() * 2 - 1);
          const T = 0.8;
          const l = logits(d, rows, vocab, dtype);
          const want = refTokenStatsGrad(decoded, rows, vocab, targets, gl, ge, T);
          const got = rl.tokenStatsBackward(l, targets, { logprob: gl, entropy: ge }, { temperature: T });
          expectClose(got, want, { atol: 2e-6, rtol: 1e-5, what: `${isa} ${dtype} ${rows}x${vocab}` });
          // with the forward's statistics
          const stats = rl.tokenStats(l, targets, { temperature: T });
          const got2 = rl.tokenStatsBackward(l, targets, { logprob: gl, entropy: ge }, { temperature: T, stats });
          expectClose(got2, want, { atol: 2e-6, rtol: 1e-5, what: `${isa} ${dtype} stats` });
        }
      }
    }
  });

  it('equals central finite differences of the float64 forward', () => {
    const rows = 3;
    const vocab = 9;
    const { z, targets } = makeCase(77, rows, vocab);
    z[vocab * 2 + 4] = 5; // keep row 2 moderate
    for (let v = 0; v < vocab; v++) if (Math.abs(z[2 * vocab + v]!) > 100) z[2 * vocab + v] = (v % 4) - 1.5;
    const zf = Float64Array.from(Float32Array.from(z));
    const gl = [0.7, -1.2, 0.4];
    const ge = [-0.3, 0.9, 1.1];
    const T = 1.3;
    const loss = (x: Float64Array) => {
      const s = refTokenStats(x, rows, vocab, targets, T);
      let L = 0;
      for (let r = 0; r < rows; r++) L += gl[r]! * s.logprob[r]! + ge[r]! * s.entropy[r]!;
      return L;
    };
    const got = rl.tokenStatsBackward({ data: Float32Array.from(zf), rows, vocab }, targets,
      { logprob: Float32Array.from(gl), entropy: Float32Array.from(ge) }, { temperature: T });
    const h = 1e-6;
    for (let i = 0; i < zf.length; i++) {
      if (zf[i] === -Infinity) {
        expect(got[i], `masked entry ${i}`).toBe(0); // targets are finite entries here
        continue;
      }
      const p = Float64Array.from(zf);
      const m = Float64Array.from(zf);
      p[i]! += h;
      m[i]! -= h;
      const fd = (loss(p) - loss(m)) / (2 * h);
      expect(Math.abs(got[i]! - fd), `entry ${i}`).toBeLessThanOrEqual(2e-6 + 1e-5 * Math.abs(fd));
    }
  });

  it('zero rows: empty gradients for every dtype', async () => {
    for (const dtype of DTYPES) {
      const l = logits(dtype === 'float32' ? new Float32Array(0) : new Uint16Array(0), 0, 11, dtype);
      const g = rl.tokenStatsBackward(l, new Int32Array(0), { logprob: new Float32Array(0), entropy: new Float32Array(0) });
      expect(g.length).toBe(0);
      expect((await rl.tokenStatsBackwardAsync(l, new Int32Array(0), { entropy: new Float32Array(0) })).length).toBe(0);
      expect(rl.divergenceBackward(l, l, new Float32Array(0), { kind: 'jsd' }).length).toBe(0);
      expect(rl.tokenStatsPartial(l, new Int32Array(0), { vocabStart: 3 }).max.length).toBe(0);
    }
  });

  it('in place: writes the gradient over float32 logits, equal to the out-of-place result', () => {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      const rows = 4;
      const vocab = 2053; // not a multiple of the vector width: heads and tails on every row
      const { z, targets } = makeCase(5, rows, vocab);
      const zf = Float32Array.from(z);
      const gl = new Float32Array([1, -0.5, 0.25, 2]);
      const want = rl.tokenStatsBackward({ data: zf, rows, vocab }, targets, { logprob: gl });
      const buf = Float32Array.from(zf);
      const got = rl.tokenStatsBackward({ data: buf, rows, vocab }, targets, { logprob: gl }, { inPlace: true });
      expect(got).toBe(buf);
      expect(Buffer.compare(Buffer.from(got.buffer), Buffer.from(want.buffer))).toBe(0);
    }
  });

  it('writes into a caller-supplied out array at any alignment', () => {
    const rows = 3;
    const vocab = 301;
    const { z, targets } = makeCase(9, rows, vocab);
    const l = { data: Float32Array.from(z), rows, vocab };
    const want = rl.tokenStatsBackward(l, targets, { logprob: new Float32Array([1, 2, 3]) });
    for (const offset of [0, 1, 5, 15]) {
      const backing = new Float32Array(rows * vocab + 16);
      const out = backing.subarray(offset, offset + rows * vocab);
      const got = rl.tokenStatsBackward(l, targets, { logprob: new Float32Array([1, 2, 3]) }, { out });
      expect(got).toBe(out);
      expect(Array.from(got)).toEqual(Array.from(want));
    }
  });
});

describe('tokenStatsPartial + mergeTokenStats', () => {
  it('merging vocabulary shards equals tokenStats on the whole rows (every ISA, dtype, shard layout)', () => {
    for (const isa of ISAS) {
      rl.setIsa(isa);
      for (const dtype of DTYPES) {
        const rows = 6;
        const vocab = 5003;
        const { z, targets } = makeCase(11, rows, vocab);
        const { data: d } = encode(z, dtype);
        const whole = rl.tokenStats(logits(d, rows, vocab, dtype), targets, { temperature: 0.9 });
        for (const cuts of [[0, 5003], [0, 2500, 5003], [0, 1, 17, 4096, 5003]]) {
          const parts: rl.PartialStats[] = [];
          for (let i = 0; i + 1 < cuts.length; i++) {
            const [a, b] = [cuts[i]!, cuts[i + 1]!];
            const w = b - a;
            const shard = new (d.constructor as typeof Float32Array | typeof Uint16Array)(rows * w);
            for (let r = 0; r < rows; r++) shard.set(d.subarray(r * vocab + a, r * vocab + b), r * w);
            parts.push(rl.tokenStatsPartial(logits(shard, rows, w, dtype), targets, { vocabStart: a, temperature: 0.9 }));
          }
          const merged = rl.mergeTokenStats(parts.reverse()); // any order
          const what = `${isa} ${dtype} cuts ${cuts.join(',')}`;
          expect(maxScaledError(merged.logprob, whole.logprob), what).toBeLessThanOrEqual(1e-6);
          expect(maxScaledError(merged.entropy, whole.entropy), what).toBeLessThanOrEqual(1e-6);
          expect(maxScaledError(merged.logsumexp, whole.logsumexp), what).toBeLessThanOrEqual(1e-6);
        }
      }
    }
  });

  it('rejects shards that do not tile the vocabulary or miss a target; async merge equals sync', async () => {
    const z = Float32Array.from(randomLogits(1, 2, 10));
    const cols = (a: number, b: number) => Float32Array.from([...z.subarray(a, b), ...z.subarray(10 + a, 10 + b)]);
    const t = new Int32Array([1, 9]);
    const a = rl.tokenStatsPartial({ data: cols(0, 5), rows: 2, vocab: 5 }, t, { vocabStart: 0 });
    const gap = rl.tokenStatsPartial({ data: cols(5, 10), rows: 2, vocab: 5 }, t, { vocabStart: 6 });
    expect(() => rl.mergeTokenStats([a, gap])).toThrow(expect.objectContaining({ code: 'ERR_SHAPE' }));
    const t2 = new Int32Array([1, 12]); // row 1's target lies outside [0, 10)
    const a2 = rl.tokenStatsPartial({ data: cols(0, 5), rows: 2, vocab: 5 }, t2, { vocabStart: 0 });
    const b2 = rl.tokenStatsPartial({ data: cols(5, 10), rows: 2, vocab: 5 }, t2, { vocabStart: 5 });
    expect(() => rl.mergeTokenStats([a2, b2])).toThrow(expect.objectContaining({ code: 'ERR_TARGET_RANGE' }));
    const b = rl.tokenStatsPartial({ data: cols(5, 10), rows: 2, vocab: 5 }, t, { vocabStart: 5 });
    const merged = await rl.mergeTokenStatsAsync([a, b]);
    expect(merged).toEqual(rl.mergeTokenStats([a, b]));
    const whole = rl.tokenStats({ data: z, rows: 2, vocab: 10 }, t);
    expect(maxScaledError(merged.logprob, whole.logprob)).toBeLessThanOrEqual(1e-6);
  });
});
