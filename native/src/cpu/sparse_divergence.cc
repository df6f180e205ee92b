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

struct Cell {
  int64_t i;  // index in the student's list
  double a;   // student log-prob
  double c;   // teacher log-prob
  double p;   // exp(a)
  double q;   // exp(c)
};

// Open-addressing table of the fast matching path: 2^kHashBits slots of (student index + 1) | (teacher
// index + 1) << 8, keyed by id (lists of up to kHashMaxK entries per side).
constexpr int kHashBits = 12;
constexpr uint32_t kHashMask = (1u << kHashBits) - 1;
constexpr int64_t kHashMaxK = 255;

inline uint32_t hash_slot(int32_t id) { return (static_cast<uint32_t>(id) * 2654435761u) >> (32 - kHashBits); }

struct Scratch {
  std::vector<std::pair<int32_t, int64_t>> sorted;  // (id, index) of one side, for long lists
  std::vector<Cell> cells;                          // the shared cells, [0, ncell)
  int64_t ncell = 0;
  std::vector<double> ps, pt;                       // each side's probabilities (one exp per entry)
  double mass_s = 0.0, mass_t = 0.0;                // each side's listed mass
  std::vector<uint16_t> tab;                        // hash table, all zero between rows
  std::vector<uint32_t> sslot, tslot;               // each entry's slot (kHashMask + 1: padding)
  std::vector<int32_t> sx, tx;                      // each side's ids shifted by one, sx[0] = tx[0] = -2
  int32_t tix[kSmallK];                             // prepare_small: each student entry's teacher index
  SideProbsFn probs = active_kernels().side_probs;
  MatchSmallFn match_small = nullptr;               // set when both lists are short enough and the ISA has it
  SharedSumsFn shared_sums = nullptr;               // with match_small
  bool lazy_cells = false;                          // prepare_small leaves the cells to small_cells
  void size_for(int64_t ks, int64_t kt) {
    cells.resize(static_cast<size_t>(std::max(ks, kt) + 1));  // the fast paths write one past the shared cells
    ps.resize(static_cast<size_t>(ks));
    pt.resize(static_cast<size_t>(kt));
    if (ks <= kSmallK && kt <= kSmallK) {
      match_small = active_kernels().match_small;
      shared_sums = active_kernels().shared_sums;
    }
    if (match_small == nullptr && ks <= kHashMaxK && kt <= kHashMaxK) {
      tab.assign(kHashMask + 2, 0);
      sslot.resize(static_cast<size_t>(ks));
      tslot.resize(static_cast<size_t>(kt));
      sx.resize(static_cast<size_t>(ks + 1));
      tx.resize(static_cast<size_t>(kt + 1));
    }
  }
};

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

// side_probs, then the duplicate check: the exact path (diagnostics, and lists too long for the hash table).
int check_side(const int32_t* ids, const float* lp, int64_t k, int64_t vocab, Scratch& sc, double* prob, double* mass,
               int64_t* where) {
  int64_t valid = 0;
  const int code = sc.probs(ids, lp, k, vocab, prob, mass, &valid, where);
  if (code != kOk) return code;
  const int32_t kk = static_cast<int32_t>(k);
  if (k * k <= kQuadraticLimit) {
    // Every pair at once, fixed trip counts (vectorised): each id matches itself, the padding entries each
    // other; any other match is a duplicate, then located by the slow loop.
    int64_t hits = 0;
    for (int32_t i = 0; i < kk; ++i) {
      const int32_t id = ids[i];
      int32_t c = 0;
      for (int32_t j = 0; j < kk; ++j) c += ids[j] == id;
      hits += c;
    }
    const int64_t pads = k - valid;
    if (hits != valid + pads * pads) {
      for (int64_t i = 1; i < k; ++i)
        for (int64_t j = 0; j < i; ++j)
          if (ids[i] >= 0 && ids[j] == ids[i]) {
            *where = i;
            return kDuplicate;
          }
    }
  } else if (valid > 1) {
    sc.sorted.clear();
    for (int64_t i = 0; i < k; ++i)
      if (ids[i] >= 0) sc.sorted.emplace_back(ids[i], i);
    std::sort(sc.sorted.begin(), sc.sorted.end());
    for (size_t j = 1; j < sc.sorted.size(); ++j)
      if (sc.sorted[j].first == sc.sorted[j - 1].first) {
        *where = std::max(sc.sorted[j].second, sc.sorted[j - 1].second);
        return kDuplicate;
      }
  }
  *where = -1;
  return kOk;
}

Status bad_status(const SparseTopk& st, const char* side, int64_t row, int code, int64_t idx, int64_t vocab) {
  const std::string at = std::string(side) + "[row " + std::to_string(row) + (idx >= 0 ? ", entry " + std::to_string(idx) : "") + "]";
  const int64_t o = row * st.k + (idx >= 0 ? idx : 0);
  switch (code) {
    case kNonFinite:
      return error(Code::NonFinite, at + ".logprob: expected a finite log-prob or -Infinity, got " + number_text(st.logprobs[o]));
    case kIdRange:
      return error(Code::TargetRange, at + ".id: expected -1 (padding) or an id in [0, " +
                                          (vocab > 0 ? std::to_string(vocab) : std::string("2^31")) + "), got " +
                                          std::to_string(st.ids[o]));
    case kPadding:
      return error(Code::Option, at + ".logprob: expected -Infinity for a padding entry (id -1), got " +
                                     number_text(st.logprobs[o]));
    case kDuplicate:
      return error(Code::Option, at + ".id: expected ids listed once per row, got " + std::to_string(st.ids[o]) + " again");
    default:
      return error(Code::Option, at + ": expected log-probs whose probabilities sum to at most 1 (tolerance 0.01), got a sum of " +
                                     number_text(std::exp(log_sum(st.k, [&](int64_t j) {
                                       return static_cast<double>(st.logprobs[row * st.k + j]);
                                     }))));
  }
}

