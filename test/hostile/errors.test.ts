// Hostile arguments give a coded GearError, never a TypeError / RangeError from inside or a hang: the
// classes of input that test/hostile/fuzz_child.mjs found, a few representative exports each.
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import * as diagnostics from '../../ts/diagnostics.js';
import * as report from '../../ts/report.js';
import * as similarity from '../../ts/similarity.js';

function codeOf(f: () => unknown): string {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err, 'expected a throw').toBeInstanceOf(rl.GearError);
  expect((err as Error).message).toMatch(/: expected .+, got /);
  return (err as rl.GearError).code;
}

const f32 = (...xs: number[]) => Float32Array.from(xs);
const off = () => Int32Array.of(0, 2, 3);
const proxy = <T extends object>(x: T): T => new Proxy(x, {});

describe('a Proxy around a typed array is refused as ERR_DTYPE', () => {
  it('per-token values, offsets and masks of the losses', () => {
    expect(codeOf(() => rl.aggregate(proxy(f32(1, 2, 3)), off(), undefined, 'token-mean'))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.aggregate(f32(1, 2, 3), proxy(off()), undefined, 'token-mean'))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.aggregate(f32(1, 2, 3), off(), proxy(Uint8Array.of(1, 1, 1)), 'token-mean'))).toBe('ERR_DTYPE');
    expect(codeOf(() => diagnostics.effectiveRowWeights(proxy(off()), undefined, 'token-mean'))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.entropyBonus(proxy(f32(1, 2, 3)), off(), undefined, 0.1))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.rolloutCorrectionWeights(proxy(f32(0, 0, 0)), off(), undefined, { rolloutLogprob: f32(0, 0, 0) }))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.klPenalty({ logprob: proxy(f32(0, 1)), refLogprob: f32(0, 0), estimator: 'k1' }))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.policyLoss({
      logprob: f32(0, 0, 0), oldLogprob: f32(0, 0, 0), advantages: f32(1, 1, 1), offsets: off(), mask: proxy(Uint8Array.of(1, 1, 1)),
    }))).toBe('ERR_DTYPE');
  });

  it('rollout helpers and GEAR inputs', () => {
    expect(codeOf(() => rl.lastTokenValues([1, 2], proxy(off())))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.rowLengths(off(), proxy(Uint8Array.of(1, 1, 1))))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.gear({
      advantages: [1, -1], offsets: off(), divergence: proxy(f32(0, 1, 2)), entropy: f32(1, 1, 1),
    }))).toBe('ERR_DTYPE');
  });

  it('the message names the Proxy', () => {
    expect(() => rl.aggregate(proxy(f32(1, 2, 3)), off(), undefined, 'token-mean')).toThrow(/got Proxy\(Float32Array\)/);
  });

  it('the same arrays unwrapped still work', () => {
    expect(rl.aggregate(f32(1, 2, 3), off(), undefined, 'token-mean').value).toBeCloseTo(2);
    expect(Array.from(diagnostics.effectiveRowWeights(off(), undefined, 'token-mean'))).toEqual([2 / 3, 1 / 3]);
  });
});

