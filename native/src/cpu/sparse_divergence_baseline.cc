// sparseDivergence kernels for the baseline of every architecture: sparse_divergence_kernels.inc over this ISA's vector layer,
// in its own namespace.
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
