// PPO token passes for the baseline ISA of every architecture: one token at a time through the shared
// scalar rules (policy_loss_kernels.h).
#include <cstdint>

#include "policy_loss_kernels.h"

namespace gear {
namespace ppo {
namespace baseline {
namespace {

// Tokens [b, e), one at a time.
void block(const Kern& s, int64_t rows, int64_t b, int64_t e, bool, Partial& p) {
  int64_t r = row_of(s.off, rows, b);
  for (int64_t t = b; t < e; ++t) {
    while (s.off[r + 1] <= t) ++r;
    const uint8_t mt = s.mask ? s.mask[t] : 1;
    s.grad[t] = token_scalar(s, t, mt, s.w[r], s.wf[r], p);
  }
}

bool count_rows(const uint8_t* mask, const int32_t* off, int64_t r0, int64_t r1, double* cnt) {
  uint8_t any = 0;
  for (int64_t r = r0; r < r1; ++r) {
    int64_t c = 0;
    for (int64_t t = off[r]; t < off[r + 1]; ++t) { c += mask[t]; any |= mask[t]; }
    cnt[r] = static_cast<double>(c);
  }
  return (any & 0xFE) == 0;
}

}  // namespace
}  // namespace baseline
}  // namespace ppo
}  // namespace gear

const gear::ppo::PolicyLossKernels gear::ppo::policy_loss_baseline = {
    &gear::ppo::baseline::block, &gear::ppo::baseline::block, &gear::ppo::baseline::count_rows, false};
