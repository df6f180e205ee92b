// Architecture guards and per-ISA target regions that both g++ and clang honour.
//
//   GEAR_X86 / GEAR_ARM64   1 when building for x86-64 / aarch64 (else 0).
//   GEAR_TARGET_BEGIN(f) ... GEAR_TARGET_END
//       compiles the functions in between for the target features `f` (a string literal such as
//       GEAR_AVX2_FEATURES) while the rest of the file stays baseline. g++ reads `#pragma GCC target`;
//       clang ignores that pragma and needs `#pragma clang attribute push(target)` instead, which
//       applies to every function declared in the region: function templates and their instantiations,
//       and lambdas' call operators too (clang's IR is checked by test/platform/clang.test.ts).
//       Put each region's functions in a namespace named after its ISA (avx2, avx512): that test
//       requires them to carry the ISA's features, and shared (mergeable) functions to carry none.
//
// Include the intrinsics headers (through this header) before a region opens, never inside one.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#define GEAR_X86 1
#else
#define GEAR_X86 0
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define GEAR_ARM64 1
#else
#define GEAR_ARM64 0
#endif

#if GEAR_X86
#include <immintrin.h>
#endif
#if GEAR_ARM64
#include <arm_neon.h>
#endif

// A read prefetch hint for the portable (scalar / NEON) layers; never faults.
#if defined(__GNUC__) || defined(__clang__)
#define GEAR_PREFETCH(p) __builtin_prefetch(p)
#elif defined(_MSC_VER) && GEAR_X86
#define GEAR_PREFETCH(p) _mm_prefetch(static_cast<const char*>(static_cast<const void*>(p)), _MM_HINT_T0)
#elif defined(_MSC_VER) && GEAR_ARM64
#define GEAR_PREFETCH(p) __prefetch(p)
#else
#define GEAR_PREFETCH(p) ((void)(p))
#endif

#define GEAR_AVX2_FEATURES "avx2,fma,f16c"
#define GEAR_AVX512_FEATURES "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"

#define GEAR_PRAGMA(...) _Pragma(#__VA_ARGS__)
#if defined(__clang__)
#define GEAR_TARGET_BEGIN(features) \
  GEAR_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define GEAR_TARGET_END GEAR_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define GEAR_TARGET_BEGIN(features) GEAR_PRAGMA(GCC push_options) GEAR_PRAGMA(GCC target(features))
#define GEAR_TARGET_END GEAR_PRAGMA(GCC pop_options)
#else
#define GEAR_TARGET_BEGIN(features)
#define GEAR_TARGET_END
#endif

// GCC 12's AVX-512 intrinsics headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*
// pass-through operands; clang has no such warning (and would warn about the unknown option).
#if defined(__GNUC__) && !defined(__clang__)
#define GEAR_AVX512_DIAG_BEGIN \
  GEAR_PRAGMA(GCC diagnostic push) GEAR_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized") \
  GEAR_PRAGMA(GCC diagnostic ignored "-Wuninitialized")
#define GEAR_AVX512_DIAG_END GEAR_PRAGMA(GCC diagnostic pop)
#else
#define GEAR_AVX512_DIAG_BEGIN
#define GEAR_AVX512_DIAG_END
#endif
