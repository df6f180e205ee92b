// tokenStats / tokenStatsBackward / tokenStatsPartial / mergeTokenStats. The parameter and result
// objects are declared in ts/core/addon_types.ts; the TS layer in ts/ops/token_stats.ts checks types,
// shapes and options, this layer what memory safety needs, and the public entries (core/backend.cc) the
// values. Logits may be host arrays or device tensors (logits_args.h).
#include <vector>

#include "args.h"
#include "invoke.h"
#include "gear/backend.h"
#include "logits_args.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value TokenStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"logits", "targets", "temperature", "out", "device", "async", "abort"});
  const Params lp = LogitsParams(p, "logits");
  const Params out = p.Object("out", {"logprob", "entropy", "logsumexp"}, true);
  // Every property is read; pointers from here on.
  const Claims claims = std::make_shared<TensorClaims>();
  int ldev;
  const LogitsView l = ReadLogits(lp, claims, &ldev);
  const int dev = CallDevice(p, {{"logits", ldev}});
  const auto tg = p.I32Copy("targets", l.rows);  // checked once, read again: a private copy
  const double temperature = p.Number("temperature");
  Napi::Float32Array olp = OutF32(out, "logprob", l.rows);
  Napi::Float32Array oent = OutF32(out, "entropy", l.rows);
  Napi::Float32Array olse = OutF32(out, "logsumexp", l.rows);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  Put(result, "logprob", olp);
  Put(result, "entropy", oent);
  Put(result, "logsumexp", olse);
  float* plp = olp.Data();
  float* pent = oent.Data();
  float* plse = olse.Data();
  return Run(p, async,
             [=](const ExecContext& c) {
               const ExecContext ctx = OnDevice(c, dev, false);
               (void)claims;  // held until the work has ended
               return token_stats(l, tg.data, temperature, plp, pent, plse, ctx);
             },
             result, abort);
}

static Napi::Value TokenStatsBackward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"logits", "targets", "grad", "temperature", "stats", "out", "inPlace", "device", "async", "abort"});
  const Params lp = LogitsParams(p, "logits");
  const Params grad = p.Object("grad", {"logprob", "entropy"}, true);
  const Params stats = p.Object("stats", {"logsumexp", "entropy"}, true);
  const Params op = OutTensorParams(p);
  const Claims claims = std::make_shared<TensorClaims>();
  int ldev;
  const LogitsView l = ReadLogits(lp, claims, &ldev);
  const int dev = CallDevice(p, {{"logits", ldev}});
  const auto tg = p.OptI32Copy("targets", l.rows);
  const float* gl = grad.OptF32("logprob", l.rows).data;
  const float* ge = grad.OptF32("entropy", l.rows).data;
  const double temperature = p.Number("temperature");
  const float* slse = stats.OptF32("logsumexp", l.rows).data;
  const float* sent = stats.OptF32("entropy", l.rows).data;
  Napi::Value grad_value;
  const GradOut go = ReadGradOut(p, lp, op, l, ldev, dev, p.OptBool("inPlace"), claims, &grad_value);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  Put(result, "gradLogits", grad_value);
  auto made = std::make_shared<NewTensor>();
  made->device = dev, made->rows = l.rows, made->vocab = l.vocab;
  return Run(p, async,
             [=](const ExecContext& c) {
               const ExecContext ctx = OnDevice(c, dev, go.device_ptr != nullptr || go.make);
               (void)claims;
               float* o = go.host != nullptr ? go.host : go.device_ptr;
               if (go.make) GEAR_TRY(made->alloc(&o));
               return token_stats_backward(l, tg.data, gl, ge, temperature, slse, sent, o, ctx);
             },
             result, abort, [=](Napi::Object r) {
               if (go.make) Put(r, "gradLogits", AdoptTensor(r.Env(), *made));
             });
}

