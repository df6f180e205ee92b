// segmentBroadcast for AVX-512: streaming (non-temporal) stores for a large output the caller reuses.
// They skip the read-for-ownership of every output line (measured: about half the time of ordinary
// stores at 10^7 tokens). A freshly allocated output is faster with ordinary stores (the page-fault
// zeroing has just brought its lines into the cache), so that case keeps the baseline writer.
#include <algorithm>
#include <cstdint>

#include "gear/isa_target.h"
#include "segment_kernels.h"

#if GEAR_X86
GEAR_AVX512_DIAG_BEGIN
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace gear {
namespace seg {
namespace avx512 {
namespace {

// Tokens [b, e) starting in row r; same values as the baseline writer (v or +0 per token).
void broadcast_stream(const double* vals, const int32_t* off, int64_t r, const uint8_t* mask, float* out, int64_t b,
                      int64_t e) {
  int64_t t = b;
  auto scalar_to = [&](int64_t stop) {
    for (; t < stop; ++t) {
      while (off[r + 1] <= t) ++r;
      out[t] = mask && !mask[t] ? 0.0f : static_cast<float>(vals[r]);
    }
  };
  // Streaming stores need 64-byte alignment: a scalar head up to the first aligned token.
  const int64_t mis = static_cast<int64_t>((reinterpret_cast<uintptr_t>(out + t) & 63) / sizeof(float));
  scalar_to(std::min(e, t + (mis ? 16 - mis : 0)));
  alignas(64) float lanes[16];
  for (; t + 16 <= e; t += 16) {
    while (off[r + 1] <= t) ++r;
    __m512 v;
    if (off[r + 1] >= t + 16) {
      v = _mm512_set1_ps(static_cast<float>(vals[r]));
    } else {  // a row boundary inside these 16 tokens
      int64_t q = r;
      for (int i = 0; i < 16; ++i) {
        while (off[q + 1] <= t + i) ++q;
        lanes[i] = static_cast<float>(vals[q]);
      }
      v = _mm512_load_ps(lanes);
    }
    if (mask) {
      const __m512i m = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mask + t)));
      v = _mm512_maskz_mov_ps(_mm512_test_epi32_mask(m, m), v);
    }
    _mm512_stream_ps(out + t, v);
  }
  scalar_to(e);
  _mm_sfence();  // streaming stores are weakly ordered: complete them before the task ends
}

}  // namespace
}  // namespace avx512
}  // namespace seg
}  // namespace gear
GEAR_TARGET_END
GEAR_AVX512_DIAG_END

const gear::seg::SegmentKernels gear::seg::segment_avx512 = {&gear::seg::baseline::broadcast,
                                                             &gear::seg::avx512::broadcast_stream};
#endif  // GEAR_X86
