#include "gear/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace gear {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "baseline";
  }
}

bool parse_isa(const char* s, Isa* out) {
  if (!s) return false;
  if (!std::strcmp(s, "baseline")) { *out = Isa::Baseline; return true; }
  if (!std::strcmp(s, "avx2")) { *out = Isa::Avx2; return true; }
  if (!std::strcmp(s, "avx512")) { *out = Isa::Avx512; return true; }
  return false;
}

Isa detected_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Baseline;
}

static std::atomic<int>& active_slot() {
  static std::atomic<int> slot{[] {
    Isa best = detected_isa();
    Isa want = best;
    if (parse_isa(std::getenv("GEAR_RL_ISA"), &want) && static_cast<int>(want) < static_cast<int>(best))
      best = want;
    return static_cast<int>(best);
  }()};
  return slot;
}

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

Isa set_isa(Isa isa) {
  Isa best = detected_isa();
  if (static_cast<int>(isa) > static_cast<int>(best)) isa = best;
  active_slot().store(static_cast<int>(isa));
  return isa;
}

}  // namespace gear
