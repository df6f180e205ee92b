// The public logits and segment functions: each forwards to the active backend table (gear/backend.h).
#include "gear/backend.h"

#include <atomic>

namespace gear {

namespace {
// Written at module initialisation, before any op runs; atomic because every JS environment that loads
// the module (worker threads too) initialises it again, storing the same table while others may read it.
std::atomic<const Backend*> g_active{nullptr};
}  // namespace

const Backend& active_backend() {
  const Backend* b = g_active.load(std::memory_order_relaxed);
  return b != nullptr ? *b : cpu_backend();
}

void install_backend(const Backend& b) { g_active.store(&b, std::memory_order_relaxed); }

Status token_stats(const LogitsView& logits, const int32_t* targets, double temperature, float* logprob,
                   float* entropy, float* lse, const ExecContext& ctx) {
  return active_backend().token_stats(logits, targets, temperature, logprob, entropy, lse, ctx);
}

Status token_stats_backward(const LogitsView& logits, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx) {
  return active_backend().token_stats_backward(logits, targets, grad_logprob, grad_entropy, temperature, lse, entropy,
                                               out, ctx);
}

Status token_stats_partial(const LogitsView& shard, const int32_t* targets, int64_t vocab_start, double temperature,
                           double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx) {
  return active_backend().token_stats_partial(shard, targets, vocab_start, temperature, max, sum_exp, sum_exp_x,
                                              target_logit, ctx);
}

Status merge_token_stats(int64_t parts, const int64_t* vocab_start, const int64_t* vocab, const double* const* max,
                         const double* const* sum_exp, const double* const* sum_exp_x,
                         const double* const* target_logit, int64_t rows, double temperature, float* logprob,
                         float* entropy, float* lse) {
  return active_backend().merge_token_stats(parts, vocab_start, vocab, max, sum_exp, sum_exp_x, target_logit, rows,
                                            temperature, logprob, entropy, lse);
}

Status divergence(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta, double temperature,
                  double kl_cap, const int32_t* targets, const DivergenceOut& out, const ExecContext& ctx) {
  return active_backend().divergence(student, teacher, kind, beta, temperature, kl_cap, targets, out, ctx);
}

Status divergence_backward(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                           double temperature, double kl_cap, const float* grad, const float* value,
                           const float* student_lse, const float* teacher_lse, float* out, const ExecContext& ctx) {
  return active_backend().divergence_backward(student, teacher, kind, beta, temperature, kl_cap, grad, value,
                                              student_lse, teacher_lse, out, ctx);
}

Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx) {
  return active_backend().segment_reduce(v32, v64, n, offsets, rows, mask, op, out, ctx);
}

Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx, bool reused_out) {
  return active_backend().segment_broadcast(row_values, offsets, rows, n, mask, out, ctx, reused_out);
}

}  // namespace gear
