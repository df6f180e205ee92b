// rl.cuda's native functions over the device runtime in effect (gear/device_runtime.h), and backend()
// extended with its devices. Parameter and result objects are declared in ts/core/addon_types.ts.
//   cudaDevices()                                    -> { count, error, runtimeVersion, devices: [...] }
//   cudaMemory({ device })                           -> { freeBytes, totalBytes, poolReservedBytes, ... }
//   cudaTrim({ device })
//   cudaUpload({ logits, device, async, abort })     -> { tensor, device, rows, vocab, dtype, bytes }
//   cudaDownload({ tensor, out, async, abort })      -> { data }
//   cudaDispose({ tensor, whenFree })
//   cudaAllocHost({ bytes })                         -> ArrayBuffer of page-locked memory
//   cudaKernelMs({ device }), cudaBandwidth({ device, mode, bytes, reps })   (benchmarks)
// The CUDA module installs its runtime (gear::cuda::runtime()) and these functions when it loads. The CPU
// module has them only once installHostDevice({ memoryBytes }) has installed the host device
// (core/host_device.h), a test double of a GPU that GEAR_RL_VARIANT=host-device switches on.
#include <atomic>
#include <memory>

#include "logits_args.h"
#include "ops.h"
#include "args.h"
#include "../core/checks.h"
#include "../core/device_tensors.h"
#include "invoke.h"
#include "gear/backend.h"
#include "gear/device_runtime.h"
#if defined(GEAR_RL_CUDA)
#include "gear/cuda.h"
#else
#include "../core/host_device.h"
#endif

namespace gear::addon {

// The runtime in effect: these functions exist only once one is installed.
static const DeviceRuntime& rt() { return *device_runtime(); }

static Napi::Value CudaDevices(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string err;
  const int n = rt().device_count(&err);
  Napi::Object o = Napi::Object::New(env);
  o.Set("count", n);
  o.Set("error", err);
  int runtime = 0, driver = 0;
  rt().versions(&runtime, &driver);
  o.Set("runtimeVersion", runtime);
  o.Set("driverVersion", driver);
  Napi::Array list = Napi::Array::New(env, static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    DeviceInfo p;
    Napi::Object d = Napi::Object::New(env);
    d.Set("index", i);
    if (rt().device_props(i, &p).is_ok()) {
      d.Set("name", p.name);
      d.Set("arch", p.arch);
      d.Set("multiprocessors", p.multiprocessors);
      d.Set("totalBytes", static_cast<double>(p.total_bytes));
    }
    list.Set(static_cast<uint32_t>(i), d);
  }
  o.Set("devices", list);
  return o;
}

static Napi::Value CudaMemory(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"device"});
  const int dev = static_cast<int>(p.Int("device", 0, 1 << 20));
  DeviceInfo d;
  Check(env, rt().device_info(dev, &d));
  int64_t count = 0, bytes = 0;
  tensor_table().usage(dev, &count, &bytes);
  Napi::Object o = Napi::Object::New(env);
  o.Set("device", dev);
  o.Set("freeBytes", static_cast<double>(d.free_bytes));
  o.Set("totalBytes", static_cast<double>(d.total_bytes));
  o.Set("poolReservedBytes", static_cast<double>(d.pool_reserved_bytes));
  o.Set("poolUsedBytes", static_cast<double>(d.pool_used_bytes));
  o.Set("tensors", static_cast<double>(count));
  o.Set("tensorBytes", static_cast<double>(bytes));
  return o;
}

static Napi::Value CudaTrim(const Napi::CallbackInfo& info) {
  const Params p(info, {"device"});
  Check(info.Env(), rt().trim(static_cast<int>(p.Int("device", 0, 1 << 20))));
  return info.Env().Undefined();
}

