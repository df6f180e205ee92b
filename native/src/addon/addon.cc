// N-API module entry: registers every op family. The binding layer only converts and checks
// arguments; the math lives in plain C++ under native/src/cpu.
#include <napi.h>

#include "args.h"
#include "ops.h"

namespace gear::addon {

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("setErrorClass", Napi::Function::New(env, SetErrorClass, "setErrorClass"));
  RegisterBackend(env, exports);
  RegisterSegment(env, exports);
  RegisterBandwidth(env, exports);
  RegisterGear(env, exports);
  RegisterOptim(env, exports);
  RegisterPolicyLoss(env, exports);
  RegisterTokenStats(env, exports);
  RegisterDivergence(env, exports);
#ifdef GEAR_RL_CUDA
  RegisterCuda(env, exports);  // last: replaces backend() with the device's
#endif
  return exports;
}

}  // namespace gear::addon

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return gear::addon::Init(env, exports); }

NODE_API_MODULE(gear_rl, InitModule)
