#include "gear/policy_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gear/segment.h"
#include "gear/thread_pool.h"
#include "policy_loss_kernels.h"
#include "../core/checks.h"

// The kernel body, compiled for every instruction set of this architecture (isa_kernels.inc).
#define GEAR_KERNELS "policy_loss_kernels.inc"
#include "isa_kernels.inc"

namespace gear {

namespace {

Status bad_option(const std::string& what, const std::string& expected, double got) {
  return error(Code::Option, what + ": expected " + expected + ", got " + std::to_string(got));
}

// The arguments: shapes, offsets, and each option's range.
Status check_args(const float* logprob, const float* old_logprob, const float* advantages, int64_t n,
                  const int32_t* offsets, int64_t rows, const PpoParams& pr, const float* grad, const PpoStats* stats) {
  if (n < 0) return error(Code::Shape, "n: expected >= 0, got " + std::to_string(n));
  if (n > 0 && (!logprob || !old_logprob || !advantages || !grad))
    return error(Code::Shape, "policyLossPpo: expected input and output arrays, got null");
  if (!stats) return error(Code::Shape, "stats: expected an output, got null");
  Status st = check_offsets(offsets, rows, n);
  if (!st.is_ok()) return st;
  if (!(pr.clip_low >= 0) || !std::isfinite(pr.clip_low)) return bad_option("clipLow", "a finite number >= 0", pr.clip_low);
  if (!(pr.clip_high >= 0) || !std::isfinite(pr.clip_high)) return bad_option("clipHigh", "a finite number >= 0", pr.clip_high);
  if (!(pr.clip_c > 1.0) || !std::isfinite(pr.clip_c)) return bad_option("clipC", "a finite number > 1 (dual clip)", pr.clip_c);
  if (!(pr.log_ratio_clamp > 0 || pr.log_ratio_clamp < 0) || std::isnan(pr.log_ratio_clamp))
    return bad_option("logRatioClamp", "> 0 (or < 0 for none)", pr.log_ratio_clamp);
  if (!(pr.dp_size >= 1) || std::floor(pr.dp_size) != pr.dp_size) return bad_option("dpSize", "an integer >= 1", pr.dp_size);
  const int agg = static_cast<int>(pr.agg), sem = static_cast<int>(pr.semantics);
  if (agg < 0 || agg > 4) return bad_option("agg", "a mode index in [0, 4]", agg);
  if (sem < 0 || sem > 2) return bad_option("semantics", "an index in [0, 2]", sem);
  if (pr.semantics != AggSemantics::Verl && pr.agg == AggMode::TokenSum)
    return error(Code::Option, "mode: expected a mode of the chosen semantics (token-sum exists in current verl only), got token-sum");
  for (double g : {pr.global_tokens, pr.global_rows, pr.loss_scale_factor})
    if (std::isnan(g) || g == 0 || std::isinf(g)) return bad_option("global normaliser", "> 0 and finite (or < 0 for the default)", g);
  return Status::ok();
}

// What pass 1 finds: each row's valid tokens, their total, the non-empty rows and the longest row.
struct RowCounts {
  std::vector<double> cnt;
  double n_tok = 0, n_seq = 0;
  int64_t max_len = 0;
};

// Pass 1: per-row valid-token counts and the 0/1 check of the mask (1 byte per token), over row-aligned
// chunks of about equal work; then the global normalisers against them.
Status count_rows(const uint8_t* mask, int64_t n, const int32_t* offsets, int64_t rows, const PpoParams& pr,
                  const ppo::PolicyLossKernels& kern, const ExecContext& ctx, RowCounts* rc) {
  std::vector<double>& cnt = rc->cnt;
  cnt.assign(static_cast<size_t>(rows), 0.0);
  std::vector<int64_t> bad_mask(static_cast<size_t>(row_chunk_count(n, rows)), -1);
  const bool done = parallel_blocks(ctx, static_cast<int64_t>(bad_mask.size()), 1, [&](int64_t k, int64_t, int) {
    const int64_t r0 = row_chunk_begin(offsets, rows, k), r1 = row_chunk_begin(offsets, rows, k + 1);
    if (!mask) {
      for (int64_t r = r0; r < r1; ++r) cnt[r] = static_cast<double>(offsets[r + 1] - offsets[r]);
      return;
    }
    const bool binary = kern.count_rows(mask, offsets, r0, r1, cnt.data());
    if (!binary) bad_mask[static_cast<size_t>(k)] = first_non_binary(mask, offsets[r0], offsets[r1]);
  });
  if (!done) return error(Code::Aborted, "policyLossPpo: aborted");
  for (int64_t bm : bad_mask)
    if (bm >= 0) return mask_error(mask, bm);
  for (int64_t r = 0; r < rows; ++r) {
    rc->n_tok += cnt[r];
    rc->n_seq += cnt[r] > 0 ? 1 : 0;
    rc->max_len = std::max<int64_t>(rc->max_len, offsets[r + 1] - offsets[r]);
  }
  if (pr.global_tokens > 0 && pr.global_tokens < rc->n_tok)
    return bad_option("globalTokens", ">= the " + std::to_string(static_cast<int64_t>(rc->n_tok)) + " valid tokens of this call", pr.global_tokens);
  if (pr.global_rows > 0 && pr.global_rows < rc->n_seq)
    return bad_option("globalRows", ">= the " + std::to_string(static_cast<int64_t>(rc->n_seq)) + " non-empty rows of this call", pr.global_rows);
  return Status::ok();
}

// Row weights: the same float64 expressions as ts/losses/aggregate.ts (aggWeights). *nan: verl-agent's
// seq-mean-token-mean over an empty row (the loss is NaN).
std::vector<double> row_weights(const PpoParams& pr, const RowCounts& rc, int64_t rows, bool* nan) {
  const std::vector<double>& cnt = rc.cnt;
  const double dp = pr.dp_size;
  const double lsf = pr.loss_scale_factor > 0 ? pr.loss_scale_factor : static_cast<double>(rc.max_len);
  std::vector<double> wrow(static_cast<size_t>(rows), 0.0);
  *nan = false;
  if (pr.semantics == AggSemantics::VerlAgent) {
    const double g_rows = pr.global_rows > 0 ? pr.global_rows : static_cast<double>(rows);
    for (int64_t r = 0; r < rows; ++r) {
      switch (pr.agg) {
        case AggMode::TokenMean: wrow[r] = dp / (pr.global_tokens > 0 ? pr.global_tokens : rc.n_tok + 1e-8); break;
        case AggMode::SeqMeanTokenSum: wrow[r] = dp / g_rows; break;
        case AggMode::SeqMeanTokenMean:
          if (cnt[r] == 0) *nan = true; else wrow[r] = dp / cnt[r] / g_rows;
          break;
        case AggMode::SeqMeanTokenSumNorm: wrow[r] = dp / lsf; break;
        default: break;
      }
    }
    return wrow;
  }
  const double g_rows = pr.global_rows > 0 ? pr.global_rows : rc.n_seq;
  for (int64_t r = 0; r < rows; ++r) {
    if (cnt[r] == 0) continue;
    switch (pr.agg) {
      case AggMode::TokenMean: wrow[r] = dp / (pr.global_tokens > 0 ? pr.global_tokens : rc.n_tok); break;
      case AggMode::TokenSum: wrow[r] = dp; break;
      case AggMode::SeqMeanTokenSum: wrow[r] = dp / g_rows; break;
      case AggMode::SeqMeanTokenMean: wrow[r] = dp / (cnt[r] + 1e-8) / g_rows; break;
      case AggMode::SeqMeanTokenSumNorm:
        wrow[r] = pr.semantics == AggSemantics::VerlLegacy ? dp / lsf : dp / g_rows / lsf;
        break;
    }
  }
  return wrow;
}

// The blocks' sums in block order; the first non-finite input on a valid token is an error (the
// gradient then all NaN: what was written must not look valid).
Status merge_blocks(const std::vector<ppo::Partial>& parts, const float* logprob, const float* old_logprob,
                    const float* advantages, int64_t n, float* grad, PpoStats* out) {
  out->ratio_min = std::numeric_limits<double>::infinity();
  out->ratio_max = -std::numeric_limits<double>::infinity();
  for (const ppo::Partial& p : parts) {
    if (p.bad >= 0) {
      const int64_t i = p.bad;
      const char* what = !std::isfinite(logprob[i]) ? "logprob" : !std::isfinite(old_logprob[i]) ? "oldLogprob" : "advantages";
      const float v = !std::isfinite(logprob[i]) ? logprob[i] : !std::isfinite(old_logprob[i]) ? old_logprob[i] : advantages[i];
      std::fill(grad, grad + n, std::numeric_limits<float>::quiet_NaN());
      return error(Code::NonFinite, std::string(what) + "[" + std::to_string(i) + "]: expected a finite number, got " + number_text(v));
    }
    out->loss += p.loss; out->clipped += p.clipped; out->lower += p.lower; out->neg_kl += p.neg_kl; out->ratio_sum += p.ratio_sum;
    out->ratio_min = std::min(out->ratio_min, p.ratio_min);
    out->ratio_max = std::max(out->ratio_max, p.ratio_max);
  }
  return Status::ok();
}

}  // namespace

Status policy_loss_ppo(const float* logprob, const float* old_logprob, const float* advantages,
                       const uint8_t* mask, int64_t n, const int32_t* offsets, int64_t rows,
                       const PpoParams& pr, float* grad, PpoStats* stats, const ExecContext& ctx,
                       bool reused_out) {
  Status st = check_args(logprob, old_logprob, advantages, n, offsets, rows, pr, grad, stats);
  if (!st.is_ok()) return st;
  const ppo::PolicyLossKernels& kern = active_kernels();
  RowCounts rc;
  if (!(st = count_rows(mask, n, offsets, rows, pr, kern, ctx, &rc)).is_ok()) return st;
  bool nan = false;
  const std::vector<double> wrow = row_weights(pr, rc, rows, &nan);

  // Pass 2: the fused loss/gradient pass over fixed token blocks.
  std::vector<float> wrowf(wrow.begin(), wrow.end());
  // Per-token math is float32 (as verl's torch loss): the bounds are rounded to float32 once here.
  const float clampf = pr.log_ratio_clamp > 0 ? static_cast<float>(pr.log_ratio_clamp) : std::numeric_limits<float>::infinity();
  const ppo::Kern s{logprob, old_logprob, advantages, mask, offsets, wrowf.data(), wrow.data(), grad,
               static_cast<float>(1 - pr.clip_low), static_cast<float>(1 + pr.clip_high), static_cast<float>(pr.clip_c), clampf};
  const bool stream = kern.streams && reused_out && n * 4 >= kStreamOutputBytes && reinterpret_cast<uintptr_t>(grad) % 4 == 0;
  const int64_t nblocks = (n + ppo::kBlock - 1) / ppo::kBlock;
  std::vector<ppo::Partial> parts(static_cast<size_t>(nblocks));
  const ppo::BlockFn block = std::isinf(clampf) ? kern.block : kern.block_clamped;
  const bool done = parallel_blocks(ctx, n, ppo::kBlock, [&](int64_t b, int64_t e, int) {
    block(s, rows, b, e, stream, parts[static_cast<size_t>(b / ppo::kBlock)]);
  });
  if (!done) {
    std::fill(grad, grad + n, std::numeric_limits<float>::quiet_NaN());  // a partial gradient must not look valid
    return error(Code::Aborted, "policyLossPpo: aborted");
  }
  PpoStats out;
  out.tokens = rc.n_tok;
  if (!(st = merge_blocks(parts, logprob, old_logprob, advantages, n, grad, &out)).is_ok()) return st;
  out.nan = nan;
  *stats = out;
  return Status::ok();
}

}  // namespace gear
