#!/usr/bin/env node
// Cross-builds the CPU addon for win32-x64 with MinGW-w64 (Debian: g++-mingw-w64-x86-64-posix).
//
//   node scripts/build-win32.mjs [--out DIR] [--jobs N] [--prebuild]
//
// Compiles every `cpu` source of native/sources.mjs with the flags of binding.gyp, links
// DIR/gear_rl.node (a DLL) statically against libgcc/libstdc++/winpthreads so that it needs only
// system DLLs, and with --prebuild copies it to prebuilds/win32-x64/gear-rl.node, where node-gyp-build
// looks on win32-x64 (N-API, so one file serves every Node >= 20 on Windows).
//
// Node-API symbols come from node.exe through an import library made from node-api-headers' .def file.
// The import is delay-loaded and bound to the host executable at load time (as node-gyp's
// win_delay_load_hook does), so the addon also loads in a renamed node.exe or in Electron.
//
// Incremental: an object is rebuilt when the compiler, the flags, or the contents of its source or of
// any header it included changed (content hashes, not times, so a fresh copy of the tree reuses the
// objects). DIR defaults to build-win32/ or $GEAR_RL_WIN32_OUT; runs on one DIR are serialised by flock.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpu } from '../native/sources.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(ROOT, 'package.json'));

function usage(msg) {
  console.error(`build-win32: ${msg}\nusage: node scripts/build-win32.mjs [--out DIR] [--jobs N] [--prebuild]`);
  process.exit(2);
}

const args = process.argv.slice(2);
let out = process.env.GEAR_RL_WIN32_OUT || join(ROOT, 'build-win32');
let jobs = 2;
let prebuild = false;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--out') out = args[++i] ?? usage('--out needs a folder');
  else if (a === '--jobs' || a === '-j') {
    jobs = Number(args[++i]);
    if (!Number.isInteger(jobs) || jobs < 1) usage(`--jobs: expected an integer >= 1, got ${args[i]}`);
  } else if (a === '--prebuild') prebuild = true;
  else usage(`unknown argument ${a}`);
}
out = resolve(out);
mkdirSync(out, { recursive: true });

// One build of a folder at a time (the test suite and `npm pack` may run side by side).
if (process.env.GEAR_RL_WIN32_LOCKED !== out) {
  const r = spawnSync('flock', [join(out, '.lock'), process.execPath, fileURLToPath(import.meta.url), ...args],
    { stdio: 'inherit', env: { ...process.env, GEAR_RL_WIN32_LOCKED: out } });
  if (r.error) usage(`flock (util-linux) is needed: ${r.error.message}`);
  process.exit(r.status ?? 1);
}

const TRIPLE = 'x86_64-w64-mingw32';

/** Runs a tool and returns its stdout; throws with its output on failure. */
function tool(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 2 ** 20, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} exited ${r.status ?? r.signal}\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

function which(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim() || null;
}

// std::thread / std::mutex need the posix thread model (winpthreads); the win32 model lacks them in GCC 12.
function findCompiler() {
  for (const c of [`${TRIPLE}-g++-posix`, `${TRIPLE}-g++`]) {
    if (!which(c)) continue;
    const v = spawnSync(c, ['-v'], { encoding: 'utf8' }).stderr;
    if (/Thread model: posix/.test(v)) return { cxx: c, version: v.trim().split('\n').pop() };
  }
  throw new Error(`build-win32: expected a MinGW-w64 g++ with the posix thread model (${TRIPLE}-g++-posix), found none. ` +
    'On Debian/Ubuntu: apt-get install --no-install-recommends g++-mingw-w64-x86-64-posix');
}

const { cxx, version: cxxVersion } = findCompiler();
const dlltool = `${TRIPLE}-dlltool`;
const objdump = `${TRIPLE}-objdump`;
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const napiHeaders = require('node-api-headers');
const addonApiDir = require('node-addon-api').include_dir;
const rel = (p) => relative(ROOT, resolve(p)).split('\\').join('/');

// Every object is linked itself (no static library): the bindings register themselves from static
// initialisers that nothing else refers to (native/src/addon/ops.h). The list includes
// native/src/addon/win32_delay_load_hook.cc, which binds node.exe imports to the host (MinGW only).
const sources = cpu;
// Relative include paths make the dependency files relative to ROOT (see contentKey).
const includeDirs = [addonApiDir, napiHeaders.include_dir, join(ROOT, 'native/include')].map(rel);
// binding.gyp's defines and C++ flags; -fvisibility=hidden has no meaning for PE (exports are explicit).
const codeflags = [
  '-std=c++17', '-O3', '-fexceptions', '-fno-math-errno', '-ffp-contract=off',
  '-DNAPI_VERSION=8', '-DNAPI_CPP_EXCEPTIONS', '-DNODE_ADDON_API_DISABLE_DEPRECATED',
  `-DGEAR_RL_VERSION="${pkg.version}"`,
  // Win64 guarantees only 16-byte stack alignment and GCC has spilled 32/64-byte vectors there with
  // aligned moves (gcc.gnu.org/PR54412). GCC 12 emits unaligned spills in these sources; the assembler
  // option keeps it so for any aligned vector move (no cost on AVX hardware when the data is aligned).
  '-Wa,-muse-unaligned-vector-move',
];
const cxxflags = [...codeflags, ...includeDirs.map((d) => `-I${d}`)];
const ldflags = ['-shared', '-s', '-static', '-static-libgcc', '-static-libstdc++'];

