// sparseDivergence's kernels for AVX-512 (F/BW/VL/DQ), for lists of at most kSmallK entries (longer ones
// take sparse_divergence_probs.inc's loops, also compiled here): each side's checks and probabilities, the
// id matching by vector compares, the shared sums, the entropy pass, the tail bucket's gradient and eight
// logs at once, eight doubles wide with masked tails. Inside its own target region and namespace (nothing
// compiled here leaks into other paths).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "gear/isa_target.h"
#include "sparse_divergence_kernels.h"

#if GEAR_X86
#include <immintrin.h>

GEAR_AVX512_DIAG_BEGIN
GEAR_TARGET_BEGIN(GEAR_AVX512_FEATURES)
namespace gear {
namespace avx512 {
namespace {
using namespace sparse_kern;
#include "sparse_divergence_probs.inc"

inline __m512d add(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
inline __m512d mul(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
inline __m512d splat(double v) { return _mm512_set1_pd(v); }

// The lanes of a list of k entries in the vector that starts at entry base (16 or 8 lanes).
inline __mmask16 lanes(int64_t k, int base) {
  const int64_t n = k - base;
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : n <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << n) - 1);
}
inline __mmask8 lanes8(int64_t k, int64_t base) {
  const int64_t n = k - base;
  return n >= 8 ? static_cast<__mmask8>(0xff) : n <= 0 ? static_cast<__mmask8>(0) : static_cast<__mmask8>((1u << n) - 1);
}

// e^x on eight lanes with exp_list's range (x clamped at 708, x <= -708 and NaN give 0), but half its
// vector operations (the per-entry exps are most of a row's arithmetic): x = (16 n' + j) ln2 / 16 + r,
// |r| <= ln2 / 32, 2^(j/16) from an in-register table (a permute), e^r by a degree-5 polynomial with FMA
// (truncation below 2e-13 relative, a thousandth of exp_list's), 2^n' by scalef. Not exp_list's bits
// (its values to 3e-10): every list of a row takes the same function, the thread count does not matter.
inline __m512d exp_list8(__m256 x) {
  const __m512d xd = _mm512_cvtps_pd(x);
  const __mmask8 keep = _mm512_cmp_pd_mask(xd, splat(-708.0), _CMP_GT_OQ);
  const __m512d xc = _mm512_min_pd(xd, splat(708.0));
  const __m512d shift = splat(6755399441055744.0);  // 1.5 * 2^52: the low bits of t hold n = round(16 x / ln2)
  const __m512d t = _mm512_fmadd_pd(xc, splat(23.083120654223414), shift);
  const __m512d n = _mm512_sub_pd(t, shift);
  __m512d r = _mm512_fnmadd_pd(n, splat(0.04332169878499658), xc);  // x - n ln2 / 16, ln2 / 16 in two parts
  r = _mm512_fnmadd_pd(n, splat(1.4494042586539372e-18), r);
  __m512d p = _mm512_fmadd_pd(splat(1.0 / 120.0), r, splat(1.0 / 24.0));
  p = _mm512_fmadd_pd(p, r, splat(1.0 / 6.0));
  p = _mm512_fmadd_pd(p, r, splat(0.5));
  p = _mm512_fmadd_pd(p, r, splat(1.0));
  p = _mm512_fmadd_pd(p, r, splat(1.0));
  // 2^(j/16), j = n mod 16 (the index's low four bits pick the lane of the two halves)
  const __m512d t0 = _mm512_set_pd(1.3542555469368927, 1.2968395546510096, 1.241857812073484, 1.189207115002721,
                                   1.1387886347566916, 1.0905077326652577, 1.0442737824274138, 1.0);
  const __m512d t1 = _mm512_set_pd(1.9152065613971474, 1.8340080864093424, 1.7562521603732995, 1.681792830507429,
                                   1.6104903319492543, 1.5422108254079407, 1.4768261459394993, 1.4142135623730951);
  const __m512d tj = _mm512_permutex2var_pd(t0, _mm512_castpd_si512(t), t1);
  // scalef multiplies by 2^floor(n / 16) (exact: n / 16 is a double)
  return _mm512_maskz_scalef_pd(keep, mul(tj, p), mul(n, splat(0.0625)));
}

// side_probs for lists of at most kSmallK entries, eight at a time with masked tails (exp_list8's values,
// summed in eight running sums); a list that fails a check goes to side_probs for the diagnosis.
int side_probs_short(const int32_t* ids, const float* lp, int64_t k, int64_t vocab, double* prob, double* mass,
                     int64_t* valid_out, int64_t* where) {
  if (k > kSmallK) return side_probs(ids, lp, k, vocab, prob, mass, valid_out, where);
  // id + 1 >= hi + 1 unsigned: id < -1, or id >= vocab (without one, id + 1 past 2^31 - 1: id < -1, and the
  // id 2^31 - 1, which side_probs then clears).
  const bool open = vocab <= 0 || vocab > INT32_MAX;
  const __m256i hi1 = _mm256_set1_epi32(static_cast<int32_t>(open ? 0x80000000u : static_cast<uint32_t>(vocab) + 1u));
  const __m256i m1 = _mm256_set1_epi32(-1), one = _mm256_set1_epi32(1);
  const __m256 ninf = _mm256_set1_ps(-INFINITY), pinf = _mm256_set1_ps(INFINITY);
  __m512d acc = _mm512_setzero_pd();
  uint32_t bad = 0;
  int valid = 0;
  for (int64_t i = 0; i < k; i += 8) {
    const __mmask8 m = lanes8(k, i);
    const __m256i id = _mm256_maskz_loadu_epi32(m, ids + i);
    const __m256 x = _mm256_maskz_loadu_ps(m, lp + i);
    const __mmask8 pad = _mm256_cmpeq_epi32_mask(id, m1);
    bad |= m & (_mm256_cmp_ps_mask(x, pinf, _CMP_NLT_UQ) |  // NaN or +Infinity
                _mm256_cmpge_epu32_mask(_mm256_add_epi32(id, one), hi1) | (pad & _mm256_cmp_ps_mask(x, ninf, _CMP_NEQ_UQ)));
    valid += bit_count(m & _mm256_cmpgt_epi32_mask(id, m1));
    const __m512d p = _mm512_maskz_mov_pd(m, exp_list8(x));
    _mm512_mask_storeu_pd(prob + i, m, p);
    acc = add(acc, p);
  }
  if (bad) return side_probs(ids, lp, k, vocab, prob, mass, valid_out, where);
  const double sum = _mm512_reduce_add_pd(acc);
  *where = -1;
  if (!(sum <= kMaxMass)) return kMass;
  *mass = sum;
  *valid_out = valid;
  return kOk;
}

// list_entropy for lists of at most kSmallK entries, eight at a time: lmn is the smallest log-prob with
// p > 0 and mn the smallest such p (exp_list8 is monotone to rounding: mn = e^lmn to rounding, without
// another exp); hk sums in another order.
void list_entropy_short(const int32_t* ids, const float* lp, const double* prob, int64_t k, ListEntropy* out) {
  if (k > kSmallK) return list_entropy(ids, lp, prob, k, out);
  const __m256i m1 = _mm256_set1_epi32(-1);
  __m512d hk = _mm512_setzero_pd(), pmin = splat(INFINITY);
  __m256 amin = _mm256_set1_ps(INFINITY);
  int listed = 0;
  for (int64_t i = 0; i < k; i += 8) {
    const __mmask8 m = lanes8(k, i);
    const __mmask8 lst = _mm256_mask_cmpgt_epi32_mask(m, _mm256_maskz_loadu_epi32(m, ids + i), m1);
    const __m256 x = _mm256_maskz_loadu_ps(m, lp + i);
    const __m512d p = _mm512_maskz_loadu_pd(m, prob + i);
    const __mmask8 keep = _mm512_mask_cmp_pd_mask(lst, p, _mm512_setzero_pd(), _CMP_GT_OQ);
    listed += bit_count(lst);
    hk = _mm512_mask_sub_pd(hk, keep, hk, _mm512_mul_pd(p, _mm512_cvtps_pd(x)));
    pmin = _mm512_mask_min_pd(pmin, keep, pmin, p);
    amin = _mm256_mask_min_ps(amin, keep, amin, x);
  }
  __m128 a4 = _mm_min_ps(_mm256_castps256_ps128(amin), _mm256_extractf128_ps(amin, 1));
  a4 = _mm_min_ps(a4, _mm_movehl_ps(a4, a4));
  a4 = _mm_min_ss(a4, _mm_shuffle_ps(a4, a4, 1));
  const float a = _mm_cvtss_f32(a4);
  const bool any = a < INFINITY;
  *out = {_mm512_reduce_add_pd(hk), any ? _mm512_reduce_min_pd(pmin) : static_cast<double>(INFINITY),
          any ? static_cast<double>(a) : 0.0, listed};
}

// log_pos of sparse_divergence.cc on eight lanes (x > 0 finite): its reduction and series, with FMA and
// s = f / (2 + f) from rcp14 and two Newton steps instead of a division (a 512-bit division is as slow as
// the rest together). Not log_pos's bits: its values to 1e-16 absolute, within its own 2e-14.
inline __m512d log_pos8(__m512d x) {
  const __mmask8 sub = _mm512_cmp_pd_mask(x, splat(2.2250738585072014e-308), _CMP_LT_OQ);
  x = _mm512_mask_mul_pd(x, sub, x, splat(18014398509481984.0));  // 2^54
  const __m512i bias = _mm512_maskz_mov_epi64(sub, _mm512_set1_epi64(-54));
  const __m512i b = _mm512_castpd_si512(x);
  const __m512i off = _mm512_sub_epi64(b, _mm512_set1_epi64(0x3fe6a09e667f3bcdLL));
  const __m512i k = _mm512_srai_epi64(off, 52);
  const __m512d m = _mm512_castsi512_pd(_mm512_sub_epi64(b, _mm512_slli_epi64(k, 52)));
  const __m512d ed = _mm512_cvtepi64_pd(_mm512_add_epi64(k, bias));
  const __m512d f = _mm512_sub_pd(m, splat(1.0));
  const __m512d d = add(splat(2.0), f);  // in [1.7, 2.5): rcp14's 2^-14 becomes 2^-56 after two steps
  __m512d y = _mm512_rcp14_pd(d);
  y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(d, y, splat(1.0)), y);
  y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(d, y, splat(1.0)), y);
  const __m512d sv = mul(f, y);
  const __m512d z = mul(sv, sv);
  __m512d q = splat(2.0 / 15.0);
  q = _mm512_fmadd_pd(q, z, splat(2.0 / 13.0));
  q = _mm512_fmadd_pd(q, z, splat(2.0 / 11.0));
  q = _mm512_fmadd_pd(q, z, splat(2.0 / 9.0));
  q = _mm512_fmadd_pd(q, z, splat(2.0 / 7.0));
  q = _mm512_fmadd_pd(q, z, splat(2.0 / 5.0));
  q = _mm512_fmadd_pd(q, z, splat(2.0 / 3.0));
  const __m512d lm = _mm512_fmadd_pd(sv, mul(z, q), add(sv, sv));
  return _mm512_fmadd_pd(ed, splat(0.6931471803691238), _mm512_fmadd_pd(ed, splat(1.9082149292705877e-10), lm));
}

void logs8_v(double* x, int) { _mm512_store_pd(x, log_pos8(_mm512_load_pd(x))); }

// The teacher's log-probs and probabilities of a row (at most kSmallK entries), held in registers, and
// their values at eight teacher indices (permutes, not gathers).
struct TeacherRow {
  __m512 c0, c1;         // log-probs 0..15, 16..31
  __m512d q0, q1, q2, q3;  // probabilities 0..7, ..., 24..31
  TeacherRow(const float* tlp, const double* pt, int64_t kt) {
    c0 = _mm512_maskz_loadu_ps(lanes(kt, 0), tlp);
    c1 = _mm512_maskz_loadu_ps(lanes(kt, 16), tlp + 16);
    q0 = _mm512_maskz_loadu_pd(lanes8(kt, 0), pt);
    q1 = _mm512_maskz_loadu_pd(lanes8(kt, 8), pt + 8);
    q2 = _mm512_maskz_loadu_pd(lanes8(kt, 16), pt + 16);
    q3 = _mm512_maskz_loadu_pd(lanes8(kt, 24), pt + 24);
  }
  // ix: eight indices in [0, 32) (the lanes past them unused).
  __m512d c_at(__m256i ix) const {
    return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_permutex2var_ps(c0, _mm512_castsi256_si512(ix), c1)));
  }
  __m512d q_at(__m256i ix) const {
    const __m512i i64 = _mm512_cvtepi32_epi64(ix);
    const __m512d lo = _mm512_permutex2var_pd(q0, i64, q1), hi = _mm512_permutex2var_pd(q2, i64, q3);
    return _mm512_mask_mov_pd(lo, _mm512_test_epi64_mask(i64, _mm512_set1_epi64(16)), hi);
  }
};

