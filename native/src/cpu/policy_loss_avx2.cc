// PPO token pass for AVX2 + FMA: 8 tokens per step in float32 over a fixed vector grid (multiples of 8
// tokens from the block start), so a token's result and every sum are independent of the thread count
// and of where the arrays sit. Same per-token rules as the AVX-512 pass; vectors that need the
// log-ratio clamp, a large |δ| or |A|, or hold a non-finite input go token by token (token_scalar).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gear/isa_target.h"
#include "policy_loss_kernels.h"

#if GEAR_X86
GEAR_TARGET_BEGIN(GEAR_AVX2_FEATURES)
namespace gear {
namespace ppo {
namespace avx2 {

// float32 exp for |x| <= 40 (Cephes expf: Cody-Waite reduction by ln2 in two parts, degree-5
// polynomial, ~1 ulp), in two halves that common_run spreads over two loop steps. n = round(x log2 e)
// through the 1.5 * 2^23 shifter (add and subtract: the same round-to-nearest-even as vroundps for
// |x log2 e| < 2^22, on the add ports), and 2^n is added to the polynomial's exponent bits: y 2^n is a
// normal float here, so that is the exact product, one multiply fewer on the FMA ports.
// First half: j (n in its low mantissa bits) and the reduced argument r = x - n ln2.
static inline void exp_reduce(__m256 x, __m256& j, __m256& r) {
  j = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _mm256_set1_ps(12582912.0f));
  const __m256 n = _mm256_sub_ps(j, _mm256_set1_ps(12582912.0f));
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
}
// Second half: e^r 2^n.
static inline __m256 exp_finish(__m256 j, __m256 r) {
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, z, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), _mm256_slli_epi32(_mm256_castps_si256(j), 23)));
}
static inline __m256 exp_ps(__m256 x) {
  __m256 j, r;
  exp_reduce(x, j, r);
  return exp_finish(j, r);
}

// All-ones float lanes where bit i of `bits` is set (lanes 0-7).
static inline __m256 lanes_ps(unsigned bits) {
  const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), sel), sel));
}
// All-ones double lanes where bit i of `bits` is set (lanes 0-3).
static inline __m256d lanes_pd(unsigned bits) {
  const __m256i sel = _mm256_setr_epi64x(1, 2, 4, 8);
  return _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(bits), sel), sel));
}

// Software prefetch distance in tokens (2 KiB of each float stream), as in the AVX-512 pass.
constexpr int64_t kPrefetch = 512;
template <typename T>
static inline void prefetch(const T* base, int64_t i) {
  // formed in integers: pointer arithmetic past the array would be undefined; prefetching never faults
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(i) * sizeof(T)), _MM_HINT_T0);
}

// Per-lane sums. The loss sums w·L in float64 per token; δ and ρ collect in float32 over kGroup vectors
// (at most 4 terms per lane, then the halves pairwise) before moving into float64; the counts are exact
// in float32 (at most 2^12 per lane per block).
constexpr int kGroup = 4;
// cnt: the clipped count in the low 16 bits of each lane, the dual-clip count in the high 16 (each at
// most 2^12 per lane per block); one register where AVX2 has 16.
struct Acc {
  __m256 fx, fr, mn, mx;
  __m256i cnt;
  __m256d dl, dx, dr;
  int k;
};

static inline void add_f64_pairwise(__m256d& d, __m256 f) {
  d = _mm256_add_pd(d, _mm256_cvtps_pd(_mm_add_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1))));
}
static inline void flush(Acc& a) {
  add_f64_pairwise(a.dx, a.fx);
  add_f64_pairwise(a.dr, a.fr);
  a.fx = a.fr = _mm256_setzero_ps();
  a.k = 0;
}

