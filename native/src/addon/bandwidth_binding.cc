// memoryBandwidth(mode: 0..3, bytes: number, threads: number, reps: number) -> Float64Array(reps) of GB/s.
// Synchronous on purpose: the probe owns its threads and must not overlap other work in the process.
#include "args.h"
#include "gear/bandwidth.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value MemoryBandwidth(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto mode = static_cast<BandwidthMode>(Int(info[0], "mode", 0, 3));
  const int64_t bytes = Int(info[1], "bytes", 1, int64_t{1} << 40);
  const int threads = static_cast<int>(Int(info[2], "threads", 1, 1024));
  const int reps = static_cast<int>(Int(info[3], "reps", 1, 1000));
  Napi::Float64Array out = Napi::Float64Array::New(env, static_cast<size_t>(reps));
  Check(env, memory_bandwidth(mode, bytes, threads, reps, out.Data()));
  return out;
}

void RegisterBandwidth(Napi::Env env, Napi::Object exports) {
  exports.Set("memoryBandwidth", Napi::Function::New(env, MemoryBandwidth, "memoryBandwidth"));
}

}  // namespace gear::addon
