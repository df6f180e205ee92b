// Self-registering bindings: each binding file (one per op family, named like the op) ends with
//   GEAR_BINDING(RegisterFoo);
// at namespace scope, which adds RegisterFoo to a process-wide list while the module's static objects
// are constructed; the module's Init (addon.cc) then runs every entry. Nothing else names the binding,
// so every build must link the binding objects themselves (they all do: no static library in between,
// where a linker would drop an object nothing refers to).
#pragma once
#include <napi.h>

namespace gear::addon {

using RegisterFn = void (*)(Napi::Env env, Napi::Object exports);

// Bindings run in ascending `order`, then by name (the order of static construction across files is
// unspecified). kBindingLast: after every other binding (the CUDA module's, which replaces backend()).
inline constexpr int kBindingDefault = 0;
inline constexpr int kBindingLast = 1;

struct BindingRegistrar {
  BindingRegistrar(const char* name, RegisterFn fn, int order = kBindingDefault);
};

// Calls every registered binding in order (addon.cc, at module initialisation).
void RegisterAll(Napi::Env env, Napi::Object exports);

}  // namespace gear::addon

#define GEAR_BINDING_ORDERED(fn, order) \
  [[maybe_unused]] static const ::gear::addon::BindingRegistrar gear_binding_##fn(#fn, fn, order)
#define GEAR_BINDING(fn) GEAR_BINDING_ORDERED(fn, ::gear::addon::kBindingDefault)