// Finds, for each listed student id, the teacher entry with the same id: the shared cells, in student order.
void match(const int32_t* sid, const float* slp, int64_t ks, const int32_t* tid, const float* tlp, int64_t kt,
           Scratch& sc) {
  const double* ps = sc.ps.data();
  const double* pt = sc.pt.data();
  Cell* cells = sc.cells.data();
  int64_t n = 0;
  if (ks * kt <= kQuadraticLimit) {
    const int32_t kt32 = static_cast<int32_t>(kt);
    for (int64_t i = 0; i < ks; ++i) {
      const int32_t id = sid[i];
      if (id < 0) continue;
      // ids are unique (checked): at most one match, so the sum is its index + 1 (a vectorised reduction)
      int32_t h = 0;
      for (int32_t jj = 0; jj < kt32; ++jj) h += tid[jj] == id ? jj + 1 : 0;
      if (h > 0) cells[n++] = {i, slp[i], tlp[h - 1], ps[i], pt[h - 1]};
    }
    sc.ncell = n;
    return;
  }
  sc.sorted.clear();
  for (int64_t j = 0; j < kt; ++j)
    if (tid[j] >= 0) sc.sorted.emplace_back(tid[j], j);
  std::sort(sc.sorted.begin(), sc.sorted.end());
  for (int64_t i = 0; i < ks; ++i) {
    const int32_t id = sid[i];
    if (id < 0) continue;
    auto it = std::lower_bound(sc.sorted.begin(), sc.sorted.end(), std::make_pair(id, int64_t{0}));
    if (it != sc.sorted.end() && it->first == id)
      cells[n++] = {i, slp[i], tlp[it->second], ps[i], pt[it->second]};
  }
  sc.ncell = n;
}

// The fast path of one row (both lists of at most kHashMaxK entries): the checks of side_probs, then
// the ids of both sides through the hash table (a duplicate is found where it is inserted), then the
// shared cells in student order. Returns false for a row that fails any check (the same rows as
// check_side + match, which then name the error); the table is left all zero either way.
bool prepare_fast(const int32_t* sid, const float* slp, int64_t ks, const int32_t* tid, const float* tlp, int64_t kt,
                  int64_t vocab, Scratch& sc) {
  int64_t where, vs, vt;
  if (sc.probs(sid, slp, ks, vocab, sc.ps.data(), &sc.mass_s, &vs, &where) != kOk) return false;
  if (sc.probs(tid, tlp, kt, vocab, sc.pt.data(), &sc.mass_t, &vt, &where) != kOk) return false;
  uint16_t* tab = sc.tab.data();
  uint32_t* ss = sc.sslot.data();
  uint32_t* ts = sc.tslot.data();
  constexpr uint32_t kPad = kHashMask + 1;  // a slot that stays 0
  // The ids by table index (index + 1, 0 -> -2: no id): a slot v holds id iff sx[v & 0xff] or tx[v >> 8] is id.
  int32_t* sx = sc.sx.data();
  int32_t* tx = sc.tx.data();
  sx[0] = tx[0] = -2;
  std::memcpy(sx + 1, sid, static_cast<size_t>(ks) * sizeof(int32_t));
  std::memcpy(tx + 1, tid, static_cast<size_t>(kt) * sizeof(int32_t));
  auto other = [&](uint32_t v, int32_t id) { return (v != 0) & (sx[v & 0xffu] != id) & (tx[v >> 8] != id); };
  bool ok = true;
  int64_t ni = 0, nj = 0;  // entries whose slot is set
  for (; ni < ks; ++ni) {
    const int32_t id = sid[ni];
    if (id < 0) {
      ss[ni] = kPad;
      continue;
    }
    uint32_t h = hash_slot(id);
    while (tab[h] != 0) {  // rare: a collision, or the id again
      if (sid[(tab[h] & 0xffu) - 1] == id) ok = false;
      h = (h + 1) & kHashMask;
    }
    if (!ok) break;
    tab[h] = static_cast<uint16_t>(ni + 1);
    ss[ni] = h;
  }
  int64_t n = 0;
  Cell* cells = sc.cells.data();
  const double* ps = sc.ps.data();
  const double* pt = sc.pt.data();
  if (ok) {
    for (; nj < kt; ++nj) {
      const int32_t id = tid[nj];
      if (id < 0) {
        ts[nj] = kPad;
        continue;
      }
      uint32_t h = hash_slot(id);
      uint32_t v = tab[h];
      // Common case, without a data-dependent branch: the slot is empty or holds id (shared or not).
      if (other(v, id)) {
        do {
          h = (h + 1) & kHashMask;
          v = tab[h];
        } while (other(v, id));
      }
      if (v >> 8) {  // the teacher lists id twice
        ok = false;
        break;
      }
      tab[h] = static_cast<uint16_t>(v | static_cast<uint32_t>((nj + 1) << 8));
      ts[nj] = h;
      // The shared cells in teacher order, branch-free: every entry written at index n (<= kt), the shared
      // ones kept.
      const uint32_t si = v & 0xffu;
      const int64_t i = si ? static_cast<int64_t>(si) - 1 : 0;
      cells[n] = {i, slp[i], tlp[nj], ps[i], pt[nj]};
      n += si != 0;
    }
  }
  sc.ncell = ok ? n : 0;
  for (int64_t i = 0; i < ni; ++i) tab[ss[i]] = 0;
  for (int64_t j = 0; j < nj; ++j) tab[ts[j]] = 0;
  return ok;
}

