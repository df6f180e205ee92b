// divergence kernels for AVX2 + FMA + F16C: the shared row kernels (divergence_kernels.inc) instantiated over this ISA's
// vector layer, inside its own target region and namespace (nothing compiled here leaks into other paths).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gear/isa_target.h"
#include "logits_kernels.h"

#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear {
namespace avx2 {
namespace {
#include "simd_avx2.inc"
#include "row_block_ops.inc"
#include "divergence_kernels.inc"
}  // namespace
}  // namespace avx2
}  // namespace gear
GEAR_TARGET_END

const gear::kern::DivergenceKernels gear::kern::divergence_avx2 = gear::avx2::kDivergenceKernels;
#endif  // GEAR_X86
