// divergence / divergenceBackward. Positional signatures (validated first by ts/ops/divergence.ts,
// re-checked here and in the kernels):
//   divergence(sData, tData, rows, vocab, dtype, kind 0..2, beta, temperature, klCap, targets|null,
//              out: { value?, studentEntropy?, studentLogsumexp?, teacherLogsumexp?, studentLogprob?,
//                     teacherLogprob? }|null, async, abort|null) -> Divergence object
//   divergenceBackward(sData, tData, rows, vocab, dtype, kind, beta, temperature, klCap, grad,
//              value|null, studentLogsumexp|null, teacherLogsumexp|null, out|null, async, abort|null)
//              -> Float32Array (rows * vocab)
#include <string>
#include <vector>

#include "args.h"
#include "gear/divergence.h"
#include "logits_args.h"
#include "ops.h"

namespace gear::addon {

// Arguments 0-8, shared by the forward and the backward: student, teacher, rows, vocab, dtype, kind,
// beta, temperature, klCap.
struct PairArgs {
  LogitsView s, t;
  DivKind kind;
  double beta, temperature, kl_cap;
};

static PairArgs ReadPairArgs(const Napi::CallbackInfo& info) {
  PairArgs a;
  a.s = ReadLogits(info[0], info[2], info[3], info[4], "student");
  a.t = ReadLogits(info[1], info[2], info[3], info[4], "teacher");
  a.kind = static_cast<DivKind>(Int(info[5], "kind", 0, 2));
  a.beta = Number(info[6], "beta");
  a.temperature = Number(info[7], "temperature");
  a.kl_cap = Number(info[8], "klCap");
  return a;
}

static Napi::Value Divergence(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  // The `out` object's fields first: its getters run before any pointer is taken.
  if (!IsNullish(info[10]) && !info[10].IsObject()) Throw(env, Code::Option, "out: expected an object, got another value");
  static const char* const kKeys[6] = {"value", "studentEntropy", "studentLogsumexp", "teacherLogsumexp",
                                       "studentLogprob", "teacherLogprob"};
  Napi::Value given[6] = {env.Undefined(), env.Undefined(), env.Undefined(), env.Undefined(), env.Undefined(),
                          env.Undefined()};
  if (!IsNullish(info[10])) {
    Napi::Object outs = info[10].As<Napi::Object>();
    for (int k = 0; k < 6; ++k) given[k] = outs.Get(kKeys[k]);
  }
  const PairArgs p = ReadPairArgs(info);
  const auto tg = IsNullish(info[9]) ? Array<int32_t>{} : I32Copy(info[9], "targets", p.s.rows);
  const bool async = !IsNullish(info[11]) && Bool(info[11], "async");
  const auto* abort = AbortFlag(info[12]);
  Napi::Object result = Napi::Object::New(env);
  std::vector<Napi::Value> keep{info[0], info[1], info[9], info[12], result};
  auto field = [&](int k) {
    Napi::Float32Array a = OutF32(env, given[k], (std::string("out.") + kKeys[k]).c_str(), p.s.rows);
    result.Set(kKeys[k], a);
    return a.Data();
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
  return Run(env, async, keep,
             [=](const ExecContext& ctx) {
               return divergence(p.s, p.t, p.kind, p.beta, p.temperature, p.kl_cap, tg.data, o, ctx);
             },
             result, abort);
}

static Napi::Value DivergenceBackward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const PairArgs p = ReadPairArgs(info);
  const float* grad = F32(info[9], "grad", p.s.rows).data;
  const float* value = OptF32(info[10], "stats.value", p.s.rows);
  const float* slse = OptF32(info[11], "stats.studentLogsumexp", p.s.rows);
  const float* tlse = OptF32(info[12], "stats.teacherLogsumexp", p.s.rows);
  Napi::Float32Array out = OutF32(env, info[13], "out", p.s.rows * p.s.vocab);
  const bool async = !IsNullish(info[14]) && Bool(info[14], "async");
  const auto* abort = AbortFlag(info[15]);
  float* po = p.s.rows * p.s.vocab > 0 ? out.Data() : nullptr;
  return Run(env, async, {info[0], info[1], info[9], info[10], info[11], info[12], out, info[15]},
             [=](const ExecContext& ctx) {
               return divergence_backward(p.s, p.t, p.kind, p.beta, p.temperature, p.kl_cap, grad, value, slse, tlse,
                                          po, ctx);
             },
             out, abort);
}

void RegisterDivergence(Napi::Env env, Napi::Object exports) {
  exports.Set("divergence", Napi::Function::New(env, Divergence, "divergence"));
  exports.Set("divergenceBackward", Napi::Function::New(env, DivergenceBackward, "divergenceBackward"));
}

}  // namespace gear::addon
