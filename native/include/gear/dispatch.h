// CPU feature dispatch: the instruction set is chosen once at load (the best the CPU supports, or
// GEAR_RL_ISA=baseline|avx2|avx512 to force a lower one) and kernels pick their function-pointer table
// from it. Each ISA's kernels live in their own file inside a `#pragma GCC target` region and in their
// own namespace, so no inline helper compiled for AVX-512 can leak into the baseline path.
#pragma once

namespace gear {

enum class Isa : int { Baseline = 0, Avx2 = 1, Avx512 = 2 };

const char* isa_name(Isa isa);
// The best ISA this CPU supports.
Isa detected_isa();
// The ISA kernels use now.
Isa active_isa();
// Forces an ISA (clamped to what the CPU supports); returns the one in effect.
Isa set_isa(Isa isa);
// Parses "baseline" | "avx2" | "avx512"; returns false on anything else.
bool parse_isa(const char* s, Isa* out);

}  // namespace gear
