// The shipped package, as a user gets it: pack a copy of the source tree (prebuildify runs inside
// `npm pack`, so the working tree's build/ is never touched), install the tarball into empty folders
// and compute with it. Case 1: no compiler at all (CC/CXX = /bin/false), the prebuilt binary must load.
// Case 2: the same tarball with prebuilds/ removed builds from source through the install script.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { glibcFloorProblems, versionReport } from '../helpers/elf.js';
import { qemuNodeArgv } from '../../scripts/cross-build.mjs';
import { buildCudaModule, fatbinEntries } from '../helpers/cuda_build.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
const work = mkdtempSync(join(tmpdir(), 'gear-rl-pack-'));
// node-gyp must never try to download headers here (offline): use the system's Node headers.
// prepack's win32-x64 cross build reuses the objects of the tree's build-win32/ (content-keyed).
const baseEnv = { ...process.env, npm_config_nodedir: process.env.npm_config_nodedir ?? '/usr', npm_config_jobs: '2',
  GEAR_RL_WIN32_OUT: join(ROOT, 'build-win32') };
delete (baseEnv as Record<string, string | undefined>).NODE_OPTIONS;

function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = baseEnv): string {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}:\n${(r.stdout ?? '').slice(-3000)}\n${(r.stderr ?? '').slice(-3000)}`);
  }
  return r.stdout;
}

// Independent expectation for the import check: per-row sums of 1..7 over rows [0,3) [3,3) [3,7)
// with token 5 masked out, computed here in plain JS.
const VALUES = [1, 2, 3, 4, 5, 6, 7];
const OFFSETS = [0, 3, 3, 7];
const MASK = [1, 1, 1, 1, 1, 0, 1];
const EXPECTED = OFFSETS.slice(0, -1).map((o, r) => {
  let s = 0;
  for (let t = o; t < OFFSETS[r + 1]!; t++) if (MASK[t]) s += VALUES[t]!;
  return s;
});
// ...and log-softmax of the target and entropy of two logits rows, in float64 here.
const LOGITS = [[1, 2, 3], [0, -1, 0.5]];
const TARGETS = [2, 0];
const EXPECTED_LOGPROB = LOGITS.map((row, r) => row[TARGETS[r]!]! - Math.log(row.reduce((a, z) => a + Math.exp(z), 0)));
const EXPECTED_ENTROPY = LOGITS.map((row) => {
  const lse = Math.log(row.reduce((a, z) => a + Math.exp(z), 0));
  return -row.reduce((a, z) => a + Math.exp(z - lse) * (z - lse), 0);
});
const SCRIPT = `
import * as rl from 'gear-rl';
const out = rl.segmentReduce(new Float64Array(${JSON.stringify(VALUES)}), new Int32Array(${JSON.stringify(OFFSETS)}), 'sum', new Uint8Array(${JSON.stringify(MASK)}));
const ts = rl.tokenStats({ data: new Float32Array(${JSON.stringify(LOGITS.flat())}), rows: 2, vocab: 3 }, new Int32Array(${JSON.stringify(TARGETS)}));
console.log(JSON.stringify({ sums: Array.from(out), logprob: Array.from(ts.logprob), entropy: Array.from(ts.entropy), backend: rl.backend() }));
`;

// node: the command that runs Node (the arm64 one is started through qemu-user).
function importAndCompute(app: string, env: NodeJS.ProcessEnv = baseEnv, node: string[] = [process.execPath]) {
  const out = sh(node[0]!, [...node.slice(1), '--input-type=module', '-e', SCRIPT], app, env);
  const r = JSON.parse(out.trim().split('\n').pop()!) as {
    sums: number[]; logprob: number[]; entropy: number[]; backend: { variant: string; isa: string; version: string; threads: number };
  };
  r.logprob.forEach((x, i) => expect(Math.abs(x - EXPECTED_LOGPROB[i]!)).toBeLessThan(1e-6));
  r.entropy.forEach((x, i) => expect(Math.abs(x - EXPECTED_ENTROPY[i]!)).toBeLessThan(1e-6));
  expect(r.logprob).toHaveLength(2);
  expect(r.entropy).toHaveLength(2);
  return r;
}

function emptyApp(name: string): string {
  const dir = join(work, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `app-${name}`, private: true, version: '1.0.0' }));
  return dir;
}

let tarball = '';
let files: string[] = [];

beforeAll(() => {
  // Copy the tracked and not-ignored source files (the same set a clean clone plus local edits has).
  const src = join(work, 'src');
  const list = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && !/^(node_modules|build|build-[^/]*|dist|prebuilds|docs)\//.test(f) && existsSync(join(ROOT, f)));
  for (const f of list) {
    mkdirSync(dirname(join(src, f)), { recursive: true });
    cpSync(join(ROOT, f), join(src, f));
  }
  // The project's own dev dependencies (tsc, prebuildify, node-gyp) without a second registry install.
  symlinkSync(join(ROOT, 'node_modules'), join(src, 'node_modules'), 'dir');
  // prepack: tsc + prebuildify (node-gyp in this copy) -> prebuilds/linux-x64/gear-rl.glibc.node,
  // then scripts/build-win32.mjs --prebuild -> prebuilds/win32-x64/gear-rl.node, the arm64 cross build, and
  // the CUDA prebuild (the tests' shared build of the module, in the prebuild's configuration)
  sh('npm', ['pack', '--pack-destination', work], src, { ...baseEnv, GEAR_RL_CUDA_PREBUILT: buildCudaModule() });
  tarball = join(work, `${PKG.name}-${PKG.version}.tgz`);
  files = sh('tar', ['tzf', tarball], work).trim().split('\n');
}, 600_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships the N-API prebuild, the compiled JS and the sources for a fallback build, and nothing else', async () => {
    expect(existsSync(tarball)).toBe(true);
    expect(files).toContain('package/prebuilds/linux-x64/gear-rl.glibc.node');
    expect(files).toContain('package/prebuilds/win32-x64/gear-rl.node');  // loaded under Wine in test/platform/win32.test.ts
    expect(files).toContain('package/prebuilds/linux-arm64/gear-rl.glibc.node');  // cross-compiled, loaded under qemu below
    for (const f of ['package/package.json', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/binding.gyp',
      'package/CMakeLists.txt', 'package/native/sources.mjs', 'package/README.md']) expect(files).toContain(f);
    // the copy's list (the working tree may have changed since it was copied)
    const listed = await import(pathToFileURL(join(work, 'src', 'native/sources.mjs')).href) as { cpu: string[]; cuda: string[] };
    for (const s of [...listed.cpu, ...listed.cuda]) expect(files).toContain(`package/${s}`);
    expect(files.filter((f) => /^package\/(test|bench|node_modules|build|scripts)\//.test(f))).toEqual([]);
    // N-API tagged: no ABI-specific prebuild that would only load in one Node version.
    expect(files.filter((f) => f.startsWith('package/prebuilds/') && /\.abi\d+\./.test(f))).toEqual([]);
    expect(files).toContain('package/prebuilds/linux-x64/gear-rl.cuda.node');
  });

  it('the CUDA prebuild: sm_80/sm_90 code and PTX, the CPU prebuild\'s glibc floor, static runtimes; the tarball stays small', () => {
    const dir = join(work, 'cuda-prebuild');
    mkdirSync(dir);
    sh('tar', ['xzf', tarball, '-C', dir, 'package/prebuilds/linux-x64/gear-rl.cuda.node', 'package/prebuilds/linux-x64/gear-rl.glibc.node'], work);
    const cuda = join(dir, 'package/prebuilds/linux-x64/gear-rl.cuda.node');
    expect(glibcFloorProblems(cuda), versionReport(cuda).join('\n')).toEqual([]);
    expect(fatbinEntries(cuda)).toEqual(['ptx sm_90', 'sass sm_80', 'sass sm_90']);
    // sizes: the CUDA prebuild is the largest file; the whole tarball stays a small download
    const size = (f: string) => Number(sh('stat', ['-c', '%s', f], work).trim());
    expect(size(cuda)).toBeLessThan(8 * 2 ** 20);
    expect(size(tarball)).toBeLessThan(12 * 2 ** 20);
  });

  it('every linux glibc prebuild (linux-x64 at least) loads on glibc >= 2.28 with no libstdc++/libgcc_s', () => {
    const prebuilds = files.filter((f) => /^package\/prebuilds\/linux-[^/]+\/[^/]+\.glibc\.node$/.test(f));
    expect(prebuilds).toContain('package/prebuilds/linux-x64/gear-rl.glibc.node');
    const dir = join(work, 'floor');
    mkdirSync(dir);
    sh('tar', ['xzf', tarball, '-C', dir, ...prebuilds], work);
    for (const p of prebuilds) {
      expect(glibcFloorProblems(join(dir, p)), `${p}:\n${versionReport(join(dir, p)).join('\n')}`).toEqual([]);
    }
  });
});

describe('installed from the tarball', () => {
  it('the CUDA prebuild is not loaded without an NVIDIA driver; forced, it loads and says there is no device', () => {
    const app = emptyApp('cuda');
    sh('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', tarball], app);
    const probe = `import * as rl from 'gear-rl'; console.log(JSON.stringify({ variant: rl.backend().variant, why: rl.cuda.unavailableReason() }));`;
    const env = { ...baseEnv };
    for (const k of ['GEAR_RL_VARIANT', 'GEAR_RL_CUDA_ADDON', 'GEAR_RL_ADDON']) delete env[k];
    const auto = JSON.parse(sh(process.execPath, ['--input-type=module', '-e', probe], app, env).trim().split('\n').pop()!);
    expect(auto.variant).toBe('cpu');
    expect(auto.why).toMatch(existsSync('/dev/nvidiactl') || existsSync('/proc/driver/nvidia/version') ? /no CUDA device/ : /^no NVIDIA driver/);
    const forced = spawnSync(process.execPath, ['--input-type=module', '-e', `try { await import('gear-rl'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`],
      { cwd: app, env: { ...env, GEAR_RL_VARIANT: 'cuda' }, encoding: 'utf8' });
    const err = JSON.parse(forced.stdout.trim().split('\n').pop()!);
    expect(err.code).toBe('ERR_NATIVE');
    expect(err.message).toMatch(/^GEAR_RL_VARIANT=cuda: expected a CUDA module that loads and reports a device, got no CUDA device \(cudaError\w+/);
  });

  it('loads the prebuild with no compiler available (CC=CXX=/bin/false) and computes', () => {
    const app = emptyApp('prebuilt');
    const env = { ...baseEnv, CC: '/bin/false', CXX: '/bin/false' };
    sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], app, env);
    const installed = join(app, 'node_modules', PKG.name);
    expect(existsSync(join(installed, 'prebuilds/linux-x64/gear-rl.glibc.node'))).toBe(true);
    // nothing was compiled at install time: node-gyp-build found the prebuild
    expect(existsSync(join(installed, 'build'))).toBe(false);
    const r = importAndCompute(app, env);
    expect(r.sums).toEqual(EXPECTED);
    expect(r.backend.variant).toBe('cpu');
    expect(r.backend.version).toBe(PKG.version);
  }, 600_000);

  it('works with install scripts blocked (--ignore-scripts, as pnpm does by default)', () => {
    const app = emptyApp('noscripts');
    const env = { ...baseEnv, CC: '/bin/false', CXX: '/bin/false' };
    sh('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', tarball], app, env);
    expect(importAndCompute(app, env).sums).toEqual(EXPECTED);
  }, 600_000);

  it('linux-arm64: the arm64 Node under qemu-user loads the cross-compiled prebuild and computes', () => {
    const app = emptyApp('arm64');
    const env = { ...baseEnv, CC: '/bin/false', CXX: '/bin/false' };
    sh('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', tarball], app, env);
    expect(existsSync(join(app, 'node_modules', PKG.name, 'prebuilds/linux-arm64/gear-rl.glibc.node'))).toBe(true);
    const cleanEnv = { ...env };
    delete cleanEnv.GEAR_RL_ADDON;
    const r = importAndCompute(app, cleanEnv, qemuNodeArgv());
    expect(r.sums).toEqual(EXPECTED);
    expect(r.backend.isa).toBe('neon');
    expect(r.backend.version).toBe(PKG.version);
  }, 600_000);

  it('without a matching prebuild: a clear ERR_NATIVE first, then a build from source that computes', () => {
    // Repack the same tarball without prebuilds/ (tar, not npm pack, so prepack cannot add it back).
    const unpack = join(work, 'noprebuild');
    mkdirSync(unpack);
    sh('tar', ['xzf', tarball, '-C', unpack], work);
    rmSync(join(unpack, 'package', 'prebuilds'), { recursive: true, force: true });
    const noPrebuild = join(work, 'gear-rl-noprebuild.tgz');
    sh('tar', ['czf', noPrebuild, '-C', unpack, 'package'], work);

    const app = emptyApp('source');
    sh('npm', ['install', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', noPrebuild], app);
    const fail = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT], { cwd: app, env: baseEnv, encoding: 'utf8' });
    expect(fail.status).not.toBe(0);
    expect(fail.stderr).toContain('ERR_NATIVE');
    expect(fail.stderr).toContain('npm rebuild gear-rl');

    // The install script (node-gyp-build) builds from source when no prebuild matches.
    sh('npm', ['rebuild', PKG.name], app);
    const installed = join(app, 'node_modules', PKG.name);
    expect(readdirSync(join(installed, 'build', 'Release'))).toContain('gear_rl.node');
    const r = importAndCompute(app);
    expect(r.sums).toEqual(EXPECTED);
    expect(r.backend.version).toBe(PKG.version);
  }, 600_000);
});
