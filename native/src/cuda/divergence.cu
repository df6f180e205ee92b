// divergence forward and backward on the GPU.
//
// Pass 1 (pair_kernel) streams both rows once with 16-byte loads, each thread keeping both sides' online
// softmax statistics and the cross sum its kind needs (PairFast: pre-scaled weights around integer pivots,
// exact power-of-two rescales, float sums folded into float64; PairAcc beyond its band); items reduce over
// their group in a fixed order and the row's last piece merges the pieces in order into the row's values
// and the backward's per-row parameters (one kernel). JSD adds a second pass over the rows for its
// log-mixture terms (jsd_kernel, one log2 per entry, finished the same way). The backward (grad_kernel) is
// one streaming pass writing d/dz_student. No float atomics: results are bit-identical between runs.
#include <cmath>
#include <vector>

#include "../core/checks.h"
#include "gear/cuda.h"
#include "pair_stats.cuh"

namespace gear {
namespace cuda {
namespace {

// Per-row flags: which side was bad (NaN / +Infinity) or empty (no finite logit), and the backward's
// uncapped +Infinity divergence.
enum : int32_t { kStudentBad = 1, kTeacherBad = 2, kInfinite = 4 };
// Pass 1 through PairAcc, one thread's share of item (row, part): what pair_thread falls back to beyond
// the band of PairFast's pivots.
template <DType D, int WANT>
__host__ __device__ PairPart exact_pair_thread(const void* zs, const void* zt, int64_t vocab, int64_t row,
                                               int64_t part, int64_t parts, int lane, int G, float c2, double inv_t) {
  constexpr int V = Elems<D>::kVec;
  PairAcc<WANT> acc;
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  if (sp.first && lane < sp.head) {
    const float a[1] = {load1<D>(zs, sp.e0 + lane)}, b[1] = {load1<D>(zt, sp.e0 + lane)};
    acc.template add<1>(a, b, c2, inv_t);
  }
  for (int64_t j = sp.vb + lane; j < sp.ve; j += G) {
    float a[V], b[V];
    load_vec<D>(zs, sp.vec0 + j * V, a);
    load_vec<D>(zt, sp.vec0 + j * V, b);
    acc.template add<V>(a, b, c2, inv_t);
  }
  if (sp.last && lane < sp.tail) {
    const int64_t e = sp.vec0 + sp.ve * V + lane;
    const float a[1] = {load1<D>(zs, e)}, b[1] = {load1<D>(zt, e)};
    acc.template add<1>(a, b, c2, inv_t);
  }
  return acc.finish(inv_t);
}

// Pass 1, one thread's share of item (row, part) through PairFast (see token_stats.cu's stats_thread):
// steps of two 16-byte vectors per side, their four loads issued together, then single vectors and the
// head / tail scalars; beyond PairFast's band, the share again through PairAcc.
template <DType D, int WANT>
__host__ __device__ PairPart pair_thread(const void* zs, const void* zt, int64_t vocab, int64_t row, int64_t part,
                                         int64_t parts, int lane, int G, const PairScale& k) {
  constexpr int V = Elems<D>::kVec;
  constexpr int U = 2;
  bool redo = !k.fast;
  PairPart p{};
  if (k.fast) {
    PairFast<WANT> acc;
    const RowSpan sp = row_span<V>(row, vocab, part, parts);
    if (sp.first && lane < sp.head) pair_scalar(acc, load1<D>(zs, sp.e0 + lane), load1<D>(zt, sp.e0 + lane), k.c2);
    LaneVectors a = lane_vectors<D>(zs, sp, lane, G), b = lane_vectors<D>(zt, sp, lane, G);
    for (; a.n >= U; a.n -= U, a.p += U * G, b.p += U * G) {
      uint32_t ws[4 * U], wt[4 * U];
#pragma unroll
      for (int u = 0; u < U; ++u) load_words(a.p + u * G, ws + 4 * u), load_words(b.p + u * G, wt + 4 * u);
      pair_step<D, 4 * U>(acc, ws, wt, k);
    }
    for (; a.n > 0; --a.n, a.p += G, b.p += G) {
      uint32_t ws[4], wt[4];
      load_words(a.p, ws);
      load_words(b.p, wt);
      pair_step<D, 4>(acc, ws, wt, k);
    }
    if (sp.last && lane < sp.tail) {
      const int64_t e = sp.vec0 + sp.ve * V + lane;
      pair_scalar(acc, load1<D>(zs, e), load1<D>(zt, e), k.c2);
    }
    p = acc.finish(k.c2, &redo);
  }
  if (redo) p = exact_pair_thread<D, WANT>(zs, zt, vocab, row, part, parts, lane, G, k.c2, k.inv_t);
  return p;
}

// Per-row results of pass 1 (and, for JSD, pass 2) that the backward and the forward's outputs need.
struct RowParams {
  double lse_s, lse_t;
  double value;  // the uncapped divergence (reverse KL: also the backward's centring term)
  double k_sm;   // JSD: sum_v p_s (ln p_s - ln M)
};

// What pass 1 (and JSD's pass 2) write per row of a chunk (pointers from the chunk's row 0; null: not
// wanted): the forward's outputs, the per-row parameters, the flags.
struct PairOut {
  int kind = 0;
  double kl_cap = 0.0;
  const int32_t* targets = nullptr;
  float *value = nullptr, *h = nullptr, *lse_s = nullptr, *lse_t = nullptr, *lp_s = nullptr, *lp_t = nullptr;
  RowParams* prm = nullptr;
  int32_t* flags = nullptr;
};

// Lane l's share of merging row r's `parts` pieces (see lane_pieces).
GEAR_HDI PairPart lane_pair_pieces(const PairPart* in, int64_t r, int64_t parts, int l, double inv_t) {
  PairPart acc{rowmath::neg_inf(), 0.0, 0.0, rowmath::neg_inf(), 0.0, 0.0, 0.0, 0, 0};
  for (int64_t p = l; p < parts; p += 32) acc = pair_merge(acc, load_cg(in + r * parts + p), inv_t);
  return acc;
}

// The target's raw logits on both sides when the forward's log-probs are asked (read when the row
// finishes: unlike tokenStats' target_logit, not ahead of the pass, where it would hold two registers).
struct TargetLogits {
  float s, t;
};
template <DType D>
__host__ __device__ TargetLogits target_logits(const void* zs, const void* zt, int64_t vocab, int64_t r, const PairOut& o) {
  if (!o.lp_s && !o.lp_t) return TargetLogits{0.f, 0.f};
  const int64_t e = r * vocab + o.targets[r];
  return TargetLogits{load1<D>(zs, e), load1<D>(zt, e)};
}

// Row r from its merged pass-1 statistics (y: target_logits): flags a bad or empty side; writes the
// per-row parameters, and the forward's outputs when asked (JSD's value comes from pass 2).
__host__ __device__ inline void pair_finish_row(int64_t r, double inv_t, const PairPart& acc, TargetLogits y,
                                                const PairOut& o) {
  const int32_t f = (acc.bits & 1) || acc.ss == 0.0 ? kStudentBad : (acc.bits & 2) || acc.st == 0.0 ? kTeacherBad : 0;
  if (f != 0) {
    o.flags[r] = f;
    return;
  }
  rowmath::PairStats ps = to_pair(acc);
  double v = 0.0;
  if (o.kind == static_cast<int>(DivKind::ReverseKl)) {
    if (acc.bits & 4) ps.cs = rowmath::pos_inf();
    v = rowmath::pair_reverse_kl(ps);
  } else if (o.kind == static_cast<int>(DivKind::ForwardKl)) {
    if (acc.bits & 8) ps.ct = rowmath::pos_inf();
    v = rowmath::pair_forward_kl(ps);
  }
  const double ls = rowmath::stats_lse(ps.s, inv_t), lt = rowmath::stats_lse(ps.t, inv_t);
  if (o.prm) o.prm[r] = RowParams{ls, lt, v, 0.0};
  if (o.value && o.kind != static_cast<int>(DivKind::Jsd)) o.value[r] = static_cast<float>(v < o.kl_cap ? v : o.kl_cap);
  if (o.h) o.h[r] = static_cast<float>(rowmath::stats_entropy(ps.s));
  if (o.lse_s) o.lse_s[r] = static_cast<float>(ls);
  if (o.lse_t) o.lse_t[r] = static_cast<float>(lt);
  if (o.lp_s) o.lp_s[r] = static_cast<float>(rowmath::pair_logprob(y.s, ps.s, inv_t));
  if (o.lp_t) o.lp_t[r] = static_cast<float>(rowmath::pair_logprob(y.t, ps.t, inv_t));
}

// A group's pair statistics at its lane 0: every lane at the group's largest pivots, then fixed-order sums
// (one rescale per lane and side).
template <int G>
__device__ __forceinline__ PairPart group_pair(const PairPart& x, double inv_t) {
  const double ms = group_max<G>(x.ms), mt = group_max<G>(x.mt);
  return group_reduce<G>(pair_at(x, ms, mt, inv_t), [](const PairPart& a, const PairPart& b) { return pair_add(a, b); });
}

// Pass 1 and its per-row finish in one kernel (see token_stats.cu's stats_kernel).
template <DType D, int G, int WANT>
__device__ __forceinline__ void pair_item(const void* zs, const void* zt, int64_t rows, int64_t vocab, int64_t parts,
                                          const PairScale& k, PairPart* pieces, const PairOut& o, int32_t* counters) {
  const int lane = threadIdx.x % G;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
  const bool active = item < rows * parts;  // uniform over the group: an idle one still joins the block's reductions
  PairPart p = PairAcc<kWantNone>().finish(k.inv_t);
  if (active) p = pair_thread<D, WANT>(zs, zt, vocab, item / parts, item % parts, parts, lane, G, k);
  p = group_pair<G>(p, k.inv_t);
  end_item<G>(
      active, item, parts, p, pieces, counters,
      [&](int l) { return lane_pair_pieces(pieces, item / parts, parts, l, k.inv_t); },
      [&](const PairPart& x) { return group_pair<32>(x, k.inv_t); },
      [&](int64_t row, const PairPart& merged) {
        pair_finish_row(row, k.inv_t, merged, target_logits<D>(zs, zt, vocab, row, o), o);
      });
}

// Pass 1, one kernel per cross sum (see queue_pair_passes).
#define GEAR_PAIR_KERNEL(NAME, WANT)                                                                              \
  template <DType D, int G>                                                                                       \
  __global__ void __launch_bounds__(kThreads)                                                                     \
      NAME(const void* zs, const void* zt, int64_t rows, int64_t vocab, int64_t parts, PairScale k, PairPart* pieces, \
           PairOut o, int32_t* counters) {                                                                        \
    pair_item<D, G, WANT>(zs, zt, rows, vocab, parts, k, pieces, o, counters);                                    \
  }
GEAR_PAIR_KERNEL(pair_kernel, kWantNone)
GEAR_PAIR_KERNEL(pair_kernel_cs, kWantCs)
GEAR_PAIR_KERNEL(pair_kernel_ct, kWantCt)
#undef GEAR_PAIR_KERNEL

// JSD pass 2: per item, sum_v jsd_term(ln p_s, ln p_t) and sum_v p_s (ln p_s - ln M) (float64 once folded).
struct JsdPart {
  double value, k_sm;
};

// A side's log2 p = (z - piv) k + off around its pivot piv = T lse (a float; off carries the rest in
// float64), as the backward forms it: exact for the entries that carry the mass whatever the logits' size.
struct LogP2 {
  float piv, off;
};
__host__ __device__ inline LogP2 log_p2(double lse, double inv_t) {
  const float piv = static_cast<float>(lse / inv_t);
  return LogP2{piv, static_cast<float>(-(lse - static_cast<double>(piv) * inv_t) * rowmath::kLog2e)};
}

// One thread's share of pass 2 for item (row, part), in log2 units with one logarithm per entry: with
// ta, tb = log2 p_s, log2 p_t (clamped at -256, where 2^t is 0: a masked entry, or one of no weight) and
// lm = log2 M, M = (1 - beta) p_s + beta p_t (at least 2^-126: an entry masked on both sides adds 0 * finite),
//   value = ln 2 (beta sum p_t (tb - lm) + (1 - beta) sum p_s (ta - lm)),  k_sm = ln 2 sum p_s (ta - lm).
// Float sums over kFold vectors are folded into float64. Error (the simulation checks it against float64
// with ex2 / lg2 at their documented worst): each term's log2 differences are within a few 1e-6 for the
// entries of weight, so value and k_sm are within ~2e-6 absolute.
template <DType D>
__host__ __device__ JsdPart jsd_thread(const void* zs, const void* zt, int64_t vocab, int64_t row, int64_t part,
                                       int64_t parts, int lane, int G, double beta, double inv_t, double ls, double lt) {
  constexpr int V = Elems<D>::kVec;
  constexpr int kFold = 8;
  const LogP2 s2 = log_p2(ls, inv_t), t2 = log_p2(lt, inv_t);
  const float k = static_cast<float>(inv_t * rowmath::kLog2e);
  const float b1 = static_cast<float>(1.0 - beta), b = static_cast<float>(beta);
  float vb = 0.f, ks = 0.f;  // sum p_t (tb - lm), sum p_s (ta - lm)
  double VB = 0.0, KS = 0.0;
  auto add = [&](float a, float c) {
    const float ta = fmaxf(fmaf(a - s2.piv, k, s2.off), -256.f), tb = fmaxf(fmaf(c - t2.piv, k, t2.off), -256.f);
    const float pa = ex2(ta), pb = ex2(tb);
    const float lm = lg2(fmaxf(fmaf(b1, pa, b * pb), 1.17549435e-38f));
    vb = fmaf(pb, tb - lm, vb);
    ks = fmaf(pa, ta - lm, ks);
  };
  auto fold = [&] {
    VB += vb, KS += ks;
    vb = ks = 0.f;
  };
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  if (sp.first && lane < sp.head) add(load1<D>(zs, sp.e0 + lane), load1<D>(zt, sp.e0 + lane));
  int pending = 0;
  for (int64_t j = sp.vb + lane; j < sp.ve; j += G) {
    float x[V], y[V];
    load_vec<D>(zs, sp.vec0 + j * V, x);
    load_vec<D>(zt, sp.vec0 + j * V, y);
#pragma unroll
    for (int i = 0; i < V; ++i) add(x[i], y[i]);
    if (++pending == kFold) fold(), pending = 0;
  }
  if (sp.last && lane < sp.tail) {
    const int64_t e = sp.vec0 + sp.ve * V + lane;
    add(load1<D>(zs, e), load1<D>(zt, e));
  }
  fold();
  return JsdPart{rowmath::kLn2 * (beta * VB + (1.0 - beta) * KS), rowmath::kLn2 * KS};
}

// Row r's JSD from its merged pass-2 sums (a row pass 1 flagged has none).
__host__ __device__ inline void jsd_finish_row(int64_t r, const JsdPart& acc, const PairOut& o) {
  if (o.flags[r] != 0) return;
  const double v = acc.value > 0.0 ? acc.value : 0.0;
  o.prm[r].value = v;
  o.prm[r].k_sm = acc.k_sm;
  if (o.value) o.value[r] = static_cast<float>(v < o.kl_cap ? v : o.kl_cap);
}
GEAR_HDI JsdPart jsd_add(const JsdPart& x, const JsdPart& y) { return JsdPart{x.value + y.value, x.k_sm + y.k_sm}; }

// Lane l's share of merging row r's `parts` pass-2 pieces (see lane_pieces).
GEAR_HDI JsdPart lane_jsd_pieces(const JsdPart* in, int64_t r, int64_t parts, int l) {
  JsdPart acc{0.0, 0.0};
  for (int64_t p = l; p < parts; p += 32) acc = jsd_add(acc, load_cg(in + r * parts + p));
  return acc;
}

// JSD pass 2 and its per-row finish in one kernel (as pair_item). Rows pass 1 flagged add nothing.
template <DType D, int G>
__global__ void __launch_bounds__(kThreads) jsd_kernel(const void* zs, const void* zt, int64_t rows, int64_t vocab,
                                                       int64_t parts, double beta, double inv_t, JsdPart* pieces,
                                                       PairOut o, int32_t* counters) {
  const int lane = threadIdx.x % G;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
  const bool in_grid = item < rows * parts;  // uniform over the group, as the reduction requires
  const int64_t row = item / parts;
  JsdPart acc{0.0, 0.0};
  if (in_grid && o.flags[row] == 0) {
    const RowParams prm = o.prm[row];
    acc = jsd_thread<D>(zs, zt, vocab, row, item % parts, parts, lane, G, beta, inv_t, prm.lse_s, prm.lse_t);
  }
  const auto add = [](const JsdPart& x, const JsdPart& y) { return jsd_add(x, y); };
  acc = group_reduce<G>(acc, add);
  end_item<G>(
      in_grid, item, parts, acc, pieces, counters, [&](int l) { return lane_jsd_pieces(pieces, row, parts, l); },
      [&](const JsdPart& x) { return group_reduce<32>(x, add); }, [&](int64_t r, const JsdPart& m) { jsd_finish_row(r, m, o); });
}

// The backward's constants of one row, as the CPU kernel forms them: log2 p of each side is
// (z - piv) k + off around its pivot piv = T lse (a float; off carries the rest in float64), and
//   reverse KL: G p_s ((a - b) - D);  forward KL: G (p_s - p_t);  JSD: G (1-beta) p_s ((a - ln M) - K)
// with G = grad / T, a = ln p_s, b = ln p_t (JSD in log2 units: G (1-beta) ln 2 p_s ((ta - log2 M) - K log2 e)).
// Weights below 2^-100 give exact zeros.
struct DivRow {
  float piv_s, off_s, piv_t, off_t, k;
  float c1, c2;              // reverse KL: G ln 2, -G D; forward KL: G; JSD: G (1 - beta) ln 2, -K log2 e
  bool zero, infinite;       // the clamp is flat (gradient 0); +Infinity with no finite cap
};

__host__ __device__ inline DivRow div_row(int64_t row, int kind, double beta, double inv_t, double kl_cap,
                                          const RowParams* prm, const float* g_lse_s, const float* g_lse_t,
                                          const float* g_value, const float* grad) {
  double ls, lt, v, k_sm = 0.0;
  if (prm) ls = prm[row].lse_s, lt = prm[row].lse_t, v = prm[row].value, k_sm = prm[row].k_sm;
  else ls = g_lse_s[row], lt = g_lse_t[row], v = g_value[row];
  DivRow d;
  d.infinite = v == rowmath::pos_inf() && kl_cap == rowmath::pos_inf();
  d.zero = d.infinite || v >= kl_cap;
  const LogP2 s2 = log_p2(ls, inv_t), t2 = log_p2(lt, inv_t);
  d.piv_s = s2.piv, d.off_s = s2.off, d.piv_t = t2.piv, d.off_t = t2.off;
  d.k = static_cast<float>(inv_t * rowmath::kLog2e);
  const double G = grad[row] * inv_t;
  const bool rkl = kind == static_cast<int>(DivKind::ReverseKl), fkl = kind == static_cast<int>(DivKind::ForwardKl);
  d.c1 = static_cast<float>(rkl ? G * rowmath::kLn2 : fkl ? G : G * (1.0 - beta) * rowmath::kLn2);
  d.c2 = static_cast<float>(rkl ? -G * v : fkl ? 0.0 : -k_sm * rowmath::kLog2e);  // JSD: in log2 units
  return d;
}

// One thread's share of d/dz_student of grad[r] * divergence[r] for item (row, part); returns the
// kStudentBad / kTeacherBad bits of the NaN / +Infinity logits it saw. (The output never aliases the
// student, so the error message comes from the inputs; the output is NaN-filled after it.)
template <DType D>
__host__ __device__ int32_t div_grad_thread(const void* zs, const void* zt, int64_t vocab, int64_t row, int64_t part,
                                            int64_t parts, int lane, int G, int kind, float beta, float beta1,
                                            const DivRow& d, float* out) {
  constexpr int V = Elems<D>::kVec;
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  int32_t bad = 0;
  auto grad1 = [&](float a, float b) -> float {
    bad |= (a != a || a == INFINITY ? kStudentBad : 0) | (b != b || b == INFINITY ? kTeacherBad : 0);
    const float ta = fmaf(a - d.piv_s, d.k, d.off_s), tb = fmaf(b - d.piv_t, d.k, d.off_t);  // log2 p_s, log2 p_t
    const float ps = ta >= -100.f ? ex2(fmaxf(ta, -126.f)) : 0.f;
    if (kind == static_cast<int>(DivKind::ReverseKl)) return ta >= -100.f ? ps * fmaf(d.c1, ta - tb, d.c2) : 0.f;
    if (kind == static_cast<int>(DivKind::ForwardKl)) {
      const float pt = tb >= -100.f ? ex2(fmaxf(tb, -126.f)) : 0.f;
      return d.c1 * (ps - pt);
    }
    // log2 M, M = (1 - beta) p_s + beta p_t, as pass 2 forms it (tb clamped at -256: p_t = 0 there)
    const float pt = ex2(fmaxf(tb, -256.f));
    const float lm = lg2(fmaxf(fmaf(beta1, ps, beta * pt), 1.17549435e-38f));
    return ta >= -100.f ? d.c1 * ps * ((ta - lm) + d.c2) : 0.f;
  };
  if (sp.first && lane < sp.head) {
    const int64_t e = sp.e0 + lane;
    out[e] = d.zero ? 0.f : grad1(load1<D>(zs, e), load1<D>(zt, e));
  }
  for (int64_t j = sp.vb + lane; j < sp.ve; j += G) {
    float g[V];
    if (d.zero) {
#pragma unroll
      for (int k = 0; k < V; ++k) g[k] = 0.f;
    } else {
      float a[V], b[V];
      load_vec<D>(zs, sp.vec0 + j * V, a);
      load_vec<D>(zt, sp.vec0 + j * V, b);
#pragma unroll
      for (int k = 0; k < V; ++k) g[k] = grad1(a[k], b[k]);
    }
#pragma unroll
    for (int k = 0; k < V / 4; ++k) store4(out + sp.vec0 + j * V + 4 * k, g[4 * k], g[4 * k + 1], g[4 * k + 2], g[4 * k + 3]);
  }
  if (sp.last && lane < sp.tail) {
    const int64_t e = sp.vec0 + sp.ve * V + lane;
    out[e] = d.zero ? 0.f : grad1(load1<D>(zs, e), load1<D>(zt, e));
  }
  return bad;
}

// A row whose divergence reached kl_cap gets zeros; one whose divergence is +Infinity with no finite cap
// is flagged kInfinite. `prm` holds pass 1's parameters, or (given statistics) null with the caller's
// lse / value arrays.
template <DType D, int G>
__global__ void __launch_bounds__(kThreads) grad_kernel(const void* zs, const void* zt, int64_t rows, int64_t vocab,
                                                        int64_t parts, int kind, double beta, double inv_t,
                                                        double kl_cap, const RowParams* prm, const float* g_lse_s,
                                                        const float* g_lse_t, const float* g_value, const float* grad,
                                                        float* out, int32_t* flags) {
  const int lane = threadIdx.x % G;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
  if (item >= rows * parts) return;
  const int64_t row = item / parts;
  if (flags[row] & (kStudentBad | kTeacherBad)) return;  // pass 1 reports it; the output is NaN-filled
  const DivRow d = div_row(row, kind, beta, inv_t, kl_cap, prm, g_lse_s, g_lse_t, g_value, grad);
  if (d.infinite && lane == 0 && item % parts == 0) atomicOr(flags + row, kInfinite);
  // (1 - beta) rounded once from float64, as the CPU kernel does
  const int32_t bad = div_grad_thread<D>(zs, zt, vocab, row, item % parts, parts, lane, G, kind, static_cast<float>(beta),
                                         static_cast<float>(1.0 - beta), d, out);
  if (bad) atomicOr(flags + row, bad);  // integer OR: the same result in any order
}

// Queues the forward passes over a chunk of n rows on the compute stream: pass 1 with its per-row finish
// (one kernel per cross sum: a runtime switch would size every variant's registers by the largest), and
// for JSD pass 2 with its finish.
void queue_pair_passes(cudaStream_t stream, const RowGrid& grid, DType dtype, DivKind kind, double beta, double inv_t,
                       const void* zs, const void* zt, int64_t n, int64_t v, PairPart* parts, JsdPart* jp,
                       const PairOut& o, int32_t* counters) {
  const RowGrid g = sub_grid(grid, n);
  const PairScale k = pair_scale(inv_t, dtype);
  if (kind == DivKind::ReverseKl) GEAR_LAUNCH_ROWS(g, dtype, stream, pair_kernel_cs, zs, zt, n, v, g.parts, k, parts, o, counters);
  else if (kind == DivKind::ForwardKl) GEAR_LAUNCH_ROWS(g, dtype, stream, pair_kernel_ct, zs, zt, n, v, g.parts, k, parts, o, counters);
  else GEAR_LAUNCH_ROWS(g, dtype, stream, pair_kernel, zs, zt, n, v, g.parts, k, parts, o, counters);
  if (kind == DivKind::Jsd) GEAR_LAUNCH_ROWS(g, dtype, stream, jsd_kernel, zs, zt, n, v, g.parts, beta, inv_t, jp, o, counters);
}

// The error of the first flagged row, in the CPU backend's order: a bad or empty side before an
// uncapped +Infinity divergence of a later row; which side it names is bad_pair_at's rule (core/checks).
Status flagged_status(const LogitsView& s, const LogitsView& t, const std::vector<int32_t>& flags) {
  int64_t bad = -1, inf = -1;
  for (int64_t r = 0; r < static_cast<int64_t>(flags.size()) && bad < 0; ++r) {
    if (flags[r] & (kStudentBad | kTeacherBad)) bad = r;
    else if ((flags[r] & kInfinite) && inf < 0) inf = r;
  }
  if (bad >= 0 && (inf < 0 || bad <= inf)) return bad_pair(s, t, bad);
  if (inf >= 0) return infinite_divergence_status(inf);
  return Status::ok();
}

}  // namespace

Status divergence(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap, const int32_t* targets, const DivergenceOut& out, const ExecContext& ctx) {
  RowPass p;
  GEAR_TRY(p.open(ctx, s, &t));
  Call& call = p.call;
  const int64_t rows = p.rows, v = p.vocab;
  const bool jsd = kind == DivKind::Jsd;
  const int s_tg = call.input(out.student_logprob || out.teacher_logprob ? targets : nullptr, rows * 4);
  const int s_val = call.output(out.value, rows * 4), s_h = call.output(out.student_entropy, rows * 4);
  const int s_ls = call.output(out.student_lse, rows * 4), s_lt = call.output(out.teacher_lse, rows * 4);
  const int s_ps = call.output(out.student_logprob, rows * 4), s_pt = call.output(out.teacher_logprob, rows * 4);
  const int s_parts = p.item_scratch(sizeof(PairPart));
  const int s_prm = jsd ? p.row_scratch(sizeof(RowParams)) : -1;
  const int s_jsd = jsd ? p.item_scratch(sizeof(JsdPart)) : -1;
  const double inv_t = 1.0 / temperature;
  GEAR_TRY(p.run(ctx, [&](int64_t r0, int64_t n, const LogitsView* in, float*) {
    PairOut o;
    o.kind = static_cast<int>(kind), o.kl_cap = kl_cap;
    o.targets = at(call.ptr<int32_t>(s_tg), r0);
    o.value = at(call.ptr<float>(s_val), r0), o.h = at(call.ptr<float>(s_h), r0);
    o.lse_s = at(call.ptr<float>(s_ls), r0), o.lse_t = at(call.ptr<float>(s_lt), r0);
    o.lp_s = at(call.ptr<float>(s_ps), r0), o.lp_t = at(call.ptr<float>(s_pt), r0);
    o.prm = call.ptr<RowParams>(s_prm), o.flags = p.flags_at(r0);
    queue_pair_passes(p.device().compute, p.grid, s.dtype, kind, beta, inv_t, in[0].data, in[1].data, n, v,
                      call.ptr<PairPart>(s_parts), call.ptr<JsdPart>(s_jsd), o, p.counters());
    return Status::ok();
  }));
  return flagged_status(s, t, p.flags);
}

Status divergence_backward(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse, float* out, const ExecContext& ctx) {
  RowPass p;
  GEAR_TRY(p.open(ctx, s, &t, out));
  Call& call = p.call;
  const int64_t rows = p.rows, v = p.vocab;
  const bool jsd = kind == DivKind::Jsd;
  const bool recompute = jsd || value == nullptr || student_lse == nullptr || teacher_lse == nullptr;
  const int s_grad = call.input(grad, rows * 4);
  const int s_val = recompute ? -1 : call.input(value, rows * 4);
  const int s_ls = recompute ? -1 : call.input(student_lse, rows * 4);
  const int s_lt = recompute ? -1 : call.input(teacher_lse, rows * 4);
  const int s_parts = recompute ? p.item_scratch(sizeof(PairPart)) : -1;
  const int s_prm = recompute ? p.row_scratch(sizeof(RowParams)) : -1;
  const int s_jsd = jsd ? p.item_scratch(sizeof(JsdPart)) : -1;
  const double inv_t = 1.0 / temperature;
  const cudaStream_t st = p.device().compute;
  GEAR_TRY(p.run(ctx, [&](int64_t r0, int64_t n, const LogitsView* in, float* o) {
    int32_t* fl = p.flags_at(r0);
    RowParams* prm = call.ptr<RowParams>(s_prm);
    if (recompute) {
      PairOut po;
      po.kind = static_cast<int>(kind), po.kl_cap = kl_cap, po.prm = prm, po.flags = fl;
      queue_pair_passes(st, p.grid, s.dtype, kind, beta, inv_t, in[0].data, in[1].data, n, v,
                        call.ptr<PairPart>(s_parts), call.ptr<JsdPart>(s_jsd), po, p.counters());
    }
    GEAR_LAUNCH_ROWS(sub_grid(p.grid, n), s.dtype, st, grad_kernel, in[0].data, in[1].data, n, v, p.grid.parts,
                     static_cast<int>(kind), beta, inv_t, kl_cap, recompute ? prm : nullptr,
                     at(call.ptr<float>(s_ls), r0), at(call.ptr<float>(s_lt), r0), at(call.ptr<float>(s_val), r0),
                     call.ptr<float>(s_grad) + r0, o, fl);
    return Status::ok();
  }));
  return flagged_status(s, t, p.flags);
}

}  // namespace cuda
}  // namespace gear
