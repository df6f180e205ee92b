// The building blocks of the row kernels (nvcc only): the approximate hardware functions (ex2, lg2), the
// 16-byte loads per dtype, the layout of a row piece (RowSpan), and the launch macros. __host__ __device__
// where they can be: a host program (test/cuda/sim) runs each thread's share of a pass, in the kernels'
// own code, to check the partitioning and the math without a GPU. The per-thread accumulators and the
// group reductions are in row_stats.cuh.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "call.h"
#include "gear/dtype_convert.h"
#include "gear/row_math.h"
#include "gear/types.h"

namespace gear {
namespace cuda {


// Launches KERNEL<D, G> over the grid for the runtime dtype and group size.
#define GEAR_LAUNCH_ROWS(grid, dtype, stream, KERNEL, ...)                                                     \
  do {                                                                                                         \
    const ::gear::cuda::RowGrid& g_ = (grid);                                                                  \
    if (g_.blocks == 0) break;                                                                                 \
    if (g_.group == 32) {                                                                                      \
      switch (dtype) {                                                                                         \
        case DType::F32: KERNEL<DType::F32, 32><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break;       \
        case DType::BF16: KERNEL<DType::BF16, 32><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break;     \
        case DType::F16: KERNEL<DType::F16, 32><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break;       \
      }                                                                                                        \
    } else {                                                                                                   \
      switch (dtype) {                                                                                         \
        case DType::F32: KERNEL<DType::F32, kThreads><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break; \
        case DType::BF16: KERNEL<DType::BF16, kThreads><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break; \
        case DType::F16: KERNEL<DType::F16, kThreads><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break; \
      }                                                                                                        \
    }                                                                                                          \
  } while (0)

// Launches KERNEL<D> with one thread per row for the runtime dtype.
#define GEAR_LAUNCH_PER_ROW(rows, dtype, stream, KERNEL, ...)                                        \
  do {                                                                                               \
    const unsigned b_ = static_cast<unsigned>(((rows) + kThreads - 1) / kThreads);                   \
    if (b_ == 0) break;                                                                              \
    switch (dtype) {                                                                                 \
      case DType::F32: KERNEL<DType::F32><<<b_, kThreads, 0, stream>>>(__VA_ARGS__); break;          \
      case DType::BF16: KERNEL<DType::BF16><<<b_, kThreads, 0, stream>>>(__VA_ARGS__); break;        \
      case DType::F16: KERNEL<DType::F16><<<b_, kThreads, 0, stream>>>(__VA_ARGS__); break;          \
    }                                                                                                \
  } while (0)

#define GEAR_HDI __host__ __device__ __forceinline__

#if !defined(__CUDA_ARCH__)
// The host simulation's stand-in for an approximate hardware instruction: the exact value moved by the
// instruction's documented largest error, up or down as a hash of the input's bits says (deterministic,
// and both signs occur), so that the kernels' error bounds are checked against the worst the device can do.
inline float worst_case(float exact, double err, float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u ^ (u >> 16)) * 0x45d9f3bu;
  u ^= u >> 16;
  return static_cast<float>(static_cast<double>(exact) + ((u & 1u) ? err : -err));
}
inline bool subnormal(float x) { return x != 0.f && fabsf(x) < 1.17549435e-38f; }
#endif

// 2^x: the hardware approximation on the device, MUFU.EX2 (relative error at most 2 ulp, 2^-22, exact at
// integers: 2^0 = 1, so a one-hot row has entropy 0; results below 2^-126 flush to 0, as the sums need).
// The host simulation gives the exact value moved by 2^-22 either way (integers exact), flushed alike.
GEAR_HDI float ex2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  if (subnormal(x)) x = 0.f;
  const float e = exp2f(x);
  if (!(e >= 1.17549435e-38f) || e == INFINITY) return e != e ? e : e == INFINITY ? e : 0.f;
  if (x == floorf(x)) return e;
  const float y = worst_case(e, ldexp(static_cast<double>(e), -22), x);
  return y < 1.17549435e-38f ? 0.f : y;
#endif
}

// log2(x): the hardware approximation on the device, MUFU.LG2 (absolute error at most 2^-22 for x in
// [0.5, 2], at most 2 ulp of the result elsewhere; a subnormal x flushes to 0, giving -Infinity). The host
// simulation moves the exact value by that much either way.
GEAR_HDI float lg2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  if (subnormal(x)) x = 0.f;
  const float e = log2f(x);
  if (!(fabsf(e) < INFINITY)) return e;
  const double err = x >= 0.5f && x <= 2.f ? ldexp(1.0, -22) : ldexp(static_cast<double>(fabsf(e)), -22);
  return worst_case(e, err, x);
#endif
}

// Elements per 16-byte vector of each dtype (bf16 / fp16 travel as 16-bit words).
template <DType D>
struct Elems {
  static constexpr int kVec = D == DType::F32 ? 4 : 8;
};

GEAR_HDI float bf16_bits(uint32_t h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(h << 16);
#else
  const uint32_t u = h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}
GEAR_HDI float f16_bits(unsigned short h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return kern::f16_to_f32(h);
#endif
}

