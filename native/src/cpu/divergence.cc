// divergence drivers: argument checks, ISA selection, row-parallel scheduling (each row by exactly one
// task, fixed order: bit-identical for every thread count) and per-row finalisation (row_math.h).
#include "gear/divergence.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "gear/dispatch.h"
#include "gear/row_math.h"
#include "gear/thread_pool.h"
#include "gear/isa_target.h"
#include "logits_common.h"

namespace gear {
namespace kern {

const DivergenceKernels& divergence_kernels() {
  switch (active_isa()) {
#if GEAR_X86
    case Isa::Avx512: return divergence_avx512;
    case Isa::Avx2: return divergence_avx2;
#elif GEAR_ARM64
    case Isa::Neon: return divergence_neon;
#endif
    default: return divergence_baseline;
  }
}

}  // namespace kern

namespace {

using kern::atomic_min;
using kern::kNoRow;

// Which cross term the pair pass accumulates besides both softmax statistics: the one the kind's value needs.
int pair_want(DivKind k) {
  return k == DivKind::ReverseKl ? kern::kWantCs : k == DivKind::ForwardKl ? kern::kWantCt : kern::kWantNone;
}

Status bad_status(const LogitsView& s, const LogitsView& t, int64_t code) {
  const int64_t r = code >> 1;
  return (code & 1) ? kern::bad_row_status(t, "teacher", r) : kern::bad_row_status(s, "student", r);
}

}  // namespace

namespace kern {

Status check_pair(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap) {
  Status st = check_logits(s, "student");
  if (!st.is_ok()) return st;
  if (!(st = check_logits(t, "teacher")).is_ok()) return st;
  if (s.rows != t.rows || s.vocab != t.vocab)
    return error(Code::Shape, "teacher: expected the student's shape " + std::to_string(s.rows) + " x " +
                                  std::to_string(s.vocab) + ", got " + std::to_string(t.rows) + " x " + std::to_string(t.vocab));
  if (s.dtype != t.dtype)
    return error(Code::DType, "teacher.dtype: expected the student's dtype " + std::string(dtype_name(s.dtype)) + ", got " +
                                  dtype_name(t.dtype));
  const int k = static_cast<int>(kind);
  if (k < 0 || k > 2) return error(Code::Option, "kind: expected reverse_kl, forward_kl or jsd, got " + std::to_string(k));
  if (!(beta >= 0.0 && beta <= 1.0)) return error(Code::Option, "beta: expected a number in [0, 1], got " + number_text(beta));
  if (!(st = check_temperature(temperature)).is_ok()) return st;
  if (!(kl_cap > 0)) return error(Code::Option, "klCap: expected a number > 0 (or Infinity), got " + number_text(kl_cap));
  return Status::ok();
}

// JSD with beta 1 / 0 is reverse / forward KL (TRL's special cases).
DivKind effective_kind(DivKind kind, double beta) {
  if (kind != DivKind::Jsd) return kind;
  if (beta == 1.0) return DivKind::ReverseKl;
  if (beta == 0.0) return DivKind::ForwardKl;
  return kind;
}

// Every check of divergence_backward's arguments (shared with the CUDA module).
Status check_backward_args(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse) {
  const int64_t rows = s.rows;
  Status st = check_pair(s, t, kind, beta, temperature, kl_cap);
  if (!st.is_ok()) return st;
  if (rows > 0 && grad == nullptr) return error(Code::Shape, "grad: expected a Float32Array of the row count, got none");
  for (int64_t r = 0; r < rows; ++r)
    if (!std::isfinite(grad[r]))
      return error(Code::NonFinite, "grad[" + std::to_string(r) + "]: expected a finite number, got " + number_text(grad[r]));
  const int given = (value != nullptr) + (student_lse != nullptr) + (teacher_lse != nullptr);
  if (given != 0 && given != 3)
    return error(Code::Shape, "stats: expected value, studentLogsumexp and teacherLogsumexp together, got " +
                                       std::to_string(given) + " of 3");
  for (int64_t r = 0; given == 3 && r < rows; ++r) {
    if (!std::isfinite(student_lse[r]) || !std::isfinite(teacher_lse[r]))
      return error(Code::NonFinite, "stats row " + std::to_string(r) + ": expected finite logsumexps, got " +
                                             number_text(student_lse[r]) + " and " + number_text(teacher_lse[r]));
    if (std::isnan(value[r]))
      return error(Code::NonFinite, "stats.value[" + std::to_string(r) + "]: expected a number, got NaN");
  }
  return Status::ok();
}

}  // namespace kern

Status divergence(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap, const int32_t* targets, const DivergenceOut& out, const ExecContext& ctx) {
  Status st = kern::check_logits(s, "student");
  if (!st.is_ok()) return st;
  const int64_t rows = s.rows;
  auto fail = [&](Status e) {
    for (float* p : {out.value, out.student_entropy, out.student_lse, out.teacher_lse, out.student_logprob, out.teacher_logprob})
      kern::fill_nan(p, rows);
    return e;
  };
  if (!(st = kern::check_pair(s, t, kind, beta, temperature, kl_cap)).is_ok()) return fail(st);
  if ((out.student_logprob || out.teacher_logprob) && targets == nullptr)
    return fail(error(Code::Shape, "targets: expected an Int32Array of the row count for the log-probs, got none"));
  if (targets && !(st = kern::check_targets(targets, rows, s.vocab, "targets")).is_ok()) return fail(st);

  const DivKind k = kern::effective_kind(kind, beta);
  const auto& kt = kern::divergence_kernels();
  const int dt = static_cast<int>(s.dtype);
  const auto pair_fn = kt.pair[dt][pair_want(k)];
  const auto jsd_fn = kt.jsd[dt];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = s.vocab * dtype_size(s.dtype);
  const char* sbase = static_cast<const char*>(s.data);
  const char* tbase = static_cast<const char*>(t.data);
  std::atomic<int64_t> bad{kNoRow};  // 2 * row + side
  const bool done = parallel_blocks(ctx, rows, kern::rows_per_task(rows, 2 * s.vocab, ctx), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const char* sr = sbase + r * row_bytes;
      const char* tr = tbase + r * row_bytes;
      rowmath::PairStats ps = rowmath::pair_empty();
      int side = 0;
      const bool ok = pair_fn(sr, tr, s.vocab, inv_t, &ps, &side);
      if (!ok || ps.s.s == 0.0 || ps.t.s == 0.0) {  // NaN / +Infinity, or a side with no finite logit
        if (ok) side = ps.s.s == 0.0 ? 0 : 1;
        atomic_min(bad, 2 * r + side);
        return;
      }
      double v;
      if (k == DivKind::ReverseKl) v = rowmath::pair_reverse_kl(ps);
      else if (k == DivKind::ForwardKl) v = rowmath::pair_forward_kl(ps);
      else {
        double k_sm;
        jsd_fn(sr, tr, s.vocab, inv_t, ps.s.m, std::log(ps.s.s), ps.t.m, std::log(ps.t.s), beta, &v, &k_sm);
        if (v < 0.0) v = 0.0;
      }
      if (out.value) out.value[r] = static_cast<float>(v < kl_cap ? v : kl_cap);
      if (out.student_entropy) out.student_entropy[r] = static_cast<float>(rowmath::stats_entropy(ps.s));
      if (out.student_lse) out.student_lse[r] = static_cast<float>(rowmath::stats_lse(ps.s, inv_t));
      if (out.teacher_lse) out.teacher_lse[r] = static_cast<float>(rowmath::stats_lse(ps.t, inv_t));
      if (out.student_logprob)
        out.student_logprob[r] = static_cast<float>(rowmath::stats_logprob(kern::to_f32(s.dtype, sr, targets[r]), ps.s, inv_t));
      if (out.teacher_logprob)
        out.teacher_logprob[r] = static_cast<float>(rowmath::stats_logprob(kern::to_f32(t.dtype, tr, targets[r]), ps.t, inv_t));
    }
  });
  if (bad.load() != kNoRow) return fail(bad_status(s, t, bad.load()));
  if (!done) return fail(error(Code::Aborted, "divergence: aborted by the AbortSignal"));
  return Status::ok();
}

