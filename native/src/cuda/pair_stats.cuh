// The per-thread statistics of a student / teacher pair of rows (divergence pass 1; nvcc only, see
// kernels.cuh): the unit a row piece reduces to (PairPart) and its merges, SoftmaxAcc's pair counterpart
// (PairAcc), and the streaming pass's (PairFast: StatsAcc's integer pivots and exact rescales on both sides).
#pragma once
#include "row_stats.cuh"

namespace gear {
namespace cuda {

// Which cross sum pass 1 accumulates besides both sides' statistics.
enum : int { kWantNone = 0, kWantCs = 1, kWantCt = 2 };

// A row piece's pair statistics: both sides' softmax statistics, the cross sums (finite: a support
// mismatch is a flag, not an infinity) and problem bits.
struct PairPart {
  double ms, ss, as;   // student
  double mt, st;       // teacher (its entropy is never needed)
  double cs, ct;       // sum e_s (d_s - d_t), sum e_t (d_t - d_s)
  int32_t bits;        // 1 student NaN/+inf, 2 teacher NaN/+inf, 4 student mass where the teacher is -inf,
                       // 8 teacher mass where the student is -inf
  int32_t pad;
};

GEAR_HDI rowmath::PairStats to_pair(const PairPart& p) {
  return rowmath::PairStats{{p.ms, p.ss, p.as}, {p.mt, p.st, 0.0}, p.cs, p.ct};
}

GEAR_HDI PairPart pair_merge(const PairPart& x, const PairPart& y, double inv_t) {
  rowmath::PairStats a = to_pair(x), b = to_pair(y);
  const double ms = a.s.m > b.s.m ? a.s.m : b.s.m, mt = a.t.m > b.t.m ? a.t.m : b.t.m;
  rowmath::pair_rescale_student(a, ms, inv_t);
  rowmath::pair_rescale_student(b, ms, inv_t);
  rowmath::pair_rescale_teacher(a, mt, inv_t);
  rowmath::pair_rescale_teacher(b, mt, inv_t);
  return PairPart{ms, a.s.s + b.s.s, a.s.a + b.s.a, mt, a.t.s + b.t.s, a.cs + b.cs, a.ct + b.ct, x.bits | y.bits, 0};
}

// A lane's pair statistics moved to the group's pivots (>= its own), ready to be added.
GEAR_HDI PairPart pair_at(const PairPart& x, double ms, double mt, double inv_t) {
  rowmath::PairStats a = to_pair(x);
  rowmath::pair_rescale_student(a, ms, inv_t);
  rowmath::pair_rescale_teacher(a, mt, inv_t);
  return PairPart{ms, a.s.s, a.s.a, mt, a.t.s, a.cs, a.ct, x.bits, 0};
}
GEAR_HDI PairPart pair_add(const PairPart& x, const PairPart& y) {
  return PairPart{x.ms, x.ss + y.ss, x.as + y.as, x.mt, x.st + y.st, x.cs + y.cs, x.ct + y.ct, x.bits | y.bits, 0};
}

// An entry's terms in a pair accumulator's float sums (PairAcc, PairFast: members ss, st, as, cs, ct, bits),
// given d of each side (0 where masked) and whether each side is masked: a masked side weighs 0 and
// leaves the cross sums; one side's entry where the other is masked sets the support-mismatch bit.
template <int WANT, typename Acc>
GEAR_HDI void add_pair_terms(Acc& acc, float da, float db, bool xa, bool xb) {
  const float ea = xa ? 0.f : ex2(da), eb = xb ? 0.f : ex2(db);
  acc.ss += ea;
  acc.st += eb;
  acc.as = fmaf(ea, da, acc.as);
  if (WANT == kWantCs) acc.cs = fmaf(xb ? 0.f : ea, da - db, acc.cs);
  if (WANT == kWantCt) acc.ct = fmaf(xa ? 0.f : eb, db - da, acc.ct);
  acc.bits |= (!xa && xb ? 4 : 0) | (!xb && xa ? 8 : 0);
}

// A thread's pair statistics (see SoftmaxAcc): float sums over at most kFold vectors relative to the
// running pivots ms, mt (as, cs, ct in log2 units), folded into float64 sums relative to the pivots MS, MT
// of the last fold. A pivot move rescales only the float sums (ex2: e' = 2^r e and d' = d + r for the side
// that moved by r log2 units, so the weighted sums of that side scale and shift and the other side's cross
// sum shifts); the fold rescales the float64 sums exactly (rowmath::pair_rescale_*) when a pivot moved.
template <int WANT>
struct PairAcc {
  static constexpr int kFold = 4;
  float ms = -INFINITY, mt = -INFINITY;
  float ss = 0.f, as = 0.f, st = 0.f, cs = 0.f, ct = 0.f;  // log2 units for as, cs, ct
  float MS = -INFINITY, MT = -INFINITY;
  double SS = 0.0, AS = 0.0, ST = 0.0, CS = 0.0, CT = 0.0;
  int pending = 0;
  int32_t bits = 0;

