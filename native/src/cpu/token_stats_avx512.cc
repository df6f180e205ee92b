// token_stats kernels for AVX-512 (F/BW/VL/DQ): the shared row kernels (token_stats_kernels.inc) instantiated over this ISA's
// vector layer, inside its own target region and namespace (nothing compiled here leaks into other paths).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gear/isa_target.h"
#include "logits_kernels.h"

#if GEAR_X86
GEAR_AVX512_DIAG_BEGIN
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace gear {
namespace avx512 {
namespace {
#include "simd_avx512.inc"
#include "row_block_ops.inc"
#include "token_stats_kernels.inc"
}  // namespace
}  // namespace avx512
}  // namespace gear
GEAR_TARGET_END
GEAR_AVX512_DIAG_END

const gear::kern::TokenStatsKernels gear::kern::token_stats_avx512 = gear::avx512::kTokenStatsKernels;
#endif  // GEAR_X86
