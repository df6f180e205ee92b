// The argument checks every backend applies (CPU and CUDA alike), so both accept and reject exactly the
// same inputs with the same messages.
#include "checks.h"

#include <cmath>
#include <limits>
#include <string>

#include "gear/dtype_convert.h"
#include "gear/row_math.h"

namespace gear {

// ---- logits ----
Status check_logits(const LogitsView& l, const char* what) {
  const std::string w(what);
  const int dt = static_cast<int>(l.dtype);
  if (dt < 0 || dt > 2) return error(Code::DType, w + ".dtype: expected float32, bfloat16 or float16, got " + std::to_string(dt));
  if (l.rows < 0) return error(Code::Shape, w + ".rows: expected an integer >= 0, got " + std::to_string(l.rows));
  if (l.vocab < 1) return error(Code::Shape, w + ".vocab: expected an integer >= 1, got " + std::to_string(l.vocab));
  if (l.rows > std::numeric_limits<int64_t>::max() / 8 / l.vocab)
    return error(Code::Shape, w + ".rows * vocab: expected a size that fits in memory, got " + std::to_string(l.rows) +
                                  " x " + std::to_string(l.vocab));
  if (l.length >= 0 && l.rows * l.vocab != l.length)
    return error(Code::Shape, w + ".data.length: expected rows * vocab = " + std::to_string(l.rows) + " * " +
                                  std::to_string(l.vocab) + ", got " + std::to_string(l.length));
  if (l.rows > 0 && l.data == nullptr)
    return error(Code::Shape, w + ".data: expected " + std::to_string(l.rows * l.vocab) + " elements, got none");
  return Status::ok();
}

Status bad_row_status(const LogitsView& l, const char* what, int64_t r) {
  return bad_row_at(static_cast<const char*>(l.data) + r * l.vocab * dtype_size(l.dtype), l.vocab, l.dtype, what, r);
}

Status infinite_divergence_status(int64_t r) {
  return error(Code::NonFinite, "divergence[row " + std::to_string(r) +
                                    "]: expected a finite divergence (its gradient is undefined at +Infinity; use a "
                                    "finite klCap), got Infinity");
}

Status bad_row_at(const void* row_data, int64_t vocab, DType dtype, const char* what, int64_t r) {
  const char* row = static_cast<const char*>(row_data);
  for (int64_t v = 0; v < vocab; ++v) {
    const float x = kern::to_f32(dtype, row, v);
    if (std::isnan(x) || x == INFINITY)
      return error(Code::NonFinite, std::string(what) + "[row " + std::to_string(r) + ", entry " + std::to_string(v) +
                                        "]: expected a finite logit or -Infinity, got " + number_text(x));
  }
  // No NaN / +Infinity: every entry a mask. All -Infinity, or (a divergence) finite masks among them.
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isfinite(kern::to_f32(dtype, row, v)))
      return error(Code::NonFinite, std::string(what) + "[row " + std::to_string(r) +
                                        "]: expected at least one logit that is not a mask (-Infinity or below -1e38), "
                                        "got only masks");
  return error(Code::NonFinite, std::string(what) + "[row " + std::to_string(r) +
                                    "]: expected at least one finite logit, got all -Infinity");
}

namespace {
bool has_nan_or_pinf(const void* row, int64_t vocab, DType dtype) {
  for (int64_t v = 0; v < vocab; ++v) {
    const float x = kern::to_f32(dtype, row, v);
    if (x != x || x == INFINITY) return true;
  }
  return false;
}
// A logit that is not a mask (rowmath::is_mask: -Infinity or below about -1e38).
bool has_unmasked(const void* row, int64_t vocab, DType dtype) {
  for (int64_t v = 0; v < vocab; ++v) {
    const float x = kern::to_f32(dtype, row, v);
    if (std::isfinite(x) && !rowmath::is_mask(x)) return true;
  }
  return false;
}
}  // namespace

