#include "gear/policy_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gear/dispatch.h"
#include "gear/isa_target.h"
#include "gear/segment.h"
#include "gear/thread_pool.h"

namespace gear {

namespace {

constexpr int64_t kBlock = 1 << 15;  // tokens per block: the fixed partition that makes sums deterministic

struct Partial {
  double loss = 0, clipped = 0, lower = 0, neg_kl = 0, ratio_sum = 0;
  double ratio_min = std::numeric_limits<double>::infinity();
  double ratio_max = -std::numeric_limits<double>::infinity();
  int64_t bad = -1;  // first index with a non-finite input on a valid token
};

// What every token of one call shares.
struct Kern {
  const float* lp;
  const float* old;
  const float* adv;
  const uint8_t* mask;
  const int32_t* off;
  const float* wf;         // per-row aggregation weight rounded to float32 (0 for rows without weight)
  const double* w;         // the same in float64 (the baseline path's loss sums)
  float* grad;
  float lo, hi, c, clamp;  // 1 - ε_low, 1 + ε_high, dual clip, log-ratio clamp (inf = none)
};

// One token in float32 (as verl computes this loss in torch float32), with torch's gradient conventions
// (see ts/losses/policy_loss.ts, ppoTerms); the loss and metric sums are float64. Returns the gradient.
inline float token_scalar(const Kern& s, int64_t t, uint8_t mt, double w, float wf, Partial& p) {
  const float a = s.adv[t], lp = s.lp[t], od = s.old[t];
  if (mt && !(std::isfinite(a) && std::isfinite(lp) && std::isfinite(od))) {
    if (p.bad < 0) p.bad = t;
    return 0.0f;
  }
  // lp - od may overflow to ±inf for finite inputs; the clamp (or exp) handles that like torch does.
  float x = lp - od, dx = 1;
  if (x < -s.clamp) { x = -s.clamp; dx = 0; } else if (x > s.clamp) { x = s.clamp; dx = 0; }
  const float r = std::exp(x);
  const float na = -a;
  // The float32 ratio overflows to inf for δ > 88.7 (the float64 path's ratio stays finite): a zero
  // advantage keeps a zero L1, and zero derivatives select 0 instead of multiplying inf by 0.
  const float L1 = a == 0 ? 0.0f : na * r;
  float rc = r;
  bool in_r = true;
  if (r < s.lo) { rc = s.lo; in_r = false; } else if (r > s.hi) { rc = s.hi; in_r = false; }
  const float L2 = na * rc;
  const float d1 = dx != 0 ? L1 : 0.0f;
  const float d2 = dx != 0 && in_r ? L1 : 0.0f;
  const float Lc = std::max(L1, L2);
  const float dc = L1 > L2 ? d1 : L2 > L1 ? d2 : 0.5f * (d1 + d2);
  float Lt = Lc, dt = dc;
  double low = 0;
  if (a < 0) {
    const float L3 = na * s.c;
    Lt = std::min(L3, Lc);
    dt = L3 < Lc ? 0 : Lc < L3 ? dc : 0.5f * dc;
    low = Lc > L3 ? 1 : 0;
  }
  if (!mt) return 0.0f;
  p.loss += w * static_cast<double>(Lt);
  p.clipped += L2 > L1 ? 1 : 0;
  p.lower += low;
  p.neg_kl -= static_cast<double>(x);
  p.ratio_sum += static_cast<double>(r);
  p.ratio_min = std::min(p.ratio_min, static_cast<double>(r));
  p.ratio_max = std::max(p.ratio_max, static_cast<double>(r));
  return wf * dt;
}

// Tokens [b, e) starting in row r, one token at a time.
void block_baseline(const Kern& s, int64_t r, int64_t b, int64_t e, Partial& p) {
  for (int64_t t = b; t < e; ++t) {
    while (s.off[r + 1] <= t) ++r;
    const uint8_t mt = s.mask ? s.mask[t] : 1;
    s.grad[t] = token_scalar(s, t, mt, s.w[r], s.wf[r], p);
  }
}

// Valid-token counts of rows [r0, r1); returns false when a mask byte is neither 0 nor 1.
bool count_rows_baseline(const uint8_t* mask, const int32_t* off, int64_t r0, int64_t r1, double* cnt) {
  uint8_t any = 0;
  for (int64_t r = r0; r < r1; ++r) {
    int64_t c = 0;
    for (int64_t t = off[r]; t < off[r + 1]; ++t) { c += mask[t]; any |= mask[t]; }
    cnt[r] = static_cast<double>(c);
  }
  return (any & 0xFE) == 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// AVX-512 variant: 16 tokens per step in float32 over a fixed vector grid (multiples of 16 tokens from
// the block start, whatever the addresses), so a token's result and every sum are independent of the
// thread count and of where the arrays sit. A vector spanning row boundaries gets per-lane weights.
#if GEAR_X86
GEAR_AVX512_DIAG_BEGIN
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace avx512 {

// float32 exp (Cephes expf: Cody-Waite reduction by ln2 in two parts, degree-5 polynomial, ~1 ulp),
// vscalefps for 2^n. The input clamp keeps the reduction exact (2^n then over/underflows to inf/0);
// callers that bound |x| <= 80 skip it.
template <bool kInputClamp>
static inline __m512 exp_ps(__m512 x) {
  if (kInputClamp) x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, z, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

// Per-lane sums of one block. The loss sums w·L in float64 per token (w the row's float64 weight), so
// that a micro-batched call with global normalisers sums to the full batch's loss up to float64
// rounding. The metric sums (δ, ρ) collect in float32 over a group of kGroup vectors on the common
// path (at most 4 terms per lane, then the two halves pairwise) before moving into float64: a few
// float32 roundings per group, the order of the per-token float32 math itself. The counts are exact in
// float32 (at most 2^11 per lane per block).
constexpr int kGroup = 4;
// Software prefetch distance in tokens (2 KiB of each float stream): the per-token math keeps the cores
// busy, and explicit prefetches keep the loads ahead of it (faster than the hardware prefetchers alone
// in A/B runs at 10^7 tokens).
constexpr int64_t kPrefetch = 512;
// Prefetching never faults, so it may run past the array's end; the address is formed in integers,
// as pointer arithmetic beyond the array would be undefined.
template <typename T>
static inline void prefetch(const T* base, int64_t i) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(i) * sizeof(T)), _MM_HINT_T0);
}

struct Acc {
  __m512 fx, fr;
  __m512d dl, dh, dx, dr;
  __m512 clip, low, mn, mx;
  int k;
};

// d += the two float32 halves of f, added pairwise in float32 first
static inline void add_f64_pairwise(__m512d& d, __m512 f) {
  d = _mm512_add_pd(d, _mm512_cvtps_pd(_mm256_add_ps(_mm512_castps512_ps256(f), _mm512_extractf32x8_ps(f, 1))));
}
// d += each float32 half of f in float64
static inline void add_f64(__m512d& d, __m512 f) {
  d = _mm512_add_pd(d, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
  d = _mm512_add_pd(d, _mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1)));
}
static inline void flush(Acc& a) {
  add_f64_pairwise(a.dx, a.fx);
  add_f64_pairwise(a.dr, a.fr);
  a.fx = a.fr = _mm512_setzero_ps();
  a.k = 0;
}
// loss += w·L over the valid lanes (w per lane in float64: lanes 0-7 and 8-15)
static inline void add_loss(Acc& a, __m512d wlo, __m512d whi, __m512 L, __mmask16 valid) {
  const __m512 Lv = _mm512_maskz_mov_ps(valid, L);
  a.dl = _mm512_fmadd_pd(wlo, _mm512_cvtps_pd(_mm512_castps512_ps256(Lv)), a.dl);
  a.dh = _mm512_fmadd_pd(whi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(Lv, 1)), a.dh);
}

