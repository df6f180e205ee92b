// tokenStats forward, backward and vocabulary-shard statistics on the GPU. One thread block per row
// streams the vocabulary once (float32 per-thread running statistics, merged in float64 through
// gear/row_math.h in a fixed tree order, so results do not depend on scheduling); the backward is one
// streaming pass per row, one exp per logit, reusing the forward's logsumexp and entropy.
#include <cmath>
#include <limits>
#include <vector>

#include "device_runtime.cuh"
#include "gear/cuda.h"

namespace gear {
namespace cuda {
namespace {

// mode 0: logprob / entropy / lse (an empty row is an error); mode 1: shard statistics (empty allowed).
template <DType D>
__global__ void stats_kernel(const void* z, int64_t vocab, float inv_t, double inv_t_d, const int32_t* targets,
                             int64_t vocab_start, int mode, float* logprob, float* entropy, float* lse, double* pmax,
                             double* psum, double* psumx, double* ptarget, int32_t* flags) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * vocab;
  ThreadStats t;
  int bad = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
    const float x = Logit<D>::at(z, base + v);
    if (isnan(x) || x == INFINITY) bad = 1;
    else thread_add(t, x, inv_t);
  }
  bad = block_or(bad);
  const rowmath::SoftmaxStats s = block_merge(t, inv_t_d);
  if (threadIdx.x != 0) return;
  if (bad) {
    flags[r] = kRowNonFinite;
    return;
  }
  if (mode == 0) {
    if (s.s == 0.0) {
      flags[r] = kRowEmpty;
      return;
    }
    flags[r] = kRowOk;
    if (lse) lse[r] = static_cast<float>(rowmath::stats_lse(s, inv_t_d));
    if (entropy) entropy[r] = static_cast<float>(rowmath::stats_entropy(s));
    if (logprob) logprob[r] = static_cast<float>(rowmath::stats_logprob(Logit<D>::at(z, base + targets[r]), s, inv_t_d));
  } else {
    flags[r] = kRowOk;
    pmax[r] = s.m;
    psum[r] = s.s;
    psumx[r] = s.a;
    const int64_t y = static_cast<int64_t>(targets[r]) - vocab_start;
    ptarget[r] = y >= 0 && y < vocab ? static_cast<double>(Logit<D>::at(z, base + y)) : nan("");
  }
}

// dL/dz_v = p_v (alpha + beta ln p_v) + [v == y] target, with ln p_v = z_v/T - lse (no exp for ln p).
template <DType D>
__global__ void grad_kernel(const void* z, int64_t vocab, float inv_t, const float* lse, const double* coef,
                            const int32_t* y, float* out, int32_t* flags) {
  const int64_t r = blockIdx.x;
  const int64_t base = r * vocab;
  const float l = lse[r];
  const float alpha = static_cast<float>(coef[3 * r]), beta = static_cast<float>(coef[3 * r + 1]);
  const float tgt = static_cast<float>(coef[3 * r + 2]);
  const int64_t yr = y ? y[r] : -1;
  int bad = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
    const float x = Logit<D>::at(z, base + v);
    float g = 0.f;
    if (isnan(x) || x == INFINITY) bad = 1;
    else if (x != -INFINITY) {
      const float lnp = x * inv_t - l;
      g = __expf(lnp) * (alpha + beta * lnp);
    }
    if (v == yr) g += tgt;
    out[base + v] = g;
  }
  bad = block_or(bad);
  if (threadIdx.x == 0) flags[r] = bad ? kRowNonFinite : kRowOk;
}

// Device buffers for one chunk of rows, allocated once for the largest chunk.
struct Chunk {
  DeviceBuffer z, targets, flags, f0, f1, f2, d0, d1, d2, d3, coef, out;
};

}  // namespace

