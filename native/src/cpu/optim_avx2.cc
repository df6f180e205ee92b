// AVX2 + FMA build of the optimizer kernels (see optim_kernels.inc).
#include <cmath>
#include <cstdint>

#include "gear/isa_target.h"
#include "optim_kernels.h"

#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear::optim_detail::avx2 {
static inline float fma32(float a, float b, float c) { return std::fma(a, b, c); }  // one vfmadd
#include "optim_kernels.inc"
}  // namespace gear::optim_detail::avx2
GEAR_TARGET_END

const gear::optim_detail::OptimKernels gear::optim_detail::optim_avx2 = gear::optim_detail::avx2::kOptimKernels;
#endif  // GEAR_X86
