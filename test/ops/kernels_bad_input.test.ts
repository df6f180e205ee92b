// Bad input to the logits kernels: every case is a GearError with its code (through the TS wrappers and
// straight into the native layer), the process stays alive, and no output is left looking valid.
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { ISAS, LOADED } from '../helpers/isa.js';
import { native } from '../../ts/core/addon.js';
import { toBf16, toF16 } from '../helpers/reference.js';

function expectCode(f: () => unknown, code: string, msg?: string | RegExp): void {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(rl.GearError);
    expect((e as rl.GearError).code).toBe(code);
    if (msg !== undefined) expect((e as Error).message).toMatch(msg);
    return;
  }
  expect.fail(`expected a GearError ${code}, nothing was thrown`);
}

async function expectReject(p: () => Promise<unknown>, code: string): Promise<void> {
  await expect(p()).rejects.toMatchObject({ code });
}

const rows = 3;
const vocab = 5;
const z = Float32Array.from({ length: rows * vocab }, (_, i) => Math.sin(i));
const ok: rl.Logits = { data: z, rows, vocab };
const t = new Int32Array([0, 1, 4]);

function detached(n: number): Float32Array {
  const a = new Float32Array(n);
  structuredClone(a.buffer, { transfer: [a.buffer] });
  return a;
}

