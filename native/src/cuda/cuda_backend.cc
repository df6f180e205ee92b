// The CUDA module's device table: the device kernels of GEAR_DEVICE_OPS (gear/backend.h); the other ops
// keep their CPU entries (a call never reaches them with a device: their bindings have none).
#include "gear/backend.h"
#include "gear/cuda.h"

namespace gear {
namespace cuda {

const Backend& backend() {
  static const Backend kCuda = [] {
    Backend b = cpu_backend();
    b.name = "cuda";
#define GEAR_CUDA_ENTRY(op) b.op = cuda::op;
    GEAR_DEVICE_OPS(GEAR_CUDA_ENTRY)
#undef GEAR_CUDA_ENTRY
    return b;
  }();
  return kCuda;
}

}  // namespace cuda
}  // namespace gear
