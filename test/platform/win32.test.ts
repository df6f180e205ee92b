// win32-x64: the MinGW-w64 cross build of the addon (scripts/build-win32.mjs, cached in build-win32/)
// run by the Windows Node 20 under Wine (scripts/wine-node.mjs, cached in .cache/win32/). The kernel
// suites run inside win32 Node against that DLL on every ISA this CPU has, and a packed tarball
// installed by npm loads its prebuilds/win32-x64 binary through node-gyp-build.
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error plain ESM script without type declarations
import { NODE_EXE, runNode, winPath } from '../../scripts/wine-node.mjs';

type WineResult = { status: number | null; signal: string | null; error?: Error; stdout: string; stderr: string };
const wineNode = runNode as (args: string[], opts?: { cwd?: string; env?: Record<string, string>; timeout?: number; exe?: string }) => WineResult;
const toWin = winPath as (p: string) => string;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
const BUILD = join(ROOT, 'build-win32');
const ADDON = join(BUILD, 'gear_rl.node');
/** dist/index.js as a file URL for node.exe (drive Z: is the Unix root under Wine). */
const DIST_WIN = `file:///${toWin(join(ROOT, 'dist', 'index.js')).replace(/\\/g, '/')}`;
const work = mkdtempSync(join(tmpdir(), 'gear-rl-win32-'));
const npmEnv = { ...process.env, npm_config_nodedir: process.env.npm_config_nodedir ?? '/usr' };
for (const k of ['GEAR_RL_ADDON', 'GEAR_RL_ISA', 'GEAR_RL_VARIANT', 'NODE_OPTIONS']) delete (npmEnv as Record<string, unknown>)[k];

