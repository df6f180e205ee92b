// Accuracy of the logits kernels' exp2 (native/src/cpu/simd/*.inc) against float64, over the whole input
// range the kernels use. A standalone C++ driver (compiled here with g++, -ffp-contract=off as the addon)
// includes each vector layer as the kernels do and sweeps t = log2 of a weight: every 2^-13 step of
// [-126, 127], every 193rd float32 of [-1, 1] (the reduction's boundaries, where r = +-1/2), 5e5 random
// points, and the 2^(d k) form the sums use (d = z - m in logits, k = log2(e) / T) for five temperatures.
// Bound: relative error <= 2.5e-7 (about 2^-22: the degree-5 polynomial's 1.6e-7 plus the float32
// roundings of its Horner steps) on every ISA layer the addon runs on this CPU. 2^(d k) on the layers that first round
// t = d k to float32 also carries that rounding (ln 2 |t| 2^-24 relative, up to 5.3e-6 at t = -125, on
// weights far below the row's largest): checked net of it; the fused AVX2 and NEON forms never round t.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ISAS } from '../helpers/isa.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const onPath = (cmd: string) => (process.env.PATH ?? '').split(delimiter).map((d) => join(d, cmd)).find((p) => existsSync(p));
const GNU_ARCH: Record<string, string> = { x64: 'x86_64', arm64: 'aarch64' };

/** g++ for this process's architecture; under qemu-user (the arm64 suites on an x86-64 host) the cross
 * compiler, linked statically and run through qemu-user. */
function toolchain(): { cxx?: string; flags: string[]; runner: string[] } {
  const arch = GNU_ARCH[process.arch] ?? process.arch;
  const gxx = onPath('g++');
  const machine = gxx ? spawnSync(gxx, ['-dumpmachine'], { encoding: 'utf8' }).stdout.trim() : '';
  if (gxx && machine.startsWith(`${arch}-`)) return { cxx: gxx, flags: [], runner: [] };
  const qemu = onPath(`qemu-${arch}`);
  return { cxx: onPath(`${arch}-linux-gnu-g++`), flags: ['-static'], runner: qemu ? [qemu] : [] };
}
const BOUND = 2.5e-7;

