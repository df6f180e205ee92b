// segmentBroadcast kernels for the baseline ISA of every architecture (one lane): segment_kernels.inc over this ISA's vector layer, in its own
// namespace (nothing compiled here leaks into other paths).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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