Status divergence_backward(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse, float* out, const ExecContext& ctx) {
  Status st = kern::check_logits(s, "student");
  if (!st.is_ok()) return st;
  const int64_t rows = s.rows;
  const int64_t total = rows * s.vocab;
  auto fail = [&](Status e) {
    kern::fill_nan(out, total);
    return e;
  };
  if (out == nullptr && total > 0) return error(Code::Shape, "out: expected a Float32Array of rows * vocab, got none");
  if (!(st = kern::check_backward_args(s, t, kind, beta, temperature, kl_cap, grad, value, student_lse, teacher_lse))
           .is_ok())
    return fail(st);
  const int given = (value != nullptr) + (student_lse != nullptr) + (teacher_lse != nullptr);

  const DivKind k = kern::effective_kind(kind, beta);
  const auto& kt = kern::divergence_kernels();
  const int dt = static_cast<int>(s.dtype);
  const auto pair_fn = kt.pair[dt][pair_want(k)];
  const auto jsd_fn = kt.jsd[dt];
  const auto grad_fn = kt.grad[dt][static_cast<int>(k)];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = s.vocab * dtype_size(s.dtype);
  const char* sbase = static_cast<const char*>(s.data);
  const char* tbase = static_cast<const char*>(t.data);
  std::atomic<int64_t> bad{kNoRow};       // 2 * row + side
  std::atomic<int64_t> infinite{kNoRow};  // first row with an uncapped +Infinity divergence
  const bool done = parallel_blocks(ctx, rows, kern::rows_per_task(rows, 2 * s.vocab, ctx), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const char* sr = sbase + r * row_bytes;
      const char* tr = tbase + r * row_bytes;
      kern::DivGradParams p{static_cast<int>(k), inv_t, 0.0, 0.0, grad[r], 0.0, beta};
      double v;
      if (given == 3 && k != DivKind::Jsd) {
        p.lse_s = student_lse[r];
        p.lse_t = teacher_lse[r];
        v = value[r];
      } else {
        rowmath::PairStats ps = rowmath::pair_empty();
        int side = 0;
        const bool ok = pair_fn(sr, tr, s.vocab, inv_t, &ps, &side);
        if (!ok || ps.s.s == 0.0 || ps.t.s == 0.0) {
          if (ok) side = ps.s.s == 0.0 ? 0 : 1;
          atomic_min(bad, 2 * r + side);
          return;
        }
        p.lse_s = rowmath::stats_lse(ps.s, inv_t);
        p.lse_t = rowmath::stats_lse(ps.t, inv_t);
        if (k == DivKind::ReverseKl) v = rowmath::pair_reverse_kl(ps);
        else if (k == DivKind::ForwardKl) v = rowmath::pair_forward_kl(ps);
        else {
          double k_sm;
          jsd_fn(sr, tr, s.vocab, inv_t, ps.s.m, std::log(ps.s.s), ps.t.m, std::log(ps.t.s), beta, &v, &k_sm);
          p.value = k_sm;
        }
      }
      if (k == DivKind::ReverseKl) p.value = v;
      float* o = out + r * s.vocab;
      if (v == INFINITY && kl_cap == INFINITY) {  // support mismatch, no cap: undefined gradient
        atomic_min(infinite, r);
        return;
      }
      if (v >= kl_cap) {  // capped (or +Infinity under a finite cap): the clamp is flat, gradient 0
        for (int64_t i = 0; i < s.vocab; ++i) o[i] = 0.0f;
        continue;
      }
      int side = 0;
      if (!grad_fn(sr, tr, o, s.vocab, p, true, &side)) {
        atomic_min(bad, 2 * r + side);
        return;
      }
    }
  });
  const int64_t br = bad.load(), ir = infinite.load();
  if (br != kNoRow && (ir == kNoRow || (br >> 1) <= ir)) return fail(bad_status(s, t, br));
  if (ir != kNoRow)
    return fail(error(Code::NonFinite, "divergence[row " + std::to_string(ir) +
                                           "]: expected a finite divergence (its gradient is undefined at +Infinity; "
                                           "use a finite klCap), got Infinity"));
  if (!done) return fail(error(Code::Aborted, "divergenceBackward: aborted by the AbortSignal"));
  return Status::ok();
}

}  // namespace gear