describe('a missing, null or primitive argument object is refused with a code', () => {
  it('losses', () => {
    const fns: [string, () => unknown][] = [
      ['klPenalty', () => (rl.klPenalty as (a?: unknown) => unknown)()],
      ['klLoss', () => rl.klLoss(null as never)],
      ['applyKlPenalty', () => rl.applyKlPenalty(undefined as never)],
      ['lossGradToLogits', () => rl.lossGradToLogits(7 as never)],
      ['rolloutCorrectionWeights', () => rl.rolloutCorrectionWeights(f32(0, 0, 0), off(), undefined, undefined as never)],
    ];
    for (const [name, f] of fns) expect(codeOf(f), name).toBe('ERR_OPTION');
  });

  it('group, anchor and quantile helpers', () => {
    expect(codeOf(() => (similarity.anchorIds as (a?: unknown) => unknown)())).toBe('ERR_DTYPE');
    expect(codeOf(() => (diagnostics.batchStats as (a?: unknown) => unknown)())).toBe('ERR_DTYPE');
    expect(codeOf(() => (diagnostics.quantileLinear as (a?: unknown) => unknown)())).toBe('ERR_DTYPE');
    expect(codeOf(() => diagnostics.quantileLinear([1, 2], undefined as never))).toBe('ERR_OPTION');
    expect(codeOf(() => diagnostics.groupStats([1, 2], undefined as never))).toBe('ERR_DTYPE');
  });

  it('report and saved-batch writers (and nothing is written)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gear-rl-errors-'));
    expect(codeOf(() => report.renderReport(undefined as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => report.writeReport(join(dir, 'r.html'), undefined as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => report.saveBatch(join(dir, 'b.json'), null as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => report.toSavedBatch([] as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => report.toSavedBatch({ offsets: off() } as never))).toBe('ERR_DTYPE');
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('symbols, bigints and null-prototype objects where a value or name is read', () => {
  const bare = () => Object.create(null) as object;

  it('anchor keys and ids', () => {
    expect(codeOf(() => similarity.anchorKey([1], bare() as never))).toBe('ERR_OPTION');
    expect(codeOf(() => similarity.anchorKey(Symbol('s')))).toBe('ERR_DTYPE');
    expect(codeOf(() => similarity.anchorKey({ a: 1n }))).toBe('ERR_DTYPE');
    expect(codeOf(() => similarity.anchorIds([{ a: 1 }], Symbol('w') as never))).toBe('ERR_OPTION');
    expect(similarity.anchorKey(Object.assign(bare(), { a: 1 }))).toEqual({ s: '{"a":1}' });
  });

  it('group ids and their row count', () => {
    expect(codeOf(() => diagnostics.groupIndex(['a', 'b'], bare() as never))).toBe('ERR_OPTION');
    expect(codeOf(() => diagnostics.groupIndex(['a', 'b'], 'groups', bare() as never))).toBe('ERR_OPTION');
    expect(codeOf(() => diagnostics.groupIndex(['a', 'b'], 'groups', 3n as never))).toBe('ERR_OPTION');
    expect(codeOf(() => diagnostics.groupIndex([1n, 2n] as never))).toBe('ERR_DTYPE');
  });

  it('texts of the similarity helpers', () => {
    expect(codeOf(() => new similarity.PreparedText(5 as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => new similarity.PreparedText(bare() as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => similarity.similarityClusters(['a', Symbol('s')] as never, 0.5))).toBe('ERR_DTYPE');
    expect(codeOf(() => similarity.similarityClusters(['a', 'b'], 2n as never))).toBe('ERR_OPTION');
    expect(codeOf(() => diagnostics.quantileLinear([1, 2n] as never, 0.5))).toBe('ERR_DTYPE');
  });

  it('a value whose constructor name is not a string is still described', () => {
    const odd = { constructor: { name: Symbol('n') } };
    expect(codeOf(() => rl.aggregate(odd as never, off(), undefined, 'token-mean'))).toBe('ERR_DTYPE');
  });

  it('batch metadata that JSON cannot hold', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gear-rl-errors-'));
    const rec = { advantages: [1], offsets: Int32Array.of(0, 2), divergence: f32(0.1, 0.2), entropy: f32(1, 1) };
    expect(report.toSavedBatch(rec).offsets).toEqual([0, 2]);
    expect(codeOf(() => report.saveBatch(join(dir, 'b.json'), { ...rec, meta: { x: 1n } } as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => report.saveBatch(join(dir, 'b.json'), { ...rec, meta: { x: Symbol('s') } } as never))).toBe('ERR_DTYPE');
    expect(codeOf(() => report.renderReport({ ...rec, tokens: ['a', 2n] } as never))).toBe('ERR_SHAPE');
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('groupStats bounds its group index', () => {
  const values = [1, 2, 3, 5];
  const idx = () => diagnostics.groupIndex(['a', 'a', 'b', 'b']);

  it('a count of -1 or 2^31 - 1 is ERR_OPTION at once (no RangeError, no hang)', () => {
    for (const count of [-1, 2 ** 31 - 1, 2.5, NaN, 1n]) {
      expect(codeOf(() => diagnostics.groupStats(values, { ...idx(), count } as never)), String(count)).toBe('ERR_OPTION');
    }
  });

  it('ids, sizes and first rows that disagree are ERR_GROUP / ERR_SHAPE', () => {
    expect(codeOf(() => diagnostics.groupStats(values, { ...idx(), ids: Int32Array.of(0, 0, 1, 7) }))).toBe('ERR_GROUP');
    expect(codeOf(() => diagnostics.groupStats(values, { ...idx(), sizes: Int32Array.of(2, 2 ** 30) }))).toBe('ERR_GROUP');
    expect(codeOf(() => diagnostics.groupStats(values, { ...idx(), firstRow: Int32Array.of(0, 3) }))).toBe('ERR_GROUP');
    expect(codeOf(() => diagnostics.groupStats(values, { ...idx(), sizes: Int32Array.of(2) }))).toBe('ERR_SHAPE');
    expect(codeOf(() => diagnostics.groupStats(values.slice(1), idx()))).toBe('ERR_SHAPE');
    expect(codeOf(() => diagnostics.groupStats(values, idx(), { weights: [1n, 1, 1, 1] } as never))).toBe('ERR_DTYPE');
  });

  it('a valid index gives the same statistics as before', () => {
    const st = diagnostics.groupStats(values, idx());
    expect(Array.from(st.mean)).toEqual([1.5, 4]);
    expect(Array.from(st.std)).toEqual([Math.SQRT1_2, Math.SQRT2]);
    expect(Array.from(diagnostics.groupStats([1, NaN, 3, 3], idx(), { skipNaN: true }).count)).toEqual([1, 2]);
  });
});

describe('the native ops and optimizers', () => {
  it('a Proxy around logits, values or optimizer state is ERR_DTYPE / ERR_STATE', () => {
    const z = f32(1, 2, 3, 4, 5, 6);
    expect(codeOf(() => rl.tokenStats({ data: proxy(z), rows: 2, vocab: 3 }, Int32Array.of(0, 1)))).toBe('ERR_DTYPE');
    expect(codeOf(() => rl.segmentReduce(proxy(f32(1, 2, 3)), off(), 'sum'))).toBe('ERR_DTYPE');
    const p = [f32(1, 2)];
    const state = new rl.AdamW(p).state();
    expect(codeOf(() => rl.AdamW.fromState([f32(1, 2)], { ...state, expAvg: [proxy(f32(0, 0))] }))).toBe('ERR_STATE');
  });

  it('every …Async function rejects with a coded GearError on bad arguments, never throws', async () => {
    const calls: [string, () => Promise<unknown>][] = [
      ['tokenStatsAsync', () => (rl.tokenStatsAsync as (...a: unknown[]) => Promise<unknown>)('x')],
      ['tokenStatsBackwardAsync', () => (rl.tokenStatsBackwardAsync as (...a: unknown[]) => Promise<unknown>)(1, 2)],
      ['tokenStatsPartialAsync', () => (rl.tokenStatsPartialAsync as (...a: unknown[]) => Promise<unknown>)()],
      ['mergeTokenStatsAsync', () => (rl.mergeTokenStatsAsync as (...a: unknown[]) => Promise<unknown>)([])],
      ['divergenceAsync', () => (rl.divergenceAsync as (...a: unknown[]) => Promise<unknown>)()],
      ['divergenceBackwardAsync', () => (rl.divergenceBackwardAsync as (...a: unknown[]) => Promise<unknown>)(null, null, null, 0)],
      ['segmentReduceAsync', () => (rl.segmentReduceAsync as (...a: unknown[]) => Promise<unknown>)(Symbol('s'))],
      ['segmentBroadcastAsync', () => (rl.segmentBroadcastAsync as (...a: unknown[]) => Promise<unknown>)(1, 2)],
      ['policyLossAsync', () => (rl.policyLossAsync as (...a: unknown[]) => Promise<unknown>)()],
      ['clipGradNormAsync', () => (rl.clipGradNormAsync as (...a: unknown[]) => Promise<unknown>)(7)],
    ];
    for (const [name, call] of calls) {
      let p: Promise<unknown> | undefined;
      expect(() => { p = call(); }, name).not.toThrow();
      const e = await p!.then(() => undefined, (x: unknown) => x);
      expect(e, name).toBeInstanceOf(rl.GearError);
      expect((e as rl.GearError).code, name).toMatch(/^ERR_/);
    }
  });

  it('new Optimizer() (abstract at compile time only) is ERR_OPTION; mergeTokenStats with odd part fields is coded', () => {
    const Base = rl.Optimizer as unknown as new (...a: unknown[]) => unknown;
    expect(codeOf(() => new Base([f32(1)], 0.1))).toBe('ERR_OPTION');
    expect(codeOf(() => rl.mergeTokenStats([{ vocabStart: 1n }, { vocabStart: 'float32' }] as never))).toBe('ERR_SHAPE');
  });
});

describe('async calls and the buffers they read in place', () => {
  it('a resizable ArrayBuffer behind an async input or output is refused (ERR_DTYPE); the sync form takes it', async () => {
    const ab = new ArrayBuffer(6 * 4, { maxByteLength: 64 });
    const z = new Float32Array(ab).fill(0.5);
    const logits = { data: z, rows: 2, vocab: 3 };
    const e = await rl.tokenStatsAsync(logits, Int32Array.of(0, 1)).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(rl.GearError);
    expect((e as rl.GearError).code).toBe('ERR_DTYPE');
    expect((e as Error).message).toMatch(/fixed-length/);
    const out = new Float32Array(new ArrayBuffer(3 * 4, { maxByteLength: 64 }));
    const e2 = await rl.segmentBroadcastAsync(Float64Array.of(1), Int32Array.of(0, 3), undefined, { out }).then(() => undefined, (x: unknown) => x);
    expect((e2 as rl.GearError).code).toBe('ERR_DTYPE');
    expect(Array.from(out)).toEqual([0, 0, 0]);
    expect(Array.from(rl.tokenStats(logits, Int32Array.of(0, 1)).logprob)).toEqual([-Math.fround(Math.log(3)), -Math.fround(Math.log(3))]);
  });

  it('null options of the async forms and of segmentBroadcast are ERR_OPTION, not TypeError', async () => {
    const g = [f32(1, 2)];
    const calls: (() => unknown)[] = [
      () => rl.segmentBroadcast([5], Int32Array.of(0, 3), undefined, null as never),
      () => rl.clipGradNormAsync(g, 1, null as never),
      () => new rl.AdamW([f32(0, 0)]).stepAsync(g, null as never),
      () => rl.segmentReduceAsync(f32(1), Int32Array.of(0, 1), 'sum', undefined, null as never),
    ];
    for (const c of calls) {
      const e = await Promise.resolve().then(c).then(() => undefined, (x: unknown) => x);
      expect(e).toBeInstanceOf(rl.GearError);
      expect((e as rl.GearError).code).toBe('ERR_OPTION');
    }
  });
});
