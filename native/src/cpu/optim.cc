// Optimizer driver: validation, hyper-parameter -> float32 scalar conversion (as torch does it), the
// fixed work partition; the kernels come from the active ISA's table (optim_kernels.h).
#include "gear/optim.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gear/thread_pool.h"
#include "optim_kernels.h"

// No contraction anywhere in this file: the scalars below follow Python's double arithmetic (the build
// flags say -ffp-contract=off too; this keeps it when the file is compiled on its own).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

// The kernel body, compiled for every instruction set of this architecture (isa_kernels.inc).
#define GEAR_KERNELS "optim_kernels.inc"
#define GEAR_KERNELS_PRELUDE "optim_fma.inc"
#include "isa_kernels.inc"

namespace gear {

using optim_detail::AdamScalars;
using optim_detail::OptimKernels;
using optim_detail::SgdScalars;

namespace {

// Elements per task of an elementwise step: large enough that the pool's per-task cost vanishes,
// small enough that two threads stay balanced on a handful of tensors.
constexpr int64_t kStepBlock = 1 << 15;

Status check_range(const char* what, double x, double lo, double hi, bool hi_open) {
  const bool ok = std::isfinite(x) && x >= lo && (hi_open ? x < hi : x <= hi);
  if (ok) return Status::ok();
  return error(Code::Option, std::string(what) + ": expected a number in [" + number_text(lo, 17) + ", " + number_text(hi, 17) +
                                 (hi_open ? ")" : "]") + ", got " + number_text(x, 17));
}

Status check_nonneg(const char* what, double x) {
  if (std::isfinite(x) && x >= 0) return Status::ok();
  return error(Code::Option, std::string(what) + ": expected a finite number >= 0, got " + number_text(x, 17));
}

// Every non-empty buffer must be present and disjoint from every other one: an aliased gradient or a
// parameter listed twice would make the in-place update order-dependent.
Status check_tensors(const OptimTensor* t, int64_t count, int nbufs, bool need_buf2) {
  if (count < 0) return error(Code::Shape, "params.length: expected >= 0, got " + std::to_string(count));
  if (count > 0 && t == nullptr) return error(Code::Shape, "params: expected an array, got null");
  struct Span { uintptr_t begin, end; int64_t tensor; const char* role; };
  std::vector<Span> spans;
  spans.reserve(static_cast<size_t>(count) * 4);
  static const char* kRole[] = {"params", "grads", "state buffer 0", "state buffer 1", "state buffer 2"};
  for (int64_t i = 0; i < count; ++i) {
    const OptimTensor& x = t[i];
    if (x.n < 0) return error(Code::Shape, "params[" + std::to_string(i) + "].length: expected >= 0, got " + std::to_string(x.n));
    if (x.n == 0) continue;
    const void* ptrs[5] = {x.param, x.grad, x.buf0, x.buf1, x.buf2};
    const int used = 2 + nbufs;
    for (int k = 0; k < used; ++k) {
      if (k == 4 && !need_buf2) continue;
      if (ptrs[k] == nullptr)
        return error(Code::Shape, std::string(kRole[k]) + "[" + std::to_string(i) + "]: expected a buffer of " +
                                      std::to_string(x.n) + " floats, got null");
      const auto b = reinterpret_cast<uintptr_t>(ptrs[k]);
      spans.push_back({b, b + static_cast<uintptr_t>(x.n) * sizeof(float), i, kRole[k]});
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < spans.size(); ++k) {
    if (spans[k].begin < spans[k - 1].end) {
      return error(Code::Shape, std::string("buffers: expected distinct, non-overlapping memory for every tensor, got ") +
                                    spans[k - 1].role + "[" + std::to_string(spans[k - 1].tensor) + "] overlapping " +
                                    spans[k].role + "[" + std::to_string(spans[k].tensor) + "]");
    }
  }
  return Status::ok();
}

struct Task { int64_t tensor, begin, end; };

std::vector<Task> partition(const int64_t* n, int64_t count, int64_t block) {
  std::vector<Task> tasks;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t b = 0; b < n[i]; b += block) tasks.push_back({i, b, std::min(n[i], b + block)});
  return tasks;
}

// Runs fn over the tasks on the pool (or inline when small or when there is no pool). No abort polling:
// callers decide before starting.
template <typename F>
void run_tasks(const ExecContext& ctx, const std::vector<Task>& tasks, int64_t total, F&& fn) {
  const int64_t nt = static_cast<int64_t>(tasks.size());
  if (ctx.pool == nullptr || nt <= 1 || total < kStepBlock) {
    for (int64_t k = 0; k < nt; ++k) fn(tasks[static_cast<size_t>(k)]);
    return;
  }
  ctx.pool->parallel_for(nt, [&](int64_t k, int) { fn(tasks[static_cast<size_t>(k)]); });
}

// Runs fn(tensor, begin, len) over fixed kStepBlock spans of every tensor: the optimizer steps' one pass.
template <typename F>
void for_each_span(const OptimTensor* t, int64_t count, const ExecContext& ctx, F&& fn) {
  std::vector<int64_t> n(static_cast<size_t>(count));
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) {
    n[static_cast<size_t>(i)] = t[i].n;
    total += t[i].n;
  }
  run_tasks(ctx, partition(n.data(), count, kStepBlock), total,
            [&](const Task& w) { fn(t[w.tensor], w.begin, w.end - w.begin); });
}

}  // namespace