// The shared cells of a row that took prepare_small, in student order, branch-free.
void small_cells(const float* slp, int64_t ks, const float* tlp, Scratch& sc) {
  Cell* cells = sc.cells.data();
  const double* ps = sc.ps.data();
  const double* pt = sc.pt.data();
  int64_t n = 0;
  for (int64_t i = 0; i < ks; ++i) {
    const int32_t j = sc.tix[i];
    const int64_t jj = j < 0 ? 0 : j;
    cells[n] = {i, slp[i], tlp[jj], ps[i], pt[jj]};
    n += j >= 0;
  }
}

// The fast path of a row of two short lists (vector matching): the checks of side_probs, then the vector matching
// (which also finds duplicates), then the shared cells in student order, branch-free. Returns false for a
// row that fails any check (the same rows as check_side + match, which then name the error). With
// lazy_cells the cells are left to the caller (small_cells), only their count set.
bool prepare_small(const int32_t* sid, const float* slp, int64_t ks, const int32_t* tid, const float* tlp, int64_t kt,
                   int64_t vocab, Scratch& sc) {
  int64_t where, vs, vt;
  if (sc.probs(sid, slp, ks, vocab, sc.ps.data(), &sc.mass_s, &vs, &where) != kOk) return false;
  if (sc.probs(tid, tlp, kt, vocab, sc.pt.data(), &sc.mass_t, &vt, &where) != kOk) return false;
  const int64_t shared = sc.match_small(sid, ks, tid, kt, sc.tix);
  if (shared < 0) return false;
  sc.ncell = shared;
  if (!sc.lazy_cells) small_cells(slp, ks, tlp, sc);
  return true;
}

// JSD's mixture of masses p and q.
inline double mix(double beta, double p, double q) { return (1.0 - beta) * p + beta * q; }

// One category's term of the divergence, from the student's and the teacher's log-masses x and y and
// their masses p = e^x and q = e^y; for JSD lm is log m of the mixture m = (1 - beta) p + beta q (unused
// when m = 0).
double term_lm(DivKind k, double beta, double x, double p, double y, double q, double lm) {
  if (k == DivKind::ReverseKl) std::swap(x, y), std::swap(p, q), k = DivKind::ForwardKl;  // KL(p||q): roles swapped
  if (k == DivKind::ForwardKl) {  // q (log q - log p)
    if (q == 0.0) return 0.0;
    if (x == -kInf) return kInf;
    return q * (y - x);
  }
  const double m = mix(beta, p, q);
  if (m == 0.0) return 0.0;
  return (p > 0.0 ? (1.0 - beta) * p * (x - lm) : 0.0) + (q > 0.0 ? beta * q * (y - lm) : 0.0);
}

double term(DivKind k, double beta, double x, double p, double y, double q) {
  const double m = k == DivKind::Jsd ? mix(beta, p, q) : 0.0;
  return term_lm(k, beta, x, p, y, q, m > 0.0 ? log_pos(m) : 0.0);
}

// d term / d x (the student's log-mass as a free coordinate), with p = e^x, q = e^y.
double dterm(DivKind k, double beta, double x, double p, double y, double q) {
  if (k == DivKind::ReverseKl) return p > 0.0 ? p * (x - y + 1.0) : 0.0;
  if (k == DivKind::ForwardKl) return -q;
  const double m = (1.0 - beta) * p + beta * q;
  return p > 0.0 ? (1.0 - beta) * p * (x - log_pos(m)) : 0.0;
}

struct RowState {
  double value = 0.0;
  double ls = -kInf, lt = -kInf;    // log sum over C of p_s, p_t (unclamped; Bucket: only when tiny)
  double ms = 0.0, mt = 0.0;        // sum over C of p_s, p_t (e^ls, e^lt)
  double lbs = 0.0, lbt = 0.0;      // bucket log-masses (Bucket support)
  double bs = 1.0, bt = 1.0;        // bucket masses
  double lmb = 0.0;                 // log of the buckets' JSD mixture, where has_lmb
  bool has_lmb = false;
  bool bucket_live = false;         // the bucket's mass moves with the student's log-probs
  bool empty = false;               // Renormalize with no common conditional: value 0, gradient 0
};

// Per call: the bucket's mass at the clamp, -expm1(-clamp), and a band around e^-clamp outside which the
// comparison log m < -clamp needs no log.
struct Clamp {
  double clamp, cb, lo, hi;
  explicit Clamp(double c) : clamp(c), cb(-std::expm1(-c)), lo(std::exp(-c) * (1.0 - 1e-9)), hi(std::exp(-c) * (1.0 + 1e-9)) {}
  bool below(double m) const { return m < lo || (m <= hi && log_pos(m) < -clamp); }  // log m < -clamp, for m > 0
};

