// Per-row finalisation math of the logits kernels, header-only so every backend (the CPU kernels here
// and a CUDA variant) shares it unchanged: from the streaming block statistics of a row (its max, the
// sum of exponentials and the exponential-weighted sums) to log-prob, entropy, logsumexp and the
// divergences, the rescaling when a row's running max grows, and the exact merge of partial statistics
// over vocabulary shards.
//
// Conventions. z = raw logits, T = temperature, inv_t = 1/T, x = z / T. Statistics are kept relative to
// a pivot m = the largest raw logit seen so far (-inf while none is finite), in natural-log units:
//   s = sum_v exp((z_v - m)/T)                       (sum of exponentials)
//   a = sum_v exp((z_v - m)/T) * (z_v - m)/T         (exponential-weighted centred logit)
// so that lse = m/T + ln s and entropy = ln s - a/s. A -inf logit contributes 0 to s and to a (0 log 0 = 0).
// Everything is float64: the kernels accumulate a block in float32 vectors and fold it in here.
#pragma once
#include <cmath>
#include <cstdint>

#include "gear/types.h"

#if defined(__CUDACC__)
#define GEAR_HD __host__ __device__ inline
#else
#define GEAR_HD inline
#endif

namespace gear {
namespace rowmath {

constexpr double kLn2 = 0.6931471805599453094172321214581766;
constexpr double kLog2e = 1.4426950408889634073599246810018921;

GEAR_HD double neg_inf() { return -HUGE_VAL; }
GEAR_HD double pos_inf() { return HUGE_VAL; }
GEAR_HD double quiet_nan() { return NAN; }

// Softmax statistics of one row, or of one vocabulary range of a row.
struct SoftmaxStats {
  double m;  // pivot: largest raw logit (-inf when the range has no finite logit)
  double s;  // sum exp((z - m)/T)
  double a;  // sum exp((z - m)/T) * (z - m)/T
};

GEAR_HD SoftmaxStats stats_empty() { return SoftmaxStats{neg_inf(), 0.0, 0.0}; }

// Moves the pivot up to new_m (>= st.m), rescaling the sums: with r = (m - new_m)/T,
// s' = e^r s and a' = e^r (a + r s).
GEAR_HD void stats_rescale(SoftmaxStats& st, double new_m, double inv_t) {
  if (!(new_m > st.m)) return;
  if (st.s == 0.0) {  // nothing finite yet: only the pivot moves
    st.m = new_m;
    return;
  }
  const double r = (st.m - new_m) * inv_t;
  const double f = exp(r);
  st.a = f * (st.a + r * st.s);
  st.s = f * st.s;
  st.m = new_m;
}

// Exact merge of two ranges of the same row (same temperature): rescale both to the larger pivot, add.
GEAR_HD SoftmaxStats stats_merge(SoftmaxStats x, SoftmaxStats y, double inv_t) {
  const double m = x.m > y.m ? x.m : y.m;
  if (m == neg_inf()) return stats_empty();
  stats_rescale(x, m, inv_t);
  stats_rescale(y, m, inv_t);
  return SoftmaxStats{m, x.s + y.s, x.a + y.a};
}

// logsumexp of the scaled logits z/T. -inf when the row has no finite logit.
GEAR_HD double stats_lse(const SoftmaxStats& st, double inv_t) {
  if (st.s == 0.0) return neg_inf();
  return st.m * inv_t + log(st.s);
}

// Entropy H = ln s - a/s, clamped at 0 (it is >= 0; rounding can leave -1e-16 on a one-hot row).
GEAR_HD double stats_entropy(const SoftmaxStats& st) {
  if (st.s == 0.0) return 0.0;
  const double h = log(st.s) - st.a / st.s;
  return h > 0.0 ? h : 0.0;
}

// log-prob of the target whose raw logit is z_y: (z_y - m)/T - ln s. -inf when z_y is -inf.
GEAR_HD double stats_logprob(double z_y, const SoftmaxStats& st, double inv_t) {
  if (z_y == neg_inf()) return neg_inf();
  return (z_y - st.m) * inv_t - log(st.s);
}

// Whether a logit is a mask in the divergences: -Infinity or a finite mask (below about -1e38, see
// kMaskScale). The same fused multiply-add on every backend, so they agree to the last bit.
GEAR_HD bool is_mask(float z) { return fmaf(z, kMaskScale, 3.4028234663852886e38f) == -HUGE_VALF; }

// A divergence's log-prob of the target: a finite mask is -Infinity there, as in its sums.
GEAR_HD double pair_logprob(double z_y, const SoftmaxStats& st, double inv_t) {
  return stats_logprob(is_mask(static_cast<float>(z_y)) ? neg_inf() : z_y, st, inv_t);
}

// Joint statistics of a student row and a teacher row at the same position (same temperature), one pass
// over both. Besides each side's SoftmaxStats, two cross sums weighted by one side's exponentials:
//   cs = sum_v exp((zs_v - ms)/T) * ((zs_v - ms) - (zt_v - mt))/T   (student-weighted difference)
//   ct = sum_v exp((zt_v - mt)/T) * ((zt_v - mt) - (zs_v - ms))/T   (teacher-weighted difference)
// A term whose weight is 0 (its own logit -inf) contributes 0; a weighted term whose other side is -inf
// is +inf: that is the support mismatch that makes the matching KL +inf.
struct PairStats {
  SoftmaxStats s;  // student
  SoftmaxStats t;  // teacher
  double cs;
  double ct;
};

GEAR_HD PairStats pair_empty() { return PairStats{stats_empty(), stats_empty(), 0.0, 0.0}; }

// Moves the student pivot up to new_m. The teacher-weighted difference grows by -r per unit weight.
GEAR_HD void pair_rescale_student(PairStats& p, double new_m, double inv_t) {
  if (!(new_m > p.s.m)) return;
  if (p.s.s == 0.0) {  // every student logit so far was -inf: ct is 0 or +inf already, shift-invariant
    p.s.m = new_m;
    return;
  }
  const double r = (p.s.m - new_m) * inv_t;
  const double f = exp(r);
  p.cs = f * (p.cs + r * p.s.s);
  p.ct = p.ct - r * p.t.s;
  p.s.a = f * (p.s.a + r * p.s.s);
  p.s.s = f * p.s.s;
  p.s.m = new_m;
}

// Moves the teacher pivot up to new_m.
GEAR_HD void pair_rescale_teacher(PairStats& p, double new_m, double inv_t) {
  if (!(new_m > p.t.m)) return;
  if (p.t.s == 0.0) {
    p.t.m = new_m;
    return;
  }
  const double r = (p.t.m - new_m) * inv_t;
  const double f = exp(r);
  p.ct = f * (p.ct + r * p.t.s);
  p.cs = p.cs - r * p.s.s;
  p.t.a = f * (p.t.a + r * p.t.s);
  p.t.s = f * p.t.s;
  p.t.m = new_m;
}

// KL(p_s || p_t) = cs/ss - ln ss + ln st, clamped at 0; +inf on a support mismatch.
GEAR_HD double pair_reverse_kl(const PairStats& p) {
  if (p.cs == pos_inf()) return pos_inf();
  const double d = p.cs / p.s.s - log(p.s.s) + log(p.t.s);
  return d > 0.0 ? d : 0.0;
}

// KL(p_t || p_s) = ct/st - ln st + ln ss, clamped at 0; +inf on a support mismatch.
GEAR_HD double pair_forward_kl(const PairStats& p) {
  if (p.ct == pos_inf()) return pos_inf();
  const double d = p.ct / p.t.s - log(p.t.s) + log(p.s.s);
  return d > 0.0 ? d : 0.0;
}

// Generalised JSD(beta) per vocabulary entry, given the log-probs a (student) and b (teacher):
// M = (1-beta) e^a + beta e^b, term = beta e^b (b - ln M) + (1-beta) e^a (a - ln M). Entries where a side
// is -inf contribute its 0 log 0 = 0. The row's JSD is the sum of the terms (needs the final lse of both
// sides, hence a second pass over the row). The scalar form for reference and non-SIMD backends.
GEAR_HD double jsd_term(double a, double b, double beta) {
  const double ea = a == neg_inf() ? 0.0 : exp(a);
  const double eb = b == neg_inf() ? 0.0 : exp(b);
  const double mix = (1.0 - beta) * ea + beta * eb;
  if (mix == 0.0) return 0.0;
  const double lm = log(mix);
  double t = 0.0;
  if (eb > 0.0) t += beta * eb * (b - lm);
  if (ea > 0.0) t += (1.0 - beta) * ea * (a - lm);
  return t;
}

// Coefficients of the token-stats gradient. For loss L with dL/dlogprob = gl and dL/dentropy = ge,
//   dL/dz_v = p_v * (alpha + beta * ln p_v) + [v == y] * gl / T
// with alpha = -(gl + ge H)/T and beta = -ge/T (from d logprob/dz = (1[v=y] - p)/T and
// dH/dz = -p (ln p + H)/T).
struct GradCoef {
  double alpha;
  double beta;
  double target;  // gl / T, added at the target entry
};

GEAR_HD GradCoef token_grad_coef(double gl, double ge, double entropy, double inv_t) {
  return GradCoef{-(gl + ge * entropy) * inv_t, -ge * inv_t, gl * inv_t};
}

}  // namespace rowmath
}  // namespace gear
