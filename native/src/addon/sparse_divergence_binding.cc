// sparseDivergence / sparseDivergenceBackward. The parameter and result objects are declared in
// ts/core/addon_types.ts; ts/ops/sparse_divergence.ts validates first. Lengths are re-checked here (ids and
// log-probs of n * k per side); the kernel only compares ids, never indexes memory with them.
#include <string>

#include "args.h"
#include "invoke.h"
#include "gear/sparse_divergence.h"
#include "ops.h"

namespace gear::addon {

namespace {
#define GEAR_SPARSE_FIELDS "student", "teacher", "n", "kind", "beta", "support", "tailClamp", "vocab", "klCap"

struct SparseArgs {
  SparseTopk s, t;
  int64_t n = 0;
  SparseDivergenceOptions opt;
};

SparseTopk ReadSide(const Params& sp, int64_t n) {
  SparseTopk side;
  side.k = sp.Int("k", 1, int64_t{1} << 31);
  if (n > 0 && side.k > kMaxSafeInt / n) Throw(sp.Env(), Code::Shape, sp.Name("k") + ": expected n * k to be a safe integer");
  side.ids = sp.I32("ids", n * side.k).data;
  side.logprobs = sp.F32("logprobs", n * side.k).data;
  return side;
}

SparseArgs ReadArgs(const Params& p, const Params& sp, const Params& tp) {
  SparseArgs a;
  a.n = p.Int("n", 0, kMaxSafeInt);
  a.opt.kind = static_cast<DivKind>(p.Int("kind", 0, 2));
  a.opt.beta = p.Number("beta");
  a.opt.support = static_cast<SparseSupport>(p.Int("support", 0, 1));
  a.opt.tail_clamp = p.Number("tailClamp");
  a.opt.vocab = p.Int("vocab", 0, int64_t{1} << 31);
  a.opt.kl_cap = p.Number("klCap");
  a.s = ReadSide(sp, a.n);
  a.t = ReadSide(tp, a.n);
  return a;
}

Params SideParams(const Params& p, const char* name) { return p.Object(name, {"ids", "logprobs", "k"}); }
}  // namespace

static Napi::Value SparseDivergence(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {GEAR_SPARSE_FIELDS, "out", "async", "abort"});
  const Params sp = SideParams(p, "student"), tp = SideParams(p, "teacher");
  const Params outs = p.Object("out", {"value", "studentTail", "teacherTail", "studentSharedMass", "teacherSharedMass",
                                       "shared", "entropyLower", "entropyUpper"}, true);
  const SparseArgs a = ReadArgs(p, sp, tp);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  const size_t n = static_cast<size_t>(a.n);
  // Each output is the caller's (checked: n long; memory of its own, see Run) or a new array.
  auto f32 = [&](const char* key) {
    Napi::Float32Array arr = OutF32(outs, key, a.n);
    Put(result, key, arr);
    return n > 0 ? arr.Data() : nullptr;
  };
  SparseDivergenceOut o;
  o.value = f32("value");
  o.student_tail = f32("studentTail");
  o.teacher_tail = f32("teacherTail");
  o.student_shared_mass = f32("studentSharedMass");
  o.teacher_shared_mass = f32("teacherSharedMass");
  o.entropy_lower = f32("entropyLower");
  o.entropy_upper = f32("entropyUpper");
  Napi::Int32Array shared = OutI32(outs, "shared", a.n);
  Put(result, "shared", shared);
  o.shared = n > 0 ? shared.Data() : nullptr;
  return Run(p, async,
             [=](const ExecContext& ctx) { return sparse_divergence(a.s, a.t, a.n, a.opt, o, ctx); }, result, abort);
}

static Napi::Value SparseDivergenceBackward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {GEAR_SPARSE_FIELDS, "grad", "async", "abort"});
  const Params sp = SideParams(p, "student"), tp = SideParams(p, "teacher");
  const SparseArgs a = ReadArgs(p, sp, tp);
  const float* grad = p.F32("grad", a.n).data;
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Float32Array out = Napi::Float32Array::New(env, static_cast<size_t>(a.n * a.s.k));
  Napi::Object result = Napi::Object::New(env);
  Put(result, "gradStudent", out);
  float* po = a.n > 0 ? out.Data() : nullptr;
  return Run(p, async,
             [=](const ExecContext& ctx) { return sparse_divergence_backward(a.s, a.t, a.n, a.opt, grad, po, ctx); },
             result, abort);
}

#undef GEAR_SPARSE_FIELDS

void RegisterSparseDivergence(Napi::Env env, Napi::Object exports) {
  exports.Set("sparseDivergence", Napi::Function::New(env, SparseDivergence, "sparseDivergence"));
  exports.Set("sparseDivergenceBackward", Napi::Function::New(env, SparseDivergenceBackward, "sparseDivergenceBackward"));
}
GEAR_BINDING(RegisterSparseDivergence);

}  // namespace gear::addon