Status bad_pair_at(const void* s_row, const void* t_row, int64_t vocab, DType dtype, int64_t r) {
  const bool teacher = !has_nan_or_pinf(s_row, vocab, dtype) &&
                       (has_nan_or_pinf(t_row, vocab, dtype) || has_unmasked(s_row, vocab, dtype));
  return teacher ? bad_row_at(t_row, vocab, dtype, "teacher", r) : bad_row_at(s_row, vocab, dtype, "student", r);
}

Status bad_pair_status(const LogitsView& s, const LogitsView& t, int64_t r) {
  const int64_t row_bytes = s.vocab * dtype_size(s.dtype);
  return bad_pair_at(static_cast<const char*>(s.data) + r * row_bytes, static_cast<const char*>(t.data) + r * row_bytes,
                     s.vocab, s.dtype, r);
}

Status check_targets(const int32_t* targets, int64_t rows, int64_t vocab, const char* what) {
  if (rows > 0 && targets == nullptr) return error(Code::Shape, std::string(what) + ": expected an Int32Array of the row count, got none");
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] < 0 || targets[r] >= vocab)
      return error(Code::TargetRange, std::string(what) + "[" + std::to_string(r) + "]: expected a token id in [0, " +
                                          std::to_string(vocab) + "), got " + std::to_string(targets[r]));
  }
  return Status::ok();
}

Status check_partial_args(const int32_t* targets, int64_t rows, int64_t vocab_start) {
  if (vocab_start < 0 || vocab_start > std::numeric_limits<int32_t>::max())
    return error(Code::Option, "vocabStart: expected an integer in [0, 2^31), got " + std::to_string(vocab_start));
  if (rows > 0 && targets == nullptr) return error(Code::Shape, "targets: expected an Int32Array of the row count, got none");
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] < 0)
      return error(Code::TargetRange, "targets[" + std::to_string(r) + "]: expected a token id >= 0, got " +
                                          std::to_string(targets[r]));
  return Status::ok();
}

void fill_nan(float* p, int64_t n) {
  if (p == nullptr) return;
  const float q = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i) p[i] = q;
}

void fill_nan(double* p, int64_t n) {
  if (p == nullptr) return;
  const double q = std::numeric_limits<double>::quiet_NaN();
  for (int64_t i = 0; i < n; ++i) p[i] = q;
}

// 1/T must stay a finite float32 scale: T >= 1e-30 (any practical temperature).
Status check_temperature(double t) {
  if (!(t >= 1e-30) || !std::isfinite(t))
    return error(Code::Option, "temperature: expected a finite number >= 1e-30, got " + number_text(t));
  return Status::ok();
}

Status check_finite(const float* p, int64_t n, const char* what) {
  if (p == nullptr) return Status::ok();
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      return error(Code::NonFinite,
                   std::string(what) + "[" + std::to_string(i) + "]: expected a finite number, got " + number_text(p[i]));
  return Status::ok();
}

// ---- divergence arguments ----

Status check_pair(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                  double kl_cap) {
  Status st = check_logits(s, "student");
  if (!st.is_ok()) return st;
  if (!(st = check_logits(t, "teacher")).is_ok()) return st;
  if (s.rows != t.rows || s.vocab != t.vocab)
    return error(Code::Shape, "teacher: expected the student's shape " + std::to_string(s.rows) + " x " +
                                  std::to_string(s.vocab) + ", got " + std::to_string(t.rows) + " x " + std::to_string(t.vocab));
  if (s.dtype != t.dtype)
    return error(Code::DType, "teacher.dtype: expected the student's dtype " + std::string(dtype_name(s.dtype)) + ", got " +
                                  dtype_name(t.dtype));
  const int k = static_cast<int>(kind);
  if (k < 0 || k > 2) return error(Code::Option, "kind: expected reverse_kl, forward_kl or jsd, got " + std::to_string(k));
  if (!(beta >= 0.0 && beta <= 1.0)) return error(Code::Option, "beta: expected a number in [0, 1], got " + number_text(beta));
  if (!(st = check_temperature(temperature)).is_ok()) return st;
  if (!(kl_cap > 0)) return error(Code::Option, "klCap: expected a number > 0 (or Infinity), got " + number_text(kl_cap));
  return Status::ok();
}

