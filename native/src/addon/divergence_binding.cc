// divergence / divergenceBackward. The parameter and result objects are declared in
// ts/core/addon_types.ts; ts/ops/divergence.ts checks types, shapes and options, this layer what memory
// safety needs, and the public entries (core/backend.cc) the values (student and teacher agree in shape
// and dtype: check_pair). Student and teacher are both host arrays or both device tensors of one device.
#include <string>
#include <vector>

#include "args.h"
#include "invoke.h"
#include "gear/backend.h"
#include "logits_args.h"
#include "ops.h"

namespace gear::addon {

namespace {
// The properties shared by the forward and the backward.
#define GEAR_PAIR_FIELDS "student", "teacher", "kind", "beta", "temperature", "klCap", "device"

struct PairArgs {
  LogitsView s, t;
  int device;
  DivKind kind;
  double beta, temperature, kl_cap;
};

PairArgs ReadPair(const Params& p, const Params& sp, const Params& tp, const Claims& claims) {
  PairArgs a;
  int sdev, tdev;
  a.s = ReadLogits(sp, claims, &sdev);
  a.t = ReadLogits(tp, claims, &tdev);
  a.device = CallDevice(p, {{"student", sdev}, {"teacher", tdev}});
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
  const Claims claims = std::make_shared<TensorClaims>();
  const PairArgs a = ReadPair(p, sp, tp, claims);
  const auto tg = p.OptI32Copy("targets", a.s.rows);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  auto field = [&](int k) {
    Napi::Float32Array arr = OutF32(out, kKeys[k], a.s.rows);
    Put(result, kKeys[k], arr);
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
  return Run(p, async,
             [=](const ExecContext& c) {
               (void)claims;  // held until the work has ended
               return divergence(a.s, a.t, a.kind, a.beta, a.temperature, a.kl_cap, tg.data, o, OnDevice(c, a.device, false));
             },
             result, abort);
}

static Napi::Value DivergenceBackward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {GEAR_PAIR_FIELDS, "grad", "stats", "out", "async", "abort"});
  const Params sp = LogitsParams(p, "student"), tp = LogitsParams(p, "teacher");
  const Params stats = p.Object("stats", {"value", "studentLogsumexp", "teacherLogsumexp"}, true);
  const Params op = OutTensorParams(p);
  const Claims claims = std::make_shared<TensorClaims>();
  const PairArgs a = ReadPair(p, sp, tp, claims);
  const float* grad = p.F32("grad", a.s.rows).data;
  const float* value = stats.OptF32("value", a.s.rows).data;
  const float* slse = stats.OptF32("studentLogsumexp", a.s.rows).data;
  const float* tlse = stats.OptF32("teacherLogsumexp", a.s.rows).data;
  Napi::Value grad_value;
  const GradOut go = ReadGradOut(p, sp, op, a.s, a.s.on_device ? a.device : -1, a.device, false, claims, &grad_value);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  Put(result, "gradStudent", grad_value);
  auto made = std::make_shared<NewTensor>();
  made->device = a.device, made->rows = a.s.rows, made->vocab = a.s.vocab;
  return Run(p, async,
             [=](const ExecContext& c) {
               (void)claims;
               float* o = go.host != nullptr ? go.host : go.device_ptr;
               if (go.make) GEAR_TRY(made->alloc(&o));
               return divergence_backward(a.s, a.t, a.kind, a.beta, a.temperature, a.kl_cap, grad, value, slse, tlse, o,
                                          OnDevice(c, a.device, go.device_ptr != nullptr || go.make));
             },
             result, abort, [=](Napi::Object r) {
               if (go.make) Put(r, "gradStudent", AdoptTensor(r.Env(), *made));
             });
}

#undef GEAR_PAIR_FIELDS

void RegisterDivergence(Napi::Env env, Napi::Object exports) {
  exports.Set("divergence", Napi::Function::New(env, Divergence, "divergence"));
  exports.Set("divergenceBackward", Napi::Function::New(env, DivergenceBackward, "divergenceBackward"));
}
GEAR_BINDING(RegisterDivergence);

}  // namespace gear::addon
