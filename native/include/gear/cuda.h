// The CUDA module's device backend: one `gear::cuda::op` per op of GEAR_DEVICE_OPS (gear/backend.h),
// declared with the type of the public function it stands behind (as the CPU backend's are), and the
// device services the bindings use: devices, uploads and downloads, pinned host memory, the pool.
// Compiled only into the separate gear_rl_cuda module.
//
// The ops run on device ExecContext::device with checked arguments (native/src/core/backend.cc): logits
// views with `on_device` are device memory, others host memory staged through pinned memory; per-row
// arrays are host memory; a backward's rows x vocab output is device memory when ctx.out_on_device.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gear/backend.h"
#include "gear/device_runtime.h"
#include "gear/types.h"

namespace gear {
namespace cuda {

#define GEAR_CUDA_DECLARE(op) decltype(::gear::op) op;
GEAR_DEVICE_OPS(GEAR_CUDA_DECLARE)
#undef GEAR_CUDA_DECLARE

// The device table (cuda_backend.cc) and the memory services behind gear::DeviceApi (runtime.cc).
const Backend& backend();
const DeviceApi& device_api_impl();
// The runtime the bindings use (cuda_runtime.cc): the table, the services and the functions below.
const DeviceRuntime& runtime();

// Number of usable devices; on failure (no driver, no device) 0 with the CUDA error in *err.
int device_count(std::string* err);

using ::gear::DeviceInfo;
Status device_info(int ordinal, DeviceInfo* out);
// Frees what the device keeps between calls: the pool's cached memory, the call arenas (device and
// page-locked) and the page-locked staging ring. The next call that needs them allocates them again.
Status trim(int ordinal);
// trim() on every device this process has used (none is initialised by it): for the teardown of the last
// environment (JavaScript thread) using the module, so that nothing the library cached is left allocated.
void release_all_cached();
// Kernel time (CUDA events) of the last call on `ordinal` if its logits were on the device; -1 otherwise.
// The events are recorded only once this has been asked on the device (the first query turns the timing
// on and returns -1): they cost every call two stream operations.
Status kernel_ms(int ordinal, double* out);
// Copy bandwidth, GB/s per repetition (CUDA events): mode 0 device-to-device (read + write counted),
// 1 / 2 host-to-device from pinned / pageable memory, 3 / 4 device-to-host into pinned / pageable memory.
Status bandwidth(int ordinal, int mode, int64_t bytes, int reps, std::vector<double>* gbps);

// Copies `bytes` of host memory to a new device allocation (*out; freed with DeviceApi::free). Pinned
// sources are copied directly, pageable ones through the staging ring.
Status upload(int ordinal, const void* src, int64_t bytes, void** out, const ExecContext& ctx);
// Copies `bytes` of device memory to host memory. Transfers from and to pinned memory go in pieces, the
// abort polled between them.
Status download(int ordinal, void* dst, const void* src, int64_t bytes, const ExecContext& ctx);
// Page-locked host memory, usable with every device (freed with free_host). ERR_OUT_OF_MEMORY names the
// bytes asked and the host memory available; ERR_DEVICE without a device.
Status alloc_host(int64_t bytes, void** out);
void free_host(void* p);

}  // namespace cuda
}  // namespace gear
