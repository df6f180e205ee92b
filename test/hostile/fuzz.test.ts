// Property fuzzing of every export with hostile arguments (fast-check, fixed seed, time-bounded): each
// call must return, or throw / reject with a coded GearError; an …Async function must never throw
// synchronously. The calls run in a child process (fuzz_child.mjs), so a crash or a hang fails this test
// and names the export. `npm run test:fuzz` runs the same for longer (GEAR_RL_FUZZ_MS, GEAR_RL_FUZZ_SEED).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
// index.js and the module of each subpath of package.json's `exports`
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
const DIST = Object.keys(PKG.exports).filter((k) => k !== './package.json')
  .map((k) => pathToFileURL(join(ROOT, 'dist', `${k === '.' ? 'index' : k.slice(2)}.js`)).href).join(',');
const MS = Number(process.env.GEAR_RL_FUZZ_MS ?? 30_000);
const SEED = Number(process.env.GEAR_RL_FUZZ_SEED ?? 20261125);

interface Finding {
  export: string;
  args: string;
  error: string;
}

describe('fuzzing every export', () => {
  it(`every call returns or throws a coded GearError (seed ${SEED}, ${MS / 1000} s)`, () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'test', 'hostile', 'fuzz_child.mjs'), DIST, String(SEED), String(MS)], {
      cwd: ROOT, encoding: 'utf8', timeout: MS + 120_000, maxBuffer: 64 * 2 ** 20,
      env: { ...process.env, GEAR_RL_NUM_THREADS: '2' },
    });
    const last = r.stderr.trim().split('\n').filter((l) => l.startsWith('fuzz: ')).pop();
    expect(r.signal, `child killed by ${r.signal} (a crash or a hang) while calling ${last}: ${r.stderr.slice(-1500)}`).toBeNull();
    expect(r.status, r.stderr.slice(-1500)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { exports: number; calls: number; findings: Finding[] };
    expect(out.exports).toBeGreaterThan(80);
    expect(out.calls).toBeGreaterThan(out.exports * 20);
    expect(out.findings.map((f) => `${f.export}: ${f.error}\n    args ${f.args}`).join('\n')).toBe('');
  }, MS + 180_000);
});