static Napi::Value TokenStatsPartial(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"shard", "targets", "vocabStart", "temperature", "device", "async", "abort"});
  const Params sp = LogitsParams(p, "shard");
  const Claims claims = std::make_shared<TensorClaims>();
  int ldev;
  const LogitsView l = ReadLogits(sp, claims, &ldev);
  const int dev = CallDevice(p, {{"shard", ldev}});
  const auto tg = p.I32Copy("targets", l.rows);
  const int64_t vocab_start = p.Int("vocabStart", 0, 2147483647);
  const double temperature = p.Number("temperature");
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  const size_t n = static_cast<size_t>(l.rows);
  Napi::Float64Array mx = Napi::Float64Array::New(env, n), se = Napi::Float64Array::New(env, n),
                     sx = Napi::Float64Array::New(env, n), tl = Napi::Float64Array::New(env, n);
  Napi::Object result = Napi::Object::New(env);
  Put(result, "max", mx);
  Put(result, "sumExp", se);
  Put(result, "sumExpX", sx);
  Put(result, "targetLogit", tl);
  double *pm = mx.Data(), *ps = se.Data(), *px = sx.Data(), *pt = tl.Data();
  return Run(p, async,
             [=](const ExecContext& c) {
               const ExecContext ctx = OnDevice(c, dev, false);
               (void)claims;
               return token_stats_partial(l, tg.data, vocab_start, temperature, pm, ps, px, pt, ctx);
             },
             result, abort);
}

static Napi::Value MergeTokenStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"parts", "rows", "temperature", "async", "abort"});
  if (!p.Get("parts").IsArray())
    Throw(env, Code::DType, "parts: expected an array of partial statistics, got another value");
  // Every part and every property of every part is read (getters run) before any pointer is taken.
  const std::vector<Napi::Value> items = p.List("parts");
  const int64_t parts = static_cast<int64_t>(items.size());
  std::vector<Params> fields;
  fields.reserve(items.size());
  for (int64_t k = 0; k < parts; ++k) {
    const std::string w = "parts[" + std::to_string(k) + "]";
    if (!items[k].IsObject())
      Throw(env, Code::DType, w + ": expected an object from tokenStatsPartial, got another value");
    fields.push_back(p.Item(items[k], w, {"vocabStart", "vocab", "max", "sumExp", "sumExpX", "targetLogit"}));
  }
  const int64_t rows = p.Int("rows", 0, kMaxSafeInt);
  const double temperature = p.Number("temperature");
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  std::vector<int64_t> starts(parts), widths(parts);
  std::vector<const double*> mx(parts), se(parts), sx(parts), tl(parts);
  for (int64_t k = 0; k < parts; ++k) {
    const Params& f = fields[k];
    starts[k] = f.Int("vocabStart", 0, kMaxSafeInt);
    widths[k] = f.Int("vocab", 1, kMaxSafeInt);
    mx[k] = f.F64("max", rows).data;
    se[k] = f.F64("sumExp", rows).data;
    sx[k] = f.F64("sumExpX", rows).data;
    tl[k] = f.F64("targetLogit", rows).data;
  }
  const size_t n = static_cast<size_t>(rows);
  Napi::Float32Array lp = Napi::Float32Array::New(env, n), ent = Napi::Float32Array::New(env, n),
                     lse = Napi::Float32Array::New(env, n);
  Napi::Object result = Napi::Object::New(env);
  Put(result, "logprob", lp);
  Put(result, "entropy", ent);
  Put(result, "logsumexp", lse);
  float *plp = lp.Data(), *pent = ent.Data(), *plse = lse.Data();
  return Run(p, async,
             [=](const ExecContext&) {
               return merge_token_stats(parts, starts.data(), widths.data(), mx.data(), se.data(), sx.data(), tl.data(),
                                        rows, temperature, plp, pent, plse);
             },
             result, abort);
}

void RegisterTokenStats(Napi::Env env, Napi::Object exports) {
  exports.Set("tokenStats", Napi::Function::New(env, TokenStats, "tokenStats"));
  exports.Set("tokenStatsBackward", Napi::Function::New(env, TokenStatsBackward, "tokenStatsBackward"));
  exports.Set("tokenStatsPartial", Napi::Function::New(env, TokenStatsPartial, "tokenStatsPartial"));
  exports.Set("mergeTokenStats", Napi::Function::New(env, MergeTokenStats, "mergeTokenStats"));
}
GEAR_BINDING(RegisterTokenStats);

}  // namespace gear::addon
