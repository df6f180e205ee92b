// gearScan (GEAR-proposed reweighting). The parameter and result objects are declared in
// ts/core/addon_types.ts: options arrive by name, the gear::GearDiagnostics fields leave by name.
// Synchronous only: the anchor count is known only after the scan.
#include <cmath>
#include <cstring>
#include <vector>

#include "args.h"
#include "invoke.h"
#include "../cpu/gear_scan.h"  // the GEAR scan's contract, private to the CPU module
#include "gear/thread_pool.h"
#include "ops.h"

namespace gear::addon {

namespace {
// Option name -> slot of the kernel's parameter record, read and range-checked by gear_params_from_array.
struct OptionSlot {
  const char* name;
  GearParamIndex slot;
  bool optional;  // absent reads as `absent`
  double absent;  // NaN for the absolute thresholds ("use the batch quantile instead")
};
constexpr OptionSlot kOptions[] = {
    {"klCap", kKlCap, false, 0},
    {"peakRule", kPeakRule, false, 0},
    {"peakZ", kPeakZ, false, 0},
    {"peakMinKl", kPeakMinKl, false, 0},
    {"peakQuantile", kPeakQuantile, false, 0},
    {"entropyQuantile", kEntropyQuantile, false, 0},
    {"entropyThreshold", kEntropyThreshold, true, NAN},
    {"segmentEnd", kSegmentEnd, false, 0},
    {"maxSegmentLength", kMaxSegmentLength, false, 0},
    {"alpha", kAlpha, false, 0},
    {"dRefQuantile", kDRefQuantile, false, 0},
    {"signMode", kSignMode, false, 0},
    {"epsW", kEpsW, false, 0},
    {"normalize", kNormalize, false, 0},
    {"ablation", kAblation, false, 0},
    {"seed", kSeed, false, 0},
    {"fixedSegmentLength", kFixedSegmentLength, false, 0},
    {"entropyLowQuantile", kEntropyLowQuantile, false, 0},
    {"entropyLowThreshold", kEntropyLowThreshold, true, NAN},
    {"anchorSignal", kAnchorSignal, true, 0},  // absent: the divergence (callers from before the option)
};
static_assert(sizeof(kOptions) / sizeof(kOptions[0]) == kGearParamCount, "one name per GEAR parameter");

// The diagnostic quantile levels (kGearDiagLevels) by name.
constexpr const char* kQuantileNames[kGearDiagQuantiles] = {"p50", "p90", "p95", "p99", "max"};

std::vector<const char*> OptionNames() {
  std::vector<const char*> names;
  for (const auto& o : kOptions) names.push_back(o.name);
  return names;
}

Napi::Object Quantiles(Napi::Env env, const double (&q)[kGearDiagQuantiles]) {
  Napi::Object o = Napi::Object::New(env);
  for (int i = 0; i < kGearDiagQuantiles; ++i) Put(o, kQuantileNames[i], q[i]);
  return o;
}

Napi::Object Diagnostics(Napi::Env env, const GearDiagnostics& d) {
  Napi::Object o = Napi::Object::New(env);
  Put(o, "validTokens", static_cast<double>(d.valid_tokens));
  Put(o, "peaks", static_cast<double>(d.peaks));
  Put(o, "segments", static_cast<double>(d.segments));
  Put(o, "tokensInSegments", static_cast<double>(d.tokens_in_segments));
  Put(o, "weightMin", d.weight_min);
  Put(o, "weightMax", d.weight_max);
  Put(o, "entropyThreshold", d.entropy_threshold);
  Put(o, "entropyLowThreshold", d.entropy_low_threshold);
  Put(o, "dRef", d.d_ref);
  Put(o, "peakKlThreshold", d.peak_kl_threshold);
  Put(o, "fixedSegmentLength", static_cast<double>(d.fixed_segment_length));
  Put(o, "klQuantiles", Quantiles(env, d.kl_quantiles));
  Put(o, "entropyQuantiles", Quantiles(env, d.entropy_quantiles));
  return o;
}
}  // namespace

static Napi::Value GearScan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"advantages", "offsets", "mask", "divergence", "entropy", "logratio", "options", "out"});
  const Params opt = p.Object("options", OptionNames());
  const Params outs = p.Object("out", {"advantages", "weights", "segmentId"}, true);
  // Every property is read; values and pointers from here on.
  const auto off = p.I32Copy("offsets");  // checked once, read again by the scan: a private copy
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  auto adv = p.F64("advantages", rows);
  // The log-ratio anchor signal does not read the divergence: it may be left out (then the logratio sets N).
  const bool lr_only = opt.OptNumber("anchorSignal", 0) == 1 && !p.Has("divergence");
  Array<float> div = lr_only ? Array<float>{} : p.F32("divergence");
  const auto lr0 = lr_only ? p.F32("logratio") : Array<float>{};
  const int64_t n = lr_only ? lr0.length : div.length;
  auto ent = p.F32("entropy", n);
  const auto mask = p.OptU8("mask", n);
  const auto lr = lr_only ? lr0 : p.OptF32("logratio", n);
  double raw[kGearParamCount];
  for (const auto& o : kOptions) raw[o.slot] = o.optional ? opt.OptNumber(o.name, o.absent) : opt.Number(o.name);
  GearParams gp;
  Check(env, gear_params_from_array(raw, kGearParamCount, &gp));
  // Optional caller-owned outputs (reused across steps, they skip allocation and first-touch faults).
  auto out_f32 = [&](const char* name) {
    return outs.Has(name) ? outs.F32(name, n).value.As<Napi::Float32Array>()
                          : Napi::Float32Array::New(env, static_cast<size_t>(n));
  };
  Napi::Float32Array oadv = out_f32("advantages");
  Napi::Float32Array ow = out_f32("weights");
  Napi::Int32Array oseg = outs.Has("segmentId") ? outs.I32("segmentId", n).value.As<Napi::Int32Array>()
                                                : Napi::Int32Array::New(env, static_cast<size_t>(n));
  if (n > 0 && (oadv.Data() == ow.Data() || static_cast<void*>(oadv.Data()) == static_cast<void*>(oseg.Data()) ||
                static_cast<void*>(ow.Data()) == static_cast<void*>(oseg.Data())))
    Throw(env, Code::Shape, "out: expected three distinct arrays, got the same buffer twice");
  GearInputs in;
  in.advantages = adv.data;
  in.offsets = off.data;
  in.rows = rows;
  in.n = n;
  in.mask = mask.data;
  in.divergence = div.data;
  in.entropy = ent.data;
  in.logratio = lr.data;
  GearOutputs out;
  out.advantages = oadv.Data();
  out.weights = ow.Data();
  out.segment_id = oseg.Data();
  ExecContext ctx{&global_pool(), nullptr};
  Check(env, gear_scan(in, gp, &out, ctx));

  Napi::Int32Array anchors = Napi::Int32Array::New(env, out.anchors.size());
  if (!out.anchors.empty()) std::memcpy(anchors.Data(), out.anchors.data(), out.anchors.size() * sizeof(int32_t));
  Napi::Object res = Napi::Object::New(env);
  Put(res, "advantages", oadv);
  Put(res, "weights", ow);
  Put(res, "segmentId", oseg);
  Put(res, "anchors", anchors);
  Put(res, "diagnostics", Diagnostics(env, out.diag));
  return res;
}

void RegisterGear(Napi::Env env, Napi::Object exports) {
  exports.Set("gearScan", Napi::Function::New(env, GearScan, "gearScan"));
}
GEAR_BINDING(RegisterGear);

}  // namespace gear::addon
