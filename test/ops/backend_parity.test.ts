// Backend parity (as ggml's test-backend-ops): every native op, on every instruction-set path this CPU
// runs (and, for the logits ops, on the CUDA device where the CUDA module has one), against a float64
// reference written in the tests, with one tolerance per output — the same
// tolerances as the op's own test file. Each ISA runs with a different thread count, so a kernel that
// only agrees with itself, or only on one path, fails here. The edge cases that once broke one path
// (an overflowing float32 ratio times a zero derivative, A = 0 with an overflowing ratio, rows that
// start inside a vector) are cases of their own.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { gearReference } from '../helpers/gear_reference.js';
import { ISAS, LOADED, restoreBackendAfterAll } from '../helpers/isa.js';
import {
  encode, maxScaledError, randomLogits, refDivergence, refDivergenceGrad, refTokenStats, refTokenStatsGrad,
  type DType, type Kind,
} from '../helpers/reference.js';
import { adam64, randomTensors, sgd64 } from '../optim/reference.js';
import { rng as mulberry32 } from '../helpers/reference.js';

restoreBackendAfterAll();

/** One output: what the op computed, what float64 says, and the largest allowed error. */
interface Check { got: ArrayLike<number>; want: ArrayLike<number>; tol: number; metric?: 'scaled' | 'relsum' }
interface OpCase { op: string; name: string; run(): Record<string, Check> }

// tokenStats / divergence: |a - e| / max(1, |e|) <= 1e-5 (test/ops/token_stats.test.ts, divergence.test.ts)
const LOGITS_TOL = 1e-5;
// gradients of the logits kernels: the backward tests' bound on dL/dz (float32 outputs, scaled error)
const GRAD_TOL = 1e-5;

function logits(data: Float32Array | Uint16Array, rows: number, vocab: number, dtype: DType): rl.Logits {
  return dtype === 'float32' ? { data, rows, vocab } : { data, rows, vocab, dtype };
}

/** Logits with masked (-Infinity) entries, one fully masked block and a wide spread; targets on finite entries. */
function logitsCase(seed: number, rows: number, vocab: number) {
  const z = randomLogits(seed, rows, vocab, 4);
  const r = mulberry32(seed + 1);
  for (let i = 0; i < z.length; i++) if (r() < 0.05) z[i] = -Infinity;
  if (rows > 1 && vocab > 2100) for (let v = 0; v < 2048; v++) z[vocab + v] = -Infinity; // row 1: a whole block masked
  if (rows > 2) z[2 * vocab + 3] = 900; // a spike: the rest of row 2 underflows
  const targets = new Int32Array(rows);
  for (let i = 0; i < rows; i++) {
    let y = Math.floor(r() * vocab);
    while (z[i * vocab + y] === -Infinity) y = (y + 1) % vocab;
    targets[i] = y;
  }
  return { z, targets };
}

const LOGIT_SHAPES: [number, number][] = [[7, 33], [5, 3001], [3, 32000]];
const DTYPES: DType[] = ['float32', 'bfloat16', 'float16'];
const cases: OpCase[] = [];
// The variants besides the CPU's ISAs: the CUDA device (where the CUDA module runs with one), on which the
// logits ops' cases run again with their host arrays staged through it (device tensors: test/cuda).
const VARIANTS: string[] = rl.cuda.available() ? ['cuda'] : [];
const LOGITS_OPS = new Set(['tokenStats', 'tokenStatsPartial+merge', 'tokenStatsBackward', 'divergence', 'divergenceBackward']);
let DEVICE: rl.Device | undefined;

