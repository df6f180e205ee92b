// Argument readers shared by the logits-op bindings (token_stats_binding.cc, divergence_binding.cc).
#pragma once
#include <string>

#include "../core/args.h"
#include "gear/types.h"

namespace gear::addon {

// Reads the properties of the logits object `name` ({ data, rows, vocab, dtype }).
inline Params LogitsParams(const Params& p, const char* name) { return p.Object(name, {"data", "rows", "vocab", "dtype"}); }

// Reads a logits object already read by name: Float32Array for dtype 0 (float32), Uint16Array for
// 1 (bfloat16) / 2 (float16), holding exactly rows * vocab elements (checked without overflow). The
// length check is the binding's own: only here is the buffer's real length known.
inline LogitsView ReadLogits(const Params& p) {
  LogitsView l;
  l.dtype = static_cast<DType>(p.Int("dtype", 0, 2));
  l.rows = p.Int("rows", 0, kMaxSafeInt);
  l.vocab = p.Int("vocab", 1, kMaxSafeInt);
  int64_t length;
  if (l.dtype == DType::F32) {
    auto a = p.F32("data");
    l.data = a.data;
    length = a.length;
  } else {
    auto a = U16(p.Get("data"), p.Name("data"));
    l.data = a.data;
    length = a.length;
  }
  if (l.rows > kMaxSafeInt / l.vocab || l.rows * l.vocab != length)
    Throw(p.Env(), Code::Shape, p.Name("data") + ".length: expected rows * vocab = " + std::to_string(l.rows) +
                                    " * " + std::to_string(l.vocab) + ", got " + std::to_string(length));
  return l;
}

// An optional Float32Array output of `len` elements: the given one (checked) or a new one.
inline Napi::Float32Array OutF32(const Params& p, const char* name, int64_t len) {
  if (!p.Has(name)) return Napi::Float32Array::New(p.Env(), static_cast<size_t>(len));
  return p.F32(name, len).value.As<Napi::Float32Array>();
}

}  // namespace gear::addon
