#include "gear/segment.h"

#include <limits>
#include <string>

#include "gear/thread_pool.h"

namespace gear {

Status check_offsets(const int32_t* offsets, int64_t rows, int64_t n) {
  if (rows < 0) return error(Code::Shape, "rows: expected >= 0, got " + std::to_string(rows));
  if (offsets == nullptr) return error(Code::Shape, "offsets: expected an array, got null");
  if (offsets[0] != 0) return error(Code::Offsets, "offsets[0]: expected 0, got " + std::to_string(offsets[0]));
  for (int64_t r = 0; r < rows; ++r) {
    if (offsets[r + 1] < offsets[r])
      return error(Code::Offsets, "offsets[" + std::to_string(r + 1) + "]: expected >= " +
                                      std::to_string(offsets[r]) + ", got " + std::to_string(offsets[r + 1]));
  }
  if (offsets[rows] != n)
    return error(Code::Offsets, "offsets[R]: expected the token count " + std::to_string(n) + ", got " +
                                    std::to_string(offsets[rows]));
  return Status::ok();
}

template <typename T>
static void reduce_rows(const T* v, const int32_t* off, const uint8_t* mask, SegOp op, double* out,
                        int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    double acc = op == SegOp::Max ? -std::numeric_limits<double>::infinity()
               : op == SegOp::Min ? std::numeric_limits<double>::infinity() : 0.0;
    int64_t count = 0;
    for (int64_t t = off[r]; t < off[r + 1]; ++t) {
      if (mask && !mask[t]) continue;
      const double x = static_cast<double>(v[t]);
      ++count;
      switch (op) {
        case SegOp::Max: acc = x > acc || x != x ? x : acc; break;  // NaN propagates
        case SegOp::Min: acc = x < acc || x != x ? x : acc; break;
        case SegOp::Count: break;
        default: acc += x;
      }
    }
    if (op == SegOp::Count) acc = static_cast<double>(count);
    else if (op == SegOp::Mean) acc = count ? acc / static_cast<double>(count) : 0.0;
    out[r] = acc;
  }
}

Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx) {
  if ((v32 == nullptr) == (v64 == nullptr) && n > 0)
    return error(Code::DType, "values: expected exactly one of float32 / float64, got none or both");
  Status st = check_offsets(offsets, rows, n);
  if (!st.is_ok()) return st;
  const bool done = parallel_blocks(ctx, rows, 4096, [&](int64_t b, int64_t e, int) {
    if (v32) reduce_rows(v32, offsets, mask, op, out, b, e);
    else reduce_rows(v64, offsets, mask, op, out, b, e);
  });
  return done ? Status::ok() : error(Code::Aborted, "segmentReduce: aborted");
}

Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx) {
  Status st = check_offsets(offsets, rows, n);
  if (!st.is_ok()) return st;
  const bool done = parallel_blocks(ctx, rows, 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const float v = static_cast<float>(row_values[r]);
      if (mask) {
        for (int64_t t = offsets[r]; t < offsets[r + 1]; ++t) out[t] = mask[t] ? v : 0.0f;
      } else {
        for (int64_t t = offsets[r]; t < offsets[r + 1]; ++t) out[t] = v;
      }
    }
  });
  return done ? Status::ok() : error(Code::Aborted, "segmentBroadcast: aborted");
}

}  // namespace gear
