// Internal to the optimizers (optim.cc): the scalars the driver passes to the kernels and the kernel
// table optim_kernels.inc fills once per instruction set (isa_kernels.inc).
#pragma once
#include <cstdint>

namespace gear::optim_detail {

// The float32 scalars torch's kernels receive, already rounded from the double hyper-parameters.
struct AdamScalars {
  float decay;         // 1 - lr*wd (AdamW; 1 for Adam)
  float wd;            // Adam L2 term: g + wd*p
  float beta1, omb1;   // beta1, 1 - beta1
  float beta2, omb2;   // beta2, 1 - beta2
  float bc2_sqrt;      // sqrt(1 - beta2^step)
  float eps;
  float neg_step;      // -lr / (1 - beta1^step)
  float gsign;         // -1 when maximizing (exact negation)
  bool l2;             // Adam with weight_decay != 0
  bool amsgrad;
};

struct SgdScalars {
  float wd;
  float momentum;
  float omd;           // 1 - dampening
  float neg_lr;
  float gsign;
  bool has_wd;
  int mom_mode;        // 0 no momentum, 1 first step (buf = d_p), 2 buf = buf*momentum + (1-dampening)*d_p
  bool nesterov;
};

struct OptimKernels {
  void (*adam)(const AdamScalars& s, float* p, const float* g, float* m, float* v, float* vmax, int64_t n);
  void (*sgd)(const SgdScalars& s, float* p, const float* g, float* buf, int64_t n);
  double (*sumsq)(const float* g, int64_t n);
  void (*scale)(float* g, int64_t n, float c);
};


}  // namespace gear::optim_detail
