// sparseDivergence's per-ISA piece (sparse_divergence_probs.inc): one side's per-entry checks, probabilities
// and their sum, compiled for the baseline (sparse_divergence.cc) and for AVX2 (sparse_divergence_avx2.cc,
// also used under AVX-512). The row scheduling, id matching and divergence math stay in sparse_divergence.cc.
#pragma once
#include <cstdint>

#include "gear/isa_target.h"

namespace gear {
namespace sparse_kern {

// A list's problem, in the order the checks report them.
enum Bad : int { kOk = 0, kNonFinite, kIdRange, kPadding, kDuplicate, kMass };
// A side whose top-k probabilities sum past this is not a list of log-probs (float rounding stays far below).
constexpr double kMaxMass = 1.01;

// Checks one side's k entries one by one (not the duplicates), writes their probabilities to prob[0..k),
// their sum to *mass and the count of listed ids to *valid; returns a Bad code and the offending entry
// (or -1) in *where.
using SideProbsFn = int (*)(const int32_t* ids, const float* lp, int64_t k, int64_t vocab, double* prob, double* mass,
                            int64_t* valid, int64_t* where);

#if GEAR_X86
extern const SideProbsFn side_probs_avx2;
#endif

}  // namespace sparse_kern
}  // namespace gear