function sh(cmd: string, args: string[], cwd = ROOT, env: NodeJS.ProcessEnv = npmEnv): string {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}:\n${(r.stdout ?? '').slice(-4000)}\n${(r.stderr ?? '').slice(-4000)}`);
  }
  return r.stdout;
}

/** Runs win32 node.exe under Wine and returns its last stdout line parsed as JSON. */
function wineJson(args: string[], opts: Parameters<typeof wineNode>[1] = {}) {
  const r = wineNode(args, { timeout: 300_000, ...opts });
  expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

const onPath = (c: string) => spawnSync('sh', ['-c', `command -v ${c}`]).status === 0;

beforeAll(() => {
  const missing = ['x86_64-w64-mingw32-g++-posix', 'x86_64-w64-mingw32-objdump', 'flock'].filter((c) => !onPath(c));
  if (!onPath('wine64') && !onPath('wine') && !existsSync('/usr/lib/wine/wine64')) missing.push('wine64');
  expect(missing, 'apt-get install --no-install-recommends g++-mingw-w64-x86-64-posix wine64 (pretest does this as root)').toEqual([]);
  expect(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/index.js (npm run build:ts)').toBe(true);
  sh(process.execPath, ['scripts/wine-node.mjs', 'setup']);  // node.exe + Wine prefix, cached, serialised
  sh(process.execPath, ['scripts/build-win32.mjs']);         // incremental, serialised
}, 1_200_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('win32-x64 addon built with MinGW-w64', () => {
  it('is an x86-64 PE DLL that exports the Node-API entry and needs only system DLLs', () => {
    expect(sh('x86_64-w64-mingw32-objdump', ['-f', ADDON])).toContain('file format pei-x86-64');
    const headers = sh('x86_64-w64-mingw32-objdump', ['-p', ADDON]);
    expect(headers).toMatch(/\]\s+napi_register_module_v1\b/);
    // libstdc++, libgcc and winpthreads are linked in; node.exe comes through the delay-load table
    const dlls = [...headers.matchAll(/DLL Name: (\S+)/g)].map((m) => m[1]!.toLowerCase()).sort();
    expect(dlls).toEqual(['kernel32.dll', 'msvcrt.dll']);
  });

  it('loads in win32 Node under Wine and detects the same ISAs as the Linux addon', () => {
    const probe = `const rl = await import(${JSON.stringify(DIST_WIN)});
      console.log(JSON.stringify({ platform: process.platform, arch: process.arch, backend: rl.backend() }));`;
    const win = wineJson(['--input-type=module', '-e', probe], { env: { GEAR_RL_ADDON: toWin(ADDON) } });
    const linuxProbe = `const rl = await import(${JSON.stringify('file://' + join(ROOT, 'dist', 'index.js'))});
      console.log(JSON.stringify(rl.backend()));`;
    const linux = JSON.parse(sh(process.execPath, ['--input-type=module', '-e', linuxProbe]).trim().split('\n').pop()!);
    expect(win.platform).toBe('win32');
    expect(win.arch).toBe('x64');
    expect(win.backend.variant).toBe('cpu');
    expect(win.backend.version).toBe(PKG.version);
    expect(win.backend.detectedIsa).toBe(linux.detectedIsa);
    expect(win.backend.isas).toEqual(linux.isas);
    expect(win.backend.threads).toBeGreaterThanOrEqual(1);
  });

  it('loads in a host executable not named node.exe (the delay-load hook binds the host)', () => {
    const dir = join(BUILD, 'renamed-host');
    mkdirSync(dir, { recursive: true });
    const exe = join(dir, 'gear-host.exe');
    if (!existsSync(exe)) {
      try { linkSync(NODE_EXE, exe); } catch { copyFileSync(NODE_EXE, exe); }
    }
    const code = `const rl = await import(${JSON.stringify(DIST_WIN)});
      console.log(JSON.stringify({ exe: process.execPath, sums: Array.from(rl.segmentReduce(new Float64Array([1, 2, 3]), new Int32Array([0, 1, 3]), 'sum')) }));`;
    const r = wineJson(['--input-type=module', '-e', code], { exe, env: { GEAR_RL_ADDON: toWin(ADDON) } });
    expect(r.exe).toMatch(/\\gear-host\.exe$/);
    expect(r.sums).toEqual([1, 5]);
  });

  /** Runs vitest on `files` in win32 Node: its summary counts, the failing files and vitest's error report. */
  function winSuite(files: string[], excludes: string[]) {
    const r = wineNode(['node_modules/vitest/vitest.mjs', 'run', ...files, ...excludes.flatMap((f) => ['--exclude', f])],
      { cwd: ROOT, env: { GEAR_RL_ADDON: toWin(ADDON) }, timeout: 1_200_000 });
    const plain = (x: string) => x.replace(/\x1b\[[0-9;]*m/g, '');
    const out = plain(r.stdout), err = plain(r.stderr);
    const summary = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/m.exec(out);
    expect(summary, `no summary line:\n${out.slice(-4000)}\n${err.slice(-4000)}`).not.toBeNull();
    // the failing tests' names, then vitest's own error report (on stderr: assertion messages carry what
    // children printed)
    const report = err.indexOf('Failed Tests');
    const failures = out.split('\n').filter((l) => /FAIL|×/.test(l)).slice(0, 40).join('\n')
      + (report >= 0 ? `\n${err.slice(report, report + 8000)}` : `\n${err.slice(-4000)}`);
    const failed = [...new Set([...out.matchAll(/❯ (test\/\S+\.test\.ts) \(.*failed/g)].map((m) => m[1]!))];
    return { r, summary: summary!, failures, failed };
  }

  it('passes the kernel suites (ops, losses, optim, gear) in win32 Node on every ISA', () => {
    const t0 = Date.now();
    // the visualiser's page tests drive Linux Chromium, not the addon; exp_accuracy compiles a C++ driver
    // of the kernel headers with the host's g++ (no compiler inside Wine): it checks the kernel code, not
    // a binary, and the DLL's kernels are what the other suites here check. The sanitizer drivers of
    // test/native are not in these directories for the same reason.
    const excludes = ['test/gear/visualize.test.ts', 'test/gear/report_page.test.ts', 'test/ops/exp_accuracy.test.ts'];
    const all = winSuite(['test/ops', 'test/losses', 'test/optim', 'test/gear'], excludes);
    expect(all.summary[3], 'skipped tests under win32').toBeUndefined();
    expect(Number(all.summary[1])).toBeGreaterThan(100);
    let run = all;
    if (Number(run.summary[2]) > 0 && run.failed.length > 0 && run.failed.length <= 2) {
      // Wine itself, on a loaded machine, once ended a child node.exe with status 1 and no output: a file
      // that failed runs once more, and the test fails only when it fails again (the first report is kept
      // in the log either way).
      console.log(`[win32] failed once under Wine, running ${run.failed.join(', ')} again:\n${run.failures}`);
      run = winSuite(run.failed, excludes);
    }
    expect(Number(run.summary[2]), run.failures).toBe(0);
    expect(run.summary[3], 'skipped tests under win32').toBeUndefined();
    expect(run.r.status).toBe(0);
    console.log(`[win32] ${all.summary[0]} under Wine${run === all ? '' : ` (${run.failed.length || all.failed.length} file(s) passed when run again: ${run.summary[0]})`} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }, 2_400_000);
});

