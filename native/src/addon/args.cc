#include "args.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "invoke.h"
#include "../core/device_tensors.h"

namespace gear::addon {

namespace {
// Property names made once per environment: reading or setting a property by a C string internalizes
// that string in V8 on every call, which costs more than a small op's whole computation. The strings
// live in one array (Node-API < 10 holds no reference to a string itself); the index is keyed by the
// literal's address, with its text kept to check it.
struct CachedKey {
  std::string text;
  uint32_t index;
};

struct InstanceData {
  Napi::FunctionReference error_class;
  std::shared_ptr<EnvJobs> jobs = std::make_shared<EnvJobs>();
  std::unordered_map<const char*, CachedKey> keys;
  Napi::ObjectReference key_strings;
  uint32_t next_key = 0;
};

void TeardownJobs(void* arg) {
  auto* holder = static_cast<std::shared_ptr<EnvJobs>*>(arg);
  EnvJobs& j = **holder;
  {
    std::unique_lock<std::mutex> lock(j.mu);
    j.cancel.store(1);
    j.idle.wait(lock, [&] { return j.running == 0; });
  }
  // The environment's device tensors go with it (none of its calls runs any more).
  tensor_table().dispose_owner(&j);
  delete holder;
}

InstanceData* Data(napi_env env) {
  void* raw = nullptr;
  napi_get_instance_data(env, &raw);
  auto* d = static_cast<InstanceData*>(raw);
  if (!d) {
    d = new InstanceData();
    napi_set_instance_data(env, d, [](napi_env, void* p, void*) { delete static_cast<InstanceData*>(p); }, nullptr);
    napi_add_env_cleanup_hook(env, TeardownJobs, new std::shared_ptr<EnvJobs>(d->jobs));
  }
  return d;
}

template <typename T>
Array<T> Typed(const Napi::Value& v, const std::string& what, int64_t len, napi_typedarray_type type,
               const char* type_name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    Throw(v.Env(), Code::DType, what + ": expected " + type_name + ", got " + Describe(v));
  // napi_get_typedarray_info gives the element pointer for every backing (a SharedArrayBuffer included,
  // which napi_get_arraybuffer_info refuses); a detached buffer reports length 0, so it is asked apart.
  napi_typedarray_type t;
  size_t n = 0;
  void* data = nullptr;
  napi_value ab;
  size_t off = 0;
  if (napi_get_typedarray_info(v.Env(), v, &t, &n, &data, &ab, &off) != napi_ok)
    Throw(v.Env(), Code::DType, what + ": expected a readable " + type_name + ", got " + Describe(v));
  Array<T> a;
  a.length = static_cast<int64_t>(n);
  if (len >= 0 && a.length != len)
    Throw(v.Env(), Code::Shape, what + ".length: expected " + std::to_string(len) + ", got " + std::to_string(a.length));
  bool detached = false;
  if (a.length == 0 && napi_is_detached_arraybuffer(v.Env(), ab, &detached) != napi_ok) detached = false;
  if (detached || (a.length > 0 && data == nullptr))
    Throw(v.Env(), Code::Shape, what + ": expected an attached buffer, got a detached one");
  a.data = a.length > 0 ? static_cast<T*>(data) : nullptr;
  a.value = v;
  return a;
}

Array<int32_t> CopyOf(Array<int32_t> a) {
  a.copy = std::make_shared<std::vector<int32_t>>(a.data, a.data + a.length);
  a.data = a.copy->empty() ? nullptr : a.copy->data();
  return a;
}
}  // namespace

std::shared_ptr<EnvJobs> JobsOf(Napi::Env env) { return Data(env)->jobs; }

Napi::String Key(Napi::Env env, const char* name) {
  InstanceData* d = Data(env);
  if (d->key_strings.IsEmpty()) d->key_strings = Napi::Persistent(Napi::Object(env, Napi::Array::New(env)));
  Napi::Object strings = d->key_strings.Value();
  auto it = d->keys.find(name);
  if (it != d->keys.end() && it->second.text == name) return strings.Get(it->second.index).As<Napi::String>();
  const uint32_t index = d->next_key++;
  Napi::String k = Napi::String::New(env, name);
  strings.Set(index, k);
  d->keys[name] = CachedKey{name, index};
  return k;
}

std::string Describe(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    static const char* names[] = {"Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array",
                                  "Int32Array", "Uint32Array", "Float32Array", "Float64Array",
                                  "BigInt64Array", "BigUint64Array"};
    int t = static_cast<int>(ta.TypedArrayType());
    return std::string(t >= 0 && t < 11 ? names[t] : "TypedArray") + "(" + std::to_string(ta.ElementLength()) + ")";
  }
  if (v.IsNumber()) return std::to_string(v.As<Napi::Number>().DoubleValue());
  if (v.IsString()) return "\"" + v.As<Napi::String>().Utf8Value() + "\"";
  if (v.IsArray()) return "Array";
  if (v.IsBoolean()) return v.As<Napi::Boolean>().Value() ? "true" : "false";
  return v.IsObject() ? "object" : "value";
}

