// Host simulation of native/src/cuda/divergence.cu (see sim.h): divergence and divergenceBackward of every
// kind through the kernels' per-thread functions, against float64 references.
#include "../../../native/src/cuda/divergence.cu"
#include "sim.h"

using namespace gear;
using namespace gear::cuda;

namespace {

struct Fwd {
  std::vector<float> value, h, lse_s, lse_t, lp_s, lp_t;
  std::vector<RowParams> prm;
  std::vector<int32_t> flags;
};

// The kernels' group reduction (group_pair): every lane at the group's largest pivots, then added in order.
PairPart sim_group_pair(std::vector<PairPart> lanes, int G, double inv_t) {
  double ms = -INFINITY, mt = -INFINITY;
  for (const PairPart& x : lanes) ms = std::fmax(ms, x.ms), mt = std::fmax(mt, x.mt);
  for (PairPart& x : lanes) x = pair_at(x, ms, mt, inv_t);
  return sim::group_reduce(lanes, G, [](const PairPart& a, const PairPart& b) { return pair_add(a, b); });
}

template <DType D>
Fwd run_forward(const sim::Logits& s, const sim::Logits& t, int G, int64_t parts, DivKind kind, double beta, double T,
                double kl_cap, const int32_t* targets) {
  const int64_t rows = s.rows, vocab = s.vocab;
  const double inv_t = 1.0 / T;
  const PairScale k = pair_scale(inv_t, D);
  const int want = kind == DivKind::ReverseKl ? kWantCs : kind == DivKind::ForwardKl ? kWantCt : kWantNone;
  std::vector<PairPart> P(static_cast<size_t>(rows * parts));
  for (int64_t item = 0; item < rows * parts; ++item) {
    std::vector<PairPart> lanes(static_cast<size_t>(G));
    for (int lane = 0; lane < G; ++lane)
      lanes[lane] = want == kWantCs   ? pair_thread<D, kWantCs>(s.data.get(), t.data.get(), vocab, item / parts, item % parts, parts, lane, G, k)
                    : want == kWantCt ? pair_thread<D, kWantCt>(s.data.get(), t.data.get(), vocab, item / parts, item % parts, parts, lane, G, k)
                                      : pair_thread<D, kWantNone>(s.data.get(), t.data.get(), vocab, item / parts, item % parts, parts, lane, G, k);
    P[item] = sim_group_pair(lanes, G, inv_t);
  }
  Fwd o;
  const size_t n = static_cast<size_t>(rows);
  o.value.assign(n, NAN), o.h.assign(n, NAN), o.lse_s.assign(n, NAN), o.lse_t.assign(n, NAN);
  o.lp_s.assign(n, NAN), o.lp_t.assign(n, NAN), o.prm.assign(n, RowParams{NAN, NAN, NAN, NAN}), o.flags.assign(n, 0);
  PairOut po;
  po.kind = static_cast<int>(kind), po.kl_cap = kl_cap, po.targets = targets;
  po.value = o.value.data(), po.h = o.h.data(), po.lse_s = o.lse_s.data(), po.lse_t = o.lse_t.data();
  po.lp_s = o.lp_s.data(), po.lp_t = o.lp_t.data(), po.prm = o.prm.data(), po.flags = o.flags.data();
  // a row in several pieces: merged as end_item's warp does (lane l merges pieces l, l + 32, ... in
  // order; the lanes then as a group of 32)
  for (int64_t r = 0; r < rows; ++r) {
    PairPart merged = P[r * parts];
    if (parts > 1) {
      std::vector<PairPart> lanes(32);
      for (int lane = 0; lane < 32; ++lane) lanes[lane] = lane_pair_pieces(P.data(), r, parts, lane, inv_t);
      merged = sim_group_pair(lanes, 32, inv_t);
    }
    pair_finish_row(r, inv_t, merged, target_logits<D>(s.data.get(), t.data.get(), vocab, r, po), po);
  }
  if (kind == DivKind::Jsd) {
    std::vector<JsdPart> J(static_cast<size_t>(rows * parts), JsdPart{0, 0});
    for (int64_t item = 0; item < rows * parts; ++item) {
      const int64_t row = item / parts;
      std::vector<JsdPart> lanes(static_cast<size_t>(G), JsdPart{0, 0});
      if (o.flags[row] == 0)
        for (int lane = 0; lane < G; ++lane)
          lanes[lane] = jsd_thread<D>(s.data.get(), t.data.get(), vocab, row, item % parts, parts, lane, G, beta, inv_t,
                                      o.prm[row].lse_s, o.prm[row].lse_t);
      J[item] = sim::group_reduce(lanes, G, jsd_add);
    }
    for (int64_t r = 0; r < rows; ++r) {
      JsdPart merged = J[r * parts];
      if (parts > 1) {
        std::vector<JsdPart> lanes(32);
        for (int lane = 0; lane < 32; ++lane) lanes[lane] = lane_jsd_pieces(J.data(), r, parts, lane);
        merged = sim::group_reduce(lanes, 32, jsd_add);
      }
      jsd_finish_row(r, merged, po);
    }
  }
  return o;
}

// The backward as grad_kernel walks it (rows pass 1 flagged are skipped).
template <DType D>
std::vector<float> run_backward(const sim::Logits& s, const sim::Logits& t, int G, int64_t parts, DivKind kind, double beta,
                                double T, double kl_cap, const RowParams* prm, const float* ls, const float* lt,
                                const float* value, const float* grad, std::vector<int32_t>& flags) {
  const int64_t rows = s.rows, vocab = s.vocab;
  sim::Buffer out = sim::aligned(static_cast<size_t>(rows * vocab) * 4);
  const void* zs = s.data.get();
  for (int64_t item = 0; item < rows * parts; ++item) {
    const int64_t row = item / parts;
    if (flags[row] & (kStudentBad | kTeacherBad)) continue;
    const DivRow d = div_row(row, static_cast<int>(kind), beta, 1.0 / T, kl_cap, prm, ls, lt, value, grad);
    if (d.infinite) flags[row] |= kInfinite;
    for (int lane = 0; lane < G; ++lane)
      flags[row] |= div_grad_thread<D>(zs, t.data.get(), vocab, row, item % parts, parts, lane, G, static_cast<int>(kind),
                                       static_cast<float>(beta), static_cast<float>(1.0 - beta), d,
                                       static_cast<float*>(out.get()));
  }
  const float* p = static_cast<const float*>(out.get());
  return std::vector<float>(p, p + rows * vocab);
}

template <typename F>
auto by_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::F32: return f(std::integral_constant<DType, DType::F32>{});
    case DType::BF16: return f(std::integral_constant<DType, DType::BF16>{});
    default: return f(std::integral_constant<DType, DType::F16>{});
  }
}

