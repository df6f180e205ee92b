// The simulation's entry: runs every op family's cases and the staging copy's, and prints a line per
// failure; with --sweep, the tokenStats rows read from standard input (token_stats_sim.cu).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../../native/src/cuda/runtime.h"
#include "sim.h"

// The staging copy (copy_streaming: non-temporal stores from a 16-byte aligned point of the destination)
// gives memcpy's bytes for every size up to 300 and every alignment of source and destination, and for
// a few MiB, around bytes it must not touch.
int sim_staging_copy() {
  int cases = 0;
  std::vector<unsigned char> src(5 << 20), dst(5 << 20), want(5 << 20);
  sim::Rng rng(7);
  for (auto& b : src) b = static_cast<unsigned char>(rng.next() * 256);
  auto check = [&](size_t so, size_t d_off, size_t n) {
    std::memset(dst.data(), 0xa5, dst.size());
    std::memset(want.data(), 0xa5, want.size());
    std::memcpy(want.data() + d_off, src.data() + so, n);
    gear::cuda::copy_streaming(dst.data() + d_off, src.data() + so, static_cast<int64_t>(n));
    sim::check(std::memcmp(dst.data(), want.data(), d_off + n + 64) == 0,
               "staging copy of " + std::to_string(n) + " bytes, source offset " + std::to_string(so) + ", destination offset " +
                   std::to_string(d_off));
    ++cases;
  };
  for (size_t n = 0; n <= 300; n += 7)
    for (size_t so = 0; so < 16; so += 3)
      for (size_t d_off = 0; d_off < 16; d_off += 5) check(so, d_off, n);
  check(3, 0, (4 << 20) + 17);
  check(0, 9, 4 << 20);
  std::printf("staging copy: %d cases\n", cases);
  return cases;
}

int sim_token_stats();
int sim_divergence();
int sim_token_stats_sweep(FILE* in);

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--sweep") return sim_token_stats_sweep(stdin) < 0 ? 2 : 0;
  const int cases = sim_token_stats() + sim_divergence() + sim_staging_copy();
  std::printf("%d cases, %d failures\n", cases, sim::failures());
  return sim::failures() == 0 ? 0 : 1;
}
