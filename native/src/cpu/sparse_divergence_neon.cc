// sparseDivergence kernels for AArch64 NEON: sparse_divergence_kernels.inc over this ISA's vector layer,
// in its own namespace (no target region: NEON is part of the aarch64 baseline).
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "sparse_divergence_kernels.h"

#if GEAR_ARM64
namespace gear {
namespace neon {
namespace {
#include "simd_neon.inc"
#include "sparse_divergence_kernels.inc"
}  // namespace
}  // namespace neon
}  // namespace gear

const gear::sparse_kern::SparseKernels gear::sparse_kern::sparse_divergence_neon = gear::neon::kSparseKernels;
#endif  // GEAR_ARM64
