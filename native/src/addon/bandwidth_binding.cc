// memoryBandwidth({ mode: 0..3, bytes, threads, reps }) -> { gbps: Float64Array(reps) }, one rate per repetition.
// Synchronous on purpose: the probe owns its threads and must not overlap other work in the process.
#include "args.h"
#include "gear/bandwidth.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value MemoryBandwidth(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"mode", "bytes", "threads", "reps"});
  const auto mode = static_cast<BandwidthMode>(p.Int("mode", 0, 3));
  const int64_t bytes = p.Int("bytes", 1, int64_t{1} << 40);
  const int threads = static_cast<int>(p.Int("threads", 1, 1024));
  const int reps = static_cast<int>(p.Int("reps", 1, 1000));
  Napi::Float64Array out = Napi::Float64Array::New(env, static_cast<size_t>(reps));
  Check(env, memory_bandwidth(mode, bytes, threads, reps, out.Data()));
  Napi::Object r = Napi::Object::New(env);
  r.Set("gbps", out);
  return r;
}

void RegisterBandwidth(Napi::Env env, Napi::Object exports) {
  exports.Set("memoryBandwidth", Napi::Function::New(env, MemoryBandwidth, "memoryBandwidth"));
}
GEAR_BINDING(RegisterBandwidth);

}  // namespace gear::addon
