// Helpers shared by the CUDA kernels: error mapping to gear::Status, RAII device buffers, logit loads for
// every dtype, and the deterministic block reduction of row statistics (the per-row math itself lives
// in gear/row_math.h, shared with the CPU kernels).
//
// Host <-> device model: the public functions take host pointers (the same signatures as the CPU
// kernels, so the N-API bindings are shared), copy a chunk of rows to the device, run, copy the results
// back, and poll the abort flag between chunks. Device memory per chunk is bounded (kChunkBytes).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gear/types.h"
#include "gear/row_math.h"
#include "../core/checks.h"  // the argument checks and messages of every backend

namespace gear {
namespace cuda {

constexpr int kBlock = 256;                              // threads per row block (power of two)
constexpr int64_t kChunkBytes = int64_t{1} << 30;        // logits bytes per device chunk

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return error(Code::Internal, std::string(what) + ": expected cudaSuccess, got " + cudaGetErrorName(e) + " (" +
                                   cudaGetErrorString(e) + ")");
}

#define GEAR_CUDA_TRY(expr)                                \
  do {                                                     \
    ::gear::Status st_ = ::gear::cuda::cuda_status((expr), #expr); \
    if (!st_.is_ok()) return st_;                          \
  } while (0)

#define GEAR_TRY(expr)                 \
  do {                                 \
    ::gear::Status st_ = (expr);       \
    if (!st_.is_ok()) return st_;      \
  } while (0)

// Device allocation freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  Status alloc(int64_t bytes) {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    if (bytes <= 0) return Status::ok();
    return cuda_status(cudaMalloc(&p_, static_cast<size_t>(bytes)), "cudaMalloc");
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

inline Status to_device(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || src == nullptr) return Status::ok();
  return cuda_status(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice), "cudaMemcpy(H2D)");
}
inline Status to_host(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == nullptr) return Status::ok();
  return cuda_status(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy(D2H)");
}
// Waits for the kernels launched so far and reports launch or execution errors.
inline Status sync(const char* what) {
  GEAR_TRY(cuda_status(cudaGetLastError(), what));
  return cuda_status(cudaDeviceSynchronize(), what);
}

// Rows per device chunk for rows of `row_bytes` (at least one).
inline int64_t chunk_rows(int64_t row_bytes) {
  if (row_bytes <= 0) return int64_t{1} << 20;
  const int64_t r = kChunkBytes / row_bytes;
  return r < 1 ? 1 : r;
}

// Raw logit i of a row as float, for each storage type (bf16/fp16 travel as 16-bit words).
template <DType D>
struct Logit;
template <>
struct Logit<DType::F32> {
  __device__ static float at(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
};
template <>
struct Logit<DType::BF16> {
  __device__ static float at(const void* p, int64_t i) {
    return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16);
  }
};
template <>
struct Logit<DType::F16> {
  __device__ static float at(const void* p, int64_t i) {
    return __half2float(__ushort_as_half(static_cast<const uint16_t*>(p)[i]));
  }
};

// Per-row problem flags written by the kernels and turned into a Status on the host.
enum RowFlag : int32_t { kRowOk = 0, kRowNonFinite = 1, kRowEmpty = 2 };

// A thread's running statistics in float (the merge across threads is in float64 through row_math).
struct ThreadStats {
  float m = -INFINITY;
  float s = 0.f;
  float a = 0.f;
};

// Adds raw logit z (finite or -inf) to the running statistics; see rowmath::stats_rescale for the math.
__device__ inline void thread_add(ThreadStats& t, float z, float inv_t) {
  if (z == -INFINITY) return;  // masked entry: 0 log 0 = 0
  if (z > t.m) {
    if (t.s > 0.f) {
      const float r = (t.m - z) * inv_t;
      const float f = __expf(r);
      t.a = f * (t.a + r * t.s);
      t.s = f * t.s;
    }
    t.m = z;
  }
  const float d = (z - t.m) * inv_t;
  const float e = __expf(d);
  t.s += e;
  t.a += e * d;
}

// Deterministic tree merge of the block's statistics (fixed pairing, independent of timing). Returns
// the row's statistics in thread 0 (other threads get partial results).
__device__ inline rowmath::SoftmaxStats block_merge(const ThreadStats& t, double inv_t) {
  __shared__ double sm[kBlock], ss[kBlock], sa[kBlock];
  const int i = threadIdx.x;
  sm[i] = t.m;
  ss[i] = t.s;
  sa[i] = t.a;
  __syncthreads();
  for (int w = kBlock / 2; w > 0; w >>= 1) {
    if (i < w) {
      const rowmath::SoftmaxStats x{sm[i], ss[i], sa[i]}, y{sm[i + w], ss[i + w], sa[i + w]};
      const rowmath::SoftmaxStats z = rowmath::stats_merge(x, y, inv_t);
      sm[i] = z.m;
      ss[i] = z.s;
      sa[i] = z.a;
    }
    __syncthreads();
  }
  const rowmath::SoftmaxStats r{sm[0], ss[0], sa[0]};
  __syncthreads();
  return r;
}

// OR of a per-thread flag across the block (all threads get the result).
__device__ inline int block_or(int flag) { return __syncthreads_or(flag); }

// First flagged row of a chunk (-1 if none).
inline int64_t first_flagged(const int32_t* flags, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r)
    if (flags[r] != kRowOk) return r;
  return -1;
}

// Launches kernel<D>(args...) for the runtime dtype.
#define GEAR_DISPATCH_DTYPE(dtype, KERNEL, GRID, BLOCK, ...)                                  \
  do {                                                                                       \
    switch (dtype) {                                                                         \
      case DType::F32: KERNEL<DType::F32><<<(GRID), (BLOCK)>>>(__VA_ARGS__); break;          \
      case DType::BF16: KERNEL<DType::BF16><<<(GRID), (BLOCK)>>>(__VA_ARGS__); break;        \
      case DType::F16: KERNEL<DType::F16><<<(GRID), (BLOCK)>>>(__VA_ARGS__); break;          \
    }                                                                                        \
  } while (0)

}  // namespace cuda
}  // namespace gear
