// Internal to the PPO policy loss (policy_loss*.cc): what the driver and the per-ISA token passes
// share. Included at the top of every per-ISA file, outside its target region, so the scalar helpers
// here are compiled for the baseline target (static inline: one private copy per translation unit).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
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

// One token in float32 (as verl computes this loss in torch float32), with torch's gradient conventions
// (see ts/losses/policy_loss.ts, ppoTerms); the loss and metric sums are float64. Returns the gradient.
// The vector passes send here every token they do not handle themselves (non-finite inputs, an
// overflowing log-ratio), so all paths share these rules.
static inline float token_scalar(const Kern& s, int64_t t, uint8_t mt, double w, float wf, Partial& p) {
  const float a = s.adv[t], lp = s.lp[t], od = s.old[t];
  if (mt && !(std::isfinite(a) && std::isfinite(lp) && std::isfinite(od))) {
    if (p.bad < 0) p.bad = t;
    return 0.0f;
  }
  // lp - od may overflow to ±inf for finite inputs; the clamp (or exp) handles that like torch does.
  float x = lp - od, dx = 1;
  if (x < -s.clamp) { x = -s.clamp; dx = 0; } else if (x > s.clamp) { x = s.clamp; dx = 0; }
  const float r = std::exp(x);
  const float na = -a;
  // The float32 ratio overflows to inf for δ > 88.7 (the float64 path's ratio stays finite): a zero
  // advantage keeps a zero L1, and zero derivatives select 0 instead of multiplying inf by 0.
  const float L1 = a == 0 ? 0.0f : na * r;
  float rc = r;
  bool in_r = true;
  if (r < s.lo) { rc = s.lo; in_r = false; } else if (r > s.hi) { rc = s.hi; in_r = false; }
  const float L2 = na * rc;
  const float d1 = dx != 0 ? L1 : 0.0f;
  const float d2 = dx != 0 && in_r ? L1 : 0.0f;
  const float Lc = std::max(L1, L2);
  const float dc = L1 > L2 ? d1 : L2 > L1 ? d2 : 0.5f * (d1 + d2);
  float Lt = Lc, dt = dc;
  double low = 0;
  if (a < 0) {
    const float L3 = na * s.c;
    Lt = std::min(L3, Lc);
    dt = L3 < Lc ? 0 : Lc < L3 ? dc : 0.5f * dc;
    low = Lc > L3 ? 1 : 0;
  }
  if (!mt) return 0.0f;
  p.loss += w * static_cast<double>(Lt);
  p.clipped += L2 > L1 ? 1 : 0;
  p.lower += low;
  p.neg_kl -= static_cast<double>(x);
  p.ratio_sum += static_cast<double>(r);
  p.ratio_min = std::min(p.ratio_min, static_cast<double>(r));
  p.ratio_max = std::max(p.ratio_max, static_cast<double>(r));
  return wf * dt;
}

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
// One table per ISA level, each in its own translation unit (aarch64 uses the baseline one).
extern const PolicyLossKernels policy_loss_baseline, policy_loss_avx2, policy_loss_avx512;
// The table of the active ISA (dispatch.cc).
const PolicyLossKernels& policy_loss_kernels();

}  // namespace ppo
}  // namespace gear
