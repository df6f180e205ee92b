// tokenStats / tokenStatsBackward / tokenStatsPartial / mergeTokenStats: per-row log-prob of the target,
// entropy and logsumexp of softmax(z / T), their gradient, and the vocabulary-sharded form.
// Plain C++ (no N-API): pointers, shapes, dtype, Status.
//
// Semantics shared by every function here: -Infinity logits are masked entries (0 log 0 = 0); NaN or
// +Infinity logits and rows without any finite logit are ERR_NON_FINITE (the message names the row);
// on any error every output is filled with NaN, so nothing is left looking valid.
#pragma once
#include <cstdint>

#include "gear/types.h"

namespace gear {

// logprob[r] = z[r, y_r]/T - lse_r, entropy[r] = -sum p log p, lse[r] = logsumexp(z[r]/T), each computed
// in one pass over the row. targets may be null (then logprob must be null too); any output may be null.
Status token_stats(const LogitsView& logits, const int32_t* targets, double temperature, float* logprob,
                   float* entropy, float* lse, const ExecContext& ctx);

// dL/dz for L = sum_r grad_logprob[r] * logprob[r] + grad_entropy[r] * entropy[r] (either gradient may be
// null = zero), written to out (rows * vocab float32). lse / entropy are the forward's statistics (both
// null: recomputed per row; entropy is needed only with grad_entropy). out may be the logits themselves
// (float32, in place). On an error raised after writing began, out is filled with NaN.
Status token_stats_backward(const LogitsView& logits, const int32_t* targets, const float* grad_logprob,
                            const float* grad_entropy, double temperature, const float* lse, const float* entropy,
                            float* out, const ExecContext& ctx);

// Statistics of a vocabulary shard [vocab_start, vocab_start + shard.vocab) of each row, relative to the
// shard's max raw logit (see rowmath::SoftmaxStats): max[r], sum_exp[r], sum_exp_x[r], and target_logit[r]
// = the raw logit of targets[r] when it falls in the shard, NaN otherwise. A shard row may be fully
// masked (max -Infinity, sums 0).
Status token_stats_partial(const LogitsView& shard, const int32_t* targets, int64_t vocab_start,
                           double temperature, double* max, double* sum_exp, double* sum_exp_x, double* target_logit,
                           const ExecContext& ctx);

// Merges `parts` shard statistics of the same rows (same temperature) into logprob / entropy / lse:
// exact (log-sum-exp rules in float64), merged in the given order. The shards must tile the vocabulary:
// vocab_start[0] = 0 and vocab_start[i] = vocab_start[i-1] + vocab[i-1]. Each row's target must lie in
// exactly one shard.
Status merge_token_stats(int64_t parts, const int64_t* vocab_start, const int64_t* vocab, const double* const* max,
                         const double* const* sum_exp, const double* const* sum_exp_x,
                         const double* const* target_logit, int64_t rows, double temperature, float* logprob,
                         float* entropy, float* lse);

}  // namespace gear