const char* dname(DType d) { return d == DType::F32 ? "f32" : d == DType::BF16 ? "bf16" : "f16"; }
const char* kname(DivKind k) { return k == DivKind::ReverseKl ? "reverse_kl" : k == DivKind::ForwardKl ? "forward_kl" : "jsd"; }

void run_case(uint32_t seed, int64_t rows, int64_t vocab, DType dt, DivKind kind, double beta, double T, double kl_cap) {
  sim::Rng rng(seed);
  std::vector<double> zs = sim::random_logits(rng, rows * vocab, 3.0, 0.05);
  std::vector<double> zt = sim::random_logits(rng, rows * vocab, 2.5, 0.0);
  for (size_t i = 0; i < zs.size(); ++i)
    if (zs[i] == -INFINITY) zt[i] = -INFINITY;  // the same support: finite KLs
  // Row 1: the teacher masks an entry where the student has mass (reverse KL +inf) and vice versa at
  // another (forward KL +inf); row 2: a NaN in the teacher; row 3: every student entry masked; row 4: a
  // spike in the student.
  if (rows > 1 && vocab > 2) {
    zs[1 * vocab + 1] = 0.5, zt[1 * vocab + 1] = -INFINITY;
    zs[1 * vocab + 2] = -INFINITY, zt[1 * vocab + 2] = 0.25;
  }
  if (rows > 2) zt[2 * vocab + vocab / 2] = NAN;
  if (rows > 3) for (int64_t v = 0; v < vocab; ++v) zs[3 * vocab + v] = -INFINITY;
  if (rows > 4) zs[4 * vocab + vocab - 1] = 900;
  // Row 5: a finite mask value (the dtype's lowest, as masks made with torch.finfo(dtype).min are) at the
  // same entries of both sides, and one student entry of small mass where only the teacher has it: a
  // mask at every temperature (reverse KL +Infinity), as on the CPU; float16's lowest (-65504) is an
  // ordinary logit.
  const double lowest = dt == DType::F32 ? -3.4028234663852886e38 : dt == DType::BF16 ? -3.3895313892515355e38 : -65504.0;
  if (rows > 5 && vocab > 3) {
    for (int64_t v = 0; v < vocab; v += 3) zs[5 * vocab + v] = zt[5 * vocab + v] = lowest;
    zs[5 * vocab + 1] = -200, zt[5 * vocab + 1] = lowest;
  }
  // Rows for the streaming pass's pivots (PairFast): 6 the student ascending, the teacher descending (every
  // step moves both); 7 the teacher 10^4 lower on the first third (a move far past 127 log2 units: the
  // student's cross sum shifts by the whole move; row 4's spike moves the student so); 8 both sides at the dtype's lowest finite value (a mask) on
  // the first half (the pivots held at their floor, then rising); 9 one student logit of 10^12 and 10 a
  // teacher near -10^7 (beyond the band: the share again through PairAcc; float16 stays in the band).
  const double big = dt == DType::F16 ? 60000.0 : 1e7, huge = dt == DType::F16 ? 60000.0 : 1e12;
  for (int64_t v = 0; v < vocab; ++v) {
    const double ramp = 40.0 * static_cast<double>(v) / static_cast<double>(vocab);
    if (rows > 6) zs[6 * vocab + v] = -20.0 + ramp, zt[6 * vocab + v] = 20.0 - ramp;
    if (rows > 7 && v < vocab / 3) zt[7 * vocab + v] -= 1e4;
    if (rows > 8 && v < vocab / 2) zs[8 * vocab + v] = zt[8 * vocab + v] = lowest;
    if (rows > 10) zt[10 * vocab + v] = -big - std::floor(rng.next() * 8) * (dt == DType::F32 ? 1.0 : 0.0);
  }
  if (rows > 9) zs[9 * vocab + vocab / 2] = huge;
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>(rng.next() * vocab);
  const sim::Logits s = sim::encode(zs, dt, rows, vocab), t = sim::encode(zt, dt, rows, vocab);
  std::vector<float> grad(rows);
  for (auto& g : grad) g = static_cast<float>(0.5 + rng.next());
  const std::string name = std::string(kname(kind)) + " " + dname(dt) + " " + std::to_string(rows) + "x" +
                           std::to_string(vocab) + " T=" + std::to_string(T).substr(0, 4) + " klCap=" + std::to_string(kl_cap);
  // float64 references per row
  struct Ref {
    int flag;  // 1 student bad/empty, 2 teacher bad/empty
    double value, h, ls, lt, lps, lpt;
    std::vector<double> grad;  // d/dz_student of grad[r] * min(value, cap), empty when undefined
    bool infinite;
  };
  // The reference masks what the kernels mask: -Infinity, finite masks (rowmath::is_mask) and entries
  // whose (z - max) k (k = log2(e) / T) overflows float32.
  std::vector<double> sz = s.decoded, tz = t.decoded;
  const float k2 = static_cast<float>(rowmath::kLog2e / T);
  for (auto* side : {&sz, &tz})
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY;
      for (int64_t v = 0; v < vocab; ++v) m = std::max(m, (*side)[r * vocab + v]);
      for (int64_t v = 0; v < vocab; ++v) {
        double& x = (*side)[r * vocab + v];
        if (std::isfinite(m) && (rowmath::is_mask(static_cast<float>(x)) || static_cast<float>(x - m) * k2 == -INFINITY))
          x = -INFINITY;
      }
    }
  std::vector<Ref> ref(rows);
  for (int64_t r = 0; r < rows; ++r) {
    Ref& f = ref[r];
    const double* a = &sz[r * vocab];
    const double* b = &tz[r * vocab];
    bool sbad = false, tbad = false, sfin = false, tfin = false;
    for (int64_t v = 0; v < vocab; ++v) {
      sbad |= std::isnan(a[v]) || a[v] == INFINITY, tbad |= std::isnan(b[v]) || b[v] == INFINITY;
      sfin |= std::isfinite(a[v]), tfin |= std::isfinite(b[v]);
    }
    f.flag = sbad || !sfin ? 1 : tbad || !tfin ? 2 : 0;
    f.infinite = false;
    if (f.flag) continue;
    const std::vector<double> la = sim::log_softmax(a, vocab, T, &f.ls), lb = sim::log_softmax(b, vocab, T, &f.lt);
    double v = 0, h = 0, ksm = 0;
    std::vector<double> lm(static_cast<size_t>(vocab), -INFINITY);
    for (int64_t i = 0; i < vocab; ++i) {
      const double pa = la[i] == -INFINITY ? 0 : std::exp(la[i]), pb = lb[i] == -INFINITY ? 0 : std::exp(lb[i]);
      if (pa > 0) h -= pa * la[i];
      if (kind == DivKind::ReverseKl && pa > 0) v += lb[i] == -INFINITY ? INFINITY : pa * (la[i] - lb[i]);
      if (kind == DivKind::ForwardKl && pb > 0) v += la[i] == -INFINITY ? INFINITY : pb * (lb[i] - la[i]);
      if (kind == DivKind::Jsd) {
        const double mix = (1 - beta) * pa + beta * pb;
        if (mix > 0) {
          lm[i] = std::log(mix);
          if (pb > 0) v += beta * pb * (lb[i] - lm[i]);
          if (pa > 0) v += (1 - beta) * pa * (la[i] - lm[i]), ksm += pa * (la[i] - lm[i]);
        }
      }
    }
    f.value = std::max(v, 0.0), f.h = std::max(h, 0.0);
    f.lps = la[targets[r]], f.lpt = lb[targets[r]];
    f.infinite = f.value == INFINITY && kl_cap == INFINITY;
    if (f.infinite) continue;
    f.grad.assign(static_cast<size_t>(vocab), 0.0);
    if (f.value >= kl_cap) continue;  // capped: the clamp is flat
    const double c = grad[r] / T;
    for (int64_t i = 0; i < vocab; ++i) {
      const double pa = la[i] == -INFINITY ? 0 : std::exp(la[i]), pb = lb[i] == -INFINITY ? 0 : std::exp(lb[i]);
      if (kind == DivKind::ReverseKl) f.grad[i] = pa > 0 ? c * pa * (la[i] - lb[i] - f.value) : 0;
      else if (kind == DivKind::ForwardKl) f.grad[i] = c * (pa - pb);
      else f.grad[i] = pa > 0 ? c * pa * (1 - beta) * (la[i] - lm[i] - ksm) : 0;
    }
  }
  for (int G : {32, kThreads}) {
    // 37 pieces: end_item's warp merges more than one piece per lane
    for (int64_t parts : {int64_t{1}, int64_t{3}, int64_t{37}}) {
      if ((G == 32 && parts > 1) || (parts == 37 && vocab < 4096)) continue;
      const std::string grid = " G=" + std::to_string(G) + " parts=" + std::to_string(parts);
      const Fwd o = by_dtype(dt, [&](auto d) {
        return run_forward<decltype(d)::value>(s, t, G, parts, kind, beta, T, kl_cap, targets.data());
      });
      double e_fwd = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const int want_flag = ref[r].flag == 1 ? kStudentBad : ref[r].flag == 2 ? kTeacherBad : 0;
        sim::check(o.flags[r] == want_flag, "divergence flag row " + std::to_string(r) + " " + name + grid + ": got " +
                                                std::to_string(o.flags[r]));
        if (ref[r].flag) continue;
        const double capped = std::min(ref[r].value, kl_cap);
        e_fwd = std::max({e_fwd, sim::scaled_error(o.value[r], capped), sim::scaled_error(o.h[r], ref[r].h),
                          sim::scaled_error(o.lse_s[r], ref[r].ls), sim::scaled_error(o.lse_t[r], ref[r].lt),
                          sim::scaled_error(o.lp_s[r], ref[r].lps), sim::scaled_error(o.lp_t[r], ref[r].lpt)});
      }
      sim::check(e_fwd <= 1e-5, "divergence " + name + grid + ": scaled error " + std::to_string(e_fwd));
      // backward from pass 1's parameters, and (reverse / forward KL) from the caller's statistics
      for (int given = 0; given < (kind == DivKind::Jsd ? 1 : 2); ++given) {
        // given statistics: no pass 1, the backward finds NaN / +Infinity itself
        std::vector<int32_t> flags = given ? std::vector<int32_t>(rows, 0) : o.flags;
        std::vector<float> uncapped(rows);
        for (int64_t r = 0; r < rows; ++r) uncapped[r] = static_cast<float>(ref[r].flag ? 0 : ref[r].value);
        std::vector<float> g = by_dtype(dt, [&](auto d) {
          return run_backward<decltype(d)::value>(s, t, G, parts, kind, beta, T, kl_cap, given ? nullptr : o.prm.data(),
                                                  o.lse_s.data(), o.lse_t.data(), o.value.data(), grad.data(), flags);
        });
        // Every row with a bad or empty side is flagged (given statistics: a NaN / +Infinity one).
        for (int64_t r = 0; r < rows; ++r) {
          bool sbad = false, tbad = false;
          for (int64_t v = 0; v < vocab; ++v) {
            const double a = s.decoded[r * vocab + v], b = t.decoded[r * vocab + v];
            sbad |= std::isnan(a) || a == INFINITY, tbad |= std::isnan(b) || b == INFINITY;
          }
          const bool want = given ? sbad || tbad : ref[r].flag != 0;
          const bool got = (flags[r] & (kStudentBad | kTeacherBad)) != 0;
          sim::check(got == want, "divergenceBackward flag row " + std::to_string(r) + " " + name + grid + (given ? " given" : ""));
        }
        (void)uncapped;
        double e_grad = 0;
        for (int64_t r = 0; r < rows; ++r) {
          if (ref[r].flag) continue;
          sim::check(((flags[r] & kInfinite) != 0) == ref[r].infinite, "divergenceBackward infinite flag row " + std::to_string(r) + " " + name + grid);
          if (ref[r].infinite) continue;
          std::vector<double> want = ref[r].grad;
          if (given && o.value[r] < kl_cap) {  // the backward's math given the float32 statistics it was handed
            const double c = grad[r] / T;
            for (int64_t i = 0; i < vocab; ++i) {
              const double a = sz[r * vocab + i], b = tz[r * vocab + i];
              const double la = a == -INFINITY ? -INFINITY : a / T - o.lse_s[r], lb = b == -INFINITY ? -INFINITY : b / T - o.lse_t[r];
              const double pa = std::exp(la), pb = std::exp(lb);
              want[i] = kind == DivKind::ReverseKl ? (pa > 0 ? c * pa * (la - lb - o.value[r]) : 0) : c * (pa - pb);
            }
          }
          double scale = 1.0;
          for (double w : want) scale = std::max(scale, std::fabs(w));
          for (int64_t v = 0; v < vocab; ++v) e_grad = std::max(e_grad, std::fabs(g[r * vocab + v] - want[v]) / scale);
        }
        const double tol = 2e-5;
        sim::check(e_grad <= tol, std::string("divergenceBackward ") + (given ? "stats given " : "recomputed ") + name + grid +
                                      ": error " + std::to_string(e_grad) + " of the row's largest gradient");
      }
    }
  }
}

}  // namespace

int sim_divergence() {
  int cases = 0;
  const int64_t shapes[][2] = {{1, 1}, {5, 3}, {6, 33}, {5, 1001}, {6, 3001}, {2, 20011}, {11, 40}, {11, 2501}, {11, 4099}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const auto& sh : shapes)
      for (DivKind k : {DivKind::ReverseKl, DivKind::ForwardKl, DivKind::Jsd})
        for (double cap : {static_cast<double>(INFINITY), 2.0})
          // temperatures below and above log2(e) (where k = log2(e) / T < 1 and -FLT_MAX k stays finite)
          for (double T : {sh[1] % 2 ? 0.7 : 1.0, 2.0}) {
            run_case(static_cast<uint32_t>(sh[0] * 131 + sh[1] * 7 + static_cast<int>(dt) + static_cast<int>(k) * 17), sh[0],
                     sh[1], dt, k, k == DivKind::Jsd ? 0.3 : 0.5, T, cap);
            ++cases;
          }
  std::printf("divergence simulation: %d cases\n", cases);
  return cases;
}
