// policyLoss (PPO) kernels for AArch64 NEON: policy_loss_kernels.inc over this ISA's vector layer,
// in its own namespace (no target region: NEON is part of the aarch64 baseline).
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "policy_loss_kernels.h"

#if GEAR_ARM64
namespace gear {
namespace neon {
namespace {
#include "simd_neon.inc"
#include "policy_loss_kernels.inc"
}  // namespace
}  // namespace neon
}  // namespace gear

const gear::ppo::PolicyLossKernels gear::ppo::policy_loss_neon = gear::neon::kPolicyLossKernels;
#endif  // GEAR_ARM64
