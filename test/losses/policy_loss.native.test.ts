// The fused native PPO kernel called directly: agreement with the TS float64 path, determinism across
// thread counts and ISAs, and its own argument checks.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { aggWeights } from '../../ts/losses/aggregate.js';
import { native } from '../../ts/core/addon.js';
import type { PolicyLossPpoParams } from '../../ts/losses/policy/ppo_native.js';
import { expectClose } from '../helpers/peer.js';
import { expectGearError, randomBatch } from './helpers.js';
import { LOADED, eachIsa, restoreBackendAfterAll } from '../helpers/isa.js';

const params = (o: Partial<Record<string, number>> = {}) =>
  new Float64Array([o.lo ?? 0.2, o.hi ?? 0.28, o.c ?? 3, o.clamp ?? 20, o.gt ?? -1, o.gr ?? -1, o.lsf ?? -1, o.dp ?? 1]);

/**
 * The raw addon's policyLossPpo with the settings above as named parameters (-1: not set), its
 * statistics listed in the kernel's order (loss, tokens, clipped, lower, Σ−x, Σρ, min ρ, max ρ, nan).
 */
function ppo(...args: unknown[]): { grad: Float32Array; stats: number[] } {
  const [logprob, oldLogprob, advantages, offsets, mask, p, agg, semantics, out] = args as [
    Float32Array, Float32Array, Float32Array, Int32Array, Uint8Array | null, Float64Array, number, number, Float32Array | null];
  const r = native.policyLossPpo({
    logprob, oldLogprob, advantages, offsets, mask, clipLow: p[0]!, clipHigh: p[1]!, clipC: p[2]!, logRatioClamp: p[3],
    globalTokens: p[4], globalRows: p[5], lossScaleFactor: p[6], dpSize: p[7], agg, semantics, out,
  } as PolicyLossPpoParams);
  return { grad: r.grad, stats: [r.loss, r.tokens, r.clipped, r.lower, r.negKl, r.ratioSum, r.ratioMin, r.ratioMax, r.nan ? 1 : 0] };
}

function big(seed: number, rows: number) {
  const b = randomBatch(seed, rows, 300, 0.5);
  return { ...b, lp: Float32Array.from(b.lp), old: Float32Array.from(b.old), adv: Float32Array.from(b.adv) };
}

const MODES = rl.AGG_MODES;

// Distance in float32 units in the last place (both values rounded to float32; sign-magnitude bits
// mapped to a monotonic integer line).
const f32 = new Float32Array(1);
const i32 = new Int32Array(f32.buffer);
function ord(x: number): number { f32[0] = x; const i = i32[0]!; return i < 0 ? -(i & 0x7fffffff) : i; }
function ulps(a: number, b: number): number { return Math.abs(ord(a) - ord(b)); }

// Σ_t |w_t · L_t| in float64 (PPO with dual clip, default clips but clipHigh 0.28): the scale of the
// loss's rounding error. Each token's float32 L_t is within a few ulps, so the loss error is bounded by
// a few float32 ulps of this sum, whatever the cancellation between tokens of opposite sign.
function sumAbsWL(lp: Float32Array, old: Float32Array, adv: Float32Array, off: Int32Array, mask: Uint8Array | undefined, agg: rl.AggMode): number {
  const { w } = aggWeights(off, mask, agg, {});
  let s = 0;
  for (let t = 0; t < lp.length; t++) {
    const a = adv[t]!, r = Math.exp(Math.min(Math.max(lp[t]! - old[t]!, -20), 20));
    let L = Math.max(-a * r, -a * Math.min(Math.max(r, 0.8), 1.28));
    if (a < 0) L = Math.min(L, -a * 3);
    s += Math.abs(w[t]! * L);
  }
  return s;
}
const F32_ULP = 2 ** -23;

