// token_stats kernels for baseline x86-64 (scalar): the shared row kernels (token_stats_kernels.inc) instantiated over this ISA's
// vector layer, inside its own target region and namespace (nothing compiled here leaks into other paths).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "logits_common.h"

namespace gear {
namespace baseline {
namespace {
#include "simd_scalar.inc"
#include "row_kernels_common.inc"
#include "token_stats_kernels.inc"
}  // namespace
}  // namespace baseline
}  // namespace gear

const gear::kern::TokenStatsKernels gear::kern::token_stats_baseline = gear::baseline::kTokenStatsKernels;
