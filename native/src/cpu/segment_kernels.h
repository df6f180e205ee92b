// Internal to segmentBroadcast (segment*.cc): its per-ISA kernel table, and what the kernel body
// (segment_kernels.inc) needs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace gear {
namespace seg {

// Writes segmentBroadcast's tokens [b, e), which start in row r: out[t] = vals[row(t)] as float32, +0
// where mask is 0 (mask bytes are 0 or 1; null mask: every token).
using BroadcastFn = void (*)(const double* vals, const int32_t* off, int64_t r, const uint8_t* mask, float* out,
                             int64_t b, int64_t e);

struct SegmentKernels {
  BroadcastFn broadcast;         // ordinary stores
  BroadcastFn broadcast_stream;  // streaming stores, for a large output the caller reuses (null: none)
};

}  // namespace seg
}  // namespace gear
