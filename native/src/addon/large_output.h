// Fresh output arrays for streaming kernels. Writing a newly allocated 40 MB array costs more in
// first-touch page faults (~10,000 of 4 KiB, each zeroing a page in the kernel) than the kernel's own
// work; large outputs therefore ask for transparent huge pages (2 MiB: 512x fewer faults) before their
// first touch. The array is an ordinary Float32Array owned by V8: only the kernel's paging hint differs.
#pragma once
#include <napi.h>
#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

#include <cstddef>
#include <cstdint>

namespace gear::addon {

inline Napi::Float32Array NewStreamOutputF32(Napi::Env env, size_t n) {
  Napi::Float32Array out = Napi::Float32Array::New(env, n);
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const size_t bytes = n * sizeof(float);
  if (bytes >= 4 * kHuge) {
    // Only the 2 MiB-aligned interior: a large array is a fresh mapping of its own, untouched there.
    // The hint is advisory; any failure (THP disabled, not a mapping) leaves ordinary pages.
    const auto b = reinterpret_cast<uintptr_t>(out.Data());
    const uintptr_t lo = (b + kHuge - 1) & ~(kHuge - 1), hi = (b + bytes) & ~(kHuge - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
#endif
  return out;
}

}  // namespace gear::addon
