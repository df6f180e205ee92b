// Optimizer steps and gradient clipping. Signatures (positional, as ts/optim calls them):
//   adamStep(params: Float32Array[], grads: Float32Array[], expAvg: Float32Array[], expAvgSq: Float32Array[],
//            maxExpAvgSq: Float32Array[] | null, lr, beta1, beta2, eps, weightDecay, step: int >= 1,
//            decoupled: bool, amsgrad: bool, maximize: bool, async: bool, abort: Int32Array | null)
//   sgdStep(params, grads, momentumBuffer: Float32Array[] | null, lr, momentum, dampening, weightDecay,
//           nesterov: bool, maximize: bool, firstStep: bool, async, abort)
//   gradNorm(grads: Float32Array[]) -> number
//   clipGradNorm(grads, maxNorm, errorIfNonfinite: bool, out: Float64Array(1), async, abort) -> out
// Steps return `params` (or a Promise of it). Every list is re-checked here: count, Float32Array-ness and
// length of every tensor against its parameter, before anything is written. The abort flag is only
// looked at before a job starts: a step or a clip is never left half applied.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "args.h"
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

ListArg List(const Napi::Value& v, const std::string& what) {
  if (!v.IsArray())
    Throw(v.Env(), Code::DType, what + ": expected an array of Float32Array, got " +
                                    (v.IsTypedArray() ? std::string("a typed array") : std::string("a non-array value")));
  return {what, ListValues(v, what)};
}

std::vector<Array<float>> F32s(Napi::Env env, const ListArg& l, const std::vector<Array<float>>* like) {
  const int64_t count = static_cast<int64_t>(l.items.size());
  if (like != nullptr && count != static_cast<int64_t>(like->size()))
    Throw(env, Code::Shape, l.what + ".length: expected " + std::to_string(like->size()) + " (one per parameter), got " +
                                std::to_string(count));
  std::vector<Array<float>> out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const std::string name = l.what + "[" + std::to_string(i) + "]";
    const int64_t len = like ? (*like)[static_cast<size_t>(i)].length : -1;
    out.push_back(F32(l.items[static_cast<size_t>(i)], name.c_str(), len));
  }
  return out;
}

void Keep(std::vector<Napi::Value>& keep, const std::vector<Array<float>>& list) {
  for (const auto& a : list) keep.push_back(a.value);
}

const std::atomic<int32_t>* StartFlag(const Napi::Value& v) { return AbortFlag(v); }

Status Aborted() { return error(Code::Aborted, "aborted: the AbortSignal fired before the step started"); }

}  // namespace

static Napi::Value AdamStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const bool amsgrad = Bool(info[12], "amsgrad");
  const ListArg lp = List(info[0], "params"), lg = List(info[1], "grads"), lm = List(info[2], "expAvg"),
                lv = List(info[3], "expAvgSq"), lx = amsgrad ? List(info[4], "maxExpAvgSq") : ListArg{};
  auto params = F32s(env, lp, nullptr);
  auto grads = F32s(env, lg, &params);
  auto m = F32s(env, lm, &params);
  auto v = F32s(env, lv, &params);
  std::vector<Array<float>> vmax;
  if (amsgrad) vmax = F32s(env, lx, &params);
  AdamHyper h;
  h.lr = Number(info[5], "lr");
  h.beta1 = Number(info[6], "betas[0]");
  h.beta2 = Number(info[7], "betas[1]");
  h.eps = Number(info[8], "eps");
  h.weight_decay = Number(info[9], "weightDecay");
  h.step = Int(info[10], "step", 1, int64_t(1) << 53);
  h.decoupled = Bool(info[11], "decoupled");
  h.amsgrad = amsgrad;
  h.maximize = Bool(info[13], "maximize");
  const bool async = !IsNullish(info[14]) && Bool(info[14], "async");
  const auto* abort = StartFlag(info[15]);
  std::vector<OptimTensor> t(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    t[i] = {params[i].data, grads[i].data, m[i].data, v[i].data, amsgrad ? vmax[i].data : nullptr, params[i].length};
  }
  // Checked here too, so a bad call throws synchronously even in async mode.
  Check(env, check_adam(t.data(), static_cast<int64_t>(t.size()), h));
  std::vector<Napi::Value> keep{info[0], info[1], info[2], info[3], info[4], info[15]};
  Keep(keep, params), Keep(keep, grads), Keep(keep, m), Keep(keep, v), Keep(keep, vmax);
  return Run(env, async, std::move(keep),
             [t = std::move(t), h, abort](const ExecContext& ctx) {
               if (abort && abort->load() != 0) return Aborted();
               return adam_step(t.data(), static_cast<int64_t>(t.size()), h, ExecContext{ctx.pool, nullptr});
             },
             info[0]);
}

