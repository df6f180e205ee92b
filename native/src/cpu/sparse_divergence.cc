// Sparse (top-k) divergences: argument checks, row-parallel scheduling (each row by exactly one task, its
// arithmetic in a fixed order: bit-identical for every thread count) and the per-row math in float64.
// Per row the cost is the two lists' checks and exps (sparse_divergence_kernels.inc, through the active
// ISA's table), an id matching through a small per-task hash table (O(k), no branch that depends on which
// ids are shared), and a few logs through an inline polynomial (a libm call per log would cost more than
// the rest of the row). On the vector ISAs (the table's match_small: all but the baseline), lists of at
// most kSmallK entries take the vector matching instead: ids matched by compares, the shared sums and the
// tail bucket's gradient over vectors (their sums in another order than the loops here: the same values
// to rounding). Rows then go in groups of eight, each step over the group's independent rows, and a group's
// logs go eight to a call. Rows that fail a check are re-examined by the exact, slower path, which names
// the first bad entry.
//
// Per row the steps are: check and match the two lists (sparse_divergence_match.inc), the row's value and
// entropy bounds (sparse_divergence_value.inc), its gradient (sparse_divergence_grad.inc, backward only);
// this file runs them over each task's rows and row groups.
#include "gear/sparse_divergence.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gear/dtype_convert.h"
#include "gear/isa_target.h"
#include "gear/thread_pool.h"
#include "../core/checks.h"
#include "sparse_divergence_kernels.h"

// The kernel body, compiled for every instruction set of this architecture (isa_kernels.inc).
#define GEAR_KERNELS "sparse_divergence_kernels.inc"
#include "isa_kernels.inc"

