// AVX2 + FMA build of the optimizer kernels (see optim_kernels.inc).
#include <cmath>
#include <cstdint>

#include "gear/isa_target.h"
#include "optim_internal.h"

#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear::optim_detail::avx2 {
static inline float fma32(float a, float b, float c) { return std::fma(a, b, c); }  // one vfmadd
#include "optim_kernels.inc"
}  // namespace gear::optim_detail::avx2
GEAR_TARGET_END
#else
// Not an x86 build: dispatch never selects this ISA; keep the symbol for the table lookup.
namespace gear::optim_detail::avx2 {
const Kernels kKernels = baseline::kKernels;
}  // namespace gear::optim_detail::avx2
#endif