// One full vector of 8 tokens on the common path, given ρ = exp_ps(x): δ unclamped (dδ/dℓ = 1), ρ
// finite. x and a must be +0 on invalid lanes: there ρ = 1, L1 = L2 = -0 and no clip or dual clip
// fires, so the loss, δ and count sums need no masks (ρ's sum and range, and the gradient, do).
// Returns the gradient (+0 on invalid lanes). Torch's subgradients as in token_scalar: where L2 > L1
// the ratio was clipped and dL/dℓ = 0; where L1 > L2 it is L1; ties average. The tie fixes are blends,
// not a branch: a branch there would wait on the whole chain above it before anything after it retires.
static inline __m256 common_vector(const Kern& s, __m256 x, __m256 a, __m256 rr, __m256 valid, __m256 wv,
                                   __m256d wlo, __m256d whi, Acc& acc) {
  const __m256 zero = _mm256_setzero_ps(), half = _mm256_set1_ps(0.5f);
  const __m256 na = _mm256_xor_ps(a, _mm256_set1_ps(-0.0f));
  const __m256 L1 = _mm256_mul_ps(na, rr);
  const __m256 rc = _mm256_min_ps(_mm256_max_ps(rr, _mm256_set1_ps(s.lo)), _mm256_set1_ps(s.hi));
  const __m256 L2 = _mm256_mul_ps(na, rc);
  const __m256 g21 = _mm256_cmp_ps(L2, L1, _CMP_GT_OQ);
  const __m256 Lc = _mm256_blendv_ps(L1, L2, g21);
  // a tie with ρ clipped: the average of d1 = L1 and d2 = 0
  const __m256 tie12 = _mm256_and_ps(_mm256_cmp_ps(L1, L2, _CMP_EQ_OQ), _mm256_cmp_ps(rc, rr, _CMP_NEQ_UQ));
  const __m256 dc = _mm256_blendv_ps(_mm256_andnot_ps(g21, L1), _mm256_mul_ps(half, L1), tie12);
  __m256 Lt = Lc, dt = dc;
  const __m256 neg = _mm256_cmp_ps(a, zero, _CMP_LT_OQ);
  if (_mm256_movemask_ps(neg) != 0) {  // dual clip: min(L3, Lc) for A < 0 (a row's sign: predictable)
    const __m256 L3 = _mm256_mul_ps(na, _mm256_set1_ps(s.c));
    const __m256 cut = _mm256_and_ps(neg, _mm256_cmp_ps(L3, Lc, _CMP_LT_OQ));
    const __m256 tie3 = _mm256_and_ps(neg, _mm256_cmp_ps(L3, Lc, _CMP_EQ_OQ));
    Lt = _mm256_blendv_ps(Lc, L3, cut);
    dt = _mm256_blendv_ps(_mm256_andnot_ps(cut, dc), _mm256_mul_ps(half, dc), tie3);
    acc.cnt = _mm256_sub_epi32(acc.cnt, _mm256_slli_epi32(_mm256_castps_si256(cut), 16));  // + 1 << 16
  }
  acc.dl = _mm256_fmadd_pd(wlo, _mm256_cvtps_pd(_mm256_castps256_ps128(Lt)), acc.dl);
  acc.dl = _mm256_fmadd_pd(whi, _mm256_cvtps_pd(_mm256_extractf128_ps(Lt, 1)), acc.dl);
  acc.fx = _mm256_add_ps(acc.fx, x);
  const __m256 rv = _mm256_and_ps(valid, rr);
  acc.fr = _mm256_add_ps(acc.fr, rv);
  acc.cnt = _mm256_sub_epi32(acc.cnt, _mm256_castps_si256(g21));  // + 1 per lane
  acc.mn = _mm256_min_ps(acc.mn, _mm256_blendv_ps(_mm256_set1_ps(std::numeric_limits<float>::infinity()), rr, valid));
  acc.mx = _mm256_max_ps(acc.mx, rv);  // ρ > 0 on valid lanes: a lane left at 0 saw none (see block)
  if (++acc.k == kGroup) flush(acc);
  return _mm256_and_ps(valid, _mm256_mul_ps(wv, dt));
}

// Stores the gradient of 8 tokens at p: kSt 0 ordinary, 1 streaming (p 32-byte aligned), 2 streaming
// halves (p 16-byte aligned).
template <int kSt>
static inline void store_grad(float* p, __m256 g) {
  if (kSt == 1) {
    _mm256_stream_ps(p, g);
  } else if (kSt == 2) {
    _mm_stream_ps(p, _mm256_castps256_ps128(g));
    _mm_stream_ps(p + 4, _mm256_extractf128_ps(g, 1));
  } else {
    _mm256_storeu_ps(p, g);
  }
}

// One vector of common_run on its way through the pipeline: inputs, then ρ = e^x in two halves.
struct Stage {
  __m256 x, a, valid, j, r;
};

