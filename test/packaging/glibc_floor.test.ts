// The Linux binary's needs at load: glibc symbol versions no newer than 2.28 (RHEL 8, Debian 10), no
// GLIBCXX / CXXABI / GCC version (libstdc++ and libgcc linked in statically), and only the C library's
// own files in DT_NEEDED. Checked on the suite's addon (the shipped prebuild is checked in pack.test.ts),
// and on a small library linked with the same flags, which also shows what the check rejects.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { elfLoadNeeds, glibcFloorProblems, versionAbove, versionNumbers, versionReport } from '../helpers/elf.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const LINUX = process.platform === 'linux';
const scratch = mkdtempSync(join(tmpdir(), 'gear-rl-glibc-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const WRAP = (await import(pathToFileURL(join(ROOT, 'native/sources.mjs')).href) as { linuxWrap: string[] }).linuxWrap;
/** binding.gyp's Linux ldflags for the compiler `cxx` (what `<!@(node native/linux-ldflags.mjs)` gives). */
const linuxLdflags = (cxx: string) =>
  execFileSync(process.execPath, ['native/linux-ldflags.mjs'], { cwd: ROOT, env: { ...process.env, CXX: cxx }, encoding: 'utf8' })
    .trim().split(/\s+/).filter(Boolean);
const LINUX_LDFLAGS = LINUX ? linuxLdflags('g++') : [];

describe('version helpers', () => {
  it('compare dotted versions numerically', () => {
    expect(versionNumbers('GLIBC_2.2.5')).toEqual([2, 2, 5]);
    expect(versionNumbers('GLIBCXX_3.4.30')).toEqual([3, 4, 30]);
    expect(versionAbove([2, 29], [2, 28])).toBe(true);
    expect(versionAbove([2, 28], [2, 28])).toBe(false);
    expect(versionAbove([2, 2, 5], [2, 28])).toBe(false);
    expect(versionAbove([2, 28, 1], [2, 28])).toBe(true);
  });
});

describe.runIf(LINUX)('linux binaries load on glibc >= 2.28 without libstdc++', () => {
  it('binding.gyp links Linux builds with native/linux-ldflags.mjs: static C++ runtime when libstdc++.a exists, wrappers and nodelete always', () => {
    expect(readFileSync(join(ROOT, 'binding.gyp'), 'utf8')).toContain('"ldflags": ["<!@(node native/linux-ldflags.mjs)"]');
    const wraps = ['-Wl,-z,nodelete', ...WRAP.map((s) => `-Wl,--wrap=${s}`)];
    expect(WRAP).toEqual(expect.arrayContaining(['exp', 'log', 'pow', 'pthread_create', '__pthread_key_create']));
    // this machine's g++ (Debian: libstdc++.a comes with g++)
    expect(LINUX_LDFLAGS).toEqual(['-Wl,-z,nodelete', '-static-libstdc++', '-static-libgcc', '-Wl,--exclude-libs,ALL', ...wraps.slice(1)]);
    // a compiler without libstdc++.a (Fedora/RHEL without libstdc++-static): the shared runtime
    const fake = join(scratch, 'cxx-without-static-libstdcxx');
    writeFileSync(fake, '#!/bin/sh\necho libstdc++.a\n', { mode: 0o755 });
    expect(linuxLdflags(fake)).toEqual(wraps);
    expect(linuxLdflags(join(scratch, 'no-such-compiler'))).toEqual(wraps);
  });

  it("the suite's addon: no glibc version above 2.28, no C++ runtime version, no libstdc++/libgcc_s", () => {
    const addon = createRequire(join(ROOT, 'package.json'))('node-gyp-build').path(ROOT) as string;
    const problems = glibcFloorProblems(addon);
    const stale = statSync(addon).mtimeMs < statSync(join(ROOT, 'binding.gyp')).mtimeMs
      ? ' (the addon is older than binding.gyp: rebuild it with npm run build:native)' : '';
    expect(problems, `${addon}${stale}:\n${versionReport(addon).join('\n')}`).toEqual([]);
    // and it does ask for glibc symbols (the check read something)
    expect(elfLoadNeeds(addon).versions.some((v) => v.version === 'GLIBC_2.2.5' || v.version === 'GLIBC_2.17')).toBe(true);
  });

  it("the suite's addon is never unmapped (DF_1_NODELETE): its thread pool outlives the worker that loaded it", () => {
    const addon = createRequire(join(ROOT, 'package.json'))('node-gyp-build').path(ROOT) as string;
    const dyn = execFileSync('readelf', ['-d', addon], { encoding: 'utf8' });
    expect(dyn).toMatch(/FLAGS_1\)\s+Flags:.*\bNODELETE\b/);
  });

  // A library that uses what the addon uses and what pulls the newest versions into a static
  // libstdc++ link (threads, condition variables, exceptions, exp/log/pow, std::string).
  const SRC = `
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
extern "C" __attribute__((visibility("default"))) double probe(double x) {
  std::mutex m;
  std::condition_variable cv;
  bool ready = false;
  double r = 0;
  std::thread t([&] { std::lock_guard<std::mutex> g(m); r = std::exp(x) + std::log(x + 2) + std::pow(x, 1.5); ready = true; cv.notify_one(); });
  { std::unique_lock<std::mutex> l(m); cv.wait(l, [&] { return ready; }); }
  t.join();
  try { throw std::runtime_error(std::to_string(r)); } catch (const std::exception& e) { return e.what()[0] ? r : -1; }
}`;

  function link(name: string, extra: string[]): string {
    const src = join(scratch, 'probe.cc');
    writeFileSync(src, SRC);
    const out = join(scratch, `${name}.so`);
    execFileSync('g++', ['-std=c++17', '-O2', '-fPIC', '-fvisibility=hidden', '-fno-math-errno', '-shared', '-pthread', '-o', out,
      src, ...extra], { cwd: ROOT, stdio: 'pipe' });
    return out;
  }

  it('rejects what a default g++ link of such a library needs (GLIBCXX, libstdc++.so.6)', () => {
    const problems = glibcFloorProblems(link('default', []));
    expect(problems.some((p) => /GLIBCXX_3\.4/.test(p))).toBe(true);
    expect(problems).toContain('DT_NEEDED libstdc++.so.6');
  });

  it('static libstdc++ alone is not enough: it brings glibc 2.32-2.36 symbols; --wrap without the wrappers is caught', () => {
    const staticOnly = glibcFloorProblems(link('static', ['-static-libstdc++', '-static-libgcc']));
    for (const v of ['GLIBC_2.29', 'GLIBC_2.34']) expect(staticOnly.some((p) => p.includes(v)), v).toBe(true);
    const noWrappers = glibcFloorProblems(link('nowrappers', LINUX_LDFLAGS));
    expect(noWrappers.some((p) => p.startsWith('undefined __wrap_pthread_once'))).toBe(true);
  });

  it('accepts the same library linked with the Linux flags and native/src/compat/glibc_compat.cc, which still computes', () => {
    const lib = link('compat', [join(ROOT, 'native/src/compat/glibc_compat.cc'), ...LINUX_LDFLAGS]);
    expect(glibcFloorProblems(lib), versionReport(lib).join('\n')).toEqual([]);
    // loads and runs (threads, exceptions through the static unwinder, libm) in a fresh process:
    // Node cannot call a plain C function without an addon: a small C program dlopens and calls it.
    const main = join(scratch, 'main.c');
    writeFileSync(main, `#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\\n", dlerror()); return 2; }
  double (*probe)(double) = (double (*)(double))dlsym(h, "probe");
  if (!probe) return 3;
  printf("%.17g\\n", probe(0.5));
  return 0;
}`);
    execFileSync('gcc', ['-O1', '-o', join(scratch, 'main'), main, '-ldl'], { stdio: 'pipe' });
    const got = Number(execFileSync(join(scratch, 'main'), [lib], { encoding: 'utf8' }).trim());
    const want = Math.exp(0.5) + Math.log(2.5) + Math.pow(0.5, 1.5);
    expect(Math.abs(got - want)).toBeLessThan(1e-12);
  });
});

// A musl libc (Alpine) build links the same flags: there glibc_compat.cc's wrappers call the default
// symbols (__real_*) and it must not ask for glibc-only names. musl-gcc (Debian's musl-tools) links a small
// C library with the wrap flags and the compat object, and a musl program loads it with RTLD_NOW.
describe.runIf(LINUX && process.arch === 'x64')('musl: the wrappers pass through', () => {
  it('links and loads with musl, every wrapped symbol resolved, and computes', () => {
    const dir = mkdtempSync(join(scratch, 'musl-'));
    const muslGcc = (process.env.PATH ?? '').split(':').map((d) => join(d, 'musl-gcc')).find((p) => existsSync(p));
    expect(muslGcc, 'musl-gcc on PATH (apt-get install musl-tools)').toBeDefined();
    // musl-gcc is a wrapper script around gcc with a specs file that swaps glibc for musl
    const musl = /"([^"]*musl-gcc\.specs)"/.exec(readFileSync(muslGcc!, 'utf8'))?.[1];
    expect(musl, `${muslGcc}: its specs file`).toBeDefined();
    // the compat file is C++ over C headers only: compiled against musl's headers, without libstdc++'s
    execFileSync('g++', ['-specs', musl!, '-nostdinc++', '-std=c++17', '-O2', '-fPIC', '-fvisibility=hidden', '-fno-exceptions',
      '-fno-rtti', '-Wall', '-Wextra', '-Werror', '-c', join(ROOT, 'native/src/compat/glibc_compat.cc'), '-o', join(dir, 'compat.o')],
    { stdio: 'pipe' });
    writeFileSync(join(dir, 'lib.c'), `#include <math.h>
#include <pthread.h>
static double acc;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static void init(void) { pthread_key_create(&key, 0); }
static void* work(void* p) {
  pthread_once(&once, init);
  pthread_setspecific(key, p);
  acc = exp(*(double*)p) + log(2.5) + pow(0.5, 1.5) + exp2(1.0) + log2(8.0);
  return pthread_getspecific(key);
}
__attribute__((visibility("default"))) double probe(double x) {
  pthread_t t;
  void* r;
  pthread_create(&t, 0, work, &x);
  pthread_join(t, &r);
  return r == &x ? acc : -1;
}`);
    writeFileSync(join(dir, 'main.c'), `#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) { printf("%s\\n", dlerror()); return 2; }
  double (*probe)(double) = (double (*)(double))dlsym(h, "probe");
  printf("%.17g\\n", probe(0.5));
  return 0;
}`);
    const wraps = ['-Wl,-z,nodelete', ...WRAP.map((s) => `-Wl,--wrap=${s}`)];
    execFileSync('musl-gcc', ['-O2', '-fPIC', '-fvisibility=hidden', '-shared', '-o', join(dir, 'libprobe.so'), join(dir, 'lib.c'),
      join(dir, 'compat.o'), ...wraps], { stdio: 'pipe' });
    execFileSync('musl-gcc', ['-O2', '-o', join(dir, 'main'), join(dir, 'main.c')], { stdio: 'pipe' });
    const undef = elfLoadNeeds(join(dir, 'libprobe.so')).undefinedSymbols.map((u) => u.name);
    expect(undef.filter((n) => /^__(wrap|real)_|^__pthread_key_create$/.test(n))).toEqual([]);
    expect(elfLoadNeeds(join(dir, 'libprobe.so')).needed).toEqual(['libc.so']);  // musl's
    const got = Number(execFileSync(join(dir, 'main'), [join(dir, 'libprobe.so')], { encoding: 'utf8' }).trim());
    expect(Math.abs(got - (Math.exp(0.5) + Math.log(2.5) + Math.pow(0.5, 1.5) + 2 + 3))).toBeLessThan(1e-12);
  });
});
