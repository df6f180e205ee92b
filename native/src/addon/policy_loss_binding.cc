// policyLossPpo. Signature (positional, as the TS layer calls it):
//   policyLossPpo(logprob: Float32Array, oldLogprob: Float32Array, advantages: Float32Array,
//                 offsets: Int32Array, mask: Uint8Array|null,
//                 params: Float64Array(8) [clipLow, clipHigh, clipC, logRatioClamp (<0 none),
//                                          globalTokens, globalRows, lossScaleFactor (<0 default), dpSize],
//                 agg: 0..4, semantics: 0..2, out: Float32Array|null, async: boolean|null,
//                 abort: Int32Array|null)
//   -> { grad: Float32Array, stats: Float64Array(9) [loss, tokens, clipped, lower, negKl, ratioSum,
//                                                      ratioMin, ratioMax, nan] }
#include "args.h"
#include "gear/policy_loss.h"
#include "large_output.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value PolicyLossPpo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto lp = F32(info[0], "logprob");
  const int64_t n = lp.length;
  auto old = F32(info[1], "oldLogprob", n);
  auto adv = F32(info[2], "advantages", n);
  const auto off = I32Copy(info[3], "offsets");  // checked once, read again by the kernel: a private copy
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  Array<uint8_t> mask;
  if (!IsNullish(info[4])) mask = U8(info[4], "mask", n);
  auto prm = F64(info[5], "params", 8);
  PpoParams p;
  p.clip_low = prm.data[0];
  p.clip_high = prm.data[1];
  p.clip_c = prm.data[2];
  p.log_ratio_clamp = prm.data[3];
  p.global_tokens = prm.data[4];
  p.global_rows = prm.data[5];
  p.loss_scale_factor = prm.data[6];
  p.dp_size = prm.data[7];
  p.agg = static_cast<AggMode>(Int(info[6], "agg", 0, 4));
  p.semantics = static_cast<AggSemantics>(Int(info[7], "semantics", 0, 2));
  const bool reused = !IsNullish(info[8]);
  Napi::Float32Array out = !reused ? NewStreamOutputF32(env, static_cast<size_t>(n))
                                   : F32(info[8], "out", n).value.As<Napi::Float32Array>();
  const bool async = !IsNullish(info[9]) && Bool(info[9], "async");
  const auto* abort = AbortFlag(info[10]);
  Napi::Float64Array stats = Napi::Float64Array::New(env, 9);
  Napi::Object result = Napi::Object::New(env);
  result.Set("grad", out);
  result.Set("stats", stats);
  float* g = out.Data();
  double* s = stats.Data();
  return Run(env, async, {info[0], info[1], info[2], info[3], info[4], out, stats, info[10]},
             [=](const ExecContext& ctx) {
               PpoStats ps;
               Status st = policy_loss_ppo(lp.data, old.data, adv.data, mask.data, n, off.data, rows, p, g, &ps, ctx, reused);
               if (!st.is_ok()) return st;
               const double v[9] = {ps.loss, ps.tokens, ps.clipped, ps.lower, ps.neg_kl, ps.ratio_sum,
                                    ps.ratio_min, ps.ratio_max, ps.nan ? 1.0 : 0.0};
               for (int i = 0; i < 9; ++i) s[i] = v[i];
               return Status::ok();
             },
             result, abort);
}

void RegisterPolicyLoss(Napi::Env env, Napi::Object exports) {
  exports.Set("policyLossPpo", Napi::Function::New(env, PolicyLossPpo, "policyLossPpo"));
}

}  // namespace gear::addon