describe('win32-x64 prebuild in the packed package', () => {
  // log-softmax of the target and entropy of two logits rows, in float64 here
  const LOGITS = [[1, 2, 3], [0, -1, 0.5]];
  const TARGETS = [2, 0];
  const lse = (row: number[]) => Math.log(row.reduce((a, z) => a + Math.exp(z), 0));
  const LOGPROB = LOGITS.map((row, r) => row[TARGETS[r]!]! - lse(row));
  const ENTROPY = LOGITS.map((row) => -row.reduce((a, z) => a + Math.exp(z - lse(row)) * (z - lse(row)), 0));

  it('npm-installed from the tarball (scripts blocked), win32 Node imports it through node-gyp-build and computes', () => {
    // A copy of the tree (tracked and not-ignored files) with the compiled JS, prebuilt by the same
    // command prepack runs (objects reused from build-win32/), packed without running prepack again.
    const src = join(work, 'src');
    const list = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
      .split('\0').filter((f) => f && !/^(node_modules|build|build-[^/]*|dist|prebuilds|docs)\//.test(f) && existsSync(join(ROOT, f)));
    for (const f of list) {
      mkdirSync(dirname(join(src, f)), { recursive: true });
      cpSync(join(ROOT, f), join(src, f));
    }
    symlinkSync(join(ROOT, 'node_modules'), join(src, 'node_modules'), 'dir');
    cpSync(join(ROOT, 'dist'), join(src, 'dist'), { recursive: true });
    sh(process.execPath, ['scripts/build-win32.mjs', '--prebuild'], src, { ...npmEnv, GEAR_RL_WIN32_OUT: BUILD });
    sh('npm', ['pack', '--ignore-scripts', '--pack-destination', work], src);
    const tarball = join(work, `${PKG.name}-${PKG.version}.tgz`);
    expect(sh('tar', ['tzf', tarball], work).split('\n')).toContain('package/prebuilds/win32-x64/gear-rl.node');

    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, version: '1.0.0' }));
    sh('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', tarball], app);
    const script = `
      import { createRequire } from 'node:module';
      import * as rl from 'gear-rl';
      const require = createRequire(import.meta.url);
      const dir = require.resolve('gear-rl/package.json').replace(/package\\.json$/, '');
      const ts = rl.tokenStats({ data: new Float32Array(${JSON.stringify(LOGITS.flat())}), rows: 2, vocab: 3 }, new Int32Array(${JSON.stringify(TARGETS)}));
      console.log(JSON.stringify({ file: require('node-gyp-build').path(dir), backend: rl.backend(),
        logprob: Array.from(ts.logprob), entropy: Array.from(ts.entropy) }));`;
    const r = wineJson(['--input-type=module', '-e', script], { cwd: app });
    expect(r.file).toMatch(/\\node_modules\\gear-rl\\prebuilds\\win32-x64\\gear-rl\.node$/);
    expect(r.backend.variant).toBe('cpu');
    expect(r.backend.version).toBe(PKG.version);
    (r.logprob as number[]).forEach((x, i) => expect(Math.abs(x - LOGPROB[i]!)).toBeLessThan(1e-6));
    (r.entropy as number[]).forEach((x, i) => expect(Math.abs(x - ENTROPY[i]!)).toBeLessThan(1e-6));
    expect(r.logprob).toHaveLength(2);
  }, 600_000);
});
