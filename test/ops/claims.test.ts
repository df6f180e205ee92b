// Buffer claims by construction (ts/core/invoke.ts, docs/ownership.md): every native function that takes
// the caller's arrays is declared once as an op, and every typed array in the parameter object of a call
// through it is claimed (ERR_BUSY) and, for an async call, marked untransferable by the addon. The ops
// are enumerated from the addon and the declarations, not listed here: a new native function fails the
// first test until it is declared (or listed as taking no array), a new op the second until it has a
// fixture, and every check below then runs on it. The buffers each check walks are read from the
// fixture's parameter object, not listed per op. On the host device, so the CUDA module's upload and
// download run too.
import { describe, expect, it } from 'vitest';
import { importHostDevice } from '../helpers/host_device.js';

const rl = await importHostDevice();
const { native } = await import('../../ts/core/addon.js');
const { nativeOps } = await import('../../ts/core/invoke.js');
const { resolveGearOptions } = await import('../../ts/gear/options.js');

type Params = Record<string, unknown>;
type Op = { name: string; writes: readonly (string | readonly [string, string])[]; async: boolean;
  call(p: Params): unknown; callAsync(p: Params, signal?: AbortSignal): Promise<unknown> };
const OPS = nativeOps() as unknown as ReadonlyMap<string, Op>;

/** The addon's functions that take no array of the caller's: nothing to claim or mark. */
const NO_ARRAYS = ['setErrorClass', 'installHostDevice', 'backend', 'setNumThreads', 'setIsa', 'memoryBandwidth',
  'cudaDevices', 'cudaMemory', 'cudaTrim', 'cudaDispose', 'cudaAllocHost', 'cudaKernelMs', 'cudaBandwidth'];

// ---- fixtures: one valid parameter object per op (or several), every array distinct and >= 4 bytes ----
const R = 4, V = 16, N = R * V;
const wave = (n: number, s: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + s) * 3);
const logits = (s: number) => ({ data: wave(N, s), rows: R, vocab: V, dtype: 0 as const });
/** The same logits as the public functions take them. */
const host = (l: ReturnType<typeof logits>) => ({ data: l.data, rows: l.rows, vocab: l.vocab });
const targets = () => Int32Array.from({ length: R }, (_, r) => (r * 5) % V);
const offsets = () => Int32Array.from({ length: R + 1 }, (_, r) => r * V);
const mask = () => Uint8Array.from({ length: N }, (_, i) => (i % 5 ? 1 : 0));
const f32 = (n: number, x = 0.5) => new Float32Array(n).fill(x);
const topk = (s: number) => ({
  ids: Int32Array.from({ length: N * 4 }, (_, i) => (i % 4) * 3 + ((Math.floor(i / 4) + s) % 3)),
  logprobs: f32(N * 4, Math.log(0.2)), k: 4,
});
const sparse = { n: N, kind: 0, beta: 0.5, support: 0, tailClamp: 1e-7, vocab: 0, klCap: Infinity };
const pair = { kind: 0, beta: 0.5, temperature: 1, klCap: Infinity };

