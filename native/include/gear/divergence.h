// divergence / divergenceBackward: token-wise divergence between a student and a teacher distribution
// over the same vocabulary (both softmax(z / T)), with the student's entropy and both logsumexps, and the
// gradient with respect to the student logits. Plain C++ (no N-API).
//
// Kinds: reverse KL(p_s || p_t), forward KL(p_t || p_s), generalised JSD(beta) with mixture
// M = (1-beta) p_s + beta p_t and value beta KL(p_t || M) + (1-beta) KL(p_s || M) (beta = 1 is reverse KL
// and beta = 0 forward KL, as TRL defines them). -Infinity logits are masked entries (0 log 0 = 0); a KL is
// +Infinity only for a true support mismatch (the side that weights the sum has a finite logit where the
// other side has -Infinity). On any error every output is filled with NaN.
#pragma once
#include <cstdint>

#include "gear/types.h"

namespace gear {

enum class DivKind : int { ReverseKl = 0, ForwardKl = 1, Jsd = 2 };

struct DivergenceOut {
  float* value = nullptr;             // per row; min(divergence, kl_cap)
  float* student_entropy = nullptr;
  float* student_lse = nullptr;
  float* teacher_lse = nullptr;
  float* student_logprob = nullptr;   // need targets
  float* teacher_logprob = nullptr;
};

// Reverse and forward KL read each row once (one pass over both arrays); JSD needs both normalisers
// before its log-mixture terms, so it reads each row twice (the second time from cache). Student and
// teacher must share shape and dtype. kl_cap (> 0, may be +Infinity) caps the value.
Status divergence(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                  double temperature, double kl_cap, const int32_t* targets, const DivergenceOut& out,
                  const ExecContext& ctx);

// dL/dz_student for L = sum_r grad[r] * value[r], written to out (rows * vocab float32). Statistics of the
// forward (value uncapped below kl_cap, student and teacher lse) are reused when given (all three or none;
// JSD always recomputes its mixture term). Rows whose divergence reached kl_cap get a zero gradient; a
// +Infinity divergence without a finite kl_cap is ERR_NON_FINITE.
Status divergence_backward(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                           double temperature, double kl_cap, const float* grad, const float* value,
                           const float* student_lse, const float* teacher_lse, float* out, const ExecContext& ctx);

}  // namespace gear
