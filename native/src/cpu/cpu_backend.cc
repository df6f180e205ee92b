// The CPU module's backend table: every op runs on the CPU kernels (per-ISA dispatch inside each op).
#include "cpu_backend.h"

#include "gear/backend.h"

namespace gear {

const Backend& cpu_backend() {
#define GEAR_CPU_ENTRY(op, params) cpu::op,
  static const Backend kCpu{"cpu", GEAR_BACKEND_OPS(GEAR_CPU_ENTRY)};
#undef GEAR_CPU_ENTRY
  return kCpu;
}

}  // namespace gear