static Napi::Value CudaUpload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"logits", "device", "async", "abort"});
  const Params lp = LogitsParams(p, "logits");
  const Claims claims = std::make_shared<TensorClaims>();
  int ldev;
  const LogitsView l = ReadLogits(lp, claims, &ldev);
  if (ldev >= 0) Throw(env, Code::Device, "logits: expected host memory to upload, got a device tensor");
  Check(env, check_logits(l, "logits"));  // the shape against the array, as every logits entry checks it
  const int dev = static_cast<int>(p.Int("device", 0, 1 << 20));
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  auto made = std::make_shared<NewTensor>();
  made->device = dev, made->rows = l.rows, made->vocab = l.vocab, made->dtype = l.dtype;
  Napi::Object result = Napi::Object::New(env);
  return Run(p, async,
             [=](const ExecContext& ctx) { return rt().upload(dev, l.data, made->bytes(), &made->ptr, ctx); }, result,
             abort, [=](Napi::Object r) {
               const Napi::Object o = AdoptTensor(r.Env(), *made);
               for (const char* k : {"tensor", "device", "rows", "vocab", "dtype", "bytes"}) r.Set(k, o.Get(k));
             });
}

static Napi::Value CudaDownload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"tensor", "out", "async", "abort"});
  const Claims claims = std::make_shared<TensorClaims>();
  int dev;
  const LogitsView l = ReadTensor(p, claims, Access::Read, &dev);
  const int64_t n = l.rows * l.vocab;
  Napi::Value out;
  void* dst = nullptr;
  if (l.dtype == DType::F32) {
    Napi::Float32Array a = OutF32(p, "out", n);
    dst = n > 0 ? a.Data() : nullptr;
    out = a;
  } else if (p.Has("out")) {
    auto a = p.U16("out", n);
    dst = a.data;
    out = p.Get("out");
  } else {
    Napi::Uint16Array a = Napi::Uint16Array::New(env, static_cast<size_t>(n));
    dst = n > 0 ? a.Data() : nullptr;
    out = a;
  }
  const int64_t bytes = n * dtype_size(l.dtype);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  result.Set("data", out);
  return Run(p, async,
             [=](const ExecContext& ctx) {
               (void)claims;
               return rt().download(dev, dst, l.data, bytes, ctx);
             },
             result, abort);
}

static Napi::Value CudaDispose(const Napi::CallbackInfo& info) {
  const Params p(info, {"tensor", "whenFree"});
  const uint64_t id = static_cast<uint64_t>(p.Int("tensor", 1, kMaxSafeInt));
  if (p.OptBool("whenFree")) tensor_table().dispose_when_free(id);
  else Check(info.Env(), tensor_table().dispose(id));
  return info.Env().Undefined();
}

static Napi::Value CudaAllocHost(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"bytes"});
  const int64_t bytes = p.Int("bytes", 0, int64_t{1} << 44);
  void* ptr = nullptr;
  Check(env, rt().alloc_host(bytes, &ptr));
  // Freed when the ArrayBuffer is collected; here when it cannot be made (the finalizer is then not set).
  try {
    void (*free_host)(void*) = rt().free_host;  // the allocator's own free
    return Napi::ArrayBuffer::New(env, ptr, static_cast<size_t>(bytes), [free_host](Napi::Env, void* data) { free_host(data); });
  } catch (...) {
    rt().free_host(ptr);
    throw;
  }
}

// cudaKernelMs({ device }) -> kernel time of the last call on device logits (ms; -1 when there was none).
// The first query turns the kernel timing on for the device (it returns -1); a bench asks once first.
static Napi::Value CudaKernelMs(const Napi::CallbackInfo& info) {
  const Params p(info, {"device"});
  double ms = -1.0;
  Check(info.Env(), rt().kernel_ms(static_cast<int>(p.Int("device", 0, 1 << 20)), &ms));
  return Napi::Number::New(info.Env(), ms);
}

// cudaBandwidth({ device, mode, bytes, reps }) -> Float64Array of GB/s (mode: see gear/cuda.h)
static Napi::Value CudaBandwidth(const Napi::CallbackInfo& info) {
  const Params p(info, {"device", "mode", "bytes", "reps"});
  const int dev = static_cast<int>(p.Int("device", 0, 1 << 20));
  const int mode = static_cast<int>(p.Int("mode", 0, 4));
  const int64_t bytes = p.Int("bytes", 1, int64_t{1} << 40);
  const int reps = static_cast<int>(p.Int("reps", 1, 1000));
  std::vector<double> gbps;
  Check(info.Env(), rt().bandwidth(dev, mode, bytes, reps, &gbps));
  Napi::Float64Array out = Napi::Float64Array::New(info.Env(), gbps.size());
  for (size_t i = 0; i < gbps.size(); ++i) out[i] = gbps[i];
  return out;
}

