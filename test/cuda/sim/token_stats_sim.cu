// Host simulation of native/src/cuda/token_stats.cu (see sim.h): tokenStats, tokenStatsPartial and
// tokenStatsBackward through the kernels' per-thread functions, against float64 references.
#include "../../../native/src/cuda/token_stats.cu"
#include "../../../native/src/core/checks.h"
#include "sim.h"

using namespace gear;
using namespace gear::cuda;

namespace {

struct Out {
  std::vector<float> lp, ent, lse;
  std::vector<double> pm, ps, pa, pt;
  std::vector<int32_t> flags;
};

// group_stats: every lane at the group's largest pivot, then added in group_reduce's order.
PartStats sim_group_stats(std::vector<PartStats> lanes, int G, double inv_t) {
  double M = -INFINITY;
  for (const PartStats& x : lanes) M = std::fmax(M, x.m);
  for (PartStats& x : lanes) x = part_at(x, M, inv_t);
  return sim::group_reduce(lanes, G, [&](const PartStats& a, const PartStats& b) { return part_add(a, b); });
}

template <DType D>
Out run_stats(const sim::Logits& l, int G, int64_t parts, double T, const int32_t* targets, int mode, int64_t vocab_start) {
  const int64_t rows = l.rows, vocab = l.vocab;
  const double inv_t = 1.0 / T;
  const PassScale k = pass_scale(inv_t);
  std::vector<PartStats> P(static_cast<size_t>(rows * parts));
  for (int64_t item = 0; item < rows * parts; ++item) {
    std::vector<PartStats> lanes(static_cast<size_t>(G));
    for (int lane = 0; lane < G; ++lane) {
      int bad = 0;
      const rowmath::SoftmaxStats st = stats_thread<D>(l.data.get(), vocab, item / parts, item % parts, parts, lane, G, k, &bad);
      lanes[lane] = PartStats{st.m, st.s, st.a, bad, 0};
    }
    P[item] = sim_group_stats(lanes, G, inv_t);
  }
  Out o;
  const size_t n = static_cast<size_t>(rows);
  o.lp.assign(n, NAN), o.ent.assign(n, NAN), o.lse.assign(n, NAN);
  o.pm.assign(n, NAN), o.ps.assign(n, NAN), o.pa.assign(n, NAN), o.pt.assign(n, NAN);
  o.flags.assign(n, 0);
  const StatsOut so{mode, targets, vocab_start, mode == kStats && targets ? o.lp.data() : nullptr, o.ent.data(),
                    o.lse.data(), o.pm.data(), o.ps.data(), o.pa.data(), o.pt.data(), o.flags.data()};
  // a row in several pieces: merged as end_item's warp does (lane l merges pieces l, l + 32, ... in
  // order; the lanes then as a group of 32)
  for (int64_t r = 0; r < rows; ++r) {
    PartStats merged = P[r * parts];
    if (parts > 1) {
      std::vector<PartStats> lanes(32);
      for (int lane = 0; lane < 32; ++lane) lanes[lane] = lane_pieces(P.data(), r, parts, lane, inv_t);
      merged = sim_group_stats(lanes, 32, inv_t);
    }
    finish_row(r, inv_t, merged, target_logit<D>(l.data.get(), vocab, r, so), so);
  }
  return o;
}

// The backward over a fresh output (or, in_place, over a float32 copy of the logits), as grad_kernel walks
// it: rows pass 1 flagged are copied through.
template <DType D>
std::vector<float> run_grad(const sim::Logits& l, int G, int64_t parts, double T, const double* lse_d, const float* lse,
                            const double* ent_d, const float* ent, const float* gl, const float* ge,
                            const int32_t* targets, std::vector<int32_t>& flags, bool in_place = false) {
  const int64_t rows = l.rows, vocab = l.vocab;
  sim::Buffer out = sim::aligned(static_cast<size_t>(rows * vocab) * 4);
  const void* z = l.data.get();
  if (in_place) {
    for (int64_t i = 0; i < rows * vocab; ++i) static_cast<float*>(out.get())[i] = static_cast<float>(l.decoded[i]);
    z = out.get();
  }
  for (int64_t item = 0; item < rows * parts; ++item) {
    const int64_t row = item / parts;
    if (flags[row] != 0) {
      for (int lane = 0; lane < G; ++lane)
        copy_thread<D>(z, vocab, row, item % parts, parts, lane, G, static_cast<float*>(out.get()));
      continue;
    }
    const GradRow c = grad_row(row, 1.0 / T, lse_d, lse, ent_d, ent, gl, ge, gl ? targets : nullptr);
    for (int lane = 0; lane < G; ++lane)
      if (!grad_thread<D>(z, vocab, row, item % parts, parts, lane, G, c, static_cast<float*>(out.get())))
        flags[row] |= 1;
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

// One case: rows x vocab logits of dtype dt (5% masked), special rows, checked on every grid layout.
void run_case(uint32_t seed, int64_t rows, int64_t vocab, DType dt, double T) {
  sim::Rng rng(seed);
  std::vector<double> z = sim::random_logits(rng, rows * vocab, 3.0, 0.05);
  // Row 1: a spike the rest underflows against; row 2: every entry masked; row 3: a NaN; row 4: +Infinity.
  enum { kSpike = 1, kMasked = 2, kNaN = 3, kInf = 4 };
  if (rows > kSpike) z[kSpike * vocab + (vocab - 1) / 2] = 900;
  if (rows > kMasked) for (int64_t v = 0; v < vocab; ++v) z[kMasked * vocab + v] = -INFINITY;
  if (rows > kNaN) z[kNaN * vocab + (vocab * 2) / 3] = NAN;
  if (rows > kInf) z[kInf * vocab + vocab / 3] = INFINITY;
  // Rows for the streaming pass's pivot (StatsAcc): 5 ascending (every step of every lane moves it); 6 a
  // jump of 10^4 after a third of the row (a move far past 127 log2 units); 7 the dtype's lowest finite
  // value on the first half (the pivot held at its floor, then rising); 8 ties (every logit 0.5); 9 one
  // logit of 10^12 (beyond the band: the share again through SoftmaxAcc); 10 every logit near -10^7
  // (below the band's floor: again through SoftmaxAcc; float16 stays in the band).
  const double lowest = dt == DType::F32 ? -3.4028234663852886e38 : dt == DType::BF16 ? -3.3895313892515355e38 : -65504.0;
  const double big = dt == DType::F16 ? 60000.0 : 1e7, huge = dt == DType::F16 ? 60000.0 : 1e12;
  for (int64_t v = 0; v < vocab; ++v) {
    if (rows > 5) z[5 * vocab + v] = -20.0 + 40.0 * static_cast<double>(v) / static_cast<double>(vocab);
    if (rows > 6 && v < vocab / 3) z[6 * vocab + v] -= 1e4;
    if (rows > 7 && v < vocab / 2) z[7 * vocab + v] = lowest;
    if (rows > 8) z[8 * vocab + v] = 0.5;
    if (rows > 10) z[10 * vocab + v] = -big - std::floor(rng.next() * 8) * (dt == DType::F32 ? 1.0 : 0.0);
  }
  if (rows > 9) z[9 * vocab + (vocab * 3) / 4] = huge;
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t y = static_cast<int64_t>(rng.next() * vocab);
    for (int64_t k = 0; k < vocab && z[r * vocab + y] == -INFINITY && r != kMasked; ++k) y = (y + 1) % vocab;
    targets[r] = static_cast<int32_t>(y);
  }
  const sim::Logits l = sim::encode(z, dt, rows, vocab);
  auto bad_row = [&](int64_t r) {
    bool nan_inf = false, finite = false;
    for (int64_t v = 0; v < vocab; ++v) {
      const double x = l.decoded[r * vocab + v];
      nan_inf |= std::isnan(x) || x == INFINITY;
      finite |= std::isfinite(x);
    }
    return std::make_pair(nan_inf, finite);
  };
  // float64 references
  std::vector<double> ref_lse(rows), ref_ent(rows), ref_lp(rows);
  std::vector<std::vector<double>> ref_logp(rows);
  for (int64_t r = 0; r < rows; ++r) {
    ref_logp[r] = sim::log_softmax(&l.decoded[r * vocab], vocab, T, &ref_lse[r]);
    double h = 0;
    for (double lp : ref_logp[r])
      if (lp != -INFINITY) h -= std::exp(lp) * lp;
    ref_ent[r] = std::max(h, 0.0);
    ref_lp[r] = ref_logp[r][targets[r]];
  }
  std::vector<float> gl(rows), ge(rows), lse32(rows), ent32(rows);
  for (int64_t r = 0; r < rows; ++r) {
    gl[r] = static_cast<float>(rng.next() * 4 - 2);
    ge[r] = static_cast<float>(rng.next() * 2 - 1);
    lse32[r] = static_cast<float>(ref_lse[r]);
    ent32[r] = static_cast<float>(ref_ent[r]);
  }
  const std::string name = std::string(dname(dt)) + " " + std::to_string(rows) + "x" + std::to_string(vocab) +
                           " T=" + std::to_string(T).substr(0, 4);
  for (int G : {32, kThreads}) {
    // 37 pieces: end_item's warp merges more than one piece per lane
    for (int64_t parts : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{37}}) {
      if ((G == 32 && parts > 2) || (parts == 37 && vocab < 4096)) continue;
      const std::string grid = " G=" + std::to_string(G) + " parts=" + std::to_string(parts);
      const Out o = by_dtype(dt, [&](auto d) { return run_stats<decltype(d)::value>(l, G, parts, T, targets.data(), kStats, 0); });
      const Out pt = by_dtype(dt, [&](auto d) { return run_stats<decltype(d)::value>(l, G, parts, T, targets.data(), kPartial, 0); });
      double e_stats = 0, e_part = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const auto [nan_inf, finite] = bad_row(r);
        sim::check((o.flags[r] != 0) == (nan_inf || !finite), "tokenStats flag row " + std::to_string(r) + " " + name + grid);
        sim::check((pt.flags[r] != 0) == nan_inf, "tokenStatsPartial flag row " + std::to_string(r) + " " + name + grid);
        if (!nan_inf && finite) {
          // float32 outputs: a log-prob beyond float32's range (a target at the lowest finite logit, T < 1) is -Infinity
          const double lp32 = static_cast<float>(ref_lp[r]);
          e_stats = std::max({e_stats, sim::scaled_error(o.lse[r], ref_lse[r]), sim::scaled_error(o.ent[r], ref_ent[r]),
                              sim::scaled_error(o.lp[r], std::isinf(lp32) ? lp32 : ref_lp[r])});
        }
        if (!nan_inf) {
          double m = -INFINITY, s = 0, a = 0;
          for (int64_t v = 0; v < vocab; ++v) m = std::max(m, l.decoded[r * vocab + v]);
          for (int64_t v = 0; v < vocab && m != -INFINITY; ++v) {
            const double x = l.decoded[r * vocab + v];
            if (x == -INFINITY) continue;
            const double d = (x - m) / T, e = std::exp(d);
            s += e, a += e * d;
          }
          sim::check(pt.pm[r] == m, "tokenStatsPartial max row " + std::to_string(r) + " " + name + grid);
          e_part = std::max({e_part, std::fabs(pt.ps[r] - s) / std::max(1.0, s), std::fabs(pt.pa[r] - a) / std::max(1.0, s)});
          sim::check(pt.pt[r] == l.decoded[r * vocab + targets[r]], "tokenStatsPartial targetLogit row " + std::to_string(r));
        }
      }
      sim::check(e_stats <= 1e-5, "tokenStats " + name + grid + ": scaled error " + std::to_string(e_stats));
      sim::check(e_part <= 2e-6, "tokenStatsPartial " + name + grid + ": relative error " + std::to_string(e_part));
      // backward, with the reference's statistics and with pass 1's (kBackward)
      for (int given = 0; given < 2; ++given) {
        std::vector<int32_t> flags(rows, 0);
        std::vector<double> lse_d, ent_d;
        if (!given) {
          const Out b = by_dtype(dt, [&](auto d) { return run_stats<decltype(d)::value>(l, G, parts, T, nullptr, kBackward, 0); });
          flags = b.flags;
          lse_d = b.pm, ent_d = b.ps;
        }
        const bool in_place = dt == DType::F32 && parts != 2;  // in place: float32 only
        std::vector<float> g = by_dtype(dt, [&](auto d) {
          return run_grad<decltype(d)::value>(l, G, parts, T, given ? nullptr : lse_d.data(), lse32.data(),
                                              given ? nullptr : ent_d.data(), given ? ent32.data() : nullptr, gl.data(),
                                              ge.data(), targets.data(), flags, in_place);
        });
        double e_grad = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const auto [nan_inf, finite] = bad_row(r);
          // given statistics: only NaN / +Infinity is an error (there is no pass to find a row empty)
          const bool want_flag = nan_inf || (!given && !finite);
          sim::check((flags[r] != 0) == want_flag, "tokenStatsBackward flag row " + std::to_string(r) + " " + name + grid);
          if (want_flag) {
            // the row written (in place or not) still names the same bad entry: bad entries are written
            // through, and a row pass 1 flagged is copied
            const char* row = static_cast<const char*>(l.data.get()) + r * vocab * dtype_size(dt);
            const std::string want = gear::bad_row_at(row, vocab, dt, "logits", r).message;
            const std::string got = gear::bad_row_at(&g[r * vocab], vocab, DType::F32, "logits", r).message;
            sim::check(got == want, "tokenStatsBackward error message row " + std::to_string(r) + " " + name + grid +
                                        (in_place ? " in place" : "") + ": got '" + got + "', want '" + want + "'");
          }
          if (nan_inf || !finite) continue;
          for (int64_t v = 0; v < vocab; ++v) {
            const double x = l.decoded[r * vocab + v];
            const double lp = x == -INFINITY ? -INFINITY : given ? x / T - lse32[r] : ref_logp[r][v];
            const double p = lp == -INFINITY ? 0.0 : std::exp(lp);
            double want = (-gl[r] * p - ge[r] * (lp == -INFINITY ? 0.0 : p * (lp + ref_ent[r]))) / T;
            if (v == targets[r]) want += gl[r] / T;
            e_grad = std::max(e_grad, sim::scaled_error(g[r * vocab + v], want));
          }
        }
        sim::check(e_grad <= 1e-5, std::string("tokenStatsBackward ") + (given ? "stats given " : "recomputed ") + name + grid +
                                       ": scaled error " + std::to_string(e_grad));
      }
    }
  }
}

}  // namespace