describe('native policyLossPpo', () => {
  restoreBackendAfterAll();

  // The native pass does its per-token math in float32 (as verl's torch loss) and sums in float64; the TS
  // path is float64 throughout. Documented agreement: loss and metrics within 1e-6 relative, gradient
  // within 1e-6 relative and 4 float32 ulps.
  it('equals the TS path (loss 1e-6, grad 1e-6 / 4 ulps) on a large batch, every mode and semantics, every ISA', () => {
    const b = big(11, 700); // ~100k tokens: several fixed blocks
    eachIsa(() => {
    for (const semantics of ['verl', 'verl-legacy', 'verl-agent'] as const) {
      for (const agg of MODES) {
        if (semantics !== 'verl' && agg === 'token-sum') continue;
        const a = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, agg, semantics, clipHigh: 0.28 };
        const nat = rl.policyLoss(a);
        const ts = rl.policyLoss({ ...a, native: false });
        if (Number.isNaN(ts.loss)) expect(nat.loss).toBeNaN(); // verl-agent seq-mean-token-mean with an empty row
        else expect(Math.abs(nat.loss - ts.loss)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(ts.loss)));
        expectClose(nat.grad, ts.grad, { rtol: 1e-6, atol: 1e-12, what: `${semantics}/${agg}` });
        let worst = 0;
        for (let t = 0; t < b.n; t++) worst = Math.max(worst, ulps(nat.grad[t]!, ts.grad[t]!));
        expect(worst).toBeLessThanOrEqual(4); // exp ~1 ulp, then two float32 products
        for (const k of Object.keys(ts.metrics)) expect(Math.abs(nat.metrics[k]! - ts.metrics[k]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(ts.metrics[k]!)));
      }
    }
    });
  });

  // Rows of 0-12 tokens: most 16-token vectors hold several rows (and empty ones), so the per-lane row
  // weights of the vector kernel carry the result.
  // The loss of this batch cancels heavily (tokens of both signs): its error is bounded by a few
  // float32 ulps of Σ|w·L|, not of |loss|.
  it('equals the TS path when rows start inside a 16-token vector (short and empty rows), every ISA', () => {
    const b = randomBatch(16, 4000, 12, 0.5);
    const a32 = { logprob: Float32Array.from(b.lp), oldLogprob: Float32Array.from(b.old), advantages: Float32Array.from(b.adv), offsets: b.off, mask: b.mask };
    eachIsa((isa) => {
      for (const agg of MODES) {
        const nat = rl.policyLoss({ ...a32, agg, clipHigh: 0.28 });
        const ts = rl.policyLoss({ ...a32, agg, clipHigh: 0.28, native: false });
        const scale = sumAbsWL(a32.logprob, a32.oldLogprob, a32.advantages, b.off, b.mask, agg);
        expect(scale).toBeGreaterThan(Math.abs(ts.loss));
        expect(Math.abs(nat.loss - ts.loss), `${isa}/${agg}`).toBeLessThanOrEqual(4 * F32_ULP * scale + 1e-12);
        let worst = 0;
        for (let t = 0; t < b.n; t++) worst = Math.max(worst, ulps(nat.grad[t]!, ts.grad[t]!));
        expect(worst, `${isa}/${agg}`).toBeLessThanOrEqual(4);
      }
    });
  });

  // A reused output of at least 32 MiB is written with streaming stores over whole aligned lines, joined
  // from the token-aligned vectors; every start alignment of the output must give the same bits as an
  // ordinary fresh output and leave the neighbouring floats alone. Every alignment of a 64-byte line on the
  // ISA selected at load, those of a 32-byte one on the others.
  it('writes a large reused out at every alignment exactly like a fresh output, every ISA', () => {
    const rows = 8200;
    const off = new Int32Array(rows + 1);
    for (let i = 0; i < rows; i++) off[i + 1] = off[i]! + 1 + ((i * 7919) % 2047);
    const n = off[rows]!;
    expect(n * 4).toBeGreaterThanOrEqual(32 << 20);
    const lp = new Float32Array(n), old = new Float32Array(n), adv = new Float32Array(n), mask = new Uint8Array(n);
    for (let i = 0; i < rows; i++) {
      for (let t = off[i]!; t < off[i + 1]!; t++) {
        old[t] = -0.05 - ((t * 2654435761) % 1000) / 400;
        lp[t] = old[t]! + (((t * 40503) % 801) - 400) / 1000;
        adv[t] = ((i * 97) % 41) / 10 - 2;
        mask[t] = t % 5 === 0 ? 0 : 1;
      }
    }
    const p = params();
    const buf = new Float32Array(n + 17);
    eachIsa((isa) => {
      const fresh = ppo(lp, old, adv, off, mask, p, 3, 0, null);
      const want = Buffer.from(fresh.grad.buffer, fresh.grad.byteOffset, fresh.grad.byteLength);
      for (let ph = 0; ph < (isa === LOADED ? 16 : 8); ph++) {
        buf.fill(NaN);
        const out = buf.subarray(ph + 1, ph + 1 + n);
        const r = ppo(lp, old, adv, off, mask, p, 3, 0, out);
        expect([...r.stats], `${isa} ${ph}`).toEqual([...fresh.stats]);
        expect(Buffer.from(out.buffer, out.byteOffset, out.byteLength).equals(want), `${isa} ${ph}`).toBe(true);
        expect(buf[ph]).toBeNaN();
        expect(buf[ph + 1 + n]).toBeNaN();
      }
    });
  });

  it('is bit-identical across thread counts and equal across ISAs', () => {
    const b = big(12, 900);
    const run = () => ppo(b.lp, b.old, b.adv, b.off, b.mask, params(), 3, 0, null);
    rl.setNumThreads(1);
    const one = run();
    rl.setNumThreads(2);
    const two = run();
    expect([...two.stats]).toEqual([...one.stats]);
    expect(Buffer.from(two.grad.buffer).equals(Buffer.from(one.grad.buffer))).toBe(true);
    // baseline uses the C library's float32 exp, the vector paths their own vector exp (all within ~1 ulp)
    eachIsa((isa) => {
      rl.setNumThreads(3);
      const other = run();
      expect(Math.abs(other.stats[0]! - one.stats[0]!), isa).toBeLessThanOrEqual(1e-6 * Math.abs(one.stats[0]!));
      expectClose(other.grad, one.grad, { rtol: 1e-6, atol: 1e-12, what: isa });
    });
  });

  it('without a mask, with log-ratio clamp off, and with |δ| beyond the clamp', () => {
    const b = big(13, 50);
    for (let t = 0; t < b.n; t += 17) b.lp[t] = b.old[t]! + (t % 2 ? 25 : -25);
    for (let t = 5; t < b.n; t += 97) b.lp[t] = b.old[t]! + (t % 2 ? 650 : -650);
    for (let t = 3; t < b.n; t += 61) b.adv[t] = t % 2 ? 2 ** 41 : -(2 ** 41); // beyond the common path's |A| bound
    // 20 and 1200: below / beyond where the float32 ratio overflows (δ ≈ 88.7); null: no clamp at all
    for (let t = 9; t < b.n; t += 131) { b.lp[t] = b.old[t]! + 300; b.adv[t] = 0; } // ρ overflows float32, A = 0
    eachIsa((isa) => {
      for (const logRatioClamp of [20, 1200, null]) {
        const a = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, logRatioClamp };
        const nat = rl.policyLoss(a);
        const ts = rl.policyLoss({ ...a, native: false });
        expect(Number.isFinite(ts.loss)).toBe(true);
        expect(Math.abs(nat.loss - ts.loss), `${isa} clamp ${logRatioClamp}`).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(ts.loss)));
        expect(nat.grad.every(Number.isFinite), `${isa} clamp ${logRatioClamp}`).toBe(true);
        expectClose(nat.grad, ts.grad, { rtol: 1e-6, atol: 1e-12, what: `${isa} clamp ${logRatioClamp}` });
      }
    });
  });

  it('re-checks its inputs on its own', () => {
    const b = big(14, 5);
    const n = b.n;
    const call = (...args: unknown[]) => () => ppo(...args);
    const ok = [b.lp, b.old, b.adv, b.off, b.mask, params(), 0, 0, null] as unknown[];
    const with_ = (i: number, v: unknown) => ok.map((x, j) => (j === i ? v : x));
    expect(() => ppo(...ok)).not.toThrow();
    expectGearError(call(...with_(0, new Float64Array(n))), 'ERR_DTYPE');
    expectGearError(call(...with_(1, new Float32Array(n + 1))), 'ERR_SHAPE');
    expectGearError(call(...with_(2, new Float32Array(n - 1))), 'ERR_SHAPE');
    expectGearError(call(...with_(3, new Int32Array([0, n + 5]))), 'ERR_OFFSETS');
    expectGearError(call(...with_(3, new Int32Array([1, n]))), 'ERR_OFFSETS');
    expectGearError(call(...with_(3, new Int32Array(0))), 'ERR_SHAPE');
    expectGearError(call(...with_(4, new Uint8Array(n + 1))), 'ERR_SHAPE');
    expectGearError(call(...with_(5, params({ c: 1 }))), 'ERR_OPTION');
    expectGearError(call(...with_(5, params({ lo: -1 }))), 'ERR_OPTION');
    expectGearError(call(...with_(5, params({ hi: NaN }))), 'ERR_OPTION');
    expectGearError(call(...with_(5, params({ gt: 1 }))), 'ERR_OPTION');
    expectGearError(call(...with_(5, params({ dp: 1.5 }))), 'ERR_OPTION');
    expectGearError(call(...with_(6, 5)), 'ERR_OPTION');
    expectGearError(call(...with_(7, -1)), 'ERR_OPTION');
    expectGearError(call(...with_(6, 1).map((x, j) => (j === 7 ? 1 : x))), 'ERR_OPTION'); // token-sum under legacy semantics
    expectGearError(call(...with_(8, new Float32Array(n + 1))), 'ERR_SHAPE');
    const m = b.mask.slice(); m[1] = 7;
    expectGearError(call(...with_(4, m)), 'ERR_OPTION');
    const bad = b.adv.slice(); const t = b.mask.indexOf(1); bad[t] = NaN;
    expectGearError(call(...with_(2, bad)), 'ERR_NON_FINITE');
  });

  it('handles empty batches and empty rows', () => {
    const r = ppo(new Float32Array(0), new Float32Array(0), new Float32Array(0), new Int32Array([0, 0, 0]), null, params(), 0, 0, null);
    expect(r.grad.length).toBe(0);
    expect(r.stats[0]).toBe(0);
  });
});