for (const dtype of DTYPES) {
  for (const [rows, vocab] of LOGIT_SHAPES) {
    const { z, targets } = logitsCase(rows * 31 + vocab, rows, vocab);
    const { data, decoded } = encode(z, dtype);
    const L = logits(data, rows, vocab, dtype);
    const T = 0.7;
    cases.push({
      op: 'tokenStats', name: `${dtype} ${rows}x${vocab}`,
      run() {
        const got = rl.tokenStats(L, targets, { temperature: T, device: DEVICE });
        const want = refTokenStats(decoded, rows, vocab, targets, T);
        return {
          logprob: { got: got.logprob, want: want.logprob, tol: LOGITS_TOL },
          entropy: { got: got.entropy, want: want.entropy, tol: LOGITS_TOL },
          logsumexp: { got: got.logsumexp, want: want.logsumexp, tol: LOGITS_TOL },
        };
      },
    });
    cases.push({
      op: 'tokenStatsPartial+merge', name: `${dtype} ${rows}x${vocab}, two shards`,
      run() {
        const cut = Math.max(1, Math.floor(vocab / 3));
        const shard = (v0: number, v1: number) => {
          const w = v1 - v0;
          const part = dtype === 'float32' ? new Float32Array(rows * w) : new Uint16Array(rows * w);
          for (let r = 0; r < rows; r++) part.set(data.subarray(r * vocab + v0, r * vocab + v1), r * w);
          return rl.tokenStatsPartial(logits(part, rows, w, dtype), targets, { vocabStart: v0, temperature: T, device: DEVICE });
        };
        const got = rl.mergeTokenStats([shard(0, cut), shard(cut, vocab)]);
        const want = refTokenStats(decoded, rows, vocab, targets, T);
        return {
          logprob: { got: got.logprob, want: want.logprob, tol: LOGITS_TOL },
          entropy: { got: got.entropy, want: want.entropy, tol: LOGITS_TOL },
        };
      },
    });
    const gl = Float32Array.from({ length: rows }, (_, r) => Math.sin(r + 1));
    const ge = Float32Array.from({ length: rows }, (_, r) => Math.cos(r + 1) / 2);
    cases.push({
      op: 'tokenStatsBackward', name: `${dtype} ${rows}x${vocab}`,
      run() {
        const got = rl.tokenStatsBackward(L, targets, { logprob: gl, entropy: ge }, { temperature: T, device: DEVICE });
        const want = refTokenStatsGrad(decoded, rows, vocab, targets, gl, ge, T);
        return { dlogits: { got, want, tol: GRAD_TOL } };
      },
    });
    // the teacher masks the same entries: forward KL stays finite (a support mismatch is +Infinity)
    const zt = randomLogits(rows * 7 + vocab, rows, vocab, 3).map((x, i) => (z[i] === -Infinity ? -Infinity : x));
    const t = encode(zt, dtype);
    const LT = logits(t.data, rows, vocab, dtype);
    for (const [kind, beta] of [['reverse_kl', 0.5], ['forward_kl', 0.5], ['jsd', 0.3]] as [Kind, number][]) {
      cases.push({
        op: 'divergence', name: `${kind} ${dtype} ${rows}x${vocab}`,
        run() {
          const got = rl.divergence(L, LT, { kind, beta, temperature: T, targets, device: DEVICE });
          const want = refDivergence(decoded, t.decoded, rows, vocab, kind, beta, T, targets);
          return {
            value: { got: got.value, want: want.value, tol: LOGITS_TOL },
            studentEntropy: { got: got.studentEntropy, want: want.studentEntropy, tol: LOGITS_TOL },
            studentLogsumexp: { got: got.studentLogsumexp, want: want.studentLogsumexp, tol: LOGITS_TOL },
            teacherLogsumexp: { got: got.teacherLogsumexp, want: want.teacherLogsumexp, tol: LOGITS_TOL },
          };
        },
      });
      const g = Float32Array.from({ length: rows }, (_, r) => 1 + (r % 3) / 2);
      cases.push({
        op: 'divergenceBackward', name: `${kind} ${dtype} ${rows}x${vocab}`,
        run() {
          const got = rl.divergenceBackward(L, LT, g, { kind, beta, temperature: T, device: DEVICE });
          const want = refDivergenceGrad(decoded, t.decoded, rows, vocab, kind, beta, T, g);
          return { dstudent: { got, want, tol: GRAD_TOL } };
        },
      });
    }
  }
}

