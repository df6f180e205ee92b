// What the logits kernels (token_stats, divergence) and their drivers share: the block size, the
// first-bad-row tracking, the task size. Included by the drivers outside any target region, so
// everything here is compiled for the baseline target.
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
