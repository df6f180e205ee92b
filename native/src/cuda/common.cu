// Host-side helpers of the CUDA module: device queries, argument checks (the same rules and messages as
// the CPU kernels) and the error for a flagged row.
#include <cmath>
#include <cstdio>
#include <limits>

#include "../cpu/logits_common.h"
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

void fill_nan(float* p, int64_t n) { kern::fill_nan(p, n); }
void fill_nan(double* p, int64_t n) {
  if (p == nullptr) return;
  for (int64_t i = 0; i < n; ++i) p[i] = std::numeric_limits<double>::quiet_NaN();
}

// The argument checks are the CPU kernels' own (token_stats.cc is linked into this module too), so both
// variants accept and reject exactly the same inputs with the same messages.
Status check_logits(const LogitsView& l, const char* what) { return kern::check_logits(l, what); }
Status check_temperature(double t) { return kern::check_temperature(t); }
Status check_targets(const int32_t* targets, int64_t rows, int64_t vocab, const char* what) {
  return kern::check_targets(targets, rows, vocab, what);
}
Status check_partial_args(const int32_t* targets, int64_t rows, int64_t vocab_start) {
  return kern::check_partial_args(targets, rows, vocab_start);
}
Status check_finite(const float* p, int64_t n, const char* what) { return kern::check_finite(p, n, what); }
// Logits stay in host memory (the kernels copy them to the device), so the CPU's row scan applies.
Status bad_row_status(const LogitsView& l, const char* what, int64_t r) { return kern::bad_row_status(l, what, r); }

}  // namespace cuda
}  // namespace gear