// Tokens [b, e) of one block (b a multiple of 16). kClamp: a finite log-ratio clamp. stream: write the
// gradient's whole 64-byte lines with streaming stores (the gradient must be 4-byte aligned).
template <bool kClamp>
static void block(const Kern& s, int64_t rows, int64_t b, int64_t e, bool stream, Partial& p) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 lo = _mm512_set1_ps(s.lo), hi = _mm512_set1_ps(s.hi), cc = _mm512_set1_ps(s.c);
  const __m512 cl = _mm512_set1_ps(kClamp ? s.clamp : 0.0f), ncl = _mm512_set1_ps(kClamp ? -s.clamp : 0.0f);
  // The common path needs |δ| within the clamp (no clamp gradient) and <= 40 (exp needs no input
  // clamp, ρ <= 2.4e17), and |A| <= 2^40 (−A·ρ stays far from float32 overflow); other vectors take the
  // general path. NaN compares as out of bounds.
  const __m512 thr = _mm512_set1_ps(std::min(s.clamp, 40.0f)), amax = _mm512_set1_ps(0x1p40f);
  Acc acc{zero, zero, _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), zero, zero,
          _mm512_set1_ps(std::numeric_limits<float>::infinity()), _mm512_set1_ps(-std::numeric_limits<float>::infinity()), 0};

  // Locals: the compiler cannot tell that the gradient stores leave the Kern fields alone.
  const float *const lpp = s.lp, *const oldp = s.old, *const advp = s.adv, *const wf = s.wf;
  const double* const wd = s.w;
  const uint8_t* const maskp = s.mask;
  const int32_t* const off = s.off;
  float* const gradp = s.grad;
  // Streaming stores need 64-byte aligned lines, while the vector grid follows token indices: the
  // gradient line starting `ph` floats before token t + 16 takes the last ph lanes of vector t and the
  // first 16 - ph of vector t + 16 (one permute). The block's first and last partial lines, which
  // neighbouring blocks share, get ordinary masked stores.
  const int ph = static_cast<int>((reinterpret_cast<uintptr_t>(gradp + b) & 63) / sizeof(float));
  const __m512i join = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(16 - ph));
  const __mmask16 first_part = static_cast<__mmask16>(0xFFFFu >> ph), last_part = static_cast<__mmask16>(~first_part);
  __m512 pending = zero;  // the vector whose last ph lanes are not stored yet
  int64_t t_pending = -1;
  int64_t r = std::upper_bound(off, off + rows + 1, static_cast<int32_t>(b)) - off - 1;
  __m512 cw = _mm512_set1_ps(wf[r]);
  __m512d cwd = _mm512_set1_pd(wd[r]);
  int64_t rend = off[r + 1];
  for (int64_t t = b; t < e; t += 16) {
    const int64_t k = std::min<int64_t>(16, e - t);
    const __mmask16 lm = k == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << k) - 1);
    if (rend <= t) {
      do ++r; while (off[r + 1] <= t);
      cw = _mm512_set1_ps(wf[r]);
      cwd = _mm512_set1_pd(wd[r]);
      rend = off[r + 1];
    }
    __m512 wv = cw;
    __m512d wlo = cwd, whi = cwd;
    for (int64_t q = r; off[q + 1] < t + k;) {  // rows starting inside these tokens: per-lane weights
      ++q;
      const unsigned from = 0xFFFFu << (off[q] - t);
      wv = _mm512_mask_mov_ps(wv, static_cast<__mmask16>(from), _mm512_set1_ps(wf[q]));
      wlo = _mm512_mask_mov_pd(wlo, static_cast<__mmask8>(from), _mm512_set1_pd(wd[q]));
      whi = _mm512_mask_mov_pd(whi, static_cast<__mmask8>(from >> 8), _mm512_set1_pd(wd[q]));
    }
    __mmask16 valid = lm;
    if (maskp) {
      const __m128i m8 = _mm_maskz_loadu_epi8(lm, maskp + t);
      valid = _mm_test_epi8_mask(m8, m8);  // mask bytes were checked to be 0/1 in pass 1
    }
    prefetch(lpp, t + kPrefetch);
    prefetch(oldp, t + kPrefetch);
    prefetch(advp, t + kPrefetch);
    if (maskp && (t & 63) == 0) prefetch(maskp, t + kPrefetch);
    const __m512 a = _mm512_maskz_loadu_ps(lm, advp + t);
    const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(lm, lpp + t), _mm512_maskz_loadu_ps(lm, oldp + t));
    const __mmask16 off_fast = _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(x), thr, _CMP_NLE_UQ) |
                               _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(a), amax, _CMP_NLE_UQ);
    const __m512 na = _mm512_xor_ps(a, sign);
    __m512 g;
    if (off_fast == 0) {
      // Common path: δ = x unclamped (dδ/dℓ = 1), ρ finite. Torch's subgradients (see token_scalar):
      // where L2 > L1 the ratio was clipped and dL/dℓ = 0; where L1 > L2 it is L1; ties are rare.
      const __m512 rr = exp_ps<false>(x);
      const __m512 L1 = _mm512_mul_ps(na, rr);
      const __m512 rc = _mm512_min_ps(_mm512_max_ps(rr, lo), hi);
      const __m512 L2 = _mm512_mul_ps(na, rc);
      const __mmask16 g21 = _mm512_cmp_ps_mask(L2, L1, _CMP_GT_OQ);
      const __m512 Lc = _mm512_mask_mov_ps(L1, g21, L2);
      __m512 dc = _mm512_mask_mov_ps(L1, g21, zero);
      // a tie with ρ clipped: the average of d1 = L1 and d2 = 0
      const __mmask16 tie12 = _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(L1, L2, _CMP_EQ_OQ), rc, rr, _CMP_NEQ_UQ);
      __m512 Lt = Lc, dt = dc;
      __mmask16 cut = 0, tie3 = 0;
      const __mmask16 neg = _mm512_cmp_ps_mask(a, zero, _CMP_LT_OQ);
      if (neg != 0) {  // dual clip: min(L3, Lc) for A < 0
        const __m512 L3 = _mm512_mul_ps(na, cc);
        cut = _mm512_mask_cmp_ps_mask(neg, L3, Lc, _CMP_LT_OQ);
        tie3 = _mm512_mask_cmp_ps_mask(neg, L3, Lc, _CMP_EQ_OQ);
        Lt = _mm512_mask_mov_ps(Lc, cut, L3);
        dt = _mm512_mask_mov_ps(dc, cut, zero);
        acc.low = _mm512_mask_add_ps(acc.low, valid & cut, acc.low, one);
      }
      if (((tie12 | tie3) & valid) != 0) {
        dc = _mm512_mask_mov_ps(dc, tie12, _mm512_mul_ps(half, L1));
        dt = _mm512_mask_mov_ps(_mm512_mask_mov_ps(dc, cut, zero), tie3, _mm512_mul_ps(half, dc));
      }
      g = _mm512_maskz_mul_ps(valid, wv, dt);
      add_loss(acc, wlo, whi, Lt, valid);
      acc.fx = _mm512_mask_add_ps(acc.fx, valid, acc.fx, x);
      acc.fr = _mm512_mask_add_ps(acc.fr, valid, acc.fr, rr);
      acc.clip = _mm512_mask_add_ps(acc.clip, valid & g21, acc.clip, one);
      acc.mn = _mm512_mask_min_ps(acc.mn, valid, acc.mn, rr);
      acc.mx = _mm512_mask_max_ps(acc.mx, valid, acc.mx, rr);
      if (++acc.k == kGroup) flush(acc);
    } else if ((_mm512_fpclass_ps_mask(_mm512_add_ps(x, a), 0x01 | 0x08 | 0x10 | 0x80) & valid) != 0) {
      // A non-finite input (an error) or lp − old overflowing float32: token by token.
      alignas(64) float wl[16], gl[16];
      alignas(64) double wdl[16];
      _mm512_store_ps(wl, wv);
      _mm512_store_pd(wdl, wlo);
      _mm512_store_pd(wdl + 8, whi);
      for (int64_t i = 0; i < k; ++i) gl[i] = token_scalar(s, t + i, maskp ? maskp[t + i] : 1, wdl[i], wl[i], p);
      g = _mm512_maskz_loadu_ps(lm, gl);
    } else {
      // General path: the log-ratio clamp (dδ/dℓ = 0 outside it), large |δ| or |A|; sums go straight
      // to float64.
      __m512 xx = x;
      __mmask16 inx = 0xFFFF;
      if (kClamp) {
        inx = _mm512_cmp_ps_mask(_mm512_abs_ps(x), cl, _CMP_LE_OQ);
        xx = _mm512_min_ps(_mm512_max_ps(x, ncl), cl);
      }
      const __m512 rr = exp_ps<true>(xx);
      // ρ may overflow to inf here: a zero advantage keeps L1 = 0 (as the float64 path) instead of NaN
      const __m512 L1 = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(a, zero, _CMP_NEQ_UQ), na, rr);
      const __mmask16 inr = _mm512_cmp_ps_mask(rr, lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(rr, hi, _CMP_LE_OQ);
      const __m512 rc = _mm512_min_ps(_mm512_max_ps(rr, lo), hi);
      const __m512 L2 = _mm512_mul_ps(na, rc);
      const __m512 d1 = _mm512_maskz_mov_ps(inx, L1);
      const __m512 d2 = _mm512_maskz_mov_ps(inx & inr, L1);
      const __mmask16 g12 = _mm512_cmp_ps_mask(L1, L2, _CMP_GT_OQ);
      const __mmask16 g21 = _mm512_cmp_ps_mask(L2, L1, _CMP_GT_OQ);
      const __m512 Lc = _mm512_mask_mov_ps(L1, g21, L2);
      __m512 dc = _mm512_mask_mov_ps(d1, g21, d2);
      // on a tie with ρ inside [lo, hi] d2 = d1, so the average is needed only on ties outside it
      const __mmask16 odd = static_cast<__mmask16>(~(g12 | g21) & inx & ~inr);
      dc = _mm512_mask_mov_ps(dc, odd, _mm512_mul_ps(half, _mm512_add_ps(d1, d2)));
      __m512 Lt = Lc, dt = dc;
      const __mmask16 neg = _mm512_cmp_ps_mask(a, zero, _CMP_LT_OQ);
      if (neg != 0) {
        const __m512 L3 = _mm512_mul_ps(na, cc);
        const __mmask16 l3lt = _mm512_cmp_ps_mask(L3, Lc, _CMP_LT_OQ);
        const __mmask16 lclt = _mm512_cmp_ps_mask(Lc, L3, _CMP_LT_OQ);
        __m512 dd = _mm512_mul_ps(half, dc);
        dd = _mm512_mask_mov_ps(dd, l3lt, zero);
        dd = _mm512_mask_mov_ps(dd, lclt, dc);
        Lt = _mm512_mask_mov_ps(Lc, neg, _mm512_min_ps(L3, Lc));
        dt = _mm512_mask_mov_ps(dc, neg, dd);
        acc.low = _mm512_mask_add_ps(acc.low, valid & neg & _mm512_cmp_ps_mask(Lc, L3, _CMP_GT_OQ), acc.low, one);
      }
      g = _mm512_maskz_mul_ps(valid, wv, dt);
      add_loss(acc, wlo, whi, Lt, valid);
      add_f64(acc.dx, _mm512_maskz_mov_ps(valid, xx));
      add_f64(acc.dr, _mm512_maskz_mov_ps(valid, rr));
      acc.clip = _mm512_mask_add_ps(acc.clip, valid & g21, acc.clip, one);
      acc.mn = _mm512_mask_min_ps(acc.mn, valid, acc.mn, rr);
      acc.mx = _mm512_mask_max_ps(acc.mx, valid, acc.mx, rr);
    }
    if (!stream || k < 16) {
      _mm512_mask_storeu_ps(gradp + t, lm, g);
    } else {
      if (t_pending < 0) _mm512_mask_storeu_ps(gradp + t, first_part, g);
      else _mm512_stream_ps(gradp + t - ph, _mm512_permutex2var_ps(pending, join, g));
      pending = g;
      t_pending = t;
    }
  }
  if (t_pending >= 0) {
    _mm512_mask_storeu_ps(gradp + t_pending, last_part, pending);
    _mm_sfence();  // streaming stores are weakly ordered: complete them before the task ends
  }
  flush(acc);
  alignas(64) double l[8], xs[8], rs[8];
  alignas(64) float c16[16], lw[16], mn[16], mx[16];
  _mm512_store_pd(l, _mm512_add_pd(acc.dl, acc.dh)); _mm512_store_pd(xs, acc.dx); _mm512_store_pd(rs, acc.dr);
  _mm512_store_ps(c16, acc.clip); _mm512_store_ps(lw, acc.low); _mm512_store_ps(mn, acc.mn); _mm512_store_ps(mx, acc.mx);
  for (int i = 0; i < 8; ++i) { p.loss += l[i]; p.neg_kl -= xs[i]; p.ratio_sum += rs[i]; }
  for (int i = 0; i < 16; ++i) {
    p.clipped += c16[i]; p.lower += lw[i];
    p.ratio_min = mn[i] < p.ratio_min ? mn[i] : p.ratio_min;
    p.ratio_max = mx[i] > p.ratio_max ? mx[i] : p.ratio_max;
  }
}

