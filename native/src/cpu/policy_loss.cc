#include "gear/policy_loss.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gear/dispatch.h"
#include "gear/segment.h"
#include "gear/thread_pool.h"

namespace gear {

namespace {

constexpr int64_t kBlock = 1 << 15;  // tokens per block: the fixed partition that makes sums deterministic

struct Partial {
  double loss = 0, clipped = 0, lower = 0, neg_kl = 0, ratio_sum = 0;
  double ratio_min = std::numeric_limits<double>::infinity();
  double ratio_max = -std::numeric_limits<double>::infinity();
  int64_t bad = -1;  // first index with a non-finite input or a mask byte > 1
};

// Token-range kernel parameters shared by the ISA variants.
struct Seg {
  const float* lp;
  const float* old;
  const float* adv;
  const uint8_t* mask;
  float* grad;
  double w;   // the row's aggregation weight (0 for rows without weight), for the float64 loss sums
  float wf;   // the same weight rounded to float32, for the float32 gradient
  float lo, hi, c, clamp;  // 1 - ε_low, 1 + ε_high, dual clip, log-ratio clamp (inf = none)
};

// One token in float32 (as verl computes this loss in torch float32), with torch's gradient conventions
// (see ts/losses/policy_loss.ts, ppoTerms); the loss and metric sums are float64.
inline void token_scalar(const Seg& s, int64_t t, Partial& p) {
  const uint8_t mt = s.mask ? s.mask[t] : 1;
  const float a = s.adv[t], lp = s.lp[t], od = s.old[t];
  if (mt > 1 || (mt && !(std::isfinite(a) && std::isfinite(lp) && std::isfinite(od)))) {
    if (p.bad < 0) p.bad = t;
    s.grad[t] = 0.0f;
    return;
  }
  // lp - od may overflow to ±inf for finite inputs; the clamp (or exp) handles that like torch does.
  float x = lp - od, dx = 1;
  if (x < -s.clamp) { x = -s.clamp; dx = 0; } else if (x > s.clamp) { x = s.clamp; dx = 0; }
  const float r = std::exp(x);
  const float na = -a;
  const float L1 = na * r;
  float rc = r, drc = 1;
  if (r < s.lo) { rc = s.lo; drc = 0; } else if (r > s.hi) { rc = s.hi; drc = 0; }
  const float L2 = na * rc;
  const float d1 = L1 * dx;
  const float d2 = L1 * dx * drc;
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
  if (!mt) { s.grad[t] = 0.0f; return; }
  s.grad[t] = s.wf * dt;
  p.loss += s.w * static_cast<double>(Lt);
  p.clipped += L2 > L1 ? 1 : 0;
  p.lower += low;
  p.neg_kl -= static_cast<double>(x);
  p.ratio_sum += static_cast<double>(r);
  p.ratio_min = std::min(p.ratio_min, static_cast<double>(r));
  p.ratio_max = std::max(p.ratio_max, static_cast<double>(r));
}

void range_baseline(const Seg& s, int64_t b, int64_t e, Partial& p) {
  for (int64_t t = b; t < e; ++t) token_scalar(s, t, p);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// AVX-512 variant: 16 tokens per step in float32, float64 per-lane sums (fixed lane order). Row tails
// run the same vector code under a lane mask, so a token's result does not depend on its position.
#pragma GCC push_options
// GCC 12 warns about the undefined pass-through operand inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
namespace avx512 {

// float32 exp (Cephes expf: Cody-Waite reduction by ln2 in two parts, degree-5 polynomial, ~1 ulp),
// vscalefps for 2^n. The input clamp keeps the reduction exact; 2^n then over/underflows to inf/0.
static inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
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

static inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline __m512d hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }

// The uncommon cases (a log-ratio outside the clamp, negative advantages for the dual clip) are
// branched around per vector of 16 tokens (advantages are usually constant over a row, so they predict).
template <bool kClamp>
static void range_t(const Seg& s, int64_t b, int64_t e, Partial& p) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 w = _mm512_set1_ps(s.wf);
  const __m512d wd = _mm512_set1_pd(s.w);
  const __m512 lo = _mm512_set1_ps(s.lo), hi = _mm512_set1_ps(s.hi), cc = _mm512_set1_ps(s.c);
  const __m512 cl = _mm512_set1_ps(kClamp ? s.clamp : 0.0f), ncl = _mm512_set1_ps(kClamp ? -s.clamp : 0.0f);
  __m512d acc_loss = _mm512_setzero_pd(), acc_kl = _mm512_setzero_pd(), acc_r = _mm512_setzero_pd();
  __m512 acc_clip = zero, acc_low = zero;  // counts: exact in float32 (<= 2^11 per lane per block)
  __m512 acc_min = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  __m512 acc_max = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t t = b; t < e; t += 16) {
    const int64_t k = std::min<int64_t>(16, e - t);
    const __mmask16 lm = k == 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << k) - 1);
    __mmask16 valid = lm;
    if (s.mask) {
      const __m128i m8 = _mm_maskz_loadu_epi8(lm, s.mask + t);
      valid = _mm_test_epi8_mask(m8, m8);  // mask bytes were checked to be 0/1 in pass 1
    }
    const __m512 lp = _mm512_maskz_loadu_ps(lm, s.lp + t);
    const __m512 od = _mm512_maskz_loadu_ps(lm, s.old + t);
    const __m512 a = _mm512_maskz_loadu_ps(lm, s.adv + t);
    const __m512 x0 = _mm512_sub_ps(lp, od);
    // a non-finite x0 + a on a valid token (a non-finite input, or lp - old overflowing float32): the
    // scalar path records the input error or handles the overflow
    const __mmask16 nonfinite = _mm512_fpclass_ps_mask(_mm512_add_ps(x0, a), 0x01 | 0x08 | 0x10 | 0x80);
    if ((valid & nonfinite) != 0) { range_baseline(s, t, t + k, p); continue; }
    __m512 x = x0;
    __mmask16 inx = 0xFFFF;
    if (kClamp) {
      inx = _mm512_cmp_ps_mask(_mm512_abs_ps(x0), cl, _CMP_LE_OQ);
      if ((inx & lm) != lm) x = _mm512_min_ps(_mm512_max_ps(x0, ncl), cl);
    }
    const __m512 r = exp_ps(x);
    const __m512 na = _mm512_sub_ps(zero, a);
    const __m512 L1 = _mm512_mul_ps(na, r);
    const __mmask16 inr = _mm512_cmp_ps_mask(r, lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(r, hi, _CMP_LE_OQ);
    const __m512 rc = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    const __m512 L2 = _mm512_mul_ps(na, rc);
    const __m512 d1 = kClamp ? _mm512_maskz_mov_ps(inx, L1) : L1;
    const __mmask16 g12 = _mm512_cmp_ps_mask(L1, L2, _CMP_GT_OQ);
    const __mmask16 g21 = _mm512_cmp_ps_mask(L2, L1, _CMP_GT_OQ);
    const __m512 Lc = _mm512_mask_mov_ps(L1, g21, L2);
    // The scalar rule is L1 > L2 ? d1 : L2 > L1 ? d2 : (d1 + d2) / 2; on a tie with r inside [lo, hi]
    // d2 = d1, so the average is needed only on ties outside it.
    const __m512 d2 = _mm512_maskz_mov_ps(inx & inr, L1);
    __m512 dc = _mm512_mask_mov_ps(d1, g21, d2);
    const __mmask16 odd = static_cast<__mmask16>(~(g12 | g21) & inx & ~inr);
    if (odd != 0) dc = _mm512_mask_mov_ps(dc, odd, _mm512_mul_ps(half, _mm512_add_ps(d1, d2)));
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
      acc_low = _mm512_mask_add_ps(acc_low, valid & neg & _mm512_cmp_ps_mask(Lc, L3, _CMP_GT_OQ), acc_low, one);
    }
    _mm512_mask_storeu_ps(s.grad + t, lm, _mm512_maskz_mul_ps(valid, w, dt));
    const __m512 Lv = _mm512_maskz_mov_ps(valid, Lt), xv = _mm512_maskz_mov_ps(valid, x), rv = _mm512_maskz_mov_ps(valid, r);
    acc_loss = _mm512_fmadd_pd(wd, lo_pd(Lv), acc_loss);
    acc_loss = _mm512_fmadd_pd(wd, hi_pd(Lv), acc_loss);
    acc_kl = _mm512_sub_pd(_mm512_sub_pd(acc_kl, lo_pd(xv)), hi_pd(xv));
    acc_r = _mm512_add_pd(_mm512_add_pd(acc_r, lo_pd(rv)), hi_pd(rv));
    acc_clip = _mm512_mask_add_ps(acc_clip, valid & g21, acc_clip, one);
    acc_min = _mm512_mask_min_ps(acc_min, valid, acc_min, r);
    acc_max = _mm512_mask_max_ps(acc_max, valid, acc_max, r);
  }
  alignas(64) double l[8], kl[8], rs[8];
  alignas(64) float cl16[16], lw[16], mn[16], mx[16];
  _mm512_store_pd(l, acc_loss); _mm512_store_pd(kl, acc_kl); _mm512_store_pd(rs, acc_r);
  _mm512_store_ps(cl16, acc_clip); _mm512_store_ps(lw, acc_low); _mm512_store_ps(mn, acc_min); _mm512_store_ps(mx, acc_max);
  for (int i = 0; i < 8; ++i) { p.loss += l[i]; p.neg_kl += kl[i]; p.ratio_sum += rs[i]; }
  for (int i = 0; i < 16; ++i) {
    p.clipped += cl16[i]; p.lower += lw[i];
    p.ratio_min = mn[i] < p.ratio_min ? mn[i] : p.ratio_min;
    p.ratio_max = mx[i] > p.ratio_max ? mx[i] : p.ratio_max;
  }
}