// The bucket's mass -expm1(min(l, -clamp)) for l = log m: 1 - m below the clamp (exact to rounding: the
// masses are sums of probabilities), cb = -expm1(-clamp) at it.
inline double bucket_mass(double l, double m, const Clamp& cl) {
  if (l == -kInf) return 1.0;
  return l < -cl.clamp ? 1.0 - m : cl.cb;
}

// log sum over the cells of e^x from the cached masses (*mass: that sum); when they underflow, the shifted sum.
template <typename X, typename P>
double cells_log_mass(const Cell* cells, int64_t n, X x, P p, double* mass) {
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += p(cells[j]);
  if (s > 1e-250) {
    *mass = s;
    return log_pos(s);
  }
  const double l = log_sum(n, [&](int64_t j) { return x(cells[j]); });
  *mass = std::exp(l);
  return l;
}

// sums: null, or both masses and the shared terms already summed (SharedSumsFn, Bucket support only).
RowState row_value(const Cell* cells, int64_t n, DivKind k, const SparseDivergenceOptions& opt, const Clamp& cl,
                   const double* sums = nullptr) {
  RowState r;
  double v = 0.0;
  if (opt.support == SparseSupport::Bucket) {
    // One pass for the common case: both masses and the shared terms (the per-kind branch is loop-invariant).
    double ms = 0.0, mt = 0.0;
    if (sums != nullptr) {
      ms = sums[0], mt = sums[1], v = sums[2];
    } else {
      for (int64_t j = 0; j < n; ++j) {
        const Cell& c = cells[j];
        ms += c.p;
        mt += c.q;
        v += term(k, opt.beta, c.a, c.p, c.c, c.q);
      }
    }
    // The bucket masses from the shared masses; log ms (ls) only where the comparison with the clamp
    // needs it or the masses underflow (then from the log-probs). ls / lt are not set otherwise.
    if (ms > 1e-250) {
      r.ms = ms;
      r.bucket_live = cl.below(ms);
      r.bs = r.bucket_live ? 1.0 - ms : cl.cb;
    } else {
      r.ls = cells_log_mass(cells, n, [](const Cell& c) { return c.a; }, [](const Cell& c) { return c.p; }, &r.ms);
      r.bucket_live = r.ls > -kInf && r.ls < -opt.tail_clamp;
      r.bs = bucket_mass(r.ls, r.ms, cl);
    }
    if (mt > 1e-250) {
      r.mt = mt;
      r.bt = cl.below(mt) ? 1.0 - mt : cl.cb;
    } else {
      r.lt = cells_log_mass(cells, n, [](const Cell& c) { return c.c; }, [](const Cell& c) { return c.q; }, &r.mt);
      r.bt = bucket_mass(r.lt, r.mt, cl);
    }
    r.lbs = r.bs > 0.0 ? log_pos(r.bs) : -kInf;
    r.lbt = r.bt > 0.0 ? log_pos(r.bt) : -kInf;
    v += term(k, opt.beta, r.lbs, r.bs, r.lbt, r.bt);
    r.value = v < 0.0 ? 0.0 : v;  // rounding can leave a KL of identical distributions a hair below 0
    return r;
  }
  r.ls = cells_log_mass(cells, n, [](const Cell& c) { return c.a; }, [](const Cell& c) { return c.p; }, &r.ms);
  r.lt = cells_log_mass(cells, n, [](const Cell& c) { return c.c; }, [](const Cell& c) { return c.q; }, &r.mt);
  if (r.ls == -kInf || r.lt == -kInf) {
    r.empty = true;
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const double x = cells[j].a - r.ls, y = cells[j].c - r.lt;
      v += term(k, opt.beta, x, exp_d(x), y, exp_d(y));
    }
  }
  // Rounding can leave a KL of identical distributions a hair below 0.
  r.value = v < 0.0 ? 0.0 : v;
  return r;
}

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

// Checks both sides of a row and matches their ids; returns a row error code (2 * code + side) or 0.
int prepare_row(const SparseTopk& s, const SparseTopk& t, int64_t r, int64_t vocab, Scratch& sc, int64_t* where) {
  const int32_t* sid = s.ids + r * s.k;
  const float* slp = s.logprobs + r * s.k;
  const int32_t* tid = t.ids + r * t.k;
  const float* tlp = t.logprobs + r * t.k;
  sc.ps.resize(static_cast<size_t>(s.k));
  sc.pt.resize(static_cast<size_t>(t.k));
  sc.cells.resize(static_cast<size_t>(std::max(s.k, t.k) + 1));
  int code = check_side(sid, slp, s.k, vocab, sc, sc.ps.data(), &sc.mass_s, where);
  if (code != kOk) return 2 * code;
  code = check_side(tid, tlp, t.k, vocab, sc, sc.pt.data(), &sc.mass_t, where);
  if (code != kOk) return 2 * code + 1;
  match(sid, slp, s.k, tid, tlp, t.k, sc);
  return 0;
}

// One row's checks, probabilities and shared cells; false for a row that fails a check.
inline bool prepare(const SparseTopk& s, const SparseTopk& t, int64_t r, int64_t vocab, Scratch& sc) {
  if (sc.match_small != nullptr)
    return prepare_small(s.ids + r * s.k, s.logprobs + r * s.k, s.k, t.ids + r * t.k, t.logprobs + r * t.k, t.k, vocab, sc);
  if (!sc.tab.empty())
    return prepare_fast(s.ids + r * s.k, s.logprobs + r * s.k, s.k, t.ids + r * t.k, t.logprobs + r * t.k, t.k, vocab, sc);
  int64_t where;
  return prepare_row(s, t, r, vocab, sc, &where) == 0;
}

