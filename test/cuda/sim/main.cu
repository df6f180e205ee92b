// The simulation's entry: runs every op family's cases and prints a line per failure; with --sweep, the
// tokenStats rows read from standard input (token_stats_sim.cu).
#include <cstdio>
#include <string>

#include "sim.h"

int sim_token_stats();
int sim_divergence();
int sim_token_stats_sweep(FILE* in);

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--sweep") return sim_token_stats_sweep(stdin) < 0 ? 2 : 0;
  const int cases = sim_token_stats() + sim_divergence();
  std::printf("%d cases, %d failures\n", cases, sim::failures());
  return sim::failures() == 0 ? 0 : 1;
}