template <DType D>
GEAR_HDI float load1(const void* z, int64_t i) {
  if constexpr (D == DType::F32) {
#if defined(__CUDA_ARCH__)
    return __ldg(static_cast<const float*>(z) + i);
#else
    return static_cast<const float*>(z)[i];
#endif
  } else {
#if defined(__CUDA_ARCH__)
    const unsigned short h = __ldg(static_cast<const unsigned short*>(z) + i);
#else
    const unsigned short h = static_cast<const unsigned short*>(z)[i];
#endif
    if constexpr (D == DType::BF16) return bf16_bits(h);
    else return f16_bits(h);
  }
}

// load1 for a buffer the kernel may write (a backward in place): a plain coherent load, not __ldg's
// read-only path.
template <DType D>
GEAR_HDI float load1_rw(const void* z, int64_t i) {
  if constexpr (D == DType::F32) {
    return static_cast<const float*>(z)[i];
  } else {
    const unsigned short h = static_cast<const unsigned short*>(z)[i];
    if constexpr (D == DType::BF16) return bf16_bits(h);
    else return f16_bits(h);
  }
}

// Checks a vector access's 16-byte alignment in the host simulation (the device would fault).
GEAR_HDI void check_aligned(const void* p) {
#if !defined(__CUDA_ARCH__)
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    fprintf(stderr, "misaligned 16-byte access at %p\n", p);
    abort();
  }
#endif
}

// The 16-byte vector starting at element i (a multiple of kVec from a 16-byte aligned base).
template <DType D>
GEAR_HDI void load_vec(const void* z, int64_t i, float (&x)[Elems<D>::kVec]) {
  if constexpr (D == DType::F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(z) + i);
    check_aligned(p);
#if defined(__CUDA_ARCH__)
    const float4 v = __ldcs(p);
#else
    const float4 v = *p;
#endif
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  } else {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(z) + i);
    check_aligned(p);
#if defined(__CUDA_ARCH__)
    const uint4 v = __ldcs(p);
#else
    const uint4 v = *p;
#endif
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (D == DType::BF16) {
        x[2 * k] = bf16_bits(w[k] & 0xffffu);
        x[2 * k + 1] = bf16_bits(w[k] >> 16);
      } else {
        x[2 * k] = f16_bits(static_cast<unsigned short>(w[k] & 0xffffu));
        x[2 * k + 1] = f16_bits(static_cast<unsigned short>(w[k] >> 16));
      }
    }
  }
}

// ---- undecoded 16-byte vectors (the streaming row passes) ----

GEAR_HDI float as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}
GEAR_HDI uint32_t as_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
#endif
}

// The 4 words of the 16-byte vector at p, undecoded: a streaming load (the logits are read once).
GEAR_HDI void load_words(const uint4* p, uint32_t* w) {
  check_aligned(p);
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldcs(p);
#else
  const uint4 v = *p;
#endif
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
}


// Element k of words w (k < 4 for float32, < 8 for 16-bit dtypes: 2 per word, the low half first), as
// float32. bfloat16 by shifts: the low half moved up, the high half masked.
template <DType D>
GEAR_HDI float word_elem(const uint32_t* w, int k) {
  if constexpr (D == DType::F32) {
    return as_float(w[k]);
  } else if constexpr (D == DType::BF16) {
    return as_float((k & 1) ? w[k >> 1] & 0xffff0000u : w[k >> 1] << 16);
  } else {
    return f16_bits(static_cast<unsigned short>((k & 1) ? w[k >> 1] >> 16 : w[k >> 1] & 0xffffu));
  }
}

// The larger of each half of two words of 16-bit values (bf16x2 / f16x2: one HMNMX2), NaN ignored as by
// fmaxf (two NaNs give a NaN).
template <DType D>
GEAR_HDI uint32_t max2(uint32_t a, uint32_t b) {
  if constexpr (D == DType::BF16) {
    __nv_bfloat162 x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    const __nv_bfloat162 r = __hmax2(x, y);
    uint32_t u;
    memcpy(&u, &r, 4);
    return u;
  } else {
    __half2 x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    const __half2 r = __hmax2(x, y);
    uint32_t u;
    memcpy(&u, &r, 4);
    return u;
  }
}

// The largest of the first n elements' values of words w (n words for float32, 2n elements for 16-bit
// dtypes), NaN ignored as by fmaxf: 16-bit pairs reduced packed, then the larger half.
template <DType D, int N>
GEAR_HDI float words_max(const uint32_t* w) {
  if constexpr (D == DType::F32) {
    float m = as_float(w[0]);
#pragma unroll
    for (int k = 1; k < N; ++k) m = fmaxf(m, as_float(w[k]));
    return m;
  } else {
    uint32_t m = w[0];
#pragma unroll
    for (int k = 1; k < N; ++k) m = max2<D>(m, w[k]);
    return fmaxf(word_elem<D>(&m, 0), word_elem<D>(&m, 1));
  }
}

