// segmentBroadcast kernels for AVX2 + FMA + F16C: segment_kernels.inc over this ISA's vector layer,
// in its own target region and namespace (nothing here leaks into other paths).
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "segment_kernels.h"

#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear {
namespace avx2 {
namespace {
#include "simd_avx2.inc"
#include "segment_kernels.inc"
}  // namespace
}  // namespace avx2
}  // namespace gear
GEAR_TARGET_END

const gear::seg::SegmentKernels gear::seg::segment_avx2 = gear::avx2::kSegmentKernels;
#endif  // GEAR_X86
