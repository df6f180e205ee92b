// divergence drivers (the CPU backend's entries, called with checked arguments): row-parallel scheduling over the
// active ISA's kernel table (each row by exactly one task, fixed order: bit-identical for every thread
// count) and per-row finalisation (row_math.h).
#include "gear/divergence.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "gear/row_math.h"
#include "gear/thread_pool.h"
#include "logits_kernels.h"
#include "../core/checks.h"
#include "cpu_backend.h"

namespace gear {
namespace kern {

// ---- divergence kernels ----
enum : int { kWantNone = 0, kWantCs = 1, kWantCt = 2 };
// Joint statistics of a student and a teacher row; false on a NaN / +Infinity of either side (which side
// the error names is bad_pair_status's rule, not the order the kernel met them in).
using PairStatsFn = bool (*)(const void* s, const void* t, int64_t n, double inv_t, rowmath::PairStats* out);
// Second pass of the JSD: given both rows' max and ln(sum exp), returns sum of the JSD terms and
// k_sm = KL(p_s || M).
using JsdFn = void (*)(const void* s, const void* t, int64_t n, double inv_t, double ms, double lns, double mt,
                       double lnt, double beta, double* jsd, double* k_sm);
struct DivGradParams {
  int kind;      // 0 reverse KL, 1 forward KL, 2 JSD
  double inv_t;
  double lse_s;  // student and teacher logsumexp of z/T
  double lse_t;
  double g;      // dL/dvalue of the row
  double value;  // reverse KL: the row's KL; JSD: KL(p_s || M)
  double beta;   // JSD mixture weight
};
using DivGradFn = bool (*)(const void* s, const void* t, float* out, int64_t n, const DivGradParams& p, bool nt);
struct DivergenceKernels {
  PairStatsFn pair[3][3];  // [dtype][want]
  JsdFn jsd[3];
  DivGradFn grad[3][3];  // [dtype][kind]
};

}  // namespace kern
}  // namespace gear

// The kernel body, compiled for every instruction set of this architecture (isa_kernels.inc).
#define GEAR_KERNELS "divergence_kernels.inc"
#define GEAR_KERNELS_PRELUDE "row_block_ops.inc"
#include "isa_kernels.inc"

namespace gear {
namespace {

using kern::atomic_min;
using kern::kNoRow;

// Which cross term the pair pass accumulates besides both softmax statistics: the one the kind's value needs.
int pair_want(DivKind k) {
  return k == DivKind::ReverseKl ? kern::kWantCs : k == DivKind::ForwardKl ? kern::kWantCt : kern::kWantNone;
}

}  // namespace

// The CPU backend's entries (cpu_backend.cc): the public functions dispatch to them through the active table.
namespace cpu {

Status divergence(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap, const int32_t* targets, const DivergenceOut& out, const ExecContext& ctx) {
  const int64_t rows = s.rows;
  const DivKind k = kind;  // effective kind (core/backend.cc)
  const auto& kt = active_kernels();
  const int dt = static_cast<int>(s.dtype);
  const auto pair_fn = kt.pair[dt][pair_want(k)];
  const auto jsd_fn = kt.jsd[dt];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = s.vocab * dtype_size(s.dtype);
  const char* sbase = static_cast<const char*>(s.data);
  const char* tbase = static_cast<const char*>(t.data);
  std::atomic<int64_t> bad{kNoRow};  // first row with a bad or empty side
  const bool done = parallel_blocks(ctx, rows, kern::rows_per_task(rows, 2 * s.vocab, ctx), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const char* sr = sbase + r * row_bytes;
      const char* tr = tbase + r * row_bytes;
      rowmath::PairStats ps = rowmath::pair_empty();
      if (!pair_fn(sr, tr, s.vocab, inv_t, &ps) || ps.s.s == 0.0 || ps.t.s == 0.0) {  // NaN / +Infinity, or a side with no finite logit
        atomic_min(bad, r);
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
        out.student_logprob[r] = static_cast<float>(rowmath::pair_logprob(kern::to_f32(s.dtype, sr, targets[r]), ps.s, inv_t));
      if (out.teacher_logprob)
        out.teacher_logprob[r] = static_cast<float>(rowmath::pair_logprob(kern::to_f32(t.dtype, tr, targets[r]), ps.t, inv_t));
    }
  });
  if (bad.load() != kNoRow) return bad_pair_status(s, t, bad.load());
  if (!done) return error(Code::Aborted, "divergence: aborted by the AbortSignal");
  return Status::ok();
}

Status divergence_backward(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse, float* out, const ExecContext& ctx) {
  const int64_t rows = s.rows;
  const int given = (value != nullptr) + (student_lse != nullptr) + (teacher_lse != nullptr);
  const DivKind k = kind;  // effective kind (core/backend.cc)
  const auto& kt = active_kernels();
  const int dt = static_cast<int>(s.dtype);
  const auto pair_fn = kt.pair[dt][pair_want(k)];
  const auto jsd_fn = kt.jsd[dt];
  const auto grad_fn = kt.grad[dt][static_cast<int>(k)];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = s.vocab * dtype_size(s.dtype);
  const char* sbase = static_cast<const char*>(s.data);
  const char* tbase = static_cast<const char*>(t.data);
  std::atomic<int64_t> bad{kNoRow};       // first row with a bad or empty side
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
        if (!pair_fn(sr, tr, s.vocab, inv_t, &ps) || ps.s.s == 0.0 || ps.t.s == 0.0) {
          atomic_min(bad, r);
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
      if (!grad_fn(sr, tr, o, s.vocab, p, true)) {
        atomic_min(bad, r);
        return;
      }
    }
  });
  const int64_t br = bad.load(), ir = infinite.load();
  if (br != kNoRow && (ir == kNoRow || br <= ir)) return bad_pair_status(s, t, br);
  if (ir != kNoRow) return infinite_divergence_status(ir);
  if (!done) return error(Code::Aborted, "divergenceBackward: aborted by the AbortSignal");
  return Status::ok();
}

}  // namespace cpu
}  // namespace gear
