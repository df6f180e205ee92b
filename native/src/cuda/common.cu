// Host-side helpers of the CUDA module: device queries, argument checks (the same rules and messages as
// the CPU kernels) and the error for a flagged row.
#include <cmath>
#include <cstdio>
#include <limits>

#include "cuda_common.cuh"
#include "gear/cuda.h"

namespace gear {
namespace cuda {

int device_count(std::string* err) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (err) *err = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the sticky error so later calls report their own
    return 0;
  }
  return n;
}

std::string device_arch() {
  cudaDeviceProp p;
  if (device_count(nullptr) < 1 || cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "";
  return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
}

std::string device_name() {
  cudaDeviceProp p;
  if (device_count(nullptr) < 1 || cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "";
  return p.name;
}

std::string num(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

void fill_nan(float* p, int64_t n) {
  if (p == nullptr) return;
  for (int64_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
}
void fill_nan(double* p, int64_t n) {
  if (p == nullptr) return;
  for (int64_t i = 0; i < n; ++i) p[i] = std::numeric_limits<double>::quiet_NaN();
}

Status check_logits(const LogitsView& l, const char* what) {
  const std::string w(what);
  const int dt = static_cast<int>(l.dtype);
  if (dt < 0 || dt > 2) return error(Code::DType, w + ".dtype: expected float32, bfloat16 or float16, got " + std::to_string(dt));
  if (l.rows < 0) return error(Code::Shape, w + ".rows: expected an integer >= 0, got " + std::to_string(l.rows));
  if (l.vocab < 1) return error(Code::Shape, w + ".vocab: expected an integer >= 1, got " + std::to_string(l.vocab));
  if (l.rows > std::numeric_limits<int64_t>::max() / 8 / l.vocab)
    return error(Code::Shape, w + ".rows * vocab: expected a size that fits in memory, got " + std::to_string(l.rows) +
                                  " x " + std::to_string(l.vocab));
  if (l.rows > 0 && l.data == nullptr)
    return error(Code::Shape, w + ".data: expected " + std::to_string(l.rows * l.vocab) + " elements, got none");
  return Status::ok();
}

Status check_temperature(double t) {
  if (!(t > 0) || !std::isfinite(t)) return error(Code::Option, "temperature: expected a finite number > 0, got " + num(t));
  return Status::ok();
}

Status check_targets(const int32_t* targets, int64_t rows, int64_t vocab, const char* what) {
  if (rows > 0 && targets == nullptr)
    return error(Code::Shape, std::string(what) + ": expected an Int32Array of the row count, got none");
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || targets[r] >= vocab)
      return error(Code::TargetRange, std::string(what) + "[" + std::to_string(r) + "]: expected a token id in [0, " +
                                          std::to_string(vocab) + "), got " + std::to_string(targets[r]));
  return Status::ok();
}

Status check_finite(const float* p, int64_t n, const char* what) {
  if (p == nullptr) return Status::ok();
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      return error(Code::NonFinite, std::string(what) + "[" + std::to_string(i) + "]: expected a finite number, got " + num(p[i]));
  return Status::ok();
}

static float host_logit(const LogitsView& l, int64_t i) {
  const auto* w = static_cast<const uint16_t*>(l.data);
  switch (l.dtype) {
    case DType::F32: return static_cast<const float*>(l.data)[i];
    case DType::BF16: {
      const uint32_t u = static_cast<uint32_t>(w[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    default: return __half2float(__ushort_as_half(w[i]));
  }
}

Status bad_row_status(const LogitsView& l, const char* what, int64_t r) {
  for (int64_t v = 0; v < l.vocab; ++v) {
    const float x = host_logit(l, r * l.vocab + v);
    if (std::isnan(x) || x == INFINITY)
      return error(Code::NonFinite, std::string(what) + "[row " + std::to_string(r) + ", entry " + std::to_string(v) +
                                        "]: expected a finite logit or -Infinity, got " + num(x));
  }
  return error(Code::NonFinite, std::string(what) + "[row " + std::to_string(r) +
                                    "]: expected at least one finite logit, got all -Infinity");
}

}  // namespace cuda
}  // namespace gear
