// segmentBroadcast kernels for AArch64 NEON: segment_kernels.inc over this ISA's vector layer,
// in its own namespace (no target region: NEON is part of the aarch64 baseline).
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "segment_kernels.h"

#if GEAR_ARM64
namespace gear {
namespace neon {
namespace {
#include "simd_neon.inc"
#include "segment_kernels.inc"
}  // namespace
}  // namespace neon
}  // namespace gear

const gear::seg::SegmentKernels gear::seg::segment_neon = gear::neon::kSegmentKernels;
#endif  // GEAR_ARM64
