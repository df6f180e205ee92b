// sparseDivergence / sparseDivergenceBackward: token-wise divergences between a student and a teacher
// known only through their top-k log-probs (what an inference server returns), with no vocabulary-wide
// rows. Plain C++ (no N-API).
//
// Layout: per token a fixed k per side: ids (int32, n * k) and log-probs (float32, n * k); a padding
// entry has id -1 and log-prob -Infinity. The two sides carry their own top-k sets.
//
// Support: the ids both sides list (the shared set C). Every other id, including one listed by a single
// side, whose probability the other side does not report, belongs to one tail bucket. The partition
// {each id of C} + {bucket} is the finest one on which both distributions are known, so (data-processing
// inequality) every divergence on it is a lower bound of the full-vocabulary one.
//   Bucket:       the categories of C plus the bucket of mass 1 - sum_C p, with log-mass
//                 log(-expm1(min(log sum_C p, -tail_clamp))) (TRL SDPO's add_tail_bucket with clamp 1e-7).
//   Renormalize:  the distributions conditioned on C (p / sum_C p).
// Kinds and conventions as the dense op (gear/divergence.h): reverse KL(p_s || p_t), forward KL, JSD(beta)
// with M = (1-beta) p_s + beta p_t; 0 log 0 = 0; +Infinity for a true support mismatch; JSD with beta 1 /
// 0 is reverse / forward KL. On any error every output is filled with NaN.
#pragma once
#include <cstdint>

#include "gear/divergence.h"
#include "gear/types.h"

namespace gear {

enum class SparseSupport : int { Bucket = 0, Renormalize = 1 };

// One side's top-k lists: n rows of k entries.
struct SparseTopk {
  const int32_t* ids = nullptr;
  const float* logprobs = nullptr;
  int64_t k = 0;
};

struct SparseDivergenceOptions {
  DivKind kind = DivKind::ReverseKl;
  double beta = 0.5;
  SparseSupport support = SparseSupport::Bucket;
  double tail_clamp = 1e-7;  // >= 0: the shared log-mass is clamped at <= -tail_clamp (bucket support)
  int64_t vocab = 0;          // > 0: ids must be < vocab, and the entropy upper bound is finite
  double kl_cap = INFINITY;   // > 0
};

struct SparseDivergenceOut {
  float* value = nullptr;                // min(divergence, kl_cap)
  float* student_tail = nullptr;         // 1 - sum of the student's own top-k probabilities (>= 0)
  float* teacher_tail = nullptr;
  float* student_shared_mass = nullptr;  // sum over C of p_s
  float* teacher_shared_mass = nullptr;
  int32_t* shared = nullptr;             // |C|
  float* entropy_lower = nullptr;        // bounds on the student's full entropy (upper: +Infinity without vocab)
  float* entropy_upper = nullptr;
};

// Work per token: O(k_s + k_t) through a small per-thread hash of ids (lists up to 255 entries per side),
// O((k_s + k_t) log(k_s + k_t)) beyond (sorted matching).
// Rejected input (first bad row): a NaN / +Infinity log-prob (ERR_NON_FINITE), an id < -1, >= vocab, or a
// padding id with a finite log-prob (ERR_TARGET_RANGE / ERR_OPTION), an id listed twice on one side, or a
// side whose probabilities sum past 1.01 (ERR_OPTION: not log-probs).
Status sparse_divergence(const SparseTopk& student, const SparseTopk& teacher, int64_t n,
                         const SparseDivergenceOptions& opt, const SparseDivergenceOut& out, const ExecContext& ctx);

// dL/d(student top-k log-probs) for L = sum_r grad[r] * value[r], written to out (n * student.k float32),
// each log-prob treated as an independent input (chain to logits through d logprob_i / d z). Entries
// outside C and padding get 0; rows whose divergence reached kl_cap get 0; a +Infinity divergence without
// a finite kl_cap is ERR_NON_FINITE.
Status sparse_divergence_backward(const SparseTopk& student, const SparseTopk& teacher, int64_t n,
                                  const SparseDivergenceOptions& opt, const float* grad, float* out,
                                  const ExecContext& ctx);

}  // namespace gear
