// segmentReduce / segmentBroadcast. The parameter and result objects are declared in
// ts/core/addon_types.ts.
#include "args.h"
#include "invoke.h"
#include "gear/backend.h"
#include "large_output.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value SegmentReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"values", "offsets", "mask", "op", "out", "async", "abort"});
  Array<float> v32;
  Array<double> v64;
  const Napi::Value values = p.Get("values");
  if (values.IsTypedArray() && values.As<Napi::TypedArray>().TypedArrayType() == napi_float32_array)
    v32 = p.F32("values");
  else
    v64 = p.F64("values");
  const int64_t n = v32.value.IsEmpty() ? v64.length : v32.length;
  const auto off = p.I32Copy("offsets");
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  const auto mask = p.OptU8("mask", n);
  const auto op = static_cast<SegOp>(p.Int("op", 0, 4));
  Napi::Float64Array out = p.Has("out") ? p.F64("out", rows).value.As<Napi::Float64Array>()
                                        : Napi::Float64Array::New(env, static_cast<size_t>(rows));
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  Put(result, "rowValues", out);
  double* o = out.Data();
  return Run(p, async,
             [=](const ExecContext& ctx) {
               return segment_reduce(v32.data, v64.data, n, off.data, rows, mask.data, op, o, ctx);  // off: a copy
             },
             result, abort);
}

static Napi::Value SegmentBroadcast(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Params p(info, {"rowValues", "offsets", "mask", "out", "async", "abort"});
  const auto off = p.I32Copy("offsets");
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  auto vals = p.F64("rowValues", rows);
  const int64_t n = off.data[rows];
  if (n < 0) Throw(env, Code::Offsets, "offsets[R]: expected >= 0, got " + std::to_string(n));
  const auto mask = p.OptU8("mask", n);
  const bool reused = p.Has("out");
  Napi::Float32Array out = reused ? p.F32("out", n).value.As<Napi::Float32Array>()
                                  : NewStreamOutputF32(env, static_cast<size_t>(n));
  const bool async = p.OptBool("async");
  const auto* abort = p.Abort();
  Napi::Object result = Napi::Object::New(env);
  Put(result, "tokenValues", out);
  float* o = out.Data();
  return Run(p, async,
             [=](const ExecContext& ctx) {
               return segment_broadcast(vals.data, off.data, rows, n, mask.data, o, ctx, reused);
             },
             result, abort);
}

void RegisterSegment(Napi::Env env, Napi::Object exports) {
  exports.Set("segmentReduce", Napi::Function::New(env, SegmentReduce, "segmentReduce"));
  exports.Set("segmentBroadcast", Napi::Function::New(env, SegmentBroadcast, "segmentBroadcast"));
}
GEAR_BINDING(RegisterSegment);

}  // namespace gear::addon
