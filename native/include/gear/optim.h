// Optimizer steps and gradient-norm clipping over many float32 tensors, one pass over p/g/m/v, with
// PyTorch 1.13's single-tensor (foreach=False) arithmetic reproduced to the bit: every hyper-parameter is
// turned into the float32 scalar torch passes to its kernels (bias corrections in double, as Python
// computes them), and each fused multiply-add happens exactly where torch's CPU kernels fuse one
// (`add_(x, alpha)`, `addcmul_`), and nowhere else.
#pragma once
#include <cstdint>

#include "gear/types.h"

namespace gear {

// One parameter tensor and its companions, all of length n. `grad` is read only; `buf0..buf2` are
// optimizer state: Adam(W) exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only, else null); SGD
// momentum_buffer in buf0 (null without momentum).
struct OptimTensor {
  float* param = nullptr;
  const float* grad = nullptr;
  float* buf0 = nullptr;
  float* buf1 = nullptr;
  float* buf2 = nullptr;
  int64_t n = 0;
};

struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t step = 1;         // the step being taken (1 for the first)
  bool decoupled = true;    // true: AdamW (p *= 1 - lr*wd); false: Adam (g += wd*p)
  bool amsgrad = false;
  bool maximize = false;
};

struct SgdHyper {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
  bool first_step = true;   // momentum buffer is initialised to the gradient on the first step
};

// Checks hyper-parameters, lengths, non-null buffers and that no two buffers overlap. Nothing is written.
Status check_adam(const OptimTensor* t, int64_t count, const AdamHyper& h);
Status check_sgd(const OptimTensor* t, int64_t count, const SgdHyper& h);

// Validate, then update every tensor in place. Elementwise, so results are the same for any thread
// count and instruction set. ctx.abort is ignored: a step is never left half done.
Status adam_step(const OptimTensor* t, int64_t count, const AdamHyper& h, const ExecContext& ctx);
Status sgd_step(const OptimTensor* t, int64_t count, const SgdHyper& h, const ExecContext& ctx);

// Total L2 norm over all tensors. Each tensor is cut into fixed blocks of kNormBlock elements; a block's
// sum of squares is accumulated in float64 over 8 fixed lanes, and the block partials are added in
// tensor/block order, so the result never depends on the thread count or instruction set.
constexpr int64_t kNormBlock = 1 << 16;
Status grad_norm(const float* const* g, const int64_t* n, int64_t count, double* norm, const ExecContext& ctx);

// torch.nn.utils.clip_grad_norm_: norm as above; coef = float32(max_norm) * (1 / (float32(norm) + 1e-6f))
// in float32 (torch's tensor arithmetic), clamped to <= 1, then every gradient is multiplied by it.
// A non-finite norm with error_if_nonfinite returns NonFinite and leaves the gradients untouched;
// without it torch's arithmetic proceeds (an infinite norm zeroes finite gradients, NaN poisons all).
Status clip_grad_norm(float* const* g, const int64_t* n, int64_t count, double max_norm, bool error_if_nonfinite,
                      double* norm, const ExecContext& ctx);

}  // namespace gear
