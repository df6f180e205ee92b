// policyLoss (PPO) kernels for AVX-512 (F/BW/VL/DQ): policy_loss_kernels.inc over this ISA's vector layer,
// in its own target region and namespace (nothing here leaks into other paths).
#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "policy_loss_kernels.h"

#if GEAR_X86
GEAR_AVX512_DIAG_BEGIN
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace gear {
namespace avx512 {
namespace {
#include "simd_avx512.inc"
#include "policy_loss_kernels.inc"
}  // namespace
}  // namespace avx512
}  // namespace gear
GEAR_TARGET_END
GEAR_AVX512_DIAG_END

const gear::ppo::PolicyLossKernels gear::ppo::policy_loss_avx512 = gear::avx512::kPolicyLossKernels;
#endif  // GEAR_X86