// Vectors [t, end) of one row (end - t a multiple of 8; every token weighted by w) while they take the
// common path: returns where it stopped (end, or the first vector that needs the token path). Software
// pipelined over three vectors: each step loads vector i + 2 and reduces its exp argument, finishes the
// exp of vector i + 1 and the sums and gradient of vector i, so three short dependency chains overlap
// instead of one long one (load to exp to sums to store): the loop is bound by how many chains the
// out-of-order window holds, not by the execution ports (in cache, 1.4x the one-vector-a-step loop).
// Kept out of line, with the sums in locals: the loop then holds them in registers (inside block(), with
// its row and token-path state live, they would spill). kMask: a mask array; kSt: the gradient store
// (store_grad); no per-vector branch on either.
template <bool kMask, int kSt>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static int64_t common_run(const Kern& s, int64_t t, int64_t end, __m256 wv, __m256d wd, Acc& acc_io) {
  const float *const lpp = s.lp, *const oldp = s.old, *const advp = s.adv;
  const uint8_t* const maskp = s.mask;
  float* const gradp = s.grad;
  const float thr = std::min(s.clamp, 40.0f);
  // Stage 1 of the vector at u (u < end): false when it needs the token path. x and a are +0 on
  // invalid lanes (see common_vector).
  auto load = [&](int64_t u, Stage& o) {
    if (u >= end) return false;
    __m256 valid = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    if (kMask) {  // mask bytes were checked to be 0/1 in pass 1
      const __m256i m32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(maskp + u)));
      valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(m32, _mm256_setzero_si256()));
      if ((u & 63) == 0) prefetch(maskp, u + kPrefetch);
    }
    // every vector: two prefetches per line of each stream, cheaper than a branch on u
    prefetch(lpp, u + kPrefetch);
    prefetch(oldp, u + kPrefetch);
    prefetch(advp, u + kPrefetch);
    __m256 a = _mm256_loadu_ps(advp + u);
    __m256 x = _mm256_sub_ps(_mm256_loadu_ps(lpp + u), _mm256_loadu_ps(oldp + u));
    if (kMask) {
      a = _mm256_and_ps(valid, a);
      x = _mm256_and_ps(valid, x);
    }
    // NaN compares false: a vector with a non-finite valid input leaves too
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 fast = _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(x, absmask), _mm256_set1_ps(thr), _CMP_LE_OQ),
                                      _mm256_cmp_ps(_mm256_and_ps(a, absmask), _mm256_set1_ps(0x1p40f), _CMP_LE_OQ));
    if (_mm256_movemask_ps(fast) != 0xFF) return false;
    o.x = x;
    o.a = a;
    o.valid = valid;
    exp_reduce(x, o.j, o.r);
    return true;
  };
  Stage s0, s1;
  if (!load(t, s0)) return t;
  s0.r = exp_finish(s0.j, s0.r);  // s0.r holds ρ from here on
  bool more1 = load(t + 8, s1);
  Acc acc = acc_io;
  for (;;) {
    Stage s2;
    const bool more2 = more1 && load(t + 16, s2);
    __m256 r1 = _mm256_setzero_ps();
    if (more1) r1 = exp_finish(s1.j, s1.r);
    const __m256 g = common_vector(s, s0.x, s0.a, s0.r, s0.valid, wv, wd, wd, acc);
    store_grad<kSt>(gradp + t, g);
    t += 8;
    if (!more1) break;
    s0 = s1;
    s0.r = r1;
    s1 = s2;
    more1 = more2;
  }
  acc_io = acc;
  return t;
}

