// backend(), setNumThreads(), setIsa() and the environment variables read at load.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import * as rl from '../../ts/index.js';
import { native } from '../../ts/core/addon.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
// Under qemu-user /proc/cpuinfo shows the host's flags, not the emulated CPU's: an emulated run
// (test/platform/avx2_cpu.test.ts) passes the model's flags in GEAR_RL_TEST_CPU_FLAGS.
const cpuFlags = (process.env.GEAR_RL_TEST_CPU_FLAGS ?? readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '')
  .split(/\s+/).filter(Boolean);
const has = (...f: string[]) => f.every((x) => cpuFlags.includes(x));
// What the CPU supports, from /proc/cpuinfo (independent of the addon's own detection). Advanced SIMD
// is part of every aarch64 core (and qemu-user shows the host's cpuinfo), so arm64 needs no look-up.
const X86_BEST = has('avx512f', 'avx512bw', 'avx512vl', 'avx512dq', 'fma', 'f16c') ? 'avx512' : has('avx2', 'fma', 'f16c') ? 'avx2' : 'baseline';
const BEST = process.arch === 'arm64' ? 'neon' : X86_BEST;
// This architecture's ladder, lowest first.
const ORDER: readonly string[] = process.arch === 'arm64' ? ['baseline', 'neon'] : ['baseline', 'avx2', 'avx512'];

const initial = rl.backend();
afterAll(() => {
  rl.setNumThreads(initial.threads);
  rl.setIsa(initial.isa as 'baseline');
});

/** Runs the compiled package (dist/, built by `npm run build:ts` / pretest) in a child with `env`. */
function childBackend(env: Record<string, string>) {
  const dist = join(ROOT, 'dist', 'index.js');
  expect(existsSync(dist), 'dist/index.js (run npm run build:ts)').toBe(true);
  const code = `import(${JSON.stringify(pathToFileURL(dist).href)}).then((rl) => console.log(JSON.stringify(rl.backend())))`;
  const clean = { ...process.env };
  delete clean.GEAR_RL_ISA;
  delete clean.GEAR_RL_NUM_THREADS;
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...clean, ...env }, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as rl.BackendInfo;
}

describe('backend()', () => {
  it('reports the cpu variant, the version of package.json, an ISA, a thread count and no device', () => {
    const b = rl.backend();
    expect(Object.keys(b).sort()).toEqual(['devices', 'isa', 'isas', 'threads', 'variant', 'version']);
    expect(b.devices).toEqual([]);
    expect(b.isas).toEqual(ORDER.slice(0, ORDER.indexOf(BEST) + 1));
    expect(b.isas).toContain(b.isa);
    expect(b.variant).toBe('cpu');
    expect(b.version).toBe(PKG.version);
    expect(ORDER).toContain(b.isa);
    expect(Number.isInteger(b.threads) && b.threads >= 1).toBe(true);
  });

  it('the addon detects the same best ISA that /proc/cpuinfo shows', () => {
    expect(native.backend().detectedIsa).toBe(BEST);
  });

  it('defaults (no environment) to the best ISA and one thread per CPU', () => {
    const b = childBackend({});
    expect(b.isa).toBe(BEST);
    expect(b.threads).toBe(cpus().length);
    expect(b.version).toBe(PKG.version);
  });

  it('honours GEAR_RL_NUM_THREADS at load', () => {
    expect(childBackend({ GEAR_RL_NUM_THREADS: '3' }).threads).toBe(3);
    expect(childBackend({ GEAR_RL_NUM_THREADS: '1' }).threads).toBe(1);
  });

  it('honours GEAR_RL_ISA at load, never above what the CPU supports', () => {
    for (const isa of ORDER) {
      const want = ORDER.indexOf(isa) <= ORDER.indexOf(BEST) ? isa : BEST;
      expect(childBackend({ GEAR_RL_ISA: isa }).isa).toBe(want);
    }
    // an unknown value is ignored: the best ISA stays in effect
    expect(childBackend({ GEAR_RL_ISA: 'sse9' }).isa).toBe(BEST);
  });
});