const DRIVER = String.raw`
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include "gear/isa_target.h"
#include "logits_kernels.h"

struct Err {
  double rel = 0, at = 0;
  long n = 0, bad = 0;  // bad: a non-finite or wrong-signed result
  void add(double got, double want, double t) {
    ++n;
    if (!(got > 0) || !std::isfinite(got)) { ++bad; return; }
    const double e = std::fabs(got - want) / want;
    if (e > rel) { rel = e; at = t; }
  }
};
static std::string json(const char* name, const Err& e) {
  char b[200];
  std::snprintf(b, sizeof b, "\"%s\":{\"rel\":%.6e,\"at\":%.9g,\"n\":%ld,\"bad\":%ld}", name, e.rel, e.at, e.n, e.bad);
  return b;
}
static uint64_t rng = 88172645463325252ull;
static double uniform() { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (rng >> 11) * 0x1.0p-53; }

// Sweeps one layer: exp2 on [-126, 127], exp2_normal on [-125, 127], exp2_dk on d k in [-125, 1/2].
// exp2_dk is also measured net of the rounding of t = d k to float32 (ln 2 |t| 2^-24: the layers that
// form t before the exp; the fused AVX2 one never rounds it).
#define SWEEP(NS)                                                                                        \
  static std::string sweep_##NS() {                                                                      \
    using V = NS::V;                                                                                     \
    Err err[3], net;                                                                                     \
    float buf[3][64], out[64];                                                                           \
    int fill[3] = {0, 0, 0};                                                                             \
    float kk = 1.0f;                                                                                     \
    auto run = [&](int which) {                                                                          \
      for (int j = 0; j < 64; j += V::W) {                                                               \
        V::f x;                                                                                          \
        std::memcpy(&x, buf[which] + j, sizeof x);                                                       \
        V::f y = which == 0 ? V::exp2(x) : which == 1 ? V::exp2_normal(x) : V::exp2_dk(x, V::set1(kk));  \
        std::memcpy(out + j, &y, sizeof y);                                                              \
      }                                                                                                  \
      for (int j = 0; j < 64; ++j) {                                                                     \
        const double t = which == 2 ? static_cast<double>(buf[which][j]) * kk : buf[which][j];           \
        const double want = std::exp2(t);                                                                \
        err[which].add(out[j], want, t);                                                                 \
        if (which == 2 && out[j] > 0) {                                                                  \
          const double e = std::fabs(out[j] - want) / want - 0.6931471805599453 * std::fabs(t) * 0x1.0p-24; \
          if (e > net.rel) { net.rel = e; net.at = t; }                                                  \
        }                                                                                                \
      }                                                                                                  \
      fill[which] = 0;                                                                                   \
    };                                                                                                   \
    auto feed = [&](int which, double t) {                                                               \
      buf[which][fill[which]++] = static_cast<float>(t);                                                 \
      if (fill[which] == 64) run(which);                                                                 \
    };                                                                                                   \
    auto flush = [&](int which) { while (fill[which]) feed(which, 0.0); };                               \
    for (double t = -126.0; t <= 127.0; t += 0x1.0p-13) {                                                \
      feed(0, t);                                                                                        \
      if (t >= -125.0) feed(1, t);                                                                       \
    }                                                                                                    \
    for (uint32_t b = 0x3f800000u; b != 0; b = b > 193 ? b - 193 : 0) {                                    \
      float x;                                                                                           \
      std::memcpy(&x, &b, 4);                                                                            \
      for (int w = 0; w < 2; ++w) { feed(w, x); feed(w, -x); }                                           \
    }                                                                                                    \
    for (int i = 0; i < 500000; ++i) {                                                                  \
      feed(0, -126.0 + uniform() * 253.0);                                                               \
      feed(1, -125.0 + uniform() * 252.0);                                                               \
    }                                                                                                    \
    flush(0);                                                                                            \
    flush(1);                                                                                            \
    for (double temp : {1.0, 0.7, 1.3, 0.25, 4.0}) {                                                     \
      kk = static_cast<float>(1.4426950408889634 / temp);                                                \
      const double dmin = -125.0 / kk;                                                                   \
      for (double d = dmin; d <= 0.5 / kk; d += -dmin / 1000003.0) feed(2, d);                           \
      for (int i = 0; i < 100000; ++i) feed(2, dmin * uniform());                                        \
      flush(2);                                                                                          \
    }                                                                                                    \
    net.n = err[2].n;                                                                                    \
    /* exact points: 2^n for integer n; 2^(0 k) = 1 (a one-hot row's weight); NaN propagates */          \
    long exact_bad = 0;                                                                                  \
    for (int n = -125; n <= 127; ++n) {                                                                  \
      float fa[64], fb[64], fc[64];                                                                      \
      V::f a = V::exp2(V::set1(static_cast<float>(n))), b = V::exp2_normal(V::set1(static_cast<float>(n))); \
      V::f c = V::exp2_dk(V::zero(), V::set1(1.4426950f));                                               \
      std::memcpy(fa, &a, sizeof a);                                                                     \
      std::memcpy(fb, &b, sizeof b);                                                                     \
      std::memcpy(fc, &c, sizeof c);                                                                     \
      for (int j = 0; j < V::W; ++j)                                                                     \
        if (fa[j] != std::ldexp(1.0f, n) || fb[j] != std::ldexp(1.0f, n) || fc[j] != 1.0f) ++exact_bad;  \
    }                                                                                                    \
    {                                                                                                    \
      float fa[64];                                                                                      \
      V::f a = V::exp2(V::set1(NAN));                                                                    \
      std::memcpy(fa, &a, sizeof a);                                                                     \
      for (int j = 0; j < V::W; ++j)                                                                     \
        if (fa[j] == fa[j]) ++exact_bad;                                                                 \
    }                                                                                                    \
    return "{" + json("exp2", err[0]) + "," + json("exp2_normal", err[1]) + "," + json("exp2_dk", err[2]) + \
           "," + json("exp2_dk_net", net) + ",\"exact_bad\":" + std::to_string(exact_bad) + "}";         \
  }

namespace gear { namespace baseline_l {
#include "simd/scalar.inc"
}}
namespace sc = gear::baseline_l;
SWEEP(sc)
#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear { namespace avx2_l {
#include "simd/avx2.inc"
}}
namespace a2 = gear::avx2_l;
SWEEP(a2)
GEAR_TARGET_END
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace gear { namespace avx512_l {
#include "simd/avx512.inc"
}}
namespace a5 = gear::avx512_l;
SWEEP(a5)
GEAR_TARGET_END
#endif
#if defined(__aarch64__)
namespace gear { namespace neon_l {
#include "simd/neon.inc"
}}
namespace nn = gear::neon_l;
SWEEP(nn)
#endif

// The layers named on the command line (the ISAs the addon runs on this CPU), as one JSON object.
int main(int argc, char** argv) {
  std::string s = "{";
  for (int i = 1; i < argc; ++i) {
    const std::string isa = argv[i];
    std::string r;
    if (isa == "baseline") r = sweep_sc();
#if GEAR_X86
    if (isa == "avx2") r = sweep_a2();
    if (isa == "avx512") r = sweep_a5();
#endif
#if defined(__aarch64__)
    if (isa == "neon") r = sweep_nn();
#endif
    if (r.empty()) return 2;  // a layer this driver does not build here
    s += (i > 1 ? ",\"" : "\"") + isa + "\":" + r;
  }
  std::printf("%s}\n", s.c_str());
  return 0;
}
`;

