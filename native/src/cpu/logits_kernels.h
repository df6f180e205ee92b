// Internal to the logits kernels (token_stats*, divergence*): their per-ISA kernel tables and what the
// drivers share (block size, first-bad-row tracking, task size). Included at the top of every per-ISA
// file, outside its `#pragma GCC target` region, so everything here is compiled for the baseline target
// (static inline: one private copy per translation unit, never merged with an ISA-specific one).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "gear/dtype_convert.h"
#include "gear/types.h"
#include "gear/divergence.h"
#include "gear/isa_target.h"
#include "gear/row_math.h"

namespace gear {
namespace kern {

// Vocabulary block walked per pass: the block max streams it from memory, the exp pass re-reads it
// from L1 while prefetching the next one.
constexpr int64_t kBlock = 2048;

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
// The table of the active ISA (dispatch.cc).
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
// The table of the active ISA (dispatch.cc).
const DivergenceKernels& divergence_kernels();

// ---- the first bad row of a parallel pass over rows ----
constexpr int64_t kNoRow = std::numeric_limits<int64_t>::max();  // no bad row
// a = min(a, v), from any thread.
inline void atomic_min(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Rows per parallel task: about 1 MiB of logits per task (results never depend on it); token_stats.cc.
int64_t rows_per_task(int64_t rows, int64_t vocab, const ExecContext& ctx);

}  // namespace kern
}  // namespace gear