Status token_stats(const LogitsView& l, const int32_t* targets, double temperature, float* logprob, float* entropy,
                   float* lse, const ExecContext& ctx) {
  GEAR_TRY(check_logits(l, "logits"));
  auto fail = [&](Status s) {
    fill_nan(logprob, l.rows);
    fill_nan(entropy, l.rows);
    fill_nan(lse, l.rows);
    return s;
  };
  Status st = check_temperature(temperature);
  if (!st.is_ok()) return fail(st);
  if (logprob != nullptr && targets == nullptr)
    return fail(error(Code::Shape, "targets: expected an Int32Array of the row count for logprob, got none"));
  if (targets != nullptr && !(st = check_targets(targets, l.rows, l.vocab, "targets")).is_ok()) return fail(st);
  if (l.rows == 0) return Status::ok();

  const int64_t esz = dtype_size(l.dtype);
  const int64_t per = std::min<int64_t>(l.rows, chunk_rows(l.vocab * esz));
  Chunk c;
  if (!(st = c.z.alloc(per * l.vocab * esz)).is_ok() || !(st = c.targets.alloc(per * 4)).is_ok() ||
      !(st = c.flags.alloc(per * 4)).is_ok() || !(st = c.f0.alloc(per * 4)).is_ok() || !(st = c.f1.alloc(per * 4)).is_ok() ||
      !(st = c.f2.alloc(per * 4)).is_ok())
    return fail(st);
  std::vector<int32_t> flags(static_cast<size_t>(per));
  const double inv_t = 1.0 / temperature;
  for (int64_t r0 = 0; r0 < l.rows; r0 += per) {
    if (ctx.aborted()) return fail(error(Code::Aborted, "tokenStats: aborted by the AbortSignal"));
    const int64_t n = std::min(per, l.rows - r0);
    const char* src = static_cast<const char*>(l.data) + r0 * l.vocab * esz;
    if (!(st = to_device(c.z.as<void>(), src, n * l.vocab * esz)).is_ok()) return fail(st);
    if (targets && !(st = to_device(c.targets.as<void>(), targets + r0, n * 4)).is_ok()) return fail(st);
    GEAR_DISPATCH_DTYPE(l.dtype, stats_kernel, static_cast<unsigned>(n), kBlock, c.z.as<void>(), l.vocab,
                        static_cast<float>(inv_t), inv_t, targets ? c.targets.as<int32_t>() : nullptr, int64_t{0}, 0,
                        logprob ? c.f0.as<float>() : nullptr, entropy ? c.f1.as<float>() : nullptr,
                        lse ? c.f2.as<float>() : nullptr, nullptr, nullptr, nullptr, nullptr, c.flags.as<int32_t>());
    if (!(st = sync("tokenStats kernel")).is_ok()) return fail(st);
    if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
    const int64_t b = first_flagged(flags.data(), n);
    if (b >= 0) return fail(bad_row_status(l, "logits", r0 + b));
    if ((logprob && !(st = to_host(logprob + r0, c.f0.as<void>(), n * 4)).is_ok()) ||
        (entropy && !(st = to_host(entropy + r0, c.f1.as<void>(), n * 4)).is_ok()) ||
        (lse && !(st = to_host(lse + r0, c.f2.as<void>(), n * 4)).is_ok()))
      return fail(st);
  }
  return Status::ok();
}

