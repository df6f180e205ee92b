// divergence forward and backward on the GPU: one thread block per row pair. The forward streams both
// rows once (float32 per-thread pair statistics merged in float64 through gear/row_math.h in a fixed
// tree order); JSD reads the rows a second time for its log-mixture terms. The backward reuses the
// forward's statistics when given and writes d/dz_student in one pass (two for JSD).
#include <cmath>
#include <vector>

#include "device_runtime.cuh"
#include "gear/cuda.h"

namespace gear {
namespace cuda {
namespace {

enum PairFlag : int32_t { kStudentBad = 1, kTeacherBad = 2, kStudentEmpty = 3, kTeacherEmpty = 4 };

struct ThreadPair {
  float ms = -INFINITY, ss = 0.f, as = 0.f;
  float mt = -INFINITY, st = 0.f, at = 0.f;
  float cs = 0.f, ct = 0.f;
};

// Adds one (student, teacher) logit pair; the float32 counterpart of rowmath::pair_rescale_* + sums.
__device__ inline void pair_add(ThreadPair& p, float a, float b, float inv_t) {
  if (a > p.ms) {
    if (p.ss > 0.f) {
      const float r = (p.ms - a) * inv_t, f = __expf(r);
      p.cs = f * (p.cs + r * p.ss);
      p.ct = p.ct - r * p.st;
      p.as = f * (p.as + r * p.ss);
      p.ss = f * p.ss;
    }
    p.ms = a;
  }
  if (b > p.mt) {
    if (p.st > 0.f) {
      const float r = (p.mt - b) * inv_t, f = __expf(r);
      p.ct = f * (p.ct + r * p.st);
      p.cs = p.cs - r * p.ss;
      p.at = f * (p.at + r * p.st);
      p.st = f * p.st;
    }
    p.mt = b;
  }
  const float ds = (a - p.ms) * inv_t, dt = (b - p.mt) * inv_t;
  if (a != -INFINITY) {
    const float e = __expf(ds);
    p.ss += e;
    p.as += e * ds;
    p.cs += b == -INFINITY ? INFINITY : e * (ds - dt);  // support mismatch: reverse KL is +inf
  }
  if (b != -INFINITY) {
    const float e = __expf(dt);
    p.st += e;
    p.at += e * dt;
    p.ct += a == -INFINITY ? INFINITY : e * (dt - ds);
  }
}

__device__ inline rowmath::PairStats pair_merge(rowmath::PairStats x, rowmath::PairStats y, double inv_t) {
  const double ms = x.s.m > y.s.m ? x.s.m : y.s.m;
  const double mt = x.t.m > y.t.m ? x.t.m : y.t.m;
  rowmath::pair_rescale_student(x, ms, inv_t);
  rowmath::pair_rescale_student(y, ms, inv_t);
  rowmath::pair_rescale_teacher(x, mt, inv_t);
  rowmath::pair_rescale_teacher(y, mt, inv_t);
  return rowmath::PairStats{{ms, x.s.s + y.s.s, x.s.a + y.s.a}, {mt, x.t.s + y.t.s, x.t.a + y.t.a}, x.cs + y.cs,
                            x.ct + y.ct};
}

// Deterministic tree merge of the block's pair statistics (result valid in every thread).
__device__ inline rowmath::PairStats block_merge_pair(const ThreadPair& p, double inv_t) {
  __shared__ double sh[8][kBlock];
  const int i = threadIdx.x;
  sh[0][i] = p.ms; sh[1][i] = p.ss; sh[2][i] = p.as;
  sh[3][i] = p.mt; sh[4][i] = p.st; sh[5][i] = p.at;
  sh[6][i] = p.cs; sh[7][i] = p.ct;
  __syncthreads();
  for (int w = kBlock / 2; w > 0; w >>= 1) {
    if (i < w) {
      const rowmath::PairStats x{{sh[0][i], sh[1][i], sh[2][i]}, {sh[3][i], sh[4][i], sh[5][i]}, sh[6][i], sh[7][i]};
      const int j = i + w;
      const rowmath::PairStats y{{sh[0][j], sh[1][j], sh[2][j]}, {sh[3][j], sh[4][j], sh[5][j]}, sh[6][j], sh[7][j]};
      const rowmath::PairStats z = pair_merge(x, y, inv_t);
      sh[0][i] = z.s.m; sh[1][i] = z.s.s; sh[2][i] = z.s.a;
      sh[3][i] = z.t.m; sh[4][i] = z.t.s; sh[5][i] = z.t.a;
      sh[6][i] = z.cs; sh[7][i] = z.ct;
    }
    __syncthreads();
  }
  const rowmath::PairStats r{{sh[0][0], sh[1][0], sh[2][0]}, {sh[3][0], sh[4][0], sh[5][0]}, sh[6][0], sh[7][0]};
  __syncthreads();
  return r;
}

// Deterministic block sum (result valid in every thread).
__device__ inline double block_sum(double x) {
  __shared__ double sh[kBlock];
  const int i = threadIdx.x;
  sh[i] = x;
  __syncthreads();
  for (int w = kBlock / 2; w > 0; w >>= 1) {
    if (i < w) sh[i] += sh[i + w];
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}

// Row outputs of the forward: value (capped), student entropy, both lse, both target log-probs.
struct FwdOut {
  float* value;
  float* h;
  float* lse_s;
  float* lse_t;
  float* lp_s;
  float* lp_t;
  float* raw;  // uncapped value (backward's internal use), may be null
};

template <DType D>
__global__ void divergence_kernel(const void* zs, const void* zt, int64_t vocab, int kind, double beta, float inv_t,
                                  double inv_t_d, double kl_cap, const int32_t* targets, FwdOut o, int32_t* flags) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * vocab;
  ThreadPair p;
  int bad_s = 0, bad_t = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
    const float a = Logit<D>::at(zs, base + v), b = Logit<D>::at(zt, base + v);
    const bool ba = isnan(a) || a == INFINITY, bb = isnan(b) || b == INFINITY;
    bad_s |= ba;
    bad_t |= bb;
    if (!ba && !bb) pair_add(p, a, b, inv_t);
  }
  bad_s = block_or(bad_s);
  bad_t = block_or(bad_t);
  const rowmath::PairStats ps = block_merge_pair(p, inv_t_d);
  const int32_t flag = bad_s ? kStudentBad : bad_t ? kTeacherBad : ps.s.s == 0.0 ? kStudentEmpty
                     : ps.t.s == 0.0 ? kTeacherEmpty : kRowOk;
  if (flag != kRowOk) {  // uniform across the block: every thread leaves here
    if (threadIdx.x == 0) flags[r] = flag;
    return;
  }
  double v;
  if (kind == static_cast<int>(DivKind::ReverseKl)) v = rowmath::pair_reverse_kl(ps);
  else if (kind == static_cast<int>(DivKind::ForwardKl)) v = rowmath::pair_forward_kl(ps);
  else {
    const double ls = rowmath::stats_lse(ps.s, inv_t_d), lt = rowmath::stats_lse(ps.t, inv_t_d);
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += kBlock) {
      const double a = Logit<D>::at(zs, base + i), b = Logit<D>::at(zt, base + i);
      acc += rowmath::jsd_term(a == -INFINITY ? a : a * inv_t_d - ls, b == -INFINITY ? b : b * inv_t_d - lt, beta);
    }
    v = block_sum(acc);
    if (v < 0.0) v = 0.0;
  }
  if (threadIdx.x != 0) return;
  flags[r] = kRowOk;
  if (o.value) o.value[r] = static_cast<float>(v < kl_cap ? v : kl_cap);
  if (o.raw) o.raw[r] = static_cast<float>(v);
  if (o.h) o.h[r] = static_cast<float>(rowmath::stats_entropy(ps.s));
  if (o.lse_s) o.lse_s[r] = static_cast<float>(rowmath::stats_lse(ps.s, inv_t_d));
  if (o.lse_t) o.lse_t[r] = static_cast<float>(rowmath::stats_lse(ps.t, inv_t_d));
  if (o.lp_s) o.lp_s[r] = static_cast<float>(rowmath::stats_logprob(Logit<D>::at(zs, base + targets[r]), ps.s, inv_t_d));
  if (o.lp_t) o.lp_t[r] = static_cast<float>(rowmath::stats_logprob(Logit<D>::at(zt, base + targets[r]), ps.t, inv_t_d));
}

// Per-row backward parameters: lse_s, lse_t, value (reverse KL), grad; zero = 1 writes a zero row.
struct RowParams {
  float lse_s, lse_t, value, grad;
  int32_t zero;
};

template <DType D>
__global__ void divergence_grad_kernel(const void* zs, const void* zt, int64_t vocab, int kind, float beta,
                                       float inv_t, const RowParams* prm, float* out, int32_t* flags) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * vocab;
  const RowParams q = prm[r];
  if (q.zero) {
    for (int64_t v = threadIdx.x; v < vocab; v += kBlock) out[base + v] = 0.f;
    if (threadIdx.x == 0) flags[r] = kRowOk;
    return;
  }
  const float c = q.grad * inv_t;
  int bad = 0;
  float k_sm = 0.f;  // JSD: sum_v p_s (ln p_s - ln M)
  if (kind == static_cast<int>(DivKind::Jsd)) {
    double acc = 0.0;
    for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
      const float a = Logit<D>::at(zs, base + v), b = Logit<D>::at(zt, base + v);
      if (a == -INFINITY || isnan(a) || isnan(b) || a == INFINITY || b == INFINITY) continue;
      const float lps = a * inv_t - q.lse_s, ps = __expf(lps);
      const float pt = b == -INFINITY ? 0.f : __expf(b * inv_t - q.lse_t);
      acc += static_cast<double>(ps) * (lps - __logf((1.f - beta) * ps + beta * pt));
    }
    k_sm = static_cast<float>(block_sum(acc));
  }
  for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
    const float a = Logit<D>::at(zs, base + v), b = Logit<D>::at(zt, base + v);
    float g = 0.f;
    if (isnan(a) || a == INFINITY || isnan(b) || b == INFINITY) bad = 1;
    else if (a != -INFINITY) {
      const float lps = a * inv_t - q.lse_s, ps = __expf(lps);
      const float lpt = b * inv_t - q.lse_t;
      const float pt = b == -INFINITY ? 0.f : __expf(lpt);
      if (kind == static_cast<int>(DivKind::ReverseKl)) g = c * ps * ((lps - lpt) - q.value);
      else if (kind == static_cast<int>(DivKind::ForwardKl)) g = c * (ps - pt);
      else g = c * ps * (1.f - beta) * ((lps - __logf((1.f - beta) * ps + beta * pt)) - k_sm);
    } else if (kind == static_cast<int>(DivKind::ForwardKl)) {
      g = -c * (b == -INFINITY ? 0.f : __expf(b * inv_t - q.lse_t));
    }
    out[base + v] = g;
  }
  bad = block_or(bad);
  if (threadIdx.x == 0) flags[r] = bad ? kTeacherBad : kRowOk;
}