// Tokens [b, e) of one block (b a multiple of 8), with or without a log-ratio clamp (s.clamp = inf).
// stream: the gradient is a large reused array; written with streaming stores when 16-byte aligned.
// Whole vectors inside a row go through common_run; here remain the vectors a row starts in and those
// that need the token path, in the same order, so the sums are the same.
static void block(const Kern& s, int64_t rows, int64_t b, int64_t e, bool stream, Partial& p) {
  const __m256 zero = _mm256_setzero_ps();
  // The common path needs |δ| within the clamp and <= 40 (exp's range, ρ <= 2.4e17) and |A| <= 2^40
  // (−A·ρ stays far from float32 overflow). NaN compares as out of bounds.
  const __m256 thr = _mm256_set1_ps(std::min(s.clamp, 40.0f));
  const __m256 amax = _mm256_set1_ps(0x1p40f);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // mx starts at 0, below every valid ρ: a lane still at 0 at the end saw no valid token
  Acc acc{zero, zero, _mm256_set1_ps(std::numeric_limits<float>::infinity()), zero, _mm256_setzero_si256(),
          _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), 0};
  // Locals: the compiler cannot tell that the gradient stores leave the Kern fields alone.
  const float *const lpp = s.lp, *const oldp = s.old, *const advp = s.adv, *const wf = s.wf;
  const double* const wd = s.w;
  const uint8_t* const maskp = s.mask;
  const int32_t* const off = s.off;
  float* const gradp = s.grad;
  // Streaming stores need aligned addresses; vectors start at multiples of 8 tokens, so each has the
  // gradient's own alignment: whole 32-byte vectors when it is 32-byte aligned, 16-byte halves when it is
  // 16-byte aligned (large allocations often are), else ordinary stores.
  const uintptr_t ga = reinterpret_cast<uintptr_t>(gradp);
  const int st = !stream ? 0 : (ga & 31) == 0 ? 1 : (ga & 15) == 0 ? 2 : 0;
  using RunFn = int64_t (*)(const Kern&, int64_t, int64_t, __m256, __m256d, Acc&);
  static constexpr RunFn kRuns[2][3] = {{&common_run<false, 0>, &common_run<false, 1>, &common_run<false, 2>},
                                        {&common_run<true, 0>, &common_run<true, 1>, &common_run<true, 2>}};
  const RunFn run = kRuns[maskp != nullptr][st];
  int64_t r = row_of(off, rows, b);
  __m256 cw = _mm256_set1_ps(wf[r]);
  __m256d cwd = _mm256_set1_pd(wd[r]);
  int64_t rend = off[r + 1];
  int64_t t = b;
  while (t < e) {
    // k = 8 but for the block's last partial vector, which goes through the same vector path (zero
    // padding, invalid lanes): a token's result does not depend on where the call's tokens start
    const int64_t k = std::min<int64_t>(8, e - t);
    if (rend <= t) {
      do ++r; while (off[r + 1] <= t);
      cw = _mm256_set1_ps(wf[r]);
      cwd = _mm256_set1_pd(wd[r]);
      rend = off[r + 1];
    }
    if (t + 8 <= rend && k == 8) {  // whole vectors of this row: the common path's tight loop
      const int64_t stop = std::min(e, rend);
      t = run(s, t, t + (stop - t) / 8 * 8, cw, cwd, acc);
      if (t + 8 > stop) continue;  // the row (or the block) ends within the next vector
      // else a vector for the token path, below
    }
    __m256 wv = cw;
    __m256d wlo = cwd, whi = cwd;
    for (int64_t q = r; off[q + 1] < t + k;) {  // rows starting inside these tokens: per-lane weights
      ++q;
      const unsigned from = (0xFFu << (off[q] - t)) & 0xFFu;
      wv = _mm256_blendv_ps(wv, _mm256_set1_ps(wf[q]), lanes_ps(from));
      wlo = _mm256_blendv_pd(wlo, _mm256_set1_pd(wd[q]), lanes_pd(from & 15u));
      whi = _mm256_blendv_pd(whi, _mm256_set1_pd(wd[q]), lanes_pd(from >> 4));
    }
    alignas(32) float lpb[8] = {}, oldb[8] = {}, advb[8] = {};
    alignas(8) uint8_t mb[8] = {};
    const float *lpv = lpp + t, *oldv = oldp + t, *advv = advp + t;
    const uint8_t* mv = maskp ? maskp + t : nullptr;
    if (k < 8) {
      std::copy(lpv, lpv + k, lpb);
      std::copy(oldv, oldv + k, oldb);
      std::copy(advv, advv + k, advb);
      if (mv) std::copy(mv, mv + k, mb);
      lpv = lpb;
      oldv = oldb;
      advv = advb;
      if (mv) mv = mb;
    }
    __m256 valid = lanes_ps((1u << k) - 1);
    if (mv) {  // mask bytes were checked to be 0/1 in pass 1
      const __m256i m32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mv)));
      valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(m32, _mm256_setzero_si256()));
    }
    if ((t & 15) == 0) {
      prefetch(lpp, t + kPrefetch);
      prefetch(oldp, t + kPrefetch);
      prefetch(advp, t + kPrefetch);
      if (maskp && (t & 63) == 0) prefetch(maskp, t + kPrefetch);
    }
    const __m256 a = _mm256_and_ps(valid, _mm256_loadu_ps(advv));  // +0 on invalid lanes (common_vector)
    const __m256 x = _mm256_and_ps(valid, _mm256_sub_ps(_mm256_loadu_ps(lpv), _mm256_loadu_ps(oldv)));
    const __m256 fast = _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(x, absmask), thr, _CMP_LE_OQ),
                                      _mm256_cmp_ps(_mm256_and_ps(a, absmask), amax, _CMP_LE_OQ));
    alignas(32) float gl[8];
    if (_mm256_movemask_ps(fast) == 0xFF) {
      _mm256_store_ps(gl, common_vector(s, x, a, exp_ps(x), valid, wv, wlo, whi, acc));
    } else {
      // the clamp, a large |δ| or |A|, or a non-finite input: token by token
      alignas(32) float wl[8];
      alignas(32) double wdl[8];
      _mm256_store_ps(wl, wv);
      _mm256_store_pd(wdl, wlo);
      _mm256_store_pd(wdl + 4, whi);
      for (int64_t i = 0; i < k; ++i) gl[i] = token_scalar(s, t + i, maskp ? maskp[t + i] : 1, wdl[i], wl[i], p);
    }
    if (k < 8) std::copy(gl, gl + k, gradp + t);
    else if (st == 1) store_grad<1>(gradp + t, _mm256_load_ps(gl));
    else if (st == 2) store_grad<2>(gradp + t, _mm256_load_ps(gl));
    else _mm256_storeu_ps(gradp + t, _mm256_load_ps(gl));
    t += k;
  }
  if (st != 0) _mm_sfence();  // streaming stores are weakly ordered: complete them before the task ends
  flush(acc);
  alignas(32) double l[4], xs[4], rs[4];
  alignas(32) float mn[8], mx[8];
  alignas(32) uint32_t c8[8];
  _mm256_store_pd(l, acc.dl);
  _mm256_store_pd(xs, acc.dx);
  _mm256_store_pd(rs, acc.dr);
  _mm256_store_si256(reinterpret_cast<__m256i*>(c8), acc.cnt);
  _mm256_store_ps(mn, acc.mn);
  _mm256_store_ps(mx, acc.mx);
  for (int i = 0; i < 4; ++i) { p.loss += l[i]; p.neg_kl -= xs[i]; p.ratio_sum += rs[i]; }
  for (int i = 0; i < 8; ++i) {
    p.clipped += c8[i] & 0xffffu;
    p.lower += c8[i] >> 16;
    p.ratio_min = mn[i] < p.ratio_min ? mn[i] : p.ratio_min;
    p.ratio_max = mx[i] > 0 && mx[i] > p.ratio_max ? mx[i] : p.ratio_max;  // 0: no valid token in the lane
  }
}