describe('setNumThreads()', () => {
  it('changes the pool size reported by backend()', () => {
    for (const n of [1, 2, 3, 8]) {
      rl.setNumThreads(n);
      expect(rl.backend().threads).toBe(n);
    }
  });

  it('rejects non-integers, values below 1 and non-numbers with ERR_OPTION', () => {
    for (const bad of [0, -1, 1.5, NaN, Infinity, 1025, '2', null, undefined]) {
      let err: unknown;
      try {
        rl.setNumThreads(bad as number);
      } catch (e) {
        err = e;
      }
      expect(err, String(bad)).toBeInstanceOf(rl.GearError);
      expect((err as rl.GearError).code).toBe('ERR_OPTION');
      expect((err as Error).message).toMatch(/^threads: expected /);
    }
  });

  it('the native layer checks on its own', () => {
    for (const bad of [0, 2.5, 'x', undefined]) {
      expect(() => native.setNumThreads({ threads: bad as number })).toThrow(rl.GearError);
    }
  });
});

describe('setIsa()', () => {
  it('switches among the supported ISAs and returns the one in effect', () => {
    for (const isa of ORDER) {
      const want = ORDER.indexOf(isa) <= ORDER.indexOf(BEST) ? isa : BEST;
      expect(rl.setIsa(isa as rl.Isa)).toBe(want);
      expect(rl.backend().isa).toBe(want);
    }
  });

  it('rejects an instruction set of another architecture with ERR_OPTION and keeps the one in effect', () => {
    const before = rl.backend().isa;
    const foreign = process.arch === 'arm64' ? 'avx2' : 'neon';
    expect(() => rl.setIsa(foreign)).toThrow(/^isa: expected an instruction set of this architecture/);
    expect(rl.backend().isa).toBe(before);
  });

  it('rejects unknown names with ERR_OPTION, naming the accepted values', () => {
    for (const bad of ['AVX512', 'sse', '', 3, null]) {
      let err: unknown;
      try {
        rl.setIsa(bad as 'avx2');
      } catch (e) {
        err = e;
      }
      expect(err, String(bad)).toBeInstanceOf(rl.GearError);
      expect((err as rl.GearError).code).toBe('ERR_OPTION');
      expect((err as Error).message).toMatch(/^isa: expected /);
    }
  });
});

describe('memoryBandwidth()', () => {
  it('returns one sample per repetition with the median in range', () => {
    for (const mode of ['read', 'read2', 'copy', 'copyPlain'] as const) {
      const r = rl.memoryBandwidth({ mode, bytes: 8 * 2 ** 20, threads: 2, reps: 3 });
      expect(r.mode).toBe(mode);
      expect(r.samples).toHaveLength(3);
      for (const s of r.samples) expect(s).toBeGreaterThan(0);
      const sorted = [...r.samples].sort((a, b) => a - b);
      expect(r.gbs).toBe(sorted[1]);
      expect(r.maxGbs).toBe(sorted[2]);
      expect(r.bytes).toBe(8 * 2 ** 20);
      expect(r.threads).toBe(2);
    }
  });

  it('rounds the buffer down to whole 128-byte blocks per thread', () => {
    expect(rl.memoryBandwidth({ bytes: 1000, threads: 3, reps: 1 }).bytes).toBe(3 * 256);
  });

  it('rejects bad options with ERR_OPTION, in TypeScript and in the native layer', () => {
    const bad: object[] = [{ mode: 'write' }, { bytes: 0 }, { bytes: 1.5e6 + 0.5 }, { threads: 0 }, { reps: 0 },
      { reps: 1.5 }, { bytes: 100, threads: 1 }, { nope: 1 }];
    for (const o of bad) {
      expect(() => rl.memoryBandwidth(o), JSON.stringify(o)).toThrow(rl.GearError);
      try {
        rl.memoryBandwidth(o);
      } catch (e) {
        expect((e as rl.GearError).code).toBe('ERR_OPTION');
      }
    }
    for (const args of [[4, 1e6, 2, 1], [0, 10, 2, 1], [0, 1e6, 0, 1], [0, 1e6, 2, 0], [0, 'x', 2, 1], [0, 2 ** 41, 2, 1]]) {
      let err: unknown;
      try {
        const [mode, bytes, threads, reps] = args;
        native.memoryBandwidth({ mode, bytes, threads, reps } as never);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(args)).toBeInstanceOf(rl.GearError);
      expect((err as rl.GearError).code).toBe('ERR_OPTION');
    }
  });
});