// JSD with beta 1 / 0 is reverse / forward KL (TRL's special cases).
DivKind effective_kind(DivKind kind, double beta) {
  if (kind != DivKind::Jsd) return kind;
  if (beta == 1.0) return DivKind::ReverseKl;
  if (beta == 0.0) return DivKind::ForwardKl;
  return kind;
}

// Every check of divergence_backward's arguments (shared with the CUDA module).
Status check_backward_args(const LogitsView& s, const LogitsView& t, DivKind kind, double beta, double temperature,
                           double kl_cap, const float* grad, const float* value, const float* student_lse,
                           const float* teacher_lse) {
  const int64_t rows = s.rows;
  Status st = check_pair(s, t, kind, beta, temperature, kl_cap);
  if (!st.is_ok()) return st;
  if (rows > 0 && grad == nullptr) return error(Code::Shape, "grad: expected a Float32Array of the row count, got none");
  for (int64_t r = 0; r < rows; ++r)
    if (!std::isfinite(grad[r]))
      return error(Code::NonFinite, "grad[" + std::to_string(r) + "]: expected a finite number, got " + number_text(grad[r]));
  const int given = (value != nullptr) + (student_lse != nullptr) + (teacher_lse != nullptr);
  if (given != 0 && given != 3)
    return error(Code::Shape, "stats: expected value, studentLogsumexp and teacherLogsumexp together, got " +
                                       std::to_string(given) + " of 3");
  for (int64_t r = 0; given == 3 && r < rows; ++r) {
    if (!std::isfinite(student_lse[r]) || !std::isfinite(teacher_lse[r]))
      return error(Code::NonFinite, "stats row " + std::to_string(r) + ": expected finite logsumexps, got " +
                                             number_text(student_lse[r]) + " and " + number_text(teacher_lse[r]));
    if (std::isnan(value[r]))
      return error(Code::NonFinite, "stats.value[" + std::to_string(r) + "]: expected a number, got NaN");
  }
  return Status::ok();
}

// ---- packed rows ----

Status check_offsets(const int32_t* offsets, int64_t rows, int64_t n) {
  if (rows < 0) return error(Code::Shape, "rows: expected >= 0, got " + std::to_string(rows));
  if (offsets == nullptr) return error(Code::Shape, "offsets: expected an array, got null");
  if (offsets[0] != 0) return error(Code::Offsets, "offsets[0]: expected 0, got " + std::to_string(offsets[0]));
  for (int64_t r = 0; r < rows; ++r) {
    if (offsets[r + 1] < offsets[r])
      return error(Code::Offsets, "offsets[" + std::to_string(r + 1) + "]: expected >= " +
                                      std::to_string(offsets[r]) + ", got " + std::to_string(offsets[r + 1]));
  }
  if (offsets[rows] != n)
    return error(Code::Offsets, "offsets[R]: expected the token count " + std::to_string(n) + ", got " +
                                    std::to_string(offsets[rows]));
  return Status::ok();
}

int64_t first_non_binary(const uint8_t* mask, int64_t b, int64_t e) {
  uint8_t any = 0;  // branch-free OR over the range (vectorises); the index is searched only on failure
  for (int64_t t = b; t < e; ++t) any |= mask[t];
  if ((any & 0xFE) == 0) return -1;
  for (int64_t t = b; t < e; ++t)
    if (mask[t] > 1) return t;
  return -1;
}

Status mask_error(const uint8_t* mask, int64_t index) {
  return error(Code::Option, "mask[" + std::to_string(index) + "]: expected 0 or 1, got " + std::to_string(mask[index]));
}

}  // namespace gear
