// AVX-512 build of the optimizer kernels (see optim_kernels.inc).
#include <cmath>
#include <cstdint>

#include "optim_internal.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
#pragma GCC optimize("fp-contract=off")
namespace gear::optim_detail::avx512 {
#include "optim_kernels.inc"
}  // namespace gear::optim_detail::avx512
#pragma GCC pop_options
