// backend(), setNumThreads({ threads }), setIsa({ isa }): what the addon runs on, and the knobs tests use to exercise
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
  Isa list[4];
  const int n = available_isas(list);
  Napi::Array isas = Napi::Array::New(env, static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) isas.Set(static_cast<uint32_t>(i), isa_name(list[i]));
  o.Set("isas", isas);
  o.Set("threads", global_pool().threads());
  o.Set("version", GEAR_RL_VERSION);
  return o;
}

static Napi::Value SetNumThreads(const Napi::CallbackInfo& info) {
  const Params p(info, {"threads"});
  const int64_t n = p.Int("threads", 1, 1024);
  global_pool().resize(static_cast<int>(n));
  return info.Env().Undefined();
}

static Napi::Value SetIsa(const Napi::CallbackInfo& info) {
  const Params p(info, {"isa"});
  const std::string s = p.String("isa");
  Isa isa;
  if (!parse_isa(s.c_str(), &isa))
    Throw(info.Env(), Code::Option, "isa: expected 'baseline', 'avx2', 'avx512' or 'neon', got \"" + s + "\"");
  if (!isa_of_this_arch(isa))
    Throw(info.Env(), Code::Option,
          "isa: expected an instruction set of this architecture (" + std::string(isa_name(Isa::Baseline)) +
              (isa_of_this_arch(Isa::Neon) ? ", neon" : ", avx2, avx512") + "), got \"" + s + "\"");
  return Napi::String::New(info.Env(), isa_name(set_isa(isa)));
}

void RegisterBackend(Napi::Env env, Napi::Object exports) {
  exports.Set("backend", Napi::Function::New(env, Backend, "backend"));
  exports.Set("setNumThreads", Napi::Function::New(env, SetNumThreads, "setNumThreads"));
  exports.Set("setIsa", Napi::Function::New(env, SetIsa, "setIsa"));
}
GEAR_BINDING(RegisterBackend);

}  // namespace gear::addon