describe('tokenStats rejects bad input', () => {
  it('shapes, lengths and dtype tags', () => {
    expectCode(() => rl.tokenStats({ data: z, rows: 4, vocab }, t), 'ERR_SHAPE', /rows \* vocab/);
    expectCode(() => rl.tokenStats({ data: z, rows, vocab: 0 }, t), 'ERR_SHAPE');
    expectCode(() => rl.tokenStats({ data: z, rows: -1, vocab }, t), 'ERR_SHAPE');
    expectCode(() => rl.tokenStats({ data: z, rows: 1.5, vocab }, t), 'ERR_SHAPE');
    expectCode(() => rl.tokenStats(ok, new Int32Array(2)), 'ERR_SHAPE', /targets\.length: expected 3, got 2/);
    expectCode(() => rl.tokenStats({ data: z, rows, vocab, dtype: 'bfloat16' }, t), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats({ data: new Uint16Array(15), rows, vocab }, t), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats({ data: new Uint16Array(15), rows, vocab, dtype: 'float32' }, t), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats({ data: new Float64Array(15) as never, rows, vocab }, t), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats(ok, new Float32Array(3) as never), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats(null as never, t), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats({ ...ok, dtyp: 'float32' } as never, t), 'ERR_OPTION');
    expectCode(() => rl.tokenStats(ok, t, { temprature: 2 } as never), 'ERR_OPTION');
  });

  it('targets outside [0, vocab)', () => {
    expectCode(() => rl.tokenStats(ok, new Int32Array([0, 5, 1])), 'ERR_TARGET_RANGE', /targets\[1\]/);
    expectCode(() => rl.tokenStats(ok, new Int32Array([-1, 0, 1])), 'ERR_TARGET_RANGE', /targets\[0\]/);
  });

  it('temperature <= 0, NaN or Infinity', () => {
    for (const temperature of [0, -1, NaN, Infinity, 1e-310]) expectCode(() => rl.tokenStats(ok, t, { temperature }), 'ERR_OPTION');
    expectCode(() => native.tokenStats({ logits: { data: z, rows, vocab, dtype: 0 }, targets: t, temperature: 1e-310 }), 'ERR_OPTION');
    // tiny but valid: a near-argmax distribution, finite outputs
    const cold = rl.tokenStats(ok, t, { temperature: 1e-6 });
    expect(Array.from(cold.entropy).every((h) => h >= 0 && h < 1e-3)).toBe(true);
  });

  it('NaN / +Infinity logits (float32, bfloat16, float16) and all -Infinity rows, naming the row', () => {
    for (const bad of [NaN, Infinity]) {
      const d = Float32Array.from(z);
      d[2 * vocab + 3] = bad;
      expectCode(() => rl.tokenStats({ data: d, rows, vocab }, t), 'ERR_NON_FINITE', /row 2, entry 3/);
      for (const [dtype, enc] of [['bfloat16', toBf16], ['float16', toF16]] as const) {
        const h = Uint16Array.from(z, enc);
        h[vocab + 1] = enc(bad);
        expectCode(() => rl.tokenStats({ data: h, rows, vocab, dtype }, t), 'ERR_NON_FINITE', /row 1, entry 1/);
      }
    }
    const d = Float32Array.from(z);
    d.fill(-Infinity, vocab, 2 * vocab);
    expectCode(() => rl.tokenStats({ data: d, rows, vocab }, t), 'ERR_NON_FINITE', /row 1.*all -Infinity/);
  });

  it('a NaN or +Infinity anywhere is caught on every ISA path, also inside a fully masked block', () => {
    const V = 5000; // blocks of 2048: [0, 2048) finite, [2048, 4096) masked but for the bad entry
    for (const isa of ISAS) {
      rl.setIsa(isa);
      for (const bad of [NaN, Infinity, -NaN]) {
        for (const at of [7, 3000, 4999]) {
          const d = Float32Array.from({ length: 2 * V }, (_, i) => Math.sin(i));
          d.fill(-Infinity, V + 2048, V + 4096);
          d[V + at] = bad;
          const good = Float32Array.from({ length: 2 * V }, (_, i) => Math.cos(i));
          const tt = new Int32Array([0, 1]);
          const where = new RegExp(`row 1, entry ${at}`);
          expectCode(() => rl.tokenStats({ data: d, rows: 2, vocab: V }, tt), 'ERR_NON_FINITE', where);
          expectCode(() => rl.tokenStatsBackward({ data: d, rows: 2, vocab: V }, tt, { logprob: new Float32Array(2) },
            { stats: { logsumexp: new Float32Array(2) } }), 'ERR_NON_FINITE', where);
          expectCode(() => rl.divergence({ data: d, rows: 2, vocab: V }, { data: good, rows: 2, vocab: V }), 'ERR_NON_FINITE', new RegExp(`student\\[row 1, entry ${at}\\]`));
          expectCode(() => rl.divergence({ data: good, rows: 2, vocab: V }, { data: d, rows: 2, vocab: V }, { kind: 'forward_kl' }), 'ERR_NON_FINITE', new RegExp(`teacher\\[row 1, entry ${at}\\]`));
          for (const [dtype, enc] of [['bfloat16', toBf16], ['float16', toF16]] as const) {
            const h = Uint16Array.from(d, enc);
            expectCode(() => rl.tokenStats({ data: h, rows: 2, vocab: V, dtype }, tt), 'ERR_NON_FINITE', where);
            h[V + at] = dtype === 'bfloat16' ? 0xffc1 : 0xfe01; // a NaN with the sign bit set
            expectCode(() => rl.tokenStats({ data: h, rows: 2, vocab: V, dtype }, tt), 'ERR_NON_FINITE', where);
          }
        }
      }
    }
    rl.setIsa(LOADED);
  });

  it('fills supplied out arrays with NaN on a kernel error (nothing partially valid)', () => {
    const d = Float32Array.from(z);
    d[2 * vocab] = NaN;
    const out = { logprob: new Float32Array(3), entropy: new Float32Array(3), logsumexp: new Float32Array(3) };
    expectCode(() => rl.tokenStats({ data: d, rows, vocab }, t, { out }), 'ERR_NON_FINITE');
    for (const a of Object.values(out)) expect(Array.from(a).every(Number.isNaN)).toBe(true);
  });

  it('out arrays of the wrong size or kind, detached buffers', () => {
    expectCode(() => rl.tokenStats(ok, t, { out: { entropy: new Float32Array(2) } }), 'ERR_SHAPE');
    expectCode(() => rl.tokenStats(ok, t, { out: { entropy: new Float64Array(3) as never } }), 'ERR_DTYPE');
    expectCode(() => rl.tokenStats(ok, t, { out: { entropy: detached(3) } }), 'ERR_SHAPE');
    expectCode(() => rl.tokenStats({ data: detached(15), rows, vocab }, t), 'ERR_SHAPE');
    expectCode(() => rl.tokenStatsBackward(ok, t, { logprob: new Float32Array(3) }, { out: new Float32Array(14) }), 'ERR_SHAPE');
  });
});