static void range(const Seg& s, int64_t b, int64_t e, Partial& p) {
  if (std::isinf(s.clamp)) range_t<false>(s, b, e, p);
  else range_t<true>(s, b, e, p);
}

}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
// ---------------------------------------------------------------------------------------------------

static Status bad_option(const std::string& what, const std::string& expected, double got) {
  return error(Code::Option, what + ": expected " + expected + ", got " + std::to_string(got));
}

Status policy_loss_ppo(const float* logprob, const float* old_logprob, const float* advantages,
                       const uint8_t* mask, int64_t n, const int32_t* offsets, int64_t rows,
                       const PpoParams& pr, float* grad, PpoStats* stats, const ExecContext& ctx) {
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

  // Pass 1: per-row valid-token counts (1 byte per token when a mask is given), over row-aligned chunks
  // of about equal work.
  std::vector<double> cnt(static_cast<size_t>(rows), 0.0);
  std::vector<int64_t> bad_mask(static_cast<size_t>(row_chunk_count(n, rows)), -1);
  bool done = parallel_blocks(ctx, static_cast<int64_t>(bad_mask.size()), 1, [&](int64_t k, int64_t, int) {
    const int64_t r0 = row_chunk_begin(offsets, rows, k), r1 = row_chunk_begin(offsets, rows, k + 1);
    if (mask && r1 > r0) bad_mask[static_cast<size_t>(k)] = first_non_binary(mask, offsets[r0], offsets[r1]);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t0 = offsets[r], t1 = offsets[r + 1];
      int64_t c = 0;
      if (!mask) c = t1 - t0;
      else for (int64_t t = t0; t < t1; ++t) c += mask[t];  // 0/1 bytes (any others fail below)
      cnt[r] = static_cast<double>(c);
    }
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
  const bool use512 = active_isa() == Isa::Avx512;
  // Per-token math is float32 (as verl's torch loss): the bounds are rounded to float32 once here.
  const float clampf = pr.log_ratio_clamp > 0 ? static_cast<float>(pr.log_ratio_clamp) : std::numeric_limits<float>::infinity();
  const float lo = static_cast<float>(1 - pr.clip_low), hi = static_cast<float>(1 + pr.clip_high);
  const float cf = static_cast<float>(pr.clip_c);
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  std::vector<Partial> parts(static_cast<size_t>(nblocks));
  done = parallel_blocks(ctx, n, kBlock, [&](int64_t b, int64_t e, int) {
    Partial& p = parts[static_cast<size_t>(b / kBlock)];
    int64_t r = std::upper_bound(offsets, offsets + rows + 1, static_cast<int32_t>(b)) - offsets - 1;
    int64_t t = b;
    while (t < e) {
      while (offsets[r + 1] <= t) ++r;  // skip rows ending at or before t (empty rows included)
      const int64_t se = std::min<int64_t>(e, offsets[r + 1]);
      const Seg s{logprob, old_logprob, advantages, mask, grad, wrow[r], static_cast<float>(wrow[r]), lo, hi, cf, clampf};
      if (use512) avx512::range(s, t, se, p); else range_baseline(s, t, se, p);
      t = se;
    }
  });
  if (!done) return error(Code::Aborted, "policyLossPpo: aborted");
  PpoStats out;
  out.tokens = n_tok;
  out.ratio_min = std::numeric_limits<double>::infinity();
  out.ratio_max = -std::numeric_limits<double>::infinity();
  for (const Partial& p : parts) {
    if (p.bad >= 0) {
      const int64_t i = p.bad;
      if (mask && mask[i] > 1) return error(Code::Option, "mask[" + std::to_string(i) + "]: expected 0 or 1, got " + std::to_string(mask[i]));
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
