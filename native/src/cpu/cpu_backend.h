// The CPU implementations of the backend ops (token_stats.cc, divergence.cc, segment.cc), with the
// signatures of the public functions they stand behind (gear/backend.h).
#pragma once

#include "gear/divergence.h"
#include "gear/segment.h"
#include "gear/token_stats.h"

namespace gear {
namespace cpu {

Status token_stats(const LogitsView& logits, const int32_t* targets, double temperature, float* logprob,
                   float* entropy, float* lse, const ExecContext& ctx);
Status token_stats_backward(const LogitsView& logits, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx);
Status token_stats_partial(const LogitsView& shard, const int32_t* targets, int64_t vocab_start,
                           double temperature, double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx);
Status merge_token_stats(int64_t parts, const int64_t* vocab_start, const int64_t* vocab, const double* const* max,
                         const double* const* sum_exp, const double* const* sum_exp_x,
                         const double* const* target_logit, int64_t rows, double temperature, float* logprob,
                         float* entropy, float* lse);
Status divergence(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                  double temperature, double kl_cap, const int32_t* targets, const DivergenceOut& out,
                  const ExecContext& ctx);
Status divergence_backward(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                           double temperature, double kl_cap, const float* grad, const float* value,
                           const float* student_lse, const float* teacher_lse, float* out, const ExecContext& ctx);
Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx);
Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx, bool reused_out);

}  // namespace cpu
}  // namespace gear
