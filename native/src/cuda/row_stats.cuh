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

// ---- the streaming accumulator: integer pivots, exact power-of-two rescales ----

// 2^r for an integer-valued r in [-127, 0] (0 at -127), exactly: r's integer, held in the low mantissa bits
// of r + 1.5 * 2^23, written to the exponent field.
GEAR_HDI float pow2f(float r) { return as_float((as_bits(r + 12582912.f) - 0x4B400000u + 127u) << 23); }

// 2^r for an integer-valued r in [-1023, 0] (0 at -1023), exactly, in float64.
GEAR_HDI double pow2d(float r) {
  const uint32_t hi = (as_bits(r + 12582912.f) - 0x4B400000u + 1023u) << 20;
#if defined(__CUDA_ARCH__)
  return __hiloint2double(static_cast<int>(hi), 0);
#else
  const uint64_t u = static_cast<uint64_t>(hi) << 32;
  double d;
  memcpy(&d, &u, 8);
  return d;
#endif
}

// What a streaming pass needs of the temperature: c2 = log2(e) / T as a float (the weights' scale), 1/T,
// and for bfloat16 the floor its logits are raised to before they are decoded (StatsAcc). `fast` is false
// for a temperature so extreme that no such floor exists (c2 outside [2^-90, 2^90]): the pass then runs
// SoftmaxAcc only.
struct PassScale {
  float c2;
  double inv_t;
  uint32_t floor2;  // bf16x2: -2^k, the smallest power of two with -2^k c2 <= -2^24, in both halves
  bool fast;
};
inline PassScale pass_scale(double inv_t) {
  PassScale k;
  k.inv_t = inv_t;
  k.c2 = static_cast<float>(inv_t * rowmath::kLog2e);
  k.fast = k.c2 >= 0x1p-90f && k.c2 <= 0x1p90f;
  const int e = k.fast ? static_cast<int>(std::ceil(24.0 - std::log2(static_cast<double>(k.c2)))) : 0;
  const uint32_t bits = 0x8000u | (static_cast<uint32_t>(e + 127) << 7);  // -2^e in bfloat16
  k.floor2 = bits | (bits << 16);
  return k;
}

// A thread's online softmax statistics in the streaming pass (tokenStats). The pivot P is an integer in
// log2 units: P = ceil(m c2) for the largest raw logit m seen so far, held at kFloor or above. A logit z
// weighs 2^(z c2 - P): one FMA ("pre-scaled"), rounded once relative to the small difference z c2 - P
// (not to z c2), then ex2. A pivot move is by an integer, so the float sums rescale by an exact power of
// two (no ex2 and no error, however often the pivot moves); every kFold elements they are folded into
// float64 sums, rescaled by an exact power of two too. stats() converts once to rowmath's statistics
// around m (one float64 exp2 of m c2 - P, in [-1.5, 0.5]). Error: each weight carries ex2's (2^-22) and
// the FMA's rounding (2^-24 |z c2 - P|), each float sum its kFold additions: as SoftmaxAcc, less the moves.
// Valid while kFloor <= m c2 <= 2^23 (|m| <= 5.8e6 T): beyond (m a mask, or an absurd logit), a weight
// the floor made 0 need not be, and stats() asks for the thread's share again through SoftmaxAcc (redo).
struct StatsAcc {
  static constexpr float kFloor = -8388608.f;  // -2^23
  static constexpr int kFold = 32;             // elements per float fold
  float m = -INFINITY;                         // largest raw logit seen
  float P = kFloor;                            // pivot of s, a
  float s = 0.f, a = 0.f;                      // sum 2^d, sum 2^d d with d = z c2 - P
  float PF = kFloor;                           // pivot of S, A
  double S = 0.0, A = 0.0;
  int pending = 0;

  // Moves the pivot for a vector whose largest logit is vmax (NaN ignored, as by fmaxf).
  GEAR_HDI void pivot(float vmax, float c2) {
    m = fmaxf(m, vmax);
    const float next = fmaxf(ceilf(m * c2), kFloor);
    const float r = fmaxf(P - next, -127.f);  // an integer <= 0 (-127: the old sums weigh 0)
    const float f = pow2f(r);
    a = f * fmaf(r, s, a);
    s *= f;
    P = next;
  }
  // Adds the entry d = z c2 - P: -Infinity weighs 0 (its weighted term 0 * -256), a NaN stays.
  GEAR_HDI void add(float d) {
    const float e = ex2(d);
    s += e;
    a = fmaf(e, fmaxf(d, -256.f), a);
  }
  // add() for a d that is finite or NaN.
  GEAR_HDI void add_finite(float d) {
    const float e = ex2(d);
    s += e;
    a = fmaf(e, d, a);
  }
  GEAR_HDI void count(int n) {
    if ((pending += n) >= kFold) fold();
  }
  __host__ __device__ void fold() {
    const float r = fmaxf(PF - P, -1023.f);
    const double f = pow2d(r);
    A = f * fma(static_cast<double>(r), S, A) + static_cast<double>(a);
    S = f * S + static_cast<double>(s);
    PF = P;
    s = a = 0.f;
    pending = 0;
  }
  // The statistics around m (rowmath's) and whether a NaN or +Infinity was seen; *redo when m c2 is
  // beyond the valid band (the result is then not to be used).
  __host__ __device__ rowmath::SoftmaxStats stats(float c2, int* bad, bool* redo) {
    fold();
    *bad = m == INFINITY || S != S || A != A;
    *redo = false;
    if (m == -INFINITY) return rowmath::SoftmaxStats{rowmath::neg_inf(), S, 0.0};  // S is 0, or NaN
    const double mk = static_cast<double>(m) * static_cast<double>(c2);
    const double delta = mk - static_cast<double>(P);  // exact; in [-1.5, 0.5] unless P is at the floor
    *redo = !(delta >= -2.0 && mk <= 8388608.0);
    // Every weight but the largest logit's is 0 (a one-hot row, a 1 x 1 row): exactly 1 and entropy 0
    // around m, as 2^0 gives on the CPU (its own weight 2^(m c2 - P) carries ex2's error, 2^-22).
    if (S == static_cast<double>(ex2(fmaf(m, c2, -P)))) return rowmath::SoftmaxStats{static_cast<double>(m), 1.0, 0.0};
    const double g = exp2(-delta);
    return rowmath::SoftmaxStats{static_cast<double>(m), S * g, rowmath::kLn2 * g * (A - delta * S)};
  }
};

