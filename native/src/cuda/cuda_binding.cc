// CUDA module only: installs the CUDA backend table (the logits and segment ops then run on the device),
// adds cudaDevices() for the loader's probe, and replaces backend() with one reporting the device.
//   cudaDevices() -> { count, error, arch, name }   (count 0 and the CUDA error when there is no usable GPU)
#include <cuda_runtime_api.h>

#include "../addon/args.h"
#include "../addon/ops.h"
#include "gear/backend.h"
#include "gear/cuda.h"
#include "gear/thread_pool.h"

#ifndef GEAR_RL_VERSION
#define GEAR_RL_VERSION "0.0.0"
#endif

namespace gear::addon {

static Napi::Value CudaDevices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string err;
  const int n = cuda::device_count(&err);
  Napi::Object o = Napi::Object::New(env);
  o.Set("count", n);
  o.Set("error", err);
  o.Set("arch", n > 0 ? cuda::device_arch() : std::string());
  o.Set("name", n > 0 ? cuda::device_name() : std::string());
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  o.Set("runtimeVersion", rt);
  return o;
}

static Napi::Value CudaBackend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  const std::string arch = cuda::device_arch();
  o.Set("variant", "cuda");
  o.Set("isa", arch.empty() ? std::string("cuda (no device)") : arch);
  o.Set("detectedIsa", arch);
  o.Set("threads", global_pool().threads());
  o.Set("version", GEAR_RL_VERSION);
  return o;
}

void RegisterCuda(Napi::Env env, Napi::Object exports) {
  install_backend(cuda::backend());  // module init: before any op can run
  exports.Set("cudaDevices", Napi::Function::New(env, CudaDevices, "cudaDevices"));
  exports.Set("backend", Napi::Function::New(env, CudaBackend, "backend"));  // replaces the CPU one
}
GEAR_BINDING_ORDERED(RegisterCuda, kBindingLast);  // after the CPU module's backend(), which it replaces

}  // namespace gear::addon
