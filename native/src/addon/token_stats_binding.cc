// tokenStats / tokenStatsBackward / tokenStatsPartial / mergeTokenStats. Positional signatures (the TS
// layer in ts/ops/token_stats.ts validates first; everything is re-checked here and in the kernels):
//   tokenStats(data, rows, vocab, dtype, targets, temperature, outLogprob|null, outEntropy|null,
//              outLogsumexp|null, async, abort|null) -> { logprob, entropy, logsumexp }
//   tokenStatsBackward(data, rows, vocab, dtype, targets|null, gradLogprob|null, gradEntropy|null,
//              temperature, statsLogsumexp|null, statsEntropy|null, out|null, inPlace, async, abort|null)
//              -> Float32Array (rows * vocab)
//   tokenStatsPartial(data, rows, vocab, dtype, targets, vocabStart, temperature, async, abort|null)
//              -> { max, sumExp, sumExpX, targetLogit } (Float64Array each)
//   mergeTokenStats(parts: [{ vocabStart, vocab, max, sumExp, sumExpX, targetLogit }], rows, temperature,
//              async) -> { logprob, entropy, logsumexp }
#include <vector>

#include "args.h"
#include "gear/token_stats.h"
#include "logits_args.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value TokenStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const LogitsView l = ReadLogits(info[0], info[1], info[2], info[3], "logits");
  const auto tg = I32Copy(info[4], "targets", l.rows);  // checked once, read again: a private copy
  const double temperature = Number(info[5], "temperature");
  Napi::Float32Array lp = OutF32(env, info[6], "out.logprob", l.rows);
  Napi::Float32Array ent = OutF32(env, info[7], "out.entropy", l.rows);
  Napi::Float32Array lse = OutF32(env, info[8], "out.logsumexp", l.rows);
  const bool async = !IsNullish(info[9]) && Bool(info[9], "async");
  const auto* abort = AbortFlag(info[10]);
  Napi::Object result = Napi::Object::New(env);
  result.Set("logprob", lp);
  result.Set("entropy", ent);
  result.Set("logsumexp", lse);
  float* plp = lp.Data();
  float* pent = ent.Data();
  float* plse = lse.Data();
  return Run(env, async, {info[0], info[4], lp, ent, lse, info[10]},
             [=](const ExecContext& ctx) { return token_stats(l, tg.data, temperature, plp, pent, plse, ctx); },
             result, abort);
}

static Napi::Value TokenStatsBackward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const LogitsView l = ReadLogits(info[0], info[1], info[2], info[3], "logits");
  const auto tg = IsNullish(info[4]) ? Array<int32_t>{} : I32Copy(info[4], "targets", l.rows);
  const float* gl = OptF32(info[5], "grad.logprob", l.rows);
  const float* ge = OptF32(info[6], "grad.entropy", l.rows);
  const double temperature = Number(info[7], "temperature");
  const float* slse = OptF32(info[8], "stats.logsumexp", l.rows);
  const float* sent = OptF32(info[9], "stats.entropy", l.rows);
  const bool in_place = !IsNullish(info[11]) && Bool(info[11], "inPlace");
  const int64_t total = l.rows * l.vocab;
  Napi::Float32Array out;
  if (in_place) {
    if (l.dtype != DType::F32) Throw(env, Code::DType, "inPlace: expected float32 logits (a Float32Array), got a Uint16Array");
    if (!IsNullish(info[10])) Throw(env, Code::Option, "out: expected no out buffer with inPlace, got one");
    out = info[0].As<Napi::Float32Array>();
  } else {
    out = OutF32(env, info[10], "out", total);
  }
  const bool async = !IsNullish(info[12]) && Bool(info[12], "async");
  const auto* abort = AbortFlag(info[13]);
  float* po = total > 0 ? out.Data() : nullptr;
  return Run(env, async, {info[0], info[4], info[5], info[6], info[8], info[9], out, info[13]},
             [=](const ExecContext& ctx) {
               return token_stats_backward(l, tg.data, gl, ge, temperature, slse, sent, po, ctx);
             },
             out, abort);
}