// row_value of row r after prepare, with the vector shared sums where the row took prepare_small.
inline RowState row_value_of(const SparseTopk& s, const SparseTopk& t, int64_t r, DivKind k,
                             const SparseDivergenceOptions& opt, const Clamp& cl, Scratch& sc) {
  if (sc.shared_sums != nullptr && opt.support == SparseSupport::Bucket) {
    double sums[3];
    sc.shared_sums(s.logprobs + r * s.k, sc.ps.data(), s.k, t.logprobs + r * t.k, sc.pt.data(), t.k, sc.tix,
                   static_cast<int>(k), opt.beta, sums);
    // Tiny shared masses: row_value goes back to the cells.
    if (sc.lazy_cells && !(sums[0] > 1e-250 && sums[1] > 1e-250))
      small_cells(s.logprobs + r * s.k, s.k, t.logprobs + r * t.k, sc);
    return row_value(sc.cells.data(), sc.ncell, k, opt, cl, sums);
  }
  return row_value(sc.cells.data(), sc.ncell, k, opt, cl);
}

// The entropy bounds (docs: sparseDivergence). The listed entries contribute exactly H_k; the tail's mass
// tau lies on the unlisted ids, each at most m (the smallest listed probability > 0), at most V - k of
// them. Lowest entropy: as concentrated as allowed, floor(tau / m) ids at m and the rest r on one more
// (this vector majorises every feasible one, and entropy is Schur-concave). Highest: spread evenly over the
// V - k ids. log m is the listed log-prob of m's entry (m = e^a to rounding): no log per row but two, of
// the rest (split_tail) and of tau, given as lrem and ltau.
struct TailSplit {
  double cnt = 0.0, rem = 0.0;  // floor(tau / m), and the rest
};
inline TailSplit split_tail(double tau, const ListEntropy& le) {
  TailSplit ts;
  if (tau > 0.0 && le.mn < kInf) {
    const double ratio = tau / le.mn;  // floor without libm: a truncation below 2^52, already whole above
    ts.cnt = ratio < 4503599627370496.0 ? static_cast<double>(static_cast<int64_t>(ratio)) : ratio;
    ts.rem = std::max(0.0, tau - ts.cnt * le.mn);
  }
  return ts;
}
// log_rest: log(V - listed) by the count of listed ids (empty: V unknown, an upper bound of +Infinity).
inline void entropy_bounds(const ListEntropy& le, double tau, const TailSplit& ts, double lrem, double ltau,
                           const std::vector<double>& log_rest, float* lo_out, float* hi_out) {
  double lo = le.hk, hi = le.hk;
  if (tau > 0.0) {
    if (le.mn < kInf) lo += ts.cnt * (-le.mn * le.lmn) + (ts.rem > 0.0 ? -ts.rem * lrem : 0.0);
    hi = log_rest.empty() ? kInf : le.hk + tau * (log_rest[static_cast<size_t>(le.listed)] - ltau);
  }
  if (lo_out) *lo_out = static_cast<float>(lo);
  if (hi_out) *hi_out = static_cast<float>(hi);
}

// Sizes the scratch of a task for its row groups and returns the group size: eight rows where short lists
// take the vector kernels, else one (eight hash tables would crowd the L1 cache).
int group_rows(int64_t ks, int64_t kt, Scratch* scs) {
  scs[0].size_for(ks, kt);
  if (scs[0].match_small == nullptr) return 1;
  for (int j = 1; j < 8; ++j) scs[j].size_for(ks, kt);
  return 8;
}

// prepare for rows g .. g + gn - 1 into scs[0 .. gn); short lists pass by pass (each pass over the group's
// independent rows, which the core then overlaps: a row alone is one long chain of dependent steps).
// False when any row fails a check (which one: prepare row by row).
bool prepare_group(const SparseTopk& s, const SparseTopk& t, int64_t g, int gn, int64_t vocab, Scratch* scs) {
  if (scs[0].match_small == nullptr) {
    for (int j = 0; j < gn; ++j)
      if (!prepare(s, t, g + j, vocab, scs[j])) return false;
    return true;
  }
  int64_t where, valid;
  for (int j = 0; j < gn; ++j) {
    Scratch& sc = scs[j];
    const int64_t r = g + j;
    if (sc.probs(s.ids + r * s.k, s.logprobs + r * s.k, s.k, vocab, sc.ps.data(), &sc.mass_s, &valid, &where) != kOk ||
        sc.probs(t.ids + r * t.k, t.logprobs + r * t.k, t.k, vocab, sc.pt.data(), &sc.mass_t, &valid, &where) != kOk)
      return false;
  }
  for (int j = 0; j < gn; ++j) {
    Scratch& sc = scs[j];
    const int64_t r = g + j;
    sc.ncell = sc.match_small(s.ids + r * s.k, s.k, t.ids + r * t.k, t.k, sc.tix);
    if (sc.ncell < 0) return false;
    if (!sc.lazy_cells) small_cells(s.logprobs + r * s.k, s.k, t.logprobs + r * t.k, sc);
  }
  return true;
}

Status row_status(const SparseTopk& s, const SparseTopk& t, int64_t r, int64_t vocab) {
  Scratch sc;
  int64_t where = -1;
  const int code = prepare_row(s, t, r, vocab, sc, &where);
  return (code & 1) ? bad_status(t, "teacher", r, code >> 1, where, vocab)
                    : bad_status(s, "student", r, code >> 1, where, vocab);
}

}  // namespace