// Valid-token counts of rows [r0, r1), 64 mask bytes per step; false when a byte is neither 0 nor 1.
static bool count_rows(const uint8_t* mask, const int32_t* off, int64_t r0, int64_t r1, double* cnt) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i any = zero;
  for (int64_t r = r0; r < r1; ++r) {
    __m512i sum = zero;
    for (int64_t t = off[r], e = off[r + 1]; t < e; t += 64) {
      const int64_t k = std::min<int64_t>(64, e - t);
      const __mmask64 lm = k == 64 ? ~__mmask64{0} : (__mmask64{1} << k) - 1;
      const __m512i v = _mm512_maskz_loadu_epi8(lm, mask + t);
      any = _mm512_or_si512(any, v);
      sum = _mm512_add_epi64(sum, _mm512_sad_epu8(v, zero));
    }
    cnt[r] = static_cast<double>(_mm512_reduce_add_epi64(sum));
  }
  return _mm512_cmpgt_epu8_mask(any, _mm512_set1_epi8(1)) == 0;
}

}  // namespace avx512
GEAR_TARGET_END
GEAR_AVX512_DIAG_END
#endif  // GEAR_X86
// ---------------------------------------------------------------------------------------------------

static Status bad_option(const std::string& what, const std::string& expected, double got) {
  return error(Code::Option, what + ": expected " + expected + ", got " + std::to_string(got));
}

