// gear (GEAR-proposed reweighting) and its exact-quantile helper. Signatures (positional, as the TS
// layer calls them):
//   gearScan(advantages: Float64Array(R), offsets: Int32Array(R+1), mask: Uint8Array|null,
//            divergence: Float32Array(N), entropy: Float32Array(N), logratio: Float32Array|null,
//            params: Float64Array(kGearParamCount), outAdvantages: Float32Array(N)|null,
//            outWeights: Float32Array(N)|null, outSegmentId: Int32Array(N)|null)
//     -> { advantages: Float32Array, weights: Float32Array, segmentId: Int32Array, anchors: Int32Array,
//          stats: Float64Array }   (stats layout: see kStat* below)
//   gearQuantiles(values: Float32Array, mask: Uint8Array|null, q: Float64Array) -> Float64Array
// Synchronous only: the anchor count is known only after the scan.
#include <cstring>

#include "args.h"
#include "gear/gear_scan.h"
#include "gear/thread_pool.h"
#include "ops.h"

namespace gear::addon {

// stats: [validTokens, peaks, segments, tokensInSegments, weightMin, weightMax, entropyThreshold,
//         entropyLowThreshold, dRef, peakKlThreshold, fixedSegmentLength, klQ x5, entropyQ x5]
constexpr int kStatCount = 11 + 2 * kGearDiagQuantiles;

static Napi::Value GearScan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto off = I32Copy(info[1], "offsets");  // checked once, read again by the scan: a private copy
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  auto adv = F64(info[0], "advantages", rows);
  auto div = F32(info[3], "divergence");
  const int64_t n = div.length;
  auto ent = F32(info[4], "entropy", n);
  Array<uint8_t> mask;
  if (!IsNullish(info[2])) mask = U8(info[2], "mask", n);
  Array<float> lr;
  if (!IsNullish(info[5])) lr = F32(info[5], "logratio", n);
  auto par = F64(info[6], "params");
  GearParams p;
  Check(env, gear_params_from_array(par.data, par.length, &p));

  // Optional caller-owned outputs (reused across steps, they skip allocation and first-touch faults).
  auto out_f32 = [&](int i, const char* what) {
    return IsNullish(info[i]) ? Napi::Float32Array::New(env, static_cast<size_t>(n))
                              : F32(info[i], what, n).value.As<Napi::Float32Array>();
  };
  Napi::Float32Array oadv = out_f32(7, "out.advantages");
  Napi::Float32Array ow = out_f32(8, "out.weights");
  Napi::Int32Array oseg = IsNullish(info[9]) ? Napi::Int32Array::New(env, static_cast<size_t>(n))
                                             : I32(info[9], "out.segmentId", n).value.As<Napi::Int32Array>();
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
  Check(env, gear_scan(in, p, &out, ctx));

  Napi::Int32Array anchors = Napi::Int32Array::New(env, out.anchors.size());
  if (!out.anchors.empty()) std::memcpy(anchors.Data(), out.anchors.data(), out.anchors.size() * sizeof(int32_t));
  Napi::Float64Array stats = Napi::Float64Array::New(env, kStatCount);
  const GearDiagnostics& d = out.diag;
  double* s = stats.Data();
  s[0] = static_cast<double>(d.valid_tokens);
  s[1] = static_cast<double>(d.peaks);
  s[2] = static_cast<double>(d.segments);
  s[3] = static_cast<double>(d.tokens_in_segments);
  s[4] = d.weight_min;
  s[5] = d.weight_max;
  s[6] = d.entropy_threshold;
  s[7] = d.entropy_low_threshold;
  s[8] = d.d_ref;
  s[9] = d.peak_kl_threshold;
  s[10] = static_cast<double>(d.fixed_segment_length);
  for (int i = 0; i < kGearDiagQuantiles; ++i) {
    s[11 + i] = d.kl_quantiles[i];
    s[11 + kGearDiagQuantiles + i] = d.entropy_quantiles[i];
  }
  Napi::Object res = Napi::Object::New(env);
  res.Set("advantages", oadv);
  res.Set("weights", ow);
  res.Set("segmentId", oseg);
  res.Set("anchors", anchors);
  res.Set("stats", stats);
  return res;
}

static Napi::Value GearQuantiles(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto vals = F32(info[0], "values");
  Array<uint8_t> mask;
  if (!IsNullish(info[1])) mask = U8(info[1], "mask", vals.length);
  auto q = F64(info[2], "q");
  Napi::Float64Array out = Napi::Float64Array::New(env, static_cast<size_t>(q.length));
  ExecContext ctx{&global_pool(), nullptr};
  Check(env, masked_quantiles(vals.data, vals.length, mask.data, q.data, q.length, out.Data(), ctx));
  return out;
}

void RegisterGear(Napi::Env env, Napi::Object exports) {
  exports.Set("gearScan", Napi::Function::New(env, GearScan, "gearScan"));
  exports.Set("gearQuantiles", Napi::Function::New(env, GearQuantiles, "gearQuantiles"));
}

}  // namespace gear::addon
