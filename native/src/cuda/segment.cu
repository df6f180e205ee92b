// segmentReduce / segmentBroadcast on the GPU. Reduce: one thread per row, sequential float64
// accumulation in token order, so results equal the CPU kernel's bit for bit. Broadcast: one thread per
// token, the row found by binary search over the offsets.
#include <limits>
#include <vector>

#include "device_runtime.cuh"
#include "gear/cuda.h"

namespace gear {
namespace cuda {
namespace {

template <typename T>
__global__ void reduce_kernel(const T* v, const int32_t* off, const uint8_t* mask, int op, int64_t rows, double* out) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const SegOp o = static_cast<SegOp>(op);
  double acc = o == SegOp::Max ? -INFINITY : o == SegOp::Min ? INFINITY : 0.0;
  int64_t count = 0;
  for (int64_t t = off[r]; t < off[r + 1]; ++t) {
    if (mask && !mask[t]) continue;
    const double x = static_cast<double>(v[t]);
    ++count;
    if (o == SegOp::Max) acc = x > acc || x != x ? x : acc;  // NaN propagates
    else if (o == SegOp::Min) acc = x < acc || x != x ? x : acc;
    else if (o != SegOp::Count) acc += x;
  }
  if (o == SegOp::Count) acc = static_cast<double>(count);
  else if (o == SegOp::Mean) acc = count ? acc / static_cast<double>(count) : 0.0;
  out[r] = acc;
}

__global__ void broadcast_kernel(const double* vals, const int32_t* off, int64_t rows, int64_t n, const uint8_t* mask,
                                 float* out) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n) return;
  int64_t lo = 0, hi = rows;  // largest r with off[r] <= t (empty rows skipped by the search)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (off[mid] <= t) lo = mid;
    else hi = mid;
  }
  out[t] = mask && !mask[t] ? 0.f : static_cast<float>(vals[lo]);
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

}  // namespace

Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx) {
  if ((v32 == nullptr) == (v64 == nullptr) && n > 0)
    return error(Code::DType, "values: expected exactly one of float32 / float64, got none or both");
  GEAR_TRY(check_offsets(offsets, rows, n));
  // The CPU kernels check mask bytes in their pass; here on the host before the copy (same error).
  if (mask) {
    const int64_t bad = first_non_binary(mask, 0, n);
    if (bad >= 0) return mask_error(mask, bad);
  }
  if (ctx.aborted()) return error(Code::Aborted, "segmentReduce: aborted");
  if (rows == 0) return Status::ok();
  const int64_t esz = v32 ? 4 : 8;
  DeviceBuffer v, off, m, o;
  GEAR_TRY(v.alloc(n * esz));
  GEAR_TRY(off.alloc((rows + 1) * 4));
  GEAR_TRY(o.alloc(rows * 8));
  if (mask) GEAR_TRY(m.alloc(n));
  GEAR_TRY(to_device(v.as<void>(), v32 ? static_cast<const void*>(v32) : static_cast<const void*>(v64), n * esz));
  GEAR_TRY(to_device(off.as<void>(), offsets, (rows + 1) * 4));
  if (mask) GEAR_TRY(to_device(m.as<void>(), mask, n));
  if (v32)
    reduce_kernel<float><<<grid_for(rows), kBlock>>>(v.as<float>(), off.as<int32_t>(), mask ? m.as<uint8_t>() : nullptr,
                                                     static_cast<int>(op), rows, o.as<double>());
  else
    reduce_kernel<double><<<grid_for(rows), kBlock>>>(v.as<double>(), off.as<int32_t>(), mask ? m.as<uint8_t>() : nullptr,
                                                      static_cast<int>(op), rows, o.as<double>());
  GEAR_TRY(sync("segmentReduce kernel"));
  return to_host(out, o.as<void>(), rows * 8);
}

Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx, bool /*reused_out*/) {
  GEAR_TRY(check_offsets(offsets, rows, n));
  if (mask) {
    const int64_t bad = first_non_binary(mask, 0, n);
    if (bad >= 0) return mask_error(mask, bad);
  }
  if (ctx.aborted()) return error(Code::Aborted, "segmentBroadcast: aborted");
  if (n == 0) return Status::ok();
  DeviceBuffer vals, off, m, o;
  GEAR_TRY(vals.alloc(rows * 8));
  GEAR_TRY(off.alloc((rows + 1) * 4));
  GEAR_TRY(o.alloc(n * 4));
  if (mask) GEAR_TRY(m.alloc(n));
  GEAR_TRY(to_device(vals.as<void>(), row_values, rows * 8));
  GEAR_TRY(to_device(off.as<void>(), offsets, (rows + 1) * 4));
  if (mask) GEAR_TRY(to_device(m.as<void>(), mask, n));
  broadcast_kernel<<<grid_for(n), kBlock>>>(vals.as<double>(), off.as<int32_t>(), rows, n, mask ? m.as<uint8_t>() : nullptr,
                                            o.as<float>());
  GEAR_TRY(sync("segmentBroadcast kernel"));
  return to_host(out, o.as<void>(), n * 4);
}

}  // namespace cuda
}  // namespace gear
