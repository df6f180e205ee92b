// sparseDivergence kernels for the baseline ISA of every architecture (one lane): sparse_divergence_kernels.inc over this ISA's vector layer, in its own
// namespace (nothing compiled here leaks into other paths).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "sparse_divergence_kernels.h"

namespace gear {
namespace baseline {
namespace {
#include "simd_scalar.inc"
#include "sparse_divergence_kernels.inc"
}  // namespace
}  // namespace baseline
}  // namespace gear

const gear::sparse_kern::SparseKernels gear::sparse_kern::sparse_divergence_baseline = gear::baseline::kSparseKernels;