namespace gear {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
// Beyond this many id comparisons per row, ids are matched through a sorted copy instead.
constexpr int64_t kQuadraticLimit = 4096;
constexpr double kInf = std::numeric_limits<double>::infinity();

using namespace sparse_kern;

// The scalar layer's float64 log (the baseline kernels' own, instantiated by isa_kernels.inc above).
inline double log_pos(double x) { return baseline::V::log_d(x); }  // finite x > 0

void atomic_min64(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// log sum exp of x[0..m) (-Infinity when empty or all -Infinity).
template <typename F>
double log_sum(int64_t m, F x) {
  double mx = -kInf;
  for (int64_t j = 0; j < m; ++j) mx = std::max(mx, x(j));
  if (mx == -kInf) return -kInf;
  double s = 0.0;
  for (int64_t j = 0; j < m; ++j) s += std::exp(x(j) - mx);
  return mx + std::log(s);
}

// e^x for a double x (x is clamped at 708): the scalar layer's exp_d; libm below -708, where e^x is
// subnormal (still > 0: a conditional mass that is positive there makes a support mismatch).
inline double exp_d(double x) {
  if (!(x > -708.0)) return x == -kInf ? 0.0 : std::exp(x);
  return baseline::V::exp_d(x);
}

#include "sparse_divergence_match.inc"
#include "sparse_divergence_value.inc"
#include "sparse_divergence_grad.inc"

int64_t rows_per_task(int64_t ks, int64_t kt) { return std::max<int64_t>(16, 32768 / (ks + kt + 1)); }

Status check_common(const SparseTopk& s, const SparseTopk& t, int64_t n, const SparseDivergenceOptions& opt) {
  if (n < 0) return error(Code::Shape, "n: expected a token count >= 0, got " + std::to_string(n));
  if (s.k < 1 || t.k < 1)
    return error(Code::Shape, "k: expected at least 1 entry per token on each side, got " + std::to_string(s.k) + " and " +
                                  std::to_string(t.k));
  if (n > 0 && (s.k > std::numeric_limits<int64_t>::max() / n || t.k > std::numeric_limits<int64_t>::max() / n))
    return error(Code::Shape, "n * k: expected a size that fits 64 bits");
  if (n > 0 && (!s.ids || !s.logprobs || !t.ids || !t.logprobs))
    return error(Code::Shape, "ids / logprobs: expected arrays of n * k, got none");
  if (static_cast<int>(opt.kind) < 0 || static_cast<int>(opt.kind) > 2)
    return error(Code::Option, "kind: expected 0, 1 or 2, got " + std::to_string(static_cast<int>(opt.kind)));
  if (!(opt.beta >= 0.0 && opt.beta <= 1.0)) return error(Code::Option, "beta: expected a number in [0, 1], got " + number_text(opt.beta));
  if (opt.support != SparseSupport::Bucket && opt.support != SparseSupport::Renormalize)
    return error(Code::Option, "support: expected 0 or 1");
  if (!(opt.tail_clamp >= 0.0 && opt.tail_clamp < 1.0))
    return error(Code::Option, "tailClamp: expected a number in [0, 1), got " + number_text(opt.tail_clamp));
  if (opt.vocab < 0 || opt.vocab > (int64_t{1} << 31))
    return error(Code::Option, "vocab: expected 0 (unknown) or a size in [1, 2^31], got " + std::to_string(opt.vocab));
  if (!(opt.kl_cap > 0.0)) return error(Code::Option, "klCap: expected a number > 0, got " + number_text(opt.kl_cap));
  return Status::ok();
}

// sparse_divergence's outputs after an error: NaN values, shared counts of -1.
Status failed_forward(Status e, const SparseDivergenceOut& out, int64_t n) {
  const int64_t rows = n > 0 ? n : 0;
  for (float* p : {out.value, out.student_tail, out.teacher_tail, out.student_shared_mass, out.teacher_shared_mass,
                   out.entropy_lower, out.entropy_upper})
    fill_nan(p, rows);
  if (out.shared)
    for (int64_t i = 0; i < rows; ++i) out.shared[i] = -1;
  return e;
}

// What the forward keeps of a row between its step 2 and its group's logs.
struct Pending {
  RowState rs;
  double v, tau;  // the shared cells' terms (fused rows); the student's tail mass
  ListEntropy le;
  TailSplit ts;
  bool fused;
};

// One task's rows of sparse_divergence: row by row where the lists are long, else in groups (group_rows)
// whose logs (the buckets' masses and mixture, the entropy bounds' rest and tail) wait in lg[quantity][row]
// (1 where unused) and each quantity takes one logs8 call for the group, vector-wide where the ISA has it
// (log_pos's values to 1e-16, each lane whatever the others).
class ForwardRows {
 public:
  ForwardRows(const SparseTopk& s, const SparseTopk& t, const SparseDivergenceOptions& opt, const SparseDivergenceOut& out,
              DivKind k, const Clamp& cl)
      : s_(s), t_(t), opt_(opt), out_(out), k_(k), cl_(cl), want_h_(out.entropy_lower || out.entropy_upper) {
    G_ = group_rows(s.k, t.k, scs_);
    // log(V - listed) of the entropy's upper bound, for each count of listed ids
    if (opt.vocab > 0 && out.entropy_upper)
      for (int64_t j = 0; j <= s.k; ++j)
        log_rest_.push_back(std::log(static_cast<double>(std::max<int64_t>(opt.vocab - j, 1))));
    for (int j = 0; j < G_; ++j)  // only the fallback reads them
      scs_[j].lazy_cells = scs_[j].shared_sums != nullptr && opt.support == SparseSupport::Bucket;
  }

  // Rows [b, e); the first that fails a check, or kNone.
  int64_t run(int64_t b, int64_t e) {
    if (G_ == 1) {
      for (int64_t r = b; r < e; ++r)
        if (!row(r)) return r;
      return kNone;
    }
    for (int64_t g = b; g < e; g += G_) {
      const int gn = static_cast<int>(std::min<int64_t>(G_, e - g));
      const bool grouped = prepare_group(s_, t_, g, gn, opt_.vocab, scs_);  // else row by row, to the first bad row
      for (int j = 0; j < gn; ++j) {
        if (!grouped && !prepare(s_, t_, g + j, opt_.vocab, scs_[j])) return g + j;
        pend(g + j, j);
      }
      finish(g, gn);
    }
    return kNone;
  }

 private:
  // One row, each log when it is needed; false when it fails a check.
  bool row(int64_t r) {
    Scratch& sc = scs_[0];
    if (!prepare(s_, t_, r, opt_.vocab, sc)) return false;
    const RowState rs = row_value_of(s_, t_, r, k_, opt_, cl_, sc);
    const double tau = std::max(0.0, 1.0 - sc.mass_s);
    write_value(r, rs.value);
    write_masses(r, rs, sc, tau);
    if (want_h_) {
      ListEntropy le;
      entropy_(s_.ids + r * s_.k, s_.logprobs + r * s_.k, sc.ps.data(), s_.k, &le);
      const TailSplit ts = split_tail(tau, le);
      entropy_bounds(le, tau, ts, ts.rem > 0.0 ? log_pos(ts.rem) : 0.0,
                     tau > 0.0 && !log_rest_.empty() ? log_pos(tau) : 0.0, log_rest_, lower(r), upper(r));
    }
    return true;
  }

  // Row r, the j-th of its group (prepared): its step 2 up to the logs, which wait in column j of lg_.
  void pend(int64_t r, int j) {
    Scratch& sc = scs_[j];
    Pending& w = pd_[j];
    for (int q = 0; q < 5; ++q) lg_[q][j] = 1.0;
    w.fused = false;
    if (sc.shared_sums != nullptr && opt_.support == SparseSupport::Bucket) {
      double sums[3];
      row_shared_sums(s_, t_, r, k_, opt_.beta, sc, sums);
      if (sums_fused(sums)) {
        w.fused = any_fused_ = true;
        w.rs = fused_state(sums, cl_);
        w.v = sums[2];
        pend_logs(w.rs, k_, opt_.beta, lg_, j);
      } else {
        if (sc.lazy_cells) small_cells(s_.logprobs + r * s_.k, s_.k, t_.logprobs + r * t_.k, sc);
        w.rs = row_value(sc.cells.data(), sc.ncell, k_, opt_, cl_, sums);
      }
    } else {
      w.rs = row_value_of(s_, t_, r, k_, opt_, cl_, sc);
    }
    w.tau = std::max(0.0, 1.0 - sc.mass_s);
    write_masses(r, w.rs, sc, w.tau);
    if (want_h_) entropy_(s_.ids + r * s_.k, s_.logprobs + r * s_.k, sc.ps.data(), s_.k, &w.le);
  }

  // The group of np rows from r0: its logs, then each row's value and entropy bounds.
  void finish(int64_t r0, int np) {
    for (int q = 0; q < 5; ++q)
      for (int j = np; j < 8; ++j) lg_[q][j] = 1.0;
    if (want_h_) {  // the group's divisions side by side (one per row, each a long latency)
      for (int j = 0; j < np; ++j) {
        Pending& w = pd_[j];
        w.ts = split_tail(w.tau, w.le);
        if (w.ts.rem > 0.0) lg_[3][j] = w.ts.rem;
        if (w.tau > 0.0) lg_[4][j] = w.tau;
      }
    }
    if (any_fused_) {
      logs_(lg_[0], np);
      logs_(lg_[1], np);
      if (k_ == DivKind::Jsd) logs_(lg_[2], np);
    }
    if (want_h_) {
      logs_(lg_[3], np);
      logs_(lg_[4], np);
    }
    for (int j = 0; j < np; ++j) {
      const int64_t r = r0 + j;
      Pending& w = pd_[j];
      if (w.fused) finish_fused(w.rs, w.v, k_, opt_.beta, lg_, j);
      write_value(r, w.rs.value);
      if (want_h_) entropy_bounds(w.le, w.tau, w.ts, lg_[3][j], lg_[4][j], log_rest_, lower(r), upper(r));
    }
    any_fused_ = false;
  }

  void write_value(int64_t r, double v) {
    if (out_.value) out_.value[r] = static_cast<float>(v < opt_.kl_cap ? v : opt_.kl_cap);
  }
  // The outputs that need no log: the shared masses and count, the tails.
  void write_masses(int64_t r, const RowState& rs, const Scratch& sc, double tau) {
    if (out_.student_shared_mass) out_.student_shared_mass[r] = static_cast<float>(rs.ms);
    if (out_.teacher_shared_mass) out_.teacher_shared_mass[r] = static_cast<float>(rs.mt);
    if (out_.shared) out_.shared[r] = static_cast<int32_t>(sc.ncell);
    if (out_.student_tail) out_.student_tail[r] = static_cast<float>(tau);
    if (out_.teacher_tail) out_.teacher_tail[r] = static_cast<float>(std::max(0.0, 1.0 - sc.mass_t));
  }
  float* lower(int64_t r) const { return out_.entropy_lower ? out_.entropy_lower + r : nullptr; }
  float* upper(int64_t r) const { return out_.entropy_upper ? out_.entropy_upper + r : nullptr; }

  const SparseTopk& s_;
  const SparseTopk& t_;
  const SparseDivergenceOptions& opt_;
  const SparseDivergenceOut& out_;
  const DivKind k_;
  const Clamp& cl_;
  const bool want_h_;
  const ListEntropyFn entropy_ = active_kernels().list_entropy;
  const Logs8Fn logs_ = active_kernels().logs8;
  Scratch scs_[8];
  int G_ = 1;
  std::vector<double> log_rest_;
  Pending pd_[8];
  alignas(64) double lg_[5][8];
  bool any_fused_ = false;
};

// One task's rows of sparse_divergence_backward: a row's gradient after its steps 1 and 2, row by row or
// through prepare_group; a group of short lists under the tail bucket takes its bucket logs eight rows to a
// logs8 call (as the forward). A group with a bad row goes row by row, so that the first failing row (bad
// or infinite) is the one reported.
class BackwardRows {
 public:
  BackwardRows(const SparseTopk& s, const SparseTopk& t, const SparseDivergenceOptions& opt, const float* grad, float* out,
               DivKind k, const Clamp& cl, std::atomic<int64_t>& infinite)
      : s_(s), t_(t), opt_(opt), grad_(grad), out_(out), k_(k), beta_(opt.beta), cl_(cl), infinite_(infinite) {
    G_ = group_rows(s.k, t.k, scs_);
    for (int j = 0; j < G_; ++j)  // short lists under the tail bucket: the vector gradient reads no cells
      scs_[j].lazy_cells = bucket_grad_ != nullptr && scs_[j].shared_sums != nullptr && opt.support == SparseSupport::Bucket;
  }

  // Rows [b, e); the first that fails a check, or kNone (also when a row's value is +Infinity without a
  // cap, which stops the task and is recorded in `infinite`).
  int64_t run(int64_t b, int64_t e) {
    if (G_ == 1) {
      for (int64_t r = b; r < e; ++r) {
        if (!prepare(s_, t_, r, opt_.vocab, scs_[0])) return r;
        if (!grad_row(r, scs_[0], row_value_of(s_, t_, r, k_, opt_, cl_, scs_[0]))) return kNone;
      }
      return kNone;
    }
    const bool batch = scs_[0].lazy_cells;
    for (int64_t g0 = b; g0 < e; g0 += G_) {
      const int gn = static_cast<int>(std::min<int64_t>(G_, e - g0));
      const bool grouped = prepare_group(s_, t_, g0, gn, opt_.vocab, scs_);
      if (grouped && batch) {
        if (!fused_group(g0, gn)) return kNone;
        continue;
      }
      for (int j = 0; j < gn; ++j) {
        const int64_t r = g0 + j;
        if (!grouped && !prepare(s_, t_, r, opt_.vocab, scs_[j])) return r;
        if (!grad_row(r, scs_[j], row_value_of(s_, t_, r, k_, opt_, cl_, scs_[j]))) return kNone;
      }
    }
    return kNone;
  }

 private:
  // The group of gn prepared rows from g0, their bucket logs batched; false when a row's value is +Infinity.
  bool fused_group(int64_t g0, int gn) {
    for (int q = 0; q < 3; ++q)
      for (int j = 0; j < 8; ++j) lg_[q][j] = 1.0;
    bool fused[8];
    double v[8];
    for (int j = 0; j < gn; ++j) {
      const int64_t r = g0 + j;
      Scratch& sc = scs_[j];
      double sums[3];
      row_shared_sums(s_, t_, r, k_, beta_, sc, sums);
      fused[j] = sums_fused(sums);
      if (!fused[j]) {  // the underflow's care in row_value
        small_cells(s_.logprobs + r * s_.k, s_.k, t_.logprobs + r * t_.k, sc);
        rss_[j] = row_value(sc.cells.data(), sc.ncell, k_, opt_, cl_, sums);
        continue;
      }
      rss_[j] = fused_state(sums, cl_);
      v[j] = sums[2];
      pend_logs(rss_[j], k_, beta_, lg_, j);
    }
    logs_(lg_[0], gn);
    logs_(lg_[1], gn);
    if (k_ == DivKind::Jsd) logs_(lg_[2], gn);
    for (int j = 0; j < gn; ++j) {
      if (fused[j]) finish_fused(rss_[j], v[j], k_, beta_, lg_, j);
      if (!grad_row(g0 + j, scs_[j], rss_[j])) return false;
    }
    return true;
  }

  // One row's gradient from its state; false when its value is +Infinity without a cap.
  bool grad_row(int64_t r, Scratch& sc, const RowState& rs) {
    float* o = out_ + r * s_.k;
    for (int64_t i = 0; i < s_.k; ++i) o[i] = 0.0f;
    if (rs.value == kInf && opt_.kl_cap == kInf) {
      atomic_min64(infinite_, r);
      return false;
    }
    if (rs.value >= opt_.kl_cap || rs.empty || grad_[r] == 0.0f) return true;
    const double g = grad_[r];
    if (opt_.support != SparseSupport::Bucket) {
      renormalized_cells_grad(sc.cells.data(), sc.ncell, rs, k_, beta_, g, o);
      return true;
    }
    const double hb = bucket_share(rs, k_, beta_);
    if (bucket_grad_ != nullptr && sc.shared_sums != nullptr)
      bucket_grad_(s_.logprobs + r * s_.k, sc.ps.data(), s_.k, t_.logprobs + r * t_.k, sc.pt.data(), t_.k, sc.tix,
                   static_cast<int>(k_), beta_, g, hb, o);
    else
      bucket_cells_grad(sc.cells.data(), sc.ncell, k_, beta_, g, hb, o);
    return true;
  }

  const SparseTopk& s_;
  const SparseTopk& t_;
  const SparseDivergenceOptions& opt_;
  const float* grad_;
  float* out_;
  const DivKind k_;
  const double beta_;
  const Clamp& cl_;
  std::atomic<int64_t>& infinite_;
  const BucketGradFn bucket_grad_ = active_kernels().bucket_grad;
  const Logs8Fn logs_ = active_kernels().logs8;
  Scratch scs_[8];
  int G_ = 1;
  RowState rss_[8];
  alignas(64) double lg_[3][8];
};

}  // namespace

Status sparse_divergence(const SparseTopk& s, const SparseTopk& t, int64_t n, const SparseDivergenceOptions& opt,
                         const SparseDivergenceOut& out, const ExecContext& ctx) {
  Status st = check_common(s, t, n, opt);
  if (!st.is_ok()) return failed_forward(st, out, n);
  const DivKind k = effective_kind(opt.kind, opt.beta);
  const Clamp cl(opt.tail_clamp);
  std::atomic<int64_t> bad{kNone};
  const bool done = parallel_blocks(ctx, n, rows_per_task(s.k, t.k), [&](int64_t b, int64_t e, int) {
    ForwardRows rows(s, t, opt, out, k, cl);
    const int64_t r = rows.run(b, e);
    if (r != kNone) atomic_min64(bad, r);
  });
  if (bad.load() != kNone) return failed_forward(row_status(s, t, bad.load(), opt.vocab), out, n);
  if (!done) return failed_forward(error(Code::Aborted, "sparseDivergence: aborted by the AbortSignal"), out, n);
  return Status::ok();
}

Status sparse_divergence_backward(const SparseTopk& s, const SparseTopk& t, int64_t n,
                                  const SparseDivergenceOptions& opt, const float* grad, float* out,
                                  const ExecContext& ctx) {
  Status st = check_common(s, t, n, opt);
  if (!st.is_ok()) return st;
  const int64_t total = n * s.k;
  auto fail = [&](Status e) {
    fill_nan(out, total);
    return e;
  };
  if (n > 0 && (grad == nullptr || out == nullptr)) return fail(error(Code::Shape, "grad / out: expected arrays, got none"));
  if (!(st = check_finite(grad, n, "grad")).is_ok()) return fail(st);
  const DivKind k = effective_kind(opt.kind, opt.beta);
  const Clamp cl(opt.tail_clamp);
  std::atomic<int64_t> bad{kNone}, infinite{kNone};
  const bool done = parallel_blocks(ctx, n, rows_per_task(s.k, t.k), [&](int64_t b, int64_t e, int) {
    BackwardRows rows(s, t, opt, grad, out, k, cl, infinite);
    const int64_t r = rows.run(b, e);
    if (r != kNone) atomic_min64(bad, r);
  });
  const int64_t br = bad.load(), ir = infinite.load();
  if (br != kNone && br <= ir) return fail(row_status(s, t, br, opt.vocab));
  if (ir != kNone)
    return fail(error(Code::NonFinite, "sparseDivergence[row " + std::to_string(ir) +
                                           "]: expected a finite divergence (its gradient is undefined at +Infinity; "
                                           "use a finite klCap), got Infinity"));
  if (!done) return fail(error(Code::Aborted, "sparseDivergenceBackward: aborted by the AbortSignal"));
  return Status::ok();
}

}  // namespace gear
