#include "gear/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gear/isa_target.h"

namespace gear {

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
#if GEAR_X86 && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
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