Status sparse_divergence(const SparseTopk& s, const SparseTopk& t, int64_t n, const SparseDivergenceOptions& opt,
                         const SparseDivergenceOut& out, const ExecContext& ctx) {
  auto fail = [&](Status e) {
    const int64_t rows = n > 0 ? n : 0;
    for (float* p : {out.value, out.student_tail, out.teacher_tail, out.student_shared_mass, out.teacher_shared_mass,
                     out.entropy_lower, out.entropy_upper})
      fill_nan(p, rows);
    if (out.shared)
      for (int64_t i = 0; i < rows; ++i) out.shared[i] = -1;
    return e;
  };
  Status st = check_common(s, t, n, opt);
  if (!st.is_ok()) return fail(st);
  const DivKind k = effective_kind(opt.kind, opt.beta);
  const Clamp cl(opt.tail_clamp);
  std::atomic<int64_t> bad{kNone};
  const ListEntropyFn entropy = active_kernels().list_entropy;
  const Logs8Fn logs = active_kernels().logs8;
  const bool done = parallel_blocks(ctx, n, rows_per_task(s.k, t.k), [&](int64_t b, int64_t e, int) {
    Scratch scs[8];
    const int G = group_rows(s.k, t.k, scs);
    // log(V - listed) of the entropy's upper bound, for each count of listed ids
    std::vector<double> log_rest;
    if (opt.vocab > 0 && out.entropy_upper)
      for (int64_t j = 0; j <= s.k; ++j)
        log_rest.push_back(std::log(static_cast<double>(std::max<int64_t>(opt.vocab - j, 1))));
    // Rows go in groups (group_rows): each row's logs (the bucket's masses and mixture, the entropy bounds'
    // rest and tail) wait in lg[quantity][row] (1 where unused) and each quantity takes one logs8 call for
    // the group, vector-wide where the ISA has it (log_pos's values to 1e-16, each lane whatever the others).
    struct Pending {
      RowState rs;
      double v, tau;
      ListEntropy le;
      TailSplit ts;
      bool fused;
    };
    Pending pd[8];
    alignas(64) double lg[5][8];
    for (int j = 0; j < G; ++j)  // only the fallback reads them
      scs[j].lazy_cells = scs[j].shared_sums != nullptr && opt.support == SparseSupport::Bucket;
    const bool want_h = out.entropy_lower || out.entropy_upper;
    bool any_fused = false;
    auto finish = [&](int64_t r0, int np) {
      for (int q = 0; q < 5; ++q)
        for (int j = np; j < 8; ++j) lg[q][j] = 1.0;
      if (want_h) {  // the group's divisions side by side (one per row, each a long latency)
        for (int j = 0; j < np; ++j) {
          Pending& w = pd[j];
          w.ts = split_tail(w.tau, w.le);
          if (w.ts.rem > 0.0) lg[3][j] = w.ts.rem;
          if (w.tau > 0.0) lg[4][j] = w.tau;
        }
      }
      if (any_fused) {
        logs(lg[0], np);
        logs(lg[1], np);
        if (k == DivKind::Jsd) logs(lg[2], np);
      }
      if (want_h) {
        logs(lg[3], np);
        logs(lg[4], np);
      }
      for (int j = 0; j < np; ++j) {
        const int64_t r = r0 + j;
        Pending& w = pd[j];
        RowState& rs = w.rs;
        if (w.fused) {
          const double lbs = rs.bs > 0.0 ? lg[0][j] : -kInf, lbt = rs.bt > 0.0 ? lg[1][j] : -kInf;
          const double v = w.v + term_lm(k, opt.beta, lbs, rs.bs, lbt, rs.bt, lg[2][j]);
          rs.value = v < 0.0 ? 0.0 : v;  // rounding can leave a KL of identical distributions a hair below 0
        }
        if (out.value) out.value[r] = static_cast<float>(rs.value < opt.kl_cap ? rs.value : opt.kl_cap);
        if (want_h)
          entropy_bounds(w.le, w.tau, w.ts, lg[3][j], lg[4][j], log_rest,
                         out.entropy_lower ? out.entropy_lower + r : nullptr,
                         out.entropy_upper ? out.entropy_upper + r : nullptr);
      }
      any_fused = false;
    };
    if (G == 1) {  // row by row, each log when it is needed
      Scratch& sc = scs[0];
      for (int64_t r = b; r < e; ++r) {
        if (!prepare(s, t, r, opt.vocab, sc)) {
          atomic_min64(bad, r);
          return;
        }
        const RowState rs = row_value_of(s, t, r, k, opt, cl, sc);
        const double tau = std::max(0.0, 1.0 - sc.mass_s);
        if (out.value) out.value[r] = static_cast<float>(rs.value < opt.kl_cap ? rs.value : opt.kl_cap);
        if (out.student_shared_mass) out.student_shared_mass[r] = static_cast<float>(rs.ms);
        if (out.teacher_shared_mass) out.teacher_shared_mass[r] = static_cast<float>(rs.mt);
        if (out.shared) out.shared[r] = static_cast<int32_t>(sc.ncell);
        if (out.student_tail) out.student_tail[r] = static_cast<float>(tau);
        if (out.teacher_tail) out.teacher_tail[r] = static_cast<float>(std::max(0.0, 1.0 - sc.mass_t));
        if (want_h) {
          ListEntropy le;
          entropy(s.ids + r * s.k, s.logprobs + r * s.k, sc.ps.data(), s.k, &le);
          const TailSplit ts = split_tail(tau, le);
          entropy_bounds(le, tau, ts, ts.rem > 0.0 ? log_pos(ts.rem) : 0.0,
                         tau > 0.0 && !log_rest.empty() ? log_pos(tau) : 0.0, log_rest,
                         out.entropy_lower ? out.entropy_lower + r : nullptr,
                         out.entropy_upper ? out.entropy_upper + r : nullptr);
        }
      }
      return;
    }
    for (int64_t g = b; g < e; g += G) {
      const int gn = static_cast<int>(std::min<int64_t>(G, e - g));
      const bool grouped = prepare_group(s, t, g, gn, opt.vocab, scs);  // else row by row, to the first bad row
      for (int np = 0; np < gn; ++np) {
        const int64_t r = g + np;
        Scratch& sc = scs[np];
        if (!grouped && !prepare(s, t, r, opt.vocab, sc)) {
          atomic_min64(bad, r);
          return;
        }
        Pending& w = pd[np];
        for (int q = 0; q < 5; ++q) lg[q][np] = 1.0;
        RowState& rs = w.rs;
        w.fused = false;
        if (sc.shared_sums != nullptr && opt.support == SparseSupport::Bucket) {
          double sums[3];
          sc.shared_sums(s.logprobs + r * s.k, sc.ps.data(), s.k, t.logprobs + r * t.k, sc.pt.data(), t.k, sc.tix,
                         static_cast<int>(k), opt.beta, sums);
          if (sums[0] > 1e-250 && sums[1] > 1e-250) {  // else the underflow's care in row_value
            w.fused = any_fused = true;
            rs = RowState();
            rs.ms = sums[0], rs.mt = sums[1], w.v = sums[2];
            rs.bs = cl.below(rs.ms) ? 1.0 - rs.ms : cl.cb;
            rs.bt = cl.below(rs.mt) ? 1.0 - rs.mt : cl.cb;
            if (rs.bs > 0.0) lg[0][np] = rs.bs;
            if (rs.bt > 0.0) lg[1][np] = rs.bt;
            const double mb = k == DivKind::Jsd ? mix(opt.beta, rs.bs, rs.bt) : 0.0;
            if (mb > 0.0) lg[2][np] = mb;
          } else {
            if (sc.lazy_cells) small_cells(s.logprobs + r * s.k, s.k, t.logprobs + r * t.k, sc);
            rs = row_value(sc.cells.data(), sc.ncell, k, opt, cl, sums);
          }
        } else {
          rs = row_value_of(s, t, r, k, opt, cl, sc);
        }
        const double tau = std::max(0.0, 1.0 - sc.mass_s);
        w.tau = tau;
        if (out.student_shared_mass) out.student_shared_mass[r] = static_cast<float>(rs.ms);
        if (out.teacher_shared_mass) out.teacher_shared_mass[r] = static_cast<float>(rs.mt);
        if (out.shared) out.shared[r] = static_cast<int32_t>(sc.ncell);
        if (out.student_tail) out.student_tail[r] = static_cast<float>(tau);
        if (out.teacher_tail) out.teacher_tail[r] = static_cast<float>(std::max(0.0, 1.0 - sc.mass_t));
        if (want_h) entropy(s.ids + r * s.k, s.logprobs + r * s.k, sc.ps.data(), s.k, &w.le);
      }
      finish(g, gn);
    }
  });
  if (bad.load() != kNone) return fail(row_status(s, t, bad.load(), opt.vocab));
  if (!done) return fail(error(Code::Aborted, "sparseDivergence: aborted by the AbortSignal"));
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
  const double beta = opt.beta;
  const Clamp cl(opt.tail_clamp);
  std::atomic<int64_t> bad{kNone}, infinite{kNone};
  const BucketGradFn bucket_grad = active_kernels().bucket_grad;
  const Logs8Fn logs = active_kernels().logs8;
  const bool done = parallel_blocks(ctx, n, rows_per_task(s.k, t.k), [&](int64_t b, int64_t e, int) {
    Scratch scs[8];
    const int G = group_rows(s.k, t.k, scs);
    for (int j = 0; j < G; ++j)  // short lists under the tail bucket: the vector gradient reads no cells
      scs[j].lazy_cells = bucket_grad != nullptr && scs[j].shared_sums != nullptr && opt.support == SparseSupport::Bucket;
    // One row's gradient from its RowState; false when its value is +Infinity without a cap.
    auto grad_row = [&](int64_t r, Scratch& sc, const RowState& rs) {
      float* o = out + r * s.k;
      for (int64_t i = 0; i < s.k; ++i) o[i] = 0.0f;
      Cell* cells = sc.cells.data();
      const int64_t nc = sc.ncell;
      if (rs.value == kInf && opt.kl_cap == kInf) {
        atomic_min64(infinite, r);
        return false;
      }
      if (rs.value >= opt.kl_cap || rs.empty || grad[r] == 0.0f) return true;
      const double g = grad[r];
      if (opt.support == SparseSupport::Bucket) {
        // d/dl_i = dterm(l_i) + dterm(bucket) * d log b_s / d l_i, with d log b_s / d l_i = -p_i / b_s.
        double hb = 0.0;  // dterm(bucket) / b_s
        if (rs.bucket_live) {
          const double bs = rs.bs, bt = rs.bt;
          if (k == DivKind::ReverseKl) hb = rs.lbs - rs.lbt + 1.0;
          else if (k == DivKind::ForwardKl) hb = -bt / bs;
          else hb = (1.0 - beta) * (rs.lbs - (rs.has_lmb ? rs.lmb : log_pos(mix(beta, bs, bt))));
        }
        if (bucket_grad != nullptr && sc.shared_sums != nullptr) {
          bucket_grad(s.logprobs + r * s.k, sc.ps.data(), s.k, t.logprobs + r * t.k, sc.pt.data(), t.k, sc.tix,
                      static_cast<int>(k), beta, g, hb, o);
          return true;
        }
        for (int64_t j = 0; j < nc; ++j) {
          const Cell& c = cells[j];
          o[c.i] = static_cast<float>(g * (dterm(k, beta, c.a, c.p, c.c, c.q) - c.p * hb));
        }
      } else {
        // Renormalised: d/dl_i = dterm_i - p^_i * sum_j dterm_j.
        double sum = 0.0;
        for (int64_t j = 0; j < nc; ++j) {  // the cells become the conditional distributions
          Cell& c = cells[j];
          c.a -= rs.ls;
          c.c -= rs.lt;
          c.p = exp_d(c.a);
          c.q = exp_d(c.c);
          sum += dterm(k, beta, c.a, c.p, c.c, c.q);
        }
        for (int64_t j = 0; j < nc; ++j) {
          const Cell& c = cells[j];
          o[c.i] = static_cast<float>(g * (dterm(k, beta, c.a, c.p, c.c, c.q) - c.p * sum));
        }
      }
      return true;
    };
    // Rows in groups (group_rows) through prepare_group; a group of short lists under the tail bucket takes
    // its bucket logs eight rows to a logs8 call (as the forward). A group with a bad row goes row by row, so
    // that the first failing row (bad or infinite) is the one reported.
    if (G == 1) {
      Scratch& sc = scs[0];
      for (int64_t r = b; r < e; ++r) {
        if (!prepare(s, t, r, opt.vocab, sc)) {
          atomic_min64(bad, r);
          return;
        }
        if (!grad_row(r, sc, row_value_of(s, t, r, k, opt, cl, sc))) return;
      }
      return;
    }
    const bool batch = scs[0].lazy_cells;
    RowState rss[8];
    alignas(64) double lg[3][8];
    for (int64_t g0 = b; g0 < e; g0 += G) {
      const int gn = static_cast<int>(std::min<int64_t>(G, e - g0));
      const bool grouped = prepare_group(s, t, g0, gn, opt.vocab, scs);
      if (grouped && batch) {
        for (int q = 0; q < 3; ++q)
          for (int j = 0; j < 8; ++j) lg[q][j] = 1.0;
        bool fused[8];
        double v[8];
        for (int j = 0; j < gn; ++j) {
          const int64_t r = g0 + j;
          Scratch& sc = scs[j];
          double sums[3];
          sc.shared_sums(s.logprobs + r * s.k, sc.ps.data(), s.k, t.logprobs + r * t.k, sc.pt.data(), t.k, sc.tix,
                         static_cast<int>(k), beta, sums);
          RowState& rs = rss[j];
          fused[j] = sums[0] > 1e-250 && sums[1] > 1e-250;
          if (!fused[j]) {  // the underflow's care in row_value
            small_cells(s.logprobs + r * s.k, s.k, t.logprobs + r * t.k, sc);
            rs = row_value(sc.cells.data(), sc.ncell, k, opt, cl, sums);
            continue;
          }
          rs = RowState();
          rs.ms = sums[0], rs.mt = sums[1], v[j] = sums[2];
          rs.bucket_live = cl.below(rs.ms);
          rs.bs = rs.bucket_live ? 1.0 - rs.ms : cl.cb;
          rs.bt = cl.below(rs.mt) ? 1.0 - rs.mt : cl.cb;
          if (rs.bs > 0.0) lg[0][j] = rs.bs;
          if (rs.bt > 0.0) lg[1][j] = rs.bt;
          const double mb = k == DivKind::Jsd ? mix(beta, rs.bs, rs.bt) : 0.0;
          if (mb > 0.0) lg[2][j] = mb;
        }
        logs(lg[0], gn);
        logs(lg[1], gn);
        if (k == DivKind::Jsd) logs(lg[2], gn);
        for (int j = 0; j < gn; ++j) {
          RowState& rs = rss[j];
          if (fused[j]) {
            rs.lbs = rs.bs > 0.0 ? lg[0][j] : -kInf;
            rs.lbt = rs.bt > 0.0 ? lg[1][j] : -kInf;
            rs.lmb = lg[2][j];
            rs.has_lmb = k == DivKind::Jsd;
            const double val = v[j] + term_lm(k, beta, rs.lbs, rs.bs, rs.lbt, rs.bt, rs.lmb);
            rs.value = val < 0.0 ? 0.0 : val;  // rounding can leave a KL of identical distributions a hair below 0
          }
          if (!grad_row(g0 + j, scs[j], rs)) return;
        }
        continue;
      }
      for (int j = 0; j < gn; ++j) {
        const int64_t r = g0 + j;
        Scratch& sc = scs[j];
        if (!grouped && !prepare(s, t, r, opt.vocab, sc)) {
          atomic_min64(bad, r);
          return;
        }
        if (!grad_row(r, sc, row_value_of(s, t, r, k, opt, cl, sc))) return;
      }
    }
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