Status policy_loss_ppo(const float* logprob, const float* old_logprob, const float* advantages,
                       const uint8_t* mask, int64_t n, const int32_t* offsets, int64_t rows,
                       const PpoParams& pr, float* grad, PpoStats* stats, const ExecContext& ctx,
                       bool reused_out) {
  if (n < 0) return error(Code::Shape, "n: expected >= 0, got " + std::to_string(n));
  if (n > 0 && (!logprob || !old_logprob || !advantages || !grad))
    return error(Code::Shape, "policyLossPpo: expected input and output arrays, got null");
  if (!stats) return error(Code::Shape, "stats: expected an output, got null");
  Status st = check_offsets(offsets, rows, n);
  if (!st.is_ok()) return st;
  if (!(pr.clip_low >= 0) || !std::isfinite(pr.clip_low)) return bad_option("clipLow", "a finite number >= 0", pr.clip_low);
  if (!(pr.clip_high >= 0) || !std::isfinite(pr.clip_high)) return bad_option("clipHigh", "a finite number >= 0", pr.clip_high);
  if (!(pr.clip_c > 1.0) || !std::isfinite(pr.clip_c)) return bad_option("clipC", "a finite number > 1 (dual clip)", pr.clip_c);
  if (!(pr.log_ratio_clamp > 0 || pr.log_ratio_clamp < 0) || std::isnan(pr.log_ratio_clamp))
    return bad_option("logRatioClamp", "> 0 (or < 0 for none)", pr.log_ratio_clamp);
  if (!(pr.dp_size >= 1) || std::floor(pr.dp_size) != pr.dp_size) return bad_option("dpSize", "an integer >= 1", pr.dp_size);
  const int agg = static_cast<int>(pr.agg), sem = static_cast<int>(pr.semantics);
  if (agg < 0 || agg > 4) return bad_option("agg", "a mode index in [0, 4]", agg);
  if (sem < 0 || sem > 2) return bad_option("semantics", "an index in [0, 2]", sem);
  if (pr.semantics != AggSemantics::Verl && pr.agg == AggMode::TokenSum)
    return error(Code::Option, "mode: expected a mode of the chosen semantics (token-sum exists in current verl only), got token-sum");
  for (double g : {pr.global_tokens, pr.global_rows, pr.loss_scale_factor})
    if (std::isnan(g) || g == 0 || std::isinf(g)) return bad_option("global normaliser", "> 0 and finite (or < 0 for the default)", g);

  // Pass 1: per-row valid-token counts and the 0/1 check of the mask (1 byte per token), over
  // row-aligned chunks of about equal work.
#if GEAR_X86
  const bool use512 = active_isa() == Isa::Avx512;
#else
  constexpr bool use512 = false;
#endif
  std::vector<double> cnt(static_cast<size_t>(rows), 0.0);
  std::vector<int64_t> bad_mask(static_cast<size_t>(row_chunk_count(n, rows)), -1);
  bool done = parallel_blocks(ctx, static_cast<int64_t>(bad_mask.size()), 1, [&](int64_t k, int64_t, int) {
    const int64_t r0 = row_chunk_begin(offsets, rows, k), r1 = row_chunk_begin(offsets, rows, k + 1);
    if (!mask) {
      for (int64_t r = r0; r < r1; ++r) cnt[r] = static_cast<double>(offsets[r + 1] - offsets[r]);
      return;
    }
#if GEAR_X86
    const bool binary = use512 ? avx512::count_rows(mask, offsets, r0, r1, cnt.data())
                               : count_rows_baseline(mask, offsets, r0, r1, cnt.data());
#else
    const bool binary = count_rows_baseline(mask, offsets, r0, r1, cnt.data());
#endif
    if (!binary) bad_mask[static_cast<size_t>(k)] = first_non_binary(mask, offsets[r0], offsets[r1]);
  });
  if (!done) return error(Code::Aborted, "policyLossPpo: aborted");
  for (int64_t bm : bad_mask)
    if (bm >= 0) return mask_error(mask, bm);
  double n_tok = 0, n_seq = 0;
  int64_t max_len = 0;
  for (int64_t r = 0; r < rows; ++r) {
    n_tok += cnt[r];
    n_seq += cnt[r] > 0 ? 1 : 0;
    max_len = std::max<int64_t>(max_len, offsets[r + 1] - offsets[r]);
  }
  if (pr.global_tokens > 0 && pr.global_tokens < n_tok)
    return bad_option("globalTokens", ">= the " + std::to_string(static_cast<int64_t>(n_tok)) + " valid tokens of this call", pr.global_tokens);
  if (pr.global_rows > 0 && pr.global_rows < n_seq)
    return bad_option("globalRows", ">= the " + std::to_string(static_cast<int64_t>(n_seq)) + " non-empty rows of this call", pr.global_rows);

  // Row weights: the same float64 expressions as ts/losses/aggregate.ts (aggWeights).
  const double dp = pr.dp_size;
  const double lsf = pr.loss_scale_factor > 0 ? pr.loss_scale_factor : static_cast<double>(max_len);
  std::vector<double> wrow(static_cast<size_t>(rows), 0.0);
  bool nan = false;
  if (pr.semantics == AggSemantics::VerlAgent) {
    const double g_rows = pr.global_rows > 0 ? pr.global_rows : static_cast<double>(rows);
    for (int64_t r = 0; r < rows; ++r) {
      switch (pr.agg) {
        case AggMode::TokenMean: wrow[r] = dp / (pr.global_tokens > 0 ? pr.global_tokens : n_tok + 1e-8); break;
        case AggMode::SeqMeanTokenSum: wrow[r] = dp / g_rows; break;
        case AggMode::SeqMeanTokenMean:
          if (cnt[r] == 0) nan = true; else wrow[r] = dp / cnt[r] / g_rows;
          break;
        case AggMode::SeqMeanTokenSumNorm: wrow[r] = dp / lsf; break;
        default: break;
      }
    }
  } else {
    const double g_rows = pr.global_rows > 0 ? pr.global_rows : n_seq;
    for (int64_t r = 0; r < rows; ++r) {
      if (cnt[r] == 0) continue;
      switch (pr.agg) {
        case AggMode::TokenMean: wrow[r] = dp / (pr.global_tokens > 0 ? pr.global_tokens : n_tok); break;
        case AggMode::TokenSum: wrow[r] = dp; break;
        case AggMode::SeqMeanTokenSum: wrow[r] = dp / g_rows; break;
        case AggMode::SeqMeanTokenMean: wrow[r] = dp / (cnt[r] + 1e-8) / g_rows; break;
        case AggMode::SeqMeanTokenSumNorm:
          wrow[r] = pr.semantics == AggSemantics::VerlLegacy ? dp / lsf : dp / g_rows / lsf;
          break;
      }
    }
  }

  // Pass 2: the fused loss/gradient pass over fixed token blocks.
  std::vector<float> wrowf(wrow.begin(), wrow.end());
  // Per-token math is float32 (as verl's torch loss): the bounds are rounded to float32 once here.
  const float clampf = pr.log_ratio_clamp > 0 ? static_cast<float>(pr.log_ratio_clamp) : std::numeric_limits<float>::infinity();
  const Kern s{logprob, old_logprob, advantages, mask, offsets, wrowf.data(), wrow.data(), grad,
               static_cast<float>(1 - pr.clip_low), static_cast<float>(1 + pr.clip_high), static_cast<float>(pr.clip_c), clampf};
  const bool stream = use512 && reused_out && n * 4 >= kStreamOutputBytes && reinterpret_cast<uintptr_t>(grad) % 4 == 0;
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  std::vector<Partial> parts(static_cast<size_t>(nblocks));
  done = parallel_blocks(ctx, n, kBlock, [&](int64_t b, int64_t e, int) {
    Partial& p = parts[static_cast<size_t>(b / kBlock)];
#if GEAR_X86
    if (use512) {
      if (std::isinf(clampf)) avx512::block<false>(s, rows, b, e, stream, p);
      else avx512::block<true>(s, rows, b, e, stream, p);
      return;
    }
#endif
    const int64_t r = std::upper_bound(offsets, offsets + rows + 1, static_cast<int32_t>(b)) - offsets - 1;
    block_baseline(s, r, b, e, p);
  });
  if (!done) return error(Code::Aborted, "policyLossPpo: aborted");
  PpoStats out;
  out.tokens = n_tok;
  out.ratio_min = std::numeric_limits<double>::infinity();
  out.ratio_max = -std::numeric_limits<double>::infinity();
  for (const Partial& p : parts) {
    if (p.bad >= 0) {
      const int64_t i = p.bad;
      const char* what = !std::isfinite(logprob[i]) ? "logprob" : !std::isfinite(old_logprob[i]) ? "oldLogprob" : "advantages";
      const float v = !std::isfinite(logprob[i]) ? logprob[i] : !std::isfinite(old_logprob[i]) ? old_logprob[i] : advantages[i];
      return error(Code::NonFinite, std::string(what) + "[" + std::to_string(i) + "]: expected a finite number, got " + std::to_string(v));
    }
    out.loss += p.loss; out.clipped += p.clipped; out.lower += p.lower; out.neg_kl += p.neg_kl; out.ratio_sum += p.ratio_sum;
    out.ratio_min = std::min(out.ratio_min, p.ratio_min);
    out.ratio_max = std::max(out.ratio_max, p.ratio_max);
  }
  out.nan = nan;
  *stats = out;
  return Status::ok();
}

}  // namespace gear