// Adds rl.cuda's functions to `exports` and wraps its backend(): the CPU module's description (its
// instruction sets stay in effect for host calls) plus the runtime's variant and device count.
static void AddDeviceFunctions(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaDevices", Napi::Function::New(env, CudaDevices, "cudaDevices"));
  exports.Set("cudaMemory", Napi::Function::New(env, CudaMemory, "cudaMemory"));
  exports.Set("cudaTrim", Napi::Function::New(env, CudaTrim, "cudaTrim"));
  exports.Set("cudaUpload", Napi::Function::New(env, CudaUpload, "cudaUpload"));
  exports.Set("cudaDownload", Napi::Function::New(env, CudaDownload, "cudaDownload"));
  exports.Set("cudaDispose", Napi::Function::New(env, CudaDispose, "cudaDispose"));
  exports.Set("cudaAllocHost", Napi::Function::New(env, CudaAllocHost, "cudaAllocHost"));
  exports.Set("cudaKernelMs", Napi::Function::New(env, CudaKernelMs, "cudaKernelMs"));
  exports.Set("cudaBandwidth", Napi::Function::New(env, CudaBandwidth, "cudaBandwidth"));
  auto cpu = std::make_shared<Napi::FunctionReference>(Napi::Persistent(exports.Get("backend").As<Napi::Function>()));
  exports.Set("backend", Napi::Function::New(env, [cpu](const Napi::CallbackInfo&) -> Napi::Value {
                Napi::Object o = cpu->Call({}).As<Napi::Object>();
                std::string err;
                o.Set("variant", rt().variant);
                o.Set("devices", rt().device_count(&err));
                return o;
              }, "backend"));
}

#if defined(GEAR_RL_CUDA)
// Environments (the main thread, workers) that loaded the module; the last one to end frees what the
// library cached on the devices (cuda::release_all_cached). Its hook runs after the environment's calls
// and tensors are gone: hooks run last-registered first, and the jobs' one is registered at the first call.
static std::atomic<int> g_cuda_envs{0};

void RegisterCuda(Napi::Env env, Napi::Object exports) {
  install_device_runtime(cuda::runtime());  // module init: before any op can run
  g_cuda_envs.fetch_add(1);
  napi_add_env_cleanup_hook(env, [](void*) { if (g_cuda_envs.fetch_sub(1) == 1) cuda::release_all_cached(); }, nullptr);
  AddDeviceFunctions(env, exports);
}
#else
// installHostDevice({ memoryBytes }): installs the host device (process-wide, as the kernel table is)
// and adds rl.cuda's functions to this environment's exports; again: sets the capacity only.
// memoryBytes: each host device's capacity (0: the host's physical memory).
void RegisterCuda(Napi::Env env, Napi::Object exports) {
  auto self = std::make_shared<Napi::ObjectReference>(Napi::Persistent(exports));
  exports.Set("installHostDevice", Napi::Function::New(env, [self](const Napi::CallbackInfo& info) -> Napi::Value {
                const Params p(info, {"memoryBytes"});
                const int64_t bytes = p.Has("memoryBytes") ? p.Int("memoryBytes", 0, kMaxSafeInt) : 0;
                const DeviceRuntime* now = device_runtime();
                if (now != nullptr && now != &host_device_runtime())
                  Throw(info.Env(), Code::Internal, "installHostDevice: expected no other device runtime, got one");
                set_host_device_capacity(bytes);
                install_device_runtime(host_device_runtime());
                Napi::Object e = self->Value();
                if (!e.Has("cudaUpload")) AddDeviceFunctions(info.Env(), e);
                return info.Env().Undefined();
              }, "installHostDevice"));
}
#endif
GEAR_BINDING_ORDERED(RegisterCuda, kBindingLast);  // after the CPU module's backend(), which it wraps

}  // namespace gear::addon
