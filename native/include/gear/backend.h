// The backend table: the ops a device backend implements, as function pointers with the signatures of
// the public functions (gear/token_stats.h, gear/divergence.h, gear/segment.h). Those public functions
// dispatch through the active table, so every caller (the bindings included) is the same code for the
// CPU module and the CUDA module. The table is chosen once, when the module initialises, before any op
// runs; it never changes afterwards.
#pragma once

#include "gear/divergence.h"
#include "gear/segment.h"
#include "gear/token_stats.h"

// Every op of the table, one X(name) each, in table order: the public function `gear::name` (declared in a
// header included above) and its CPU implementation `gear::cpu::name`. `struct Backend`, the CPU
// declarations (native/src/cpu/cpu_backend.h) and both tables are generated from this list, so adding
// a backend op is one line here (plus its public forward to active_backend() in native/src/core/backend.cc).
#define GEAR_BACKEND_OPS(X) \
  X(token_stats)            \
  X(token_stats_backward)   \
  X(token_stats_partial)    \
  X(merge_token_stats)      \
  X(divergence)             \
  X(divergence_backward)    \
  X(segment_reduce)         \
  X(segment_broadcast)

namespace gear {

struct Backend {
  const char* name;  // "cpu" | "cuda"
#define GEAR_BACKEND_FIELD(op) decltype(&::gear::op) op;
  GEAR_BACKEND_OPS(GEAR_BACKEND_FIELD)
#undef GEAR_BACKEND_FIELD
};

// The CPU kernels (native/src/cpu/cpu_backend.cc); the table in effect unless another is installed.
const Backend& cpu_backend();
// The table the public functions dispatch through.
const Backend& active_backend();
// Makes `b` the active table. Called at module initialisation (the CUDA module's), before any op runs;
// every later call installs the same table.
void install_backend(const Backend& b);

}  // namespace gear
