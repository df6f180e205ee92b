// Argument readers shared by the logits-op bindings (token_stats_binding.cc, divergence_binding.cc).
#pragma once
#include <string>

#include "args.h"
#include "gear/common.h"

namespace gear::addon {

// Largest integer a JS number holds exactly.
constexpr int64_t kMaxSafeInt = (int64_t{1} << 53) - 1;

// Reads a logits buffer: Float32Array for dtype 0 (float32), Uint16Array for 1 (bfloat16) / 2 (float16),
// holding exactly rows * vocab elements (checked without overflow).
inline LogitsView ReadLogits(const Napi::Value& data, const Napi::Value& rows_v, const Napi::Value& vocab_v,
                             const Napi::Value& dtype_v, const std::string& what) {
  LogitsView l;
  const int64_t dt = Int(dtype_v, (what + ".dtype").c_str(), 0, 2);
  l.dtype = static_cast<DType>(dt);
  l.rows = Int(rows_v, (what + ".rows").c_str(), 0, kMaxSafeInt);
  l.vocab = Int(vocab_v, (what + ".vocab").c_str(), 1, kMaxSafeInt);
  int64_t length;
  if (l.dtype == DType::F32) {
    auto a = F32(data, (what + ".data").c_str());
    l.data = a.data;
    length = a.length;
  } else {
    auto a = U16(data, (what + ".data").c_str());
    l.data = a.data;
    length = a.length;
  }
  if (l.rows > kMaxSafeInt / l.vocab || l.rows * l.vocab != length)
    Throw(data.Env(), Code::Shape, what + ".data.length: expected rows * vocab = " + std::to_string(l.rows) + " * " +
                                       std::to_string(l.vocab) + ", got " + std::to_string(length));
  return l;
}

// An optional Float32Array output of `len` elements: the given one (checked) or a new one.
inline Napi::Float32Array OutF32(Napi::Env env, const Napi::Value& v, const char* what, int64_t len) {
  if (IsNullish(v)) return Napi::Float32Array::New(env, static_cast<size_t>(len));
  return F32(v, what, len).value.As<Napi::Float32Array>();
}

inline const float* OptF32(const Napi::Value& v, const char* what, int64_t len) {
  if (IsNullish(v)) return nullptr;
  return F32(v, what, len).data;
}

}  // namespace gear::addon
