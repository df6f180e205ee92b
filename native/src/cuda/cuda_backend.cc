// The CUDA module's backend table: the device kernels where there are some, the CPU entries otherwise.
#include "gear/backend.h"
#include "gear/cuda.h"

// The ops of GEAR_BACKEND_OPS with a device kernel `gear::cuda::op` (gear/cuda.h). Every other op keeps
// its CPU entry (merge_token_stats: host math over the shards' per-row statistics), so a new backend op
// runs in the CUDA module without an edit here.
#define GEAR_CUDA_OPS(X)  \
  X(token_stats)          \
  X(token_stats_backward) \
  X(token_stats_partial)  \
  X(divergence)           \
  X(divergence_backward)  \
  X(segment_reduce)       \
  X(segment_broadcast)

namespace gear {
namespace cuda {

const Backend& backend() {
  static const Backend kCuda = [] {
    Backend b = cpu_backend();
    b.name = "cuda";
#define GEAR_CUDA_ENTRY(op) b.op = cuda::op;
    GEAR_CUDA_OPS(GEAR_CUDA_ENTRY)
#undef GEAR_CUDA_ENTRY
    return b;
  }();
  return kCuda;
}

}  // namespace cuda
}  // namespace gear