// ---- packed-row ops ----
function packed(seed: number, rows: number, maxLen: number) {
  const r = mulberry32(seed);
  const off = new Int32Array(rows + 1);
  for (let i = 0; i < rows; i++) off[i + 1] = off[i]! + Math.floor(r() * (maxLen + 1));
  const n = off[rows]!;
  const mask = Uint8Array.from({ length: n }, () => (r() < 0.8 ? 1 : 0));
  return { off, n, mask, r };
}

{
  const { off, n, mask, r } = packed(5, 900, 300);
  const v32 = Float32Array.from({ length: n }, () => (r() - 0.5) * 8);
  const v64 = Float64Array.from(v32);
  const R = off.length - 1;
  const ref = (op: rl.SegmentOp) => Float64Array.from({ length: R }, (_, i) => {
    const xs: number[] = [];
    for (let t = off[i]!; t < off[i + 1]!; t++) if (mask[t]) xs.push(v64[t]!);
    if (op === 'sum') return xs.reduce((a, b) => a + b, 0);
    if (op === 'mean') return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
    if (op === 'max') return xs.length ? Math.max(...xs) : -Infinity;
    if (op === 'min') return xs.length ? Math.min(...xs) : Infinity;
    return xs.length;
  });
  for (const op of ['sum', 'mean', 'max', 'min', 'count'] as rl.SegmentOp[]) {
    cases.push({
      op: 'segmentReduce', name: `${op}, float32 values, masked`,
      run: () => ({ out: { got: rl.segmentReduce(v32, off, op, mask), want: ref(op), tol: 1e-12 } }),
    });
  }
  const rowValues = Float64Array.from({ length: R }, (_, i) => Math.sin(i) * 3);
  const want = new Float64Array(n);
  for (let i = 0; i < R; i++) for (let t = off[i]!; t < off[i + 1]!; t++) want[t] = mask[t] ? Math.fround(rowValues[i]!) : 0;
  cases.push({
    op: 'segmentBroadcast', name: 'masked rows',
    run: () => ({ out: { got: rl.segmentBroadcast(rowValues, off, mask), want, tol: 0 } }),
  });
}

// ---- policyLoss (native PPO kernel) against the float64 TS path ----
// Tolerances of test/losses/policy_loss.native.test.ts: the loss within a few float32 ulps of Σ|w·L|
// (the token sum may cancel), the gradient within 1e-6 relative.
function ppoBatch(seed: number, rows: number, maxLen: number) {
  const { off, n, mask, r } = packed(seed, rows, maxLen);
  const old = Float32Array.from({ length: n }, () => -0.05 - r() * 3);
  const lp = Float32Array.from(old, (o) => o + (r() * 2 - 1) * 0.4);
  const adv = Float32Array.from({ length: n }, () => r() * 4 - 2);
  return { off, n, mask, lp, old, adv };
}

function ppoCase(name: string, b: ReturnType<typeof ppoBatch>, extra: Record<string, unknown> = {}): OpCase {
  return {
    op: 'policyLoss', name,
    run() {
      const a = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, clipHigh: 0.28, ...extra };
      const nat = rl.policyLoss(a as rl.PolicyLossArgs);
      const ts = rl.policyLoss({ ...a, native: false } as rl.PolicyLossArgs);
      expect(nat.grad.every(Number.isFinite), `${name}: finite gradient`).toBe(true);
      expect(Number.isFinite(nat.loss), `${name}: finite loss`).toBe(true);
      return {
        loss: { got: [nat.loss], want: [ts.loss], tol: 1e-6 },
        grad: { got: nat.grad, want: ts.grad, tol: 1e-6, metric: 'relsum' },
        clipfrac: { got: [nat.metrics.pg_clipfrac!], want: [ts.metrics.pg_clipfrac!], tol: 1e-6 },
        ppoKl: { got: [nat.metrics.ppo_kl!], want: [ts.metrics.ppo_kl!], tol: 1e-6 },
      };
    },
  };
}