// Eight student entries from i and, where they are shared (tix >= 0), the teacher's values at tix: the
// loads both the shared sums and the tail-bucket gradient start from.
struct SharedLanes {
  __mmask8 m, hit;
  __m512d a, p, cc, q;
  SharedLanes(const TeacherRow& tr, const float* slp, const double* ps, const int32_t* tix, int64_t ks, int64_t i) {
    m = lanes8(ks, i);
    const __m256i ix = _mm256_maskz_loadu_epi32(m, tix + i);
    hit = _mm256_mask_cmpge_epi32_mask(m, ix, _mm256_setzero_si256());
    a = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(hit, slp + i));
    p = _mm512_maskz_loadu_pd(hit, ps + i);
    cc = _mm512_maskz_mov_pd(hit, tr.c_at(ix));
    q = _mm512_maskz_mov_pd(hit, tr.q_at(ix));
  }
};

// BucketGradFn, eight student entries at a time with the teacher's values at tix (dterm lane by lane).
void bucket_grad(const float* slp, const double* ps, int64_t ks, const float* tlp, const double* pt, int64_t kt,
                 const int32_t* tix, int kind, double beta, double g, double hb, float* o) {
  const TeacherRow tr(tlp, pt, kt);
  const __m512d zero = _mm512_setzero_pd(), gv = splat(g), hv = splat(hb), w0 = splat(1.0 - beta), w1 = splat(beta);
  for (int64_t i = 0; i < ks; i += 8) {
    const SharedLanes sl(tr, slp, ps, tix, ks, i);
    const __mmask8 m = sl.m, hit = sl.hit;
    const __m512d a = sl.a, p = sl.p, cc = sl.cc, q = sl.q;
    const __mmask8 pp = _mm512_mask_cmp_pd_mask(hit, p, zero, _CMP_GT_OQ);
    __m512d d;
    if (kind == 0) {
      d = _mm512_maskz_mov_pd(pp, mul(p, add(_mm512_sub_pd(a, cc), splat(1.0))));
    } else if (kind == 1) {
      d = _mm512_sub_pd(zero, q);
    } else {
      const __m512d mm = add(mul(w0, p), mul(w1, q));
      const __m512d lm = log_pos8(_mm512_mask_mov_pd(splat(1.0), pp, mm));
      d = _mm512_maskz_mov_pd(pp, mul(mul(w0, p), _mm512_sub_pd(a, lm)));
    }
    const __m512d gi = _mm512_maskz_mov_pd(hit, mul(gv, _mm512_sub_pd(d, mul(p, hv))));
    _mm256_mask_storeu_ps(o + i, m, _mm512_cvtpd_ps(gi));
  }
}

