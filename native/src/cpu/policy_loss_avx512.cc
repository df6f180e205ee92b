// PPO token pass for AVX-512 (F + BW + VL + DQ): 16 tokens per step in float32 over a fixed vector
// grid (multiples of 16 tokens from the block start, whatever the addresses), so a token's result and
// every sum are independent of the thread count and of where the arrays sit. A vector spanning row
// boundaries gets per-lane weights.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gear/isa_target.h"
#include "policy_loss_kernels.h"

#if GEAR_X86
GEAR_AVX512_DIAG_BEGIN
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace gear {
namespace ppo {
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

// The constants of one block's vector paths. kClamp: a finite log-ratio clamp.
struct Consts {
  __m512 zero, one, half, sign, lo, hi, cc, cl, ncl, thr, amax;
};

template <bool kClamp>
static inline Consts make_consts(const Kern& s) {
  Consts c;
  c.zero = _mm512_setzero_ps();
  c.one = _mm512_set1_ps(1.0f);
  c.half = _mm512_set1_ps(0.5f);
  c.sign = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(0x80000000u)));
  c.lo = _mm512_set1_ps(s.lo);
  c.hi = _mm512_set1_ps(s.hi);
  c.cc = _mm512_set1_ps(s.c);
  c.cl = _mm512_set1_ps(kClamp ? s.clamp : 0.0f);
  c.ncl = _mm512_set1_ps(kClamp ? -s.clamp : 0.0f);
  // The common path needs |δ| within the clamp (no clamp gradient) and <= 40 (exp needs no input
  // clamp, ρ <= 2.4e17), and |A| <= 2^40 (−A·ρ stays far from float32 overflow); other vectors take the
  // general path. NaN compares as out of bounds.
  c.thr = _mm512_set1_ps(std::min(s.clamp, 40.0f));
  c.amax = _mm512_set1_ps(0x1p40f);
  return c;
}

// The row of the current vector and its weights (float32 for the gradient, float64 for the loss).
struct RowCursor {
  int64_t r, rend;
  __m512 cw;
  __m512d cwd;
};

static inline RowCursor row_cursor(const int32_t* off, const float* wf, const double* wd, int64_t rows, int64_t b) {
  RowCursor c;
  c.r = row_of(off, rows, b);
  c.cw = _mm512_set1_ps(wf[c.r]);
  c.cwd = _mm512_set1_pd(wd[c.r]);
  c.rend = off[c.r + 1];
  return c;
}

// Stage 1: the per-lane weights of the k tokens at t: the row the vector starts in, then (a vector
// spanning row boundaries) each row that starts inside it from its first lane on.
static inline void lane_weights(RowCursor& c, const int32_t* off, const float* wf, const double* wd, int64_t t,
                                int64_t k, __m512& wv, __m512d& wlo, __m512d& whi) {
  if (c.rend <= t) {
    do ++c.r; while (off[c.r + 1] <= t);
    c.cw = _mm512_set1_ps(wf[c.r]);
    c.cwd = _mm512_set1_pd(wd[c.r]);
    c.rend = off[c.r + 1];
  }
  wv = c.cw;
  wlo = c.cwd;
  whi = c.cwd;
  for (int64_t q = c.r; off[q + 1] < t + k;) {  // rows starting inside these tokens: per-lane weights
    ++q;
    const unsigned from = 0xFFFFu << (off[q] - t);
    wv = _mm512_mask_mov_ps(wv, static_cast<__mmask16>(from), _mm512_set1_ps(wf[q]));
    wlo = _mm512_mask_mov_pd(wlo, static_cast<__mmask8>(from), _mm512_set1_pd(wd[q]));
    whi = _mm512_mask_mov_pd(whi, static_cast<__mmask8>(from >> 8), _mm512_set1_pd(wd[q]));
  }
}

// Stage 2a, the common path: δ = x unclamped (dδ/dℓ = 1), ρ finite. Torch's subgradients (see
// token_scalar): where L2 > L1 the ratio was clipped and dL/dℓ = 0; where L1 > L2 it is L1; ties are
// rare. Adds the vector's sums to acc (float32 metric groups) and returns its gradient.
static inline __m512 common_path(const Consts& C, __m512 a, __m512 x, __mmask16 valid, __m512 wv, __m512d wlo,
                                 __m512d whi, Acc& acc) {
  const __m512 zero = C.zero, one = C.one, half = C.half;
  const __m512 na = _mm512_xor_ps(a, C.sign);
  const __m512 rr = exp_ps<false>(x);
  const __m512 L1 = _mm512_mul_ps(na, rr);
  const __m512 rc = _mm512_min_ps(_mm512_max_ps(rr, C.lo), C.hi);
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
    const __m512 L3 = _mm512_mul_ps(na, C.cc);
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
  const __m512 g = _mm512_maskz_mul_ps(valid, wv, dt);
  add_loss(acc, wlo, whi, Lt, valid);
  acc.fx = _mm512_mask_add_ps(acc.fx, valid, acc.fx, x);
  acc.fr = _mm512_mask_add_ps(acc.fr, valid, acc.fr, rr);
  acc.clip = _mm512_mask_add_ps(acc.clip, valid & g21, acc.clip, one);
  acc.mn = _mm512_mask_min_ps(acc.mn, valid, acc.mn, rr);
  acc.mx = _mm512_mask_max_ps(acc.mx, valid, acc.mx, rr);
  if (++acc.k == kGroup) flush(acc);
  return g;
}

