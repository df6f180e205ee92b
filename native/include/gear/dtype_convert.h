// Scalar conversions of the 16-bit logit dtypes to float32 (exact), shared by the CPU kernels and the
// argument checks. static inline: each translation unit keeps a private copy compiled for its own
// baseline target (include it outside any ISA target region).
#pragma once
#include <cstdint>
#include <cstring>

#include "gear/types.h"

namespace gear {
namespace kern {

static inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half -> float, exact (subnormals, infinities and NaN included).
static inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal half: normalise
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Element i of a row of dtype DT (0 float32, 1 bfloat16, 2 float16) as float.
template <int DT>
static inline float to_f32(const void* p, int64_t i) {
  if (DT == 0) return static_cast<const float*>(p)[i];
  if (DT == 1) return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

static inline float to_f32(DType dt, const void* p, int64_t i) {
  switch (dt) {
    case DType::F32: return to_f32<0>(p, i);
    case DType::BF16: return to_f32<1>(p, i);
    default: return to_f32<2>(p, i);
  }
}

}  // namespace kern
}  // namespace gear
