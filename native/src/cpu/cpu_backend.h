// The CPU implementations of the backend ops (token_stats.cc, divergence.cc, segment.cc, ...): one
// `gear::cpu::op` per entry of GEAR_BACKEND_OPS (gear/backend.h), declared with the type of the public
// function it stands behind, so the two signatures cannot drift apart (a definition with another
// signature leaves the table's entry undefined: the module fails to link or to load).
#pragma once

#include "gear/backend.h"

namespace gear {
namespace cpu {

#define GEAR_CPU_DECLARE(op, params) decltype(::gear::op) op;
GEAR_BACKEND_OPS(GEAR_CPU_DECLARE)
#undef GEAR_CPU_DECLARE

}  // namespace cpu
}  // namespace gear