// Stage 2b, the scalar path: a non-finite input (an error) or lp − old overflowing float32, token by
// token through token_scalar (the k tokens at t); returns the vector's gradient.
static inline __m512 scalar_path(const Kern& s, const uint8_t* maskp, int64_t t, int64_t k, __mmask16 lm, __m512 wv,
                                 __m512d wlo, __m512d whi, Partial& p) {
  alignas(64) float wl[16], gl[16];
  alignas(64) double wdl[16];
  _mm512_store_ps(wl, wv);
  _mm512_store_pd(wdl, wlo);
  _mm512_store_pd(wdl + 8, whi);
  for (int64_t i = 0; i < k; ++i) gl[i] = token_scalar(s, t + i, maskp ? maskp[t + i] : 1, wdl[i], wl[i], p);
  return _mm512_maskz_loadu_ps(lm, gl);
}

// Stage 2c, the general path: the log-ratio clamp (dδ/dℓ = 0 outside it), large |δ| or |A|; sums go
// straight to float64. Returns the vector's gradient.
template <bool kClamp>
static inline __m512 general_path(const Consts& C, __m512 a, __m512 x, __mmask16 valid, __m512 wv, __m512d wlo,
                                  __m512d whi, Acc& acc) {
  const __m512 zero = C.zero, one = C.one, half = C.half;
  const __m512 na = _mm512_xor_ps(a, C.sign);
  __m512 xx = x;
  __mmask16 inx = 0xFFFF;
  if (kClamp) {
    inx = _mm512_cmp_ps_mask(_mm512_abs_ps(x), C.cl, _CMP_LE_OQ);
    xx = _mm512_min_ps(_mm512_max_ps(x, C.ncl), C.cl);
  }
  const __m512 rr = exp_ps<true>(xx);
  // ρ may overflow to inf here: a zero advantage keeps L1 = 0 (as the float64 path) instead of NaN
  const __m512 L1 = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(a, zero, _CMP_NEQ_UQ), na, rr);
  const __mmask16 inr = _mm512_cmp_ps_mask(rr, C.lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(rr, C.hi, _CMP_LE_OQ);
  const __m512 rc = _mm512_min_ps(_mm512_max_ps(rr, C.lo), C.hi);
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
    const __m512 L3 = _mm512_mul_ps(na, C.cc);
    const __mmask16 l3lt = _mm512_cmp_ps_mask(L3, Lc, _CMP_LT_OQ);
    const __mmask16 lclt = _mm512_cmp_ps_mask(Lc, L3, _CMP_LT_OQ);
    __m512 dd = _mm512_mul_ps(half, dc);
    dd = _mm512_mask_mov_ps(dd, l3lt, zero);
    dd = _mm512_mask_mov_ps(dd, lclt, dc);
    Lt = _mm512_mask_mov_ps(Lc, neg, _mm512_min_ps(L3, Lc));
    dt = _mm512_mask_mov_ps(dc, neg, dd);
    acc.low = _mm512_mask_add_ps(acc.low, valid & neg & _mm512_cmp_ps_mask(Lc, L3, _CMP_GT_OQ), acc.low, one);
  }
  const __m512 g = _mm512_maskz_mul_ps(valid, wv, dt);
  add_loss(acc, wlo, whi, Lt, valid);
  add_f64(acc.dx, _mm512_maskz_mov_ps(valid, xx));
  add_f64(acc.dr, _mm512_maskz_mov_ps(valid, rr));
  acc.clip = _mm512_mask_add_ps(acc.clip, valid & g21, acc.clip, one);
  acc.mn = _mm512_mask_min_ps(acc.mn, valid, acc.mn, rr);
  acc.mx = _mm512_mask_max_ps(acc.mx, valid, acc.mx, rr);
  return g;
}

