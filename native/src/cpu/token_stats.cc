// tokenStats drivers (the CPU backend's entries, called with checked arguments): row-parallel scheduling over the
// active ISA's kernel table and per-row finalisation (row_math.h). Each row is computed by exactly one
// task in a fixed order, so results are bit-identical for every thread count and batch split.
#include "gear/backend.h"

#include <algorithm>
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

// ---- token statistics kernels (one row at a time) ----
// Streams one row of n logits; returns false when the row holds NaN or +Infinity.
using RowStatsFn = bool (*)(const void* row, int64_t n, double inv_t, rowmath::SoftmaxStats* out);
// Two rows' statistics, each exactly as RowStatsFn computes it; false when either row is bad.
using RowStats2Fn = bool (*)(const void* ra, const void* rb, int64_t n, double inv_t, rowmath::SoftmaxStats* oa,
                             rowmath::SoftmaxStats* ob);
// Writes dL/dz for one row: out[v] = p_v (alpha + beta ln p_v) + [v == y] target, ln p_v = z_v/T - lse.
// y < 0: no target term. nt: non-temporal stores (out must not alias the row). False on NaN/+Infinity.
using TokenGradFn = bool (*)(const void* row, float* out, int64_t n, double inv_t, double lse,
                             rowmath::GradCoef c, int64_t y, bool nt);
struct TokenStatsKernels {
  RowStatsFn stats[3];
  RowStats2Fn stats2[3];
  TokenGradFn grad[3];
};

}  // namespace kern
}  // namespace gear

// The kernel body, compiled for every instruction set of this architecture (isa_kernels.inc).
#define GEAR_KERNELS "token_stats_kernels.inc"
#define GEAR_KERNELS_PRELUDE "row_block_ops.inc"
#include "isa_kernels.inc"

namespace gear {
namespace kern {

int64_t rows_per_task(int64_t rows, int64_t vocab, const ExecContext& ctx) {
  const int64_t threads = ctx.pool ? ctx.pool->threads() : 1;
  // ~1 MiB of float32 per task, at least two rows (the forward kernels read rows in pairs)
  const int64_t by_size = std::max<int64_t>(2, (int64_t{1} << 18) / vocab);
  const int64_t by_balance = std::max<int64_t>(1, (rows + 4 * threads - 1) / (4 * threads));
  // but at least ~64 KiB per task: below that, handing a task to another thread costs more than it
  // computes (8 rows of 64 logits run as one task on the calling thread)
  const int64_t by_cost = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, vocab));
  return std::max(by_cost, std::min(by_size, by_balance));
}

}  // namespace kern

// The CPU backend's entries (cpu_backend.cc): the public functions dispatch to them through the active table.
namespace cpu {

Status token_stats(const LogitsView& l, const int32_t* targets, double temperature, float* logprob, float* entropy,
                   float* lse, const ExecContext& ctx) {
  const auto fn = active_kernels().stats[static_cast<int>(l.dtype)];
  const auto fn2 = active_kernels().stats2[static_cast<int>(l.dtype)];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = l.vocab * dtype_size(l.dtype);
  const char* base = static_cast<const char*>(l.data);
  std::atomic<int64_t> bad{kern::kNoRow};
  const bool done = parallel_blocks(ctx, l.rows, kern::rows_per_task(l.rows, l.vocab, ctx), [&](int64_t b, int64_t e, int) {
    auto finish = [&](int64_t r, const rowmath::SoftmaxStats& s) {
      if (lse) lse[r] = static_cast<float>(rowmath::stats_lse(s, inv_t));
      if (entropy) entropy[r] = static_cast<float>(rowmath::stats_entropy(s));
      if (logprob)
        logprob[r] = static_cast<float>(rowmath::stats_logprob(kern::to_f32(l.dtype, base + r * row_bytes, targets[r]), s, inv_t));
    };
    int64_t r = b;
    // Rows in pairs (two memory streams); a failed pair is redone row by row to find the bad row.
    for (; r + 2 <= e; r += 2) {
      rowmath::SoftmaxStats sa, sb;
      if (!fn2(base + r * row_bytes, base + (r + 1) * row_bytes, l.vocab, inv_t, &sa, &sb) || sa.s == 0.0 ||
          sb.s == 0.0)
        break;
      finish(r, sa);
      finish(r + 1, sb);
    }
    for (; r < e; ++r) {
      rowmath::SoftmaxStats s;
      if (!fn(base + r * row_bytes, l.vocab, inv_t, &s) || s.s == 0.0) {
        kern::atomic_min(bad, r);
        return;
      }
      finish(r, s);
    }
  });
  if (bad.load() != kern::kNoRow) return bad_row_status(l, "logits", bad.load());
  if (!done) return error(Code::Aborted, "tokenStats: aborted by the AbortSignal");
  return Status::ok();
}

Status token_stats_backward(const LogitsView& l, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx) {
  const bool in_place = static_cast<const void*>(out) == l.data;  // no streaming stores over the logits
  const auto& k = active_kernels();
  const auto stats_fn = k.stats[static_cast<int>(l.dtype)];
  const auto grad_fn = k.grad[static_cast<int>(l.dtype)];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = l.vocab * dtype_size(l.dtype);
  const char* base = static_cast<const char*>(l.data);
  std::atomic<int64_t> bad{kern::kNoRow};
  const bool done = parallel_blocks(ctx, l.rows, kern::rows_per_task(l.rows, l.vocab, ctx), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const char* row = base + r * row_bytes;
      double lse_r, h_r = 0.0;
      if (lse != nullptr) {
        lse_r = lse[r];
        if (entropy != nullptr) h_r = entropy[r];
      } else {
        rowmath::SoftmaxStats s;
        if (!stats_fn(row, l.vocab, inv_t, &s) || s.s == 0.0) {
          kern::atomic_min(bad, r);
          return;
        }
        lse_r = rowmath::stats_lse(s, inv_t);
        h_r = rowmath::stats_entropy(s);
      }
      const double gl = grad_logprob ? grad_logprob[r] : 0.0;
      const double ge = grad_entropy ? grad_entropy[r] : 0.0;
      const rowmath::GradCoef c = rowmath::token_grad_coef(gl, ge, h_r, inv_t);
      const int64_t y = grad_logprob ? targets[r] : -1;
      if (!grad_fn(row, out + r * l.vocab, l.vocab, inv_t, lse_r, c, y, !in_place)) {
        kern::atomic_min(bad, r);
        return;
      }
    }
  });
  if (bad.load() != kern::kNoRow) return bad_row_status(l, "logits", bad.load());
  if (!done) return error(Code::Aborted, "tokenStatsBackward: aborted by the AbortSignal");
  return Status::ok();
}