describe('tokenStatsBackward / tokenStatsPartial reject bad input', () => {
  it('gradients, stats and in-place on the wrong dtype', () => {
    expectCode(() => rl.tokenStatsBackward(ok, t, { logprob: new Float32Array(2) }), 'ERR_SHAPE');
    expectCode(() => rl.tokenStatsBackward(ok, t, { logprob: Float32Array.of(1, NaN, 1) }), 'ERR_NON_FINITE');
    expectCode(() => rl.tokenStatsBackward(ok, undefined, { logprob: new Float32Array(3) }), 'ERR_DTYPE');
    expectCode(() => rl.tokenStatsBackward(ok, t, { entropy: new Float32Array(3) },
      { stats: { logsumexp: new Float32Array(3) } }), 'ERR_DTYPE'); // entropy gradient needs stats.entropy
    expectCode(() => rl.tokenStatsBackward(ok, t, { logprob: new Float32Array(3) },
      { stats: { logsumexp: Float32Array.of(1, Infinity, 1) } }), 'ERR_NON_FINITE');
    const h = { data: new Uint16Array(15), rows, vocab, dtype: 'bfloat16' as const };
    expectCode(() => rl.tokenStatsBackward(h, t, { logprob: new Float32Array(3) }, { inPlace: true }), 'ERR_DTYPE');
    expectCode(() => rl.tokenStatsBackward(ok, t, { logprob: new Float32Array(3) }, { out: z }), 'ERR_OPTION');
    expectCode(() => rl.tokenStatsPartial(ok, t, { vocabStart: -1 }), 'ERR_OPTION');
    expectCode(() => rl.tokenStatsPartial(ok, new Int32Array([0, -2, 0]), { vocabStart: 0 }), 'ERR_TARGET_RANGE');
  });

  it('a NaN found mid-way leaves an in-place buffer all NaN, and a separate out buffer too', () => {
    const d = Float32Array.from({ length: 40 * 64 }, (_, i) => Math.cos(i));
    d[39 * 64 + 5] = NaN; // the last row: earlier rows are already written when it is found
    const gl = new Float32Array(40).fill(1);
    const targets = new Int32Array(40);
    const out = new Float32Array(40 * 64);
    expectCode(() => rl.tokenStatsBackward({ data: d, rows: 40, vocab: 64 }, targets, { logprob: gl }, { out }), 'ERR_NON_FINITE', /row 39/);
    expect(out.every(Number.isNaN)).toBe(true);
    expectCode(() => rl.tokenStatsBackward({ data: d, rows: 40, vocab: 64 }, targets, { logprob: gl }, { inPlace: true }), 'ERR_NON_FINITE');
    expect(d.every(Number.isNaN)).toBe(true);
  });
});

