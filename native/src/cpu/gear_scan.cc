// GEAR-proposed reweighting (algorithms.md section 10.3). See gear_scan.h for the contract.
//
// Passes over the batch (each parallel over blocks of rows, each row sequential in float64):
//   A. check values, per-row mean / population std of the capped divergence, per-worker 16-bit
//      histograms of the divergence and entropy keys (integer counts: merging is order-independent);
//   Q. exact batch quantiles: the histograms locate the bucket of each needed order statistic, one more
//      pass collects only those buckets' values, nth_element finishes inside the (small) buckets;
//   B. per row: peaks, the segment scan, unit weights, the normaliser and the scatter (local segment ids);
//   C. global segment ids (row bases from a serial prefix sum) and the anchor list.
#include "gear_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "gear/segment.h"
#include "gear/thread_pool.h"
#include "../core/checks.h"

namespace gear {

namespace {

constexpr int kBuckets = 1 << 16;
// Up to this many tokens, quantiles come from a plain copy instead of the radix histograms.
constexpr int64_t kSmallBatch = 1 << 12;
// Up to this many tokens, everything runs on the calling thread.
constexpr int64_t kInlineTokens = 1 << 14;

// Clamps to [+0, cap] (never -0: std::max(0, x) returns the first argument on ties). Inputs are not NaN.
inline float cap_d(float d, float cap) { return std::min(std::max(0.0f, d), cap); }
// The log-ratio anchor signal max(0, -logratio): +0 for a NaN logratio (std::max returns its first
// argument when the comparison is false; pass A reports the NaN as the logratio's), +Infinity for
// -Infinity (capped later, as D is).
inline float lr_signal(float lr) { return std::max(0.0f, -lr); }
inline float clamp_h(float h) { return std::max(0.0f, h); }
// For values >= +0 the raw bits are already order-preserving.
inline uint32_t pkey(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

#include "gear_scan_quantiles.inc"

// Branch-free check of tokens [b, e) (vectorisable): true if a valid token holds a bad value or the
// mask holds something other than 0/1.
template <bool HasMask, bool HasLR>
bool row_has_bad(const uint8_t* mask, const float* D, const float* H, const float* LR, int64_t b, int64_t e) {
  constexpr float kMax = std::numeric_limits<float>::max();
  int bad = 0;
  for (int64_t t = b; t < e; ++t) {
    const float d = D[t], h = H[t];
    int v = (d != d) | (d < -1e-6f) | !(std::fabs(h) <= kMax) | (h < -1e-6f);
    if (HasLR) v |= LR[t] != LR[t];
    if (HasMask) {
      const int m = mask[t];
      v = (m > 1) | ((m != 0) & v);
    }
    bad |= v;
  }
  return bad != 0;
}

int worker_count(const ExecContext& ctx) { return ctx.pool ? ctx.pool->threads() : 1; }

// Rows per parallel block: about 32K tokens per block.
int64_t row_block(int64_t rows, int64_t n) {
  if (rows <= 0) return 1;
  const int64_t avg = std::max<int64_t>(1, n / rows);
  return std::max<int64_t>(1, 32768 / avg);
}

struct Mulberry32 {
  uint32_t a;
  uint32_t next() {
    a += 0x6D2B79F5u;
    uint32_t t = (a ^ (a >> 15)) * (1u | a);
    t = (t + ((t ^ (t >> 7)) * (61u | t))) ^ t;
    return t ^ (t >> 14);
  }
  // Uniform integer in [0, m).
  uint32_t below(uint32_t m) { return static_cast<uint32_t>((static_cast<uint64_t>(next()) * m) >> 32); }
};

struct RowStats {
  int64_t valid = 0, peaks = 0, segments = 0, in_seg = 0;
  double wmin = 0, wmax = 0;
  int worker = 0;       // whose run list holds this row's segments
  int64_t first_run = 0;  // index of the row's first run in that list
};

// A segment as (first token, length), recorded by the scan and numbered in pass C.
struct Run {
  int64_t start, len;
};

struct Scratch {
  std::vector<float> dc;
  std::vector<Run> runs;
  std::vector<uint8_t> flag;
  std::vector<double> omega;
  std::vector<int32_t> idx;
};

enum ValueErr : int { kNone = 0, kMask, kDivNaN, kDivNeg, kEntNonFinite, kEntNeg, kLogratioNaN };

// What the passes of one gear_scan call share: the inputs, the work partition and the per-row results
// of pass A that the later passes read.
struct Scan {
  const GearInputs& in;
  const GearParams& p;
  GearOutputs* out;
  ExecContext ctx;
  int64_t rows, n;
  const int32_t* off;
  const uint8_t* mask;
  // The anchor signal every pass reads: the divergence, or (AnchorSignal::LogRatio) `sig`, written by pass A.
  const float* D;
  const float* H;
  const float* LR;
  float cap;
  int W;
  int64_t block;
  bool zscore;
  // Small batches select quantiles from a plain copy (no 2 x 256 KB histograms per worker to clear).
  bool radix;
  int64_t max_len = 0;
  // References, not the thread_local itself, are used by the passes: pool workers must use the caller's buffers.
  QuantileScratch& qscr;
  uint32_t* hists = nullptr;
  std::vector<double> mu, sd;
  std::vector<int64_t> nvalid;
  std::vector<Scratch> scratch;
  int64_t valid = 0;
  std::unique_ptr<float[]> sig;  // the log-ratio signal (AnchorSignal::LogRatio), n values

  Scan(const GearInputs& i, const GearParams& pr, GearOutputs* o, const ExecContext& c)
      : in(i), p(pr), out(o), ctx(c), rows(i.rows), n(i.n), off(i.offsets), mask(i.mask), D(i.divergence),
        H(i.entropy), LR(i.logratio), cap(pr.kl_cap), W(worker_count(c)), block(row_block(i.rows, i.n)),
        zscore(pr.peak_rule == PeakRule::ZScore), radix(i.n > kSmallBatch), qscr(quantile_scratch()),
        mu(i.rows, 0.0), sd(i.rows, 0.0), nvalid(i.rows, 0), scratch(W) {}

  bool is_valid(int64_t t) const { return mask == nullptr || mask[t] != 0; }
};

// The batch thresholds pass B applies (from pass Q's diagnostics).
struct Thresholds {
  double dref, inv_dref, qpeak, eta, eta_low;
};

// Argument checks before any pass: offsets, the arrays the options need, finite advantages.
Status check_scan_args(const GearInputs& in, const GearParams& p) {
  Status st = check_offsets(in.offsets, in.rows, in.n);
  if (!st.is_ok()) return st;
  const bool by_lr = p.anchor_signal == AnchorSignal::LogRatio;
  if (in.n > 0 && ((in.divergence == nullptr && !by_lr) || in.entropy == nullptr))
    return error(Code::Shape, "divergence/entropy: expected arrays of length N, got null");
  if (p.sign_mode == SignMode::Rlsd && in.logratio == nullptr && in.n > 0)
    return error(Code::Option, "logratio: expected a Float32Array (signMode 'rlsd' needs it), got null");
  if (by_lr && in.logratio == nullptr && in.n > 0)
    return error(Code::Option, "logratio: expected a Float32Array (anchorSignal 'logratio' needs it), got null");
  for (int64_t r = 0; r < in.rows; ++r)
    if (!std::isfinite(in.advantages[r]))
      return error(Code::NonFinite,
                   "advantages[" + std::to_string(r) + "]: expected a finite number, got " + number_text(in.advantages[r]));
  return Status::ok();
}

// The error for the bad token t of kind k (pass A).
Status value_error(const Scan& S, int64_t t, int k) {
  const std::string i = "[" + std::to_string(t) + "]";
  switch (k) {
    case kMask: return error(Code::Option, "mask" + i + ": expected 0 or 1, got " + std::to_string(S.mask[t]));
    case kDivNaN: return error(Code::NonFinite, "divergence" + i + ": expected a number, got NaN");
    case kDivNeg:
      return error(Code::TargetRange, "divergence" + i + ": expected >= 0 (tolerance 1e-6), got " + number_text(S.D[t]));
    case kEntNonFinite: return error(Code::NonFinite, "entropy" + i + ": expected a finite number, got " + number_text(S.H[t]));
    case kEntNeg: return error(Code::TargetRange, "entropy" + i + ": expected >= 0 (tolerance 1e-6), got " + number_text(S.H[t]));
    default: return error(Code::NonFinite, "logratio" + i + ": expected a number, got NaN");
  }
}

// Pass A, one row (tokens [b, e)): whether a valid token holds a bad value or the mask something other
// than 0/1, by the branch-free check.
bool row_is_bad(const Scan& S, int64_t b, int64_t e) {
  const uint8_t* mask = S.mask;
  const float *D = S.D, *H = S.H, *LR = S.LR;
  return mask ? (LR ? row_has_bad<true, true>(mask, D, H, LR, b, e) : row_has_bad<true, false>(mask, D, H, LR, b, e))
              : (LR ? row_has_bad<false, true>(mask, D, H, LR, b, e) : row_has_bad<false, false>(mask, D, H, LR, b, e));
}

// Pass A, a row the check refused: its first bad token and the kind of the fault (slow path only).
void first_bad_value(const Scan& S, int64_t b, int64_t e, int64_t* tok, int* kind) {
  constexpr float kFltMax = std::numeric_limits<float>::max();
  const float *D = S.D, *H = S.H, *LR = S.LR;
  for (int64_t t = b; t < e; ++t) {
    const uint8_t m = S.mask ? S.mask[t] : 1;
    const float d = D[t], h = H[t];
    int k = kNone;
    if (m > 1) k = kMask;
    else if (m == 0) continue;
    else if (d != d) k = kDivNaN;
    else if (d < -1e-6f) k = kDivNeg;
    else if (!(std::fabs(h) <= kFltMax)) k = kEntNonFinite;
    else if (h < -1e-6f) k = kEntNeg;
    else if (LR && LR[t] != LR[t]) k = kLogratioNaN;
    if (k != kNone) {
      *tok = t;
      *kind = k;
      return;
    }
  }
}

// Pass A, a row whose values passed: its valid-token count, (z-score peaks) the mean and population std
// of its capped divergence, and (large batches) its counts in the worker's histograms hdw / hhw.
// `vals` has room for the row.
void row_moments(Scan& S, int64_t r, float* vals, uint32_t* hdw, uint32_t* hhw) {
  const int64_t b = S.off[r], e = S.off[r + 1];
  const uint8_t* mask = S.mask;
  const float *D = S.D, *H = S.H;
  const float cap = S.cap;  // a local: the stores to vals could otherwise alias it
  int64_t cnt = 0;
  double sum = 0;
  for (int64_t t = b; t < e; ++t) {
    if (mask && !mask[t]) continue;
    const float dc = cap_d(D[t], cap);
    if (hdw) {
      ++hdw[pkey(dc) >> 16];
      ++hhw[pkey(clamp_h(H[t])) >> 16];
    }
    vals[cnt++] = dc;
    sum += static_cast<double>(dc);
  }
  S.nvalid[r] = cnt;
  if (S.zscore && cnt > 0) {
    const double m = sum / static_cast<double>(cnt);
    double var = 0;
    for (int64_t k = 0; k < cnt; ++k) {
      const double x = static_cast<double>(vals[k]) - m;
      var += x * x;
    }
    S.mu[r] = m;
    S.sd[r] = std::sqrt(var / static_cast<double>(cnt));
  }
}

// Pass A: checks every value, and per row the valid-token count and (z-score peaks) the mean and
// population std of the capped divergence; for large batches, per-worker 16-bit histograms of the
// capped divergence and clamped entropy keys (integer counts: merging is order-independent). Sets
// S.nvalid, S.mu, S.sd, S.valid and the histograms; returns the first bad value's error.
Status pass_a_row_moments(Scan& S) {
  const int64_t rows = S.rows;
  const int32_t* off = S.off;
  std::vector<int64_t> bad_tok(rows, -1);
  std::vector<int> bad_kind(rows, kNone);
  if (S.radix) {
    S.qscr.hists.assign(static_cast<size_t>(S.W) * 2 * kBuckets, 0u);
    S.hists = S.qscr.hists.data();
  }
  // The log-ratio signal replaces the divergence: written here row by row (before the row's checks),
  // read as D by this and every later pass.
  float* sig = nullptr;
  if (S.p.anchor_signal == AnchorSignal::LogRatio) {
    S.sig.reset(new float[static_cast<size_t>(S.n)]);
    sig = S.sig.get();
    S.D = sig;
  }
  for (int64_t r = 0; r < rows; ++r) S.max_len = std::max<int64_t>(S.max_len, off[r + 1] - off[r]);
  const bool done = parallel_blocks(S.ctx, rows, S.block, [&](int64_t rb, int64_t re, int w) {
    uint32_t* hdw = S.radix ? S.hists + static_cast<size_t>(2 * w) * kBuckets : nullptr;
    uint32_t* hhw = S.radix ? S.hists + static_cast<size_t>(2 * w + 1) * kBuckets : nullptr;
    Scratch& s = S.scratch[w];
    s.dc.resize(S.max_len);
    for (int64_t r = rb; r < re; ++r) {
      const int64_t b = off[r], e = off[r + 1];
      if (sig)
        for (int64_t t = b; t < e; ++t) sig[t] = lr_signal(S.LR[t]);
      // Only a row the branch-free check refuses is rescanned for its first bad token.
      if (row_is_bad(S, b, e)) first_bad_value(S, b, e, &bad_tok[r], &bad_kind[r]);
      else row_moments(S, r, s.dc.data(), hdw, hhw);
    }
  });
  if (!done) return error(Code::Aborted, "gear: aborted");
  for (int64_t r = 0; r < rows; ++r)
    if (bad_tok[r] >= 0) return value_error(S, bad_tok[r], bad_kind[r]);
  int64_t valid = 0;
  for (int64_t r = 0; r < rows; ++r) valid += S.nvalid[r];
  S.valid = valid;
  return Status::ok();
}

// Pass Q: exact batch quantiles of the capped divergence (dRef, peak threshold, diagnostics) and the
// clamped entropy (eta, eta_low, diagnostics). Small batches select from a plain copy; large ones
// locate each needed order statistic's bucket in the merged histograms, collect only those buckets'
// values in one more pass, and finish with nth_element inside the (small) buckets. Writes the
// thresholds and quantiles into dg.
Status pass_q_quantiles(Scan& S, GearDiagnostics& dg) {
  const GearParams& p = S.p;
  const int64_t n = S.n, valid = S.valid;
  const int32_t* off = S.off;
  const uint8_t* mask = S.mask;
  const float* D = S.D;
  const float* H = S.H;
  const float cap = S.cap;
  const int W = S.W;
  // D levels: dRef, peak, diagnostics. H levels: eta, eta_low, diagnostics.
  std::vector<double> qd = {p.d_ref_quantile, p.peak_quantile}, qh = {p.entropy_quantile, p.entropy_low_quantile};
  for (double q : kGearDiagLevels) { qd.push_back(q); qh.push_back(q); }
  std::vector<double> vd(qd.size()), vh(qh.size());
  if (!S.radix) {
    std::vector<float> xd(static_cast<size_t>(valid)), xh(static_cast<size_t>(valid));
    int64_t k = 0;
    for (int64_t t = 0; t < n; ++t) {
      if (mask && !mask[t]) continue;
      xd[k] = cap_d(D[t], cap);
      xh[k++] = clamp_h(H[t]);
    }
    select_quantiles(xd, qd, vd.data());
    select_quantiles(xh, qh, vh.data());
  } else {
    const uint32_t* hists = S.hists;
    Selector& sD = S.qscr.d;
    Selector& sH = S.qscr.h;
    sD.reset();
    sH.reset();
    uint32_t* hdm = sD.hist().data();
    uint32_t* hhm = sH.hist().data();
    for (int w = 0; w < W; ++w) {
      const uint32_t* a = hists + static_cast<size_t>(2 * w) * kBuckets;
      const uint32_t* c = a + kBuckets;
      for (int k = 0; k < kBuckets; ++k) {
        hdm[k] += a[k];
        hhm[k] += c[k];
      }
    }
    sD.plan(qd, valid);
    sH.plan(qh, valid);
    std::vector<std::vector<std::vector<float>>> pd(W, std::vector<std::vector<float>>(sD.slots()));
    std::vector<std::vector<std::vector<float>>> ph(W, std::vector<std::vector<float>>(sH.slots()));
    const bool done = parallel_blocks(S.ctx, S.rows, S.block, [&](int64_t rb, int64_t re, int w) {
      for (int64_t t = off[rb]; t < off[re]; ++t) {
        if (mask && !mask[t]) continue;
        const float dc = cap_d(D[t], cap), hc = clamp_h(H[t]);
        const uint32_t kd = pkey(dc), kh = pkey(hc);
        if (sD.wants(kd)) pd[w][sD.slot(kd)].push_back(dc);
        if (sH.wants(kh)) ph[w][sH.slot(kh)].push_back(hc);
      }
    });
    if (!done) return error(Code::Aborted, "gear: aborted");
    merge_cands(sD, pd);
    merge_cands(sH, ph);
    sD.finish(vd.data());
    sH.finish(vh.data());
  }
  dg = GearDiagnostics{};
  dg.valid_tokens = valid;
  dg.d_ref = std::max(vd[0], 1e-6);
  dg.peak_kl_threshold = vd[1];
  dg.entropy_threshold = p.entropy_threshold >= 0 ? p.entropy_threshold : vh[0];
  dg.entropy_low_threshold = p.entropy_low_threshold >= 0 ? p.entropy_low_threshold : vh[1];
  for (int i = 0; i < kGearDiagQuantiles; ++i) {
    dg.kl_quantiles[i] = vd[2 + i];
    dg.entropy_quantiles[i] = vh[2 + i];
  }
  return Status::ok();
}

#include "gear_scan_rows.inc"

// Pass C: global segment ids (row bases from a serial prefix sum over pass B's per-row counts), the
// batch totals of the diagnostics, and the anchor list.
Status pass_c_global_ids(Scan& S, const std::vector<RowStats>& rstats, GearDiagnostics& dg) {
  const int64_t rows = S.rows;
  GearOutputs* out = S.out;
  std::vector<int64_t> base(rows + 1, 0);
  double wmin = std::numeric_limits<double>::infinity(), wmax = -wmin;
  for (int64_t r = 0; r < rows; ++r) {
    const RowStats& rs = rstats[r];
    base[r + 1] = base[r] + rs.segments;
    dg.peaks += rs.peaks;
    dg.tokens_in_segments += rs.in_seg;
    if (rs.valid > 0) {
      wmin = std::min(wmin, rs.wmin);
      wmax = std::max(wmax, rs.wmax);
    }
  }
  dg.segments = base[rows];
  dg.weight_min = S.valid > 0 ? wmin : 0;
  dg.weight_max = S.valid > 0 ? wmax : 0;
  out->anchors.assign(static_cast<size_t>(dg.segments), 0);
  int32_t* anchors = out->anchors.data();
  const bool done = parallel_blocks(S.ctx, rows, S.block, [&](int64_t rb, int64_t re, int) {
    for (int64_t r = rb; r < re; ++r) {
      const RowStats& rs = rstats[r];
      const Run* runs = S.scratch[rs.worker].runs.data() + rs.first_run;
      for (int64_t i = 0; i < rs.segments; ++i) {
        const int32_t id = static_cast<int32_t>(base[r] + i);
        anchors[id] = static_cast<int32_t>(runs[i].start);
        std::fill(out->segment_id + runs[i].start, out->segment_id + runs[i].start + runs[i].len, id);
      }
    }
  });
  if (!done) return error(Code::Aborted, "gear: aborted");
  return Status::ok();
}

}  // namespace

namespace {
// The accepted values of a range as the messages state them: "an integer >= 1 and <= 2147483647".
std::string range_text(const GearRange& r) {
  std::string t = r.integer ? "an integer" : r.finite ? "a finite number" : "a number";
  if (r.min > -kInf) t += std::string(r.min_open ? " > " : " >= ") + number_text(r.min, 17);
  if (r.max < kInf) t += std::string(r.min > -kInf ? " and" : "") + (r.max_open ? " < " : " <= ") + number_text(r.max, 17);
  return t;
}
bool in_range(double v, const GearRange& r) {
  return (r.min_open ? v > r.min : v >= r.min) && (r.max_open ? v < r.max : v <= r.max) && !std::isnan(v) &&
         (!r.finite || std::isfinite(v)) && (!r.integer || v == std::floor(v));
}
// An option's name in messages; built only for an error.
std::string option_name(const char* object, const char* name) { return std::string(object) + "." + name; }
template <class T>
Status store(const char* object, const char* name, double v, const GearRange& r, T* out) {
  const bool ok = in_range(v, r);  // before the conversion: a double out of an integer type's range has none
  // within the range as a double, out of it as stored: only a float32 rounds that far (1e-50 to 0)
  if (ok && in_range(static_cast<double>(static_cast<T>(v)), r)) {
    *out = static_cast<T>(v);
    return Status::ok();
  }
  return error(Code::Option, option_name(object, name) + ": expected " + range_text(r) + (ok ? " in float32" : "") +
                                 ", got " + number_text(v));
}
}  // namespace

Status gear_option(const char* object, const char* name, double v, const GearRange& r, float* out) {
  return store(object, name, v, r, out);
}
Status gear_option(const char* object, const char* name, double v, const GearRange& r, double* out) {
  return store(object, name, v, r, out);
}
Status gear_option(const char* object, const char* name, double v, const GearRange& r, int64_t* out) {
  return store(object, name, v, r, out);
}
Status gear_option(const char* object, const char* name, double v, const GearRange& r, uint32_t* out) {
  return store(object, name, v, r, out);
}

Status gear_option_index(const char* object, const char* name, const std::string& v,
                         std::initializer_list<const char*> names, int* index) {
  int i = 0;
  for (const char* n : names) {
    if (v == n) {
      *index = i;
      return Status::ok();
    }
    ++i;
  }
  std::string list;
  for (const char* n : names) list += std::string(list.empty() ? "'" : ", '") + n + "'";
  return error(Code::Option, option_name(object, name) + ": expected one of " + list + ", got \"" + v + "\"");
}

Status gear_scan(const GearInputs& in, const GearParams& p, GearOutputs* out, const ExecContext& outer) {
  // Small batches run on the calling thread: waking the pool costs more than the work.
  ExecContext ctx = outer;
  if (in.n <= kInlineTokens) ctx.pool = nullptr;
  Status st = check_scan_args(in, p);
  if (!st.is_ok()) return st;

  Scan S(in, p, out, ctx);
  if (!(st = pass_a_row_moments(S)).is_ok()) return st;
  GearDiagnostics& dg = out->diag;
  if (!(st = pass_q_quantiles(S, dg)).is_ok()) return st;

  const Thresholds th{dg.d_ref, 1.0 / dg.d_ref, dg.peak_kl_threshold, dg.entropy_threshold, dg.entropy_low_threshold};
  int64_t seg_len = p.max_segment_length;
  if (p.ablation == Ablation::FixedLength && !(st = fixed_segment_length(S, th, &seg_len)).is_ok()) return st;
  dg.fixed_segment_length = p.ablation == Ablation::FixedLength ? seg_len : 0;

  std::vector<RowStats> rstats(S.rows);
  for (auto& s : S.scratch) s.runs.clear();
  if (!for_rows(S, th, p.ablation, seg_len, true, rstats)) return error(Code::Aborted, "gear: aborted");
  return pass_c_global_ids(S, rstats, dg);
}

}  // namespace gear
