// Internal to the logits kernels (token_stats*, divergence*): scalar dtype conversions, the per-ISA
// kernel tables and shared argument checks. Included at the top of every per-ISA file, outside its
// `#pragma GCC target` region, so everything here is compiled for the baseline target (static inline:
// one private copy per translation unit, never merged with an ISA-specific one).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "gear/common.h"
#include "gear/divergence.h"
#include "gear/isa_target.h"
#include "gear/row_math.h"

namespace gear {
namespace kern {

// Vocabulary block walked per pass: the block max streams it from memory, the exp pass re-reads it
// from L1 while prefetching the next one.
constexpr int64_t kBlock = 2048;

static inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half -> float, exact (subnormals, infinities and NaN included).
static inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal half: normalise
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Element i of a row of dtype DT (0 float32, 1 bfloat16, 2 float16) as float.
template <int DT>
static inline float to_f32(const void* p, int64_t i) {
  if (DT == 0) return static_cast<const float*>(p)[i];
  if (DT == 1) return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

static inline float to_f32(DType dt, const void* p, int64_t i) {
  switch (dt) {
    case DType::F32: return to_f32<0>(p, i);
    case DType::BF16: return to_f32<1>(p, i);
    default: return to_f32<2>(p, i);
  }
}

// ---- token statistics kernels (one row at a time) ----
// Streams one row of n logits; returns false when the row holds NaN or +Infinity.
using RowStatsFn = bool (*)(const void* row, int64_t n, double inv_t, rowmath::SoftmaxStats* out);
// Two rows' statistics, each exactly as RowStatsFn computes it; false when either row is bad.
using RowStats2Fn = bool (*)(const void* ra, const void* rb, int64_t n, double inv_t, rowmath::SoftmaxStats* oa,
                             rowmath::SoftmaxStats* ob);
// Writes dL/dz for one row: out[v] = p_v (alpha + beta ln p_v) + [v == y] target, ln p_v = z_v/T - lse.
// y < 0: no target term. nt: non-temporal stores (out must not alias the row). False on NaN/+Infinity.
using TokenGradFn = bool (*)(const void* row, float* out, int64_t n, double inv_t, double lse,
                             rowmath::GradCoef c, int64_t y, bool nt);
struct TokenStatsKernels {
  RowStatsFn stats[3];
  RowStats2Fn stats2[3];
  TokenGradFn grad[3];
};
extern const TokenStatsKernels token_stats_baseline, token_stats_avx2, token_stats_avx512, token_stats_neon;
const TokenStatsKernels& token_stats_kernels();

// ---- divergence kernels ----
enum : int { kWantNone = 0, kWantCs = 1, kWantCt = 2 };
// Joint statistics of a student and a teacher row. On NaN/+Infinity returns false with *bad_side
// 0 (student) or 1 (teacher).
using PairStatsFn = bool (*)(const void* s, const void* t, int64_t n, double inv_t, rowmath::PairStats* out,
                             int* bad_side);
// Second pass of the JSD: given both rows' max and ln(sum exp), returns sum of the JSD terms and
// k_sm = KL(p_s || M).
using JsdFn = void (*)(const void* s, const void* t, int64_t n, double inv_t, double ms, double lns, double mt,
                       double lnt, double beta, double* jsd, double* k_sm);
struct DivGradParams {
  int kind;      // 0 reverse KL, 1 forward KL, 2 JSD
  double inv_t;
  double lse_s;  // student and teacher logsumexp of z/T
  double lse_t;
  double g;      // dL/dvalue of the row
  double value;  // reverse KL: the row's KL; JSD: KL(p_s || M)
  double beta;   // JSD mixture weight
};
using DivGradFn = bool (*)(const void* s, const void* t, float* out, int64_t n, const DivGradParams& p, bool nt,
                           int* bad_side);
struct DivergenceKernels {
  PairStatsFn pair[3][3];  // [dtype][want]
  JsdFn jsd[3];
  DivGradFn grad[3][3];  // [dtype][kind]
};
extern const DivergenceKernels divergence_baseline, divergence_avx2, divergence_avx512, divergence_neon;
const DivergenceKernels& divergence_kernels();

// ---- the first bad row of a parallel pass over rows ----
constexpr int64_t kNoRow = std::numeric_limits<int64_t>::max();  // no bad row
// a = min(a, v), from any thread.
inline void atomic_min(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// ---- shared checks (token_stats.cc) ----
// rows >= 0, vocab >= 1, rows * vocab without overflow, data present, known dtype.
Status check_logits(const LogitsView& l, const char* what);
// Describes the first NaN / +Infinity entry of row r (or an all -Infinity row) as an ERR_NON_FINITE status.
Status bad_row_status(const LogitsView& l, const char* what, int64_t r);
// Every target in [0, vocab).
Status check_targets(const int32_t* targets, int64_t rows, int64_t vocab, const char* what);
// A vocabulary shard's start in [0, 2^31) and every target >= 0 (any id may fall outside the shard).
Status check_partial_args(const int32_t* targets, int64_t rows, int64_t vocab_start);
// Rows per parallel task: about 1 MiB of logits per task (results never depend on it).
int64_t rows_per_task(int64_t rows, int64_t vocab, const ExecContext& ctx);
void fill_nan(float* p, int64_t n);
// Finite, >= 1e-30 (so 1/T is a finite float32 scale).
Status check_temperature(double t);
// Every p[i] finite (null p: nothing to check).
Status check_finite(const float* p, int64_t n, const char* what);

// ---- divergence checks (divergence.cc), shared with the CUDA module ----
// Student/teacher shapes and dtypes agree; kind, beta, temperature and klCap in range.
Status check_pair(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap);
// JSD with beta 1 / 0 is reverse / forward KL (TRL's special cases).
DivKind effective_kind(DivKind kind, double beta);
// check_pair plus the backward's incoming gradient and optional forward statistics.
Status check_backward_args(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse);

}  // namespace kern
}  // namespace gear