const tensors: unknown[] = [];
const FIXTURES: Record<string, (() => Params)[]> = {
  tokenStats: [() => ({ logits: logits(1), targets: targets(), temperature: 1,
    out: { logprob: f32(R, 7), entropy: f32(R, 7), logsumexp: f32(R, 7) } })],
  tokenStatsBackward: [
    () => {
      const l = logits(2), t = targets(), s = rl.tokenStats(host(l), t);
      return { logits: l, targets: t, grad: { logprob: f32(R, 1), entropy: f32(R, -0.1) }, temperature: 1,
        stats: { logsumexp: s.logsumexp, entropy: s.entropy }, out: f32(N, 7) };
    },
    () => ({ logits: logits(3), targets: targets(), grad: { logprob: f32(R, 1) }, temperature: 1, inPlace: true }),
  ],
  tokenStatsPartial: [() => ({ shard: logits(4), targets: targets(), vocabStart: 0, temperature: 1 })],
  mergeTokenStats: [() => {
    const t = targets();
    const half = (k: number) => rl.tokenStatsPartial({ data: wave(R * (V / 2), 5 + k), rows: R, vocab: V / 2 }, t,
      { vocabStart: k * (V / 2) });
    return { parts: [half(0), half(1)], rows: R, temperature: 1 };
  }],
  divergence: [() => ({ student: logits(6), teacher: logits(7), ...pair, targets: targets(),
    out: { value: f32(R, 7), studentEntropy: f32(R, 7), studentLogsumexp: f32(R, 7), teacherLogsumexp: f32(R, 7),
      studentLogprob: f32(R, 7), teacherLogprob: f32(R, 7) } })],
  divergenceBackward: [() => {
    const s = logits(8), t = logits(9), d = rl.divergence(host(s), host(t));
    return { student: s, teacher: t, ...pair, grad: f32(R, 1),
      stats: { value: d.value, studentLogsumexp: d.studentLogsumexp, teacherLogsumexp: d.teacherLogsumexp }, out: f32(N, 7) };
  }],
  sparseDivergence: [() => ({ student: topk(0), teacher: topk(1), ...sparse,
    out: { value: f32(N, 7), studentTail: f32(N, 7), entropyLower: f32(N, 7), shared: new Int32Array(N).fill(7) } })],
  sparseDivergenceBackward: [() => ({ student: topk(2), teacher: topk(3), ...sparse, grad: f32(N, 1) })],
  segmentReduce: [() => ({ values: wave(N, 10), offsets: offsets(), mask: mask(), op: 0, out: new Float64Array(R).fill(7) })],
  segmentBroadcast: [() => ({ rowValues: Float64Array.of(1, -2, 3, -4), offsets: offsets(), mask: mask(), out: f32(N, 7) })],
  policyLossPpo: [() => ({ logprob: wave(N, 11).map((x) => -Math.abs(x)), oldLogprob: wave(N, 12).map((x) => -Math.abs(x)),
    advantages: wave(N, 13), offsets: offsets(), mask: mask(), out: f32(N, 7), clipLow: 0.2, clipHigh: 0.28, clipC: 3,
    agg: 0, semantics: 0 })],
  clipGradNorm: [() => ({ grads: [wave(N, 14), wave(8, 15)], maxNorm: 0.5, errorIfNonfinite: true, out: new Float64Array(1) })],
  gradNorm: [() => ({ grads: [wave(N, 16), wave(8, 17)] })],
  adamStep: [() => ({ params: [wave(N, 18), wave(8, 19)], grads: [wave(N, 20), wave(8, 21)], expAvg: [f32(N, 0), f32(8, 0)],
    expAvgSq: [f32(N, 0), f32(8, 0)], maxExpAvgSq: [f32(N, 0), f32(8, 0)], lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8,
    weightDecay: 0.01, step: 1, decoupled: true, amsgrad: true, maximize: false })],
  sgdStep: [() => ({ params: [wave(N, 22)], grads: [wave(N, 23)], momentumBuffer: [f32(N, 0.1)], lr: 0.1, momentum: 0.9,
    dampening: 0, weightDecay: 0, nesterov: false, maximize: false, firstStep: false })],
  gearScan: [() => ({ advantages: Float64Array.of(1, -1, 0.5, 2), offsets: offsets(), mask: mask(),
    divergence: Float32Array.from({ length: N }, (_, i) => (i % 7 === 3 ? 4 : 0.01)), entropy: wave(N, 24).map(Math.abs),
    logratio: wave(N, 25), options: resolveGearOptions({ peakMinKl: 0.25 }),
    out: { advantages: f32(N, 7), weights: f32(N, 7), segmentId: new Int32Array(N).fill(7) } })],
  cudaUpload: [() => ({ logits: logits(26), device: 0 })],
  cudaDownload: [() => {
    const t = rl.cuda.uploadSync({ data: wave(N, 27), rows: R, vocab: V });
    tensors.push(t);  // alive while the test runs (a collected tensor is freed)
    return { tensor: t.ref('test').tensor, out: f32(N, 7) };
  }],
};

