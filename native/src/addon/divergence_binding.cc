// divergence / divergenceBackward. The parameter and result objects are declared in
// ts/core/addon_types.ts; ts/ops/divergence.ts validates first, and everything safety needs is
// re-checked here and in the kernels (student and teacher agree in shape and dtype: check_pair).
#include <string>
#include <vector>

#include "../core/args.h"
#include "../core/invoke.h"
#include "gear/divergence.h"
#include "logits_args.h"
#include "ops.h"

namespace gear::addon {

namespace {
// The properties shared by the forward and the backward.
#define GEAR_PAIR_FIELDS "student", "teacher", "kind", "beta", "temperature", "klCap"

struct PairArgs {
  LogitsView s, t;
  DivKind kind;
  double beta, temperature, kl_cap;
};

PairArgs ReadPair(const Params& p, const Params& sp, const Params& tp) {
  PairArgs a;
  a.s = ReadLogits(sp);
  a.t = ReadLogits(tp);
  a.kind = static_cast<DivKind>(p.Int("kind", 0, 2));
  a.beta = p.Number("beta");
  a.temperature = p.Number("temperature");
  a.kl_cap = p.Number("klCap");
  return a;
}
}  // namespace

static Napi::Value Divergence(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {GEAR_PAIR_FIELDS, "targets", "out", "async", "abort"});
  const Params sp = LogitsParams(p, "student"), tp = LogitsParams(p, "teacher");
  static const char* const kKeys[6] = {"value", "studentEntropy", "studentLogsumexp", "teacherLogsumexp",
                                       "studentLogprob", "teacherLogprob"};
  // The `out` object's fields too: its getters run before any pointer is taken.
  const Params out = p.Object("out", {kKeys[0], kKeys[1], kKeys[2], kKeys[3], kKeys[4], kKeys[5]}, true);
  const PairArgs a = ReadPair(p, sp, tp);
  const auto tg = p.OptI32Copy("targets", a.s.rows);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  auto field = [&](int k) {
    Napi::Float32Array arr = OutF32(out, kKeys[k], a.s.rows);
    result.Set(kKeys[k], arr);
    return arr.Data();
  };
  DivergenceOut o;
  o.value = field(0);
  o.student_entropy = field(1);
  o.student_lse = field(2);
  o.teacher_lse = field(3);
  if (tg.data != nullptr) {
    o.student_logprob = field(4);
    o.teacher_logprob = field(5);
  }
  return Run(env, async,
             {sp.Get("data"), tp.Get("data"), p.Get("targets"), out.Get(kKeys[0]), out.Get(kKeys[1]),
              out.Get(kKeys[2]), out.Get(kKeys[3]), out.Get(kKeys[4]), out.Get(kKeys[5]), p.Get("abort")},
             [=](const ExecContext& ctx) {
               return divergence(a.s, a.t, a.kind, a.beta, a.temperature, a.kl_cap, tg.data, o, ctx);
             },
             result, abort);
}

static Napi::Value DivergenceBackward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {GEAR_PAIR_FIELDS, "grad", "stats", "out", "async", "abort"});
  const Params sp = LogitsParams(p, "student"), tp = LogitsParams(p, "teacher");
  const Params stats = p.Object("stats", {"value", "studentLogsumexp", "teacherLogsumexp"}, true);
  const PairArgs a = ReadPair(p, sp, tp);
  const float* grad = p.F32("grad", a.s.rows).data;
  const float* value = stats.OptF32("value", a.s.rows).data;
  const float* slse = stats.OptF32("studentLogsumexp", a.s.rows).data;
  const float* tlse = stats.OptF32("teacherLogsumexp", a.s.rows).data;
  Napi::Float32Array out = OutF32(p, "out", a.s.rows * a.s.vocab);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  result.Set("gradStudent", out);
  float* po = a.s.rows * a.s.vocab > 0 ? out.Data() : nullptr;
  return Run(env, async,
             {sp.Get("data"), tp.Get("data"), p.Get("grad"), stats.Get("value"), stats.Get("studentLogsumexp"),
              stats.Get("teacherLogsumexp"), p.Get("out"), p.Get("abort")},
             [=](const ExecContext& ctx) {
               return divergence_backward(a.s, a.t, a.kind, a.beta, a.temperature, a.kl_cap, grad, value, slse, tlse,
                                          po, ctx);
             },
             result, abort);
}

#undef GEAR_PAIR_FIELDS

void RegisterDivergence(Napi::Env env, Napi::Object exports) {
  exports.Set("divergence", Napi::Function::New(env, Divergence, "divergence"));
  exports.Set("divergenceBackward", Napi::Function::New(env, DivergenceBackward, "divergenceBackward"));
}
GEAR_BINDING(RegisterDivergence);

}  // namespace gear::addon
