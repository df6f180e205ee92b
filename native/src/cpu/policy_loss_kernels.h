// Internal to the PPO policy loss (policy_loss.cc): what the driver and the per-ISA token passes
// (policy_loss_kernels.inc) share. Included outside any target region, so the scalar helpers here are
// compiled for the baseline target.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gear/types.h"

namespace gear {
namespace ppo {

constexpr int64_t kBlock = 1 << 15;  // tokens per block: the fixed partition that makes sums deterministic

// Sums of one block, added in block order by the driver.
struct Partial {
  double loss = 0, clipped = 0, lower = 0, neg_kl = 0, ratio_sum = 0;
  double ratio_min = std::numeric_limits<double>::infinity();
  double ratio_max = -std::numeric_limits<double>::infinity();
  int64_t bad = -1;  // first index with a non-finite input on a valid token
};

// What every token of one call shares.
struct Kern {
  const float* lp;
  const float* old;
  const float* adv;
  const uint8_t* mask;
  const int32_t* off;
  const float* wf;         // per-row aggregation weight rounded to float32 (0 for rows without weight)
  const double* w;         // the same in float64 (the loss sums w·L in float64)
  float* grad;
  float lo, hi, c, clamp;  // 1 - ε_low, 1 + ε_high, dual clip, log-ratio clamp (inf = none)
};

// Row of token t (offsets non-decreasing, t < offsets[rows]).
static inline int64_t row_of(const int32_t* off, int64_t rows, int64_t t) {
  return std::upper_bound(off, off + rows + 1, static_cast<int32_t>(t)) - off - 1;
}

// Tokens [b, e) of one block (b a multiple of kBlock): writes grad, adds to p. stream: the caller's
// reused gradient is large, write whole lines with streaming stores where the ISA can.
using BlockFn = void (*)(const Kern& s, int64_t rows, int64_t b, int64_t e, bool stream, Partial& p);
// Valid-token counts of rows [r0, r1); false when a mask byte is neither 0 nor 1.
using CountRowsFn = bool (*)(const uint8_t* mask, const int32_t* off, int64_t r0, int64_t r1, double* cnt);

struct PolicyLossKernels {
  BlockFn block;          // no log-ratio clamp (clamp = inf)
  BlockFn block_clamped;  // a finite log-ratio clamp
  CountRowsFn count_rows;
  bool streams;           // block honours `stream`
};
// One table per ISA level (isa_kernels.inc).

}  // namespace ppo
}  // namespace gear