Napi::Error MakeError(Napi::Env env, Code code, const std::string& message) {
  auto* d = Data(env);
  if (!d->error_class.IsEmpty()) {
    Napi::Object obj = d->error_class.New({Napi::String::New(env, code_name(code)), Napi::String::New(env, message)});
    return Napi::Error(env, obj);
  }
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code_name(code)));
  return e;
}

void Throw(Napi::Env env, Code code, const std::string& message) { throw MakeError(env, code, message); }

void Check(Napi::Env env, const Status& st) {
  if (!st.is_ok()) Throw(env, st.code, st.message);
}

Napi::Value SetErrorClass(const Napi::CallbackInfo& info) {
  const Params p(info, {"errorClass"});
  const Napi::Value cls = p.Get("errorClass");
  if (!cls.IsFunction()) Throw(info.Env(), Code::DType, "errorClass: expected a constructor, got " + Describe(cls));
  Data(info.Env())->error_class = Napi::Persistent(cls.As<Napi::Function>());
  return info.Env().Undefined();
}

std::vector<Napi::Value> ListValues(const Napi::Value& v, const std::string& what, int64_t len) {
  if (!v.IsArray()) Throw(v.Env(), Code::DType, what + ": expected an array, got " + Describe(v));
  auto arr = v.As<Napi::Array>();
  const int64_t count = static_cast<int64_t>(arr.Length());
  if (len >= 0 && count != len)
    Throw(v.Env(), Code::Shape, what + ".length: expected " + std::to_string(len) + ", got " + std::to_string(count));
  if (count > kMaxListLength)
    Throw(v.Env(), Code::Shape, what + ".length: expected at most " + std::to_string(kMaxListLength) + ", got " +
                                    std::to_string(count));
  std::vector<Napi::Value> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.push_back(arr.Get(static_cast<uint32_t>(i)));
  return out;
}

bool IsNullish(const Napi::Value& v) { return v.IsUndefined() || v.IsNull(); }

double Number(const Napi::Value& v, const std::string& what) {
  if (!v.IsNumber()) Throw(v.Env(), Code::Option, what + ": expected a number, got " + Describe(v));
  return v.As<Napi::Number>().DoubleValue();
}

int64_t Int(const Napi::Value& v, const std::string& what, int64_t min, int64_t max) {
  double d = Number(v, what);
  if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max)) || std::floor(d) != d)
    Throw(v.Env(), Code::Option, what + ": expected an integer in [" + std::to_string(min) + ", " +
                                     std::to_string(max) + "], got " + Describe(v));
  return static_cast<int64_t>(d);
}

bool Bool(const Napi::Value& v, const std::string& what) {
  if (!v.IsBoolean()) Throw(v.Env(), Code::Option, what + ": expected a boolean, got " + Describe(v));
  return v.As<Napi::Boolean>().Value();
}

std::string String(const Napi::Value& v, const std::string& what) {
  if (!v.IsString()) Throw(v.Env(), Code::Option, what + ": expected a string, got " + Describe(v));
  return v.As<Napi::String>().Utf8Value();
}

// ---- Params ----

Params::Params(const Napi::CallbackInfo& info, std::initializer_list<const char*> names)
    : Params(info.Env(), "", std::make_shared<Call>()) {
  const Napi::Value v = info[0];
  if (!v.IsObject() || v.IsArray() || v.IsTypedArray())
    Throw(env_, Code::Option, "params: expected one object of named parameters, got " + Describe(v));
  ReadAll(v.As<Napi::Object>(), std::vector<const char*>(names));
}

Params::Params(const Napi::Value& obj, std::string what, const std::vector<const char*>& names, Used arrays)
    : Params(obj.Env(), std::move(what), std::move(arrays)) {
  if (!obj.IsObject() || obj.IsArray() || obj.IsTypedArray())
    Throw(env_, Code::DType, prefix_ + ": expected an object, got " + Describe(obj));
  ReadAll(obj.As<Napi::Object>(), names);
}

