// The host device: a device runtime (gear/device_runtime.h) for the CPU module whose "device memory" is
// host memory and whose kernels are the CPU table, so that every device-tensor path (the tensor table,
// the bindings' device branches, uploads, downloads, device outputs, claims, aborts, out-of-memory)
// runs on a machine without a GPU. A test double, switched on by GEAR_RL_VARIANT=host-device (the
// binding installHostDevice, native/src/addon/cuda_binding.cc); it says nothing about GPU numerics or
// speed, and cannot catch host code reading device memory (here it is host memory).
//
// Two devices (cuda:0 and cuda:1), so that calls mixing devices can be tested. Each has a capacity
// (set_host_device_capacity; default the host's physical memory): an allocation beyond what is left is
// ERR_OUT_OF_MEMORY in the CUDA module's words. Nothing is cached: memory goes back to the system when
// it is freed, so trim() has nothing to return and memory() counts exactly the live allocations.
#pragma once
#include <cstdint>

#include "gear/device_runtime.h"

namespace gear {

constexpr int kHostDevices = 2;

const DeviceRuntime& host_device_runtime();

// The memory capacity of each host device in bytes, for the allocations that follow; <= 0: the host's
// physical memory. Process-wide.
void set_host_device_capacity(int64_t bytes);

}  // namespace gear
