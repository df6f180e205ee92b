// The public logits and segment functions, one place for every backend: each checks what memory safety
// and the values need, once (core/checks.h), picks the backend table (the CPU's, or the CUDA module's
// device table when ExecContext::device >= 0), calls it, and NaN-fills its outputs after any error, so
// nothing is left looking valid. Backends trust their arguments and leave the outputs to this layer.
#include "gear/backend.h"

#include <atomic>
#include <string>

#include "checks.h"
#include "gear/device_runtime.h"

namespace gear {

namespace {
// Written at module initialisation, before any op runs; atomic because every JS environment that loads
// the module (worker threads too) initialises it again, storing the same table while others may read it.
std::atomic<const Backend*> g_active{nullptr};
std::atomic<const Backend*> g_device{nullptr};
std::atomic<const DeviceApi*> g_device_api{nullptr};
std::atomic<const DeviceRuntime*> g_runtime{nullptr};

// The table a call runs on: the device table for ExecContext::device >= 0, else the host one. Logits on a
// device never reach the CPU kernels (the bindings set `device` from the tensors they read).
Status table_for(const ExecContext& ctx, const Backend** out) {
  if (ctx.device < 0) {
    *out = &active_backend();
    return Status::ok();
  }
  *out = device_backend();
  if (*out == nullptr)
    return error(Code::Device, "device: expected the CUDA module (GEAR_RL_VARIANT=cuda or auto with a GPU), got the CPU module");
  return Status::ok();
}

Status on_device_matches(const LogitsView& l, const ExecContext& ctx, const char* what) {
  if (l.on_device && ctx.device < 0)
    return error(Code::Internal, std::string(what) + ": device memory passed to a host call");
  return Status::ok();
}

// NaN-fills a rows x vocab float32 output wherever it lives.
void fill_nan_out(float* out, int64_t n, const ExecContext& ctx) {
  if (out == nullptr || n <= 0) return;
  if (ctx.out_on_device) {
    if (const DeviceApi* api = device_api()) api->fill_nan(ctx.device, out, n);
  } else {
    fill_nan(out, n);
  }
}
}  // namespace

const Backend& active_backend() {
  const Backend* b = g_active.load(std::memory_order_relaxed);
  return b != nullptr ? *b : cpu_backend();
}
void install_backend(const Backend& b) { g_active.store(&b, std::memory_order_relaxed); }

const Backend* device_backend() { return g_device.load(std::memory_order_acquire); }
const DeviceApi* device_api() { return g_device_api.load(std::memory_order_acquire); }
void install_device_backend(const Backend& b, const DeviceApi& api) {
  g_device_api.store(&api, std::memory_order_release);
  g_device.store(&b, std::memory_order_release);
}

const DeviceRuntime* device_runtime() { return g_runtime.load(std::memory_order_acquire); }
void install_device_runtime(const DeviceRuntime& rt) {
  install_device_backend(*rt.backend, *rt.api);
  g_runtime.store(&rt, std::memory_order_release);
}

Status token_stats(const LogitsView& l, const int32_t* targets, double temperature, float* logprob,
                   float* entropy, float* lse, const ExecContext& ctx) {
  GEAR_TRY(check_logits(l, "logits"));
  auto fail = [&](Status s) {
    fill_nan(logprob, l.rows);
    fill_nan(entropy, l.rows);
    fill_nan(lse, l.rows);
    return s;
  };
  Status st = check_temperature(temperature);
  if (st.is_ok() && logprob != nullptr && targets == nullptr)
    st = error(Code::Shape, "targets: expected an Int32Array of the row count for logprob, got none");
  if (st.is_ok() && targets != nullptr) st = check_targets(targets, l.rows, l.vocab, "targets");
  if (st.is_ok()) st = on_device_matches(l, ctx, "logits");
  const Backend* b = nullptr;
  if (st.is_ok()) st = table_for(ctx, &b);
  if (!st.is_ok()) return fail(st);
  if (l.rows == 0) return Status::ok();
  st = b->token_stats(l, targets, temperature, logprob, entropy, lse, ctx);
  return st.is_ok() ? st : fail(st);
}

Status token_stats_backward(const LogitsView& l, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx) {
  GEAR_TRY(check_logits(l, "logits"));
  const bool in_place = out != nullptr && static_cast<const void*>(out) == l.data;
  const int64_t total = l.rows * l.vocab;
  if (out == nullptr && total > 0) return error(Code::Shape, "out: expected a Float32Array of rows * vocab, got none");
  if (in_place && l.dtype != DType::F32)
    return error(Code::DType, "inPlace: expected float32 logits, got " + std::string(dtype_name(l.dtype)));
  // A failed check leaves in-place logits untouched and a separate out NaN-filled; once the backend ran,
  // any error NaN-fills out (in place: the logits are gone too).
  Status st = check_temperature(temperature);
  if (st.is_ok() && (grad_logprob != nullptr || targets != nullptr))
    st = check_targets(targets, l.rows, l.vocab, "targets");
  if (st.is_ok()) st = check_finite(grad_logprob, l.rows, "grad.logprob");
  if (st.is_ok()) st = check_finite(grad_entropy, l.rows, "grad.entropy");
  if (st.is_ok() && lse == nullptr && entropy != nullptr)
    st = error(Code::Shape, "stats.logsumexp: expected a Float32Array with stats.entropy, got none");
  if (st.is_ok() && lse != nullptr && grad_entropy != nullptr && entropy == nullptr)
    st = error(Code::Shape, "stats.entropy: expected a Float32Array when grad.entropy is given, got none");
  if (st.is_ok()) st = check_finite(lse, l.rows, "stats.logsumexp");
  if (st.is_ok()) st = check_finite(entropy, l.rows, "stats.entropy");
  if (st.is_ok()) st = on_device_matches(l, ctx, "logits");
  const Backend* b = nullptr;
  if (st.is_ok()) st = table_for(ctx, &b);
  if (!st.is_ok()) {
    if (!in_place) fill_nan_out(out, total, ctx);
    return st;
  }
  if (l.rows == 0) return Status::ok();
  st = b->token_stats_backward(l, targets, grad_logprob, grad_entropy, temperature, lse, entropy, out, ctx);
  if (!st.is_ok()) fill_nan_out(out, total, ctx);
  return st;
}

Status token_stats_partial(const LogitsView& l, const int32_t* targets, int64_t vocab_start, double temperature,
                           double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx) {
  GEAR_TRY(check_logits(l, "shard"));
  auto fail = [&](Status s) {
    for (double* p : {max, sum_exp, sum_exp_x, target_logit}) fill_nan(p, l.rows);
    return s;
  };
  Status st = check_temperature(temperature);
  if (st.is_ok()) st = check_partial_args(targets, l.rows, vocab_start);
  if (st.is_ok()) st = on_device_matches(l, ctx, "shard");
  const Backend* b = nullptr;
  if (st.is_ok()) st = table_for(ctx, &b);
  if (!st.is_ok()) return fail(st);
  if (l.rows == 0) return Status::ok();
  st = b->token_stats_partial(l, targets, vocab_start, temperature, max, sum_exp, sum_exp_x, target_logit, ctx);
  return st.is_ok() ? st : fail(st);
}

Status merge_token_stats(int64_t parts, const int64_t* vocab_start, const int64_t* vocab, const double* const* max,
                         const double* const* sum_exp, const double* const* sum_exp_x,
                         const double* const* target_logit, int64_t rows, double temperature, float* logprob,
                         float* entropy, float* lse) {
  // Host math over small per-row arrays: always the host table. Its checks run inside, row by row.
  const Status st = active_backend().merge_token_stats(parts, vocab_start, vocab, max, sum_exp, sum_exp_x,
                                                       target_logit, rows, temperature, logprob, entropy, lse);
  if (!st.is_ok()) {
    fill_nan(logprob, rows);
    fill_nan(entropy, rows);
    fill_nan(lse, rows);
  }
  return st;
}

Status divergence(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap, const int32_t* targets, const DivergenceOut& out, const ExecContext& ctx) {
  GEAR_TRY(check_logits(s, "student"));
  const int64_t rows = s.rows;
  auto fail = [&](Status e) {
    for (float* p : {out.value, out.student_entropy, out.student_lse, out.teacher_lse, out.student_logprob,
                     out.teacher_logprob})
      fill_nan(p, rows);
    return e;
  };
  Status st = check_pair(s, t, kind, beta, temperature, kl_cap);
  if (st.is_ok() && (out.student_logprob || out.teacher_logprob) && targets == nullptr)
    st = error(Code::Shape, "targets: expected an Int32Array of the row count for the log-probs, got none");
  if (st.is_ok() && targets != nullptr) st = check_targets(targets, rows, s.vocab, "targets");
  if (st.is_ok()) st = on_device_matches(s, ctx, "student");
  if (st.is_ok()) st = on_device_matches(t, ctx, "teacher");
  const Backend* b = nullptr;
  if (st.is_ok()) st = table_for(ctx, &b);
  if (!st.is_ok()) return fail(st);
  if (rows == 0) return Status::ok();
  st = b->divergence(s, t, effective_kind(kind, beta), beta, temperature, kl_cap, targets, out, ctx);
  return st.is_ok() ? st : fail(st);
}

Status divergence_backward(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse, float* out, const ExecContext& ctx) {
  GEAR_TRY(check_logits(s, "student"));
  const int64_t total = s.rows * s.vocab;
  if (out == nullptr && total > 0) return error(Code::Shape, "out: expected a Float32Array of rows * vocab, got none");
  Status st = check_backward_args(s, t, kind, beta, temperature, kl_cap, grad, value, student_lse, teacher_lse);
  if (st.is_ok()) st = on_device_matches(s, ctx, "student");
  if (st.is_ok()) st = on_device_matches(t, ctx, "teacher");
  const Backend* b = nullptr;
  if (st.is_ok()) st = table_for(ctx, &b);
  if (st.is_ok() && s.rows > 0)
    st = b->divergence_backward(s, t, effective_kind(kind, beta), beta, temperature, kl_cap, grad, value, student_lse,
                                teacher_lse, out, ctx);
  if (!st.is_ok()) fill_nan_out(out, total, ctx);
  return st;
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
