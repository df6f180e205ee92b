// The device runtime: what rl.cuda's bindings (native/src/addon/cuda_binding.cc) and the device tensors
// need from a device, behind one table, so that the same bindings serve two runtimes:
//   the CUDA module's (gear::cuda::runtime(), native/src/cuda/cuda_runtime.cc): CUDA devices, their
//     kernels (gear/cuda.h);
//   the host device of the CPU module (gear::host_device_runtime(), native/src/core/host_device.cc): a
//     test double whose "device memory" is host memory and whose kernels are the CPU table, switched on
//     by GEAR_RL_VARIANT=host-device, so that every device-tensor path runs on machines without a GPU.
// Plain C++ (no N-API, no CUDA).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gear/backend.h"
#include "gear/types.h"

namespace gear {

// A device as rl.cuda.devices() and memory() describe it.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string arch;  // "sm_90"; "host" for the host device
  int multiprocessors = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int64_t pool_reserved_bytes = 0;  // held by the runtime's allocator (in use or cached)
  int64_t pool_used_bytes = 0;      // of which in use
};

struct DeviceRuntime {
  // backend().variant while the runtime is installed: "cuda" | "host-device".
  const char* variant;
  // The device table (calls with ExecContext::device >= 0) and its memory services.
  const Backend* backend;
  const DeviceApi* api;
  // Number of usable devices; 0 with the reason in *err when there is none.
  int (*device_count)(std::string* err);
  // Name, arch, multiprocessors and total memory of a device, without starting work on it.
  Status (*device_props)(int ordinal, DeviceInfo* out);
  // Everything of DeviceInfo, the free memory and the allocator's too.
  Status (*device_info)(int ordinal, DeviceInfo* out);
  // Runtime and driver versions (CUDA's encoding, 12040 = 12.4; 0 where there is none).
  void (*versions)(int* runtime, int* driver);
  // Returns the allocator's cached memory to the system.
  Status (*trim)(int ordinal);
  // Kernel time of the last call on the device if its logits were on the device, -1 otherwise; the
  // first query turns the timing on (and returns -1).
  Status (*kernel_ms)(int ordinal, double* out);
  // Copy bandwidth, GB/s per repetition: mode 0 device-to-device (read + write counted), 1 / 2
  // host-to-device from pinned / pageable memory, 3 / 4 device-to-host into pinned / pageable memory.
  Status (*bandwidth)(int ordinal, int mode, int64_t bytes, int reps, std::vector<double>* gbps);
  // Copies `bytes` of host memory to a new device allocation (*out; freed with DeviceApi::free), the
  // abort polled between pieces.
  Status (*upload)(int ordinal, const void* src, int64_t bytes, void** out, const ExecContext& ctx);
  // Copies `bytes` of device memory to host memory, the abort polled between pieces.
  Status (*download)(int ordinal, void* dst, const void* src, int64_t bytes, const ExecContext& ctx);
  // Page-locked host memory (freed with free_host); ERR_OUT_OF_MEMORY names the bytes asked and available.
  Status (*alloc_host)(int64_t bytes, void** out);
  void (*free_host)(void* p);
};

// The runtime in effect (null: none, the CPU module as loaded). Installing one installs its device table
// and memory services (install_device_backend) too; process-wide, like the table.
const DeviceRuntime* device_runtime();
void install_device_runtime(const DeviceRuntime& rt);

}  // namespace gear
