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
  const PairArgs p = ReadPairArgs(info);
  const int32_t* targets = IsNullish(info[9]) ? nullptr : I32(info[9], "targets", p.s.rows).data;
  if (!IsNullish(info[10]) && !info[10].IsObject()) Throw(env, Code::Option, "out: expected an object, got another value");
  Napi::Object outs = IsNullish(info[10]) ? Napi::Object::New(env) : info[10].As<Napi::Object>();
  const bool async = !IsNullish(info[11]) && Bool(info[11], "async");
  const auto* abort = AbortFlag(info[12]);
  Napi::Object result = Napi::Object::New(env);
  std::vector<Napi::Value> keep{info[0], info[1], info[9], info[12], result};
  auto field = [&](const char* key) {
    Napi::Float32Array a = OutF32(env, outs.Get(key), (std::string("out.") + key).c_str(), p.s.rows);
    result.Set(key, a);
    return a.Data();
  };
  DivergenceOut o;
  o.value = field("value");
  o.student_entropy = field("studentEntropy");
  o.student_lse = field("studentLogsumexp");
  o.teacher_lse = field("teacherLogsumexp");
  if (targets) {
    o.student_logprob = field("studentLogprob");
    o.teacher_logprob = field("teacherLogprob");
  }
  return Run(env, async, keep,
             [=](const ExecContext& ctx) {
               return divergence(p.s, p.t, p.kind, p.beta, p.temperature, p.kl_cap, targets, o, ctx);
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