const sha = (...parts) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
};
// The include paths are left out of the key: where a header was found does not matter, only its
// contents (a copy of the tree with node_modules linked elsewhere reuses the objects).
const flagsKey = sha(cxxVersion, cxx, ...codeflags);

/** Header/source paths (relative to ROOT) listed in a -MMD dependency file, the object itself excluded. */
function depsOf(dfile) {
  const text = readFileSync(dfile, 'utf8').replace(/\\\r?\n/g, ' ');
  const colon = text.indexOf(': ');
  return text.slice(colon + 2).split(/(?<!\\)\s+/).filter(Boolean).map((d) => d.replace(/\\ /g, ' '));
}

function contentKey(src, deps) {
  const parts = [flagsKey, src];
  for (const d of deps) {
    const p = resolve(ROOT, d);
    if (!existsSync(p)) return null;  // a header went away: rebuild
    parts.push(readFileSync(p));
  }
  return sha(...parts);
}

function objectPaths(src) {
  const base = join(out, 'obj', src.replace(/\.[^.]+$/, ''));
  return { obj: `${base}.o`, dep: `${base}.d`, key: `${base}.key` };
}

function upToDate(src) {
  const { obj, dep, key } = objectPaths(src);
  if (!existsSync(obj) || !existsSync(dep) || !existsSync(key)) return false;
  return contentKey(src, depsOf(dep)) === readFileSync(key, 'utf8');
}

function compile(src) {
  const { obj, dep, key } = objectPaths(src);
  mkdirSync(dirname(obj), { recursive: true });
  const argv = [...cxxflags, '-MMD', '-MF', dep, '-c', src, '-o', obj];
  return new Promise((done, fail) => {
    const p = spawn(cxx, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    p.stdout.on('data', (d) => (log += d));
    p.stderr.on('data', (d) => (log += d));
    p.on('error', fail);
    p.on('close', (code) => {
      if (code !== 0) return fail(new Error(`${cxx} ${argv.join(' ')}\n${log}`));
      if (log.trim()) process.stderr.write(log);
      writeFileSync(key, contentKey(src, depsOf(dep)));
      done();
    });
  });
}

async function compileAll(list) {
  let next = 0;
  const worker = async () => {
    while (next < list.length) {
      const src = list[next++];
      console.log(`[build-win32] ${src}`);
      await compile(src);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, list.length) }, worker));
}

// Delay-load import library for node.exe's Node-API exports.
function importLibrary() {
  const def = napiHeaders.def_paths.node_api_def;
  const lib = join(out, 'node-delay.a');
  const keyFile = `${lib}.key`;
  const key = sha(readFileSync(def), dlltool);
  if (existsSync(lib) && existsSync(keyFile) && readFileSync(keyFile, 'utf8') === key) return lib;
  tool(dlltool, ['-d', def, '-D', 'node.exe', '-y', lib]);
  writeFileSync(keyFile, key);
  return lib;
}

// System DLLs every supported Windows (8.1 / Server 2012 R2 and later, Node 20's floor) has.
const SYSTEM_DLLS = new Set(['kernel32.dll', 'msvcrt.dll', 'user32.dll', 'advapi32.dll', 'ws2_32.dll', 'bcrypt.dll']);

async function main() {
  for (const s of sources) if (!existsSync(join(ROOT, s))) throw new Error(`build-win32: source ${s} is missing`);
  const stale = sources.filter((s) => !upToDate(s));
  await compileAll(stale);

  const lib = importLibrary();
  const objs = sources.map((s) => objectPaths(s).obj);
  const target = join(out, 'gear_rl.node');
  const linkKey = sha(flagsKey, ...ldflags, ...sources.map((s) => readFileSync(objectPaths(s).key, 'utf8')), readFileSync(`${lib}.key`, 'utf8'));
  const linkKeyFile = `${target}.key`;
  if (!existsSync(target) || !existsSync(linkKeyFile) || readFileSync(linkKeyFile, 'utf8') !== linkKey) {
    console.log(`[build-win32] linking ${rel(target)}`);
    const tmp = `${target}.tmp`;
    tool(cxx, [...ldflags, '-o', tmp, ...objs, lib, '-ldelayimp']);
    renameSync(tmp, target);
    writeFileSync(linkKeyFile, linkKey);
  }

  // What the DLL needs at load time: system DLLs only. node.exe is bound by the delay-load helper (GNU
  // ld leaves the optional Delay Import Directory entry empty; the helper does not read it), so it must
  // not be a direct import, and its name must be in the image for the delay-load descriptor.
  const headers = tool(objdump, ['-p', target]);
  const needs = [...headers.matchAll(/DLL Name: (\S+)/g)].map((m) => m[1]);
  const extra = needs.filter((d) => !SYSTEM_DLLS.has(d.toLowerCase()));
  if (extra.length) throw new Error(`build-win32: ${rel(target)} imports non-system DLLs ${extra.join(', ')}`);
  if (!readFileSync(target).includes('node.exe\0')) throw new Error(`build-win32: no delay-load descriptor for node.exe in ${rel(target)}`);
  if (!/\]\s+napi_register_module_v1\b/.test(headers)) throw new Error(`build-win32: ${rel(target)} does not export napi_register_module_v1`);
  console.log(`[build-win32] ${rel(target)}: imports ${needs.join(', ')}; node.exe delay-loaded`);

  if (prebuild) {
    const dest = join(ROOT, 'prebuilds', 'win32-x64', `${pkg.name}.node`);
    mkdirSync(dirname(dest), { recursive: true });
    copyFileSync(target, dest);
    console.log(`[build-win32] ${rel(dest)}`);
  }
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