Status token_stats_partial(const LogitsView& l, const int32_t* targets, int64_t vocab_start, double temperature,
                           double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx) {
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  const auto fn = active_kernels().stats[static_cast<int>(l.dtype)];
  const double inv_t = 1.0 / temperature;
  const int64_t row_bytes = l.vocab * dtype_size(l.dtype);
  const char* base = static_cast<const char*>(l.data);
  std::atomic<int64_t> bad{kern::kNoRow};
  const bool done = parallel_blocks(ctx, l.rows, kern::rows_per_task(l.rows, l.vocab, ctx), [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) {
      const char* row = base + r * row_bytes;
      rowmath::SoftmaxStats s;
      if (!fn(row, l.vocab, inv_t, &s)) {
        kern::atomic_min(bad, r);
        return;
      }
      max[r] = s.m;
      sum_exp[r] = s.s;
      sum_exp_x[r] = s.a;
      const int64_t y = static_cast<int64_t>(targets[r]) - vocab_start;
      target_logit[r] = y >= 0 && y < l.vocab ? static_cast<double>(kern::to_f32(l.dtype, row, y)) : qnan;
    }
  });
  if (bad.load() != kern::kNoRow) return bad_row_status(l, "shard", bad.load());
  if (!done) return error(Code::Aborted, "tokenStatsPartial: aborted by the AbortSignal");
  return Status::ok();
}

Status merge_token_stats(int64_t parts, const int64_t* vocab_start, const int64_t* vocab, const double* const* max,
                         const double* const* sum_exp, const double* const* sum_exp_x,
                         const double* const* target_logit, int64_t rows, double temperature, float* logprob,
                         float* entropy, float* lse) {
  if (parts < 1) return error(Code::Shape, "parts.length: expected at least 1, got " + std::to_string(parts));
  const Status st = check_temperature(temperature);
  if (!st.is_ok()) return st;
  int64_t next = 0;
  for (int64_t p = 0; p < parts; ++p) {
    if (vocab_start[p] != next)
      return error(Code::Shape, "parts[" + std::to_string(p) + "].vocabStart: expected " + std::to_string(next) +
                                         " (shards must tile the vocabulary in order), got " + std::to_string(vocab_start[p]));
    if (vocab[p] < 1)
      return error(Code::Shape, "parts[" + std::to_string(p) + "].vocab: expected >= 1, got " + std::to_string(vocab[p]));
    next += vocab[p];
  }
  const double inv_t = 1.0 / temperature;
  for (int64_t r = 0; r < rows; ++r) {
    rowmath::SoftmaxStats acc = rowmath::stats_empty();
    double zy = 0.0;
    int hits = 0;
    for (int64_t p = 0; p < parts; ++p) {
      const rowmath::SoftmaxStats s{max[p][r], sum_exp[p][r], sum_exp_x[p][r]};
      const bool ok = !std::isnan(s.m) && s.m != INFINITY && std::isfinite(s.s) && s.s >= 0 && std::isfinite(s.a) &&
                      ((s.s == 0) == (s.m == -INFINITY));
      if (!ok)
        return error(Code::NonFinite, "parts[" + std::to_string(p) + "] row " + std::to_string(r) +
                                               ": expected statistics from tokenStatsPartial, got max " + number_text(s.m) +
                                               ", sumExp " + number_text(s.s) + ", sumExpX " + number_text(s.a));
      acc = rowmath::stats_merge(acc, s, inv_t);
      if (!std::isnan(target_logit[p][r])) {
        zy = target_logit[p][r];
        ++hits;
      }
    }
    if (hits != 1)
      return error(Code::TargetRange, "targets[" + std::to_string(r) + "]: expected an id inside exactly one shard of [0, " +
                                               std::to_string(next) + "), got " + std::to_string(hits) + " shards");
    if (acc.s == 0.0)
      return error(Code::NonFinite, "row " + std::to_string(r) + ": expected at least one finite logit, got all -Infinity");
    if (lse) lse[r] = static_cast<float>(rowmath::stats_lse(acc, inv_t));
    if (entropy) entropy[r] = static_cast<float>(rowmath::stats_entropy(acc));
    if (logprob) logprob[r] = static_cast<float>(rowmath::stats_logprob(zy, acc, inv_t));
  }
  return Status::ok();
}

}  // namespace cpu
}  // namespace gear