  __host__ __device__ void fold(double inv_t) {
    if (ms > MS || mt > MT) {
      rowmath::PairStats p{{MS, SS, AS}, {MT, ST, 0.0}, CS, CT};
      rowmath::pair_rescale_student(p, ms, inv_t);
      rowmath::pair_rescale_teacher(p, mt, inv_t);
      MS = static_cast<float>(p.s.m), MT = static_cast<float>(p.t.m);  // raw logits: exact in float
      SS = p.s.s, AS = p.s.a, ST = p.t.s, CS = p.cs, CT = p.ct;
    }
    SS += ss;
    ST += st;
    AS += static_cast<double>(as) * rowmath::kLn2;
    CS += static_cast<double>(cs) * rowmath::kLn2;
    CT += static_cast<double>(ct) * rowmath::kLn2;
    ss = as = st = cs = ct = 0.f;
    pending = 0;
  }
  // Moves of the running pivots by r = (old - new) k < 0 log2 units: that side's weights scale by 2^r
  // (0 past -126) and its d = (z - m) k shift by r, so its own sums scale and shift and the other side's
  // cross sum shifts (by -r times the other side's weight; where that side is masked the term is excluded,
  // and then the row's support-mismatch bit decides the value anyway). Nothing to move while the side has
  // had no weight (no finite logit, or finite masks only): no term depends on its pivot yet (as
  // rowmath::pair_rescale_* decide it).
  GEAR_HDI void move_student(float m, float c2) {
    if (ss > 0.f || SS > 0.0) {
      const float r = (ms - m) * c2, f = ex2(fmaxf(r, -256.f));
      as = f * fmaf(r, ss, as);
      if (WANT == kWantCs) cs = f * fmaf(r, ss, cs);
      if (WANT == kWantCt) ct = fmaf(-r, st, ct);
      ss *= f;
    }
    ms = m;
  }
  GEAR_HDI void move_teacher(float m, float c2) {
    if (st > 0.f || ST > 0.0) {
      const float r = (mt - m) * c2, f = ex2(fmaxf(r, -256.f));
      if (WANT == kWantCt) ct = f * fmaf(r, st, ct);
      if (WANT == kWantCs) cs = fmaf(-r, ss, cs);
      st *= f;
    }
    mt = m;
  }
  template <int N>
  GEAR_HDI void add(const float (&a)[N], const float (&b)[N], float c2, double inv_t) {
    float va = a[0], vb = b[0];
#pragma unroll
    for (int k = 1; k < N; ++k) va = fmaxf(va, a[k]), vb = fmaxf(vb, b[k]);
    if (va > ms) move_student(va, c2);
    if (vb > mt) move_teacher(vb, c2);
    // (z - m) k in log2 units. An entry is masked when rowmath::is_mask (-Infinity, or a finite mask such
    // as torch.finfo(dtype).min, at any temperature) or when (z - m) k overflows, as on the CPU. A NaN, or a side whose pivot is +inf, makes it NaN: caught when the row finishes.
    float da[N], db[N];
    bool plain = true;  // no masked entry and no NaN: the sums need no selects
#pragma unroll
    for (int k = 0; k < N; ++k) {
      da[k] = (a[k] - ms) * c2, db[k] = (b[k] - mt) * c2;
      plain = plain && da[k] > -INFINITY && db[k] > -INFINITY && !rowmath::is_mask(fminf(a[k], b[k]));
    }
    if (plain) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float ea = ex2(da[k]), eb = ex2(db[k]);
        ss += ea;
        st += eb;
        as = fmaf(ea, da[k], as);
        if (WANT == kWantCs) cs = fmaf(ea, da[k] - db[k], cs);
        if (WANT == kWantCt) ct = fmaf(eb, db[k] - da[k], ct);
      }
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const bool xa = rowmath::is_mask(a[k]) || da[k] == -INFINITY, xb = rowmath::is_mask(b[k]) || db[k] == -INFINITY;
        add_pair_terms<WANT>(*this, xa ? 0.f : da[k], xb ? 0.f : db[k], xa, xb);
      }
    }
    if (++pending == kFold) fold(inv_t);
  }
  __host__ __device__ PairPart finish(double inv_t) {
    fold(inv_t);
    int32_t b = bits;
    if (ms == INFINITY || SS != SS || AS != AS) b |= 1;
    if (mt == INFINITY || ST != ST) b |= 2;
    // A NaN on one side makes the cross sums NaN: keep them finite for the merge (the row is an error).
    if (b & 3) {
      if (CS != CS) CS = 0.0;
      if (CT != CT) CT = 0.0;
    }
    return PairPart{MS, SS, AS, MT, ST, CS, CT, b, 0};
  }
};


