// The CUDA module's backend table: the device kernels where there are some, the CPU entries otherwise.
#include "gear/backend.h"
#include "gear/cuda.h"

namespace gear {
namespace cuda {

const Backend& backend() {
  static const Backend kCuda{
      "cuda",
      cuda::token_stats,
      cuda::token_stats_backward,
      cuda::token_stats_partial,
      cpu_backend().merge_token_stats,  // host math over the shards' per-row statistics
      cuda::divergence,
      cuda::divergence_backward,
      cuda::segment_reduce,
      cuda::segment_broadcast,
  };
  return kCuda;
}

}  // namespace cuda
}  // namespace gear
