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
#include <initializer_list>
#include <limits>
#include <string>
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

// The values a numeric option accepts: [min, max] (each end open or not), optionally integers only or
// finite only; ts/gear/options.ts states the same bounds in GEAR's option schema.
struct GearRange {
  double min, max;
  bool min_open, max_open, integer, finite;
};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr GearRange kCapRange{0, std::numeric_limits<float>::max(), true, false, false, false};
constexpr GearRange kFiniteNonNegative{0, kInf, false, false, false, true};
constexpr GearRange kNonNegative{0, kInf, false, false, false, false};
constexpr GearRange kUnit{0, 1, false, false, false, false};
constexpr GearRange kClipWidth{0, 1, false, true, false, false};
constexpr GearRange kLength{1, 2147483647.0, false, false, true, false};
constexpr GearRange kLengthOrAuto{0, 2147483647.0, false, false, true, false};
constexpr GearRange kSeed{0, 4294967295.0, false, false, true, false};

// The GEAR options, each declared once on the native side: its name in the options object, its field of
// GearParams and what it accepts. The binding reads every one by name and gear_option checks it as it
// is stored (the one native check); ts/gear/options.ts declares the same options with their defaults
// and documentation, and sends each resolved.
//   NUMBER(name, field, type, range)    a number within `range`, stored as `type`
//   UNSET(name, field, range)           the same, or absent: -1 ("use the batch quantile instead")
//   NAMED(name, field, enum, names...)  the name of an enumerator (names in enumerator order)
#define GEAR_OPTIONS(NUMBER, UNSET, NAMED)                                                      \
  NUMBER(klCap, kl_cap, float, kCapRange) /* applied in float32 to the divergence */            \
  NAMED(peakRule, peak_rule, PeakRule, "zscore", "quantile")                                   \
  NUMBER(peakZ, peak_z, double, kFiniteNonNegative)                                            \
  NUMBER(peakMinKl, peak_min_kl, double, kFiniteNonNegative)                                   \
  NUMBER(peakQuantile, peak_quantile, double, kUnit)                                           \
  NUMBER(entropyQuantile, entropy_quantile, double, kUnit)                                     \
  UNSET(entropyThreshold, entropy_threshold, kNonNegative) /* -1: entropy_quantile */          \
  NAMED(segmentEnd, segment_end, SegmentEnd, "next_fork", "entropy_settles")                   \
  NUMBER(entropyLowQuantile, entropy_low_quantile, double, kUnit)                              \
  UNSET(entropyLowThreshold, entropy_low_threshold, kNonNegative) /* -1: entropy_low_quantile */ \
  NUMBER(maxSegmentLength, max_segment_length, int64_t, kLength)                               \
  NUMBER(alpha, alpha, double, kFiniteNonNegative)                                             \
  NUMBER(dRefQuantile, d_ref_quantile, double, kUnit)                                          \
  NAMED(signMode, sign_mode, SignMode, "symmetric", "negative_only", "rlsd")                   \
  NUMBER(epsW, eps_w, double, kClipWidth)                                                      \
  NAMED(normalize, normalize, Normalize, "mean_one", "none")                                   \
  NAMED(ablation, ablation, Ablation, "none", "random_anchors", "fixed_length", "token_only")  \
  NUMBER(seed, seed, uint32_t, kSeed)                                                          \
  NUMBER(fixedSegmentLength, fixed_segment_length, int64_t, kLengthOrAuto) /* 0: auto */       \
  NAMED(anchorSignal, anchor_signal, AnchorSignal, "divergence", "logratio")

struct GearParams {
#define GEAR_NUMBER_FIELD(name, field, type, range) type field = 0;
#define GEAR_UNSET_FIELD(name, field, range) double field = -1;
#define GEAR_NAMED_FIELD(name, field, type, ...) type field = type{};
  GEAR_OPTIONS(GEAR_NUMBER_FIELD, GEAR_UNSET_FIELD, GEAR_NAMED_FIELD)
#undef GEAR_NUMBER_FIELD
#undef GEAR_UNSET_FIELD
#undef GEAR_NAMED_FIELD
};

// Stores the option `name` of the object `object` (the two name it in messages: "options.klCap") in
// *out after checking it: a number within `range` whose stored value is still within it (a float32 cap
// of 1e-50 would be 0), or one of `names` (the enumerator's index). Error: Code::Option.
Status gear_option(const char* object, const char* name, double v, const GearRange& range, float* out);
Status gear_option(const char* object, const char* name, double v, const GearRange& range, double* out);
Status gear_option(const char* object, const char* name, double v, const GearRange& range, int64_t* out);
Status gear_option(const char* object, const char* name, double v, const GearRange& range, uint32_t* out);
Status gear_option_index(const char* object, const char* name, const std::string& v,
                         std::initializer_list<const char*> names, int* index);
template <class E>
Status gear_option(const char* object, const char* name, const std::string& v, std::initializer_list<const char*> names,
                   E* out) {
  int i = 0;
  GEAR_TRY(gear_option_index(object, name, v, names, &i));
  *out = static_cast<E>(i);
  return Status::ok();
}

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

}  // namespace gear
