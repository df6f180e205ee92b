// The ownership rule of async calls (docs/ownership.md): an ArrayBuffer passed to an async call becomes
// untransferable, so a transfer while the work is in flight (structuredClone or postMessage with a
// transfer list, then a GC) copies it instead of freeing memory under the work. Each case runs in a
// child process (a crash fails the test) with one libuv thread that a large call keeps busy: the call
// under test is queued, its pointers already taken, while its buffers are transferred and the heap is
// collected and refilled; then its result must equal the synchronous result on the same inputs.
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;
const NATIVE = pathToFileURL(join(ROOT, 'dist', 'core', 'addon.js')).href;

// Shared by every child: inputs, the transfer-and-collect step, the gate that queues a call, exact comparison.
const PRELUDE = `
const R = 32, V = 16384;
const wave = (n, s) => { const a = new Float32Array(n); for (let i = 0; i < n; i++) a[i] = Math.sin(i * 0.37 + s) * 3; return a; };
const logits = (s) => ({ data: wave(R * V, s), rows: R, vocab: V });
const targets = () => Int32Array.from({ length: R }, (_, r) => (r * 97) % V);
const copyOf = (x) => x.slice();
// Transfers each buffer away as a hostile caller would; Node 20 copies a buffer marked untransferable,
// Node >= 21 throws a DataCloneError. Then collects and refills the heap so freed memory is reused.
const steal = (views) => {
  const seen = new Set(), got = [];
  for (const v of views) {
    const b = v.buffer;
    if (seen.has(b)) continue;
    seen.add(b);
    const before = b.byteLength;
    let how;
    try { structuredClone(b, { transfer: [b] }); how = b.byteLength === before ? 'copied' : 'detached'; }
    catch (e) { how = e.name === 'DataCloneError' && b.byteLength === before ? 'copied' : 'detached (' + e.name + ')'; }
    got.push(how);
  }
  globalThis.gc();
  for (let k = 0; k < 6; k++) new Float32Array(2 ** 21).fill(NaN);
  globalThis.gc();
  return got;
};
// Holds the process's one libuv thread (UV_THREADPOOL_SIZE=1) in an fs.read of an empty FIFO until
// release() writes a byte: a call started meanwhile is queued, its pointers taken, its work not started.
const fs = await import('node:fs'), os = await import('node:os'), { execFileSync } = await import('node:child_process');
const gateDir = fs.mkdtempSync(os.tmpdir() + '/gear-ownership-'), gatePath = gateDir + '/gate';
execFileSync('mkfifo', [gatePath]);
const gateFd = fs.openSync(gatePath, fs.constants.O_RDWR);
const hold = () => {
  const done = new Promise((ok, bad) => fs.read(gateFd, Buffer.alloc(1), 0, 1, null, (e) => (e ? bad(e) : ok())));
  return { release: async () => { fs.writeSync(gateFd, 'x'); await done; } };
};
const closeGate = () => { fs.closeSync(gateFd); fs.rmSync(gateDir, { recursive: true, force: true }); };
const same = (a, b) => a instanceof Float32Array || a instanceof Float64Array || a instanceof Int32Array
  ? a.length === b.length && a.every((x, i) => Object.is(x, b[i]))
  : typeof a === 'number' ? Object.is(a, b)
  : Object.keys(a).every((k) => same(a[k], b[k]));
`;

