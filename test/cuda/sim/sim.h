// Host simulation of the CUDA kernels' per-thread work (test/cuda/kernel_sim.test.ts): compiled by nvcc as
// a host program, it runs each thread's share of every pass with the kernels' own __host__ __device__
// functions, reduces the lanes of a group in the order the kernels' group_reduce uses, and compares the
// results with float64 references written here. What it checks without a GPU: the partition of rows into
// parts and lanes (heads, vectors, tails, alignment of every 16-byte access), the online statistics, the
// merges, the flags and the finalisation. What it cannot: the CUDA runtime calls, the scheduling.
#pragma once
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gear/dtype_convert.h"
#include "gear/types.h"

namespace sim {

// Failures so far (a test prints every one and exits 1 when any).
inline int& failures() {
  static int n = 0;
  return n;
}

inline void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures();
    std::printf("FAIL %s\n", what.c_str());
  }
}

// |a - e| / max(1, |e|), with equal infinities and NaN-vs-NaN counting as 0.
inline double scaled_error(double a, double e) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e) ? 0.0 : INFINITY;
  if (std::isinf(a) || std::isinf(e)) return a == e ? 0.0 : INFINITY;
  return std::fabs(a - e) / std::max(1.0, std::fabs(e));
}

// mulberry32
struct Rng {
  uint32_t s;
  explicit Rng(uint32_t seed) : s(seed) {}
  double next() {
    uint32_t t = (s += 0x6D2B79F5u);
    t = (t ^ (t >> 15)) * (t | 1u);
    t ^= t + (t ^ (t >> 7)) * (t | 61u);
    return static_cast<double>(t ^ (t >> 14)) / 4294967296.0;
  }
};

// 16-byte aligned storage (the device's allocations are 256-byte aligned).
struct Buffer {
  std::shared_ptr<void> mem;
  size_t bytes = 0;
  void* get() const { return mem.get(); }
};
inline Buffer aligned(size_t bytes) {
  const size_t n = (bytes + 63) / 64 * 64 + 64;
  void* p = std::aligned_alloc(64, n);
  std::memset(p, 0, n);
  return Buffer{std::shared_ptr<void>(p, std::free), bytes};
}

// Logits of one dtype: the stored words and the decoded values the reference uses.
struct Logits {
  gear::DType dtype;
  int64_t rows, vocab;
  Buffer data;
  std::vector<double> decoded;
};

inline uint16_t to_bf16(float x) {
  if (std::isnan(x)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline Logits encode(const std::vector<double>& z, gear::DType dt, int64_t rows, int64_t vocab) {
  Logits l{dt, rows, vocab, aligned(z.size() * (dt == gear::DType::F32 ? 4 : 2)), std::vector<double>(z.size())};
  for (size_t i = 0; i < z.size(); ++i) {
    if (dt == gear::DType::F32) {
      static_cast<float*>(l.data.get())[i] = static_cast<float>(z[i]);
      l.decoded[i] = static_cast<float>(z[i]);
    } else {
      uint16_t h;
      if (dt == gear::DType::BF16) h = to_bf16(static_cast<float>(z[i]));
      else h = __half_as_ushort(__float2half_rn(static_cast<float>(z[i])));
      static_cast<uint16_t*>(l.data.get())[i] = h;
      l.decoded[i] = gear::kern::to_f32(dt, l.data.get(), static_cast<int64_t>(i));
    }
  }
  return l;
}

// Reduces the lanes of one group to lane 0 in the order of row_stats.cuh's group_reduce: shuffles down by
// 16, 8, 4, 2, 1 within each warp (a lane past the warp's end reads its own value), then, for a block,
// warp 0 over the warps' results (lanes past the warp count keep theirs).
template <typename T, typename Merge>
T group_reduce(std::vector<T> v, int G, Merge merge) {
  auto warp = [&](std::vector<T> w, int live) {
    for (int o = 16; o > 0; o >>= 1) {
      std::vector<T> next = w;
      for (int l = 0; l < 32; ++l) {
        if (live == 32) next[l] = merge(w[l], l + o < 32 ? w[l + o] : w[l]);
        else if (l + o < live) next[l] = merge(w[l], w[l + o]);
      }
      w = next;
    }
    return w[0];
  };
  std::vector<T> warps;
  for (int w0 = 0; w0 < G; w0 += 32) warps.push_back(warp(std::vector<T>(v.begin() + w0, v.begin() + w0 + 32), 32));
  if (G == 32) return warps[0];
  std::vector<T> w(32, warps[0]);
  for (size_t i = 0; i < warps.size(); ++i) w[i] = warps[i];
  return warp(w, static_cast<int>(warps.size()));
}

// Float64 log-softmax of a row (masked entries -inf); lse in *lse (-inf for an all-masked row).
inline std::vector<double> log_softmax(const double* z, int64_t vocab, double T, double* lse) {
  double m = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) m = std::max(m, z[v]);
  std::vector<double> out(static_cast<size_t>(vocab), -INFINITY);
  if (m == -INFINITY) {
    *lse = -INFINITY;
    return out;
  }
  double s = 0;
  for (int64_t v = 0; v < vocab; ++v) s += std::exp((z[v] - m) / T);
  *lse = m / T + std::log(s);
  for (int64_t v = 0; v < vocab; ++v) out[v] = z[v] == -INFINITY ? -INFINITY : z[v] / T - *lse;
  return out;
}

// Random logits: normal-ish with scale `scale`, a share `masked` of -inf entries.
inline std::vector<double> random_logits(Rng& r, int64_t n, double scale, double masked) {
  std::vector<double> z(static_cast<size_t>(n));
  for (auto& x : z) {
    const double u = r.next() + r.next() + r.next() - 1.5;
    x = r.next() < masked ? -INFINITY : u * 2 * scale;
  }
  return z;
}

}  // namespace sim
