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
  double w;  // the row's aggregation weight (0 for rows without weight)
  double lo, hi, c, clamp;  // 1 - ε_low, 1 + ε_high, dual clip, log-ratio clamp (inf = none)
};

// One token, float64, with torch's gradient conventions (see ts/losses/policy_loss.ts, ppoTerms).
inline void token_scalar(const Seg& s, int64_t t, Partial& p) {
  const uint8_t mt = s.mask ? s.mask[t] : 1;
  const double a = s.adv[t];
  const double x0 = static_cast<double>(s.lp[t]) - static_cast<double>(s.old[t]);
  if (mt > 1 || (mt && !(std::isfinite(a) && std::isfinite(x0)))) {
    if (p.bad < 0) p.bad = t;
    s.grad[t] = 0.0f;
    return;
  }
  double x = x0, dx = 1;
  if (x < -s.clamp) { x = -s.clamp; dx = 0; } else if (x > s.clamp) { x = s.clamp; dx = 0; }
  const double r = std::exp(x);
  const double L1 = -a * r;
  double rc = r, drc = 1;
  if (r < s.lo) { rc = s.lo; drc = 0; } else if (r > s.hi) { rc = s.hi; drc = 0; }
  const double L2 = -a * rc;
  const double d1 = -a * r * dx;
  const double d2 = -a * r * dx * drc;
  const double Lc = std::max(L1, L2);
  const double dc = L1 > L2 ? d1 : L2 > L1 ? d2 : 0.5 * (d1 + d2);
  double Lt = Lc, dt = dc;
  double low = 0;
  if (a < 0) {
    const double L3 = -a * s.c;
    Lt = std::min(L3, Lc);
    dt = L3 < Lc ? 0 : Lc < L3 ? dc : 0.5 * (0 + dc);
    low = Lc > L3 ? 1 : 0;
  }
  if (!mt) { s.grad[t] = 0.0f; return; }
  s.grad[t] = static_cast<float>(s.w * dt);
  p.loss += s.w * Lt;
  p.clipped += L2 > L1 ? 1 : 0;
  p.lower += low;
  p.neg_kl += -x;
  p.ratio_sum += r;
  p.ratio_min = std::min(p.ratio_min, r);
  p.ratio_max = std::max(p.ratio_max, r);
}

void range_baseline(const Seg& s, int64_t b, int64_t e, Partial& p) {
  for (int64_t t = b; t < e; ++t) token_scalar(s, t, p);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// AVX-512 variant: 8 tokens per step in float64, explicit per-lane accumulators (fixed lane order).
#pragma GCC push_options
// GCC 12 warns about the undefined pass-through operand inside its own AVX-512 intrinsic headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
namespace avx512 {

// kBounded: the caller guarantees |x| <= 1000 (the log-ratio clamp), so the range clamp is skipped.
template <bool kBounded>
static inline __m512d exp_pd(__m512d x) {
  // Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, a degree-11 Taylor polynomial evaluated by
  // Estrin's scheme (short dependency chains; truncation error < 1e-14 relative), then scalef by 2^n.
  if (!kBounded) x = _mm512_min_pd(_mm512_max_pd(x, _mm512_set1_pd(-1000.0)), _mm512_set1_pd(1000.0));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), x);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d r4 = _mm512_mul_pd(r2, r2);
  const __m512d r8 = _mm512_mul_pd(r4, r4);
  const __m512d p01 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0), _mm512_set1_pd(1.0));
  const __m512d p23 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 6), _mm512_set1_pd(0.5));
  const __m512d p45 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 120), _mm512_set1_pd(1.0 / 24));
  const __m512d p67 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 5040), _mm512_set1_pd(1.0 / 720));
  const __m512d p89 = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 362880), _mm512_set1_pd(1.0 / 40320));
  const __m512d pab = _mm512_fmadd_pd(r, _mm512_set1_pd(1.0 / 39916800), _mm512_set1_pd(1.0 / 3628800));
  const __m512d q0 = _mm512_fmadd_pd(p23, r2, p01);
  const __m512d q1 = _mm512_fmadd_pd(p67, r2, p45);
  const __m512d q2 = _mm512_fmadd_pd(pab, r2, p89);
  const __m512d p = _mm512_fmadd_pd(q2, r8, _mm512_fmadd_pd(q1, r4, q0));
  return _mm512_scalef_pd(p, n);
}