// SharedSumsFn, eight student entries at a time with the teacher's values at tix. term() lane by lane: a
// zero mass contributes nothing (masked), a positive mass against a zero one gives +Infinity by itself.
void shared_sums(const float* slp, const double* ps, int64_t ks, const float* tlp, const double* pt, int64_t kt,
                 const int32_t* tix, int kind, double beta, double* out) {
  const TeacherRow tr(tlp, pt, kt);
  __m512d ms = _mm512_setzero_pd(), mt = _mm512_setzero_pd(), v = _mm512_setzero_pd();
  const __m512d zero = _mm512_setzero_pd();
  const __m512d w0 = splat(1.0 - beta), w1 = splat(beta);
  for (int64_t i = 0; i < ks; i += 8) {
    const SharedLanes sl(tr, slp, ps, tix, ks, i);
    const __mmask8 hit = sl.hit;
    const __m512d a = sl.a, p = sl.p, cc = sl.cc, q = sl.q;
    ms = add(ms, p);
    mt = add(mt, q);
    const __mmask8 pp = _mm512_mask_cmp_pd_mask(hit, p, zero, _CMP_GT_OQ);
    const __mmask8 qp = _mm512_mask_cmp_pd_mask(hit, q, zero, _CMP_GT_OQ);
    if (kind == 0) {
      v = _mm512_mask_add_pd(v, pp, v, mul(p, _mm512_sub_pd(a, cc)));
    } else if (kind == 1) {
      v = _mm512_mask_add_pd(v, qp, v, mul(q, _mm512_sub_pd(cc, a)));
    } else {
      const __m512d mm = add(mul(w0, p), mul(w1, q));
      const __mmask8 live = _mm512_mask_cmp_pd_mask(hit, mm, zero, _CMP_GT_OQ);
      const __m512d lm = log_pos8(_mm512_mask_mov_pd(splat(1.0), live, mm));
      const __m512d tp = _mm512_maskz_mov_pd(pp, mul(mul(w0, p), _mm512_sub_pd(a, lm)));
      const __m512d tq = _mm512_maskz_mov_pd(qp, mul(mul(w1, q), _mm512_sub_pd(cc, lm)));
      v = _mm512_mask_add_pd(v, live, v, add(tp, tq));
    }
  }
  out[0] = _mm512_reduce_add_pd(ms);
  out[1] = _mm512_reduce_add_pd(mt);
  out[2] = _mm512_reduce_add_pd(v);
}

