// N-API module entry: runs every op family's registration (each binding file registers itself with
// GEAR_BINDING, ops.h). The binding layer only converts and checks arguments; the math lives in plain
// C++ under native/src/cpu.
#include <napi.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(_WIN32)
#include <windows.h>
#elif defined(__APPLE__)
#include <dlfcn.h>
#endif

#include "args.h"
#include "ops.h"

namespace gear::addon {

namespace {
struct Binding {
  const char* name;
  RegisterFn fn;
  int order;
};
// Function-local: filled while static objects are constructed, whatever the order of the files.
std::vector<Binding>& bindings() {
  static std::vector<Binding> list;
  return list;
}
}  // namespace

BindingRegistrar::BindingRegistrar(const char* name, RegisterFn fn, int order) {
  bindings().push_back({name, fn, order});
}

void RegisterAll(Napi::Env env, Napi::Object exports) {
  // Sorted once (every JS environment that loads the module, workers included, runs Init).
  static const std::vector<Binding> sorted = [] {
    std::vector<Binding> list = bindings();
    std::sort(list.begin(), list.end(), [](const Binding& a, const Binding& b) {
      return a.order != b.order ? a.order < b.order : std::strcmp(a.name, b.name) < 0;
    });
    return list;
  }();
  for (const Binding& b : sorted) b.fn(env, exports);
}

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
  RegisterAll(env, exports);
  return exports;
}

}  // namespace gear::addon

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return gear::addon::Init(env, exports); }

NODE_API_MODULE(gear_rl, InitModule)
