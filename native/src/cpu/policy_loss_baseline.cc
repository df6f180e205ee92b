// policyLoss (PPO) kernels for the baseline of every architecture: policy_loss_kernels.inc over this ISA's vector layer,
// in its own namespace.
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "policy_loss_kernels.h"

namespace gear {
namespace baseline {
namespace {
#include "simd_scalar.inc"
#include "policy_loss_kernels.inc"
}  // namespace
}  // namespace baseline
}  // namespace gear

const gear::ppo::PolicyLossKernels gear::ppo::policy_loss_baseline = gear::baseline::kPolicyLossKernels;
