// gearScan (GEAR-proposed reweighting). The parameter and result objects are declared in
// ts/gear/gear.ts: options arrive by name (GEAR_OPTIONS), the gear::GearDiagnostics fields leave by name.
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
// The names of the options object (every GEAR option), in the order of GEAR_OPTIONS.
std::vector<const char*> OptionNames() {
#define GEAR_NAME(name, ...) #name,
  return {GEAR_OPTIONS(GEAR_NAME, GEAR_NAME, GEAR_NAME)};
#undef GEAR_NAME
}

// The options read by name straight into the kernel's parameters, enumerations by their names, each
// checked by gear_option as it is stored. An absent threshold keeps -1 ("use the batch quantile").
GearParams ReadOptions(Napi::Env env, const Params& opt) {
  GearParams g;
#define GEAR_READ_NUMBER(name, field, type, range) \
  Check(env, gear_option("options", #name, opt.Number(#name), range, &g.field));
#define GEAR_READ_UNSET(name, field, range) \
  if (opt.Has(#name)) Check(env, gear_option("options", #name, opt.Number(#name), range, &g.field));
#define GEAR_READ_NAMED(name, field, type, ...) \
  Check(env, gear_option("options", #name, opt.String(#name), {__VA_ARGS__}, &g.field));
  GEAR_OPTIONS(GEAR_READ_NUMBER, GEAR_READ_UNSET, GEAR_READ_NAMED)
#undef GEAR_READ_NUMBER
#undef GEAR_READ_UNSET
#undef GEAR_READ_NAMED
  return g;
}

// The diagnostic quantile levels (kGearDiagLevels) by name.
constexpr const char* kQuantileNames[kGearDiagQuantiles] = {"p50", "p90", "p95", "p99", "max"};

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
  const GearParams gp = ReadOptions(env, opt);
  const bool lr_only = gp.anchor_signal == AnchorSignal::LogRatio && !p.Has("divergence");
  Array<float> div = lr_only ? Array<float>{} : p.F32("divergence");
  const auto lr0 = lr_only ? p.F32("logratio") : Array<float>{};
  const int64_t n = lr_only ? lr0.length : div.length;
  auto ent = p.F32("entropy", n);
  const auto mask = p.OptU8("mask", n);
  const auto lr = lr_only ? lr0 : p.OptF32("logratio", n);
  // Optional caller-owned outputs (reused across steps, they skip allocation and first-touch faults).
  Napi::Float32Array oadv = OutF32(outs, "advantages", n);
  Napi::Float32Array ow = OutF32(outs, "weights", n);
  Napi::Int32Array oseg = OutI32(outs, "segmentId", n);
  // CheckWrites below refuses these too; this check keeps its own message for the same array given twice
  if (n > 0 && (oadv.Data() == ow.Data() || static_cast<void*>(oadv.Data()) == static_cast<void*>(oseg.Data()) ||
                static_cast<void*>(ow.Data()) == static_cast<void*>(oseg.Data())))
    Throw(env, Code::Shape, "out: expected three distinct arrays, got the same buffer twice");
  p.CheckWrites();  // not run through Run: the rule that every other op gets there
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
