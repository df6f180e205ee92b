// token_stats kernels for AVX2 + FMA + F16C: the shared row kernels (token_stats_kernels.inc) instantiated over this ISA's
// vector layer, inside its own target region and namespace (nothing compiled here leaks into other paths).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "logits_common.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace gear {
namespace avx2 {
namespace {
#include "simd_avx2.inc"
#include "row_kernels_common.inc"
#include "token_stats_kernels.inc"
}  // namespace
}  // namespace avx2
}  // namespace gear
#pragma GCC pop_options

const gear::kern::TokenStatsKernels gear::kern::token_stats_avx2 = gear::avx2::kTokenStatsKernels;
