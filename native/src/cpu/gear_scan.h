// GEAR-proposed advantage reweighting (algorithms.md section 10.3): per-row spike detection, the
// entropy-bounded segment scan, unit weights from the anchor divergence, and the weighted scatter with a
// per-row normaliser. The paper's exact rules are not public; every rule here is the proposed design and
// each is a switch in GearParams.
//
// Everything runs over packed rows (offsets of length rows + 1). Rows are independent and each row is
// processed sequentially in float64, so results do not depend on the thread count. Batch quantiles are
// exact (radix selection over the float32 bit patterns, linear interpolation between order statistics as
// torch.quantile does).
#pragma once
#include <cstdint>
#include <vector>

#include "gear/types.h"

namespace gear {

enum class PeakRule : int { ZScore = 0, Quantile = 1 };
enum class SegmentEnd : int { NextFork = 0, EntropySettles = 1 };
enum class SignMode : int { Symmetric = 0, NegativeOnly = 1, Rlsd = 2 };
enum class Normalize : int { MeanOne = 0, None = 1 };
enum class Ablation : int { None = 0, RandomAnchors = 1, FixedLength = 2, TokenOnly = 3 };
// What the spike rule, peak_min_kl, d_ref and the unit weights read: the divergence D, or the sampled
// token's log-ratio signal s_t = max(0, -logratio_t) = max(0, l_student(y_t) - l_teacher(y_t)) (the
// teacher disbelieves what was sampled), capped at kl_cap as D is. Segments and entropy rules are the same.
enum class AnchorSignal : int { Divergence = 0, LogRatio = 1 };

// Layout of the Float64Array the binding receives (index -> field). NaN in an "absolute threshold" slot
// means "use the batch quantile instead"; 0 in kFixedSegmentLength means "match the adaptive rule's batch
// mean segment length".
enum GearParamIndex : int {
  kKlCap = 0, kPeakRule, kPeakZ, kPeakMinKl, kPeakQuantile, kEntropyQuantile, kEntropyThreshold,
  kSegmentEnd, kMaxSegmentLength, kAlpha, kDRefQuantile, kSignMode, kEpsW, kNormalize, kAblation, kSeed,
  kFixedSegmentLength, kEntropyLowQuantile, kEntropyLowThreshold, kAnchorSignal, kGearParamCount
};

struct GearParams {
  float kl_cap = 20.0f;              // applied in float32 to the divergence
  PeakRule peak_rule = PeakRule::ZScore;
  double peak_z = 2.0;
  double peak_min_kl = 0.25;
  double peak_quantile = 0.95;
  double entropy_quantile = 0.8;
  double entropy_threshold = -1;     // < 0: use entropy_quantile
  SegmentEnd segment_end = SegmentEnd::NextFork;
  int64_t max_segment_length = 256;
  double alpha = 1.0;
  double d_ref_quantile = 0.95;
  SignMode sign_mode = SignMode::Symmetric;
  double eps_w = 0.2;
  Normalize normalize = Normalize::MeanOne;
  Ablation ablation = Ablation::None;
  uint32_t seed = 0;
  int64_t fixed_segment_length = 0;  // 0: auto
  double entropy_low_quantile = 0.5;
  double entropy_low_threshold = -1; // < 0: use entropy_low_quantile
  AnchorSignal anchor_signal = AnchorSignal::Divergence;
};

// Reads and range-checks the parameter array (kGearParamCount doubles).
Status gear_params_from_array(const double* p, int64_t count, GearParams* out);

// Quantile levels reported in the diagnostics for the divergence and the entropy.
constexpr int kGearDiagQuantiles = 5;
constexpr double kGearDiagLevels[kGearDiagQuantiles] = {0.5, 0.9, 0.95, 0.99, 1.0};

struct GearDiagnostics {
  int64_t valid_tokens = 0;
  int64_t peaks = 0;
  int64_t segments = 0;
  int64_t tokens_in_segments = 0;
  double weight_min = 0, weight_max = 0;  // over valid tokens; 0 and 0 when there are none
  double entropy_threshold = 0;           // eta actually used
  double entropy_low_threshold = 0;       // eta_low actually used (entropy_settles)
  double d_ref = 0;                       // max(quantile(D, dRefQuantile), 1e-6)
  double peak_kl_threshold = 0;           // quantile(D, peakQuantile) (quantile rule)
  int64_t fixed_segment_length = 0;       // length used by the fixed_length ablation
  double kl_quantiles[kGearDiagQuantiles] = {};
  double entropy_quantiles[kGearDiagQuantiles] = {};
};

struct GearInputs {
  const double* advantages = nullptr;  // rows
  const int32_t* offsets = nullptr;    // rows + 1
  int64_t rows = 0;
  int64_t n = 0;
  const uint8_t* mask = nullptr;       // n, or null (every token valid)
  const float* divergence = nullptr;   // n (unread, and may be null, with AnchorSignal::LogRatio)
  const float* entropy = nullptr;      // n
  const float* logratio = nullptr;     // n, or null (required by SignMode::Rlsd and AnchorSignal::LogRatio)
};

struct GearOutputs {
  float* advantages = nullptr;   // n
  float* weights = nullptr;      // n
  int32_t* segment_id = nullptr; // n
  std::vector<int32_t> anchors;  // one token index per segment, in segment order
  GearDiagnostics diag;
};

// Runs the whole GEAR-proposed reweighting. Input values are checked on valid tokens only (masked tokens
// are never read for values): divergence and entropy must not be NaN, must be >= -1e-6 (tiny negatives
// from rounding are clamped to 0), entropy and advantages must be finite; +Infinity divergence is capped
// at kl_cap; logratio must not be NaN. With AnchorSignal::LogRatio the signal max(0, -logratio) takes
// the divergence's place everywhere (a -Infinity logratio, a teacher log-prob of -Infinity, is capped at
// kl_cap; +Infinity gives 0) and the divergence is not read.
Status gear_scan(const GearInputs& in, const GearParams& p, GearOutputs* out, const ExecContext& ctx);

// Exact quantiles of the float32 values (mask != 0 only) at levels qs[0..nq), torch.quantile-style linear
// interpolation, by radix selection (no sort). NaN values are rejected. No valid value: every quantile 0.
Status masked_quantiles(const float* values, int64_t n, const uint8_t* mask, const double* qs, int64_t nq,
                        double* out, const ExecContext& ctx);

}  // namespace gear
