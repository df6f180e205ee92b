// Baseline build of the optimizer kernels (see optim_kernels.inc): every architecture's portable path.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "optim_kernels.h"

// No contraction anywhere in this file: the scalars below follow Python's double arithmetic (the build
// flags say -ffp-contract=off too; this keeps it when the file is compiled on its own).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
namespace gear::optim_detail::baseline {
#if defined(__FMA__) || defined(__aarch64__)
static inline float fma32(float a, float b, float c) { return std::fma(a, b, c); }
#else
// Correctly rounded float32 fma without FMA hardware (glibc's fmaf is a slow out-of-line call): a*b is
// exact in double; the double sum s plus its exact error e (TwoSum) give s rounded to odd, and
// rounding a round-to-odd double (53 >= 2*24 + 2 bits) to float is the correctly rounded result.
static inline float fma32(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double cd = static_cast<double>(c);
  const double s = p + cd;
  const double bb = s - p;
  const double e = (p - (s - bb)) + (cd - bb);
  uint64_t u;
  std::memcpy(&u, &s, sizeof u);
  // inexact and s even: step one ulp toward the exact value (s finite; e is NaN otherwise)
  if (e != 0 && e == e && (u & 1) == 0) u += ((e > 0) == (s > 0)) ? 1 : static_cast<uint64_t>(-1);
  double r;
  std::memcpy(&r, &u, sizeof r);
  return static_cast<float>(r);
}
#endif
#include "optim_kernels.inc"
}  // namespace gear::optim_detail::baseline

const gear::optim_detail::OptimKernels gear::optim_detail::optim_baseline = gear::optim_detail::baseline::kOptimKernels;
