// segmentReduce / segmentBroadcast. Signature (positional, as the TS layer calls it):
//   segmentReduce(values: Float32Array|Float64Array, offsets: Int32Array, mask: Uint8Array|null,
//                 op: 0..4, out: Float64Array|null, async: boolean, abort: Int32Array|null)
//   segmentBroadcast(rowValues: Float64Array, offsets, mask|null, out: Float32Array|null, async, abort)
#include "args.h"
#include "gear/segment.h"
#include "large_output.h"
#include "ops.h"

namespace gear::addon {

static Napi::Value SegmentReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Array<float> v32;
  Array<double> v64;
  if (info[0].IsTypedArray() && info[0].As<Napi::TypedArray>().TypedArrayType() == napi_float32_array)
    v32 = F32(info[0], "values");
  else
    v64 = F64(info[0], "values");
  const int64_t n = v32.value.IsEmpty() ? v64.length : v32.length;
  const auto off = I32Copy(info[1], "offsets");
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  Array<uint8_t> mask;
  if (!IsNullish(info[2])) mask = U8(info[2], "mask", n);
  const auto op = static_cast<SegOp>(Int(info[3], "op", 0, 4));
  Napi::Float64Array out = IsNullish(info[4]) ? Napi::Float64Array::New(env, rows)
                                              : F64(info[4], "out", rows).value.As<Napi::Float64Array>();
  const bool async = !IsNullish(info[5]) && Bool(info[5], "async");
  const auto* abort = AbortFlag(info[6]);
  double* o = out.Data();
  return Run(env, async, {info[0], info[1], info[2], out, info[6]},
             [=](const ExecContext& ctx) {
               return segment_reduce(v32.data, v64.data, n, off.data, rows, mask.data, op, o, ctx);  // off: a copy
             },
             out, abort);
}

static Napi::Value SegmentBroadcast(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto off = I32Copy(info[1], "offsets");
  if (off.length < 1) Throw(env, Code::Shape, "offsets.length: expected at least 1, got 0");
  const int64_t rows = off.length - 1;
  auto vals = F64(info[0], "rowValues", rows);
  const int64_t n = off.data[rows];
  if (n < 0) Throw(env, Code::Offsets, "offsets[R]: expected >= 0, got " + std::to_string(n));
  Array<uint8_t> mask;
  if (!IsNullish(info[2])) mask = U8(info[2], "mask", n);
  const bool reused = !IsNullish(info[3]);
  Napi::Float32Array out = !reused ? NewStreamOutputF32(env, static_cast<size_t>(n))
                                              : F32(info[3], "out", n).value.As<Napi::Float32Array>();
  const bool async = !IsNullish(info[4]) && Bool(info[4], "async");
  const auto* abort = AbortFlag(info[5]);
  float* o = out.Data();
  return Run(env, async, {info[0], info[1], info[2], out, info[5]},
             [=](const ExecContext& ctx) {
               return segment_broadcast(vals.data, off.data, rows, n, mask.data, o, ctx, reused);
             },
             out, abort);
}

void RegisterSegment(Napi::Env env, Napi::Object exports) {
  exports.Set("segmentReduce", Napi::Function::New(env, SegmentReduce, "segmentReduce"));
  exports.Set("segmentBroadcast", Napi::Function::New(env, SegmentBroadcast, "segmentBroadcast"));
}

}  // namespace gear::addon