// Stage 3, the gradient stores. Streaming stores need 64-byte aligned lines, while the vector grid
// follows token indices: the gradient line starting `ph` floats before token t + 16 takes the last ph
// lanes of vector t and the first 16 - ph of vector t + 16 (one permute). The block's first and last
// partial lines, which neighbouring blocks share, get ordinary masked stores.
struct GradStore {
  float* grad;
  bool stream;
  int ph;
  __m512i join;
  __mmask16 first_part, last_part;
  __m512 pending;  // the vector whose last ph lanes are not stored yet
  int64_t t_pending;
};

static inline GradStore grad_store(float* grad, int64_t b, bool stream) {
  GradStore g;
  g.grad = grad;
  g.stream = stream;
  g.ph = static_cast<int>((reinterpret_cast<uintptr_t>(grad + b) & 63) / sizeof(float));
  g.join = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32(16 - g.ph));
  g.first_part = static_cast<__mmask16>(0xFFFFu >> g.ph);
  g.last_part = static_cast<__mmask16>(~g.first_part);
  g.pending = _mm512_setzero_ps();
  g.t_pending = -1;
  return g;
}

// Writes the gradient g of the k tokens at t.
static inline void store_grad(GradStore& gs, int64_t t, int64_t k, __mmask16 lm, __m512 g) {
  if (!gs.stream || k < 16) {
    _mm512_mask_storeu_ps(gs.grad + t, lm, g);
  } else {
    if (gs.t_pending < 0) _mm512_mask_storeu_ps(gs.grad + t, gs.first_part, g);
    else _mm512_stream_ps(gs.grad + t - gs.ph, _mm512_permutex2var_ps(gs.pending, gs.join, g));
    gs.pending = g;
    gs.t_pending = t;
  }
}

// The block's last partial line, and the fence after its streaming stores.
static inline void finish_stores(GradStore& gs) {
  if (gs.t_pending >= 0) {
    _mm512_mask_storeu_ps(gs.grad + gs.t_pending, gs.last_part, gs.pending);
    _mm_sfence();  // streaming stores are weakly ordered: complete them before the task ends
  }
}

// Stage 4: the block's per-lane sums into its Partial (lanes in order).
static inline void reduce_into(Acc& acc, Partial& p) {
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

// Tokens [b, e) of one block (b a multiple of 16). kClamp: a finite log-ratio clamp. stream: write the
// gradient's whole 64-byte lines with streaming stores (the gradient must be 4-byte aligned). Per
// vector of 16 tokens: lane weights, loads, one of the three paths, the gradient store.
template <bool kClamp>
static void block(const Kern& s, int64_t rows, int64_t b, int64_t e, bool stream, Partial& p) {
  const Consts C = make_consts<kClamp>(s);
  const __m512 zero = C.zero;
  Acc acc{zero, zero, _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), zero, zero,
          _mm512_set1_ps(std::numeric_limits<float>::infinity()), _mm512_set1_ps(-std::numeric_limits<float>::infinity()), 0};

  // Locals: the compiler cannot tell that the gradient stores leave the Kern fields alone.
  const float *const lpp = s.lp, *const oldp = s.old, *const advp = s.adv, *const wf = s.wf;
  const double* const wd = s.w;
  const uint8_t* const maskp = s.mask;
  const int32_t* const off = s.off;
  GradStore gs = grad_store(s.grad, b, stream);
  RowCursor rc = row_cursor(off, wf, wd, rows, b);
  for (int64_t t = b; t < e; t += 16) {
    const int64_t k = std::min<int64_t>(16, e - t);
    const __mmask16 lm = k == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << k) - 1);
    __m512 wv;
    __m512d wlo, whi;
    lane_weights(rc, off, wf, wd, t, k, wv, wlo, whi);
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
    const __mmask16 off_fast = _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(x), C.thr, _CMP_NLE_UQ) |
                               _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(a), C.amax, _CMP_NLE_UQ);
    __m512 g;
    if (off_fast == 0)
      g = common_path(C, a, x, valid, wv, wlo, whi, acc);
    else if ((_mm512_fpclass_ps_mask(_mm512_add_ps(x, a), 0x01 | 0x08 | 0x10 | 0x80) & valid) != 0)
      g = scalar_path(s, maskp, t, k, lm, wv, wlo, whi, p);
    else
      g = general_path<kClamp>(C, a, x, valid, wv, wlo, whi, acc);
    store_grad(gs, t, k, lm, g);
  }
  finish_stores(gs);
  reduce_into(acc, p);
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
}  // namespace ppo
}  // namespace gear
GEAR_TARGET_END
GEAR_AVX512_DIAG_END

const gear::ppo::PolicyLossKernels gear::ppo::policy_loss_avx512 = {&gear::ppo::avx512::block<false>, &gear::ppo::avx512::block<true>,
                                                      &gear::ppo::avx512::count_rows, true};
#endif  // GEAR_X86
