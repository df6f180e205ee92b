#include "gear/segment.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gear/thread_pool.h"
#include "../core/checks.h"
#include "cpu_backend.h"
#include "segment_kernels.h"

// The kernel body, compiled for every instruction set of this architecture (isa_kernels.inc).
#define GEAR_KERNELS "segment_kernels.inc"
#include "isa_kernels.inc"

namespace gear {

int64_t row_chunk_count(int64_t n, int64_t rows) { return (n + rows + kRowChunk - 1) / kRowChunk; }

int64_t row_chunk_begin(const int32_t* off, int64_t rows, int64_t k) {
  const int64_t target = k * kRowChunk;
  int64_t lo = 0, hi = rows;  // first row r with off[r] + r >= target (rows when none)
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (off[mid] + mid >= target) hi = mid; else lo = mid + 1;
  }
  return lo;
}

namespace {

constexpr int64_t kChunk = kRowChunk;  // tokens per broadcast block

// Runs fn(r0, r1) over row chunks; returns the first non-0/1 mask index over all chunks (or -1) in
// *bad when mask is given. False when aborted.
template <typename Fn>
bool for_row_chunks(const ExecContext& ctx, const int32_t* off, int64_t rows, int64_t n, const uint8_t* mask,
                    int64_t* bad, Fn&& fn) {
  const int64_t chunks = row_chunk_count(n, rows);
  std::vector<int64_t> bads(static_cast<size_t>(chunks), -1);
  const bool done = parallel_blocks(ctx, chunks, 1, [&](int64_t k, int64_t, int) {
    const int64_t r0 = row_chunk_begin(off, rows, k), r1 = row_chunk_begin(off, rows, k + 1);
    if (r0 >= r1) return;
    // The 0/1 check reads the chunk's mask bytes just before the kernel does (they stay in cache).
    if (mask) bads[static_cast<size_t>(k)] = first_non_binary(mask, off[r0], off[r1]);
    fn(r0, r1);
  });
  *bad = -1;
  for (int64_t b : bads)
    if (b >= 0) { *bad = b; break; }
  return done;
}

// Masked values are selected with bit operations (mask bytes are 0/1 once checked) so the loops stay
// branch-free.
inline double select_bits(uint8_t m, double x, double other) {
  uint64_t xb, ob;
  std::memcpy(&xb, &x, 8);
  std::memcpy(&ob, &other, 8);
  const uint64_t keep = 0 - static_cast<uint64_t>(m);
  const uint64_t r = (xb & keep) | (ob & ~keep);
  double out;
  std::memcpy(&out, &r, 8);
  return out;
}

struct SumOp {
  static constexpr double init() { return 0.0; }
  // Adding +0 for a masked token leaves the sum bit-identical (a sum started at +0 is never -0).
  static double skip() { return 0.0; }
  static double step(double acc, double x) { return acc + x; }
};
struct MaxOp {
  static double init() { return -std::numeric_limits<double>::infinity(); }
  static double skip() { return -std::numeric_limits<double>::infinity(); }
  // NaN propagates. A branch, not a select: a running max rarely changes, so the branch predicts and
  // the comparison stays off the dependency chain.
  static double step(double acc, double x) { return x > acc || x != x ? x : acc; }
};
struct MinOp {
  static double init() { return std::numeric_limits<double>::infinity(); }
  static double skip() { return std::numeric_limits<double>::infinity(); }
  static double step(double acc, double x) { return x < acc || x != x ? x : acc; }
};

template <class Op, typename T, bool kMask>
inline void token(const T* v, const uint8_t* mask, int64_t t, double& acc, int64_t& cnt) {
  const double x = static_cast<double>(v[t]);
  if (kMask) {
    acc = Op::step(acc, select_bits(mask[t], x, Op::skip()));
    cnt += mask[t];
  } else {
    acc = Op::step(acc, x);
    ++cnt;
  }
}

// Rows [r0, r1), each accumulated sequentially from its first token (the float64 result is the same
// as a plain per-row loop), with kLanes rows in flight at once so the dependent float64 adds of
// different rows overlap.
template <class Op, typename T, bool kMask>
void reduce_rows(const T* v, const int32_t* off, const uint8_t* mask, SegOp op, double* out, int64_t r0, int64_t r1) {
  constexpr int kLanes = 4;
  int64_t t[kLanes], e[kLanes], row[kLanes], cnt[kLanes];
  double acc[kLanes];
  bool live[kLanes] = {};
  auto finish = [&](int64_t r, double a, int64_t c) {
    if (op == SegOp::Count) a = static_cast<double>(c);
    else if (op == SegOp::Mean) a = c ? a / static_cast<double>(c) : 0.0;
    out[r] = a;
  };
  int64_t next = r0;
  // Gives lane l the next non-empty row (empty rows are written on the way); false when none is left.
  auto take = [&](int l) {
    while (next < r1 && off[next] == off[next + 1]) finish(next++, Op::init(), 0);
    if (next >= r1) return live[l] = false;
    row[l] = next; t[l] = off[next]; e[l] = off[next + 1]; acc[l] = Op::init(); cnt[l] = 0;
    ++next;
    return live[l] = true;
  };
  bool all = true;
  for (int l = 0; l < kLanes; ++l) all = take(l) && all;
  while (all) {
    int64_t k = e[0] - t[0];
    for (int l = 1; l < kLanes; ++l) k = std::min(k, e[l] - t[l]);
    for (int64_t i = 0; i < k; ++i)
      for (int l = 0; l < kLanes; ++l) token<Op, T, kMask>(v, mask, t[l] + i, acc[l], cnt[l]);
    for (int l = 0; l < kLanes; ++l) {
      t[l] += k;
      if (t[l] == e[l]) {
        finish(row[l], acc[l], cnt[l]);
        all = take(l) && all;
      }
    }
  }
  for (int l = 0; l < kLanes; ++l) {  // rows still in flight finish one by one
    if (!live[l]) continue;
    for (int64_t i = t[l]; i < e[l]; ++i) token<Op, T, kMask>(v, mask, i, acc[l], cnt[l]);
    finish(row[l], acc[l], cnt[l]);
  }
}

template <typename T>
void reduce_dispatch(const T* v, const int32_t* off, const uint8_t* mask, SegOp op, double* out, int64_t r0, int64_t r1) {
  if (op == SegOp::Count) {  // reads the mask only (or nothing): no values, no dependent float chain
    for (int64_t r = r0; r < r1; ++r) {
      int64_t c = off[r + 1] - off[r];
      if (mask) {
        c = 0;
        for (int64_t t = off[r]; t < off[r + 1]; ++t) c += mask[t];
      }
      out[r] = static_cast<double>(c);
    }
    return;
  }
  switch (op) {
    case SegOp::Max:
      return mask ? reduce_rows<MaxOp, T, true>(v, off, mask, op, out, r0, r1)
                  : reduce_rows<MaxOp, T, false>(v, off, mask, op, out, r0, r1);
    case SegOp::Min:
      return mask ? reduce_rows<MinOp, T, true>(v, off, mask, op, out, r0, r1)
                  : reduce_rows<MinOp, T, false>(v, off, mask, op, out, r0, r1);
    default:  // sum and mean
      return mask ? reduce_rows<SumOp, T, true>(v, off, mask, op, out, r0, r1)
                  : reduce_rows<SumOp, T, false>(v, off, mask, op, out, r0, r1);
  }
}

}  // namespace


