// Device queries of the CUDA module: how many devices, and device 0's architecture and name.
#include <string>

#include "device_runtime.cuh"
#include "gear/cuda.h"

namespace gear {
namespace cuda {

int device_count(std::string* err) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (err) *err = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the sticky error so later calls report their own
    return 0;
  }
  return n;
}

std::string device_arch() {
  cudaDeviceProp p;
  if (device_count(nullptr) < 1 || cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "";
  return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
}

std::string device_name() {
  cudaDeviceProp p;
  if (device_count(nullptr) < 1 || cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "";
  return p.name;
}

}  // namespace cuda
}  // namespace gear
