// segmentBroadcast's token writer for every ISA (ordinary stores; the compiler vectorises the loops).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "segment_kernels.h"

namespace gear {
namespace seg {
namespace baseline {

void broadcast(const double* vals, const int32_t* off, int64_t r, const uint8_t* mask, float* out, int64_t b,
               int64_t e) {
  for (int64_t t = b; t < e; ++r) {
    const int64_t se = std::min<int64_t>(e, off[r + 1]);
    const float v = static_cast<float>(vals[r]);
    if (mask) {
      uint32_t vb;
      std::memcpy(&vb, &v, 4);
      // Bit-and with 0 - mask (0 or all ones) gives v or +0 without a branch, so the loop vectorises.
      uint32_t* o = reinterpret_cast<uint32_t*>(out);
      for (; t < se; ++t) o[t] = vb & (0u - static_cast<uint32_t>(mask[t]));
    } else {
      std::fill(out + t, out + se, v);
      t = se;
    }
  }
}

}  // namespace baseline
}  // namespace seg
}  // namespace gear

const gear::seg::SegmentKernels gear::seg::segment_baseline = {&gear::seg::baseline::broadcast, nullptr};