// The CPU backend's entries (cpu_backend.cc): the public functions dispatch to them through the active table.
namespace cpu {

Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx) {
  if ((v32 == nullptr) == (v64 == nullptr) && n > 0)
    return error(Code::DType, "values: expected exactly one of float32 / float64, got none or both");
  Status st = check_offsets(offsets, rows, n);
  if (!st.is_ok()) return st;
  int64_t bad = -1;
  const bool done = for_row_chunks(ctx, offsets, rows, n, mask, &bad, [&](int64_t r0, int64_t r1) {
    if (v32) reduce_dispatch(v32, offsets, mask, op, out, r0, r1);
    else reduce_dispatch(v64, offsets, mask, op, out, r0, r1);
  });
  Status result = !done ? error(Code::Aborted, "segmentReduce: aborted") : bad >= 0 ? mask_error(mask, bad) : Status::ok();
  // rows already reduced must not look valid after an error
  if (!result.is_ok()) std::fill(out, out + rows, std::numeric_limits<double>::quiet_NaN());
  return result;
}

Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx, bool reused_out) {
  Status st = check_offsets(offsets, rows, n);
  if (!st.is_ok()) return st;
  // Every token is written independently, so plain token blocks split even a single long row.
  const int64_t blocks = (n + kChunk - 1) / kChunk;
  std::vector<int64_t> bads(static_cast<size_t>(blocks), -1);
  const seg::SegmentKernels& k = active_kernels();
  const seg::BroadcastFn write =
      k.broadcast_stream != nullptr && reused_out && n * 4 >= kStreamOutputBytes ? k.broadcast_stream : k.broadcast;
  const bool done = parallel_blocks(ctx, n, kChunk, [&](int64_t b, int64_t e, int) {
    if (mask) bads[static_cast<size_t>(b / kChunk)] = first_non_binary(mask, b, e);
    const int64_t r = std::upper_bound(offsets, offsets + rows + 1, static_cast<int32_t>(b)) - offsets - 1;
    write(row_values, offsets, r, mask, out, b, e);
  });
  Status result = done ? Status::ok() : error(Code::Aborted, "segmentBroadcast: aborted");
  for (int64_t bad : bads)
    if (result.is_ok() && bad >= 0) result = mask_error(mask, bad);
  // tokens already written must not look valid after an error
  if (!result.is_ok()) std::fill(out, out + n, std::numeric_limits<float>::quiet_NaN());
  return result;
}

}  // namespace cpu
}  // namespace gear
