import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';
import type { SegmentOpCode } from '../../ts/ops/segment.js';
import { ISAS, LOADED } from '../helpers/isa.js';

// float64 reference
function refReduce(v: ArrayLike<number>, off: Int32Array, op: string, mask?: Uint8Array): number[] {
  const out: number[] = [];
  for (let r = 0; r + 1 < off.length; r++) {
    const xs: number[] = [];
    for (let t = off[r]!; t < off[r + 1]!; t++) if (!mask || mask[t]) xs.push(v[t]!);
    if (op === 'sum') out.push(xs.reduce((a, b) => a + b, 0));
    if (op === 'mean') out.push(xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
    if (op === 'max') out.push(xs.reduce((a, b) => Math.max(a, b), -Infinity));
    if (op === 'min') out.push(xs.reduce((a, b) => Math.min(a, b), Infinity));
    if (op === 'count') out.push(xs.length);
  }
  return out;
}

function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

function randomBatch(seed: number, rows: number) {
  const r = rng(seed);
  const lens = Array.from({ length: rows }, () => Math.floor(r() * 9));
  const off = new Int32Array(rows + 1);
  lens.forEach((l, i) => (off[i + 1] = off[i]! + l));
  const n = off[rows]!;
  const v = Float64Array.from({ length: n }, () => r() * 10 - 5);
  const mask = Uint8Array.from({ length: n }, () => (r() < 0.7 ? 1 : 0));
  return { off, v, mask, n };
}

describe('segmentReduce', () => {
  for (const op of ['sum', 'mean', 'max', 'min', 'count'] as const) {
    it(`${op} matches the float64 reference, with and without mask`, () => {
      for (const rows of [0, 1, 5, 64]) {
        const { off, v, mask } = randomBatch(rows + 7, rows);
        for (const m of [undefined, mask]) {
          const want = refReduce(v, off, op, m);
          expect(Array.from(rl.segmentReduce(v, off, op, m))).toEqual(want);
          const got32 = rl.segmentReduce(Float32Array.from(v), off, op, m);
          const want32 = refReduce(Float32Array.from(v), off, op, m);
          want32.forEach((w, i) => expect(got32[i]).toBeCloseTo(w, 9));
        }
      }
    });
  }

  it('gives sum 0, count 0, mean 0, max -Infinity, min +Infinity on empty and fully masked rows', () => {
    const off = new Int32Array([0, 0, 2]);
    const v = new Float32Array([1, 2]);
    const m = new Uint8Array([0, 0]);
    for (const [op, want] of [['sum', 0], ['count', 0], ['mean', 0], ['max', -Infinity], ['min', Infinity]] as const) {
      expect(Array.from(rl.segmentReduce(v, off, op, m))).toEqual([want, want]);
    }
  });

  it('async form equals sync form', async () => {
    const { off, v, mask } = randomBatch(3, 64);
    expect(await rl.segmentReduceAsync(v, off, 'mean', mask)).toEqual(rl.segmentReduce(v, off, 'mean', mask));
  });

  it('rejects bad offsets, lengths and dtypes with GearError codes', () => {
    const v = new Float32Array(4);
    const bad = (f: () => unknown, code: string) => {
      try { f(); expect.fail('did not throw'); } catch (e) {
        expect(e).toBeInstanceOf(rl.GearError);
        expect((e as rl.GearError).code).toBe(code);
      }
    };
    bad(() => rl.segmentReduce(v, new Int32Array([0, 3, 2, 4]), 'sum'), 'ERR_OFFSETS');
    bad(() => rl.segmentReduce(v, new Int32Array([1, 4]), 'sum'), 'ERR_OFFSETS');
    bad(() => rl.segmentReduce(v, new Int32Array([0, 5]), 'sum'), 'ERR_OFFSETS');
    bad(() => rl.segmentReduce(v, new Int32Array([0, 4]), 'sum', new Uint8Array(3)), 'ERR_SHAPE');
    bad(() => rl.segmentReduce(new Int32Array(4) as any, new Int32Array([0, 4]), 'sum'), 'ERR_DTYPE');
    bad(() => rl.segmentReduce(v, new Int32Array([0, 4]), 'median' as any), 'ERR_OPTION');
    bad(() => rl.segmentBroadcast([1, 2], new Int32Array([0, 4])), 'ERR_SHAPE');
    // mask values other than 0/1, in the word-wide part and in the tail, on aligned and unaligned views
    for (const at of [0, 5, 8, 9]) {
      const m = new Uint8Array(10).fill(1);
      m[at] = 2;
      bad(() => rl.segmentReduce(new Float32Array(10), new Int32Array([0, 10]), 'sum', m), 'ERR_OPTION');
      const big = new Uint8Array(11).fill(1);
      big[at + 1] = 3;
      bad(() => rl.segmentReduce(new Float32Array(10), new Int32Array([0, 10]), 'sum', big.subarray(1)), 'ERR_OPTION');
    }
  });

  it('long batches (several work chunks, empty rows, one row longer than a chunk) match the reference exactly', () => {
    const r = rng(99);
    const lens = Array.from({ length: 400 }, (_, i) => (i === 137 ? 150_000 : i % 7 === 0 ? 0 : Math.floor(r() * 3000)));
    const off = new Int32Array(lens.length + 1);
    lens.forEach((l, i) => (off[i + 1] = off[i]! + l));
    const n = off[lens.length]!;
    const v = Float64Array.from({ length: n }, () => r() * 10 - 5);
    v[off[5]! + 3] = NaN; // NaN propagates through max/min/sum of its row only
    const mask = Uint8Array.from({ length: n }, () => (r() < 0.7 ? 1 : 0));
    mask[off[5]! + 3] = 1;
    for (const op of ['sum', 'mean', 'max', 'min', 'count'] as const) {
      for (const m of [undefined, mask]) {
        // float64 sums are sequential within a row, so even the rounding matches the reference
        expect(Array.from(rl.segmentReduce(v, off, op, m))).toEqual(refReduce(v, off, op, m));
        const v32 = Float32Array.from(v);
        expect(Array.from(rl.segmentReduce(v32, off, op, m))).toEqual(refReduce(v32, off, op, m));
      }
    }
  });

  it('the native layer checks offsets on its own', async () => {
    const { native } = await import('../../ts/core/addon.js');
    const call = () => native.segmentReduce({ values: new Float32Array(4), offsets: new Int32Array([0, 9]), mask: null, op: 0 });
    expect(call).toThrow(rl.GearError);
    const call2 = () => native.segmentBroadcast({ rowValues: new Float64Array(1), offsets: new Int32Array([0, -3]), mask: null });
    expect(call2).toThrow(rl.GearError);
  });

  it('the native kernels check mask values themselves and report the first bad index', async () => {
    const { native } = await import('../../ts/core/addon.js');
    const n = 200_000;
    const off = new Int32Array([0, 70_000, 70_000, n]);
    for (const at of [3, 69_999, 70_000, 150_001, n - 1]) {
      const m = new Uint8Array(n).fill(1);
      m[at] = 7;
      m[n - 1] = at === n - 1 ? 7 : 255; // a later bad byte must not be the one reported
      const want = { code: 'ERR_OPTION', message: `mask[${at}]: expected 0 or 1, got 7` };
      for (const op of [0, 2, 3, 4]) {
        expect(() => native.segmentReduce({ values: new Float32Array(n), offsets: off, mask: m, op: op as SegmentOpCode })).toThrow(expect.objectContaining(want));
      }
      expect(() => native.segmentBroadcast({ rowValues: new Float64Array(3), offsets: off, mask: m })).toThrow(expect.objectContaining(want));
      expect(() => rl.segmentReduce(new Float64Array(n), off, 'mean', m)).toThrow(expect.objectContaining(want));
      expect(() => rl.segmentBroadcast([1, 2, 3], off, m)).toThrow(expect.objectContaining(want));
      await expect(rl.segmentReduceAsync(new Float32Array(n), off, 'sum', m)).rejects.toMatchObject(want);
    }
  });
});

describe('segmentBroadcast', () => {
  it('writes each row value to its tokens and 0 where masked', () => {
    const off = new Int32Array([0, 2, 2, 5]);
    const m = new Uint8Array([1, 0, 1, 1, 0]);
    expect(Array.from(rl.segmentBroadcast([1.5, 7, -2], off, m))).toEqual([1.5, 0, -2, -2, 0]);
    expect(Array.from(rl.segmentBroadcast(new Float64Array([1.5, 7, -2]), off))).toEqual([1.5, 1.5, -2, -2, -2]);
  });

  it('matches a per-token reference on long batches (token blocks cut through rows, empty rows)', () => {
    const r = rng(5);
    const lens = Array.from({ length: 300 }, (_, i) => (i === 10 ? 140_000 : i % 5 === 0 ? 0 : Math.floor(r() * 2500)));
    const off = new Int32Array(lens.length + 1);
    lens.forEach((l, i) => (off[i + 1] = off[i]! + l));
    const n = off[lens.length]!;
    const vals = Float64Array.from(lens, () => r() * 4 - 2);
    vals[3] = -0;
    const mask = Uint8Array.from({ length: n }, () => (r() < 0.6 ? 1 : 0));
    for (const m of [undefined, mask]) {
      const want = new Float32Array(n);
      for (let row = 0; row < lens.length; row++) {
        for (let t = off[row]!; t < off[row + 1]!; t++) want[t] = !m || m[t] ? vals[row]! : 0;
      }
      const got = new Uint32Array(rl.segmentBroadcast(vals, off, m).buffer);
      const bits = new Uint32Array(want.buffer);
      // bit-exact, signed zeros included
      const firstDiff = got.findIndex((b, t) => b !== bits[t]);
      expect(firstDiff).toBe(-1);
    }
  });

  it('fills a supplied out (large and unaligned: the streaming-store path) exactly like a fresh output, every ISA', async () => {
    const r = rng(8);
    const lens: number[] = [];
    let n = 0;
    while (n < (1 << 23) + 100) {
      const l = lens.length % 9 === 0 ? 0 : 1 + Math.floor(r() * 40_000);
      lens.push(l);
      n += l;
    }
    const off = new Int32Array(lens.length + 1);
    lens.forEach((l, i) => (off[i + 1] = off[i]! + l));
    const vals = Float64Array.from(lens, () => r() * 4 - 2);
    const mask = new Uint8Array(n);
    for (let t = 0; t < n; t++) mask[t] = r() < 0.7 ? 1 : 0;
    try {
      for (const isa of ISAS) {
        rl.setIsa(isa);
        for (const m of [undefined, mask]) {
          const fresh = new Uint32Array(rl.segmentBroadcast(vals, off, m).buffer);
          const want = Buffer.from(fresh.buffer);
          // 1 and 6 floats past the backing store's start: partial lines before the streamed body
          for (const ph of [1, 6]) {
            const backing = new Float32Array(n + ph + 1).fill(NaN);
            const out = backing.subarray(ph, ph + n);
            const got = Buffer.from(backing.buffer, 4 * ph, 4 * n);
            expect(rl.segmentBroadcast(vals, off, m, { out })).toBe(out);
            expect(got.equals(want), `${isa} ${ph}`).toBe(true);
            expect(backing[ph - 1]).toBeNaN();
            expect(backing[ph + n]).toBeNaN();
            if (ph !== 1) continue;
            out.fill(NaN);
            expect(await rl.segmentBroadcastAsync(vals, off, m, { out })).toBe(out);
            expect(got.equals(want), `${isa} async`).toBe(true);
          }
          // and the fresh output itself against the per-token rule at every row's first and last token
          const f = new Float32Array(fresh.buffer);
          for (let i = 0; i < lens.length; i++) {
            if (lens[i] === 0) continue;
            for (const t of [off[i]!, off[i + 1]! - 1]) expect(f[t]).toBe(!m || m[t] ? Math.fround(vals[i]!) : 0);
          }
        }
      }
    } finally {
      rl.setIsa(LOADED);
    }
  });

  it('checks a supplied out in both layers', async () => {
    const { native } = await import('../../ts/core/addon.js');
    const off = new Int32Array([0, 2, 5]);
    expect(() => rl.segmentBroadcast([1, 2], off, undefined, { out: new Float32Array(4) })).toThrow(
      expect.objectContaining({ code: 'ERR_SHAPE' }));
    expect(() => rl.segmentBroadcast([1, 2], off, undefined, { out: new Float64Array(5) as any })).toThrow(
      expect.objectContaining({ code: 'ERR_DTYPE' }));
    expect(() => native.segmentBroadcast({ rowValues: new Float64Array(2), offsets: off, mask: null, out: new Float32Array(6) })).toThrow(
      expect.objectContaining({ code: 'ERR_SHAPE' }));
  });

  it('async equals sync and aborts with ERR_ABORTED', async () => {
    const { off, mask } = randomBatch(11, 64);
    const vals = Array.from({ length: 64 }, (_, i) => i - 30);
    expect(await rl.segmentBroadcastAsync(vals, off, mask)).toEqual(rl.segmentBroadcast(vals, off, mask));
    const ac = new AbortController();
    ac.abort();
    await expect(rl.segmentBroadcastAsync(vals, off, mask, { signal: ac.signal })).rejects.toMatchObject({ code: 'ERR_ABORTED' });
  });
});

describe('segment ops after an error', () => {
  it('leave no output looking valid: a bad mask byte NaN-fills a supplied out (both ops)', () => {
    const out = new Float32Array(3);
    expect(() => rl.segmentBroadcast(Float64Array.of(5), Int32Array.of(0, 3), Uint8Array.of(1, 1, 2), { out }))
      .toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
    expect(Array.from(out).every(Number.isNaN)).toBe(true);
    const big = 3 * 65536 + 7; // several work chunks: the bad byte sits in the last one, the others wrote
    const off = Int32Array.of(0, big);
    const mask = new Uint8Array(big).fill(1);
    mask[big - 1] = 3;
    const outBig = new Float32Array(big);
    expect(() => rl.segmentBroadcast(Float64Array.of(2), off, mask, { out: outBig })).toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
    expect(outBig.every(Number.isNaN)).toBe(true);
    expect(() => rl.segmentReduce(new Float32Array(big).fill(1), off, 'sum', mask)).toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
    // the addon's own output argument (reused by callers of the raw addon)
    const rows = 4, per = 65536, off4 = Int32Array.from({ length: rows + 1 }, (_, r) => r * per);
    const m4 = new Uint8Array(rows * per).fill(1);
    m4[rows * per - 1] = 2;
    const out4 = new Float64Array(rows);
    expect(() => native.segmentReduce({ values: new Float32Array(rows * per).fill(1), offsets: off4, mask: m4, op: 0, out: out4 }))
      .toThrow(expect.objectContaining({ code: 'ERR_OPTION' }));
    expect(Array.from(out4).every(Number.isNaN)).toBe(true);
  });
});
