// AVX-512 build of the optimizer kernels (see optim_kernels.inc).
#include <cmath>
#include <cstdint>

#include "optim_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
#pragma GCC optimize("fp-contract=off")
namespace gear::optim_detail::avx512 {
static inline float fma32(float a, float b, float c) { return std::fma(a, b, c); }  // one vfmadd
#include "optim_kernels.inc"
}  // namespace gear::optim_detail::avx512
#pragma GCC pop_options
#else
// Not an x86 build: dispatch never selects this ISA; keep the symbol for the table lookup.
namespace gear::optim_detail::avx512 {
const Kernels kKernels = baseline::kKernels;
}  // namespace gear::optim_detail::avx512
#endif
