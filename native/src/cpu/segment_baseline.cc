// segmentBroadcast kernels for the baseline of every architecture: segment_kernels.inc over this ISA's vector layer,
// in its own namespace.
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "segment_kernels.h"

namespace gear {
namespace baseline {
namespace {
#include "simd_scalar.inc"
#include "segment_kernels.inc"
}  // namespace
}  // namespace baseline
}  // namespace gear

const gear::seg::SegmentKernels gear::seg::segment_baseline = gear::baseline::kSegmentKernels;
