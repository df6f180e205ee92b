// The CUDA module's device runtime (gear/device_runtime.h): its device table and memory services, and
// the device services of gear/cuda.h, plus the two queries that need no device context.
#include <cuda_runtime_api.h>

#include "gear/cuda.h"
#include "gear/device_runtime.h"

namespace gear {
namespace cuda {

namespace {
// From the device properties only: creates no context (rl.cuda.devices() must not start a device).
Status device_props(int ordinal, DeviceInfo* out) {
  cudaDeviceProp p;
  const cudaError_t e = cudaGetDeviceProperties(&p, ordinal);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return error(Code::Device, std::string("device: expected the properties of cuda:") + std::to_string(ordinal) +
                                   ", got " + cudaGetErrorName(e));
  }
  out->ordinal = ordinal;
  out->name = p.name;
  out->arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  out->multiprocessors = p.multiProcessorCount;
  out->total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  return Status::ok();
}

void versions(int* runtime, int* driver) {
  *runtime = 0;
  *driver = 0;
  cudaRuntimeGetVersion(runtime);
  cudaDriverGetVersion(driver);
}
}  // namespace

const DeviceRuntime& runtime() {
  static const DeviceRuntime kRuntime{"cuda", &backend(), &device_api_impl(), device_count, device_props,
                                      device_info, versions, trim, kernel_ms, bandwidth, upload, download,
                                      alloc_host, free_host};
  return kRuntime;
}

}  // namespace cuda
}  // namespace gear
