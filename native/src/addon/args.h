// Argument readers and error helpers for the binding layer. Every native function takes ONE parameter
// object and reads its properties by name; every reader validates the JS value and throws a GearError
// (the class the TS layer registers at load) with a stable code, so the native layer is safe even when
// called directly without the TypeScript checks.
//
// Reading order is part of the safety contract: a `Params` reads every property it names (running any
// getter or Proxy trap) in its constructor, nested objects and list elements are read next, and only
// then are typed-array pointers taken. No JavaScript runs between taking a pointer and the kernel's use
// of it, so a getter cannot detach or shrink a buffer the kernel is about to read.
#pragma once
#include <napi.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gear/types.h"

namespace gear::addon {

// Builds a GearError (or a plain Error carrying `code` before the class is registered).
Napi::Error MakeError(Napi::Env env, Code code, const std::string& message);
[[noreturn]] void Throw(Napi::Env env, Code code, const std::string& message);
// Throws when a kernel status is not ok.
void Check(Napi::Env env, const Status& st);

// Registers the GearError constructor: native.setErrorClass({ errorClass: GearError }).
Napi::Value SetErrorClass(const Napi::CallbackInfo& info);

// Largest integer a JS number holds exactly.
constexpr int64_t kMaxSafeInt = (int64_t{1} << 53) - 1;

template <typename T>
struct Array {
  T* data = nullptr;
  int64_t length = 0;
  Napi::Value value;  // the JS array (Params records it for async jobs)
  // Set by the *Copy readers: data points into this private copy, which the job's lambda keeps alive.
  std::shared_ptr<std::vector<T>> copy;
};

// The most elements a list argument (an array of tensors or of partial statistics) may have: a sparse
// array of length 2^30 is refused at once instead of being walked.
constexpr int64_t kMaxListLength = int64_t{1} << 20;
// Reads list element Values (running any getters) before any pointer is taken from them. Checks
// Array-ness and the length bound; `len` >= 0 requires that exact length.
std::vector<Napi::Value> ListValues(const Napi::Value& v, const std::string& what, int64_t len = -1);

// `name` as a JS string, made once per environment (a literal: the cache is keyed by its address).
Napi::String Key(Napi::Env env, const char* name);
// o[name] = v through the cached key; for the result objects every call builds.
template <typename V>
void Put(Napi::Object& o, const char* name, V&& v) {
  o.Set(Key(o.Env(), name), std::forward<V>(v));
}

bool IsNullish(const Napi::Value& v);
// How a value is named in "expected X, got Y" messages.
std::string Describe(const Napi::Value& v);

double Number(const Napi::Value& v, const std::string& what);
int64_t Int(const Napi::Value& v, const std::string& what, int64_t min, int64_t max);
bool Bool(const Napi::Value& v, const std::string& what);
std::string String(const Napi::Value& v, const std::string& what);

// One parameter object, its named properties read up front (see the note at the top of this file).
// Readers look properties up by name; a name the constructor did not read is a bug in the binding and
// throws ERR_NATIVE instead of reading late.
//
// The typed-array readers are Params' own (the free readers are private to args.cc), and every array one
// of them hands out a pointer for is recorded, in one list per call that the call's nested objects and
// list elements share: Run (invoke.h) holds exactly those arrays for an async job and marks their
// buffers untransferable (ownership.h). A binding therefore cannot leave out an array its work uses.
// Arrays a binding allocates itself (a result's outputs) are not recorded: the caller sees them only
// once the work is done.
class Params {
 public:
  // info[0], which must be an object; `what` names it in messages ("" for the call's own parameters).
  Params(const Napi::CallbackInfo& info, std::initializer_list<const char*> names);

  Napi::Env Env() const { return env_; }
  Napi::Value Get(const char* name) const;
  bool Has(const char* name) const { return !IsNullish(Get(name)); }
  // The message name of a property: "out.logprob".
  std::string Name(const char* name) const { return prefix_.empty() ? name : prefix_ + "." + name; }