Status token_stats_backward(const LogitsView& l, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx) {
  GEAR_TRY(check_logits(l, "logits"));
  const bool in_place = static_cast<const void*>(out) == l.data;
  const int64_t total = l.rows * l.vocab;
  auto fail_early = [&](Status s) {
    if (!in_place) fill_nan(out, total);
    return s;
  };
  if (out == nullptr && total > 0) return error(Code::Shape, "out: expected a Float32Array of rows * vocab, got none");
  if (in_place && l.dtype != DType::F32)
    return error(Code::DType, "inPlace: expected float32 logits, got " + std::string(dtype_name(l.dtype)));
  Status st;
  if (!(st = check_temperature(temperature)).is_ok()) return fail_early(st);
  if (grad_logprob != nullptr && !(st = check_targets(targets, l.rows, l.vocab, "targets")).is_ok()) return fail_early(st);
  if (targets != nullptr && !(st = check_targets(targets, l.rows, l.vocab, "targets")).is_ok()) return fail_early(st);
  if (!(st = check_finite(grad_logprob, l.rows, "grad.logprob")).is_ok()) return fail_early(st);
  if (!(st = check_finite(grad_entropy, l.rows, "grad.entropy")).is_ok()) return fail_early(st);
  if (lse == nullptr && entropy != nullptr)
    return fail_early(error(Code::Shape, "stats.logsumexp: expected a Float32Array with stats.entropy, got none"));
  if (lse != nullptr && grad_entropy != nullptr && entropy == nullptr)
    return fail_early(error(Code::Shape, "stats.entropy: expected a Float32Array when grad.entropy is given, got none"));
  if (!(st = check_finite(lse, l.rows, "stats.logsumexp")).is_ok()) return fail_early(st);
  if (!(st = check_finite(entropy, l.rows, "stats.entropy")).is_ok()) return fail_early(st);
  if (l.rows == 0) return Status::ok();

  // After the first chunk is written, any error must poison the whole output (in place: the logits too).
  auto fail = [&](Status s) {
    fill_nan(out, total);
    return s;
  };
  const int64_t esz = dtype_size(l.dtype);
  const int64_t per = std::min<int64_t>(l.rows, chunk_rows(l.vocab * (esz + 4)));
  Chunk c;
  if (!(st = c.z.alloc(per * l.vocab * esz)).is_ok() || !(st = c.out.alloc(per * l.vocab * 4)).is_ok() ||
      !(st = c.targets.alloc(per * 4)).is_ok() || !(st = c.flags.alloc(per * 4)).is_ok() ||
      !(st = c.f1.alloc(per * 4)).is_ok() || !(st = c.f2.alloc(per * 4)).is_ok() || !(st = c.coef.alloc(per * 24)).is_ok())
    return fail_early(st);
  std::vector<int32_t> flags(static_cast<size_t>(per));
  std::vector<float> lse_h(static_cast<size_t>(per)), h_h(static_cast<size_t>(per));
  std::vector<double> coef(static_cast<size_t>(3 * per));
  const double inv_t = 1.0 / temperature;
  const bool recompute = lse == nullptr;
  for (int64_t r0 = 0; r0 < l.rows; r0 += per) {
    if (ctx.aborted()) {
      const Status a = error(Code::Aborted, "tokenStatsBackward: aborted by the AbortSignal");
      return r0 == 0 ? fail_early(a) : fail(a);
    }
    const int64_t n = std::min(per, l.rows - r0);
    const char* src = static_cast<const char*>(l.data) + r0 * l.vocab * esz;
    if (!(st = to_device(c.z.as<void>(), src, n * l.vocab * esz)).is_ok()) return fail(st);
    if (recompute) {
      GEAR_DISPATCH_DTYPE(l.dtype, stats_kernel, static_cast<unsigned>(n), kBlock, c.z.as<void>(), l.vocab,
                          static_cast<float>(inv_t), inv_t, nullptr, int64_t{0}, 0, nullptr, c.f1.as<float>(),
                          c.f2.as<float>(), nullptr, nullptr, nullptr, nullptr, c.flags.as<int32_t>());
      if (!(st = sync("tokenStatsBackward statistics")).is_ok()) return fail(st);
      if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
      const int64_t b = first_flagged(flags.data(), n);
      if (b >= 0) return fail(bad_row_status(l, "logits", r0 + b));
      if (!(st = to_host(h_h.data(), c.f1.as<void>(), n * 4)).is_ok() || !(st = to_host(lse_h.data(), c.f2.as<void>(), n * 4)).is_ok())
        return fail(st);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        lse_h[i] = lse[r0 + i];
        h_h[i] = entropy ? entropy[r0 + i] : 0.f;
      }
      if (!(st = to_device(c.f2.as<void>(), lse_h.data(), n * 4)).is_ok()) return fail(st);
    }
    for (int64_t i = 0; i < n; ++i) {
      const double gl = grad_logprob ? grad_logprob[r0 + i] : 0.0;
      const double ge = grad_entropy ? grad_entropy[r0 + i] : 0.0;
      const rowmath::GradCoef k = rowmath::token_grad_coef(gl, ge, h_h[i], inv_t);
      coef[3 * i] = k.alpha;
      coef[3 * i + 1] = k.beta;
      coef[3 * i + 2] = k.target;
    }
    if (!(st = to_device(c.coef.as<void>(), coef.data(), n * 24)).is_ok()) return fail(st);
    if (grad_logprob && !(st = to_device(c.targets.as<void>(), targets + r0, n * 4)).is_ok()) return fail(st);
    GEAR_DISPATCH_DTYPE(l.dtype, grad_kernel, static_cast<unsigned>(n), kBlock, c.z.as<void>(), l.vocab,
                        static_cast<float>(inv_t), c.f2.as<float>(), c.coef.as<double>(),
                        grad_logprob ? c.targets.as<int32_t>() : nullptr, c.out.as<float>(), c.flags.as<int32_t>());
    if (!(st = sync("tokenStatsBackward kernel")).is_ok()) return fail(st);
    if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
    const int64_t b = first_flagged(flags.data(), n);
    if (b >= 0) return fail(bad_row_status(l, "logits", r0 + b));
    if (!(st = to_host(out + r0 * l.vocab, c.out.as<void>(), n * l.vocab * 4)).is_ok()) return fail(st);
  }
  return Status::ok();
}