describe('divergence rejects bad input', () => {
  const s = { data: Float32Array.from(z), rows, vocab };
  it('shapes, dtypes, options', () => {
    expectCode(() => rl.divergence(s, { data: new Float32Array(10), rows: 2, vocab }), 'ERR_SHAPE');
    expectCode(() => rl.divergence(s, { data: new Uint16Array(15), rows, vocab, dtype: 'bfloat16' }), 'ERR_DTYPE');
    expectCode(() => rl.divergence(s, ok, { kind: 'kl' as never }), 'ERR_OPTION');
    expectCode(() => rl.divergence(s, ok, { kind: 'jsd', beta: 1.5 }), 'ERR_OPTION');
    expectCode(() => rl.divergence(s, ok, { kind: 'jsd', beta: NaN }), 'ERR_OPTION');
    expectCode(() => rl.divergence(s, ok, { klCap: 0 }), 'ERR_OPTION');
    expectCode(() => rl.divergence(s, ok, { temperature: -2 }), 'ERR_OPTION');
    expectCode(() => rl.divergence(s, ok, { targets: new Int32Array([0, 9, 0]) }), 'ERR_TARGET_RANGE');
    expectCode(() => rl.divergence(s, ok, { out: { studentLogprob: new Float32Array(3) } }), 'ERR_OPTION');
    expectCode(() => rl.divergence(s, ok, { out: { value: new Float32Array(4) } }), 'ERR_SHAPE');
    expectCode(() => rl.divergenceBackward(s, ok, new Float32Array(2)), 'ERR_SHAPE');
    expectCode(() => rl.divergenceBackward(s, ok, Float32Array.of(1, 1, NaN)), 'ERR_NON_FINITE');
    expectCode(() => rl.divergenceBackward(s, ok, new Float32Array(3), { out: s.data }), 'ERR_OPTION');
  });

  it('NaN in the teacher names the teacher row; outputs are NaN', () => {
    const bad = Float32Array.from(z);
    bad[vocab + 2] = NaN;
    const out = { value: new Float32Array(3), studentEntropy: new Float32Array(3) };
    expectCode(() => rl.divergence(s, { data: bad, rows, vocab }, { out }), 'ERR_NON_FINITE', /teacher\[row 1, entry 2\]/);
    expect(Array.from(out.value).every(Number.isNaN)).toBe(true);
    expect(Array.from(out.studentEntropy).every(Number.isNaN)).toBe(true);
    expectCode(() => rl.divergence({ data: bad, rows, vocab }, s), 'ERR_NON_FINITE', /student\[row 1, entry 2\]/);
  });

  it('with both sides bad, the error names the student when its row has a NaN or +Infinity anywhere, on every ISA, dtype and pass', () => {
    const V = 4500; // three blocks of 2048: the two sides' bad entries in different blocks, in either order
    const cases: { s: [number, number][]; t: [number, number][]; sEmpty?: boolean; tEmpty?: boolean; want: RegExp }[] = [
      { s: [[3000, NaN]], t: [[5, Infinity]], want: /^student\[row 1, entry 3000\]: .*got NaN$/ },
      { s: [[4400, Infinity]], t: [[5, NaN], [9, NaN]], want: /^student\[row 1, entry 4400\]: .*got Infinity$/ },
      { s: [[5, NaN]], t: [[6, NaN]], want: /^student\[row 1, entry 5\]/ },
      { s: [], sEmpty: true, t: [[100, NaN]], want: /^teacher\[row 1, entry 100\]/ },
      { s: [], sEmpty: true, t: [], tEmpty: true, want: /^student\[row 1\]: .*all -Infinity$/ },
      { s: [], t: [], tEmpty: true, want: /^teacher\[row 1\]: .*all -Infinity$/ },
    ];
    const grad = Float32Array.of(1, 1);
    for (const isa of ISAS) {
      rl.setIsa(isa);
      for (const c of cases) {
        const sd = Float32Array.from({ length: 2 * V }, (_, i) => Math.sin(i) * 3);
        const td = Float32Array.from({ length: 2 * V }, (_, i) => Math.cos(i) * 3);
        if (c.sEmpty) sd.fill(-Infinity, V);
        if (c.tEmpty) td.fill(-Infinity, V);
        for (const [at, x] of c.s) sd[V + at] = x;
        for (const [at, x] of c.t) td[V + at] = x;
        for (const [dtype, enc] of [['float32', null], ['bfloat16', toBf16], ['float16', toF16]] as const) {
          const L = (d: Float32Array): rl.Logits => enc === null ? { data: d, rows: 2, vocab: V } : { data: Uint16Array.from(d, enc), rows: 2, vocab: V, dtype };
          for (const kind of ['reverse_kl', 'forward_kl', 'jsd'] as const) {
            const where = `${isa} ${dtype} ${kind} ${c.want}`;
            expect(() => rl.divergence(L(sd), L(td), { kind }), where).toThrow(c.want);
            expect(() => rl.divergenceBackward(L(sd), L(td), grad, { kind }), where).toThrow(c.want);
          }
          if (c.sEmpty || c.tEmpty) continue; // given statistics: the backward reads only NaN / +Infinity
          const stats = { value: new Float32Array(2), studentLogsumexp: new Float32Array(2), teacherLogsumexp: new Float32Array(2) };
          expect(() => rl.divergenceBackward(L(sd), L(td), grad, { stats }), `${isa} ${dtype} stats given`).toThrow(c.want);
        }
      }
    }
    rl.setIsa(LOADED);
  });
});

