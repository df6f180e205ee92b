// sparseDivergence's per-ISA kernel table: each side's checks and probabilities, the entropy pass, eight
// logs, and for short lists the id matching by vector compares, the shared sums and the tail bucket's
// gradient (sparse_divergence_kernels.inc, instantiated per ISA by isa_kernels.inc). The row
// scheduling, the other matching paths and the divergence math stay in sparse_divergence.cc and the
// per-row steps it includes (sparse_divergence_match.inc, _value.inc, _grad.inc).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

namespace gear {
namespace sparse_kern {

// The lowest set bit's index of x != 0, and the count of set bits (the kernels' mask arithmetic).
inline int low_bit(uint32_t x) {
#if defined(_MSC_VER) && !defined(__clang__)
  unsigned long i;
  _BitScanForward(&i, x);
  return static_cast<int>(i);
#else
  return __builtin_ctz(x);
#endif
}
inline int bit_count(uint32_t x) {
#if defined(_MSC_VER) && !defined(__clang__)
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  return static_cast<int>((((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24);
#else
  return __builtin_popcount(x);
#endif
}

// A list's problem, in the order the checks report them.
enum Bad : int { kOk = 0, kNonFinite, kIdRange, kPadding, kDuplicate, kMass };
// A side whose top-k probabilities sum past this is not a list of log-probs (float rounding stays far below).
constexpr double kMaxMass = 1.01;

// Checks one side's k entries one by one (not the duplicates), writes their probabilities to prob[0..k),
// their sum to *mass and the count of listed ids to *valid; returns a Bad code and the offending entry
// (or -1) in *where.
using SideProbsFn = int (*)(const int32_t* ids, const float* lp, int64_t k, int64_t vocab, double* prob, double* mass,
                            int64_t* valid, int64_t* where);

// The listed entries' part of the entropy bounds: hk = -sum p a over the listed entries (id >= 0) with
// p = e^a > 0, mn the smallest such p and lmn its log-prob a (mn = +Infinity, lmn = 0 when there is
// none), listed the count of listed entries.
struct ListEntropy {
  double hk, mn, lmn;
  int64_t listed;
};
using ListEntropyFn = void (*)(const int32_t* ids, const float* lp, const double* prob, int64_t k, ListEntropy* out);

// Lists of at most this many entries per side are matched by vector compares (where the ISA has them).
constexpr int64_t kSmallK = 32;

// For lists already checked by SideProbsFn (ids >= -1) of at most kSmallK entries: tix[i] = the teacher's
// index of the student's entry i (-1 for padding or an id the teacher does not list); returns the count of
// shared ids, or -1 when either list holds an id twice.
using MatchSmallFn = int64_t (*)(const int32_t* sid, int64_t ks, const int32_t* tid, int64_t kt, int32_t* tix);

// Over the shared entries of a row of short lists (tix from MatchSmallFn; ps, pt from SideProbsFn):
// out[0] = sum p_s, out[1] = sum p_t, out[2] = sum of the divergence's terms (kind 0 reverse KL, 1 forward
// KL, 2 JSD with weight beta), each term as term() of sparse_divergence_value.inc gives it.
using SharedSumsFn = void (*)(const float* slp, const double* ps, int64_t ks, const float* tlp, const double* pt,
                              int64_t kt, const int32_t* tix, int kind, double beta, double* out);

// The tail-bucket gradient of a row of short lists (tix from MatchSmallFn): o[i] = g (dterm_i - p_i hb) for
// the student's shared entries (dterm of sparse_divergence_value.inc), 0 for the others.
using BucketGradFn = void (*)(const float* slp, const double* ps, int64_t ks, const float* tlp, const double* pt,
                              int64_t kt, const int32_t* tix, int kind, double beta, double g, double hb, float* o);

// log x[j] in place for j < n <= 8 (x is 8 long, every entry finite and > 0: a vector form takes those past
// n too), each lane's result independent of the others (the scalar layer's log_d to 1e-16 on every layer).
using Logs8Fn = void (*)(double* x, int n);

struct SparseKernels {
  SideProbsFn side_probs;
  ListEntropyFn list_entropy;
  Logs8Fn logs8;
  MatchSmallFn match_small;  // null: no vector matching (the hash table of sparse_divergence_match.inc)
  SharedSumsFn shared_sums;  // with match_small
  BucketGradFn bucket_grad;  // with match_small
};

}  // namespace sparse_kern
}  // namespace gear