describe('policyLossAsync', () => {
  it('equals the sync form (native and TS kinds) and rejects with ERR_ABORTED when aborted', async () => {
    const b = big(15, 200);
    const a = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask, agg: 'seq-mean-token-mean' as const };
    const s = rl.policyLoss(a);
    const as = await rl.policyLossAsync(a);
    expect(as.loss).toBe(s.loss);
    expect([...as.grad]).toEqual([...s.grad]);
    const g = await rl.policyLossAsync({ ...a, kind: 'gpg' });
    expect(g.loss).toBe(rl.policyLoss({ ...a, kind: 'gpg' }).loss);
    const ac = new AbortController();
    ac.abort();
    await expect(rl.policyLossAsync(a, { signal: ac.signal })).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    await expect(rl.policyLossAsync({ ...a, clipC: 1 })).rejects.toMatchObject({ code: 'ERR_OPTION' });
  });
  it('fills a supplied out: native and TS paths, both float types, async; rejects bad or overlapping outs', async () => {
    const b = big(21, 60);
    const base = { logprob: b.lp, oldLogprob: b.old, advantages: b.adv, offsets: b.off, mask: b.mask };
    const bits = (x: Float32Array | Float64Array) => Array.from(new Uint8Array(x.buffer, x.byteOffset, x.byteLength));
    for (const extra of [{}, { native: false }, { kind: 'gmpo' as const }, { agg: 'seq-mean-token-mean' as const }]) {
      const fresh = rl.policyLoss({ ...base, ...extra });
      const out = new Float32Array(b.n).fill(NaN); // stale contents must not leak into masked tokens
      const r = rl.policyLoss({ ...base, ...extra, out });
      expect(r.grad).toBe(out);
      expect(bits(out)).toEqual(bits(fresh.grad));
      expect(r.loss).toBe(fresh.loss);
      expect(r.metrics).toEqual(fresh.metrics);
    }
    const lp64 = Float64Array.from(b.lp);
    const fresh64 = rl.policyLoss({ ...base, logprob: lp64 });
    const out64 = new Float64Array(b.n).fill(NaN);
    expect(rl.policyLoss({ ...base, logprob: lp64, out: out64 }).grad).toBe(out64);
    expect(bits(out64)).toEqual(bits(fresh64.grad));
    const outA = new Float32Array(b.n).fill(NaN);
    expect((await rl.policyLossAsync({ ...base, out: outA })).grad).toBe(outA);
    expect(bits(outA)).toEqual(bits(rl.policyLoss(base).grad));

    expectGearError(() => rl.policyLoss({ ...base, out: new Float64Array(b.n) }), 'ERR_DTYPE');
    expectGearError(() => rl.policyLoss({ ...base, out: new Float32Array(b.n - 1) }), 'ERR_SHAPE');
    expectGearError(() => rl.policyLoss({ ...base, out: b.lp }), 'ERR_OPTION');
    const shared = new Float32Array(2 * b.n + 1);
    shared.set(b.adv, 1);
    const adv = shared.subarray(1, b.n + 1);
    expectGearError(() => rl.policyLoss({ ...base, advantages: adv, out: shared.subarray(b.n, 2 * b.n) }), 'ERR_OPTION');
    expect(() => rl.policyLoss({ ...base, advantages: adv, out: shared.subarray(b.n + 1) })).not.toThrow();
  });
});
