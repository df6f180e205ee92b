// token_stats kernels for AArch64 NEON: the shared row kernels (token_stats_kernels.inc) instantiated over this ISA's
// vector layer, in its own namespace. Advanced SIMD is part of the aarch64 baseline, so unlike the x86
// files there is no target region; on x86-64 this file compiles to nothing.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gear/isa_target.h"
#include "logits_kernels.h"

#if GEAR_ARM64
namespace gear {
namespace neon {
namespace {
#include "simd_neon.inc"
#include "row_block_ops.inc"
#include "token_stats_kernels.inc"
}  // namespace
}  // namespace neon
}  // namespace gear

const gear::kern::TokenStatsKernels gear::kern::token_stats_neon = gear::neon::kTokenStatsKernels;
#endif  // GEAR_ARM64