int sim_token_stats() {
  int cases = 0;
  const int64_t shapes[][2] = {{1, 1}, {2, 3}, {6, 33}, {5, 1000}, {6, 3001}, {2, 20011}, {3, 8}, {6, 2048}, {5, 4099},
                                {11, 40}, {11, 2500}, {11, 4099}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const auto& sh : shapes)
      for (double T : {1.0, 0.7, 2.0}) {
        run_case(static_cast<uint32_t>(sh[0] * 7919 + sh[1] + static_cast<int>(dt) * 31), sh[0], sh[1], dt, T);
        ++cases;
      }
  // A 1 x 1 row at temperature 0.7: the gradient of a one-entry vocabulary is exactly 0.
  for (DType dt : {DType::F32, DType::BF16}) {
    const sim::Logits l = sim::encode({2.3712}, dt, 1, 1);
    const int32_t y = 0;
    const float gl = 1.1684f, ge = -0.4312f;
    const Out o = by_dtype(dt, [&](auto d) { return run_stats<decltype(d)::value>(l, 32, 1, 0.7, &y, kStats, 0); });
    std::vector<int32_t> flags{0};
    std::vector<float> g = by_dtype(dt, [&](auto d) {
      return run_grad<decltype(d)::value>(l, 32, 1, 0.7, nullptr, o.lse.data(), nullptr, o.ent.data(), &gl, &ge, &y, flags);
    });
    sim::check(o.ent[0] == 0.f && o.lp[0] == 0.f, "tokenStats 1x1: entropy and log-prob 0");
    sim::check(std::fabs(g[0]) <= 1e-6, "tokenStatsBackward 1x1 T=0.7 " + std::string(dname(dt)) + ": got " + std::to_string(g[0]));
    ++cases;
  }
  std::printf("tokenStats simulation: %d cases\n", cases);
  return cases;
}

