// The addon built with clang (Debian's clang++) and, as the reference, with g++, both through
// scripts/build-with.mjs — binding.gyp's sources and flags plus -Wall -Wextra -Werror — cached under
// build-clang/test and build-clang/test-gxx (incremental; serialised with a flock). Both build with no
// warning; under clang every function of a per-ISA region carries that ISA's target features (and none
// leaks into code other files may share); the clang build loads with every symbol resolved and, on every
// ISA this CPU has, computes bit-identical results to the g++ build (-ffp-contract=off and explicit
// intrinsics leave the compilers no choice in the arithmetic).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { glibcFloorProblems } from '../helpers/elf.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const onPath = (cmd: string) => (process.env.PATH ?? '').split(delimiter).map((d) => join(d, cmd)).find((p) => existsSync(p));
const clang = onPath('clang++');
const gxx = onPath('g++');
const X86 = process.arch === 'x64';
const SOURCES = (await import(pathToFileURL(join(ROOT, 'native/sources.mjs')).href) as { cpu: string[] }).cpu;
const DIST = pathToFileURL(join(ROOT, 'dist', 'index.js')).href;

function run(cmd: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}) {
  return spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 256 * 2 ** 20, ...opts });
}

interface Build { out: string; module: string; summary: string; compileFlags: string[] }
const builds: Record<'clang' | 'gxx', Build> = {
  clang: { out: join(ROOT, 'build-clang', 'test'), module: '', summary: '', compileFlags: [] },
  gxx: { out: join(ROOT, 'build-clang', 'test-gxx'), module: '', summary: '', compileFlags: [] },
};

beforeAll(() => {
  expect(clang, 'clang++ on PATH (scripts/pretest.mjs installs Debian\'s clang when run as root)').toBeDefined();
  expect(gxx, 'g++ on PATH').toBeDefined();
  expect(existsSync(join(ROOT, 'dist', 'index.js')), 'dist/index.js (npm run build:ts)').toBe(true);
  for (const [name, cxx] of [['clang', clang!], ['gxx', gxx!]] as const) {
    const b = builds[name];
    // -Werror is part of the flags stamp: an object cached from an earlier run was compiled warning-free.
    const r = run('flock', [join(tmpdir(), 'gear-rl-clang-build.lock'), process.execPath, 'scripts/build-with.mjs',
      '--cxx', cxx, '--out', b.out, '--werror', '-j', '2']);
    if (r.status !== 0) throw new Error(`${name} build failed:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-8000)}`);
    b.summary = r.stdout.trim().split('\n').pop()!;
    b.module = join(b.out, 'gear_rl.node');
    b.compileFlags = (JSON.parse(readFileSync(join(b.out, 'flags.json'), 'utf8')) as { compileFlags: string[] }).compileFlags;
  }
}, 900_000);

describe('clang and g++ builds', () => {
  for (const [name, compiler] of [['clang', /clang version/], ['gxx', /GCC: /]] as const) {
    it(`${name}: every source of native/sources.mjs with -Wall -Wextra -Werror, no warning, links gear_rl.node`, () => {
      const b = builds[name];
      expect(b.summary).toMatch(/^\[build-with\] .*: \d+ compiled, \d+ up to date, 0 warnings, [\d.]+ s -> /);
      const [, compiled, cached] = /: (\d+) compiled, (\d+) up to date/.exec(b.summary)!;
      expect(Number(compiled) + Number(cached)).toBe(SOURCES.length);
      for (const f of ['-Wall', '-Wextra', '-Werror', '-ffp-contract=off', '-fno-math-errno']) expect(b.compileFlags).toContain(f);
      expect(readFileSync(join(b.out, 'build.log'), 'utf8')).not.toMatch(/warning:|error:/);
      // the binary is that compiler's (.comment names the compiler of every object; clang's crt files are GCC's)
      const comment = run('readelf', ['-p', '.comment', b.module]).stdout;
      expect(comment).toMatch(compiler);
      if (name === 'gxx') expect(comment).not.toMatch(/clang version/);
    });

    it(`${name}: linked for glibc >= 2.28 with no GLIBCXX and no libstdc++/libgcc_s`, () => {
      expect(glibcFloorProblems(builds[name].module)).toEqual([]);
    });
  }
});