describe('the native layer checks its inputs on its own', () => {
  it('lengths, dtype codes, overflowing shapes, targets, temperature, options', () => {
    // The raw addon's functions, their named parameters listed here in the order of these calls.
    const logits = (data: unknown, rows: unknown, vocab: unknown, dtype: unknown) => ({ data, rows, vocab, dtype });
    const call = (...a: unknown[]) => () => native.tokenStats({
      logits: logits(a[0], a[1], a[2], a[3]), targets: a[4], temperature: a[5],
      out: { logprob: a[6], entropy: a[7], logsumexp: a[8] }, async: a[9], abort: a[10] } as never);
    expectCode(call(z, 4, vocab, 0, t, 1, null, null, null, false, null), 'ERR_SHAPE');
    expectCode(call(z, rows, vocab, 3, t, 1, null, null, null, false, null), 'ERR_OPTION');
    expectCode(call(z, rows, vocab, 1, t, 1, null, null, null, false, null), 'ERR_DTYPE'); // bf16 needs Uint16Array
    expectCode(call(z, 2 ** 40, 2 ** 20, 0, t, 1, null, null, null, false, null), 'ERR_SHAPE');
    expectCode(call(z, rows, vocab, 0, new Int32Array([0, 7, 0]), 1, null, null, null, false, null), 'ERR_TARGET_RANGE');
    expectCode(call(z, rows, vocab, 0, new Int32Array(2), 1, null, null, null, false, null), 'ERR_SHAPE');
    expectCode(call(z, rows, vocab, 0, t, NaN, null, null, null, false, null), 'ERR_OPTION');
    expectCode(call(z, rows, vocab, 0, t, 0, null, null, null, false, null), 'ERR_OPTION');
    expectCode(call(z, rows, vocab, 0, t, 1, new Float32Array(2), null, null, false, null), 'ERR_SHAPE');
    expectCode(call('logits', rows, vocab, 0, t, 1, null, null, null, false, null), 'ERR_DTYPE');
    const bwd = (...a: unknown[]) => () => native.tokenStatsBackward({
      logits: logits(a[0], a[1], a[2], a[3]), targets: a[4], grad: { logprob: a[5], entropy: a[6] }, temperature: a[7],
      stats: { logsumexp: a[8], entropy: a[9] }, out: a[10], inPlace: a[11], async: a[12], abort: a[13] } as never);
    expectCode(bwd(z, rows, vocab, 0, null, new Float32Array(3), null, 1, null, null, null, false, false, null), 'ERR_SHAPE');
    expectCode(bwd(z, rows, vocab, 0, t, null, new Float32Array(3), 1, new Float32Array(3), null, null, false, false, null), 'ERR_SHAPE');
    expectCode(bwd(new Uint16Array(15), rows, vocab, 1, t, null, null, 1, null, null, null, true, false, null), 'ERR_DTYPE');
    // a shape the data does not hold: refused before any output is sized from it (no 2^40-element
    // allocation, no out.length error naming the wrong argument)
    const huge = 2 ** 20;
    expect(bwd(z, huge, huge, 0, null, null, new Float32Array(huge), 1, null, null, null, false, false, null))
      .toThrow(expect.objectContaining({ code: 'ERR_SHAPE', message: expect.stringMatching(/^logits\.data\.length/) }));
    expect(bwd(z, 3, 4, 0, null, null, new Float32Array(3), 1, null, null, new Float32Array(15), false, false, null))
      .toThrow(expect.objectContaining({ code: 'ERR_SHAPE', message: expect.stringMatching(/^logits\.data\.length/) }));
    const pair = (a: unknown[]) => ({ student: logits(a[0], a[2], a[3], a[4]), teacher: logits(a[1], a[2], a[3], a[4]),
      kind: a[5], beta: a[6], temperature: a[7], klCap: a[8] });
    const div = (...a: unknown[]) => () => native.divergence({ ...pair(a), targets: a[9], out: a[10], async: a[11], abort: a[12] } as never);
    expectCode(div(z, new Float32Array(14), rows, vocab, 0, 0, 0.5, 1, Infinity, null, null, false, null), 'ERR_SHAPE');
    expectCode(div(z, z, rows, vocab, 0, 4, 0.5, 1, Infinity, null, null, false, null), 'ERR_OPTION');
    expectCode(div(z, z, rows, vocab, 0, 2, -0.1, 1, Infinity, null, null, false, null), 'ERR_OPTION');
    expectCode(div(z, z, rows, vocab, 0, 0, 0.5, 1, -1, null, null, false, null), 'ERR_OPTION');
    const divb = (...a: unknown[]) => () => native.divergenceBackward({ ...pair(a), grad: a[9],
      stats: { value: a[10], studentLogsumexp: a[11], teacherLogsumexp: a[12] }, out: a[13], async: a[14], abort: a[15] } as never);
    expectCode(divb(z, z, rows, vocab, 0, 0, 0.5, 1, Infinity, new Float32Array(3), new Float32Array(3), null, null, null, false, null), 'ERR_SHAPE');
    expectCode(divb(z, z, rows, vocab, 0, 0, 0.5, 1, Infinity, new Float32Array(3), null, null, null, new Float32Array(3), false, null), 'ERR_SHAPE');
    expect(divb(z, z, huge, huge, 0, 0, 0.5, 1, Infinity, new Float32Array(huge), null, null, null, null, false, null))
      .toThrow(expect.objectContaining({ code: 'ERR_SHAPE', message: expect.stringMatching(/^student\.data\.length/) }));
    const merge = (...a: unknown[]) => () => native.mergeTokenStats({ parts: a[0], rows: a[1], temperature: a[2], async: a[3] } as never);
    expectCode(merge([{ vocabStart: 0, vocab: 5, max: new Float64Array(2), sumExp: new Float64Array(3), sumExpX: new Float64Array(3), targetLogit: new Float64Array(3) }], 3, 1, false), 'ERR_SHAPE');
    expectCode(merge([], 3, 1, false), 'ERR_SHAPE');
    expectCode(merge([{ vocabStart: 0, vocab: 5, max: Float64Array.of(NaN, 0, 0), sumExp: new Float64Array(3).fill(1), sumExpX: new Float64Array(3), targetLogit: new Float64Array(3) }], 3, 1, false), 'ERR_NON_FINITE');
  });
});

