// CUDA implementations of the logits and segment kernels, with the same signatures and semantics as the
// CPU ones (gear/token_stats.h, gear/divergence.h, gear/segment.h). Pointers are HOST pointers: each
// function moves bounded chunks of rows to the device, runs there and copies the results back, polling
// ctx.abort between chunks (ctx.pool is not used). Compiled only into the separate gear_rl_cuda module.
#pragma once
#include <cstdint>
#include <string>

#include "gear/backend.h"
#include "gear/types.h"
#include "gear/divergence.h"
#include "gear/segment.h"

namespace gear {
namespace cuda {

// Number of usable devices; on failure (no driver, no device) 0 with the CUDA error in *err.
int device_count(std::string* err);
// "sm_<major><minor>" and the name of device 0 (empty when there is none).
std::string device_arch();
std::string device_name();

// The CUDA module's backend table (cuda_backend.cc): the functions below, and the CPU entries for the ops
// without a device kernel (merge_token_stats: per-row math on small arrays). Installed at module init.
const Backend& backend();

Status token_stats(const LogitsView& logits, const int32_t* targets, double temperature, float* logprob,
                   float* entropy, float* lse, const ExecContext& ctx);
Status token_stats_backward(const LogitsView& logits, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx);
Status token_stats_partial(const LogitsView& shard, const int32_t* targets, int64_t vocab_start,
                           double temperature, double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx);

Status divergence(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                  double temperature, double kl_cap, const int32_t* targets, const DivergenceOut& out,
                  const ExecContext& ctx);
Status divergence_backward(const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,
                           double temperature, double kl_cap, const float* grad, const float* value,
                           const float* student_lse, const float* teacher_lse, float* out, const ExecContext& ctx);

Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx);
// reused_out: accepted for the CPU signature; the result is copied from the device either way.
Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx, bool reused_out = false);

}  // namespace cuda
}  // namespace gear
