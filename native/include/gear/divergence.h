// The types of divergence / divergenceBackward (declared with every backend op in gear/backend.h):
// token-wise divergence between a student and a teacher distribution over the same vocabulary (both
// softmax(z / T)), with the student's entropy and both logsumexps, and the gradient with respect to the
// student logits. Plain C++ (no N-API).
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

}  // namespace gear
