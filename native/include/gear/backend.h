// The ops of the backend tables, declared once: each op's signature and contract in the list below, from
// which come its public declaration (gear::op, defined in native/src/core/backend.cc), `struct Backend`'s
// field, the backends' declarations (native/src/cpu/cpu_backend.h, gear/cuda.h) and both tables. The public
// functions check their arguments once, pick the table (the CPU's, or the CUDA module's device table for a
// call with ExecContext::device >= 0), call it, and NaN-fill the outputs after any error, so a backend
// trusts its arguments and never poisons its outputs itself. Plain C++ (no N-API): pointers, shapes,
// dtype, Status.
//
// Semantics of the logits ops: -Infinity logits are masked entries (0 log 0 = 0); NaN or +Infinity logits
// and rows without any finite logit are ERR_NON_FINITE (the message names the row and side); on any error
// every output is filled with NaN, so nothing is left looking valid.
//
//  token_stats          logprob[r] = z[r, y_r]/T - lse_r, entropy[r] = -sum p log p, lse[r] = logsumexp(z[r]/T),
//                       in one pass over the row. targets may be null (then logprob must be null too); any
//                       output may be null.
//  token_stats_backward dL/dz for L = sum_r grad_logprob[r] * logprob[r] + grad_entropy[r] * entropy[r]
//                       (either gradient may be null = zero), into out (rows * vocab float32). lse / entropy
//                       are the forward's statistics (both null: recomputed; entropy is needed only with
//                       grad_entropy). out may be the logits themselves (float32, in place).
//  token_stats_partial  statistics of a vocabulary shard [vocab_start, vocab_start + shard.vocab) of each
//                       row relative to the shard's max raw logit (rowmath::SoftmaxStats): max, sum_exp,
//                       sum_exp_x, and target_logit = the raw logit of targets[r] in the shard, NaN outside.
//                       A shard row may be fully masked (max -Infinity, sums 0).
//  merge_token_stats    merges `parts` shard statistics (same rows and temperature) into logprob / entropy /
//                       lse, exactly (log-sum-exp rules in float64), in the given order. The shards tile the
//                       vocabulary in order; each row's target lies in exactly one shard. Host math only.
//  divergence           per row: the divergence of `kind` (gear/divergence.h; capped at kl_cap > 0, which
//                       may be +Infinity), the student's entropy, both lse and (with targets) both log-probs.
//                       Reverse and forward KL read each row once; JSD twice.
//  divergence_backward  dL/dz_student for L = sum_r grad[r] * value[r] into out (rows * vocab float32). The
//                       forward's value (uncapped below kl_cap) and both lse are reused when all three are
//                       given (JSD recomputes). Rows whose divergence reached kl_cap get zeros; an uncapped
//                       +Infinity divergence is ERR_NON_FINITE.
//  segment_reduce       out[r] = op over tokens [offsets[r], offsets[r+1]) with mask != 0 (mask may be null)
//                       of float32 or float64 values (exactly one of v32 / v64), accumulated in float64 in
//                       token order. Empty rows: sum 0, count 0, mean 0, max -inf, min +inf. Mask bytes
//                       other than 0/1 are ERR_OPTION with the first such index.
//  segment_broadcast    out[t] = row_values[row(t)], 0 where mask is 0; mask bytes as above. reused_out: out
//                       is the caller's array, so a large one is written with streaming stores.
#pragma once
#include <cstdint>

#include "gear/divergence.h"
#include "gear/segment.h"
#include "gear/types.h"

// X(name, (parameters)) for every op, in table order. A new op is one entry here (and in GEAR_DEVICE_OPS
// when it has a device kernel), its entry in native/src/core/backend.cc and its implementations.
#define GEAR_BACKEND_OPS(X)                                                                                         \
  X(token_stats, (const LogitsView& logits, const int32_t* targets, double temperature, float* logprob,             \
                  float* entropy, float* lse, const ExecContext& ctx))                                              \
  X(token_stats_backward, (const LogitsView& logits, const int32_t* targets, const float* grad_logprob,             \
                           const float* grad_entropy, double temperature, const float* lse, const float* entropy,   \
                           float* out, const ExecContext& ctx))                                                     \
  X(token_stats_partial, (const LogitsView& shard, const int32_t* targets, int64_t vocab_start, double temperature, \
                          double* max, double* sum_exp, double* sum_exp_x, double* target_logit,                    \
                          const ExecContext& ctx))                                                                  \
  X(merge_token_stats, (int64_t parts, const int64_t* vocab_start, const int64_t* vocab, const double* const* max,  \
                        const double* const* sum_exp, const double* const* sum_exp_x,                               \
                        const double* const* target_logit, int64_t rows, double temperature, float* logprob,        \
                        float* entropy, float* lse))                                                                \
  X(divergence, (const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,                   \
                 double temperature, double kl_cap, const int32_t* targets, const DivergenceOut& out,               \
                 const ExecContext& ctx))                                                                           \
  X(divergence_backward, (const LogitsView& student, const LogitsView& teacher, DivKind kind, double beta,          \
                          double temperature, double kl_cap, const float* grad, const float* value,                 \
                          const float* student_lse, const float* teacher_lse, float* out, const ExecContext& ctx))  \
  X(segment_reduce, (const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,          \
                     const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx))                           \
  X(segment_broadcast, (const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,                 \
                        const uint8_t* mask, float* out, const ExecContext& ctx, bool reused_out))

// The ops with a device kernel (`gear::cuda::name`, native/src/cuda/<family>.cu): the logits ops. The
// packed-row ops and the shard merge stay on the CPU: their inputs are host arrays, and host memory is
// faster to read than the bus to a GPU.
#define GEAR_DEVICE_OPS(X) \
  X(token_stats)           \
  X(token_stats_backward)  \
  X(token_stats_partial)   \
  X(divergence)            \
  X(divergence_backward)

namespace gear {

// The public functions (native/src/core/backend.cc).
#define GEAR_PUBLIC_DECLARE(op, params) Status op params;
GEAR_BACKEND_OPS(GEAR_PUBLIC_DECLARE)
#undef GEAR_PUBLIC_DECLARE

struct Backend {
  const char* name;  // "cpu" | "cuda" | "host-device"
#define GEAR_BACKEND_FIELD(op, params) decltype(&::gear::op) op;
  GEAR_BACKEND_OPS(GEAR_BACKEND_FIELD)
#undef GEAR_BACKEND_FIELD
};

// Device memory services of the device runtime, used by the tensor table (core/device_tensors.h), the
// bindings (a backward's device output) and the public entries (NaN-filling a device output).
struct DeviceApi {
  // Stream-ordered pool allocation on `device`; ERR_OUT_OF_MEMORY names the bytes asked and free.
  Status (*alloc)(int device, int64_t bytes, void** out);
  void (*free)(int device, void* p);
  // NaN-fills n float32 values of device memory (an output after an error).
  void (*fill_nan)(int device, float* p, int64_t n);
};

// The CPU kernels (native/src/cpu/cpu_backend.cc); the table in effect unless another is installed.
const Backend& cpu_backend();
// The table host calls dispatch through (the CPU's).
const Backend& active_backend();
void install_backend(const Backend& b);

// The device table and its memory services, installed with a device runtime (gear/device_runtime.h): by
// the CUDA module at initialisation, or in the CPU module by its host device (GEAR_RL_VARIANT=host-device);
// null otherwise, and a call with ExecContext::device >= 0 is then ERR_DEVICE.
const Backend* device_backend();
const DeviceApi* device_api();
void install_device_backend(const Backend& b, const DeviceApi& api);

}  // namespace gear