// The sweep mode (kernel_sim --sweep): one row per line of standard input,
//   dtype T gl ge lse ent vocab z_0 .. z_(vocab-1)
// (dtype 0 float32, 1 bfloat16, 2 float16; z exactly representable in the dtype; lse and ent the float32
// statistics the gradient is given, the target is entry 0), through the kernels' own code: the forward
// (tokenStats: lse, entropy), the backward given lse and ent, and the backward recomputing them (pass 1).
// Prints one JSON line per row. A row of up to 2048 entries runs as one warp, a longer one as two block parts.
int sim_token_stats_sweep(FILE* in) {
  int rows = 0, dt = 0, vocab = 0;
  double T, gl64, ge64, lse64, ent64;
  while (std::fscanf(in, "%d %lf %lf %lf %lf %lf %d", &dt, &T, &gl64, &ge64, &lse64, &ent64, &vocab) == 7) {
    std::vector<double> z(static_cast<size_t>(vocab));
    for (auto& x : z)
      if (std::fscanf(in, "%lf", &x) != 1) return -1;
    const DType d = dt == 0 ? DType::F32 : dt == 1 ? DType::BF16 : DType::F16;
    const sim::Logits l = sim::encode(z, d, 1, vocab);
    const int G = vocab <= 2048 ? 32 : kThreads;
    const int64_t parts = vocab <= 2048 ? 1 : 2;
    const int32_t y = 0;
    const float gl = static_cast<float>(gl64), ge = static_cast<float>(ge64);
    const float lse = static_cast<float>(lse64), ent = static_cast<float>(ent64);
    const Out o = by_dtype(d, [&](auto k) { return run_stats<decltype(k)::value>(l, G, parts, T, &y, kStats, 0); });
    std::vector<int32_t> fg{0};
    const std::vector<float> given = by_dtype(d, [&](auto k) {
      return run_grad<decltype(k)::value>(l, G, parts, T, nullptr, &lse, nullptr, &ent, &gl, &ge, &y, fg);
    });
    const Out b = by_dtype(d, [&](auto k) { return run_stats<decltype(k)::value>(l, G, parts, T, nullptr, kBackward, 0); });
    std::vector<int32_t> fr = b.flags;
    const std::vector<float> rec = by_dtype(d, [&](auto k) {
      return run_grad<decltype(k)::value>(l, G, parts, T, b.pm.data(), nullptr, b.ps.data(), nullptr, &gl, &ge, &y, fr);
    });
    auto list = [](const std::vector<float>& v) {
      std::string s = "[";
      char buf[32];
      for (size_t i = 0; i < v.size(); ++i) {
        // JSON has no NaN or Infinity: they go as strings
        if (std::isnan(v[i])) std::snprintf(buf, sizeof buf, "\"NaN\"");
        else if (std::isinf(v[i])) std::snprintf(buf, sizeof buf, v[i] > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        else std::snprintf(buf, sizeof buf, "%.9g", v[i]);
        s += (i ? "," : "") + std::string(buf);
      }
      return s + "]";
    };
    std::printf("{\"lse\":%s,\"ent\":%s,\"flags\":[%d,%d,%d],\"given\":%s,\"recomputed\":%s}\n",
                list({o.lse[0]}).c_str(), list({o.ent[0]}).c_str(), o.flags[0], fg[0], fr[0], list(given).c_str(),
                list(rec).c_str());
    ++rows;
  }
  return rows;
}