interface Err { rel: number; at: number; n: number; bad: number }
type Layer = { exp2: Err; exp2_normal: Err; exp2_dk: Err; exp2_dk_net: Err; exact_bad: number };
let dir = '';
let result: Record<string, Layer> = {};

beforeAll(() => {
  const tc = toolchain();
  expect(tc.cxx, `a g++ for ${process.arch} on PATH`).toBeDefined();
  if (tc.flags.length) expect(tc.runner.length, 'qemu-user to run the cross-compiled driver').toBe(1);
  dir = mkdtempSync(join(tmpdir(), 'gear-exp-'));
  writeFileSync(join(dir, 'exp.cc'), DRIVER);
  const exe = join(dir, 'exp');
  const cc = spawnSync(tc.cxx!, ['-O2', '-std=c++17', '-ffp-contract=off', '-fno-math-errno', ...tc.flags,
    '-I', join(ROOT, 'native/include'), '-I', join(ROOT, 'native/src/cpu'), join(dir, 'exp.cc'), '-o', exe], { encoding: 'utf8' });
  expect(cc.status, cc.stderr).toBe(0);
  const [cmd, ...pre] = [...tc.runner, exe];
  const r = spawnSync(cmd!, [...pre, ...ISAS], { encoding: 'utf8', maxBuffer: 2 ** 20 });
  expect(r.status, r.stderr).toBe(0);
  result = JSON.parse(r.stdout) as Record<string, Layer>;
}, 120_000);
afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

describe('exp2 of the logits kernels against float64', () => {
  it('sweeps every ISA layer this CPU runs', () => {
    expect(Object.keys(result)).toEqual([...ISAS]);
  });
  for (const layer of ISAS) {
    it(`${layer}: relative error <= ${BOUND} over the used range, exact at integers and at t = 0, NaN kept`, () => {
      const l = result[layer]!;
      for (const fn of ['exp2', 'exp2_normal', 'exp2_dk', 'exp2_dk_net'] as const) {
        const e = l[fn];
        expect(e.n, `${layer} ${fn} points`).toBeGreaterThan(5_000_000);
        expect(e.bad, `${layer} ${fn}: non-finite or non-positive results`).toBe(0);
        // a sweep that found no error at all would not be measuring anything
        expect(e.rel, `${layer} ${fn}: worst at t = ${e.at}`).toBeGreaterThan(1e-8);
        const bound = fn === 'exp2_dk' && layer !== 'avx2' && layer !== 'neon' ? BOUND + Math.LN2 * 125 * 2 ** -24 : BOUND;
        expect(e.rel, `${layer} ${fn}: worst at t = ${e.at}`).toBeLessThanOrEqual(bound);
      }
      expect(l.exact_bad).toBe(0);
    });
  }
});
