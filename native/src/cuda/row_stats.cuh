// The per-thread online statistics of the row kernels and their fixed-order reductions over a group of
// threads (nvcc only; __host__ __device__ where the host simulation runs them, see kernels.cuh).
#pragma once
#include "kernels.cuh"

namespace gear {
namespace cuda {

// A thread's online softmax statistics of the logits it has seen. Float sums s, a (a in log2 units) over
// at most kFold vectors, relative to the running pivot m (the largest raw logit so far), are folded into
// float64 sums S, A (nats) relative to the pivot M of the last fold. A pivot move in the loop rescales only
// the float sums, by ex2 (a few instructions, no float64: moves are frequent early in a row, and a warp
// takes the branch when any lane does); the fold rescales the float64 sums exactly, once, when the pivot
// moved since the last fold. Error: an entry's weight carries its own ex2's (2^-22) and those of at most
// kFold - 1 moves within its fold (each 2^-22 + |r| ln 2 2^-24 for a move of r log2 units, whose weight
// is 2^r): within 1.3e-6 relative, inside tokenStatsPartial's 2e-6 (the simulation checks it with ex2 at
// its worst).
struct SoftmaxAcc {
  static constexpr int kFold = 4;
  float m = -INFINITY;      // running pivot (of s, a)
  float s = 0.f, a = 0.f;
  float M = -INFINITY;      // pivot of S, A
  double S = 0.0, A = 0.0;  // folded: sum e, sum e * (z - M) / T (nats)
  int pending = 0;
  bool nan_seen = false;    // a NaN in a vector skipped while every logit so far was -inf

  __host__ __device__ void fold(double inv_t) {
    if (m > M) {  // rescale S, A exactly to the current pivot (rowmath::stats_rescale)
      rowmath::SoftmaxStats st{M, S, A};
      rowmath::stats_rescale(st, m, inv_t);
      S = st.s, A = st.a;
      M = m;
    }
    S += s;
    A += static_cast<double>(a) * rowmath::kLn2;
    s = a = 0.f;
    pending = 0;
  }
  GEAR_HDI void move_pivot(float new_m, float c2) {
    if (s > 0.f) {  // r = (m - new_m) k < 0 (clamped: past -126 the old sums weigh 0)
      const float r = fmaxf((m - new_m) * c2, -256.f);
      const float f = ex2(r);
      a = f * fmaf(r, s, a);
      s *= f;
    }
    m = new_m;
  }
  template <int N>
  GEAR_HDI void add(const float (&x)[N], float c2, double inv_t) {
    float vm = x[0];
#pragma unroll
    for (int k = 1; k < N; ++k) vm = fmaxf(vm, x[k]);
    if (vm > m) move_pivot(vm, c2);
    if (m == -INFINITY) {  // every logit so far masked: only a NaN can matter here
#pragma unroll
      for (int k = 0; k < N; ++k) nan_seen |= x[k] != x[k];
      return;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float d = (x[k] - m) * c2;  // log2 units; -inf for a masked entry, NaN for a NaN one
      const float e = ex2(d);
      s += e;
      a = fmaf(e, fmaxf(d, -256.f), a);  // a masked entry adds 0 * -256, not 0 * -inf
    }
    if (++pending == kFold) fold(inv_t);
  }
  GEAR_HDI void add1(float x, float c2, double inv_t) {
    const float v[1] = {x};
    add<1>(v, c2, inv_t);
  }
  // Finishes: the statistics in float64 and whether a NaN or +Infinity was seen.
  __host__ __device__ rowmath::SoftmaxStats stats(double inv_t, int* bad) {
    fold(inv_t);
    *bad = nan_seen || m == INFINITY || S != S || A != A;
    return rowmath::SoftmaxStats{static_cast<double>(M), S, A};
  }
};

// A row piece's softmax statistics, the unit every row pass writes per (row, part) and a per-row kernel
// merges in part order.
struct PartStats {
  double m, s, a;
  int32_t bad;
  int32_t pad;
};

GEAR_HDI PartStats part_merge(const PartStats& x, const PartStats& y, double inv_t) {
  const rowmath::SoftmaxStats r = rowmath::stats_merge(rowmath::SoftmaxStats{x.m, x.s, x.a},
                                                       rowmath::SoftmaxStats{y.m, y.s, y.a}, inv_t);
  return PartStats{r.m, r.s, r.a, x.bad | y.bad, 0};
}

// Fixed-order reduction of a group's values to its lane 0 (other lanes get partial results): warp
// shuffles down, then (G = block) the warps' results through shared memory. `merge` must be a pure
// function of its arguments; T is a trivially copyable struct of 4-byte multiples.
template <typename T>
__device__ __forceinline__ T shfl_down(const T& v, int offset) {
  static_assert(sizeof(T) % 4 == 0, "4-byte fields");
  T out;
  const int* src = reinterpret_cast<const int*>(&v);
  int* dst = reinterpret_cast<int*>(&out);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 4); ++i) dst[i] = __shfl_down_sync(0xffffffffu, src[i], offset);
  return out;
}

template <int G, typename T, typename Merge>
__device__ __forceinline__ T group_reduce(T v, Merge merge) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = merge(v, shfl_down(v, o));
  if constexpr (G > 32) {
    __shared__ T warp_vals[G / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
      T w = lane < G / 32 ? warp_vals[lane] : warp_vals[0];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const T other = shfl_down(w, o);
        if (lane + o < G / 32) w = merge(w, other);
      }
      v = w;
    }
    __syncthreads();  // warp_vals is reused by the next reduction of the block
  }
  return v;
}

// The largest of a group's values, in every lane (max is exact: the order does not matter).
template <int G>
__device__ __forceinline__ double group_max(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (G > 32) {
    __shared__ double warp_max[G / 32];
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = v;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < G / 32; ++w) v = fmax(v, warp_max[w]);
    __syncthreads();  // warp_max is reused by the next reduction of the block
  }
  return v;
}

// A lane's statistics moved to the group's pivot M (>= its own), ready to be added.
GEAR_HDI PartStats part_at(const PartStats& x, double M, double inv_t) {
  rowmath::SoftmaxStats st{x.m, x.s, x.a};
  rowmath::stats_rescale(st, M, inv_t);
  return PartStats{M, st.s, st.a, x.bad, 0};
}
GEAR_HDI PartStats part_add(const PartStats& x, const PartStats& y) { return PartStats{x.m, x.s + y.s, x.a + y.a, x.bad | y.bad, 0}; }

// A group's statistics at its lane 0: every lane rescaled once to the group's largest pivot, then added
// in group_reduce's fixed order (one exp per lane, instead of two per merge at every level).
template <int G>
__device__ __forceinline__ PartStats group_stats(const PartStats& x, double inv_t) {
  const double M = group_max<G>(x.m);
  return group_reduce<G>(part_at(x, M, inv_t), [](const PartStats& p, const PartStats& q) { return part_add(p, q); });
}

}  // namespace cuda
}  // namespace gear