// ---- target features, read from clang's IR ------------------------------------------------------------
// Each per-ISA region (GEAR_TARGET_BEGIN ... END) puts its functions in a namespace named after the ISA.
// Rules checked on every function clang emits (-O0: nothing inlined away, lambdas included):
//  * a function in an `avx2` / `avx512` namespace has all of that ISA's features (gear/isa_target.h);
//  * a function the linker may merge across files (linkonce/weak) outside those namespaces has none of
//    them: otherwise the linker could keep that copy for a baseline caller and crash an older CPU.
const header = readFileSync(join(ROOT, 'native/include/gear/isa_target.h'), 'utf8');
const FEATURES: Record<string, string[]> = {};
for (const m of header.matchAll(/#define\s+GEAR_(\w+)_FEATURES\s+"([^"]+)"/g)) FEATURES[m[1]!.toLowerCase()] = m[2]!.split(',');
const ALL_ISA_FEATURES = [...new Set(Object.values(FEATURES).flat())];

interface IrFunction { name: string; linkage: string; features: string[] }

function irFunctions(args: string[]): IrFunction[] {
  const r = run(clang!, [...builds.clang.compileFlags.filter((f) => f !== '-Werror'), '-O0', '-S', '-emit-llvm', '-o', '-', ...args]);
  if (r.status !== 0) throw new Error(`clang -emit-llvm ${args.join(' ')}:\n${r.stderr.slice(-4000)}`);
  const groups = new Map<string, string[]>();
  for (const m of r.stdout.matchAll(/^attributes #(\d+) = \{(.*)\}$/gm)) {
    groups.set(m[1]!, (/"target-features"="([^"]*)"/.exec(m[2]!)?.[1] ?? '').split(',').filter(Boolean));
  }
  const defs = [...r.stdout.matchAll(/^define ([^@]*)@("[^"]+"|[^\s(]+)\((.*)$/gm)].map((m) => {
    const ids = [...m[3]!.matchAll(/#(\d+)/g)];
    return { mangled: m[2]!.replace(/^"|"$/g, ''), linkage: m[1]!.trim(), group: ids.length ? ids[ids.length - 1]![1]! : '' };
  });
  const names = execFileSync('c++filt', [], { input: defs.map((d) => d.mangled).join('\n'), encoding: 'utf8' }).split('\n');
  return defs.map((d, i) => ({ name: names[i]!, linkage: d.linkage, features: groups.get(d.group) ?? [] }));
}

function isaOf(fn: IrFunction): string | null {
  for (const isa of Object.keys(FEATURES)) if (new RegExp(`(^|::)${isa}::`).test(fn.name)) return isa;
  return null;
}

function featureProblems(fns: IrFunction[]): string[] {
  const out: string[] = [];
  for (const fn of fns) {
    const isa = isaOf(fn);
    if (isa) {
      const missing = FEATURES[isa]!.filter((f) => !fn.features.includes(`+${f}`));
      if (missing.length) out.push(`${fn.name}: lacks ${missing.join(',')}`);
    } else if (/linkonce|weak/.test(fn.linkage)) {
      const leaked = ALL_ISA_FEATURES.filter((f) => fn.features.includes(`+${f}`));
      if (leaked.length) out.push(`${fn.name} (${fn.linkage}): has ${leaked.join(',')}`);
    }
  }
  return out;
}

describe.runIf(X86)('per-ISA regions under clang (x86-64)', () => {
  // files with ISA regions: the op drivers that compile their kernels through isa_kernels.inc, and any
  // with a region of its own (dispatch.cc's Windows-only "xsave" region holds no kernels)
  const regionFiles = SOURCES.filter((s) => {
    const text = readFileSync(join(ROOT, s), 'utf8');
    return /^#include "isa_kernels\.inc"/m.test(text) || /^\s*GEAR_TARGET_BEGIN\(GEAR_\w+_FEATURES\)/m.test(text);
  });

  it('every function of every region has its ISA\'s features, lambdas included; no shared function has any', () => {
    expect(Object.keys(FEATURES).sort()).toEqual(['avx2', 'avx512']);
    expect(regionFiles.length).toBeGreaterThanOrEqual(6);
    let lambdas = 0;
    for (const src of regionFiles) {
      const fns = irFunctions([src]);
      expect(fns.filter((f) => isaOf(f) !== null).length, `${src}: functions in an ISA namespace`).toBeGreaterThan(0);
      lambdas += fns.filter((f) => isaOf(f) && f.name.includes('lambda')).length;
      expect(featureProblems(fns), src).toEqual([]);
    }
    // the kernels do use lambdas inside regions: clang's `#pragma clang attribute` reaches them
    expect(lambdas).toBeGreaterThan(0);
  });

  it('the check itself catches a region function outside an ISA namespace and an ISA function outside a region', () => {
    const probe = join(ROOT, 'test', 'platform', 'fixtures', 'isa_leak_probe.cc');
    const problems = featureProblems(irFunctions(['-I', join(ROOT, 'native/include'), probe]));
    expect(problems.some((p) => p.startsWith('gear::shared_helper(float)') && p.includes('has avx2'))).toBe(true);
    expect(problems.some((p) => p.startsWith('gear::avx2::outside_region(float)') && p.includes('lacks avx2,fma,f16c'))).toBe(true);
    expect(problems.filter((p) => p.includes('inside_region'))).toEqual([]);
  });
});

// ---- same results as the g++ build ---------------------------------------------------------------------
// A child per addon runs a fixed set of ops on every ISA and prints a SHA-256 of each result's bytes.
const PROBE = `
import { createHash } from 'node:crypto';
const rl = await import(${JSON.stringify(DIST)});
let s = 0x9e3779b9;
const rnd = () => { s = (s + 0x6d2b79f5) | 0; let t = Math.imul(s ^ (s >>> 15), 1 | s); t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t; return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
const digest = (x) => {
  const h = createHash('sha256');
  const walk = (v) => {
    if (ArrayBuffer.isView(v)) h.update(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    else if (typeof v === 'number') h.update(String(Object.is(v, -0) ? '-0' : v));
    else if (v && typeof v === 'object') for (const k of Object.keys(v).sort()) { h.update(k); walk(v[k]); }
  };
  walk(x);
  return h.digest('hex');
};
const rows = 37, vocab = 2053;  // odd vocab: vector tails on every ISA
const z32 = Float32Array.from({ length: rows * vocab }, (_, i) => (i % 97 === 0 ? -Infinity : (rnd() * 2 - 1) * 9));
const t32 = Float32Array.from({ length: rows * vocab }, (_, i) => (i % 97 === 0 ? -Infinity : (rnd() * 2 - 1) * 7));  // same support
const bf = (a) => { const u = new Uint32Array(Float32Array.from(a).buffer); return Uint16Array.from(u, (x) => x >>> 16); };
const f16 = (a) => { const t = Float32Array.from(a, (x) => (x === -Infinity ? -60000 : x)); return Uint16Array.from(t, (x) => {
  const b = new DataView(new ArrayBuffer(4)); b.setFloat32(0, x); const u = b.getUint32(0);
  const sign = (u >>> 16) & 0x8000, e = ((u >>> 23) & 0xff) - 127 + 15, m = (u >>> 13) & 0x3ff;
  return e <= 0 ? sign : e >= 31 ? sign | 0x7bff : sign | (e << 10) | m; }); };
const targets = Int32Array.from({ length: rows }, (_, r) => (r * 131 + 7) % vocab);
const gl = Float32Array.from({ length: rows }, (_, r) => Math.sin(r + 1));
const ge = Float32Array.from({ length: rows }, (_, r) => Math.cos(r));
const n = 50_000, nr = 700;
const offsets = Int32Array.from({ length: nr + 1 }, (_, r) => Math.round((r * n) / nr));
const lp = Float32Array.from({ length: n }, () => -rnd() * 4), old = Float32Array.from(lp, (x) => x + (rnd() - 0.5) * 0.6);
const adv = Float32Array.from({ length: n }, () => (rnd() - 0.5) * 3), mask = Uint8Array.from({ length: n }, () => (rnd() < 0.9 ? 1 : 0));
const big = 9_000_000, bigOff = Int32Array.from([0, 1, 4_000_003, big]), bigOut = new Float32Array(big);
const out = {};
for (const isa of rl.backend().isas) {
  rl.setIsa(isa);
  const r = {};
  for (const [name, dtype, conv] of [['f32', 'float32', (a) => a], ['bf16', 'bfloat16', bf], ['f16', 'float16', f16]]) {
    const S = { data: conv(z32), rows, vocab, dtype }, T = { data: conv(t32), rows, vocab, dtype };
    const stats = rl.tokenStats(S, targets, { temperature: 0.8 });
    r[name + '.tokenStats'] = stats;
    r[name + '.tokenStatsBackward'] = rl.tokenStatsBackward(S, targets, { logprob: gl, entropy: ge }, { temperature: 0.8 });
    for (const kind of ['reverse_kl', 'forward_kl', 'jsd']) {
      r[name + '.divergence.' + kind] = rl.divergence(S, T, { kind, beta: 0.4, targets });
      r[name + '.divergenceBackward.' + kind] = rl.divergenceBackward(S, T, gl, { kind, beta: 0.4 });
    }
  }
  r.policyLoss = rl.policyLoss({ logprob: lp, oldLogprob: old, advantages: adv, offsets, mask, clipHigh: 0.28 });
  r.segmentReduce = ['sum', 'mean', 'max', 'min'].map((op) => rl.segmentReduce(adv, offsets, op, mask));
  r.segmentBroadcast = rl.segmentBroadcast([1.5, -2.25, 3.125], bigOff, undefined, { out: bigOut });  // streaming path
  const params = [Float32Array.from({ length: 4099 }, () => rnd() - 0.5), Float32Array.from({ length: 33 }, () => rnd())];
  const grads = params.map((p) => Float32Array.from(p, () => (rnd() - 0.5) * 0.1));
  const opt = new rl.AdamW(params, { lr: 1e-3, weightDecay: 0.01 });
  for (let k = 0; k < 3; k++) opt.step(grads);
  const sgd = new rl.SGD(params, { lr: 0.05, momentum: 0.9, nesterov: true, weightDecay: 1e-4 });
  for (let k = 0; k < 3; k++) sgd.step(grads);
  r.optimizers = params;
  out[isa] = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, digest(v)]));
}
console.log(JSON.stringify({ isas: rl.backend().isas, digests: out, lse0: rl.tokenStats({ data: z32, rows, vocab }, targets).logsumexp[0] }));`;

function probe(addon: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, GEAR_RL_ADDON: addon };
  for (const k of ['GEAR_RL_ISA', 'GEAR_RL_VARIANT', 'GEAR_RL_CUDA_ADDON']) delete env[k];
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', PROBE], { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as { isas: string[]; digests: Record<string, Record<string, string>>; lse0: number };
}

describe('clang build computes what the g++ build computes', () => {
  it('loads with every symbol resolved (RTLD_NOW) and reports the ISAs of this CPU', () => {
    const code = `
      import { constants } from 'node:os';
      const m = { exports: {} };
      process.dlopen(m, ${JSON.stringify(builds.clang.module)}, constants.dlopen.RTLD_NOW);
      console.log(JSON.stringify(m.exports.backend()));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const b = JSON.parse(r.stdout.trim().split('\n').pop()!) as { isas: string[]; variant: string };
    expect(b.variant).toBe('cpu');
    expect(b.isas[0]).toBe('baseline');
  });

  it('bit-identical results on every ISA of this CPU (logits ops in 3 dtypes, policyLoss, segments, optimizers)', () => {
    const ref = probe(builds.gxx.module);
    const got = probe(builds.clang.module);
    expect(got.isas).toEqual(ref.isas);
    expect(Number.isFinite(ref.lse0)).toBe(true);
    for (const isa of ref.isas) {
      expect(Object.keys(got.digests[isa]!).length).toBe(3 * 8 + 4);  // 8 logits ops per dtype, 4 others
      const differ = Object.keys(ref.digests[isa]!).filter((k) => got.digests[isa]![k] !== ref.digests[isa]![k]);
      expect(differ, `${isa}: ops whose clang results differ from g++'s`).toEqual([]);
    }
  });
});
