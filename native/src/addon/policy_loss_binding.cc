// policyLossPpo. The parameter and result objects are declared in ts/core/addon_types.ts: the
// hyper-parameters arrive by name, the statistics of gear::PpoStats leave by name.
#include <memory>

#include "args.h"
#include "invoke.h"
#include "gear/policy_loss.h"
#include "large_output.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value PolicyLossPpo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"logprob", "oldLogprob", "advantages", "offsets", "mask", "clipLow", "clipHigh", "clipC",
                        "logRatioClamp", "globalTokens", "globalRows", "lossScaleFactor", "dpSize", "agg",
                        "semantics", "out", "async", "abort"});
  auto lp = p.F32("logprob");
  const int64_t n = lp.length;
  auto old = p.F32("oldLogprob", n);
  auto adv = p.F32("advantages", n);
  const auto off = p.I32Copy("offsets");  // checked once, read again by the kernel: a private copy
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  const auto mask = p.OptU8("mask", n);
  // Absent optional settings take the kernel's "not set" values (documented on PpoParams); the kernel
  // range-checks every value.
  PpoParams k;
  k.clip_low = p.Number("clipLow");
  k.clip_high = p.Number("clipHigh");
  k.clip_c = p.Number("clipC");
  k.log_ratio_clamp = p.OptNumber("logRatioClamp", -1);
  k.global_tokens = p.OptNumber("globalTokens", -1);
  k.global_rows = p.OptNumber("globalRows", -1);
  k.loss_scale_factor = p.OptNumber("lossScaleFactor", -1);
  k.dp_size = p.OptNumber("dpSize", 1);
  k.agg = static_cast<AggMode>(p.Int("agg", 0, 4));
  k.semantics = static_cast<AggSemantics>(p.Int("semantics", 0, 2));
  const bool reused = p.Has("out");
  Napi::Float32Array out = reused ? p.F32("out", n).value.As<Napi::Float32Array>()
                                  : NewStreamOutputF32(env, static_cast<size_t>(n));
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  Put(result, "grad", out);
  float* g = out.Data();
  auto stats = std::make_shared<PpoStats>();
  return Run(p, async,
             [=](const ExecContext& ctx) {
               return policy_loss_ppo(lp.data, old.data, adv.data, mask.data, n, off.data, rows, k, g, stats.get(), ctx,
                                      reused);
             },
             result, abort,
             [stats](Napi::Object r) {
               const PpoStats& s = *stats;
               Put(r, "loss", s.loss);
               Put(r, "tokens", s.tokens);
               Put(r, "clipped", s.clipped);
               Put(r, "lower", s.lower);
               Put(r, "negKl", s.neg_kl);
               Put(r, "ratioSum", s.ratio_sum);
               Put(r, "ratioMin", s.ratio_min);
               Put(r, "ratioMax", s.ratio_max);
               Put(r, "nan", s.nan);
             });
}

void RegisterPolicyLoss(Napi::Env env, Napi::Object exports) {
  exports.Set("policyLossPpo", Napi::Function::New(env, PolicyLossPpo, "policyLossPpo"));
}
GEAR_BINDING(RegisterPolicyLoss);

}  // namespace gear::addon