// In cache this loop runs at ~3 ns/token (one thread), slower than memory streams its 17 bytes: it is
// bound by its vector instruction count. So the uncommon cases (a log-ratio outside the clamp,
// negative advantages for the dual clip) are branched around per vector of 8 tokens (advantages are
// usually constant over a row, so the branches predict).
template <bool kClamp, bool kBounded>
static void range_t(const Seg& s, int64_t b, int64_t e, Partial& p) {
  const __m512d zero = _mm512_setzero_pd();
  const __m512d half = _mm512_set1_pd(0.5);
  const __m512d w = _mm512_set1_pd(s.w);
  const __m512d lo = _mm512_set1_pd(s.lo), hi = _mm512_set1_pd(s.hi), cc = _mm512_set1_pd(s.c);
  const __m512d cl = _mm512_set1_pd(kClamp ? s.clamp : 0.0), ncl = _mm512_set1_pd(kClamp ? -s.clamp : 0.0);
  const __m512d inf = _mm512_set1_pd(std::numeric_limits<double>::infinity());
  __m512d acc_loss = zero, acc_clip = zero, acc_low = zero, acc_kl = zero, acc_r = zero;
  __m512d acc_min = inf, acc_max = _mm512_set1_pd(-std::numeric_limits<double>::infinity());
  const __m512d one = _mm512_set1_pd(1.0);
  int64_t t = b;
  for (; t + 8 <= e; t += 8) {
    __mmask8 valid = 0xFF;
    if (s.mask) {
      const __m512i m64 = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s.mask + t)));
      valid = _mm512_test_epi64_mask(m64, m64);  // mask bytes were checked to be 0/1 in pass 1
    }
    const __m512d lp = _mm512_cvtps_pd(_mm256_loadu_ps(s.lp + t));
    const __m512d od = _mm512_cvtps_pd(_mm256_loadu_ps(s.old + t));
    const __m512d a = _mm512_cvtps_pd(_mm256_loadu_ps(s.adv + t));
    const __m512d x0 = _mm512_sub_pd(lp, od);
    // non-finite on a valid token: let the scalar path record it
    // x0 + a is NaN/±inf exactly when one of them is (both are far below overflow in float64)
    const __mmask8 nonfinite = _mm512_fpclass_pd_mask(_mm512_add_pd(x0, a), 0x01 | 0x08 | 0x10 | 0x80);
    if ((valid & nonfinite) != 0) { range_baseline(s, t, t + 8, p); continue; }
    __m512d x = x0;
    __mmask8 inx = 0xFF;
    if (kClamp) {
      // |x0| <= clamp is (x0 >= -clamp) & (x0 <= clamp), NaN false in both; x changes only outside.
      inx = _mm512_cmp_pd_mask(_mm512_abs_pd(x0), cl, _CMP_LE_OQ);
      if (inx != 0xFF) x = _mm512_min_pd(_mm512_max_pd(x0, ncl), cl);
    }
    const __m512d r = exp_pd<kBounded>(x);
    const __m512d na = _mm512_sub_pd(zero, a);  // −a (exact negation except the sign of zero)
    const __m512d L1 = _mm512_mul_pd(na, r);
    const __mmask8 inr = _mm512_cmp_pd_mask(r, lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(r, hi, _CMP_LE_OQ);
    const __m512d rc = _mm512_min_pd(_mm512_max_pd(r, lo), hi);
    const __m512d L2 = _mm512_mul_pd(na, rc);
    const __m512d d1 = kClamp ? _mm512_maskz_mov_pd(inx, L1) : L1;
    const __mmask8 g12 = _mm512_cmp_pd_mask(L1, L2, _CMP_GT_OQ);
    const __mmask8 g21 = _mm512_cmp_pd_mask(L2, L1, _CMP_GT_OQ);
    const __m512d Lc = _mm512_mask_mov_pd(L1, g21, L2);
    // The scalar rule is L1 > L2 ? d1 : L2 > L1 ? d2 : (d1 + d2) / 2. A tie with d1 != d2 needs r
    // outside [lo, hi] with -a r and -a rc rounding equal (or a NaN product): the average is computed
    // only for such lanes; on every other tie d2 = d1 (or both are +0), so the average is d1.
    const __m512d d2 = _mm512_maskz_mov_pd(inx & inr, L1);
    __m512d dc = _mm512_mask_mov_pd(d1, g21, d2);
    const __mmask8 odd = static_cast<__mmask8>(~(g12 | g21) & inx & ~inr);
    if (odd != 0) dc = _mm512_mask_mov_pd(dc, odd, _mm512_mul_pd(half, _mm512_add_pd(d1, d2)));
    __m512d Lt = Lc, dt = dc;
    const __mmask8 neg = _mm512_cmp_pd_mask(a, zero, _CMP_LT_OQ);
    if (neg != 0) {
      const __m512d L3 = _mm512_mul_pd(na, cc);
      const __mmask8 l3lt = _mm512_cmp_pd_mask(L3, Lc, _CMP_LT_OQ);
      const __mmask8 lclt = _mm512_cmp_pd_mask(Lc, L3, _CMP_LT_OQ);
      __m512d dd = _mm512_mul_pd(half, dc);
      dd = _mm512_mask_mov_pd(dd, l3lt, zero);
      dd = _mm512_mask_mov_pd(dd, lclt, dc);
      Lt = _mm512_mask_mov_pd(Lc, neg, _mm512_min_pd(L3, Lc));
      dt = _mm512_mask_mov_pd(dc, neg, dd);
      acc_low = _mm512_mask_add_pd(acc_low, valid & neg & _mm512_cmp_pd_mask(Lc, L3, _CMP_GT_OQ), acc_low, one);
    }
    const __m512d g = _mm512_maskz_mov_pd(valid, _mm512_mul_pd(w, dt));
    _mm256_storeu_ps(s.grad + t, _mm512_cvtpd_ps(g));
    acc_loss = _mm512_mask_add_pd(acc_loss, valid, acc_loss, _mm512_mul_pd(w, Lt));
    acc_clip = _mm512_mask_add_pd(acc_clip, valid & g21, acc_clip, one);
    acc_kl = _mm512_mask_sub_pd(acc_kl, valid, acc_kl, x);
    acc_r = _mm512_mask_add_pd(acc_r, valid, acc_r, r);
    acc_min = _mm512_mask_min_pd(acc_min, valid, acc_min, r);
    acc_max = _mm512_mask_max_pd(acc_max, valid, acc_max, r);
  }
  alignas(64) double l[8], cl8[8], lw[8], kl[8], rs[8], mn[8], mx[8];
  _mm512_store_pd(l, acc_loss); _mm512_store_pd(cl8, acc_clip); _mm512_store_pd(lw, acc_low);
  _mm512_store_pd(kl, acc_kl); _mm512_store_pd(rs, acc_r); _mm512_store_pd(mn, acc_min); _mm512_store_pd(mx, acc_max);
  for (int i = 0; i < 8; ++i) {
    p.loss += l[i]; p.clipped += cl8[i]; p.lower += lw[i]; p.neg_kl += kl[i]; p.ratio_sum += rs[i];
    p.ratio_min = mn[i] < p.ratio_min ? mn[i] : p.ratio_min;
    p.ratio_max = mx[i] > p.ratio_max ? mx[i] : p.ratio_max;
  }
  for (; t < e; ++t) token_scalar(s, t, p);
}

