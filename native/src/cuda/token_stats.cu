// tokenStats forward, backward and vocabulary-shard statistics on the GPU.
//
// Pass 1 (stats_kernel) streams each row once with 16-byte loads: every (row, part) item keeps online
// softmax statistics per thread (StatsAcc: pre-scaled weights around an integer pivot, exact power-of-two
// rescales, float sums folded into float64; SoftmaxAcc beyond its band) and reduces them over its group of
// threads in a fixed order (group_stats: one rescale per lane to the group's pivot, then sums); the row's
// last piece to finish merges the pieces in order and computes the outputs through gear/row_math.h, the
// CPU kernels' own finalisation (one kernel). The backward (grad_kernel) is one streaming pass per row,
// one exp per logit, reusing the forward's logsumexp and entropy (or pass 1's when none are given). No
// float atomics: results are bit-identical between runs.
#include <cmath>
#include <vector>

#include "gear/cuda.h"
#include "row_stats.cuh"

namespace gear {
namespace cuda {
namespace {

enum Mode : int { kStats = 0, kPartial = 1, kBackward = 2 };

// Pass 1 through SoftmaxAcc, one thread's share of item (row, part): the lanes of a group of G stride
// through the part's vectors, two in flight per lane; lanes below the head / tail count take those
// scalars. What stats_thread falls back to beyond StatsAcc's band.
template <DType D>
__host__ __device__ SoftmaxAcc exact_stats_thread(const void* z, int64_t vocab, int64_t row, int64_t part,
                                                  int64_t parts, int lane, int G, float c2, double inv_t) {
  constexpr int V = Elems<D>::kVec;
  constexpr int U = 2;
  SoftmaxAcc acc;
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  if (sp.first && lane < sp.head) acc.add1(load1<D>(z, sp.e0 + lane), c2, inv_t);
  for (int64_t i = sp.vb + lane; i < sp.ve; i += U * G) {
    float x[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + u * G;
      if (j < sp.ve) {
        load_vec<D>(z, sp.vec0 + j * V, x[u]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) x[u][k] = -INFINITY;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc.add<V>(x[u], c2, inv_t);
  }
  if (sp.last && lane < sp.tail) acc.add1(load1<D>(z, sp.vec0 + sp.ve * V + lane), c2, inv_t);
  return acc;
}

// Pass 1, one thread's share of item (row, part) through StatsAcc: steps of 16 elements (4 float32
// vectors, or 2 of 16-bit logits) with one pivot move each, their loads issued together; then single
// vectors, and the head / tail scalars for the lanes below their counts. Beyond StatsAcc's band, the share
// again through SoftmaxAcc. Returns the statistics around the thread's largest logit; *bad as SoftmaxAcc.
template <DType D>
__host__ __device__ rowmath::SoftmaxStats stats_thread(const void* z, int64_t vocab, int64_t row, int64_t part,
                                                       int64_t parts, int lane, int G, const PassScale& k, int* bad) {
  constexpr int V = Elems<D>::kVec;
  constexpr int U = D == DType::F32 ? 4 : 2;
  bool redo = !k.fast;
  rowmath::SoftmaxStats st{};
  if (k.fast) {
    StatsAcc acc;
    const RowSpan sp = row_span<V>(row, vocab, part, parts);
    if (sp.first && lane < sp.head) stats_scalar(acc, load1<D>(z, sp.e0 + lane), k.c2);
    LaneVectors lv = lane_vectors<D>(z, sp, lane, G);
    for (; lv.n >= U; lv.n -= U, lv.p += U * G) {
      uint32_t w[4 * U];
#pragma unroll
      for (int u = 0; u < U; ++u) load_words(lv.p + u * G, w + 4 * u);
      stats_step<D, 4 * U>(acc, w, k);
    }
    for (; lv.n > 0; --lv.n, lv.p += G) {
      uint32_t w[4];
      load_words(lv.p, w);
      stats_step<D, 4>(acc, w, k);
    }
    if (sp.last && lane < sp.tail) stats_scalar(acc, load1<D>(z, sp.vec0 + sp.ve * V + lane), k.c2);
    st = acc.stats(k.c2, bad, &redo);
  }
  if (redo) st = exact_stats_thread<D>(z, vocab, row, part, parts, lane, G, k.c2, k.inv_t).stats(k.inv_t, bad);
  return st;
}

// What pass 1 writes per row of a chunk, by mode (pointers from the chunk's row 0; null: not wanted).
struct StatsOut {
  int mode;
  const int32_t* targets;
  int64_t vocab_start;  // kPartial
  float *lp, *ent, *lse;                   // kStats
  double *pmax, *psum, *psumx, *ptarget;   // kPartial; kBackward: lse and entropy in pmax, psum
  int32_t* flags;
};

// The raw logit a row's outputs need (tokenStats' target, tokenStatsPartial's target in this shard: NaN
// when it is elsewhere), read at the start of the row's pass so that its latency (a page-locked read for
// a small call) overlaps the pass.
template <DType D>
__host__ __device__ float target_logit(const void* z, int64_t vocab, int64_t r, const StatsOut& o) {
  if (o.mode == kStats) return o.lp ? load1<D>(z, r * vocab + o.targets[r]) : 0.f;
  if (o.mode != kPartial) return 0.f;
  const int64_t y = static_cast<int64_t>(o.targets[r]) - o.vocab_start;
  return y >= 0 && y < vocab ? load1<D>(z, r * vocab + y) : rowmath::quiet_nan();
}

// Row r's outputs from its merged statistics for the mode (zy: target_logit). A row with a NaN or
// +Infinity logit, or (kStats, kBackward) without a finite one, is flagged.
__host__ __device__ inline void finish_row(int64_t r, double inv_t, const PartStats& acc, float zy, const StatsOut& o) {
  if (acc.bad) {
    o.flags[r] = 1;
    return;
  }
  const rowmath::SoftmaxStats s{acc.m, acc.s, acc.a};
  if (o.mode == kPartial) {
    o.pmax[r] = s.m;
    o.psum[r] = s.s;
    o.psumx[r] = s.a;
    o.ptarget[r] = zy;
    return;
  }
  if (s.s == 0.0) {  // every logit masked
    o.flags[r] = 1;
    return;
  }
  if (o.mode == kBackward) {  // the backward keeps its logsumexp and entropy in float64 (pmax's and psum's
    o.pmax[r] = rowmath::stats_lse(s, inv_t);  // slots), as the CPU does
    o.psum[r] = rowmath::stats_entropy(s);
    return;
  }
  if (o.lse) o.lse[r] = static_cast<float>(rowmath::stats_lse(s, inv_t));
  if (o.ent) o.ent[r] = static_cast<float>(rowmath::stats_entropy(s));
  if (o.lp) o.lp[r] = static_cast<float>(rowmath::stats_logprob(zy, s, inv_t));
}

// Pass 1 and its per-row finish in one kernel (end_item): each (row, part) item reduces over its group;
// a row in one piece is finished by its group, one in several by warp 0 of the block that finishes its
// last piece. `counters`: one per row, zero.
template <DType D, int G>
__global__ void __launch_bounds__(kThreads, 5) stats_kernel(const void* z, int64_t rows, int64_t vocab, int64_t parts,
                                                         PassScale k, PartStats* pieces, StatsOut o,
                                                         int32_t* counters) {
  const int lane = threadIdx.x % G;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
  const bool active = item < rows * parts;  // uniform over the group (and over the block when G = block)
  const float zy = active && lane == 0 ? target_logit<D>(z, vocab, item / parts, o) : 0.f;
  int bad = 0;
  rowmath::SoftmaxStats st = rowmath::stats_empty();
  if (active) st = stats_thread<D>(z, vocab, item / parts, item % parts, parts, lane, G, k, &bad);
  const PartStats ps = group_stats<G>(PartStats{st.m, st.s, st.a, bad, 0}, k.inv_t);
  end_item<G>(
      active, item, parts, ps, pieces, counters,
      [&](int l) { return lane_pieces(pieces, item / parts, parts, l, k.inv_t); },
      [&](const PartStats& x) { return group_stats<32>(x, k.inv_t); },
      [&](int64_t row, const PartStats& merged) { finish_row(row, k.inv_t, merged, zy, o); });
}

// The backward's per-row constants, as the CPU kernel forms them: dL/dz_v = p_v (alpha + beta ln p_v) +
// [v == y] target (rowmath::token_grad_coef), with log2 p_v = (z_v - piv) k + off around the row pivot
// piv = T lse (a float; off carries the rest in float64), so p stays exact at logits of 1e4.
struct GradRow {
  float alpha, beta2, target;  // beta2 = beta ln 2 (it multiplies log2 p)
  float piv, k, off;
  int64_t y;                   // the target's column (grad.logprob given), else -1
};

// The statistics come from pass 1 in float64 (lse_d, ent_d) or from the caller in float32 (lse_f, ent_f).
__host__ __device__ inline GradRow grad_row(int64_t row, double inv_t, const double* lse_d, const float* lse_f,
                                            const double* ent_d, const float* ent_f, const float* gl, const float* ge,
                                            const int32_t* targets) {
  const double h = ent_d ? ent_d[row] : ent_f ? static_cast<double>(ent_f[row]) : 0.0;
  const rowmath::GradCoef c = rowmath::token_grad_coef(gl ? gl[row] : 0.0, ge ? ge[row] : 0.0, h, inv_t);
  const double lse = lse_d ? lse_d[row] : static_cast<double>(lse_f[row]);
  const float piv = static_cast<float>(lse / inv_t);
  return GradRow{static_cast<float>(c.alpha), static_cast<float>(c.beta * rowmath::kLn2), static_cast<float>(c.target), piv,
                 static_cast<float>(inv_t * rowmath::kLog2e),
                 static_cast<float>(-(lse - static_cast<double>(piv) * inv_t) * rowmath::kLog2e), targets ? targets[row] : -1};
}

// One thread's share of the backward for item (row, part); false when it saw a NaN or +Infinity logit,
// which it writes through unchanged (in place, the row still shows it for the error message).
// Probabilities below 2^-100 (masked entries included) give an exact 0, as on the CPU. Two vectors are
// loaded before either is stored, so each lane keeps two 16-byte loads in flight.
template <DType D>
__host__ __device__ bool grad_thread(const void* z, int64_t vocab, int64_t row, int64_t part, int64_t parts, int lane,
                                     int G, const GradRow& c, float* out) {
  constexpr int V = Elems<D>::kVec;
  constexpr int U = 2;
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  bool bad = false;
  auto grad1 = [&](float x, int64_t col) {
    const bool b = x != x || x == INFINITY;
    bad |= b;
    const float t = fmaf(x - c.piv, c.k, c.off);  // log2 p
    const float p = ex2(fmaxf(t, -126.f));
    const float g = (t >= -100.f ? p * fmaf(c.beta2, t, c.alpha) : 0.f) + (col == c.y ? c.target : 0.f);
    return b ? x : g;
  };
  if (sp.first && lane < sp.head) out[sp.e0 + lane] = grad1(load1_rw<D>(z, sp.e0 + lane), lane);
  const int64_t col0 = sp.vec0 - sp.e0;  // column of the first whole vector
  for (int64_t i = sp.vb + lane; i < sp.ve; i += U * G) {
    float x[U][V];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * G < sp.ve) load_vec<D>(z, sp.vec0 + (i + u * G) * V, x[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + u * G;
      if (j >= sp.ve) break;
      float g[V];
#pragma unroll
      for (int k = 0; k < V; ++k) g[k] = grad1(x[u][k], col0 + j * V + k);  // unrolled: g stays in registers
#pragma unroll
      for (int k = 0; k < V / 4; ++k) store4(out + sp.vec0 + j * V + 4 * k, g[4 * k], g[4 * k + 1], g[4 * k + 2], g[4 * k + 3]);
    }
  }
  if (sp.last && lane < sp.tail) {
    const int64_t e = sp.vec0 + sp.ve * V + lane;
    out[e] = grad1(load1_rw<D>(z, e), e - sp.e0);
  }
  return !bad;
}

template <DType D, int G>
__global__ void __launch_bounds__(kThreads) grad_kernel(const void* z, int64_t rows, int64_t vocab, int64_t parts,
                                                        double inv_t, const double* lse_d, const float* lse_f,
                                                        const double* ent_d, const float* ent_f, const float* gl,
                                                        const float* ge, const int32_t* targets, float* out,
                                                        int32_t* flags) {
  const int lane = threadIdx.x % G;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (kThreads / G) + threadIdx.x / G;
  if (item >= rows * parts) return;
  const int64_t row = item / parts;
  if (flags[row] != 0) {  // pass 1 found the row bad: it is reported, and keeps its logits until NaN-filled
    copy_thread<D>(z, vocab, row, item % parts, parts, lane, G, out);
    return;
  }
  const GradRow c = grad_row(row, inv_t, lse_d, lse_f, ent_d, ent_f, gl, ge, targets);
  if (!grad_thread<D>(z, vocab, row, item % parts, parts, lane, G, c, out))
    atomicOr(flags + row, 1);  // integer OR: the same result in any order
}

}  // namespace

Status token_stats(const LogitsView& l, const int32_t* targets, double temperature, float* logprob, float* entropy,
                   float* lse, const ExecContext& ctx) {
  RowPass p;
  GEAR_TRY(p.open(ctx, l));
  Call& call = p.call;
  const int64_t n_rows = p.rows, v = p.vocab;
  const int s_tg = call.input(logprob ? targets : nullptr, n_rows * 4);
  const int s_lp = call.output(logprob, n_rows * 4), s_en = call.output(entropy, n_rows * 4);
  const int s_ls = call.output(lse, n_rows * 4);
  const int s_parts = p.item_scratch(sizeof(PartStats));
  const double inv_t = 1.0 / temperature;
  const PassScale k = pass_scale(inv_t);
  const cudaStream_t st = p.device().compute;
  GEAR_TRY(p.run(ctx, [&](int64_t r0, int64_t n, const LogitsView* in, float*) {
    const StatsOut o{kStats, at(call.ptr<int32_t>(s_tg), r0), 0, at(call.ptr<float>(s_lp), r0),
                     at(call.ptr<float>(s_en), r0), at(call.ptr<float>(s_ls), r0), nullptr, nullptr, nullptr, nullptr,
                     p.flags_at(r0)};
    GEAR_LAUNCH_ROWS(sub_grid(p.grid, n), l.dtype, st, stats_kernel, in[0].data, n, v, p.grid.parts, k,
                     call.ptr<PartStats>(s_parts), o, p.counters());
    return Status::ok();
  }));
  const int64_t b = p.first_flagged();
  return b >= 0 ? bad_row(l, "logits", b) : Status::ok();
}

Status token_stats_backward(const LogitsView& l, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx) {
  RowPass p;
  GEAR_TRY(p.open(ctx, l, nullptr, out));
  Call& call = p.call;
  const int64_t n_rows = p.rows, v = p.vocab;
  const bool recompute = lse == nullptr;
  const int s_tg = call.input(grad_logprob ? targets : nullptr, n_rows * 4);
  const int s_gl = call.input(grad_logprob, n_rows * 4), s_ge = call.input(grad_entropy, n_rows * 4);
  const int s_ls = call.input(lse, n_rows * 4), s_en = call.input(grad_entropy ? entropy : nullptr, n_rows * 4);
  const int s_parts = recompute ? p.item_scratch(sizeof(PartStats)) : -1;
  const int s_rls = recompute ? p.row_scratch(8) : -1, s_ren = recompute ? p.row_scratch(8) : -1;
  const double inv_t = 1.0 / temperature;
  const PassScale k = pass_scale(inv_t);
  const cudaStream_t st = p.device().compute;
  GEAR_TRY(p.run(ctx, [&](int64_t r0, int64_t n, const LogitsView* in, float* o) {
    int32_t* fl = p.flags_at(r0);
    const float* ls = at(call.ptr<float>(s_ls), r0);
    const double *ls_d = nullptr, *en_d = nullptr;
    const float* en = grad_entropy ? at(call.ptr<float>(s_en), r0) : nullptr;
    if (recompute) {
      const StatsOut so{kBackward, nullptr, 0, nullptr, nullptr, nullptr, call.ptr<double>(s_rls),
                        call.ptr<double>(s_ren), nullptr, nullptr, fl};
      GEAR_LAUNCH_ROWS(sub_grid(p.grid, n), l.dtype, st, stats_kernel, in[0].data, n, v, p.grid.parts, k,
                       call.ptr<PartStats>(s_parts), so, p.counters());
      ls = nullptr;
      ls_d = call.ptr<double>(s_rls);
      en = nullptr;
      en_d = grad_entropy ? call.ptr<double>(s_ren) : nullptr;
    }
    GEAR_LAUNCH_ROWS(sub_grid(p.grid, n), l.dtype, st, grad_kernel, in[0].data, n, v, p.grid.parts, inv_t, ls_d, ls,
                     en_d, en, at(call.ptr<float>(s_gl), r0), at(call.ptr<float>(s_ge), r0),
                     at(call.ptr<int32_t>(s_tg), r0), o, fl);
    return Status::ok();
  }));
  const int64_t b = p.first_flagged();
  return b >= 0 ? bad_row(l, "logits", b) : Status::ok();
}

Status token_stats_partial(const LogitsView& l, const int32_t* targets, int64_t vocab_start, double temperature,
                           double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx) {
  RowPass p;
  GEAR_TRY(p.open(ctx, l));
  Call& call = p.call;
  const int64_t n_rows = p.rows, v = p.vocab;
  const int s_tg = call.input(targets, n_rows * 4);
  const int s_mx = call.output(max, n_rows * 8), s_se = call.output(sum_exp, n_rows * 8);
  const int s_sx = call.output(sum_exp_x, n_rows * 8), s_tl = call.output(target_logit, n_rows * 8);
  const int s_parts = p.item_scratch(sizeof(PartStats));
  const double inv_t = 1.0 / temperature;
  const PassScale k = pass_scale(inv_t);
  const cudaStream_t st = p.device().compute;
  GEAR_TRY(p.run(ctx, [&](int64_t r0, int64_t n, const LogitsView* in, float*) {
    const StatsOut o{kPartial, call.ptr<int32_t>(s_tg) + r0, vocab_start, nullptr, nullptr, nullptr,
                     call.ptr<double>(s_mx) + r0, call.ptr<double>(s_se) + r0, call.ptr<double>(s_sx) + r0,
                     call.ptr<double>(s_tl) + r0, p.flags_at(r0)};
    GEAR_LAUNCH_ROWS(sub_grid(p.grid, n), l.dtype, st, stats_kernel, in[0].data, n, v, p.grid.parts, k,
                     call.ptr<PartStats>(s_parts), o, p.counters());
    return Status::ok();
  }));
  const int64_t b = p.first_flagged();
  return b >= 0 ? bad_row(l, "shard", b) : Status::ok();
}

}  // namespace cuda
}  // namespace gear