  // Typed arrays by property name. `len` < 0 means any length.
  Array<float> F32(const char* name, int64_t len = -1) const { return F32Item(Get(name), Name(name), len); }
  Array<double> F64(const char* name, int64_t len = -1) const;
  Array<int32_t> I32(const char* name, int64_t len = -1) const;
  Array<uint8_t> U8(const char* name, int64_t len = -1) const;
  Array<uint16_t> U16(const char* name, int64_t len = -1) const;
  // Index arrays the kernels check once and then read again (offsets, targets) are copied before the work
  // starts: JS (a getter, another thread writing a SharedArrayBuffer, code running while an async job is
  // in flight) can change the caller's array, never the copy the kernel reads.
  Array<int32_t> I32Copy(const char* name, int64_t len = -1) const;
  // A list element (from List) read as a Float32Array; `what` names it ("grads[3]").
  Array<float> F32Item(const Napi::Value& item, const std::string& what, int64_t len = -1) const;
  // Optional arrays: an empty Array (data == nullptr) when the property is null or undefined.
  Array<float> OptF32(const char* name, int64_t len) const { return Has(name) ? F32(name, len) : Array<float>{}; }
  Array<uint8_t> OptU8(const char* name, int64_t len) const { return Has(name) ? U8(name, len) : Array<uint8_t>{}; }
  Array<int32_t> OptI32Copy(const char* name, int64_t len) const {
    return Has(name) ? I32Copy(name, len) : Array<int32_t>{};
  }
  double Number(const char* name) const { return addon::Number(Get(name), Name(name)); }
  // Absent (null / undefined) reads as `fallback`.
  double OptNumber(const char* name, double fallback) const { return Has(name) ? Number(name) : fallback; }
  int64_t Int(const char* name, int64_t min, int64_t max) const { return addon::Int(Get(name), Name(name), min, max); }
  bool Bool(const char* name) const { return addon::Bool(Get(name), Name(name)); }
  // Absent reads as false.
  bool OptBool(const char* name) const { return Has(name) && Bool(name); }
  std::string String(const char* name) const { return addon::String(Get(name), Name(name)); }
  std::vector<Napi::Value> List(const char* name, int64_t len = -1) const { return ListValues(Get(name), Name(name), len); }
  // The call's optional abort flag: an Int32Array of length >= 1 that JS sets to 1 through Atomics.store.
  const std::atomic<int32_t>* Abort(const char* name = "abort") const;
  // A nested parameter object (`out`, `logits`): `what` prefixes its property names in messages; optional
  // when `optional` (absent reads as all-undefined).
  Params Object(const char* name, const std::vector<const char*>& names, bool optional = false) const;
  // A list element read as a nested parameter object ("parts[2]").
  Params Item(const Napi::Value& item, std::string what, const std::vector<const char*>& names) const;
  // Not an object: every property reads as undefined (an optional nested object left out).
  Params Absent(std::string what, const std::vector<const char*>& names) const;

  // Every array of the caller's a reader handed out a pointer for, in this call (nested objects included).
  const std::vector<Napi::Value>& Arrays() const { return arrays_->values; }

  // Declares that the work writes the array `name` of this object (besides `out`, which every call writes:
  // "out", "out.*"); for an in-place option such as tokenStatsBackward's inPlace.
  void Writes(const char* name) const { arrays_->written.push_back(Name(name)); }
  // Throws ERR_SHAPE when an array the work writes shares memory with any other array of the call: a view of
  // the logits given as `out` would be written while other rows are still being read, on other threads.
  // Run (invoke.h) calls it for every op; a binding that does not go through Run calls it itself.
  void CheckWrites() const;

 private:
  // One array handed out: its bytes and message name. `copied`: the work reads a private copy (I32Copy).
  struct Span {
    std::string name;
    uintptr_t begin, end;
    bool copied;
  };
  struct Call {
    std::vector<Napi::Value> values;
    std::vector<Span> spans;
    std::vector<std::string> written;
  };
  using Used = std::shared_ptr<Call>;
  Params(Napi::Env env, std::string what, Used arrays) : env_(env), prefix_(std::move(what)), arrays_(std::move(arrays)) {}
  // A nested object of this call.
  Params(const Napi::Value& obj, std::string what, const std::vector<const char*>& names, Used arrays);
  void ReadAll(const Napi::Object& o, const std::vector<const char*>& names);
  template <typename T>
  Array<T> Record(Array<T> a, std::string what) const {
    arrays_->values.push_back(a.value);
    const auto b = reinterpret_cast<uintptr_t>(a.data);
    arrays_->spans.push_back({std::move(what), b, b + static_cast<uintptr_t>(a.length) * sizeof(T), false});
    return a;
  }

  Napi::Env env_;
  std::string prefix_;
  std::vector<std::pair<const char*, Napi::Value>> values_;
  Used arrays_;
};

// An optional output of `len` elements: the caller's (checked and recorded like any array of the call) or
// a new one.
inline Napi::Float32Array OutF32(const Params& p, const char* name, int64_t len) {
  if (!p.Has(name)) return Napi::Float32Array::New(p.Env(), static_cast<size_t>(len));
  return p.F32(name, len).value.As<Napi::Float32Array>();
}
inline Napi::Int32Array OutI32(const Params& p, const char* name, int64_t len) {
  if (!p.Has(name)) return Napi::Int32Array::New(p.Env(), static_cast<size_t>(len));
  return p.I32(name, len).value.As<Napi::Int32Array>();
}

}  // namespace gear::addon