static Napi::Value TokenStatsPartial(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const LogitsView l = ReadLogits(info[0], info[1], info[2], info[3], "shard");
  const auto tg = I32Copy(info[4], "targets", l.rows);
  const int64_t vocab_start = Int(info[5], "vocabStart", 0, 2147483647);
  const double temperature = Number(info[6], "temperature");
  const bool async = !IsNullish(info[7]) && Bool(info[7], "async");
  const auto* abort = AbortFlag(info[8]);
  const size_t n = static_cast<size_t>(l.rows);
  Napi::Float64Array mx = Napi::Float64Array::New(env, n), se = Napi::Float64Array::New(env, n),
                     sx = Napi::Float64Array::New(env, n), tl = Napi::Float64Array::New(env, n);
  Napi::Object result = Napi::Object::New(env);
  result.Set("max", mx);
  result.Set("sumExp", se);
  result.Set("sumExpX", sx);
  result.Set("targetLogit", tl);
  double *pm = mx.Data(), *ps = se.Data(), *px = sx.Data(), *pt = tl.Data();
  return Run(env, async, {info[0], info[4], mx, se, sx, tl, info[8]},
             [=](const ExecContext& ctx) {
               return token_stats_partial(l, tg.data, vocab_start, temperature, pm, ps, px, pt, ctx);
             },
             result, abort);
}

static Napi::Value MergeTokenStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray()) Throw(env, Code::DType, "parts: expected an array of partial statistics, got another value");
  const int64_t rows = Int(info[1], "rows", 0, kMaxSafeInt);
  const double temperature = Number(info[2], "temperature");
  const bool async = !IsNullish(info[3]) && Bool(info[3], "async");
  // Every property is read (getters run) before any pointer is taken from any part.
  const std::vector<Napi::Value> items = ListValues(info[0], "parts");
  const int64_t parts = static_cast<int64_t>(items.size());
  static const char* const kFields[6] = {"vocabStart", "vocab", "max", "sumExp", "sumExpX", "targetLogit"};
  std::vector<Napi::Value> fields(static_cast<size_t>(parts) * 6);
  for (int64_t p = 0; p < parts; ++p) {
    if (!items[p].IsObject())
      Throw(env, Code::DType, "parts[" + std::to_string(p) + "]: expected an object from tokenStatsPartial, got another value");
    auto o = items[p].As<Napi::Object>();
    for (int f = 0; f < 6; ++f) fields[p * 6 + f] = o.Get(kFields[f]);
  }
  std::vector<int64_t> starts(parts), widths(parts);
  std::vector<const double*> mx(parts), se(parts), sx(parts), tl(parts);
  std::vector<Napi::Value> keep(items.begin(), items.end());
  for (int64_t p = 0; p < parts; ++p) {
    const std::string w = "parts[" + std::to_string(p) + "]";
    const Napi::Value* f = &fields[p * 6];
    starts[p] = Int(f[0], (w + ".vocabStart").c_str(), 0, kMaxSafeInt);
    widths[p] = Int(f[1], (w + ".vocab").c_str(), 1, kMaxSafeInt);
    mx[p] = F64(f[2], (w + ".max").c_str(), rows).data;
    se[p] = F64(f[3], (w + ".sumExp").c_str(), rows).data;
    sx[p] = F64(f[4], (w + ".sumExpX").c_str(), rows).data;
    tl[p] = F64(f[5], (w + ".targetLogit").c_str(), rows).data;
    for (int k = 2; k < 6; ++k) keep.push_back(f[k]);
  }
  const size_t n = static_cast<size_t>(rows);
  Napi::Float32Array lp = Napi::Float32Array::New(env, n), ent = Napi::Float32Array::New(env, n),
                     lse = Napi::Float32Array::New(env, n);
  Napi::Object result = Napi::Object::New(env);
  result.Set("logprob", lp);
  result.Set("entropy", ent);
  result.Set("logsumexp", lse);
  keep.push_back(result);
  float *plp = lp.Data(), *pent = ent.Data(), *plse = lse.Data();
  return Run(env, async, keep,
             [=](const ExecContext&) {
               return merge_token_stats(parts, starts.data(), widths.data(), mx.data(), se.data(), sx.data(), tl.data(),
                                        rows, temperature, plp, pent, plse);
             },
             result, nullptr);
}

void RegisterTokenStats(Napi::Env env, Napi::Object exports) {
  exports.Set("tokenStats", Napi::Function::New(env, TokenStats, "tokenStats"));
  exports.Set("tokenStatsBackward", Napi::Function::New(env, TokenStatsBackward, "tokenStatsBackward"));
  exports.Set("tokenStatsPartial", Napi::Function::New(env, TokenStatsPartial, "tokenStatsPartial"));
  exports.Set("mergeTokenStats", Napi::Function::New(env, MergeTokenStats, "mergeTokenStats"));
}

}  // namespace gear::addon