{
  const b = ppoBatch(11, 400, 300);
  for (const agg of rl.AGG_MODES) cases.push(ppoCase(`${agg}, masked`, b, { mask: b.mask, agg }));
  const s = ppoBatch(16, 3000, 12); // rows start inside vectors (short and empty rows)
  cases.push(ppoCase('short rows inside vectors', s, { mask: s.mask }));
  // |δ| beyond the clamp, an overflowing float32 ratio (δ ≈ 300) with A = 0 and with A ≠ 0, |A| > 2^40
  const o = ppoBatch(13, 60, 300);
  for (let t = 0; t < o.n; t += 17) o.lp[t] = o.old[t]! + (t % 2 ? 25 : -25);
  for (let t = 5; t < o.n; t += 97) o.lp[t] = o.old[t]! + (t % 2 ? 650 : -650);
  for (let t = 3; t < o.n; t += 61) o.adv[t] = t % 2 ? 2 ** 41 : -(2 ** 41);
  for (let t = 9; t < o.n; t += 131) { o.lp[t] = o.old[t]! + 300; o.adv[t] = 0; }
  for (const logRatioClamp of [20, 1200, null]) cases.push(ppoCase(`overflow cases, no mask, clamp ${logRatioClamp}`, o, { logRatioClamp }));
}

// ---- GEAR scan against its float64 reference ----
{
  const r = mulberry32(77);
  const lens = Array.from({ length: 40 }, () => Math.floor(r() * 90));
  const offsets = new Int32Array(lens.length + 1);
  lens.forEach((l, i) => (offsets[i + 1] = offsets[i]! + l));
  const n = offsets[lens.length]!;
  const divergence = Float32Array.from({ length: n }, () => { const u = r(); return u < 0.1 ? 1 + r() * 24 : u < 0.2 ? 0 : r() * 0.3; });
  const entropy = Float32Array.from({ length: n }, () => (r() < 0.1 ? 0 : r() * 3));
  const mask = Uint8Array.from({ length: n }, () => (r() < 0.15 ? 0 : 1));
  const advantages = Float64Array.from(lens, () => (r() < 0.2 ? 0 : (r() - 0.5) * 4));
  const b = { advantages, offsets, mask, divergence, entropy };
  cases.push({
    op: 'gear', name: '40 rows, spikes above the cap, masked tokens',
    run() {
      const res = rl.gear(b);
      const ref = gearReference(b);
      expect(Array.from(res.segmentId)).toEqual(ref.segmentId);
      expect(Array.from(res.anchors)).toEqual(ref.anchors);
      return {
        weights: { got: res.weights, want: ref.weights, tol: 2e-7, metric: 'relsum' },
        advantages: { got: res.advantages, want: ref.advantages, tol: 2e-7, metric: 'relsum' },
      };
    },
  });
}