// ---- the streaming pass: StatsAcc's pivots on both sides ----

// What the streaming pair pass needs of the temperature (PassScale's c2, 1/T, fast), and `lim`: the bits
// (of the dtype's width) of the lowest logit, -1e38 / max(1, c2) rounded toward 0, at and above which
// an entry is no mask and its (z - m) c2 cannot overflow: a vector of such entries on both sides needs no
// mask test (PairFast::add_plain).
struct PairScale {
  float c2;
  double inv_t;
  uint32_t lim;
  bool fast;
};
inline PairScale pair_scale(double inv_t, DType dt) {
  const PassScale k = pass_scale(inv_t);
  const float lo = -1e38f / (k.c2 > 1.f ? k.c2 : 1.f);
  uint32_t lim = as_bits(lo);
  if (dt == DType::BF16) lim >>= 16;  // truncated: toward 0
  if (dt == DType::F16) lim = lo <= -65504.f ? 0xfbffu : static_cast<uint32_t>(__half_as_ushort(__float2half_rz(lo)));
  return PairScale{k.c2, inv_t, lim, k.fast};
}

// A thread's pair statistics in the streaming pass (see StatsAcc, PairAcc): each side's pivot an integer
// P = ceil(m c2) in log2 units, held at StatsAcc::kFloor or above, m the side's largest raw logit (masks
// included, as PairAcc); float sums of 2^d, 2^d d (student) and the cross sum WANT asks for (log2 units,
// d = z c2 - P), folded into float64 every kFold elements. A pivot move is by an integer: that side's own
// sums rescale by an exact power of two, and the other side's cross sum shifts by the move (exact: the
// move itself, not clamped). `live`: the side has an entry that is no mask (its pivot then matters).
template <int WANT>
struct PairFast {
  static constexpr float kFloor = StatsAcc::kFloor;
  static constexpr int kFold = StatsAcc::kFold;
  float ms = -INFINITY, mt = -INFINITY;
  float ps = kFloor, pt = kFloor;
  float ss = 0.f, as = 0.f, st = 0.f, cs = 0.f, ct = 0.f;
  float fps = kFloor, fpt = kFloor;
  double SS = 0.0, AS = 0.0, ST = 0.0, CS = 0.0, CT = 0.0;
  int pending = 0;
  int32_t bits = 0;
  bool live_s = false, live_t = false;

