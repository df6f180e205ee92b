// The CPU module's backend table: every op runs on the CPU kernels (per-ISA dispatch inside each op).
#include "cpu_backend.h"

#include "gear/backend.h"

namespace gear {

const Backend& cpu_backend() {
  static const Backend kCpu{
      "cpu",
      cpu::token_stats,
      cpu::token_stats_backward,
      cpu::token_stats_partial,
      cpu::merge_token_stats,
      cpu::divergence,
      cpu::divergence_backward,
      cpu::segment_reduce,
      cpu::segment_broadcast,
  };
  return kCpu;
}

}  // namespace gear
