// Segmented reductions and broadcasts over packed rows (offsets of length rows + 1, like
// flash-attention's cu_seqlens).
#pragma once
#include <cstdint>

#include "gear/types.h"

namespace gear {

enum class SegOp : int { Sum = 0, Mean = 1, Max = 2, Min = 3, Count = 4 };

// Row-aligned work chunks: chunk k holds the rows r with offsets[r] + r in [k, k+1) * kRowChunk (a
// row costs its tokens plus one), so long and short rows alike split evenly across threads. The split
// depends on the offsets only, never on the thread count.
constexpr int64_t kRowChunk = 1 << 16;
int64_t row_chunk_count(int64_t n, int64_t rows);
// First row of chunk k (rows for k = row_chunk_count); chunk k is [begin(k), begin(k + 1)).
int64_t row_chunk_begin(const int32_t* offsets, int64_t rows, int64_t k);

// Outputs the caller reuses are written with streaming (non-temporal) stores from this size on: far
// beyond the per-core caches, skipping the read-for-ownership of every output line pays off.
constexpr int64_t kStreamOutputBytes = int64_t{32} << 20;

// out[r] = op over tokens [offsets[r], offsets[r+1]) with mask != 0 (mask may be null). Values are
// float32 or float64 (exactly one of v32 / v64 non-null); accumulation is float64, sequential within a
// row, so results do not depend on the thread count. Empty rows: sum 0, count 0, mean 0, max -inf,
// min +inf. Mask bytes other than 0/1 give ERR_OPTION with the first such index (checked in the same
// pass as the reduction); after any error (abort included) out is NaN-filled.
Status segment_reduce(const float* v32, const double* v64, int64_t n, const int32_t* offsets, int64_t rows,
                      const uint8_t* mask, SegOp op, double* out, const ExecContext& ctx);

// out[t] = row_values[row(t)] for every token t, 0 where mask is 0. Mask bytes other than 0/1 give
// ERR_OPTION with the first such index; after any error (abort included) out is NaN-filled.
// reused_out: out is the caller's array (not freshly allocated), so a large one is written with
// streaming stores.
Status segment_broadcast(const double* row_values, const int32_t* offsets, int64_t rows, int64_t n,
                         const uint8_t* mask, float* out, const ExecContext& ctx, bool reused_out = false);

}  // namespace gear