Status check_adam(const OptimTensor* t, int64_t count, const AdamHyper& h) {
  Status st;
  if (!(st = check_nonneg("lr", h.lr)).is_ok()) return st;
  if (!(st = check_range("betas[0]", h.beta1, 0.0, 1.0, true)).is_ok()) return st;
  if (!(st = check_range("betas[1]", h.beta2, 0.0, 1.0, true)).is_ok()) return st;
  if (!(st = check_nonneg("eps", h.eps)).is_ok()) return st;
  if (!(st = check_nonneg("weightDecay", h.weight_decay)).is_ok()) return st;
  if (h.step < 1 || h.step > (int64_t(1) << 53))
    return error(Code::State, "step: expected an integer in [1, 2^53], got " + std::to_string(h.step));
  return check_tensors(t, count, 2 + (h.amsgrad ? 1 : 0), h.amsgrad);
}

Status check_sgd(const OptimTensor* t, int64_t count, const SgdHyper& h) {
  Status st;
  if (!(st = check_nonneg("lr", h.lr)).is_ok()) return st;
  if (!(st = check_nonneg("momentum", h.momentum)).is_ok()) return st;
  if (!(st = check_range("dampening", h.dampening, 0.0, 1.0, false)).is_ok()) return st;
  if (!(st = check_nonneg("weightDecay", h.weight_decay)).is_ok()) return st;
  if (h.nesterov && (h.momentum <= 0 || h.dampening != 0))
    return error(Code::Option, "nesterov: expected momentum > 0 and dampening 0, got momentum " + number_text(h.momentum, 17) +
                                   " and dampening " + number_text(h.dampening, 17));
  return check_tensors(t, count, h.momentum != 0 ? 1 : 0, false);
}

Status adam_step(const OptimTensor* t, int64_t count, const AdamHyper& h, const ExecContext& ctx) {
  Status st = check_adam(t, count, h);
  if (!st.is_ok()) return st;
  // Python float arithmetic of torch.optim, then the float32 cast each kernel applies to its scalar.
  const double step = static_cast<double>(h.step);
  const double bc1 = 1.0 - std::pow(h.beta1, step);
  const double bc2 = 1.0 - std::pow(h.beta2, step);
  const double step_size = h.lr / bc1;
  AdamScalars s{};
  s.decay = h.decoupled ? static_cast<float>(1.0 - h.lr * h.weight_decay) : 1.0f;
  s.wd = static_cast<float>(h.weight_decay);
  s.l2 = !h.decoupled && h.weight_decay != 0.0;
  s.beta1 = static_cast<float>(h.beta1);
  s.omb1 = static_cast<float>(1.0 - h.beta1);
  s.beta2 = static_cast<float>(h.beta2);
  s.omb2 = static_cast<float>(1.0 - h.beta2);
  s.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.eps = static_cast<float>(h.eps);
  s.neg_step = static_cast<float>(-step_size);
  s.gsign = h.maximize ? -1.0f : 1.0f;
  s.amsgrad = h.amsgrad;
  const OptimKernels& k = active_kernels();
  for_each_span(t, count, ctx, [&](const OptimTensor& x, int64_t b, int64_t len) {
    k.adam(s, x.param + b, x.grad + b, x.buf0 + b, x.buf1 + b, h.amsgrad ? x.buf2 + b : nullptr, len);
  });
  return Status::ok();
}