// ---- optimizer steps and gradient clipping against float64 ----
{
  const lengths = [70_001, 3, 4096, 0, 129];
  const hp = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, wd: 0.01, amsgrad: true, maximize: false };
  cases.push({
    op: 'AdamW.step', name: 'amsgrad, 3 steps, 5 tensors',
    run() {
      const params = randomTensors(1, lengths);
      const p64 = params.map((p) => Array.from(p));
      const m = p64.map((p) => p.map(() => 0)), v = p64.map((p) => p.map(() => 0)), vm = p64.map((p) => p.map(() => 0));
      const opt = new rl.AdamW(params, { lr: hp.lr, weightDecay: hp.wd, amsgrad: true });
      for (let s = 1; s <= 3; s++) {
        const g = randomTensors(10 + s, lengths);
        opt.step(g);
        p64.forEach((p, i) => adam64(p, Array.from(g[i]!), m[i]!, v[i]!, vm[i]!, hp, s, true));
      }
      return { params: { got: params.flatMap((p) => Array.from(p)), want: p64.flat(), tol: 1e-5 } };
    },
  });
  const shp = { lr: 0.01, momentum: 0.9, dampening: 0, wd: 1e-2, nesterov: true, maximize: false };
  cases.push({
    op: 'SGD.step', name: 'nesterov + weight decay, 3 steps',
    run() {
      const params = randomTensors(2, lengths);
      const p64 = params.map((p) => Array.from(p));
      const buf = p64.map((p) => p.map(() => 0));
      const opt = new rl.SGD(params, { lr: shp.lr, momentum: shp.momentum, nesterov: true, weightDecay: shp.wd });
      for (let s = 1; s <= 3; s++) {
        const g = randomTensors(20 + s, lengths);
        opt.step(g);
        p64.forEach((p, i) => sgd64(p, Array.from(g[i]!), buf[i]!, shp, s === 1));
      }
      return { params: { got: params.flatMap((p) => Array.from(p)), want: p64.flat(), tol: 1e-5 } };
    },
  });
  cases.push({
    op: 'clipGradNorm', name: 'total norm and scaled gradients',
    run() {
      const g = randomTensors(30, lengths, 3);
      const g64 = g.map((x) => Array.from(x));
      const norm64 = Math.sqrt(g64.flat().reduce((a, x) => a + x * x, 0));
      const norm = rl.clipGradNorm(g, 10);
      const scale = Math.min(1, 10 / (norm64 + 1e-6));
      return {
        norm: { got: [norm], want: [norm64], tol: 1e-6 },
        grads: { got: g.flatMap((x) => Array.from(x)), want: g64.flat().map((x) => x * scale), tol: 1e-6 },
      };
    },
  });
}

/** Error of one output under its metric: scaled per element, or relative to the largest |expected|. */
function error(c: Check): number {
  expect(c.got.length).toBe(c.want.length);
  if (c.metric !== 'relsum') return maxScaledError(c.got, c.want);
  let scale = 0;
  for (let i = 0; i < c.want.length; i++) scale = Math.max(scale, Math.abs(c.want[i]!));
  let worst = 0;
  for (let i = 0; i < c.want.length; i++) {
    const e = Math.abs(c.got[i]! - c.want[i]!) / Math.max(scale, 1e-30);
    worst = Number.isNaN(e) ? Infinity : Math.max(worst, e);
  }
  return worst;
}

describe('backend parity: every native op on every ISA against float64', () => {
  it('runs on every ISA this CPU supports and no other', () => {
    expect(ISAS[0]).toBe('baseline');
    expect(ISAS).toContain(LOADED);
    for (const isa of ISAS) expect(rl.setIsa(isa)).toBe(isa);
  });

  const ops = [...new Set(cases.map((c) => c.op))];
  for (const op of ops) {
    const paths = [...ISAS, ...(LOGITS_OPS.has(op) ? VARIANTS : [])];
    it(`${op}: ${paths.join(', ')}`, () => {
      for (const c of cases.filter((x) => x.op === op)) {
        paths.forEach((path, k) => {
          DEVICE = path === 'cuda' ? 'cuda' : undefined;
          if (!DEVICE) rl.setIsa(path as rl.Isa);
          rl.setNumThreads(1 + (k % 3)); // a different split per path: results may not depend on it
          try {
            const out = c.run();
            for (const [field, chk] of Object.entries(out)) {
              expect(error(chk), `${op} ${c.name} on ${path}: ${field}`).toBeLessThanOrEqual(chk.tol);
            }
          } finally {
            DEVICE = undefined;
          }
        });
      }
    });
  }
});
