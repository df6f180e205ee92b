// backend(), setNumThreads(), setIsa(): what the addon runs on, and the knobs tests use to exercise
// every path on one machine.
#include "args.h"
#include "gear/dispatch.h"
#include "gear/thread_pool.h"
#include "ops.h"

#ifndef GEAR_RL_VERSION
#define GEAR_RL_VERSION "0.0.0"
#endif

namespace gear::addon {

static Napi::Value Backend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("variant", "cpu");
  o.Set("isa", isa_name(active_isa()));
  o.Set("detectedIsa", isa_name(detected_isa()));
  o.Set("threads", global_pool().threads());
  o.Set("version", GEAR_RL_VERSION);
  return o;
}

static Napi::Value SetNumThreads(const Napi::CallbackInfo& info) {
  int64_t n = Int(info[0], "threads", 1, 1024);
  global_pool().resize(static_cast<int>(n));
  return info.Env().Undefined();
}

static Napi::Value SetIsa(const Napi::CallbackInfo& info) {
  std::string s = String(info[0], "isa");
  Isa isa;
  if (!parse_isa(s.c_str(), &isa))
    Throw(info.Env(), Code::Option, "isa: expected 'baseline', 'avx2' or 'avx512', got \"" + s + "\"");
  return Napi::String::New(info.Env(), isa_name(set_isa(isa)));
}

void RegisterBackend(Napi::Env env, Napi::Object exports) {
  exports.Set("backend", Napi::Function::New(env, Backend, "backend"));
  exports.Set("setNumThreads", Napi::Function::New(env, SetNumThreads, "setNumThreads"));
  exports.Set("setIsa", Napi::Function::New(env, SetIsa, "setIsa"));
}

}  // namespace gear::addon
