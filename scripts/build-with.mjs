#!/usr/bin/env node
// Builds the CPU addon with any C++ compiler, outside build/, with the flags of binding.gyp:
//
//   node scripts/build-with.mjs --cxx clang++ --out build-clang [--werror] [-j 2]
//   node scripts/build-with.mjs --cxx g++ --out build-gcc --werror
//   node scripts/build-with.mjs --cxx aarch64-linux-gnu-g++ --out build-arm64     (cross build)
//
// Sources, defines, include dirs, cflags/cflags_cc (with their "!" removals) and the Linux ldflags are
// read from binding.gyp itself (its `<!(...)` commands run here, its OS/target_arch conditions are
// evaluated for the compiler's target), so this build cannot drift from the shipped one. On top come the
// flags node-gyp adds on Linux (-fPIC -pthread -fno-rtti) and -Wall -Wextra (node-gyp adds
// -Wno-unused-parameter as well; this build does not). Incremental: an object is rebuilt when its source
// or a header it includes (-MMD) is newer, or when the flags changed. Linux targets only.
//
// Output: <out>/gear_rl.node, <out>/build.log (every compiler message) and one summary line on stdout:
//   [build-with] clang++ (Debian clang version 14.0.6) x86_64-pc-linux-gnu: 29 compiled, 0 up to date, 0 warnings, 41.2 s
// Exit status 1 on a compile or link error (with --werror, any warning is one).
import { execFileSync, execSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function usage(msg) {
  if (msg) console.error(`build-with: ${msg}`);
  console.error('usage: node scripts/build-with.mjs [--cxx <compiler>] [--out <dir>] [--werror] [-j <jobs>]');
  process.exit(2);
}

const opts = { cxx: process.env.CXX || 'g++', out: '', werror: false, jobs: 2 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
  if (a === '--cxx') opts.cxx = value();
  else if (a === '--out') opts.out = value();
  else if (a === '--werror') opts.werror = true;
  else if (a === '-j' || a === '--jobs') opts.jobs = Number(value());
  else if (a === '-h' || a === '--help') usage();
  else usage(`unknown argument ${a}`);
}
if (!Number.isInteger(opts.jobs) || opts.jobs < 1) usage('-j expects an integer >= 1');
const OUT = resolve(ROOT, opts.out || `build-${opts.cxx.split('/').pop()}`);

// ---- the compiler's target -------------------------------------------------------------------------
let triple;
let version;
try {
  triple = execFileSync(opts.cxx, ['-dumpmachine'], { encoding: 'utf8' }).trim();
  version = execFileSync(opts.cxx, ['--version'], { encoding: 'utf8' }).split('\n')[0].trim();
} catch (e) {
  console.error(`build-with: cannot run ${opts.cxx}: ${e.message}`);
  process.exit(1);
}
const os = /linux/.test(triple) ? 'linux' : /darwin|apple/.test(triple) ? 'mac' : /mingw|windows|msvc/.test(triple) ? 'win' : 'unknown';
if (os !== 'linux') {
  console.error(`build-with: ${opts.cxx} targets ${triple}; this script links Linux shared objects only (use node-gyp elsewhere)`);
  process.exit(1);
}
const arch = /^(x86_64|amd64)/.test(triple) ? 'x64' : /^(aarch64|arm64)/.test(triple) ? 'arm64'
  : /^i[3-6]86/.test(triple) ? 'ia32' : /^arm/.test(triple) ? 'arm' : triple.split('-')[0];

// ---- binding.gyp, evaluated --------------------------------------------------------------------------
const gypText = readFileSync(join(ROOT, 'binding.gyp'), 'utf8').split('\n').filter((l) => !/^\s*#/.test(l)).join('\n');
const target = JSON.parse(gypText).targets.find((t) => t.target_name === 'gear_rl');
if (!target) throw new Error('binding.gyp: no target gear_rl');

// gyp's commands see the compiler as node-gyp's make would: $CXX.
const cmdEnv = { ...process.env, CXX: opts.cxx };
function expand(s) {
  // `<!@(cmd)` gives a list (its output split on white space), `<!(cmd)` one string; run in the root.
  const run = (cmd) => execSync(cmd, { cwd: ROOT, encoding: 'utf8', env: cmdEnv }).trim();
  const list = /^<!@\((.*)\)$/s.exec(s);
  if (list) return run(list[1]).split(/\s+/).filter(Boolean);
  return [s.replace(/<!\(([^()]*(?:\([^()]*\)[^()]*)*)\)/g, (_, cmd) => run(cmd))];
}

function evalCondition(expr) {
  // gyp conditions are Python expressions over variables; OS and target_arch are the ones used here.
  const js = expr.replace(/\band\b/g, '&&').replace(/\bor\b/g, '||').replace(/\bnot\b/g, '!');
  return Function('OS', 'target_arch', `return (${js});`)(os, arch);
}

// Merges a gyp dict into `acc`: lists append, `key!` lists are removals applied at the end.
function merge(acc, dict) {
  for (const [k, v] of Object.entries(dict)) {
    if (k === 'conditions') {
      for (const [expr, then, otherwise] of v) {
        if (evalCondition(expr)) merge(acc, then);
        else if (otherwise) merge(acc, otherwise);
      }
    } else if (Array.isArray(v)) {
      acc[k] = [...(acc[k] ?? []), ...v.flatMap(expand)];
    } else {
      acc[k] = v;
    }
  }
  return acc;
}
const gyp = merge({}, target);
const without = (list, removed) => (list ?? []).filter((f) => !(removed ?? []).includes(f));

// ---- flags -------------------------------------------------------------------------------------------
const nodeDir = process.env.npm_config_nodedir || dirname(dirname(process.execPath));
const nodeInclude = [join(nodeDir, 'include', 'node'), join(nodeDir, 'src')].find((d) => existsSync(join(d, 'node_api.h')));
if (!nodeInclude) throw new Error(`build-with: node_api.h not found under ${nodeDir} (set npm_config_nodedir)`);

const nodeGypFlags = ['-fPIC', '-pthread', '-Wall', '-Wextra', '-fno-rtti'];
const cflags = [...without([...nodeGypFlags, ...(gyp.cflags ?? [])], gyp['cflags!']),
  ...without(gyp.cflags_cc, gyp['cflags_cc!'])];
if (opts.werror) cflags.push('-Werror');
const defines = ['NODE_GYP_MODULE_NAME=gear_rl', 'BUILDING_NODE_EXTENSION', '_FILE_OFFSET_BITS=64', '_LARGEFILE_SOURCE',
  ...(gyp.defines ?? [])].map((d) => `-D${d}`);
const includes = [nodeInclude, ...(gyp.include_dirs ?? []).map((d) => resolve(ROOT, d))].map((d) => `-I${d}`);
const compileFlags = [...cflags, ...defines, ...includes];
const linkFlags = ['-shared', '-pthread', ...(gyp.ldflags ?? [])];
const sources = gyp.sources.filter((s) => /\.(cc|cpp|cxx)$/.test(s));

// ---- incremental compile -----------------------------------------------------------------------------
mkdirSync(join(OUT, 'obj'), { recursive: true });
const stampFile = join(OUT, 'flags.json');
const stamp = JSON.stringify({ cxx: opts.cxx, version, compileFlags, linkFlags });
const flagsChanged = !existsSync(stampFile) || readFileSync(stampFile, 'utf8') !== stamp;
const mtime = (f) => { try { return statSync(f).mtimeMs; } catch { return Infinity; } };

function upToDate(obj, dep) {
  if (flagsChanged || !existsSync(obj) || !existsSync(dep)) return false;
  const t = statSync(obj).mtimeMs;
  // "obj: src hdr1 hdr2 \" ... (make syntax; paths here have no spaces)
  const deps = readFileSync(dep, 'utf8').replace(/\\\n/g, ' ').split(':').slice(1).join(':').trim().split(/\s+/);
  return deps.every((d) => mtime(resolve(ROOT, d)) <= t);
}

const jobs = sources.map((src) => {
  const base = join(OUT, 'obj', src.replace(/\.[^.]+$/, '').replace(/[\\/]/g, '__'));
  return { src, obj: `${base}.o`, dep: `${base}.d` };
});
const todo = jobs.filter((j) => !upToDate(j.obj, j.dep));
const log = [];
let warnings = 0;
let failed = false;
const t0 = Date.now();

function compile(job) {
  return new Promise((done) => {
    const args = [...compileFlags, '-MMD', '-MF', job.dep, '-c', job.src, '-o', job.obj];
    const p = spawn(opts.cxx, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    p.stdout.on('data', (d) => { text += d; });
    p.stderr.on('data', (d) => { text += d; });
    p.on('close', (code) => {
      // a warning, or one that -Werror turned into an error ("error: ... [-Werror=...]" / "[-Werror]")
      warnings += (text.match(/\bwarning:|\berror:.*\[-Werror[^\]]*\]/g) ?? []).length;
      if (text) { log.push(text); process.stderr.write(text); }
      if (code !== 0) failed = true;
      done();
    });
  });
}

const queue = [...todo];
await Promise.all(Array.from({ length: Math.min(opts.jobs, queue.length) }, async () => {
  while (queue.length && !failed) await compile(queue.shift());
}));

const node = join(OUT, 'gear_rl.node');
if (!failed) {
  try {
    const out = execFileSync(opts.cxx, [...linkFlags, '-o', node, ...jobs.map((j) => j.obj)],
      { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (out) log.push(out);
    writeFileSync(stampFile, stamp);
  } catch (e) {
    log.push(`${e.stdout ?? ''}${e.stderr ?? ''}`);
    process.stderr.write(`${e.stdout ?? ''}${e.stderr ?? ''}`);
    failed = true;
  }
}
writeFileSync(join(OUT, 'build.log'), log.join(''));
const secs = ((Date.now() - t0) / 1000).toFixed(1);
console.log(`[build-with] ${opts.cxx} (${version}) ${triple}: ${todo.length} compiled, ${jobs.length - todo.length} up to date, `
  + `${warnings} warnings, ${secs} s${failed ? ', FAILED' : ` -> ${relative(ROOT, node)}`}`);
process.exit(failed ? 1 : 0);