// Whether no element of words w[0..n) has bits above `lim` as an unsigned number of its width (float32,
// or 16-bit halves): for a negative `lim`, whether every element is at least its value, +0, positive or
// a positive NaN (negative NaNs and -Infinity are above every negative finite value). Three-way integer
// maxima (VIMNMX3 on sm_90).
template <DType D, int N>
GEAR_HDI bool words_at_most(const uint32_t* w, uint32_t lim) {
  uint32_t m = w[0];
  int k = 1;
  if constexpr (D == DType::F32) {
    for (; k + 1 < N; k += 2) m = __vimax3_u32(m, w[k], w[k + 1]);
    if (k < N) m = m > w[k] ? m : w[k];
    return m <= lim;
  } else {
    for (; k + 1 < N; k += 2) m = __vimax3_u16x2(m, w[k], w[k + 1]);
    if (k < N) m = __vimax3_u16x2(m, w[k], w[k]);
    return (m & 0xffffu) <= lim && (m >> 16) <= lim;
  }
}

// bfloat16 pairs raised to a floor `lo2` (a bf16x2 word), a NaN kept (HMNMX2.NAN): what the pass reads
// of an entry below a floor where its weight is 0 either way.
GEAR_HDI uint32_t bf16_floor2(uint32_t w, uint32_t lo2) {
  __nv_bfloat162 x, y;
  memcpy(&x, &w, 4);
  memcpy(&y, &lo2, 4);
  const __nv_bfloat162 r = __hmax2_nan(x, y);
  uint32_t u;
  memcpy(&u, &r, 4);
  return u;
}

// Stores 4 float32 values at a 16-byte aligned address (streaming: the output is not read again soon).
GEAR_HDI void store4(float* p, float a, float b, float c, float d) {
  check_aligned(p);
#if defined(__CUDA_ARCH__)
  __stcs(reinterpret_cast<float4*>(p), make_float4(a, b, c, d));
#else
  p[0] = a, p[1] = b, p[2] = c, p[3] = d;
#endif
}

// The element layout of row `row` of a rows x vocab view whose base is 16-byte aligned: `head` scalars up
// to the first aligned element, whole vectors from element `vec0`, then `tail` scalars. Part p of `parts`
// covers vectors [vb, ve); part 0 also takes the head, the last part the tail.
struct RowSpan {
  int64_t e0;    // first element of the row
  int64_t vec0;  // first element of the first whole vector
  int64_t vb, ve;
  int head, tail;
  bool first, last;
};

template <int kVec>
GEAR_HDI RowSpan row_span(int64_t row, int64_t vocab, int64_t part, int64_t parts) {
  RowSpan s;
  s.e0 = row * vocab;
  const int64_t mis = s.e0 % kVec;
  int64_t head = mis == 0 ? 0 : kVec - mis;
  if (head > vocab) head = vocab;
  const int64_t nvec = (vocab - head) / kVec;
  s.head = static_cast<int>(head);
  s.tail = static_cast<int>(vocab - head - nvec * kVec);
  s.vec0 = s.e0 + head;
  const int64_t per = (nvec + parts - 1) / parts;
  s.vb = part * per < nvec ? part * per : nvec;
  s.ve = s.vb + per < nvec ? s.vb + per : nvec;
  s.first = part == 0;
  s.last = part == parts - 1;
  return s;
}

// The vectors lane `lane` of a group of G reads of row span `sp` of z: every G-th from vector vb + lane,
// starting at p (n of them).
struct LaneVectors {
  const uint4* p;
  int n;
};
template <DType D>
GEAR_HDI LaneVectors lane_vectors(const void* z, const RowSpan& sp, int lane, int G) {
  const int64_t first = sp.vb + lane;
  const int n = first < sp.ve ? static_cast<int>((sp.ve - first + G - 1) / G) : 0;
  const char* base = static_cast<const char*>(z) + sp.vec0 * (D == DType::F32 ? 4 : 2);
  return LaneVectors{reinterpret_cast<const uint4*>(base) + first, n};
}

// One thread's share of item (row, part) of z copied to float32 `out` unchanged: what a backward writes for
// a row it found bad (in place, the row keeps its logits, so the error can name the bad entry; the
// output is NaN-filled after the error either way).
template <DType D>
GEAR_HDI void copy_thread(const void* z, int64_t vocab, int64_t row, int64_t part, int64_t parts, int lane, int G,
                          float* out) {
  constexpr int V = Elems<D>::kVec;
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  if (sp.first && lane < sp.head) out[sp.e0 + lane] = load1_rw<D>(z, sp.e0 + lane);
  for (int64_t j = sp.vb + lane; j < sp.ve; j += G) {
    float x[V];
    load_vec<D>(z, sp.vec0 + j * V, x);
#pragma unroll
    for (int k = 0; k < V / 4; ++k) store4(out + sp.vec0 + j * V + 4 * k, x[4 * k], x[4 * k + 1], x[4 * k + 2], x[4 * k + 3]);
  }
  if (sp.last && lane < sp.tail) {
    const int64_t e = sp.vec0 + sp.ve * V + lane;
    out[e] = load1_rw<D>(z, e);
  }
}

}  // namespace cuda
}  // namespace gear