/** Runs `body` (an async ESM function body; rl, native and the prelude in scope) in a child; returns its JSON. */
function child(body: string, opts: { before?: string; timeoutMs?: number } = {}): Record<string, unknown> {
  const code = `${opts.before ?? ''}
const rl = await import(${JSON.stringify(DIST)}); const { native } = await import(${JSON.stringify(NATIVE)});
${PRELUDE}
const aerr = async (f) => { try { await f(); return 'no error'; } catch (e) { return (e instanceof rl.GearError ? 'GearError ' : 'other ') + (e.code ?? e.name); } };
const out = await (async () => { ${body} })();
closeGate();
console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', code], {
    cwd: ROOT, encoding: 'utf8', timeout: opts.timeoutMs ?? 60_000,
    env: { ...process.env, GEAR_RL_NUM_THREADS: '2', UV_THREADPOOL_SIZE: '1' },
  });
  expect(r.signal, `child killed by ${r.signal}: ${r.stderr.slice(-2000)}`).toBeNull();
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
}

/**
 * One async op: `setup` declares `ref` (the sync result, computed on copies or before the call),
 * `start()` (the async call) and `bufs` (every array the call reads or writes); `result(r)` maps the
 * async result (and any in-place updates) to what is compared with `ref`.
 */
interface Case { setup: string; result?: string }

const CASES: Record<string, Case> = {
  tokenStatsAsync: {
    setup: `const l = logits(1), t = targets(), out = { logprob: new Float32Array(R), entropy: new Float32Array(R), logsumexp: new Float32Array(R) };
      const ref = rl.tokenStats(l, t); const start = () => rl.tokenStatsAsync(l, t, { out });
      const bufs = [l.data, t, out.logprob, out.entropy, out.logsumexp];`,
  },
  tokenStatsBackwardAsync: {
    setup: `const l = logits(2), t = targets(), g = { logprob: wave(R, 3), entropy: wave(R, 4) }, out = new Float32Array(R * V);
      const stats = rl.tokenStats(l, t);
      const ref = rl.tokenStatsBackward(l, t, g, { stats });
      const start = () => rl.tokenStatsBackwardAsync(l, t, g, { stats, out });
      const bufs = [l.data, t, g.logprob, g.entropy, stats.logsumexp, stats.entropy, out];`,
  },
  tokenStatsPartialAsync: {
    setup: `const l = logits(5), t = targets();
      const ref = rl.tokenStatsPartial(l, t, { vocabStart: 0 }); const start = () => rl.tokenStatsPartialAsync(l, t, { vocabStart: 0 });
      const bufs = [l.data, t];`,
  },
  mergeTokenStatsAsync: {
    setup: `const t = targets(), parts = [0, 1].map((k) => rl.tokenStatsPartial(logits(6 + k), t, { vocabStart: k * V }));
      const ref = rl.mergeTokenStats(parts); const start = () => rl.mergeTokenStatsAsync(parts);
      const bufs = parts.flatMap((p) => [p.max, p.sumExp, p.sumExpX, p.targetLogit]);`,
  },
  divergenceAsync: {
    setup: `const s = logits(8), te = logits(9), t = targets();
      const out = { value: new Float32Array(R), studentEntropy: new Float32Array(R), studentLogsumexp: new Float32Array(R), teacherLogsumexp: new Float32Array(R) };
      const ref = rl.divergence(s, te, { kind: 'jsd', targets: t }); const start = () => rl.divergenceAsync(s, te, { kind: 'jsd', targets: t, out });
      const bufs = [s.data, te.data, t, ...Object.values(out)];`,
  },
  divergenceBackwardAsync: {
    setup: `const s = logits(10), te = logits(11), g = wave(R, 12), out = new Float32Array(R * V);
      const ref = rl.divergenceBackward(s, te, g); const start = () => rl.divergenceBackwardAsync(s, te, g, { out });
      const bufs = [s.data, te.data, g, out];`,
  },
  segmentReduceAsync: {
    setup: `const n = R * V, values = wave(n, 13), offsets = Int32Array.from({ length: R + 1 }, (_, r) => r * V);
      const mask = Uint8Array.from({ length: n }, (_, i) => (i % 7 ? 1 : 0));
      const ref = rl.segmentReduce(values, offsets, 'mean', mask); const start = () => rl.segmentReduceAsync(values, offsets, 'mean', mask);
      const bufs = [values, offsets, mask];`,
  },
  segmentBroadcastAsync: {
    setup: `const n = R * V, vals = Float64Array.from({ length: R }, (_, r) => r - 9.5), offsets = Int32Array.from({ length: R + 1 }, (_, r) => r * V);
      const mask = Uint8Array.from({ length: n }, (_, i) => (i % 5 ? 1 : 0)), out = new Float32Array(n);
      const ref = rl.segmentBroadcast(vals, offsets, mask); const start = () => rl.segmentBroadcastAsync(vals, offsets, mask, { out });
      const bufs = [vals, offsets, mask, out];`,
  },
  policyLossAsync: {
    setup: `const n = R * V, offsets = Int32Array.from({ length: R + 1 }, (_, r) => r * V);
      const a = { logprob: wave(n, 14).map((x) => -Math.abs(x)), oldLogprob: wave(n, 15).map((x) => -Math.abs(x)), advantages: wave(n, 16), offsets,
        mask: Uint8Array.from({ length: n }, (_, i) => (i % 3 ? 1 : 0)), out: new Float32Array(n) };
      const r0 = rl.policyLoss({ ...a, out: undefined }); const ref = { loss: r0.loss, grad: r0.grad };
      const start = () => rl.policyLossAsync(a); const bufs = [a.logprob, a.oldLogprob, a.advantages, offsets, a.mask, a.out];`,
    result: `({ loss: r.loss, grad: r.grad })`,
  },
  clipGradNormAsync: {
    setup: `const mk = () => [wave(R * V, 17), wave(999, 18)], g0 = mk(), grads = mk();
      const n0 = rl.clipGradNorm(g0, 0.5); const ref = { norm: n0, g: g0 };
      const start = () => rl.clipGradNormAsync(grads, 0.5); const bufs = grads;`,
    result: `({ norm: r, g: grads })`,
  },
  'AdamW.stepAsync': {
    setup: `const mk = () => [wave(R * V, 19), wave(77, 20)], p0 = mk(), params = mk(), grads = [wave(R * V, 21), wave(77, 22)];
      new rl.AdamW(p0, { lr: 1e-3, weightDecay: 0.1 }).step(grads); const ref = p0;
      const opt = new rl.AdamW(params, { lr: 1e-3, weightDecay: 0.1 });
      const start = () => opt.stepAsync(grads); const bufs = [...params, ...grads];`,
    result: `params`,
  },
  'SGD.stepAsync': {
    setup: `const mk = () => [wave(R * V, 23)], p0 = mk(), params = mk(), grads = [wave(R * V, 24)];
      const o0 = new rl.SGD(p0, { lr: 0.1, momentum: 0.9 }); o0.step(grads); o0.step(grads); const ref = p0;
      const opt = new rl.SGD(params, { lr: 0.1, momentum: 0.9 }); opt.step(grads);
      const start = () => opt.stepAsync(grads); const bufs = [...params, ...grads];`,
    result: `params`,
  },
  sparseDivergenceAsync: {
    setup: `const K = 64, N = 4096, side = (s) => {
        const ids = Int32Array.from({ length: N * K }, (_, i) => ((i % K) * 7 + Math.floor(i / K) + s) % 50000);
        const w = wave(N * K, s), logprobs = new Float32Array(N * K);
        for (let t = 0; t < N; t++) { let z = 0; for (let j = 0; j < K; j++) z += Math.exp(w[t * K + j]) ; for (let j = 0; j < K; j++) logprobs[t * K + j] = w[t * K + j] - Math.log(z * 1.25); }
        return { ids, logprobs, k: K }; };
      const st = side(25), te = side(26);
      const ref = rl.sparseDivergence(st, te, { kind: 'forward_kl' }); const start = () => rl.sparseDivergenceAsync(st, te, { kind: 'forward_kl' });
      const bufs = [st.ids, st.logprobs, te.ids, te.logprobs];`,
  },
  sparseDivergenceBackwardAsync: {
    setup: `const K = 64, N = 4096, side = (s) => {
        const ids = Int32Array.from({ length: N * K }, (_, i) => ((i % K) * 7 + Math.floor(i / K) + s) % 50000);
        const w = wave(N * K, s), logprobs = new Float32Array(N * K);
        for (let t = 0; t < N; t++) { let z = 0; for (let j = 0; j < K; j++) z += Math.exp(w[t * K + j]) ; for (let j = 0; j < K; j++) logprobs[t * K + j] = w[t * K + j] - Math.log(z * 1.25); }
        return { ids, logprobs, k: K }; };
      const st = side(27), te = side(28), g = wave(N, 29);
      const ref = rl.sparseDivergenceBackward(st, te, g); const start = () => rl.sparseDivergenceBackwardAsync(st, te, g);
      const bufs = [st.ids, st.logprobs, te.ids, te.logprobs, g];`,
  },
};

describe('async calls: inputs transferred while the work is in flight', () => {
  it('the cases cover every exported …Async function and every async optimizer step', () => {
    const exported = Object.keys(rl).filter((k) => k.endsWith('Async')).sort();
    expect(Object.keys(CASES).filter((k) => !k.includes('.')).sort()).toEqual(exported);
  });

  for (const [name, c] of Object.entries(CASES)) {
    it(`${name}: structuredClone transfers and a GC while queued give the synchronous result`, () => {
      const r = child(`${c.setup}
        const h = hold();
        const p = start();               // queued: pointers taken, work not started
        const how = steal(bufs);         // every buffer it reads or writes, transferred away; heap collected
        const attached = bufs.every((x) => x.buffer.byteLength > 0);
        await h.release();
        const r = await p;
        return { how, attached, same: same(ref, ${c.result ?? 'r'}) };`);
      expect(r.how as string[]).not.toHaveLength(0);
      for (const h of r.how as string[]) expect(h).toBe('copied');
      expect(r.attached).toBe(true);
      expect(r.same).toBe(true);
    });
  }
});

describe('async calls: the rule in the native layer itself', () => {
  it('tokenStatsAsync while running (no queue): a 64 MiB input transferred and collected', () => {
    const r = child(`
      const ab = new ArrayBuffer(2 ** 26), data = new Float32Array(ab);
      for (let i = 0; i < data.length; i += 4099) data[i] = (i % 13) * 0.25;
      const t = Int32Array.from({ length: 256 }, (_, i) => i * 200);
      const ref = rl.tokenStats({ data, rows: 256, vocab: 2 ** 16 }, t);
      const p = rl.tokenStatsAsync({ data, rows: 256, vocab: 2 ** 16 }, t);
      let how = 'copied';
      try { structuredClone(ab, { transfer: [ab] }); } catch (e) { how = e.name; }
      globalThis.gc();
      const r = await p;
      return { how, len: ab.byteLength, same: same(ref, r) };`, { timeoutMs: 90_000 });
    expect(['copied', 'DataCloneError']).toContain(r.how);
    expect(r.len).toBe(2 ** 26);
    expect(r.same).toBe(true);
  });

  it('the raw addon (no TypeScript checks): its arrays are marked, a resizable buffer is ERR_DTYPE', () => {
    const r = child(`
      const l = logits(30), t = targets();
      const ref = native.tokenStats({ logits: { ...l, dtype: 0 }, targets: t, temperature: 1 });
      const h = hold();
      const p = native.tokenStats({ logits: { ...l, dtype: 0 }, targets: t, temperature: 1, async: true });
      const how = steal([l.data, t]);
      await h.release();
      const res = await p;
      const rab = new Float32Array(new ArrayBuffer(64, { maxByteLength: 128 }));
      const resizable = await aerr(() => native.segmentReduce({ values: rab, offsets: Int32Array.of(0, 16), op: 0, async: true }));
      const resizableOut = await aerr(() => native.segmentBroadcast({ rowValues: Float64Array.of(1), offsets: Int32Array.of(0, 16), out: rab, async: true }));
      // a growable SharedArrayBuffer only grows: accepted
      const sab = new Float32Array(new SharedArrayBuffer(64, { maxByteLength: 128 })).fill(1);
      const shared = (await native.segmentReduce({ values: sab, offsets: Int32Array.of(0, 16), op: 0, async: true })).rowValues[0];
      return { how, same: same(ref, res), resizable, resizableOut, shared };`);
    expect(r.how).toEqual(['copied', 'copied']);
    expect(r.same).toBe(true);
    expect(r.resizable).toBe('GearError ERR_DTYPE');
    expect(r.resizableOut).toBe('GearError ERR_DTYPE');
    expect(r.shared).toBe(16);
  });

  it('postMessage to a worker while a call is in flight: the worker gets a copy, the call the original', () => {
    const r = child(`
      const { Worker } = await import('node:worker_threads');
      const w = new Worker(\`const { parentPort } = await import('node:worker_threads');
        parentPort.on('message', (m) => { let s = 0; for (let i = 0; i < m.length; i += 97) s += m[i]; parentPort.postMessage({ n: m.length, s }); });\`, { eval: true });
      const s = logits(31), te = logits(32), sum = (m) => { let x = 0; for (let i = 0; i < m.length; i += 97) x += m[i]; return x; };
      const ref = rl.divergence(s, te); const want = { n: s.data.length, s: sum(s.data) };
      const h = hold();
      const p = rl.divergenceAsync(s, te);
      const reply = new Promise((ok) => w.once('message', ok));
      let how = 'posted';
      for (const x of [s.data, te.data]) {
        try { w.postMessage(x, [x.buffer]); } catch (e) { how = e.name; }
      }
      globalThis.gc();
      for (let k = 0; k < 6; k++) new Float32Array(2 ** 21).fill(NaN);
      await h.release();
      const res = await p;
      const got = how === 'posted' ? await reply : want;
      await w.terminate();
      return { how, attached: s.data.length === R * V && te.data.length === R * V, same: same(ref, res), got, want };`);
    expect(['posted', 'DataCloneError']).toContain(r.how);
    expect(r.attached).toBe(true);
    expect(r.same).toBe(true);
    expect(r.got).toEqual(r.want);
  });

  it('an async call inside a worker, its input posted to the main thread while in flight', () => {
    const workerCode = `(async () => {
      const rl = await import(${JSON.stringify(DIST)});
      const { parentPort } = await import('node:worker_threads');
      ${PRELUDE}
      const l = logits(33), t = targets(), ref = rl.tokenStats(l, t);
      const h = hold(), p = rl.tokenStatsAsync(l, t);
      let how = 'posted';
      try { parentPort.postMessage(l.data, [l.data.buffer]); } catch (e) { how = e.name; }
      globalThis.gc();
      for (let k = 0; k < 6; k++) new Float32Array(2 ** 21).fill(NaN);
      await h.release();
      const r = await p;
      closeGate();
      parentPort.postMessage({ done: true, how, same: same(ref, r), n: l.data.length });
    })()`;
    const r = child(`
      const { Worker } = await import('node:worker_threads');
      const w = new Worker(${JSON.stringify(workerCode)}, { eval: true });
      const msgs = [];
      await new Promise((ok, bad) => { w.on('message', (m) => { msgs.push(m); if (m.done) ok(); }); w.on('error', bad); });
      await w.terminate();
      const last = msgs[msgs.length - 1];
      return { how: last.how, same: last.same, n: last.n, want: R * V, posted: msgs.length === 2 ? msgs[0].length : -1 };`);
    expect(['posted', 'DataCloneError']).toContain(r.how);
    expect(r.same).toBe(true);
    expect(r.n).toBe(r.want);
    if (r.how === 'posted') expect(r.posted).toBe(r.want);
  });

  it('a runtime without process.getBuiltinModule: async calls are ERR_NATIVE, sync calls work', () => {
    const r = child(`
      const l = logits(34), t = targets();
      const e = await aerr(() => rl.tokenStatsAsync(l, t));
      const raw = await aerr(() => native.tokenStats({ logits: { ...l, dtype: 0 }, targets: t, temperature: 1, async: true }));
      const sync = rl.tokenStats(l, t).logprob.length;
      return { e, raw, sync };`, { before: 'delete process.getBuiltinModule;' });
    expect(r.e).toBe('GearError ERR_NATIVE');
    expect(r.raw).toBe('GearError ERR_NATIVE');
    expect(r.sync).toBe(32);
  });

  it('a markAsUntransferable replaced before load by one that detaches: ERR_SHAPE, nothing queued', () => {
    const r = child(`
      const l = logits(35), t = targets();
      const e = await aerr(() => rl.tokenStatsAsync(l, t));
      return { e, detached: l.data.length === 0 };`,
    { before: `process.getBuiltinModule = () => ({ markAsUntransferable: (ab) => { structuredClone(ab, { transfer: [ab] }); } });` });
    expect(r.e).toBe('GearError ERR_SHAPE');
    expect(r.detached).toBe(true);
  });
});