  GEAR_HDI void pivots(float vs, float vt, float c2) {
    ms = fmaxf(ms, vs);
    mt = fmaxf(mt, vt);
    const float ns = fmaxf(ceilf(ms * c2), kFloor), nt = fmaxf(ceilf(mt * c2), kFloor);
    const float rs = ps - ns, rt = pt - nt;  // integers <= 0
    const float cs_ = fmaxf(rs, -127.f), ct_ = fmaxf(rt, -127.f), fs = pow2f(cs_), ft = pow2f(ct_);
    as = fs * fmaf(cs_, ss, as);
    if (WANT == kWantCs) cs = fs * fmaf(cs_, ss, cs);
    if (WANT == kWantCt) ct = fmaf(-rs, st, ct);
    ss *= fs;
    if (WANT == kWantCt) ct = ft * fmaf(ct_, st, ct);
    if (WANT == kWantCs) cs = fmaf(-rt, ss, cs);
    st *= ft;
    ps = ns;
    pt = nt;
  }
  // An entry of a vector without masks on either side (every z >= PairScale's lim).
  GEAR_HDI void add_plain(float a, float b, float c2) {
    const float da = fmaf(a, c2, -ps), db = fmaf(b, c2, -pt);
    const float ea = ex2(da), eb = ex2(db);
    ss += ea;
    st += eb;
    as = fmaf(ea, da, as);
    if (WANT == kWantCs) cs = fmaf(ea, da - db, cs);
    if (WANT == kWantCt) ct = fmaf(eb, db - da, ct);
  }
  // Any entry, as PairAcc's: a mask (rowmath::is_mask, or (z - m) c2 overflowing) weighs 0 and leaves the
  // cross sums; one side's weight where the other is masked is the support-mismatch bit. A d of -Infinity
  // for an entry that is no mask (m c2 near float32's limit) is held at -FLT_MAX, its weight 0.
  GEAR_HDI void add_any(float a, float b, float c2) {
    const bool xa = rowmath::is_mask(a) || (a - ms) * c2 == -INFINITY;
    const bool xb = rowmath::is_mask(b) || (b - mt) * c2 == -INFINITY;
    float da = fmaf(a, c2, -ps), db = fmaf(b, c2, -pt);
    da = xa ? 0.f : da < -3.4028234663852886e38f ? -3.4028234663852886e38f : da;  // a NaN stays
    db = xb ? 0.f : db < -3.4028234663852886e38f ? -3.4028234663852886e38f : db;
    add_pair_terms<WANT>(*this, da, db, xa, xb);
    live_s |= !xa;
    live_t |= !xb;
  }
  GEAR_HDI void count(int n) {
    if ((pending += n) >= kFold) fold();
  }
  __host__ __device__ void fold() {
    const float rs = fps - ps, rt = fpt - pt;
    const float cs_ = fmaxf(rs, -1023.f), ct_ = fmaxf(rt, -1023.f);
    const double fs = pow2d(cs_), ft = pow2d(ct_);
    AS = fs * fma(static_cast<double>(cs_), SS, AS);
    if (WANT == kWantCs) CS = fs * fma(static_cast<double>(cs_), SS, CS);
    if (WANT == kWantCt) CT = fma(-static_cast<double>(rs), ST, CT);
    SS *= fs;
    if (WANT == kWantCt) CT = ft * fma(static_cast<double>(ct_), ST, CT);
    if (WANT == kWantCs) CS = fma(-static_cast<double>(rt), SS, CS);
    ST *= ft;
    SS += ss, AS += as, ST += st, CS += cs, CT += ct;
    fps = ps, fpt = pt;
    ss = as = st = cs = ct = 0.f;
    pending = 0;
  }
  // PairAcc::finish's statistics (around each side's m, nats); *redo when a live side's m c2 is beyond
  // StatsAcc's band (the result is then not to be used).
  __host__ __device__ PairPart finish(float c2, bool* redo) {
    fold();
    const double k = c2, mks = static_cast<double>(ms) * k, mkt = static_cast<double>(mt) * k;
    const double ds = live_s ? mks - ps : 0.0, dt = live_t ? mkt - pt : 0.0;
    *redo = (live_s && !(ds >= -2.0 && mks <= 8388608.0)) || (live_t && !(dt >= -2.0 && mkt <= 8388608.0));
    const double gs = live_s ? exp2(-ds) : 1.0, gt = live_t ? exp2(-dt) : 1.0, ln2 = rowmath::kLn2;
    PairPart p{ms, SS * gs, ln2 * gs * (AS - ds * SS), mt, ST * gt, ln2 * gs * (CS - (ds - dt) * SS),
               ln2 * gt * (CT - (dt - ds) * ST), bits, 0};
    if (ms == INFINITY || p.ss != p.ss || p.as != p.as) p.bits |= 1;
    if (mt == INFINITY || p.st != p.st) p.bits |= 2;
    // A NaN on one side makes the cross sums NaN: keep them finite for the merge (the row is an error).
    if (p.bits & 3) {
      if (p.cs != p.cs) p.cs = 0.0;
      if (p.ct != p.ct) p.ct = 0.0;
    }
    return p;
  }
};

// PairFast's step over 16-byte vectors in words ws (student) and wt (teacher), W words each: both pivots
// moved once, then every entry: without mask tests when no entry of either side is below k.lim.
template <DType D, int W, int WANT>
GEAR_HDI void pair_step(PairFast<WANT>& acc, const uint32_t* ws, const uint32_t* wt, const PairScale& k) {
  acc.pivots(words_max<D, W>(ws), words_max<D, W>(wt), k.c2);
  constexpr int kN = W * (D == DType::F32 ? 1 : 2);
  if (words_at_most<D, W>(ws, k.lim) && words_at_most<D, W>(wt, k.lim)) {
    acc.live_s = acc.live_t = true;
#pragma unroll
    for (int e = 0; e < kN; ++e) acc.add_plain(word_elem<D>(ws, e), word_elem<D>(wt, e), k.c2);
  } else {
#pragma unroll
    for (int e = 0; e < kN; ++e) acc.add_any(word_elem<D>(ws, e), word_elem<D>(wt, e), k.c2);
  }
  acc.count(kN);
}

// PairFast's step over one entry of each side.
template <int WANT>
GEAR_HDI void pair_scalar(PairFast<WANT>& acc, float a, float b, float c2) {
  acc.pivots(a, b, c2);
  acc.add_any(a, b, c2);
  acc.count(1);
}

}  // namespace cuda
}  // namespace gear
