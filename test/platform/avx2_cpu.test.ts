// An x86-64 CPU without AVX-512 (AMD EPYC class: AVX2 + FMA + F16C), whatever CPU runs the suite: the
// same Node and the same addon run under qemu-user's `-cpu EPYC-Rome` model, whose CPUID reports AVX2,
// FMA and F16C and no AVX-512. The ISA-sensitive test files then run exactly as on such a machine: the
// addon must detect avx2, list [baseline, avx2], never select avx512, and every kernel must pass its
// float64 references on both paths (test/helpers/isa.ts enumerates them from backend().isas).
// Children that tests start (GEAR_RL_ISA at load, fresh processes) run under the same CPU model through
// test/platform/qemu_exec_path.mjs. /proc/cpuinfo shows the host's flags under qemu-user, so the
// emulated model's flags reach test/ops/backend.test.ts through GEAR_RL_TEST_CPU_FLAGS.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, run, type Run } from '../helpers/child.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const CPU = 'EPYC-Rome';
const QEMU = ['qemu-x86_64', '-cpu', CPU];
// The instruction-set flags of qemu's EPYC-Rome model that the library looks at.
const MODEL_FLAGS = 'sse4_2 avx avx2 fma f16c';
const FILES = [
  'test/ops/backend.test.ts',
  'test/ops/backend_parity.test.ts',
  'test/ops/kernels_isa_threads.test.ts',
  'test/ops/kernels_bad_input.test.ts',
  'test/ops/token_stats.test.ts',
  'test/ops/divergence.test.ts',
  'test/ops/segment.test.ts',
  'test/losses/policy_loss.native.test.ts',
  'test/optim/clip.test.ts',
  'test/gear/from_logits.test.ts',
  'test/gear/anchor_signal.test.ts',
];
const scratch = mkdtempSync(join(tmpdir(), 'gear-rl-avx2-cpu-'));


/** Environment of the emulated run: every Node it starts runs under the same CPU model. */
function emulatedEnv(): NodeJS.ProcessEnv {
  const script = join(scratch, 'qemu-node');
  writeFileSync(script, `#!/bin/sh\nexec ${[...QEMU, process.execPath].map((x) => `'${x}'`).join(' ')} "$@"\n`);
  chmodSync(script, 0o755);
  return {
    ...cleanEnv(),
    GEAR_RL_QEMU_NODE: script,
    GEAR_RL_TEST_CPU_FLAGS: MODEL_FLAGS,
    NODE_OPTIONS: `--import=${pathToFileURL(join(ROOT, 'test', 'platform', 'qemu_exec_path.mjs')).href}`,
  };
}

let suite: Run & { ms: number };
let report: { testResults: { name: string; status: string; assertionResults: { fullName: string; status: string; failureMessages: string[] }[] }[] };

beforeAll(() => {
  expect(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/index.js (npm run build:ts)').toBe(true);
  const json = join(scratch, 'report.json');
  const t0 = Date.now();
  suite = {
    ...run([...QEMU, process.execPath, join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...FILES,
      '--reporter=./test/helpers/summary-reporter.ts', '--reporter=json', `--outputFile.json=${json}`],
    emulatedEnv(), 1_500_000),
    ms: 0,
  };
  suite.ms = Date.now() - t0;
  if (existsSync(json)) report = JSON.parse(readFileSync(json, 'utf8'));
}, 1_800_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe(`an AVX2-only x86-64 CPU (qemu -cpu ${CPU})`, () => {
  it('the addon detects avx2 and offers baseline and avx2 only', () => {
    const code = `const rl = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist', 'index.js')).href)}); console.log(JSON.stringify(rl.backend()));`;
    const r = run([...QEMU, process.execPath, '--input-type=module', '-e', code], cleanEnv(), 120_000);
    expect(r.status, r.stderr).toBe(0);
    const b = JSON.parse(r.stdout.trim().split('\n').pop()!) as { isa: string; isas: string[] };
    expect(b.isa).toBe('avx2');
    expect(b.isas).toEqual(['baseline', 'avx2']);
  });

  it(`the ISA-sensitive test files pass there (${FILES.length} files)`, () => {
    const tail = `${suite.stdout.slice(-6000)}\n${suite.stderr.slice(-4000)}`;
    const summary = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/m.exec(suite.stdout);
    expect(summary, `no summary line (status ${suite.status}, signal ${suite.signal}):\n${tail}`).not.toBeNull();
    const failures = (report?.testResults ?? []).flatMap((f) =>
      f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${f.name}: ${a.fullName}\n${a.failureMessages.join('\n').slice(0, 1500)}`));
    expect(Number(summary![2]), `failed on the emulated CPU:\n${failures.join('\n\n') || tail}`).toBe(0);
    expect(suite.status, tail).toBe(0);
    expect(summary![3], 'no test may be skipped').toBeUndefined();
    const ran = report.testResults.map((f) => f.name.slice(ROOT.length + 1)).sort();
    expect(ran).toEqual([...FILES].sort());
    for (const f of report.testResults) expect(f.status, f.name).toBe('passed');
    // the emulated run enumerated baseline and avx2, and never avx512
    const names = report.testResults.flatMap((f) => f.assertionResults.map((a) => a.fullName));
    expect(names.some((n) => n.includes('GEAR_RL_ISA=avx2'))).toBe(true);
    expect(names.some((n) => /avx512/.test(n) && !/falls back/.test(n))).toBe(false);
    console.log(`[avx2 cpu] ${summary![0]} under qemu -cpu ${CPU} in ${(suite.ms / 1000).toFixed(0)} s`);
  });
});
