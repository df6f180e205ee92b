// Plain C++ types shared by every kernel: no N-API here, so kernels can be unit-tested, fuzzed and
// reused by a CUDA build.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace gear {

// Element type of a logits buffer. bf16/fp16 travel as raw 16-bit words.
enum class DType : int { F32 = 0, BF16 = 1, F16 = 2 };

inline int dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }

// Logits below about -1e38 are finite masks (float32's and bfloat16's torch.finfo(dtype).min, -3.40e38
// and -3.39e38): the divergences treat them as -Infinity at every temperature, on every backend
// (tokenStats reads them as logits: their weight is 0 either way). The test is z * kMaskScale + FLT_MAX
// overflowing to -Infinity (rowmath::is_mask): one FMA and a min in a vector loop, no compare or blend.
constexpr float kMaskScale = 3.4028234663852886e38f / 1e38f;

inline const char* dtype_name(DType d) {
  return d == DType::F32 ? "float32" : d == DType::BF16 ? "bfloat16" : "float16";
}

// Stable error codes; the binding maps each to the `code` string of a GearError.
enum class Code : int {
  Ok = 0,
  Shape,        // ERR_SHAPE
  DType,        // ERR_DTYPE
  TargetRange,  // ERR_TARGET_RANGE
  NonFinite,    // ERR_NON_FINITE
  Option,       // ERR_OPTION
  Offsets,      // ERR_OFFSETS
  Aborted,      // ERR_ABORTED
  State,        // ERR_STATE
  Internal,     // ERR_NATIVE
  Busy,         // ERR_BUSY (a device tensor claimed by a running call)
  Device,       // ERR_DEVICE (no CUDA module or device, a tensor of another device, host and device mixed)
  OutOfMemory,  // ERR_OUT_OF_MEMORY (device memory)
};

inline const char* code_name(Code c) {
  switch (c) {
    case Code::Ok: return "OK";
    case Code::Shape: return "ERR_SHAPE";
    case Code::DType: return "ERR_DTYPE";
    case Code::TargetRange: return "ERR_TARGET_RANGE";
    case Code::NonFinite: return "ERR_NON_FINITE";
    case Code::Option: return "ERR_OPTION";
    case Code::Offsets: return "ERR_OFFSETS";
    case Code::Aborted: return "ERR_ABORTED";
    case Code::State: return "ERR_STATE";
    case Code::Busy: return "ERR_BUSY";
    case Code::Device: return "ERR_DEVICE";
    case Code::OutOfMemory: return "ERR_OUT_OF_MEMORY";
    default: return "ERR_NATIVE";
  }
}

// Result of a kernel call. Messages read "what: expected X, got Y".
struct Status {
  Code code = Code::Ok;
  std::string message;
  static Status ok() { return {}; }
  bool is_ok() const { return code == Code::Ok; }
};

inline Status error(Code c, std::string msg) { return Status{c, std::move(msg)}; }

// Returns the status of `expr` from the enclosing function when it is an error.
#define GEAR_TRY(expr)                  \
  do {                                  \
    const ::gear::Status gear_st_ = (expr); \
    if (!gear_st_.is_ok()) return gear_st_; \
  } while (0)

// A number as the error messages print it: NaN and ±Infinity spelled as JavaScript does, else %.<digits>g.
inline std::string number_text(double x, int digits = 9) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return buf;
}

// Row-major rows x vocab logits. 64-bit sizes: rows * vocab may exceed 2^31. `on_device`: `data` is a
// pointer into the memory of the CUDA device the call runs on (ExecContext::device), not host memory.
struct LogitsView {
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t vocab = 0;
  DType dtype = DType::F32;
  bool on_device = false;
  // Elements the memory at `data` holds, when the caller knows it (a binding reading a typed array):
  // the public entry checks rows * vocab against it. -1: the caller vouches for rows * vocab.
  int64_t length = -1;
};

class ThreadPool;

// Where and how a kernel runs: the pool to split rows over (nullptr = calling thread only) and two
// flags polled between blocks of rows (nullptr = none): the caller's abort (an AbortSignal) and the
// binding's cancel (the JS environment that started the work is being torn down).
//
// `device` >= 0 runs the call on that CUDA device (the CUDA module's device backend, gear/backend.h);
// host logits are then staged through pinned memory. The per-row arrays of a call are host memory
// wherever it runs; the rows x vocab output of a backward is device memory when `out_on_device`.
struct ExecContext {
  ThreadPool* pool = nullptr;
  const std::atomic<int32_t>* abort = nullptr;
  const std::atomic<int32_t>* cancel = nullptr;
  int device = -1;
  bool out_on_device = false;
  bool aborted() const {
    return (abort != nullptr && abort->load(std::memory_order_relaxed) != 0) ||
           (cancel != nullptr && cancel->load(std::memory_order_relaxed) != 0);
  }
};

}  // namespace gear
