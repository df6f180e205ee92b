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

// Order-preserving map of a non-NaN float to uint32 (negative values flip all bits).
inline uint32_t fkey(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

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

// Exact quantiles of one value stream: plan() turns levels into the order statistics needed and the
// 16-bit buckets that hold them; the caller feeds values whose bucket is selected (collect); value()
// finishes with nth_element inside each bucket.
class Selector {
 public:
  Selector() : hist_(kBuckets, 0) {}
  std::vector<uint32_t>& hist() { return hist_; }

  // Clears the histogram for a new call (the buffers are kept: no reallocation, no page faults).
  void reset() { std::fill(hist_.begin(), hist_.end(), 0u); }

  void plan(const std::vector<double>& qs, int64_t n) {
    n_ = n;
    qs_ = qs;
    lut_.assign(kBuckets, -1);
    buckets_.clear();
    needs_.clear();
    if (n == 0) return;
    std::vector<int64_t>& cum = cum_;
    cum.assign(kBuckets + 1, 0);
    for (int b = 0; b < kBuckets; ++b) cum[b + 1] = cum[b] + hist_[b];
    for (double q : qs) {
      const double pos = q * static_cast<double>(n - 1);
      const int64_t lo = static_cast<int64_t>(std::floor(pos));
      const double frac = pos - static_cast<double>(lo);
      Need nd;
      nd.frac = frac;
      nd.lo = locate(cum, lo);
      nd.hi = (frac > 0 && lo + 1 < n) ? locate(cum, lo + 1) : nd.lo;
      needs_.push_back(nd);
    }
  }
  bool wants(uint32_t key) const { return lut_[key >> 16] >= 0; }
  int slot(uint32_t key) const { return lut_[key >> 16]; }
  int slots() const { return static_cast<int>(buckets_.size()); }
  // Candidates gathered by the caller, one vector per slot.
  std::vector<std::vector<float>>& cands() { return cands_; }

  void finish(double* out) {
    for (size_t i = 0; i < needs_.size(); ++i) {
      if (n_ == 0) { out[i] = 0; continue; }
      const double lo = pick(needs_[i].lo);
      const double hi = pick(needs_[i].hi);
      out[i] = lo + (hi - lo) * needs_[i].frac;
    }
  }

 private:
  struct Rank { int slot; int64_t within; };
  struct Need { Rank lo, hi; double frac; };

  Rank locate(const std::vector<int64_t>& cum, int64_t k) {
    // First bucket whose cumulative count exceeds k.
    const auto it = std::upper_bound(cum.begin() + 1, cum.end(), k);
    const int b = static_cast<int>(it - cum.begin()) - 1;
    if (lut_[b] < 0) {
      lut_[b] = static_cast<int16_t>(buckets_.size());
      buckets_.push_back(b);
    }
    return Rank{lut_[b], k - cum[b]};
  }
  double pick(const Rank& r) {
    auto& c = cands_[r.slot];
    std::nth_element(c.begin(), c.begin() + r.within, c.end());
    return static_cast<double>(c[r.within]);
  }

  std::vector<uint32_t> hist_;
  std::vector<int64_t> cum_;
  std::vector<int16_t> lut_;
  std::vector<int> buckets_;
  std::vector<Need> needs_;
  std::vector<std::vector<float>> cands_;
  std::vector<double> qs_;
  int64_t n_ = 0;
};

// Per-worker candidate buffers merged into the selector (concatenation order does not change the
// k-th smallest value).
void merge_cands(Selector& s, std::vector<std::vector<std::vector<float>>>& per_worker) {
  auto& c = s.cands();
  c.assign(s.slots(), {});
  for (auto& w : per_worker)
    for (int k = 0; k < s.slots() && k < static_cast<int>(w.size()); ++k)
      c[k].insert(c[k].end(), w[k].begin(), w[k].end());
}

// Exact quantiles of a small plain copy: the needed order statistics in ascending order, each found by
// nth_element on the part above the previous one (about 2n work in all); same interpolation as Selector.
void select_quantiles(std::vector<float>& v, const std::vector<double>& qs, double* out) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (n == 0) {
    for (size_t i = 0; i < qs.size(); ++i) out[i] = 0;
    return;
  }
  std::vector<int64_t> ranks;
  for (double q : qs) {
    const int64_t lo = static_cast<int64_t>(std::floor(q * static_cast<double>(n - 1)));
    ranks.push_back(lo);
    if (lo + 1 < n) ranks.push_back(lo + 1);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  int64_t start = 0;
  for (int64_t k : ranks) {
    std::nth_element(v.begin() + start, v.begin() + k, v.end());
    start = k + 1;
  }
  // v is now partitioned at every needed rank, so v[k] is the k-th smallest for each of them.
  for (size_t i = 0; i < qs.size(); ++i) {
    const double pos = qs[i] * static_cast<double>(n - 1);
    const int64_t lo = static_cast<int64_t>(std::floor(pos));
    const double frac = pos - static_cast<double>(lo);
    const double a = static_cast<double>(v[lo]);
    const double b = (frac > 0 && lo + 1 < n) ? static_cast<double>(v[lo + 1]) : a;
    out[i] = a + (b - a) * frac;
  }
}

// Per calling thread, reused across calls: the two selectors and the per-worker histograms.
struct QuantileScratch {
  Selector d, h;
  std::vector<uint32_t> hists;
};
QuantileScratch& quantile_scratch() {
  static thread_local QuantileScratch s;
  return s;
}

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

// Pass A: checks every value, and per row the valid-token count and (z-score peaks) the mean and
// population std of the capped divergence; for large batches, per-worker 16-bit histograms of the
// capped divergence and clamped entropy keys (integer counts: merging is order-independent). Sets
// S.nvalid, S.mu, S.sd, S.valid and the histograms; returns the first bad value's error.
Status pass_a_row_moments(Scan& S) {
  const int64_t rows = S.rows;
  const int32_t* off = S.off;
  const uint8_t* mask = S.mask;
  const float* H = S.H;
  const float* LR = S.LR;
  const float cap = S.cap;
  const bool radix = S.radix, zscore = S.zscore;
  std::vector<int64_t> bad_tok(rows, -1);
  std::vector<int> bad_kind(rows, kNone);
  if (radix) {
    S.qscr.hists.assign(static_cast<size_t>(S.W) * 2 * kBuckets, 0u);
    S.hists = S.qscr.hists.data();
  }
  uint32_t* hists = S.hists;
  // The log-ratio signal replaces the divergence: written here row by row (before the row's checks),
  // read as D by this and every later pass.
  float* sig = nullptr;
  if (S.p.anchor_signal == AnchorSignal::LogRatio) {
    S.sig.reset(new float[static_cast<size_t>(S.n)]);
    sig = S.sig.get();
    S.D = sig;
  }
  const float* D = S.D;
  for (int64_t r = 0; r < rows; ++r) S.max_len = std::max<int64_t>(S.max_len, off[r + 1] - off[r]);
  const int64_t max_len = S.max_len;
  constexpr float kFltMax = std::numeric_limits<float>::max();  // slow path only
  const bool done = parallel_blocks(S.ctx, rows, S.block, [&](int64_t rb, int64_t re, int w) {
    uint32_t* hdw = radix ? hists + static_cast<size_t>(2 * w) * kBuckets : nullptr;
    uint32_t* hhw = radix ? hists + static_cast<size_t>(2 * w + 1) * kBuckets : nullptr;
    Scratch& s = S.scratch[w];
    s.dc.resize(max_len);
    float* vals = s.dc.data();
    for (int64_t r = rb; r < re; ++r) {
      const int64_t b = off[r], e = off[r + 1];
      if (sig)
        for (int64_t t = b; t < e; ++t) sig[t] = lr_signal(LR[t]);
      // Branch-free check of the whole row; only a bad row is rescanned for its first bad token.
      const bool bad = mask ? (LR ? row_has_bad<true, true>(mask, D, H, LR, b, e) : row_has_bad<true, false>(mask, D, H, LR, b, e))
                            : (LR ? row_has_bad<false, true>(mask, D, H, LR, b, e) : row_has_bad<false, false>(mask, D, H, LR, b, e));
      if (bad) {
        for (int64_t t = b; t < e && bad_tok[r] < 0; ++t) {
          const uint8_t m = mask ? mask[t] : 1;
          const float d = D[t], h = H[t];
          int k = kNone;
          if (m > 1) k = kMask;
          else if (m == 0) continue;
          else if (d != d) k = kDivNaN;
          else if (d < -1e-6f) k = kDivNeg;
          else if (!(std::fabs(h) <= kFltMax)) k = kEntNonFinite;
          else if (h < -1e-6f) k = kEntNeg;
          else if (LR && LR[t] != LR[t]) k = kLogratioNaN;
          if (k != kNone) { bad_tok[r] = t; bad_kind[r] = k; }
        }
        continue;
      }
      int64_t cnt = 0;
      double sum = 0;
      for (int64_t t = b; t < e; ++t) {
        if (mask && !mask[t]) continue;
        const float dc = cap_d(D[t], cap);
        if (radix) {
          ++hdw[pkey(dc) >> 16];
          ++hhw[pkey(clamp_h(H[t])) >> 16];
        }
        vals[cnt++] = dc;
        sum += static_cast<double>(dc);
      }
      S.nvalid[r] = cnt;
      if (zscore && cnt > 0) {
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

// Pass B, step 1 for row r (tokens [b, e)): peak flags from the capped divergence, and (write) each
// valid token's own weight as an aligned unit (0 on masked tokens). Returns the peak count; *nv_out
// gets the valid-token count.
int64_t mark_peaks(const Scan& S, const Thresholds& th, int64_t r, Scratch& s, bool write, int64_t* nv_out) {
  const GearParams& p = S.p;
  const int64_t b = S.off[r], e = S.off[r + 1];
  const double A = S.in.advantages[r];
  const double sgn = A > 0 ? 1.0 : (A < 0 ? -1.0 : 0.0);
  // 0: 1 + alpha * min(D / D_ref, 1); 1: weight 1; 2: RLSD clip(exp(sign(A) * logratio))
  const int wmode = p.sign_mode == SignMode::Rlsd ? (sgn == 0 ? 1 : 2)
                  : (p.sign_mode == SignMode::NegativeOnly && !(A < 0)) ? 1 : 0;
  uint8_t* flag = s.flag.data();
  double* om = s.omega.data();
  // z = (D - mean) / (popstd + 1e-6) >= peakZ, tested as D - mean >= peakZ * (popstd + 1e-6)
  const double m = S.mu[r], zmin = p.peak_z * (S.sd[r] + 1e-6);
  const double lo_w = 1.0 - p.eps_w, hi_w = 1.0 + p.eps_w;
  int64_t peaks = 0, nv = 0;
  for (int64_t t = b; t < e; ++t) {
    const int64_t k = t - b;
    if (!S.is_valid(t)) { flag[k] = 0; om[k] = 0; continue; }
    ++nv;
    const double dc = static_cast<double>(cap_d(S.D[t], S.cap));
    const bool over = S.zscore ? dc - m >= zmin : dc >= th.qpeak;
    const uint8_t f = (over && dc >= p.peak_min_kl) ? 1 : 0;
    flag[k] = f;
    peaks += f;
    if (!write) continue;
    if (wmode == 0) om[k] = 1.0 + p.alpha * (dc >= th.dref ? 1.0 : dc * th.inv_dref);
    else if (wmode == 1) om[k] = 1.0;
    else om[k] = std::min(std::max(std::exp(sgn * static_cast<double>(S.LR[t])), lo_w), hi_w);
  }
  *nv_out = nv;
  return peaks;
}

// Pass B, step 2 (random-anchor ablation): moves the row's `peaks` flags to as many valid tokens drawn
// without replacement by the row's seeded generator.
void place_random_anchors(const Scan& S, int64_t r, Scratch& s, int64_t peaks) {
  const int64_t b = S.off[r], e = S.off[r + 1];
  uint8_t* flag = s.flag.data();
  s.idx.clear();
  for (int64_t t = b; t < e; ++t) {
    flag[t - b] = 0;
    if (S.is_valid(t)) s.idx.push_back(static_cast<int32_t>(t));
  }
  Mulberry32 rng{S.p.seed ^ static_cast<uint32_t>(static_cast<uint64_t>(r + 1) * 0x9E3779B9u)};
  const int64_t nidx = static_cast<int64_t>(s.idx.size());
  for (int64_t i = 0; i < peaks; ++i) {
    const int64_t j = i + rng.below(static_cast<uint32_t>(nidx - i));
    std::swap(s.idx[i], s.idx[j]);
    flag[s.idx[i] - b] = 1;
  }
}

// Pass B, step 3: the segment scan, jumping from anchor to anchor; a segment runs from its anchor until
// a masked token, the next anchor, seg_len tokens or (unless fixed-length) the entropy rule ends it.
// With write, copies the anchor's weight over its segment and records the run (local ids). Sets
// rs.segments and rs.in_seg.
void scan_segments(const Scan& S, const Thresholds& th, int64_t r, Scratch& s, Ablation mode, int64_t seg_len,
                   bool write, RowStats& rs) {
  const GearParams& p = S.p;
  const int64_t b = S.off[r], len = S.off[r + 1] - b;
  const float* H = S.H;
  uint8_t* flag = s.flag.data();
  double* om = s.omega.data();
  int64_t local = 0, in_seg = 0;
  if (mode != Ablation::TokenOnly) {
    const bool entropy_rule = mode != Ablation::FixedLength;
    const bool settles = p.segment_end == SegmentEnd::EntropySettles;
    int64_t k = 0;
    while (k < len) {
      const void* hit = std::memchr(flag + k, 1, static_cast<size_t>(len - k));
      if (hit == nullptr) break;
      const int64_t a = static_cast<const uint8_t*>(hit) - flag;
      const double wa = om[a];
      k = a + 1;
      while (k < len && S.is_valid(b + k) && !flag[k] && k - a < seg_len &&
             !(entropy_rule && (settles ? static_cast<double>(clamp_h(H[b + k])) < th.eta_low
                                        : static_cast<double>(clamp_h(H[b + k])) >= th.eta))) {
        if (write) om[k] = wa;
        ++k;
      }
      if (write) s.runs.push_back(Run{b + a, k - a});
      in_seg += k - a;
      ++local;
    }
  }
  rs.segments = local;
  rs.in_seg = in_seg;
}

// Pass B, step 4: normalises the row's weights (mean-one: mean 1 over its valid tokens; equal unit
// weights give exactly 1, as GRPO) and scatters weights and weighted advantages to the outputs.
void normalise_and_scatter(const Scan& S, int64_t r, const Scratch& s, int64_t nv, RowStats& rs) {
  const GearParams& p = S.p;
  const int64_t b = S.off[r], len = S.off[r + 1] - b;
  const double A = S.in.advantages[r];
  const double* om = s.omega.data();
  double sum = 0, wmin = std::numeric_limits<double>::infinity(), wmax = -wmin;
  for (int64_t k = 0; k < len; ++k) {
    if (!S.is_valid(b + k)) continue;
    const double w = om[k];
    sum += w;
    wmin = std::min(wmin, w);
    wmax = std::max(wmax, w);
  }
  const bool mean_one = p.normalize == Normalize::MeanOne;
  const bool uniform = wmin == wmax;
  const double scale = nv == 0 ? 0.0 : mean_one ? (uniform ? 0.0 : static_cast<double>(nv) / sum) : 1.0;
  float* ow = S.out->weights + b;
  float* oa = S.out->advantages + b;
  if (mean_one && uniform) {
    for (int64_t k = 0; k < len; ++k) {
      const bool v = S.is_valid(b + k);
      ow[k] = v ? 1.0f : 0.0f;
      oa[k] = v ? static_cast<float>(A) : 0.0f;  // A = +-0 keeps its zero, like GRPO
    }
    rs.wmin = rs.wmax = nv == 0 ? 0.0 : 1.0;
  } else {
    float fmin = std::numeric_limits<float>::infinity(), fmax = -fmin;
    for (int64_t k = 0; k < len; ++k) {
      const double wt = om[k] * scale;  // 0 on masked tokens
      const float wf = static_cast<float>(wt);
      ow[k] = wf;
      const bool v = S.is_valid(b + k);
      oa[k] = v ? static_cast<float>(A * wt) : 0.0f;
      fmin = v ? std::min(fmin, wf) : fmin;
      fmax = v ? std::max(fmax, wf) : fmax;
    }
    rs.wmin = nv == 0 ? 0.0 : static_cast<double>(fmin);
    rs.wmax = nv == 0 ? 0.0 : static_cast<double>(fmax);
  }
}

// Pass B for one row: the four steps above. With write = false it only counts segments (used to size
// the fixed-length ablation).
void process_row(const Scan& S, const Thresholds& th, int64_t r, Scratch& s, Ablation mode, int64_t seg_len,
                 bool write, RowStats& rs, int w) {
  const int64_t b = S.off[r], e = S.off[r + 1];
  int64_t nv = 0;
  const int64_t peaks = mark_peaks(S, th, r, s, write, &nv);
  if (mode == Ablation::RandomAnchors && peaks > 0) place_random_anchors(S, r, s, peaks);
  rs.peaks = peaks;
  rs.valid = nv;
  // Segment tokens get their global id in pass C; everything else is -1.
  if (write) std::fill(S.out->segment_id + b, S.out->segment_id + e, -1);
  rs.worker = w;
  rs.first_run = static_cast<int64_t>(s.runs.size());
  scan_segments(S, th, r, s, mode, seg_len, write, rs);
  if (!write) return;
  normalise_and_scatter(S, r, s, nv, rs);
}

// Runs process_row over every row in parallel (per-worker scratch).
bool for_rows(Scan& S, const Thresholds& th, Ablation mode, int64_t seg_len, bool write, std::vector<RowStats>& rs) {
  return parallel_blocks(S.ctx, S.rows, S.block, [&](int64_t rb, int64_t re, int w) {
    Scratch& s = S.scratch[w];
    s.flag.resize(S.max_len);
    s.omega.resize(S.max_len);
    for (int64_t r = rb; r < re; ++r) process_row(S, th, r, s, mode, seg_len, write, rs[r], w);
  });
}

// Segment length of the fixed-length ablation: the configured one, or (0: auto) the adaptive rule's
// batch mean segment length, so the ablation spends the same tokens (a counting run of pass B).
Status fixed_segment_length(Scan& S, const Thresholds& th, int64_t* seg_len) {
  const GearParams& p = S.p;
  *seg_len = p.fixed_segment_length;
  if (*seg_len != 0) return Status::ok();
  std::vector<RowStats> cs(S.rows);
  if (!for_rows(S, th, Ablation::None, p.max_segment_length, false, cs)) return error(Code::Aborted, "gear: aborted");
  int64_t segs = 0, toks = 0;
  for (const auto& c : cs) { segs += c.segments; toks += c.in_seg; }
  *seg_len = segs > 0 ? std::max<int64_t>(1, std::llround(static_cast<double>(toks) / static_cast<double>(segs))) : 1;
  return Status::ok();
}

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

Status gear_params_from_array(const double* p, int64_t count, GearParams* out) {
  if (p == nullptr || count != kGearParamCount)
    return error(Code::Shape, "params.length: expected " + std::to_string(kGearParamCount) + ", got " +
                                  std::to_string(p ? count : 0));
  auto bad = [](const char* what, const char* expected, double got) {
    return error(Code::Option, std::string(what) + ": expected " + expected + ", got " + number_text(got));
  };
  auto is_int = [](double v) { return std::isfinite(v) && v == std::floor(v); };
  auto unit = [](double v) { return v >= 0.0 && v <= 1.0; };
  GearParams g;
  const double cap = p[kKlCap];
  if (!(cap > 0) || !(cap <= std::numeric_limits<float>::max())) return bad("klCap", "a finite number > 0", cap);
  g.kl_cap = static_cast<float>(cap);
  if (!(g.kl_cap > 0.0f)) return bad("klCap", "a number > 0 in float32", cap);
  if (p[kPeakRule] != 0 && p[kPeakRule] != 1) return bad("peakRule", "0 (zscore) or 1 (quantile)", p[kPeakRule]);
  g.peak_rule = static_cast<PeakRule>(static_cast<int>(p[kPeakRule]));
  if (!(std::isfinite(p[kPeakZ]) && p[kPeakZ] >= 0)) return bad("peakZ", "a finite number >= 0", p[kPeakZ]);
  g.peak_z = p[kPeakZ];
  if (!(std::isfinite(p[kPeakMinKl]) && p[kPeakMinKl] >= 0))
    return bad("peakMinKl", "a finite number >= 0", p[kPeakMinKl]);
  g.peak_min_kl = p[kPeakMinKl];
  if (!unit(p[kPeakQuantile])) return bad("peakQuantile", "a number >= 0 <= 1", p[kPeakQuantile]);
  g.peak_quantile = p[kPeakQuantile];
  if (!unit(p[kEntropyQuantile])) return bad("entropyQuantile", "a number >= 0 <= 1", p[kEntropyQuantile]);
  g.entropy_quantile = p[kEntropyQuantile];
  if (std::isnan(p[kEntropyThreshold])) g.entropy_threshold = -1;
  else if (p[kEntropyThreshold] >= 0) g.entropy_threshold = p[kEntropyThreshold];
  else return bad("entropyThreshold", "a number >= 0 (NaN: use entropyQuantile)", p[kEntropyThreshold]);
  if (p[kSegmentEnd] != 0 && p[kSegmentEnd] != 1)
    return bad("segmentEnd", "0 (next_fork) or 1 (entropy_settles)", p[kSegmentEnd]);
  g.segment_end = static_cast<SegmentEnd>(static_cast<int>(p[kSegmentEnd]));
  if (!(is_int(p[kMaxSegmentLength]) && p[kMaxSegmentLength] >= 1 && p[kMaxSegmentLength] <= 2147483647.0))
    return bad("maxSegmentLength", "an integer >= 1", p[kMaxSegmentLength]);
  g.max_segment_length = static_cast<int64_t>(p[kMaxSegmentLength]);
  if (!(std::isfinite(p[kAlpha]) && p[kAlpha] >= 0)) return bad("alpha", "a finite number >= 0", p[kAlpha]);
  g.alpha = p[kAlpha];
  if (!unit(p[kDRefQuantile])) return bad("dRefQuantile", "a number >= 0 <= 1", p[kDRefQuantile]);
  g.d_ref_quantile = p[kDRefQuantile];
  if (p[kSignMode] != 0 && p[kSignMode] != 1 && p[kSignMode] != 2)
    return bad("signMode", "0 (symmetric), 1 (negative_only) or 2 (rlsd)", p[kSignMode]);
  g.sign_mode = static_cast<SignMode>(static_cast<int>(p[kSignMode]));
  if (!(p[kEpsW] >= 0 && p[kEpsW] < 1)) return bad("epsW", "a number >= 0 < 1", p[kEpsW]);
  g.eps_w = p[kEpsW];
  if (p[kNormalize] != 0 && p[kNormalize] != 1) return bad("normalize", "0 (mean_one) or 1 (none)", p[kNormalize]);
  g.normalize = static_cast<Normalize>(static_cast<int>(p[kNormalize]));
  const double ab = p[kAblation];
  if (ab != 0 && ab != 1 && ab != 2 && ab != 3) return bad("ablation", "an integer in [0, 3]", ab);
  g.ablation = static_cast<Ablation>(static_cast<int>(ab));
  if (!(is_int(p[kSeed]) && p[kSeed] >= 0 && p[kSeed] <= 4294967295.0))
    return bad("seed", "an integer >= 0 <= 4294967295", p[kSeed]);
  g.seed = static_cast<uint32_t>(p[kSeed]);
  if (!(is_int(p[kFixedSegmentLength]) && p[kFixedSegmentLength] >= 0 && p[kFixedSegmentLength] <= 2147483647.0))
    return bad("fixedSegmentLength", "an integer >= 0 (0: auto)", p[kFixedSegmentLength]);
  g.fixed_segment_length = static_cast<int64_t>(p[kFixedSegmentLength]);
  if (!unit(p[kEntropyLowQuantile])) return bad("entropyLowQuantile", "a number >= 0 <= 1", p[kEntropyLowQuantile]);
  g.entropy_low_quantile = p[kEntropyLowQuantile];
  if (std::isnan(p[kEntropyLowThreshold])) g.entropy_low_threshold = -1;
  else if (p[kEntropyLowThreshold] >= 0) g.entropy_low_threshold = p[kEntropyLowThreshold];
  else return bad("entropyLowThreshold", "a number >= 0 (NaN: use entropyLowQuantile)", p[kEntropyLowThreshold]);
  if (p[kAnchorSignal] != 0 && p[kAnchorSignal] != 1)
    return bad("anchorSignal", "0 (divergence) or 1 (logratio)", p[kAnchorSignal]);
  g.anchor_signal = static_cast<AnchorSignal>(static_cast<int>(p[kAnchorSignal]));
  *out = g;
  return Status::ok();
}

Status masked_quantiles(const float* values, int64_t n, const uint8_t* mask, const double* qs, int64_t nq,
                        double* out, const ExecContext& ctx) {
  for (int64_t i = 0; i < nq; ++i)
    if (!(qs[i] >= 0 && qs[i] <= 1))
      return error(Code::Option, "q[" + std::to_string(i) + "]: expected a number >= 0 <= 1, got " + number_text(qs[i]));
  Selector s;
  int64_t count = 0;
  for (int64_t t = 0; t < n; ++t) {
    if (mask && !mask[t]) continue;
    if (std::isnan(values[t]))
      return error(Code::NonFinite, "values[" + std::to_string(t) + "]: expected a number, got NaN");
    ++s.hist()[fkey(values[t]) >> 16];
    ++count;
  }
  s.plan(std::vector<double>(qs, qs + nq), count);
  const int W = worker_count(ctx);
  std::vector<std::vector<std::vector<float>>> per(W, std::vector<std::vector<float>>(s.slots()));
  const bool done = parallel_blocks(ctx, n, 1 << 16, [&](int64_t b, int64_t e, int w) {
    for (int64_t t = b; t < e; ++t) {
      if (mask && !mask[t]) continue;
      const uint32_t k = fkey(values[t]);
      if (s.wants(k)) per[w][s.slot(k)].push_back(values[t]);
    }
  });
  if (!done) return error(Code::Aborted, "quantiles: aborted");
  merge_cands(s, per);
  s.finish(out);
  return Status::ok();
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
