// Fused PPO clipped-surrogate loss (verl compute_policy_loss_vanilla) over packed rows: a pass over the
// mask (per-row valid-token counts, which the aggregation weights need), then one fused pass over
// logprob / oldLogprob / advantages / mask producing d loss / d logprob (float32), the aggregated loss
// (float64 sums of w·L) and the metric counts. Deterministic: a fixed token-block partition and vector
// grid (independent of the thread count and of the arrays' addresses), partials summed in block order.
#pragma once
#include <cstdint>

#include "gear/types.h"

namespace gear {

// Aggregation modes and version semantics, numbered as the TS layer passes them.
enum class AggMode : int { TokenMean = 0, TokenSum = 1, SeqMeanTokenSum = 2, SeqMeanTokenMean = 3, SeqMeanTokenSumNorm = 4 };
enum class AggSemantics : int { Verl = 0, VerlLegacy = 1, VerlAgent = 2 };

struct PpoParams {
  double clip_low = 0.2;          // ε_low >= 0
  double clip_high = 0.2;         // ε_high >= 0
  double clip_c = 3.0;            // dual clip, > 1
  double log_ratio_clamp = 20.0;  // > 0; < 0 means no clamp (verl-agent)
  double global_tokens = -1;      // > 0 overrides the token-mean denominator; < 0 = this call's
  double global_rows = -1;        // > 0 overrides the seq-mean denominator; < 0 = this call's
  double loss_scale_factor = -1;  // > 0 overrides seq-mean-token-sum-norm's divisor; < 0 = longest row
  double dp_size = 1;             // integer >= 1
  AggMode agg = AggMode::TokenMean;
  AggSemantics semantics = AggSemantics::Verl;
};

struct PpoStats {
  double loss = 0;        // aggregated loss
  double tokens = 0;      // valid tokens
  double clipped = 0;     // valid tokens with L2 > L1 (pg_clipfrac numerator)
  double lower = 0;       // valid tokens with A < 0 and Lc > L3 (pg_clipfrac_lower numerator)
  double neg_kl = 0;      // Σ −clamp(δ) over valid tokens (ppo_kl numerator)
  double ratio_sum = 0;   // Σ ρ over valid tokens
  double ratio_min = 0;   // min ρ over valid tokens (+inf when none)
  double ratio_max = 0;   // max ρ over valid tokens (-inf when none)
  bool nan = false;       // the peer's value is NaN (verl-agent seq-mean-token-mean with an empty row)
};

// Validates everything (sizes, offsets, options, finiteness of valid tokens) before writing outputs.
// grad has n entries; masked tokens get 0. mask may be null (every token counts). reused_out: grad is
// the caller's array (not freshly allocated), so a large one is written with streaming stores.
Status policy_loss_ppo(const float* logprob, const float* old_logprob, const float* advantages,
                       const uint8_t* mask, int64_t n, const int32_t* offsets, int64_t rows,
                       const PpoParams& params, float* grad, PpoStats* stats, const ExecContext& ctx,
                       bool reused_out = false);

}  // namespace gear