Status flag_status(const LogitsView& s, const LogitsView& t, int32_t flag, int64_t r) {
  return flag == kTeacherBad || flag == kTeacherEmpty ? bad_row_status(t, "teacher", r) : bad_row_status(s, "student", r);
}

struct PairChunk {
  DeviceBuffer zs, zt, targets, flags, o[7], prm, out;
};

// Copies rows [r0, r0+n) of both sides to the device.
Status upload_pair(PairChunk& c, const LogitsView& s, const LogitsView& t, int64_t r0, int64_t n) {
  const int64_t esz = dtype_size(s.dtype), bytes = n * s.vocab * esz, off = r0 * s.vocab * esz;
  GEAR_TRY(to_device(c.zs.as<void>(), static_cast<const char*>(s.data) + off, bytes));
  return to_device(c.zt.as<void>(), static_cast<const char*>(t.data) + off, bytes);
}

}  // namespace

Status divergence(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap, const int32_t* targets, const DivergenceOut& out, const ExecContext& ctx) {
  GEAR_TRY(check_logits(s, "student"));
  const int64_t rows = s.rows;
  float* outs[6] = {out.value, out.student_entropy, out.student_lse, out.teacher_lse, out.student_logprob,
                    out.teacher_logprob};
  auto fail = [&](Status e) {
    for (float* p : outs) fill_nan(p, rows);
    return e;
  };
  Status st = check_pair(s, t, kind, beta, temperature, kl_cap);
  if (!st.is_ok()) return fail(st);
  if ((out.student_logprob || out.teacher_logprob) && targets == nullptr)
    return fail(error(Code::Shape, "targets: expected an Int32Array of the row count for the log-probs, got none"));
  if (targets && !(st = check_targets(targets, rows, s.vocab, "targets")).is_ok()) return fail(st);
  if (rows == 0) return Status::ok();

  const DivKind k = effective_kind(kind, beta);
  const int64_t esz = dtype_size(s.dtype);
  const int64_t per = std::min<int64_t>(rows, chunk_rows(2 * s.vocab * esz));
  PairChunk c;
  if (!(st = c.zs.alloc(per * s.vocab * esz)).is_ok() || !(st = c.zt.alloc(per * s.vocab * esz)).is_ok() ||
      !(st = c.targets.alloc(per * 4)).is_ok() || !(st = c.flags.alloc(per * 4)).is_ok())
    return fail(st);
  for (int i = 0; i < 6; ++i)
    if (outs[i] && !(st = c.o[i].alloc(per * 4)).is_ok()) return fail(st);
  std::vector<int32_t> flags(static_cast<size_t>(per));
  const double inv_t = 1.0 / temperature;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    if (ctx.aborted()) return fail(error(Code::Aborted, "divergence: aborted by the AbortSignal"));
    const int64_t n = std::min(per, rows - r0);
    if (!(st = upload_pair(c, s, t, r0, n)).is_ok()) return fail(st);
    if (targets && !(st = to_device(c.targets.as<void>(), targets + r0, n * 4)).is_ok()) return fail(st);
    const FwdOut o{c.o[0].as<float>(), c.o[1].as<float>(), c.o[2].as<float>(), c.o[3].as<float>(),
                   c.o[4].as<float>(), c.o[5].as<float>(), nullptr};
    GEAR_DISPATCH_DTYPE(s.dtype, divergence_kernel, static_cast<unsigned>(n), kBlock, c.zs.as<void>(), c.zt.as<void>(),
                        s.vocab, static_cast<int>(k), beta, static_cast<float>(inv_t), inv_t, kl_cap,
                        targets ? c.targets.as<int32_t>() : nullptr, o, c.flags.as<int32_t>());
    if (!(st = sync("divergence kernel")).is_ok()) return fail(st);
    if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
    const int64_t b = first_flagged(flags.data(), n);
    if (b >= 0) return fail(flag_status(s, t, flags[b], r0 + b));
    for (int i = 0; i < 6; ++i)
      if (outs[i] && !(st = to_host(outs[i] + r0, c.o[i].as<void>(), n * 4)).is_ok()) return fail(st);
  }
  return Status::ok();
}

