#include "gear/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gear/isa_target.h"
#if GEAR_X86 && defined(_WIN32)
#include <intrin.h>  // __cpuidex, _xgetbv: MSVC and MinGW-w64 alike (clashes with <cpuid.h>'s __cpuid macro)
#elif GEAR_X86 && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace gear {

#if GEAR_X86 && defined(_WIN32)
namespace {
// XCR0: which register states the OS saves on context switches. g++/clang need the xsave target for
// the intrinsic; MSVC compiles it anywhere (its target regions are empty).
GEAR_TARGET_BEGIN("xsave")
unsigned long long os_saved_states() { return _xgetbv(0); }
GEAR_TARGET_END

// Windows builds (MSVC has no __builtin_cpu_supports; MinGW runs the same code, so it is tested) read
// CPUID and XCR0 themselves, with libgcc's rules: AVX2 needs the OS to save YMM state (XCR0 bits 1-2),
// AVX-512 also opmask and ZMM state (bits 5-7).
Isa detected_isa_cpuid() {
  int r[4];
  __cpuidex(r, 0, 0);
  const int max_leaf = r[0];
  __cpuidex(r, 1, 0);
  const unsigned ecx1 = static_cast<unsigned>(r[2]);
  const bool fma = ecx1 & (1u << 12), osxsave = ecx1 & (1u << 27), avx = ecx1 & (1u << 28), f16c = ecx1 & (1u << 29);
  if (!osxsave || !avx || max_leaf < 7) return Isa::Baseline;
  const unsigned long long xcr0 = os_saved_states();
  if ((xcr0 & 0x6) != 0x6) return Isa::Baseline;
  __cpuidex(r, 7, 0);
  const unsigned ebx7 = static_cast<unsigned>(r[1]);
  const bool avx2 = ebx7 & (1u << 5), avx512f = ebx7 & (1u << 16), avx512dq = ebx7 & (1u << 17),
             avx512bw = ebx7 & (1u << 30), avx512vl = ebx7 & (1u << 31);
  if (!avx2 || !fma || !f16c) return Isa::Baseline;
  if (avx512f && avx512dq && avx512bw && avx512vl && (xcr0 & 0xe6) == 0xe6) return Isa::Avx512;
  return Isa::Avx2;
}
}  // namespace
#endif

namespace {

// Position of an ISA on this architecture's ladder; -1 when it is not on it.
int rank(Isa isa) {
  switch (isa) {
    case Isa::Baseline: return 0;
#if GEAR_X86
    case Isa::Avx2: return 1;
    case Isa::Avx512: return 2;
#elif GEAR_ARM64
    case Isa::Neon: return 1;
#endif
    default: return -1;
  }
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
    default: return "baseline";
  }
}

bool parse_isa(const char* s, Isa* out) {
  if (!s) return false;
  if (!std::strcmp(s, "baseline")) { *out = Isa::Baseline; return true; }
  if (!std::strcmp(s, "avx2")) { *out = Isa::Avx2; return true; }
  if (!std::strcmp(s, "avx512")) { *out = Isa::Avx512; return true; }
  if (!std::strcmp(s, "neon")) { *out = Isa::Neon; return true; }
  return false;
}

bool isa_of_this_arch(Isa isa) { return rank(isa) >= 0; }

Isa detected_isa() {
#if GEAR_X86 && defined(_WIN32)
  return detected_isa_cpuid();
#elif GEAR_X86 && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports rejects "f16c". Its YMM state
  // support by the OS is part of the avx2 check it is paired with.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma") && f16c)
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
    return Isa::Avx2;
#elif GEAR_ARM64
  return Isa::Neon;  // Advanced SIMD is mandatory on ARMv8-A
#endif
  return Isa::Baseline;
}

int available_isas(Isa out[4]) {
  static const Isa kAll[] = {Isa::Baseline, Isa::Avx2, Isa::Avx512, Isa::Neon};
  const int best = rank(detected_isa());
  int n = 0;
  for (int r = 0; r <= best; ++r)
    for (Isa isa : kAll)
      if (rank(isa) == r) out[n++] = isa;
  return n;
}

static std::atomic<int>& active_slot() {
  static std::atomic<int> slot{[] {
    Isa best = detected_isa();
    Isa want = best;
    if (parse_isa(std::getenv("GEAR_RL_ISA"), &want) && rank(want) >= 0 && rank(want) < rank(best))
      best = want;
    return static_cast<int>(best);
  }()};
  return slot;
}

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

Isa set_isa(Isa isa) {
  if (rank(isa) < 0) return active_isa();
  Isa best = detected_isa();
  if (rank(isa) > rank(best)) isa = best;
  active_slot().store(static_cast<int>(isa));
  return isa;
}

}  // namespace gear
