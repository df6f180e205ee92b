#include "args.h"

#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "gear/thread_pool.h"

namespace gear::addon {

namespace {
// What the async jobs of one JS environment (the main thread or a worker) share with its teardown: a
// cancel flag the kernels poll, and the count of jobs whose Execute is running. The environment's
// cleanup hook sets the flag and waits for the count to reach 0, so no job touches that environment's
// memory after it is freed; a job that starts afterwards sees the flag and touches nothing.
struct EnvJobs {
  std::mutex mu;
  std::condition_variable idle;
  int64_t running = 0;
  std::atomic<int32_t> cancel{0};
};

struct InstanceData {
  Napi::FunctionReference error_class;
  std::shared_ptr<EnvJobs> jobs = std::make_shared<EnvJobs>();
};

void TeardownJobs(void* arg) {
  auto* holder = static_cast<std::shared_ptr<EnvJobs>*>(arg);
  EnvJobs& j = **holder;
  {
    std::unique_lock<std::mutex> lock(j.mu);
    j.cancel.store(1);
    j.idle.wait(lock, [&] { return j.running == 0; });
  }
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

template <typename T>
Array<T> Typed(const Napi::Value& v, const char* what, int64_t len, napi_typedarray_type type,
               const char* type_name) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    Throw(v.Env(), Code::DType, std::string(what) + ": expected " + type_name + ", got " + Describe(v));
  // napi_get_typedarray_info gives the element pointer for every backing (a SharedArrayBuffer included,
  // which napi_get_arraybuffer_info refuses); a detached buffer reports length 0.
  napi_typedarray_type t;
  size_t n = 0;
  void* data = nullptr;
  napi_value ab;
  size_t off = 0;
  if (napi_get_typedarray_info(v.Env(), v, &t, &n, &data, &ab, &off) != napi_ok)
    Throw(v.Env(), Code::DType, std::string(what) + ": expected a readable " + type_name + ", got " + Describe(v));
  Array<T> a;
  a.length = static_cast<int64_t>(n);
  if (len >= 0 && a.length != len)
    Throw(v.Env(), Code::Shape, std::string(what) + ".length: expected " + std::to_string(len) + ", got " +
                                    std::to_string(a.length));
  if (a.length > 0 && data == nullptr)
    Throw(v.Env(), Code::Shape, std::string(what) + ": expected an attached buffer, got a detached one");
  a.data = a.length > 0 ? static_cast<T*>(data) : nullptr;
  a.value = v;
  return a;
}

class Job : public Napi::AsyncWorker {
 public:
  Job(Napi::Env env, std::vector<Napi::Value> keep, std::function<Status(const ExecContext&)> work,
      Napi::Value result, const std::atomic<int32_t>* abort)
      : Napi::AsyncWorker(env, "gear-rl"), deferred_(Napi::Promise::Deferred::New(env)),
        work_(std::move(work)), abort_(abort), jobs_(Data(env)->jobs) {
    result_ = Napi::Persistent(result.As<Napi::Object>());
    for (auto& v : keep)
      if (v.IsObject()) keep_.push_back(Napi::Persistent(v.As<Napi::Object>()));
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    {
      std::lock_guard<std::mutex> lock(jobs_->mu);
      if (jobs_->cancel.load() != 0) {  // the environment is gone or going: touch none of its memory
        status_ = error(Code::Aborted, "aborted: the JavaScript environment that started the call was torn down");
        return;
      }
      ++jobs_->running;
    }
    ExecContext ctx{&global_pool(), abort_, &jobs_->cancel};
    try {
      status_ = work_(ctx);
    } catch (const std::exception& e) {
      status_ = error(Code::Internal, std::string("internal error: ") + e.what());
    }
    if (status_.is_ok() && ctx.aborted()) status_ = error(Code::Aborted, "aborted: the AbortSignal fired");
    std::lock_guard<std::mutex> lock(jobs_->mu);
    if (--jobs_->running == 0) jobs_->idle.notify_all();
  }
  // Settling the promise can fail while the environment is shutting down (JS can no longer run): that
  // is not an error of the call, and an exception escaping here would terminate the whole process.
  void OnOK() override {
    try {
      Napi::HandleScope scope(Env());
      if (!status_.is_ok()) {
        deferred_.Reject(MakeError(Env(), status_.code, status_.message).Value());
        return;
      }
      deferred_.Resolve(result_.Value());
    } catch (const Napi::Error&) {
    }
  }
  void OnError(const Napi::Error& e) override {
    try {
      deferred_.Reject(e.Value());
    } catch (const Napi::Error&) {
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<Status(const ExecContext&)> work_;
  Napi::ObjectReference result_;
  const std::atomic<int32_t>* abort_;
  std::shared_ptr<EnvJobs> jobs_;
  std::vector<Napi::ObjectReference> keep_;
  Status status_;
};
}  // namespace

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
  if (!info[0].IsFunction()) Throw(info.Env(), Code::DType, "setErrorClass: expected a constructor, got " + Describe(info[0]));
  Data(info.Env())->error_class = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

Array<float> F32(const Napi::Value& v, const char* w, int64_t len) { return Typed<float>(v, w, len, napi_float32_array, "Float32Array"); }
Array<double> F64(const Napi::Value& v, const char* w, int64_t len) { return Typed<double>(v, w, len, napi_float64_array, "Float64Array"); }
Array<int32_t> I32(const Napi::Value& v, const char* w, int64_t len) { return Typed<int32_t>(v, w, len, napi_int32_array, "Int32Array"); }
Array<uint8_t> U8(const Napi::Value& v, const char* w, int64_t len) { return Typed<uint8_t>(v, w, len, napi_uint8_array, "Uint8Array"); }
Array<uint16_t> U16(const Napi::Value& v, const char* w, int64_t len) { return Typed<uint16_t>(v, w, len, napi_uint16_array, "Uint16Array"); }

Array<int32_t> I32Copy(const Napi::Value& v, const char* what, int64_t len) {
  Array<int32_t> a = I32(v, what, len);
  a.copy = std::make_shared<std::vector<int32_t>>(a.data, a.data + a.length);
  a.data = a.copy->empty() ? nullptr : a.copy->data();
  return a;
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

double Number(const Napi::Value& v, const char* what) {
  if (!v.IsNumber()) Throw(v.Env(), Code::Option, std::string(what) + ": expected a number, got " + Describe(v));
  return v.As<Napi::Number>().DoubleValue();
}

int64_t Int(const Napi::Value& v, const char* what, int64_t min, int64_t max) {
  double d = Number(v, what);
  if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max)) || std::floor(d) != d)
    Throw(v.Env(), Code::Option, std::string(what) + ": expected an integer in [" + std::to_string(min) + ", " +
                                     std::to_string(max) + "], got " + Describe(v));
  return static_cast<int64_t>(d);
}

bool Bool(const Napi::Value& v, const char* what) {
  if (!v.IsBoolean()) Throw(v.Env(), Code::Option, std::string(what) + ": expected a boolean, got " + Describe(v));
  return v.As<Napi::Boolean>().Value();
}

std::string String(const Napi::Value& v, const char* what) {
  if (!v.IsString()) Throw(v.Env(), Code::Option, std::string(what) + ": expected a string, got " + Describe(v));
  return v.As<Napi::String>().Utf8Value();
}

const std::atomic<int32_t>* AbortFlag(const Napi::Value& v) {
  if (IsNullish(v)) return nullptr;
  auto a = I32(v, "abort flag");
  if (a.length < 1) Throw(v.Env(), Code::Shape, "abort flag: expected an Int32Array of length >= 1, got length 0");
  static_assert(sizeof(std::atomic<int32_t>) == sizeof(int32_t), "lock-free int32 atomics");
  return reinterpret_cast<const std::atomic<int32_t>*>(a.data);
}

Napi::Value Run(Napi::Env env, bool async, std::vector<Napi::Value> keep,
                std::function<Status(const ExecContext&)> work, Napi::Value result,
                const std::atomic<int32_t>* abort) {
  if (!async) {
    ExecContext ctx{&global_pool(), abort};
    Status st = work(ctx);
    Check(env, st);
    return result;
  }
  auto* job = new Job(env, std::move(keep), std::move(work), result, abort);
  Napi::Promise p = job->Promise();
  job->Queue();
  return p;
}

}  // namespace gear::addon
