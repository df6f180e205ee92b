// The backend tables: the ops a backend implements, as function pointers with the signatures of the
// public functions (gear/token_stats.h, gear/divergence.h, gear/segment.h). Those public functions
// (native/src/core/backend.cc) check their arguments once, pick the table (the CPU's, or the CUDA
// module's device table for a call with ExecContext::device >= 0), call it, and NaN-fill the outputs
// after any error, so a backend trusts its arguments and never poisons its outputs itself.
#pragma once

#include "gear/divergence.h"
#include "gear/segment.h"
#include "gear/token_stats.h"

// Every op of the table, one X(name) each, in table order: the public function `gear::name` (declared in a
// header included above) and its CPU implementation `gear::cpu::name`. `struct Backend`, the backends'
// declarations (native/src/cpu/cpu_backend.h, gear/cuda.h) and both tables are generated from this list.
#define GEAR_BACKEND_OPS(X) \
  X(token_stats)            \
  X(token_stats_backward)   \
  X(token_stats_partial)    \
  X(merge_token_stats)      \
  X(divergence)             \
  X(divergence_backward)    \
  X(segment_reduce)         \
  X(segment_broadcast)

// The ops of GEAR_BACKEND_OPS with a device kernel (`gear::cuda::name`, native/src/cuda/<name>.cu): the
// logits ops. Packed-row ops and the shard merge stay on the CPU: their inputs are host arrays, and
// host memory is faster to read than the bus to a GPU.
#define GEAR_DEVICE_OPS(X) \
  X(token_stats)           \
  X(token_stats_backward)  \
  X(token_stats_partial)   \
  X(divergence)            \
  X(divergence_backward)

namespace gear {

struct Backend {
  const char* name;  // "cpu" | "cuda"
#define GEAR_BACKEND_FIELD(op) decltype(&::gear::op) op;
  GEAR_BACKEND_OPS(GEAR_BACKEND_FIELD)
#undef GEAR_BACKEND_FIELD
};

// Device memory services of the CUDA module, used by the tensor table (core/device_tensors.h), the
// bindings (a backward's device output) and the public entries (NaN-filling a device output).
struct DeviceApi {
  // Stream-ordered pool allocation on `device`; ERR_OUT_OF_MEMORY names the bytes asked and free.
  Status (*alloc)(int device, int64_t bytes, void** out);
  void (*free)(int device, void* p);
  // NaN-fills n float32 values of device memory (an output after an error).
  void (*fill_nan)(int device, float* p, int64_t n);
};

// The CPU kernels (native/src/cpu/cpu_backend.cc); the table in effect unless another is installed.
const Backend& cpu_backend();
// The table host calls dispatch through (the CPU's).
const Backend& active_backend();
void install_backend(const Backend& b);

// The device table and its memory services, installed by the CUDA module at initialisation (null in
// the CPU module: a call with ExecContext::device >= 0 is then ERR_DEVICE).
const Backend* device_backend();
const DeviceApi* device_api();
void install_device_backend(const Backend& b, const DeviceApi& api);

}  // namespace gear
