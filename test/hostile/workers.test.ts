// Workers that end (terminate(), process.exit(), an uncaught throw) while their async calls run: only the
// worker may end. When the worker was the only environment that loaded the addon, Node unloads the module
// as the worker ends, while the process-wide thread pool's threads still run its code: the module is pinned
// (linked with -z nodelete; pinned at load on macOS and Windows), so this must never end in SIGSEGV. The
// errors the native layer raises in a worker are that worker's GearError.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;

describe('a worker that ends with async work in flight', () => {
  // Each way a worker can end while its tokenStatsAsync / divergenceAsync / AdamW.stepAsync jobs run
  // (terminate() from outside, process.exit inside, an uncaught throw): only the worker ends, the jobs
  // finish or stop after it is gone, and the main thread then loads and uses the addon.
  for (const how of ['terminate', 'exit', 'throw']) {
    it(`${how}: only the worker dies`, () => {
      const worker = `
        Promise.all([import('node:worker_threads'), import(${JSON.stringify(DIST)})]).then(async ([{ parentPort }, rl]) => {
          const rows = 2048, vocab = 32000;
          const z = new Float32Array(rows * vocab).map((_, i) => Math.sin(i));
          const t = new Int32Array(rows);
          const params = [new Float32Array(1 << 22)], opt = new rl.AdamW(params);  // a step is never cut short
          const jobs = [];
          for (let k = 0; k < 4; k++) {
            jobs.push(rl.tokenStatsAsync({ data: z, rows, vocab }, t));
            jobs.push(rl.divergenceAsync({ data: z, rows, vocab }, { data: z, rows, vocab }));
          }
          jobs.push(opt.stepAsync([new Float32Array(1 << 22).fill(1)]));
          parentPort.postMessage('started');
          if (${JSON.stringify(how)} === 'exit') process.exit(3);
          if (${JSON.stringify(how)} === 'throw') throw new Error('boom');
          await Promise.all(jobs);
        });`;
      const main = `
        import { Worker } from 'node:worker_threads';
        const w = new Worker(${JSON.stringify(worker)}, { eval: true, stderr: true });
        let werr = '';
        w.stderr.on('data', (d) => { werr += d; });
        let started = false;
        const code = await new Promise((resolve) => {
          w.on('message', () => { started = true; if (${JSON.stringify(how)} === 'terminate') w.terminate(); });
          w.on('error', (e) => { if (${JSON.stringify(how)} !== 'throw') console.error(String(e)); });
          w.on('exit', resolve);
        });
        await new Promise((r) => setTimeout(r, 1500)); // the worker's jobs end after it is gone
        const rl = await import(${JSON.stringify(DIST)});
        const s = rl.tokenStats({ data: Float32Array.of(1, 2, 3), rows: 1, vocab: 3 }, Int32Array.of(2));
        console.log(JSON.stringify({ started, code, lp: s.logprob[0], werr: werr.slice(-800) }));`;
      // without the runner's own environment (NODE_OPTIONS, VITEST_*), which the worker would inherit
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('VITEST')));
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', main], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
      expect(r.signal, `process killed by ${r.signal}: ${r.stderr.slice(-1500)}`).toBeNull();
      expect(r.status, r.stderr.slice(-1500)).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { started: boolean; code: number; lp: number; werr: string };
      expect(out.started, out.werr).toBe(true);
      expect(out.code).toBe(how === 'exit' ? 3 : 1);
      expect(Math.abs(out.lp - (3 - Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3))))).toBeLessThan(1e-6);
    });
  }
});

describe('process-wide settings', () => {
  // setIsa and setNumThreads change the one kernel table and the one thread pool of the process: a
  // worker's call is seen by the main thread (documented in the README).
  it("a worker's setIsa / setNumThreads are the main thread's too", () => {
    const worker = `
      Promise.all([import('node:worker_threads'), import(${JSON.stringify(DIST)})]).then(([{ parentPort }, rl]) => {
        rl.setIsa('baseline');
        rl.setNumThreads(1);
        parentPort.postMessage('set');
      });`;
    const main = `
      import { Worker } from 'node:worker_threads';
      const rl = await import(${JSON.stringify(DIST)});
      const before = rl.backend();
      const w = new Worker(${JSON.stringify(worker)}, { eval: true });
      await new Promise((resolve) => w.on('message', resolve));
      await w.terminate();
      const after = rl.backend();
      console.log(JSON.stringify({ before: [before.isa, before.threads], after: [after.isa, after.threads] }));`;
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('VITEST') && k !== 'GEAR_RL_ISA'));
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', main], { cwd: ROOT, env: { ...env, GEAR_RL_NUM_THREADS: '2' }, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr.slice(-1500)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { before: [string, number]; after: [string, number] };
    expect(out.before[1]).toBe(2);
    expect(out.after).toEqual(['baseline', 1]);
  });
});

describe('errors raised by the native layer in a worker', () => {
  // The addon raises the GearError class its loader registered for the calling thread's environment.
  // In a worker that loads the package twice (here: the built package and a copy of it elsewhere, as a
  // bundle beside node_modules would), each copy's native errors are instances of that copy's GearError,
  // whichever copy registered last, for sync calls and async rejections alike.
  it("are instances of the worker's own GearError, for every copy of the package it loads", () => {
    const copy = mkdtempSync(join(tmpdir(), 'gear-rl-copy-'));
    try {
      cpSync(join(ROOT, 'dist'), join(copy, 'dist'), { recursive: true });
      writeFileSync(join(copy, 'package.json'), JSON.stringify({ name: 'gear-rl-copy', type: 'module', private: true }));
      const COPY = pathToFileURL(join(copy, 'dist', 'index.js')).href;
      const worker = `
        Promise.all([import('node:worker_threads'), import(${JSON.stringify(DIST)}), import(${JSON.stringify(COPY)})])
          .then(async ([{ parentPort }, a, b]) => {
            const out = [];
            const nan = { data: Float32Array.of(1, NaN, 3), rows: 1, vocab: 3 };
            for (const [name, rl] of [['package', a], ['copy', b]]) {
              try { rl.tokenStats(nan, Int32Array.of(1)); out.push([name, 'sync', 'no error']); }
              catch (e) { out.push([name, 'sync', e instanceof rl.GearError, e.code]); }
              const e = await rl.tokenStatsAsync(nan, Int32Array.of(1)).then(() => 'no error', (x) => x);
              out.push([name, 'async', e instanceof rl.GearError, e.code]);
            }
            out.push(['classes', 'distinct', a.GearError !== b.GearError, 'ERR_NON_FINITE']);
            parentPort.postMessage(out);
          });`;
      const main = `
        import { Worker } from 'node:worker_threads';
        const w = new Worker(${JSON.stringify(worker)}, { eval: true });
        w.on('message', (m) => { console.log(JSON.stringify(m)); w.terminate(); });
        w.on('error', (e) => { console.error(String(e)); process.exit(2); });`;
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('VITEST')));
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', main], {
        cwd: ROOT, env: { ...env, GEAR_RL_ADDON: join(ROOT, 'build', 'Release', 'gear_rl.node') }, encoding: 'utf8', timeout: 60_000,
      });
      expect(r.status, r.stderr.slice(-1500)).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as [string, string, boolean, string][];
      expect(out).toEqual([
        ['package', 'sync', true, 'ERR_NON_FINITE'], ['package', 'async', true, 'ERR_NON_FINITE'],
        ['copy', 'sync', true, 'ERR_NON_FINITE'], ['copy', 'async', true, 'ERR_NON_FINITE'],
        ['classes', 'distinct', true, 'ERR_NON_FINITE'],
      ]);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