// StatsAcc's step over the 16-byte vectors in words w[0..W): the pivot moved once for all of them, then
// every entry added. bfloat16 logits are raised to k.floor2 first (packed, NaN kept), where their weight is
// 0 either way, so no entry's d is -Infinity and none needs the clamp.
template <DType D, int W>
GEAR_HDI void stats_step(StatsAcc& acc, const uint32_t* w, const PassScale& k) {
  acc.pivot(words_max<D, W>(w), k.c2);
  const float np = -acc.P;
  if constexpr (D == DType::BF16) {
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const uint32_t x = bf16_floor2(w[i], k.floor2);
      acc.add_finite(fmaf(as_float(x << 16), k.c2, np));
      acc.add_finite(fmaf(as_float(x & 0xffff0000u), k.c2, np));
    }
  } else {
    constexpr int kPerWord = D == DType::F32 ? 1 : 2;
#pragma unroll
    for (int e = 0; e < W * kPerWord; ++e) acc.add(fmaf(word_elem<D>(w, e), k.c2, np));
  }
  acc.count(W * (D == DType::F32 ? 1 : 2));
}

// StatsAcc's step over one scalar.
GEAR_HDI void stats_scalar(StatsAcc& acc, float x, float c2) {
  acc.pivot(x, c2);
  acc.add(fmaf(x, c2, -acc.P));
  acc.count(1);
}

// A row piece's softmax statistics, the unit every row pass writes per (row, part); the row's last part
// to finish merges them in part order.
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

// A value another block wrote in the same kernel: read from L2 (ld.cg), past this multiprocessor's L1,
// which the other's writes do not update (a line of it may hold an older copy).
template <typename T>
GEAR_HDI T load_cg(const T* p) {
#if defined(__CUDA_ARCH__)
  static_assert(sizeof(T) % 4 == 0, "4-byte fields");
  T out;
  const unsigned* src = reinterpret_cast<const unsigned*>(p);
  unsigned* dst = reinterpret_cast<unsigned*>(&out);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 4); ++i) dst[i] = __ldcg(src + i);
  return out;
#else
  return *p;
#endif
}

// Lane l's share of merging row r's `parts` pieces: pieces l, l + 32, ... in order (none: no logit).
GEAR_HDI PartStats lane_pieces(const PartStats* in, int64_t r, int64_t parts, int l, double inv_t) {
  PartStats acc{rowmath::neg_inf(), 0.0, 0.0, 0, 0};
  for (int64_t p = l; p < parts; p += 32) acc = part_merge(acc, load_cg(in + r * parts + p), inv_t);
  return acc;
}

// Called by the lane that wrote its piece of a row split in `parts` pieces (one kernel, one block per
// piece): whether it is the row's last piece to finish, and so the one to merge them all (the others'
// pieces are then visible to it through load_cg). Leaves the row's counter 0 for the next kernel.
__device__ __forceinline__ bool last_piece(int32_t* counter, int64_t parts) {
  __threadfence();  // this piece, before the count that lets another block read it
  if (atomicAdd(counter, 1) != static_cast<int32_t>(parts - 1)) return false;
  __threadfence();
  *counter = 0;
  return true;
}

// The end of a row pass's item, called by every thread of its group with the group's result `mine` (valid
// in lane 0): a row in one piece is finished by lane 0 (finish(row, mine)); a row in several (G = block
// only) writes its piece, and in the block that finishes the row's last piece warp 0 merges the pieces
// in a fixed order, whichever block that is (lane_merge(l): lane l's pieces in order; warp_merge: the
// lanes as a group of 32), then lane 0 finishes the row. `counters`: one per row, zero.
template <int G, typename T, typename LaneMerge, typename WarpMerge, typename Finish>
__device__ __forceinline__ void end_item(bool active, int64_t item, int64_t parts, const T& mine, T* pieces,
                                         int32_t* counters, LaneMerge lane_merge, WarpMerge warp_merge,
                                         Finish finish) {
  if (!active) return;  // uniform over the group
  const int64_t row = item / parts;
  if (G == 32 || parts == 1) {  // a warp's row is always in one piece (row_grid)
    if (threadIdx.x % G == 0) finish(row, mine);
    return;
  }
  __shared__ int last;
  if (threadIdx.x == 0) {
    pieces[item] = mine;
    last = last_piece(counters + row, parts);
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  const T merged = warp_merge(lane_merge(static_cast<int>(threadIdx.x)));
  if (threadIdx.x == 0) finish(row, merged);
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