Params Params::Absent(std::string what, const std::vector<const char*>& names) const {
  Params p(env_, std::move(what), arrays_);
  for (const char* n : names) p.values_.emplace_back(n, env_.Undefined());
  return p;
}

void Params::ReadAll(const Napi::Object& o, const std::vector<const char*>& names) {
  values_.reserve(names.size());
  for (const char* n : names) values_.emplace_back(n, o.Get(Key(env_, n)));
}

Napi::Value Params::Get(const char* name) const {
  for (const auto& kv : values_)  // the same literal, as a rule: its address first
    if (kv.first == name || std::strcmp(kv.first, name) == 0) return kv.second;
  Throw(env_, Code::Internal, "internal error: parameter " + Name(name) + " was not read up front");
}

Params Params::Object(const char* name, const std::vector<const char*>& names, bool optional) const {
  const Napi::Value v = Get(name);
  if (optional && IsNullish(v)) return Absent(Name(name), names);
  return Params(v, Name(name), names, arrays_);
}

Params Params::Item(const Napi::Value& item, std::string what, const std::vector<const char*>& names) const {
  return Params(item, std::move(what), names, arrays_);
}

Array<float> Params::F32Item(const Napi::Value& item, const std::string& what, int64_t len) const {
  return Record(Typed<float>(item, what, len, napi_float32_array, "Float32Array"), what);
}
Array<double> Params::F64(const char* name, int64_t len) const {
  std::string what = Name(name);
  auto a = Typed<double>(Get(name), what, len, napi_float64_array, "Float64Array");
  return Record(std::move(a), std::move(what));
}
Array<int32_t> Params::I32(const char* name, int64_t len) const {
  std::string what = Name(name);
  auto a = Typed<int32_t>(Get(name), what, len, napi_int32_array, "Int32Array");
  return Record(std::move(a), std::move(what));
}
Array<uint8_t> Params::U8(const char* name, int64_t len) const {
  std::string what = Name(name);
  auto a = Typed<uint8_t>(Get(name), what, len, napi_uint8_array, "Uint8Array");
  return Record(std::move(a), std::move(what));
}
Array<uint16_t> Params::U16(const char* name, int64_t len) const {
  std::string what = Name(name);
  auto a = Typed<uint16_t>(Get(name), what, len, napi_uint16_array, "Uint16Array");
  return Record(std::move(a), std::move(what));
}
// The copy is what the work reads; the caller's array is recorded all the same (held and marked like the
// others), so what an async call holds does not depend on which reader a binding used.
Array<int32_t> Params::I32Copy(const char* name, int64_t len) const {
  auto a = I32(name, len);
  arrays_->spans.back().copied = true;  // a write to the caller's array cannot reach the copy
  return CopyOf(std::move(a));
}

void Params::CheckWrites() const {
  const auto& spans = arrays_->spans;
  const auto& written = arrays_->written;
  const auto writes = [&](const std::string& n) {
    if (n == "out" || n.rfind("out.", 0) == 0 || n.rfind("out[", 0) == 0) return true;
    return std::find(written.begin(), written.end(), n) != written.end();
  };
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& w = spans[i];
    if (w.begin == w.end || !writes(w.name)) continue;
    for (size_t j = 0; j < spans.size(); ++j) {
      const Span& o = spans[j];
      if (j == i || o.copied || o.begin == o.end || !(w.begin < o.end && o.begin < w.end)) continue;
      Throw(env_, Code::Shape, w.name + ": expected memory of its own, got a view sharing memory with " + o.name +
                                   " (the work writes it while reading the other)");
    }
  }
}

const std::atomic<int32_t>* Params::Abort(const char* name) const {
  const Napi::Value v = Get(name);
  if (IsNullish(v)) return nullptr;
  auto a = Record(Typed<int32_t>(v, "abort flag", -1, napi_int32_array, "Int32Array"), "abort flag");
  if (a.length < 1) Throw(env_, Code::Shape, "abort flag: expected an Int32Array of length >= 1, got length 0");
  static_assert(sizeof(std::atomic<int32_t>) == sizeof(int32_t), "lock-free int32 atomics");
  return reinterpret_cast<const std::atomic<int32_t>*>(a.data);
}

}  // namespace gear::addon