describe('async: abort and busy buffers', () => {
  const big = { data: Float32Array.from({ length: 256 * 20000 }, (_, i) => Math.sin(i)), rows: 256, vocab: 20000 };
  const bt = new Int32Array(256);

  it('an already-aborted signal rejects with ERR_ABORTED before starting', async () => {
    const ac = new AbortController();
    ac.abort();
    await expectReject(() => rl.tokenStatsAsync(ok, t, { signal: ac.signal }), 'ERR_ABORTED');
    await expectReject(() => rl.divergenceAsync(ok, ok, { signal: ac.signal }), 'ERR_ABORTED');
    await expectReject(() => rl.divergenceBackwardAsync(ok, ok, new Float32Array(3), { signal: ac.signal }), 'ERR_ABORTED');
    await expectReject(() => rl.tokenStatsBackwardAsync(ok, t, { logprob: new Float32Array(3) }, { signal: ac.signal }), 'ERR_ABORTED');
  });

  it('aborting a running call rejects with ERR_ABORTED, leaves its out arrays NaN, and later calls work', async () => {
    // how long the work takes here: an abort can only miss the call if the main thread stalled that long
    let t = performance.now();
    rl.tokenStatsBackward(big, bt, { logprob: new Float32Array(256).fill(1) });
    const work = performance.now() - t;
    const ac = new AbortController();
    const out = new Float32Array(256 * 20000);
    t = performance.now();
    const p = rl.tokenStatsBackwardAsync(big, bt, { logprob: new Float32Array(256).fill(1) }, { signal: ac.signal, out });
    ac.abort();
    const gap = performance.now() - t;
    const done = await p.then(() => true, (e: unknown) => {
      expect((e as rl.GearError).code).toBe('ERR_ABORTED');
      return false;
    });
    if (done) {
      // a loaded machine descheduled this thread past the whole work: the abort came after the native
      // side's last check, which leaves the complete result (README, Reliability)
      expect(gap, `resolved although abort() ran ${gap.toFixed(2)} ms after a ${work.toFixed(2)} ms call`).toBeGreaterThan(work / 2);
      expect(out.every(Number.isFinite)).toBe(true);
    } else expect(out.every(Number.isNaN)).toBe(true);
    // queued behind a running call (the pool runs one job at a time), so the abort lands before it starts
    const o2 = { entropy: new Float32Array(256) };
    const ac2 = new AbortController();
    t = performance.now();
    const busy = rl.tokenStatsBackwardAsync(big, bt, { logprob: new Float32Array(256).fill(1) });
    const p2 = rl.tokenStatsAsync(big, bt, { signal: ac2.signal, out: o2 });
    ac2.abort();
    const gap2 = performance.now() - t;
    const done2 = await p2.then(() => true, (e: unknown) => {
      expect((e as rl.GearError).code).toBe('ERR_ABORTED');
      return false;
    });
    await busy;
    if (done2) {
      expect(gap2, `resolved although abort() ran ${gap2.toFixed(2)} ms after the calls`).toBeGreaterThan(work / 2);
      expect(Array.from(o2.entropy).every(Number.isFinite)).toBe(true);
    } else expect(Array.from(o2.entropy).every(Number.isNaN)).toBe(true);
    const again = await rl.tokenStatsAsync(big, bt);
    expect(again.entropy.every(Number.isFinite)).toBe(true);
  });

  it('a buffer in use by a pending async call is ERR_BUSY for writers (and readers of its outputs)', async () => {
    const out = { logsumexp: new Float32Array(256) };
    const p = rl.tokenStatsAsync(big, bt, { out });
    expectCode(() => rl.tokenStats(ok, t, { out: { logsumexp: out.logsumexp.subarray(0, 3) } }), 'ERR_BUSY');
    expectCode(() => rl.tokenStatsBackward(big, bt, { logprob: new Float32Array(256) }, { inPlace: true }), 'ERR_BUSY');
    expectCode(() => rl.divergenceBackward({ data: out.logsumexp.subarray(0, 15), rows, vocab }, ok, new Float32Array(3)), 'ERR_BUSY');
    // reading the same logits concurrently is fine
    const q = rl.tokenStatsAsync(big, bt);
    await Promise.all([p, q]);
    // released once settled
    expect(rl.tokenStats(ok, t, { out: { logsumexp: out.logsumexp.subarray(0, 3) } }).logsumexp.length).toBe(3);
    const inPlace = { data: Float32Array.from(big.data), rows: 256, vocab: 20000 };
    const r = rl.tokenStatsBackwardAsync(inPlace, bt, { logprob: new Float32Array(256) }, { inPlace: true });
    expectCode(() => rl.tokenStats(inPlace, bt), 'ERR_BUSY');
    await r;
    expect(rl.tokenStats(ok, t).entropy.length).toBe(3);
  });
});
