// Optimizer steps and gradient clipping. The parameter and result objects are declared in
// ts/core/addon_types.ts. Steps resolve to { tensors } (the number of parameters updated). Every list is
// re-checked here: count, Float32Array-ness and length of every tensor against its parameter, before
// anything is written. The abort flag is only looked at before a job starts: a step or a clip is never
// left half applied.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "args.h"
#include "invoke.h"
#include "gear/optim.h"
#include "gear/thread_pool.h"
#include "ops.h"

namespace gear::addon {

namespace {

// A list argument's element values, read (any getter runs here) before any pointer is taken from any
// list of the call, so no JS runs between taking a pointer and finishing with it.
struct ListArg {
  std::string what;
  std::vector<Napi::Value> items;
};

ListArg List(const Params& p, const char* name) {
  const Napi::Value v = p.Get(name);
  const std::string what = p.Name(name);
  if (!v.IsArray())
    Throw(v.Env(), Code::DType, what + ": expected an array of Float32Array, got " +
                                    (v.IsTypedArray() ? std::string("a typed array") : std::string("a non-array value")));
  return {what, ListValues(v, what)};
}

Napi::Object StepResult(Napi::Env env, size_t tensors) {
  Napi::Object r = Napi::Object::New(env);
  Put(r, "tensors", static_cast<double>(tensors));
  return r;
}

std::vector<Array<float>> F32s(const Params& p, const ListArg& l, const std::vector<Array<float>>* like) {
  Napi::Env env = p.Env();
  const int64_t count = static_cast<int64_t>(l.items.size());
  if (like != nullptr && count != static_cast<int64_t>(like->size()))
    Throw(env, Code::Shape, l.what + ".length: expected " + std::to_string(like->size()) + " (one per parameter), got " +
                                std::to_string(count));
  std::vector<Array<float>> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const std::string name = l.what + "[" + std::to_string(i) + "]";
    const int64_t len = like ? (*like)[static_cast<size_t>(i)].length : -1;
    out.push_back(p.F32Item(l.items[static_cast<size_t>(i)], name, len));
  }
  return out;
}

Status Aborted() { return error(Code::Aborted, "aborted: the AbortSignal fired before the step started"); }

}  // namespace

static Napi::Value AdamStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"params", "grads", "expAvg", "expAvgSq", "maxExpAvgSq", "lr", "beta1", "beta2", "eps",
                        "weightDecay", "step", "decoupled", "amsgrad", "maximize", "async", "abort"});
  const bool amsgrad = p.Bool("amsgrad");
  // Every list's elements are read (getters run) before any pointer is taken from any list.
  const ListArg lp = List(p, "params"), lg = List(p, "grads"), lm = List(p, "expAvg"), lv = List(p, "expAvgSq"),
                lx = amsgrad ? List(p, "maxExpAvgSq") : ListArg{};
  auto params = F32s(p, lp, nullptr);
  auto grads = F32s(p, lg, &params);
  auto m = F32s(p, lm, &params);
  auto v = F32s(p, lv, &params);
  std::vector<Array<float>> vmax;
  if (amsgrad) vmax = F32s(p, lx, &params);
  AdamHyper h;
  h.lr = p.Number("lr");
  h.beta1 = p.Number("beta1");
  h.beta2 = p.Number("beta2");
  h.eps = p.Number("eps");
  h.weight_decay = p.Number("weightDecay");
  h.step = p.Int("step", 1, int64_t(1) << 53);
  h.decoupled = p.Bool("decoupled");
  h.amsgrad = amsgrad;
  h.maximize = p.Bool("maximize");
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  std::vector<OptimTensor> t(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    t[i] = {params[i].data, grads[i].data, m[i].data, v[i].data, amsgrad ? vmax[i].data : nullptr, params[i].length};
  }
  // Checked here too, so a bad call throws synchronously even in async mode.
  Check(env, check_adam(t.data(), static_cast<int64_t>(t.size()), h));
  const size_t count = t.size();
  return Run(p, async,
             [t = std::move(t), h, abort](const ExecContext& ctx) {
               if (abort && abort->load() != 0) return Aborted();
               return adam_step(t.data(), static_cast<int64_t>(t.size()), h, ExecContext{ctx.pool, nullptr});
             },
             StepResult(env, count), nullptr);
}

