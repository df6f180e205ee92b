// Workers on the host device that end (terminate(), process.exit(), an uncaught throw) while their async
// device calls run: uploads, downloads, ops on device tensors, backwards making new tensors or writing
// one. Only the worker ends; its tensors, and the ones its calls were making, are freed once the calls
// are gone, on both devices; the main thread's tensors and calls are untouched. Runs the compiled package
// (dist/) in a child process: a worker cannot import the TypeScript sources.
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;

describe('a worker that ends with device calls in flight, on the host device', () => {
  for (const how of ['terminate', 'exit', 'throw']) {
    it(`${how}: only the worker dies, and everything it held is freed`, () => {
      const worker = `
        Promise.all([import('node:worker_threads'), import(${JSON.stringify(DIST)})]).then(async ([{ parentPort }, rl]) => {
          const rows = 128, vocab = 1 << 16;
          const z = new Float32Array(rows * vocab).map((_, i) => Math.sin(i));
          const y = new Int32Array(rows), g = new Float32Array(rows).fill(1);
          const a = rl.cuda.uploadSync({ data: z, rows, vocab });
          const b = rl.cuda.uploadSync({ data: z, rows, vocab }, { device: 1 });
          const out = rl.cuda.uploadSync({ data: new Float32Array(rows * vocab), rows, vocab });
          const kept = [a, b, out];  // never disposed
          const jobs = [];
          for (let k = 0; k < 3; k++) {
            jobs.push(rl.tokenStatsAsync(a, y), rl.divergenceAsync(b, b, { kind: 'jsd' }));
            jobs.push(rl.divergenceBackwardAsync(a, a, g), rl.tokenStatsBackwardAsync(b, y, { logprob: g }));  // new tensors
            jobs.push(rl.cuda.upload({ data: z, rows, vocab }, { device: k % 2 }), a.download());
          }
          jobs.push(rl.tokenStatsBackwardAsync(a, y, { logprob: g }, { out }));
          parentPort.postMessage(rl.cuda.memory(0).tensors + rl.cuda.memory(1).tensors);
          if (${JSON.stringify(how)} === 'exit') process.exit(3);
          if (${JSON.stringify(how)} === 'throw') throw new Error('boom');
          await Promise.all(jobs);
        });`;
      const main = `
        import { Worker } from 'node:worker_threads';
        const rl = await import(${JSON.stringify(DIST)});
        const usage = () => [0, 1].map((d) => { const m = rl.cuda.memory(d); return [m.tensors, m.poolUsedBytes]; });
        const x = { data: Float32Array.of(1, 2, 3, 4, 5, 6), rows: 2, vocab: 3 };
        const mine = rl.cuda.uploadSync(x, { device: 1 });
        const before = usage();
        const w = new Worker(${JSON.stringify(worker)}, { eval: true, stderr: true });
        let werr = '';
        w.stderr.on('data', (d) => { werr += d; });
        let during = -1;
        const code = await new Promise((resolve) => {
          w.on('message', (n) => { during = n; if (${JSON.stringify(how)} === 'terminate') w.terminate(); });
          w.on('error', (e) => { if (${JSON.stringify(how)} !== 'throw') console.error(String(e)); });
          w.on('exit', resolve);
        });
        // the worker's calls end after it is gone; its tensors go with them
        let after = usage();
        for (let i = 0; i < 100 && JSON.stringify(after) !== JSON.stringify(before); i++) {
          await new Promise((r) => setTimeout(r, 100));
          after = usage();
        }
        const lp = rl.tokenStats(mine, Int32Array.of(2, 0)).logprob;
        console.log(JSON.stringify({ variant: rl.backend().variant, code, during, before, after, lp: [...lp],
          host: [...rl.tokenStats(x, Int32Array.of(2, 0)).logprob], mine: [...mine.downloadSync()], werr: werr.slice(-800) }));`;
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('VITEST') &&
        !k.startsWith('GEAR_RL_')));
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', main], {
        cwd: ROOT, env: { ...env, GEAR_RL_VARIANT: 'host-device' }, encoding: 'utf8', timeout: 120_000,
      });
      expect(r.signal, `process killed by ${r.signal}: ${r.stderr.slice(-1500)}`).toBeNull();
      expect(r.status, r.stderr.slice(-1500)).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(out.variant).toBe('host-device');
      expect(out.code, out.werr).toBe(how === 'exit' ? 3 : 1);
      expect(out.during, out.werr).toBeGreaterThanOrEqual(4);  // the main thread's tensor and the worker's three
      expect(out.after).toEqual(out.before);
      expect(out.before[1][0]).toBe(1);
      expect(out.lp).toEqual(out.host);
      expect(out.mine).toEqual([1, 2, 3, 4, 5, 6]);
    });
  }
});