Status sgd_step(const OptimTensor* t, int64_t count, const SgdHyper& h, const ExecContext& ctx) {
  Status st = check_sgd(t, count, h);
  if (!st.is_ok()) return st;
  SgdScalars s{};
  s.wd = static_cast<float>(h.weight_decay);
  s.has_wd = h.weight_decay != 0.0;
  s.momentum = static_cast<float>(h.momentum);
  s.omd = static_cast<float>(1.0 - h.dampening);
  s.neg_lr = static_cast<float>(-h.lr);
  s.gsign = h.maximize ? -1.0f : 1.0f;
  s.mom_mode = h.momentum == 0.0 ? 0 : h.first_step ? 1 : 2;
  s.nesterov = h.nesterov;
  const OptimKernels& k = active_kernels();
  for_each_span(t, count, ctx, [&](const OptimTensor& x, int64_t b, int64_t len) {
    k.sgd(s, x.param + b, x.grad + b, s.mom_mode ? x.buf0 + b : nullptr, len);
  });
  return Status::ok();
}

namespace {

Status check_grads(const float* const* g, const int64_t* n, int64_t count, int64_t* total) {
  if (count < 0) return error(Code::Shape, "grads.length: expected >= 0, got " + std::to_string(count));
  *total = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (n[i] < 0) return error(Code::Shape, "grads[" + std::to_string(i) + "].length: expected >= 0, got " + std::to_string(n[i]));
    if (n[i] > 0 && g[i] == nullptr)
      return error(Code::Shape, "grads[" + std::to_string(i) + "]: expected a buffer, got null");
    *total += n[i];
  }
  return Status::ok();
}

double norm_of(const float* const* g, const int64_t* n, int64_t count, int64_t total, const ExecContext& ctx) {
  const auto tasks = partition(n, count, kNormBlock);
  std::vector<double> partial(tasks.size(), 0.0);
  const OptimKernels& k = active_kernels();
  std::vector<Task> index(tasks.size());
  // Each task writes only its own partial; the partials are then added in task order.
  for (size_t j = 0; j < tasks.size(); ++j) index[j] = {static_cast<int64_t>(j), 0, 0};
  run_tasks(ctx, index, total, [&](const Task& w) {
    const Task& b = tasks[static_cast<size_t>(w.tensor)];
    partial[static_cast<size_t>(w.tensor)] = k.sumsq(g[b.tensor] + b.begin, b.end - b.begin);
  });
  double s = 0.0;
  for (double x : partial) s += x;
  return std::sqrt(s);
}

}  // namespace

Status grad_norm(const float* const* g, const int64_t* n, int64_t count, double* norm, const ExecContext& ctx) {
  int64_t total = 0;
  Status st = check_grads(g, n, count, &total);
  if (!st.is_ok()) return st;
  *norm = norm_of(g, n, count, total, ctx);
  return Status::ok();
}

Status clip_grad_norm(float* const* g, const int64_t* n, int64_t count, double max_norm, bool error_if_nonfinite,
                      double* norm, const ExecContext& ctx) {
  if (std::isnan(max_norm) || max_norm < 0)
    return error(Code::Option, "maxNorm: expected a number >= 0, got " + number_text(max_norm, 17));
  int64_t total = 0;
  Status st = check_grads(g, n, count, &total);
  if (!st.is_ok()) return st;
  const double nrm = norm_of(g, n, count, total, ctx);
  *norm = nrm;
  if (error_if_nonfinite && !std::isfinite(nrm))
    return error(Code::NonFinite, "gradient norm: expected a finite total norm, got " + number_text(nrm, 17) +
                                      " (gradients left unchanged)");
  // torch: clip_coef = max_norm / (total_norm + 1e-6) on a float32 tensor is reciprocal() * max_norm.
  const float denom = static_cast<float>(nrm) + static_cast<float>(1e-6);
  const float recip = 1.0f / denom;
  float coef = recip * static_cast<float>(max_norm);
  if (!(coef != coef) && coef > 1.0f) coef = 1.0f;  // torch.clamp(max=1.0); NaN stays NaN
  if (coef == 1.0f) return Status::ok();            // multiplying by 1 changes no bit
  std::vector<Task> tasks;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t b = 0; b < n[i]; b += kStepBlock) tasks.push_back({i, b, std::min(n[i], b + kStepBlock)});
  const OptimKernels& k = active_kernels();
  run_tasks(ctx, tasks, total, [&](const Task& w) { k.scale(g[w.tensor] + w.begin, w.end - w.begin, coef); });
  return Status::ok();
}

}  // namespace gear
