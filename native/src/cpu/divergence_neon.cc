// divergence kernels for AArch64 NEON: the shared row kernels (divergence_kernels.inc) instantiated over this ISA's
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
#include "divergence_kernels.inc"
}  // namespace
}  // namespace neon
}  // namespace gear

const gear::kern::DivergenceKernels gear::kern::divergence_neon = gear::neon::kDivergenceKernels;
#endif  // GEAR_ARM64
