// The backend table: the ops a device backend implements, as function pointers with the signatures of
// the public functions (gear/token_stats.h, gear/divergence.h, gear/segment.h). Those public functions
// dispatch through the active table, so every caller (the bindings included) is the same code for the
// CPU module and the CUDA module. The table is chosen once, when the module initialises, before any op
// runs; it never changes afterwards.
#pragma once

#include "gear/divergence.h"
#include "gear/segment.h"
#include "gear/token_stats.h"

namespace gear {

struct Backend {
  const char* name;  // "cpu" | "cuda"
  decltype(&::gear::token_stats) token_stats;
  decltype(&::gear::token_stats_backward) token_stats_backward;
  decltype(&::gear::token_stats_partial) token_stats_partial;
  decltype(&::gear::merge_token_stats) merge_token_stats;
  decltype(&::gear::divergence) divergence;
  decltype(&::gear::divergence_backward) divergence_backward;
  decltype(&::gear::segment_reduce) segment_reduce;
  decltype(&::gear::segment_broadcast) segment_broadcast;
};

// The CPU kernels (native/src/cpu/cpu_backend.cc); the table in effect unless another is installed.
const Backend& cpu_backend();
// The table the public functions dispatch through.
const Backend& active_backend();
// Makes `b` the active table. Called at module initialisation (the CUDA module's), before any op runs;
// every later call installs the same table.
void install_backend(const Backend& b);

}  // namespace gear
