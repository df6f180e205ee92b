// token_stats kernels for AVX-512 (F/BW/VL/DQ): the shared row kernels (token_stats_kernels.inc) instantiated over this ISA's
// vector layer, inside its own target region and namespace (nothing compiled here leaks into other paths).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "logits_common.h"

#pragma GCC push_options
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized on their own _mm512_undefined_* temporaries.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
namespace gear {
namespace avx512 {
namespace {
#include "simd_avx512.inc"
#include "row_kernels_common.inc"
#include "token_stats_kernels.inc"
}  // namespace
}  // namespace avx512
}  // namespace gear
#pragma GCC diagnostic pop
#pragma GCC pop_options

const gear::kern::TokenStatsKernels gear::kern::token_stats_avx512 = gear::avx512::kTokenStatsKernels;