// ---- the buffers of a parameter object, read from it ----
interface Buf { path: string; view: ArrayBufferView }
function buffers(v: unknown, path = ''): Buf[] {
  if (ArrayBuffer.isView(v)) return [{ path, view: v }];
  if (Array.isArray(v)) return v.flatMap((x, i) => buffers(x, `${path}[${i}]`));
  if (typeof v !== 'object' || v === null) return [];
  return Object.entries(v).filter(([k]) => path !== '' || (k !== 'async' && k !== 'abort'))
    .flatMap(([k, x]) => buffers(x, path === '' ? k : `${path}.${k}`));
}
/** How the op's ERR_BUSY message names `b`, and whether the op writes it (from its declared write paths). */
function role(op: Op, p: Params, b: Buf): { name: string; written: boolean } {
  for (const w of op.writes) {
    const [at, flag] = typeof w === 'string' ? [w, undefined] : w;
    const under = b.path === at || b.path.startsWith(`${at}.`) || b.path.startsWith(`${at}[`);
    if (under && (flag === undefined || p[flag] === true)) {
      return { name: flag === undefined ? b.path : `${at} (${flag})${b.path.slice(at.length)}`, written: true };
    }
  }
  return { name: b.path, written: false };
}
const fixtures = (name: string) => FIXTURES[name] ?? [];
/** Sets the buffer at `path` ("out.value", "grads[1]") of a parameter object. */
function put(p: Params, path: string, v: ArrayBufferView): void {
  const keys = path.match(/[^.[\]]+/g)!;
  let o = p as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) o = o[k] as Record<string, unknown>;
  o[keys[keys.length - 1]!] = v;
}
/** Index arrays every binding copies before the work reads them (args.h I32Copy). */
const COPIED = ['targets', 'offsets'];
const viewOf = (b: ArrayBufferView) => new Float32Array(b.buffer, 0, 1);
const bytes = (b: ArrayBufferView) => Buffer.from(new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
/** The GearError code and message of `f`'s throw or rejection ('ok' when it settles normally). */
async function outcome(f: () => unknown): Promise<{ code: string; message: string }> {
  try {
    await f();
    return { code: 'ok', message: '' };
  } catch (e) {
    if (!(e instanceof rl.GearError)) throw e;
    return { code: e.code, message: e.message };
  }
}
/** A pending async call writing (or reading) the first element of `b`'s buffer. */
const writer = (b: ArrayBufferView) => rl.segmentBroadcastAsync(Float64Array.of(1), Int32Array.of(0, 1), undefined, { out: viewOf(b) });
const reader = (b: ArrayBufferView) => rl.segmentReduceAsync(viewOf(b), Int32Array.of(0, 1), 'sum');

describe('buffer claims, derived from the parameter object of every native op', () => {
  it('every addon function taking arrays is a declared op; every declared op has a fixture here', () => {
    const exported = Object.keys(native).filter((k) => typeof (native as unknown as Params)[k] === 'function');
    expect(exported.filter((k) => !OPS.has(k) && !NO_ARRAYS.includes(k)), 'undeclared native functions').toEqual([]);
    expect([...OPS.keys()].filter((k) => NO_ARRAYS.includes(k))).toEqual([]);
    expect([...OPS.keys()].filter((k) => !exported.includes(k)), 'declared ops the addon lacks').toEqual([]);
    expect(Object.keys(FIXTURES).sort()).toEqual([...OPS.keys()].sort());
    expect(OPS.get('gearScan')?.async).toBe(false);
    expect([...OPS.values()].filter((o) => o.async).length).toBeGreaterThanOrEqual(16);
  });

  for (const [name, op] of OPS) {
    fixtures(name).forEach((make, variant) => {
      const label = `${name}${fixtures(name).length > 1 ? ` #${variant + 1}` : ''}`;

      it(`${label}: the sync call changes only the buffers it declares written`, () => {
        const p = make(), bufs = buffers(p), before = bufs.map((b) => bytes(b.view));
        op.call(p);
        bufs.forEach((b, i) => {
          if (!role(op, p, b).written) expect(bytes(b.view).equals(before[i]!), `${b.path} changed: not a declared write`).toBe(true);
        });
      });

      it(`${label}: the sync call refuses every buffer a pending async call races with, naming it`, async () => {
        for (const b of buffers(make())) {
          // a fresh fixture per probe: the pending call writes into it
          const p = make(), x = buffers(p).find((y) => y.path === b.path)!, r = role(op, p, x);
          const w = writer(x.view);
          const got = await outcome(() => op.call(p));
          await w;
          expect(got, `${label} ${b.path} while a pending call writes it`).toEqual({ code: 'ERR_BUSY',
            message: r.written ? `${r.name}: expected a buffer not in use by a pending async call, got one in use`
              : `${r.name}: expected a buffer not being written by a pending async call, got one in use` });
          if (!r.written) continue;
          const q = make(), y = buffers(q).find((z) => z.path === b.path)!;
          const rd = reader(y.view);
          const got2 = await outcome(() => op.call(q));
          await rd;
          expect(got2.code, `${label} ${b.path} while a pending call reads it`).toBe('ERR_BUSY');
        }
      });

      it(`${label}: a buffer the op writes that shares memory with another of the call is ERR_SHAPE, nothing written`, async () => {
        const p0 = make();
        const written = buffers(p0).filter((b) => role(op, p0, b).written).map((b) => b.path);
        for (const w of written) {
          for (const other of buffers(p0).map((b) => b.path).filter((x) => x !== w)) {
            // both views start at byte 0 of one buffer: the other keeps its values, the written one overlaps it
            const p = make(), bw = buffers(p).find((b) => b.path === w)!, bo = buffers(p).find((b) => b.path === other)!;
            const size = Math.max(bw.view.byteLength, bo.view.byteLength);
            const shared = new ArrayBuffer(size + (size % 8 ? 8 - (size % 8) : 0));
            const Ctor = (v: ArrayBufferView) => v.constructor as new (b: ArrayBuffer, o: number, n: number) => ArrayBufferView & { set(a: ArrayLike<number>): void; length: number };
            const o2 = new (Ctor(bo.view))(shared, 0, (bo.view as unknown as { length: number }).length);
            o2.set(bo.view as unknown as ArrayLike<number>);
            const w2 = new (Ctor(bw.view))(shared, 0, (bw.view as unknown as { length: number }).length);
            put(p, w, w2);
            put(p, other, o2);
            const before = bytes(o2);
            const got = await outcome(() => op.call(p));
            // index arrays the addon reads from a private copy (targets, offsets) cannot be raced: no hazard
            if (COPIED.includes(other.replace(/^.*\./, ''))) expect(got.code, `${label}: ${w} over ${other}`).toBe('ok');
            else {
              expect(got.code, `${label}: ${w} over ${other}`).toBe('ERR_SHAPE');
              expect(bytes(o2).equals(before), `${label}: ${w} over ${other} wrote before refusing`).toBe(true);
            }
          }
        }
      });

      if (!op.async) return;
      it(`${label}: a pending async call claims every buffer; each becomes untransferable; only declared writes change`, async () => {
        const p = make(), bufs = buffers(p);
        expect(bufs.length).toBeGreaterThan(0);
        const before = bufs.map((b) => bytes(b.view));
        const pending = op.callAsync(p);
        const got: Record<string, string> = {};
        for (const b of bufs) {
          got[`write over ${b.path}`] = (await outcome(() => rl.segmentBroadcast([1], Int32Array.of(0, 1), undefined, { out: viewOf(b.view) }))).code;
          if (role(op, p, b).written) got[`read ${b.path}`] = (await outcome(() => rl.segmentReduce(viewOf(b.view), Int32Array.of(0, 1), 'sum'))).code;
        }
        await pending;
        for (const [what, code] of Object.entries(got)) expect(code, what).toBe('ERR_BUSY');
        bufs.forEach((b, i) => {
          if (!role(op, p, b).written) expect(bytes(b.view).equals(before[i]!), `${b.path} changed: not a declared write`).toBe(true);
        });
        // Node 20 copies a buffer marked untransferable, Node >= 21 throws a DataCloneError; either way it stays attached.
        for (const b of bufs) {
          const ab = b.view.buffer, n = ab.byteLength;
          try {
            structuredClone(ab, { transfer: [ab as ArrayBuffer] });
          } catch (e) {
            expect((e as Error).name, b.path).toBe('DataCloneError');
          }
          expect(ab.byteLength, `${b.path}: transferred away (not marked untransferable)`).toBe(n);
        }
        // released once settled
        for (const b of bufs) expect((await outcome(() => rl.segmentReduce(viewOf(b.view), Int32Array.of(0, 1), 'sum'))).code, b.path).toBe('ok');
      });
    });
  }
});