// Whether a list (NV vectors of 16, its lanes past k distinct values below -1) holds an id twice: the
// first vector against its own rotations by 1..8 (every pair of its lanes at some distance; the smallest
// xor per lane, 0 for a lane equal to another, stays in a register), then each entry past 16 broadcast
// against both vectors. Only listed lanes (id >= 0) count (the padding ids -1 are equal).
template <int R>
inline __m512i self_min(__m512i acc, __m512i v) {
  return _mm512_min_epu32(acc, _mm512_xor_si512(v, _mm512_alignr_epi32(v, v, R)));
}
inline __m512i self_dup(__m512i acc, __m512i v) {
  acc = self_min<1>(acc, v), acc = self_min<2>(acc, v), acc = self_min<3>(acc, v), acc = self_min<4>(acc, v);
  acc = self_min<5>(acc, v), acc = self_min<6>(acc, v), acc = self_min<7>(acc, v), acc = self_min<8>(acc, v);
  return acc;
}
// The listed lanes of v (id >= 0) that found their equal (acc: each lane's smallest xor).
inline uint32_t any_dup(__m512i acc, __m512i v) {
  return _mm512_mask_cmpeq_epi32_mask(_mm512_cmpge_epi32_mask(v, _mm512_setzero_si512()), acc, _mm512_setzero_si512());
}

