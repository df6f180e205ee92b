// token_stats kernels for the baseline ISA of any architecture (scalar, auto-vectorised by the compiler): the shared row kernels (token_stats_kernels.inc) instantiated over this ISA's
// vector layer, inside its own target region and namespace (nothing compiled here leaks into other paths).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "logits_kernels.h"

namespace gear {
namespace baseline {
namespace {
#include "simd_scalar.inc"
#include "row_block_ops.inc"
#include "token_stats_kernels.inc"
}  // namespace
}  // namespace baseline
}  // namespace gear

const gear::kern::TokenStatsKernels gear::kern::token_stats_baseline = gear::baseline::kTokenStatsKernels;
