// JavaScript against the binding: getters that run in the middle of argument reading, index arrays
// changed while the work runs, sparse lists of absurd length, SharedArrayBuffer-backed arrays. Each case
// runs in a child process, so a crash (SIGSEGV, an abort) fails the test instead of killing the runner;
// the child prints what it observed as JSON and the test checks it.
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;
const NATIVE = pathToFileURL(join(ROOT, 'dist', 'core', 'addon.js')).href;

/** Runs `body` (an async ESM function body with `rl` and `native` in scope) in a child; returns its JSON. */
function child(body: string, timeoutMs = 60_000): Record<string, unknown> {
  const code = `import * as rl from ${JSON.stringify(DIST)}; import { native } from ${JSON.stringify(NATIVE)};
const err = (f) => { try { f(); return 'no error'; } catch (e) { return (e instanceof rl.GearError ? 'GearError ' : 'other ') + (e.code ?? e.name); } };
const aerr = async (p) => { try { await p; return 'no error'; } catch (e) { return (e instanceof rl.GearError ? 'GearError ' : 'other ') + (e.code ?? e.name); } };
const out = await (async () => { ${body} })();
console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', code], {
    cwd: ROOT, encoding: 'utf8', timeout: timeoutMs, env: { ...process.env, GEAR_RL_NUM_THREADS: '2' },
  });
  expect(r.signal, `child killed by ${r.signal}: ${r.stderr.slice(-2000)}`).toBeNull();
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
}

describe('getters that run while arguments are read', () => {
  it('SGD.step: a grads[1] getter that shrinks params[0] to nothing gives a GearError, not a crash', () => {
    const r = child(`
      const ab = new ArrayBuffer(4096 * 4, { maxByteLength: 4096 * 4 });
      const p0 = new Float32Array(ab), p1 = new Float32Array(8);
      const sgd = new rl.SGD([p0, p1], { lr: 0.1 });
      const g0 = new Float32Array(4096).fill(1), g1 = new Float32Array(8).fill(1);
      const grads = [g0, g1];
      let calls = 0;
      Object.defineProperty(grads, '1', { get() { calls++; ab.resize(0); return g1; } });
      const e = err(() => sgd.step(grads));
      // the raw addon, called directly with the same hostile list
      ab.resize(4096 * 4);
      const e2 = err(() => native.sgdStep({ params: [p0, p1], grads, momentumBuffer: null, lr: 0.1, momentum: 0, dampening: 0, weightDecay: 0, nesterov: false, maximize: false, firstStep: true }));
      return { e, e2, calls };`);
    expect(r.e).toMatch(/^GearError ERR_SHAPE$/);
    expect(r.e2).toMatch(/^GearError ERR_SHAPE$/);
    expect(r.calls as number).toBeGreaterThan(0);
  });

  it('clipGradNorm and mergeTokenStats: getters that detach or shrink an earlier element', () => {
    const r = child(`
      const ab = new ArrayBuffer(1024 * 4, { maxByteLength: 1024 * 4 });
      const a = new Float32Array(ab).fill(1), b = new Float32Array(16).fill(1);
      const grads = [a, b];
      Object.defineProperty(grads, '1', { get() { ab.resize(0); return b; } });
      // grads[0] is empty by the time pointers are taken: the norm is that of grads[1] alone
      const norm = new Float64Array(1);
      const clip = err(() => native.clipGradNorm({ grads, maxNorm: 1, errorIfNonfinite: true, out: norm }));
      const z = new Float32Array(4 * 10).map((_, i) => Math.sin(i));
      const t = new Int32Array([1, 2, 3, 4]);
      const p0 = rl.tokenStatsPartial({ data: z.slice(0, 20), rows: 4, vocab: 5 }, t, { vocabStart: 0 });
      const p1 = rl.tokenStatsPartial({ data: z.slice(20), rows: 4, vocab: 5 }, t, { vocabStart: 5 });
      const hostile = { ...p1 };
      const buf = structuredClone(p0.max);
      Object.defineProperty(hostile, 'vocabStart', { get() { structuredClone(p0.max.buffer, { transfer: [p0.max.buffer] }); return 5; } });
      const merge = err(() => native.mergeTokenStats({ parts: [p0, hostile], rows: 4, temperature: 1 }));
      return { clip, norm: norm[0], b0: b[0], merge, detached: p0.max.length === 0 && buf.length === 4 };`);
    expect(r.clip).toBe('no error');
    expect(r.norm).toBe(4);
    expect(Math.abs((r.b0 as number) - 0.25)).toBeLessThan(1e-6);
    expect(r.merge).toMatch(/^GearError ERR_(SHAPE|DTYPE)$/);
    expect(r.detached).toBe(true);
  });
});

describe('index arrays changed while the work runs', () => {
  it('segmentReduceAsync and tokenStatsAsync use the offsets and targets of the call', () => {
    const r = child(`
      const R = 2000, per = 500, n = R * per;
      const values = new Float32Array(n).map((_, i) => (i % 7) - 3);
      const offsets = Int32Array.from({ length: R + 1 }, (_, r) => r * per);
      const want = Array.from(rl.segmentReduce(values, offsets, 'sum'));
      const p = rl.segmentReduceAsync(values, offsets, 'sum');
      offsets[R - 1] = 2 ** 31 - 1;   // out of range if read again
      offsets[1] = n;
      const got = Array.from(await p);
      const rows = 64, vocab = 32000;
      const z = new Float32Array(rows * vocab).map((_, i) => Math.sin(i * 0.01));
      const targets = Int32Array.from({ length: rows }, (_, r) => r);
      const ts = rl.tokenStats({ data: z, rows, vocab }, targets);
      const q = rl.tokenStatsAsync({ data: z, rows, vocab }, targets);
      targets.fill(2 ** 31 - 1);
      const as = await q;
      return { same: JSON.stringify(got) === JSON.stringify(want), lp: Array.from(as.logprob).every((x, i) => x === ts.logprob[i]) };`);
    expect(r.same).toBe(true);
    expect(r.lp).toBe(true);
  });
});

describe('lists and backings', () => {
  it('sparse lists of length 2^30 and 2^27 are refused at once (TS and raw addon)', () => {
    const r = child(`
      const g = []; g.length = 2 ** 30; g[0] = new Float32Array(4);
      const t0 = Date.now();
      const a = err(() => rl.clipGradNorm(g, 1));
      const b = err(() => native.clipGradNorm({ grads: g, maxNorm: 1, errorIfNonfinite: true, out: new Float64Array(1) }));
      const c = err(() => native.gradNorm({ grads: g }));
      const parts = []; parts.length = 2 ** 27;
      const d = err(() => rl.mergeTokenStats(parts));
      const e = err(() => native.mergeTokenStats({ parts, rows: 1, temperature: 1 }));
      return { a, b, c, d, e, ms: Date.now() - t0 };`);
    for (const k of ['a', 'b', 'c', 'd', 'e']) expect(r[k], k).toMatch(/^GearError ERR_(SHAPE|DTYPE)$/);
    expect(r.ms as number).toBeLessThan(5000);
  });

  it('SharedArrayBuffer-backed arrays compute like ordinary ones (no plain Error)', () => {
    const r = child(`
      const rows = 8, vocab = 100;
      const sab = new SharedArrayBuffer(rows * vocab * 4);
      const z = new Float32Array(sab).map((_, i) => Math.cos(i));
      const t = new Int32Array(new SharedArrayBuffer(rows * 4)).map((_, i) => i);
      const a = rl.tokenStats({ data: z, rows, vocab }, t);
      const b = rl.tokenStats({ data: Float32Array.from(z), rows, vocab }, Int32Array.from(t));
      const off = new Int32Array(new SharedArrayBuffer(12)); off.set([0, 3, 5]);
      const s = rl.segmentReduce(new Float64Array(new SharedArrayBuffer(40)).fill(2), off, 'sum');
      return { same: Array.from(a.logprob).every((x, i) => x === b.logprob[i]), sums: Array.from(s) };`);
    expect(r.same).toBe(true);
    expect(r.sums).toEqual([6, 4]);
  });
});