// The entries 16 .. k - 1 of a list (in v1) that equal another entry of v0 or v1.
inline uint32_t dup_past16(const int32_t* ids, int64_t k, __m512i v0, __m512i v1) {
  const __m512i zero = _mm512_setzero_si512();
  const __mmask16 l0 = _mm512_cmpge_epi32_mask(v0, zero), l1 = _mm512_cmpge_epi32_mask(v1, zero);
  uint32_t d = 0;
  const int k32 = static_cast<int>(k);
  for (int i = 16; i < k32; ++i) {
    const __m512i b = _mm512_set1_epi32(ids[i]);
    d |= static_cast<uint32_t>(_mm512_mask_cmpeq_epi32_mask(l0, v0, b)) |
         (static_cast<uint32_t>(_mm512_mask_cmpeq_epi32_mask(l1, v1, b)) & ~(1u << (i - 16)));
  }
  return d;
}

// Each student id is broadcast and compared with the teacher's whole list at once (NV vectors of 16): the
// match index comes from the mask. The lanes past k hold distinct values below -1, which no checked id
// equals. O(k^2 / 16) compares without a data-dependent branch.
template <int NV>
int64_t match_n(const int32_t* sid, int64_t ks, const int32_t* tid, int64_t kt, int32_t* tix) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i fill0 = _mm512_set_epi32(-17, -16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2);
  const __m512i fill1 = _mm512_sub_epi32(fill0, _mm512_set1_epi32(16));
  __m512i sv[NV], tv[NV];
  __mmask16 lt[NV];  // the teacher's listed (id >= 0) entries
  for (int v = 0; v < NV; ++v) {
    sv[v] = _mm512_mask_loadu_epi32(v == 0 ? fill0 : fill1, lanes(ks, 16 * v), sid + 16 * v);
    tv[v] = _mm512_mask_loadu_epi32(v == 0 ? fill0 : fill1, lanes(kt, 16 * v), tid + 16 * v);
    lt[v] = _mm512_cmpge_epi32_mask(tv[v], zero);
  }
  const __m512i ones = _mm512_set1_epi32(-1);
  uint32_t dup = any_dup(self_dup(ones, sv[0]), sv[0]) | any_dup(self_dup(ones, tv[0]), tv[0]);
  if (NV == 2) dup |= dup_past16(sid, ks, sv[0], sv[NV - 1]) | dup_past16(tid, kt, tv[0], tv[NV - 1]);
  const uint32_t listed_t = NV == 2 ? static_cast<uint32_t>(lt[0]) | static_cast<uint32_t>(lt[NV - 1]) << 16 : lt[0];
  const int ks32 = static_cast<int>(ks);
  int64_t shared = 0;
  for (int i = 0; i < ks32; ++i) {
    const __m512i b = _mm512_set1_epi32(sid[i]);
    uint32_t hit = _mm512_cmpeq_epi32_mask(tv[0], b);
    if (NV == 2) hit |= static_cast<uint32_t>(_mm512_cmpeq_epi32_mask(tv[NV - 1], b)) << 16;
    hit &= listed_t;
    tix[i] = hit ? static_cast<int32_t>(low_bit(hit)) : -1;
    shared += hit != 0;
  }
  return dup ? -1 : shared;
}

int64_t match_small(const int32_t* sid, int64_t ks, const int32_t* tid, int64_t kt, int32_t* tix) {
  return std::max(ks, kt) <= 16 ? match_n<1>(sid, ks, tid, kt, tix) : match_n<2>(sid, ks, tid, kt, tix);
}
}  // namespace
}  // namespace avx512
}  // namespace gear
GEAR_TARGET_END
GEAR_AVX512_DIAG_END

const gear::sparse_kern::SideProbsFn gear::sparse_kern::side_probs_avx512 = gear::avx512::side_probs_short;
const gear::sparse_kern::MatchSmallFn gear::sparse_kern::match_small_avx512 = gear::avx512::match_small;
const gear::sparse_kern::SharedSumsFn gear::sparse_kern::shared_sums_avx512 = gear::avx512::shared_sums;
const gear::sparse_kern::Logs8Fn gear::sparse_kern::logs8_avx512 = gear::avx512::logs8_v;
const gear::sparse_kern::BucketGradFn gear::sparse_kern::bucket_grad_avx512 = gear::avx512::bucket_grad;
const gear::sparse_kern::ListEntropyFn gear::sparse_kern::list_entropy_avx512 = gear::avx512::list_entropy_short;
#endif  // GEAR_X86