Status token_stats_partial(const LogitsView& l, const int32_t* targets, int64_t vocab_start, double temperature,
                           double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx) {
  GEAR_TRY(check_logits(l, "shard"));
  auto fail = [&](Status s) {
    for (double* p : {max, sum_exp, sum_exp_x, target_logit}) fill_nan(p, l.rows);
    return s;
  };
  Status st = check_temperature(temperature);
  if (!st.is_ok()) return fail(st);
  if (!(st = check_partial_args(targets, l.rows, vocab_start)).is_ok()) return fail(st);
  if (l.rows == 0) return Status::ok();
  const int64_t esz = dtype_size(l.dtype);
  const int64_t per = std::min<int64_t>(l.rows, chunk_rows(l.vocab * esz));
  Chunk c;
  if (!(st = c.z.alloc(per * l.vocab * esz)).is_ok() || !(st = c.targets.alloc(per * 4)).is_ok() ||
      !(st = c.flags.alloc(per * 4)).is_ok() || !(st = c.d0.alloc(per * 8)).is_ok() || !(st = c.d1.alloc(per * 8)).is_ok() ||
      !(st = c.d2.alloc(per * 8)).is_ok() || !(st = c.d3.alloc(per * 8)).is_ok())
    return fail(st);
  std::vector<int32_t> flags(static_cast<size_t>(per));
  const double inv_t = 1.0 / temperature;
  for (int64_t r0 = 0; r0 < l.rows; r0 += per) {
    if (ctx.aborted()) return fail(error(Code::Aborted, "tokenStatsPartial: aborted by the AbortSignal"));
    const int64_t n = std::min(per, l.rows - r0);
    const char* src = static_cast<const char*>(l.data) + r0 * l.vocab * esz;
    if (!(st = to_device(c.z.as<void>(), src, n * l.vocab * esz)).is_ok() ||
        !(st = to_device(c.targets.as<void>(), targets + r0, n * 4)).is_ok())
      return fail(st);
    GEAR_DISPATCH_DTYPE(l.dtype, stats_kernel, static_cast<unsigned>(n), kBlock, c.z.as<void>(), l.vocab,
                        static_cast<float>(inv_t), inv_t, c.targets.as<int32_t>(), vocab_start, 1, nullptr, nullptr,
                        nullptr, c.d0.as<double>(), c.d1.as<double>(), c.d2.as<double>(), c.d3.as<double>(),
                        c.flags.as<int32_t>());
    if (!(st = sync("tokenStatsPartial kernel")).is_ok()) return fail(st);
    if (!(st = to_host(flags.data(), c.flags.as<void>(), n * 4)).is_ok()) return fail(st);
    const int64_t b = first_flagged(flags.data(), n);
    if (b >= 0) return fail(bad_row_status(l, "shard", r0 + b));
    if (!(st = to_host(max + r0, c.d0.as<void>(), n * 8)).is_ok() || !(st = to_host(sum_exp + r0, c.d1.as<void>(), n * 8)).is_ok() ||
        !(st = to_host(sum_exp_x + r0, c.d2.as<void>(), n * 8)).is_ok() ||
        !(st = to_host(target_logit + r0, c.d3.as<void>(), n * 8)).is_ok())
      return fail(st);
  }
  return Status::ok();
}

}  // namespace cuda
}  // namespace gear