// Valid-token counts of rows [r0, r1), 32 mask bytes per step; false when a byte is neither 0 nor 1.
static bool count_rows(const uint8_t* mask, const int32_t* off, int64_t r0, int64_t r1, double* cnt) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i any = zero;
  uint8_t any_tail = 0;
  for (int64_t r = r0; r < r1; ++r) {
    __m256i sum = zero;
    int64_t t = off[r];
    const int64_t e = off[r + 1];
    for (; t + 32 <= e; t += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask + t));
      any = _mm256_or_si256(any, v);
      sum = _mm256_add_epi64(sum, _mm256_sad_epu8(v, zero));
    }
    alignas(32) int64_t q[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), sum);
    int64_t c = q[0] + q[1] + q[2] + q[3];
    for (; t < e; ++t) { c += mask[t]; any_tail |= mask[t]; }
    cnt[r] = static_cast<double>(c);
  }
  // a byte > 1 has a bit outside bit 0 set
  return _mm256_testz_si256(any, _mm256_set1_epi8(static_cast<char>(0xFE))) && (any_tail & 0xFE) == 0;
}

}  // namespace avx2
}  // namespace ppo
}  // namespace gear
GEAR_TARGET_END

const gear::ppo::PolicyLossKernels gear::ppo::policy_loss_avx2 = {&gear::ppo::avx2::block, &gear::ppo::avx2::block,
                                                    &gear::ppo::avx2::count_rows, true};
#endif  // GEAR_X86