static void range(const Seg& s, int64_t b, int64_t e, Partial& p) {
  // The bounded exp needs |x| <= 1000, which the clamp guarantees when it is at most that.
  if (!std::isfinite(s.clamp)) range_t<false, false>(s, b, e, p);
  else if (s.clamp <= 1000.0) range_t<true, true>(s, b, e, p);
  else range_t<true, false>(s, b, e, p);
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
  const double clamp = pr.log_ratio_clamp > 0 ? pr.log_ratio_clamp : std::numeric_limits<double>::infinity();
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  std::vector<Partial> parts(static_cast<size_t>(nblocks));
  done = parallel_blocks(ctx, n, kBlock, [&](int64_t b, int64_t e, int) {
    Partial& p = parts[static_cast<size_t>(b / kBlock)];
    int64_t r = std::upper_bound(offsets, offsets + rows + 1, static_cast<int32_t>(b)) - offsets - 1;
    int64_t t = b;
    while (t < e) {
      while (offsets[r + 1] <= t) ++r;  // skip rows ending at or before t (empty rows included)
      const int64_t se = std::min<int64_t>(e, offsets[r + 1]);
      const Seg s{logprob, old_logprob, advantages, mask, grad, wrow[r], 1 - pr.clip_low, 1 + pr.clip_high, pr.clip_c, clamp};
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