Status divergence_backward(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse, float* out, const ExecContext& ctx) {
  GEAR_TRY(check_logits(s, "student"));
  const int64_t rows = s.rows;
  const int64_t total = rows * s.vocab;
  auto fail = [&](Status e) {
    fill_nan(out, total);
    return e;
  };
  if (out == nullptr && total > 0) return error(Code::Shape, "out: expected a Float32Array of rows * vocab, got none");
  Status st = check_backward_args(s, t, kind, beta, temperature, kl_cap, grad, value, student_lse, teacher_lse);
  if (!st.is_ok()) return fail(st);
  const int given = (value != nullptr) + (student_lse != nullptr) + (teacher_lse != nullptr);
  if (rows == 0) return Status::ok();

  const DivKind k = effective_kind(kind, beta);
  const bool recompute = given != 3 || k == DivKind::Jsd;
  const int64_t esz = dtype_size(s.dtype);
  const int64_t per = std::min<int64_t>(rows, chunk_rows(s.vocab * (2 * esz + 4)));
  PairChunk c;
  if (!(st = c.zs.alloc(per * s.vocab * esz)).is_ok() || !(st = c.zt.alloc(per * s.vocab * esz)).is_ok() ||
      !(st = c.out.alloc(per * s.vocab * 4)).is_ok() || !(st = c.flags.alloc(per * 4)).is_ok() ||
      !(st = c.prm.alloc(per * static_cast<int64_t>(sizeof(RowParams)))).is_ok() || !(st = c.o[2].alloc(per * 4)).is_ok() ||
      !(st = c.o[3].alloc(per * 4)).is_ok() || !(st = c.o[6].alloc(per * 4)).is_ok())
    return fail(st);
  std::vector<int32_t> flags(static_cast<size_t>(per));
  std::vector<float> ls(static_cast<size_t>(per)), lt(static_cast<size_t>(per)), raw(static_cast<size_t>(per));
  std::vector<RowParams> prm(static_cast<size_t>(per));
  const double inv_t = 1.0 / temperature;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    if (ctx.aborted()) return fail(error(Code::Aborted, "divergenceBackward: aborted by the AbortSignal"));
    const int64_t n = std::min(per, rows - r0);
    if (!(st = upload_pair(c, s, t, r0, n)).is_ok()) return fail(st);
    if (recompute) {
      const FwdOut o{nullptr, nullptr, c.o[2].as<float>(), c.o[3].as<float>(), nullptr, nullptr, c.o[6].as<float>()};
      GEAR_DISPATCH_DTYPE(s.dtype, divergence_kernel, static_cast<unsigned>(n), kBlock, c.zs.as<void>(), c.zt.as<void>(),
                          s.vocab, static_cast<int>(k), beta, static_cast<float>(inv_t), inv_t, HUGE_VAL, nullptr, o,
                          c.flags.as<int32_t>());
      if (!(st = sync("divergenceBackward statistics")).is_ok()) return fail(st);
      if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
      const int64_t b = first_flagged(flags.data(), n);
      if (b >= 0) return fail(flag_status(s, t, flags[b], r0 + b));
      if (!(st = to_host(ls.data(), c.o[2].as<void>(), n * 4)).is_ok() || !(st = to_host(lt.data(), c.o[3].as<void>(), n * 4)).is_ok() ||
          !(st = to_host(raw.data(), c.o[6].as<void>(), n * 4)).is_ok())
        return fail(st);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        ls[i] = student_lse[r0 + i];
        lt[i] = teacher_lse[r0 + i];
        raw[i] = value[r0 + i];
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const double v = raw[i];
      const bool zero = v >= kl_cap;  // capped (or +Infinity under a finite cap): the clamp is flat
      if (!zero && v == INFINITY)
        return fail(error(Code::NonFinite, "divergence[row " + std::to_string(r0 + i) +
                                               "]: expected a finite divergence (its gradient is undefined at +Infinity; "
                                               "use a finite klCap), got Infinity"));
      prm[i] = RowParams{ls[i], lt[i], raw[i], grad[r0 + i], zero ? 1 : 0};
    }
    if (!(st = to_device(c.prm.as<void>(), prm.data(), n * static_cast<int64_t>(sizeof(RowParams)))).is_ok()) return fail(st);
    GEAR_DISPATCH_DTYPE(s.dtype, divergence_grad_kernel, static_cast<unsigned>(n), kBlock, c.zs.as<void>(),
                        c.zt.as<void>(), s.vocab, static_cast<int>(k), static_cast<float>(beta), static_cast<float>(inv_t),
                        c.prm.as<RowParams>(), c.out.as<float>(), c.flags.as<int32_t>());
    if (!(st = sync("divergenceBackward kernel")).is_ok()) return fail(st);
    if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
    const int64_t b = first_flagged(flags.data(), n);
    if (b >= 0) {
      // the grad kernel cannot tell which side was bad: report the student's first if it has one
      const LogitsView& side = bad_row_status(s, "student", r0 + b).message.find("all -Infinity") == std::string::npos ? s : t;
      return fail(bad_row_status(side, &side == &s ? "student" : "teacher", r0 + b));
    }
    if (!(st = to_host(out + r0 * s.vocab, c.out.as<void>(), n * s.vocab * 4)).is_ok()) return fail(st);
  }
  return Status::ok();
}

}  // namespace cuda
}  // namespace gear
