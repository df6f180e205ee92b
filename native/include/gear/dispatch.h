// CPU feature dispatch: the instruction set is chosen once at load (the best the CPU supports, or
// GEAR_RL_ISA=<name> to force a lower one) and kernels pick their function-pointer table from it.
// Every op family of the CPU module has one table struct of its kernels, one instance per ISA level,
// each in its own file (<family>_<isa>.cc) inside a target region (gear/isa_target.h) and its own
// namespace, so no inline helper compiled for a wider ISA can leak into the baseline path; one
// selector per family in native/src/cpu/dispatch.cc returns the active ISA's table.
//
// The ISAs form one ladder per architecture, lowest first:
//   x86-64:  baseline < avx2 (AVX2 + FMA + F16C) < avx512 (F + BW + VL + DQ)
//   aarch64: baseline < neon (Advanced SIMD, present on every ARMv8-A core)
// "baseline" is the portable scalar build of the same kernels on every architecture.
#pragma once

namespace gear {

enum class Isa : int { Baseline = 0, Avx2 = 1, Avx512 = 2, Neon = 3 };

const char* isa_name(Isa isa);
// Parses "baseline" | "avx2" | "avx512" | "neon"; returns false on anything else.
bool parse_isa(const char* s, Isa* out);
// Whether `isa` belongs to the ladder of the architecture this binary was built for.
bool isa_of_this_arch(Isa isa);
// The best ISA this CPU supports.
Isa detected_isa();
// Every ISA this CPU runs, lowest first (baseline always first); returns the count (<= 4).
int available_isas(Isa out[4]);
// The ISA kernels use now.
Isa active_isa();
// Forces an ISA of this architecture, clamped to the best this CPU supports; returns the one in
// effect. An ISA of another architecture leaves the setting as it is and returns it unchanged
// (callers check isa_of_this_arch first to report an error).
Isa set_isa(Isa isa);

}  // namespace gear