static Napi::Value SgdStep(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  SgdHyper h;
  h.lr = Number(info[3], "lr");
  h.momentum = Number(info[4], "momentum");
  h.dampening = Number(info[5], "dampening");
  h.weight_decay = Number(info[6], "weightDecay");
  h.nesterov = Bool(info[7], "nesterov");
  h.maximize = Bool(info[8], "maximize");
  h.first_step = Bool(info[9], "firstStep");
  const ListArg lp = List(info[0], "params"), lg = List(info[1], "grads"),
                lb = h.momentum != 0 ? List(info[2], "momentumBuffer") : ListArg{};
  auto params = F32s(env, lp, nullptr);
  auto grads = F32s(env, lg, &params);
  std::vector<Array<float>> buf;
  if (h.momentum != 0) buf = F32s(env, lb, &params);
  const bool async = !IsNullish(info[10]) && Bool(info[10], "async");
  const auto* abort = StartFlag(info[11]);
  std::vector<OptimTensor> t(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    t[i] = {params[i].data, grads[i].data, buf.empty() ? nullptr : buf[i].data, nullptr, nullptr, params[i].length};
  }
  Check(env, check_sgd(t.data(), static_cast<int64_t>(t.size()), h));
  std::vector<Napi::Value> keep{info[0], info[1], info[2], info[11]};
  Keep(keep, params), Keep(keep, grads), Keep(keep, buf);
  return Run(env, async, std::move(keep),
             [t = std::move(t), h, abort](const ExecContext& ctx) {
               if (abort && abort->load() != 0) return Aborted();
               return sgd_step(t.data(), static_cast<int64_t>(t.size()), h, ExecContext{ctx.pool, nullptr});
             },
             info[0]);
}

static Napi::Value GradNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto grads = F32s(env, List(info[0], "grads"), nullptr);
  std::vector<const float*> g;
  std::vector<int64_t> n;
  for (auto& a : grads) g.push_back(a.data), n.push_back(a.length);
  double norm = 0;
  Check(env, grad_norm(g.data(), n.data(), static_cast<int64_t>(g.size()), &norm, ExecContext{&global_pool(), nullptr}));
  return Napi::Number::New(env, norm);
}

static Napi::Value ClipGradNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto grads = F32s(env, List(info[0], "grads"), nullptr);
  const double max_norm = Number(info[1], "maxNorm");
  const bool err = Bool(info[2], "errorIfNonfinite");
  auto out = F64(info[3], "out", 1);
  const bool async = !IsNullish(info[4]) && Bool(info[4], "async");
  const auto* abort = StartFlag(info[5]);
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
  double* o = out.data;
  std::vector<Napi::Value> keep{info[0], info[3], info[5]};
  Keep(keep, grads);
  return Run(env, async, std::move(keep),
             [g = std::move(g), n = std::move(n), max_norm, err, o, abort](const ExecContext& ctx) {
               if (abort && abort->load() != 0) return Aborted();
               return clip_grad_norm(g.data(), n.data(), static_cast<int64_t>(g.size()), max_norm, err, o,
                                     ExecContext{ctx.pool, nullptr});
             },
             out.value);
}

void RegisterOptim(Napi::Env env, Napi::Object exports) {
  exports.Set("adamStep", Napi::Function::New(env, AdamStep, "adamStep"));
  exports.Set("sgdStep", Napi::Function::New(env, SgdStep, "sgdStep"));
  exports.Set("gradNorm", Napi::Function::New(env, GradNorm, "gradNorm"));
  exports.Set("clipGradNorm", Napi::Function::New(env, ClipGradNorm, "clipGradNorm"));
}

}  // namespace gear::addon
