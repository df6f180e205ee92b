// Memory bandwidth probes: the "floor" every benchmark reports against. Measured in the same process
// and run as the kernels, because a shared machine's bandwidth drifts between minutes.
#pragma once
#include <cstdint>

#include "gear/types.h"

namespace gear {

enum class BandwidthMode : int {
  Read1 = 0,     // read-only, one sequential stream per thread
  Read2 = 1,     // read-only, two interleaved streams per thread (more misses in flight)
  CopyNT = 2,    // copy with non-temporal (streaming) stores: bytes read + bytes written
  CopyPlain = 3, // copy with regular stores (pays read-for-ownership traffic)
};

// Runs `reps` timed passes of `mode` over a buffer of `bytes` (per array) split across `threads`
// threads started for the probe (not the addon pool, so the thread count is explicit). The buffers are
// allocated and touched once before timing. out_gbs[i] = bytes moved / seconds / 1e9 of rep i, where
// bytes moved is `bytes` for reads and 2 * `bytes` for copies.
Status memory_bandwidth(BandwidthMode mode, int64_t bytes, int threads, int reps, double* out_gbs);

}  // namespace gear
