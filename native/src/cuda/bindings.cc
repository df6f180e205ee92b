// The CUDA module's bindings for the logits and segment ops: the CPU binding files compiled again with
// their kernel calls redirected to the gear::cuda implementations, so both modules take exactly the same
// JS arguments and run the same checks. merge_token_stats stays the host function (pure per-row math).
#include "gear/cuda.h"
#include "gear/divergence.h"
#include "gear/segment.h"
#include "gear/token_stats.h"

// Function-like macros: only calls are redirected, declarations above are already seen.
#define token_stats(...) ::gear::cuda::token_stats(__VA_ARGS__)
#define token_stats_backward(...) ::gear::cuda::token_stats_backward(__VA_ARGS__)
#define token_stats_partial(...) ::gear::cuda::token_stats_partial(__VA_ARGS__)
#define divergence(...) ::gear::cuda::divergence(__VA_ARGS__)
#define divergence_backward(...) ::gear::cuda::divergence_backward(__VA_ARGS__)
#define segment_reduce(...) ::gear::cuda::segment_reduce(__VA_ARGS__)
#define segment_broadcast(...) ::gear::cuda::segment_broadcast(__VA_ARGS__)

#include "../addon/divergence_binding.cc"
#include "../addon/segment_binding.cc"
#include "../addon/token_stats_binding.cc"
