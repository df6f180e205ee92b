// sparseDivergence's per-entry pass (sparse_divergence_probs.inc) for AVX2 + FMA + F16C, inside its own
// target region and namespace (nothing compiled here leaks into other paths).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gear/isa_target.h"
#include "sparse_divergence_kernels.h"

#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear {
namespace avx2 {
namespace {
using namespace sparse_kern;
#include "sparse_divergence_probs.inc"
}  // namespace
}  // namespace avx2
}  // namespace gear
GEAR_TARGET_END

const gear::sparse_kern::SideProbsFn gear::sparse_kern::side_probs_avx2 = gear::avx2::side_probs;
#endif  // GEAR_X86
