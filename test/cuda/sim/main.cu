// The simulation's entry: runs every op family's cases and prints a line per failure.
#include <cstdio>

#include "sim.h"

int sim_token_stats();
int sim_divergence();

int main() {
  const int cases = sim_token_stats() + sim_divergence();
  std::printf("%d cases, %d failures\n", cases, sim::failures());
  return sim::failures() == 0 ? 0 : 1;
}
