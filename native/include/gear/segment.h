// The types and row chunking of the segmented reductions and broadcasts over packed rows (offsets of
// length rows + 1, like flash-attention's cu_seqlens); the ops themselves are declared in gear/backend.h.
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

}  // namespace gear
