// Argument checks shared by every backend (the CPU kernels and the CUDA module): the same rules and the
// same messages whichever backend runs the op. Plain C++ (no N-API), so kernels include it.
#pragma once
#include <cstdint>

#include "gear/divergence.h"
#include "gear/types.h"

namespace gear {

// ---- logits ----
// rows >= 0, vocab >= 1, rows * vocab without overflow, data present, known dtype.
Status check_logits(const LogitsView& l, const char* what);
// Describes the first NaN / +Infinity entry of row r (or an all -Infinity row) as an ERR_NON_FINITE status.
// `l` is host memory.
Status bad_row_status(const LogitsView& l, const char* what, int64_t r);
// The same for one row of `vocab` logits at `row` (host memory; a device backend copies the row first),
// named as row r.
Status bad_row_at(const void* row, int64_t vocab, DType dtype, const char* what, int64_t r);
// The error of row r of a student/teacher pair that is bad, the same rule on every backend: the student
// when its row holds a NaN or +Infinity, else the teacher when its row does, else the side whose every
// entry is a mask (rowmath::is_mask; student first); then bad_row_at's message for that side. Whole-row, so it holds when a
// backward has already written gradients over good entries of the student (in place): the bad entries
// themselves are never overwritten.
Status bad_pair_at(const void* s_row, const void* t_row, int64_t vocab, DType dtype, int64_t r);
Status bad_pair_status(const LogitsView& s, const LogitsView& t, int64_t r);
// ERR_NON_FINITE for divergenceBackward's row r whose divergence is +Infinity with no finite klCap.
Status infinite_divergence_status(int64_t r);
// Every target in [0, vocab).
Status check_targets(const int32_t* targets, int64_t rows, int64_t vocab, const char* what);
// A vocabulary shard's start in [0, 2^31) and every target >= 0 (any id may fall outside the shard).
Status check_partial_args(const int32_t* targets, int64_t rows, int64_t vocab_start);
// Finite, >= 1e-30 (so 1/T is a finite float32 scale).
Status check_temperature(double t);
// Every p[i] finite (null p: nothing to check).
Status check_finite(const float* p, int64_t n, const char* what);
// NaN-fills an output (null: nothing), so nothing is left looking valid after an error.
void fill_nan(float* p, int64_t n);
void fill_nan(double* p, int64_t n);

// ---- divergence arguments ----
// Student/teacher shapes and dtypes agree; kind, beta, temperature and klCap in range.
Status check_pair(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap);
// JSD with beta 1 / 0 is reverse / forward KL (TRL's special cases).
DivKind effective_kind(DivKind kind, double beta);
// check_pair plus the backward's incoming gradient and optional forward statistics.
Status check_backward_args(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse);

// ---- packed rows (offsets of length rows + 1, a 0/1 mask per token) ----
// offsets[0] = 0, non-decreasing, offsets[rows] = n. Used by every packed-row kernel.
Status check_offsets(const int32_t* offsets, int64_t rows, int64_t n);
// First index in [b, e) whose mask byte is neither 0 nor 1, or -1.
int64_t first_non_binary(const uint8_t* mask, int64_t b, int64_t e);
// ERR_OPTION "mask[i]: expected 0 or 1, got v" (the message of the TS layer's mask check).
Status mask_error(const uint8_t* mask, int64_t index);

}  // namespace gear
