#include "gear/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gear/isa_target.h"
#include "logits_kernels.h"
#include "optim_kernels.h"
#include "policy_loss_kernels.h"
#include "segment_kernels.h"
#include "sparse_divergence_kernels.h"
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

// ---- the per-ISA kernel tables ----
// Every op family of the CPU module dispatches the same way: a table struct of its kernels
// (<family>_kernels.h), one instance per ISA level, each defined in its own translation unit
// (<family>_<isa>.cc, compiled inside that ISA's target region and namespace), and one selector here
// that returns the active ISA's table. A family without a table for an ISA uses the next lower one.

namespace {

#if GEAR_X86
#define GEAR_X86_TABLE(t) (&(t))
#else
#define GEAR_X86_TABLE(t) nullptr
#endif
#if GEAR_ARM64
#define GEAR_ARM64_TABLE(t) (&(t))
#else
#define GEAR_ARM64_TABLE(t) nullptr
#endif

// The table type is deduced from the baseline table only (the others may be nullptr).
template <class T>
struct Same {
  using type = T;
};

template <class Table>
const Table& active_table(const Table& baseline, const typename Same<Table>::type* avx2,
                          const typename Same<Table>::type* avx512, const typename Same<Table>::type* neon) {
  switch (active_isa()) {
    case Isa::Avx512:
      if (avx512 != nullptr) return *avx512;
      return avx2 != nullptr ? *avx2 : baseline;
    case Isa::Avx2: return avx2 != nullptr ? *avx2 : baseline;
    case Isa::Neon: return neon != nullptr ? *neon : baseline;
    default: return baseline;
  }
}

}  // namespace

const kern::TokenStatsKernels& kern::token_stats_kernels() {
  return active_table(token_stats_baseline, GEAR_X86_TABLE(token_stats_avx2), GEAR_X86_TABLE(token_stats_avx512),
                      GEAR_ARM64_TABLE(token_stats_neon));
}

const kern::DivergenceKernels& kern::divergence_kernels() {
  return active_table(divergence_baseline, GEAR_X86_TABLE(divergence_avx2), GEAR_X86_TABLE(divergence_avx512),
                      GEAR_ARM64_TABLE(divergence_neon));
}

const ppo::PolicyLossKernels& ppo::policy_loss_kernels() {
  return active_table(policy_loss_baseline, GEAR_X86_TABLE(policy_loss_avx2), GEAR_X86_TABLE(policy_loss_avx512),
                      GEAR_ARM64_TABLE(policy_loss_neon));
}

const optim_detail::OptimKernels& optim_detail::optim_kernels() {
  return active_table(optim_baseline, GEAR_X86_TABLE(optim_avx2), GEAR_X86_TABLE(optim_avx512), nullptr);
}

const seg::SegmentKernels& seg::segment_kernels() {
  return active_table(segment_baseline, GEAR_X86_TABLE(segment_avx2), GEAR_X86_TABLE(segment_avx512),
                      GEAR_ARM64_TABLE(segment_neon));
}

const sparse_kern::SparseKernels& sparse_kern::sparse_kernels() {
  return active_table(sparse_divergence_baseline, GEAR_X86_TABLE(sparse_divergence_avx2),
                      GEAR_X86_TABLE(sparse_divergence_avx512), GEAR_ARM64_TABLE(sparse_divergence_neon));
}

#undef GEAR_X86_TABLE
#undef GEAR_ARM64_TABLE

}  // namespace gear
