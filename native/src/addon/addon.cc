// N-API module entry: registers every op family. The binding layer only converts and checks
// arguments; the math lives in plain C++ under native/src/cpu.
#include <napi.h>

#if defined(_WIN32)
#include <windows.h>
#elif defined(__APPLE__)
#include <dlfcn.h>
#endif

#include "../core/args.h"
#include "ops.h"

namespace gear::addon {

// Keeps the module mapped for the life of the process. Node unloads an addon when the last environment
// that loaded it (a worker) ends, while the process-wide thread pool's idle threads still run this
// module's code. On Linux the link flag -z nodelete does this (native/linux-ldflags.mjs).
static void PinModule() {
#if defined(_WIN32)
  HMODULE self = nullptr;
  GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                     reinterpret_cast<LPCWSTR>(reinterpret_cast<void*>(&PinModule)), &self);
#elif defined(__APPLE__)
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&PinModule), &info) != 0 && info.dli_fname != nullptr)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // the handle is never closed, on purpose
#endif
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  PinModule();
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