static Napi::Value SgdStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"params", "grads", "momentumBuffer", "lr", "momentum", "dampening", "weightDecay", "nesterov",
                        "maximize", "firstStep", "async", "abort"});
  SgdHyper h;
  h.lr = p.Number("lr");
  h.momentum = p.Number("momentum");
  h.dampening = p.Number("dampening");
  h.weight_decay = p.Number("weightDecay");
  h.nesterov = p.Bool("nesterov");
  h.maximize = p.Bool("maximize");
  h.first_step = p.Bool("firstStep");
  const ListArg lp = List(p, "params"), lg = List(p, "grads"),
                lb = h.momentum != 0 ? List(p, "momentumBuffer") : ListArg{};
  auto params = F32s(p, lp, nullptr);
  auto grads = F32s(p, lg, &params);
  std::vector<Array<float>> buf;
  if (h.momentum != 0) buf = F32s(p, lb, &params);
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  std::vector<OptimTensor> t(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    t[i] = {params[i].data, grads[i].data, buf.empty() ? nullptr : buf[i].data, nullptr, nullptr, params[i].length};
  }
  Check(env, check_sgd(t.data(), static_cast<int64_t>(t.size()), h));
  const size_t count = t.size();
  return Run(p, async,
             [t = std::move(t), h, abort](const ExecContext& ctx) {
               if (abort && abort->load() != 0) return Aborted();
               return sgd_step(t.data(), static_cast<int64_t>(t.size()), h, ExecContext{ctx.pool, nullptr});
             },
             StepResult(env, count), nullptr);
}

static Napi::Value GradNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"grads"});
  auto grads = F32s(p, List(p, "grads"), nullptr);
  std::vector<const float*> g;
  std::vector<int64_t> n;
  for (auto& a : grads) g.push_back(a.data), n.push_back(a.length);
  double norm = 0;
  Check(env, grad_norm(g.data(), n.data(), static_cast<int64_t>(g.size()), &norm, ExecContext{&global_pool(), nullptr}));
  Napi::Object r = Napi::Object::New(env);
  Put(r, "norm", norm);
  return r;
}

static Napi::Value ClipGradNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"grads", "maxNorm", "errorIfNonfinite", "out", "async", "abort"});
  const ListArg lg = List(p, "grads");
  auto grads = F32s(p, lg, nullptr);
  const double max_norm = p.Number("maxNorm");
  const bool err = p.Bool("errorIfNonfinite");
  // The norm goes to `out` (a caller's Float64Array of 1) when given, else to a cell of the job's own.
  auto cell = std::make_shared<double>(NAN);
  const auto given = p.Has("out") ? p.F64("out", 1) : Array<double>{};
  double* o = given.data != nullptr ? given.data : cell.get();
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  std::vector<float*> g;
  std::vector<int64_t> n;
  for (auto& a : grads) g.push_back(a.data), n.push_back(a.length);
  // Overlapping gradients would be scaled twice.
  {
    std::vector<std::pair<uintptr_t, uintptr_t>> spans;
    for (size_t i = 0; i < grads.size(); ++i)
      if (n[i] > 0) spans.push_back({reinterpret_cast<uintptr_t>(g[i]), reinterpret_cast<uintptr_t>(g[i] + n[i])});
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k)
      if (spans[k].first < spans[k - 1].second)
        Throw(env, Code::Shape, "grads: expected non-overlapping tensors, got two views sharing memory");
  }
  if (std::isnan(max_norm) || max_norm < 0)
    Throw(env, Code::Option, "maxNorm: expected a number >= 0, got " + std::to_string(max_norm));
  return Run(p, async,
             [g = std::move(g), n = std::move(n), max_norm, err, o, cell, abort](const ExecContext& ctx) {
               if (abort && abort->load() != 0) return Aborted();
               return clip_grad_norm(g.data(), n.data(), static_cast<int64_t>(g.size()), max_norm, err, o,
                                     ExecContext{ctx.pool, nullptr});
             },
             Napi::Object::New(env), nullptr, [o, cell](Napi::Object r) { Put(r, "norm", *o); });
}

void RegisterOptim(Napi::Env env, Napi::Object exports) {
  exports.Set("adamStep", Napi::Function::New(env, AdamStep, "adamStep"));
  exports.Set("sgdStep", Napi::Function::New(env, SgdStep, "sgdStep"));
  exports.Set("gradNorm", Napi::Function::New(env, GradNorm, "gradNorm"));
  exports.Set("clipGradNorm", Napi::Function::New(env, ClipGradNorm, "clipGradNorm"));
}
GEAR_BINDING(RegisterOptim);

}  // namespace gear::addon
