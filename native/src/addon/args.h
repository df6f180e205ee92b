// Argument readers and error helpers for the binding layer. Every reader validates the JS value and
// throws a GearError (the class the TS layer registers at load) with a stable code, so the native layer
// is safe even when called directly without the TypeScript checks.
#pragma once
#include <napi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gear/common.h"

namespace gear::addon {

// Builds a GearError (or a plain Error carrying `code` before the class is registered).
Napi::Error MakeError(Napi::Env env, Code code, const std::string& message);
[[noreturn]] void Throw(Napi::Env env, Code code, const std::string& message);
// Throws when a kernel status is not ok.
void Check(Napi::Env env, const Status& st);

// Registers the GearError constructor: native.setErrorClass(GearError).
Napi::Value SetErrorClass(const Napi::CallbackInfo& info);

template <typename T>
struct Array {
  T* data = nullptr;
  int64_t length = 0;
  Napi::Value value;  // keeps the JS object for async jobs
  // Set by the *Copy readers: data points into this private copy, which the job's lambda keeps alive.
  std::shared_ptr<std::vector<T>> copy;
};

// Typed-array readers: `what` names the argument in messages. `len` < 0 means any length.
Array<float> F32(const Napi::Value& v, const char* what, int64_t len = -1);
Array<double> F64(const Napi::Value& v, const char* what, int64_t len = -1);
Array<int32_t> I32(const Napi::Value& v, const char* what, int64_t len = -1);
Array<uint8_t> U8(const Napi::Value& v, const char* what, int64_t len = -1);
Array<uint16_t> U16(const Napi::Value& v, const char* what, int64_t len = -1);
// Index arrays the kernels check once and then read again (offsets, targets) are copied before the work
// starts: JS (a getter, another thread writing a SharedArrayBuffer, code running while an async job is
// in flight) can change the caller's array, never the copy the kernel reads.
Array<int32_t> I32Copy(const Napi::Value& v, const char* what, int64_t len = -1);

// The most elements a list argument (an array of tensors or of partial statistics) may have: a sparse
// array of length 2^30 is refused at once instead of being walked.
constexpr int64_t kMaxListLength = int64_t{1} << 20;
// Reads list element Values (running any getters) before any pointer is taken from them. Checks
// Array-ness and the length bound; `len` >= 0 requires that exact length.
std::vector<Napi::Value> ListValues(const Napi::Value& v, const std::string& what, int64_t len = -1);

// null / undefined -> empty Array (data == nullptr).
bool IsNullish(const Napi::Value& v);

double Number(const Napi::Value& v, const char* what);
int64_t Int(const Napi::Value& v, const char* what, int64_t min, int64_t max);
bool Bool(const Napi::Value& v, const char* what);
std::string String(const Napi::Value& v, const char* what);

// The optional abort flag (an Int32Array of length >= 1 that JS sets to 1 through Atomics.store).
const std::atomic<int32_t>* AbortFlag(const Napi::Value& v);

// Runs `work` on the addon thread pool, synchronously (returns `result`) or, when `async` is true, on a
// libuv worker thread (returns a Promise resolved with `result` or rejected with the kernel's error).
// `result` is built before the work starts (the output arrays the kernel fills); `keep` holds the input
// objects alive for the life of the job.
Napi::Value Run(Napi::Env env, bool async, std::vector<Napi::Value> keep,
                std::function<Status(const ExecContext&)> work, Napi::Value result,
                const std::atomic<int32_t>* abort = nullptr);

}  // namespace gear::addon
