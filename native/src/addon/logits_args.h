// Argument readers shared by the logits-op bindings (token_stats_binding.cc, divergence_binding.cc): a
// logits argument in host memory or on a device, the device a call runs on, and a backward's rows x
// vocab output (a host Float32Array, a device tensor, or a new device tensor made by the call).
#pragma once
#include <memory>
#include <string>

#include "args.h"
#include "../core/device_tensors.h"
#include "invoke.h"
#include "gear/backend.h"
#include "gear/types.h"

namespace gear::addon {

// The properties of a logits object: { data, rows, vocab, dtype } in host memory, or { tensor } naming a
// device tensor (rl.cuda's DeviceLogits).
inline Params LogitsParams(const Params& p, const char* name) {
  return p.Object(name, {"data", "rows", "vocab", "dtype", "tensor"});
}

// The claims a call holds on device tensors, released when its work has ended (the work lambda owns them).
using Claims = std::shared_ptr<TensorClaims>;

// Reads the device tensor named by `p` ({ tensor: id }) into a view, claiming it for `access`.
inline LogitsView ReadTensor(const Params& p, const Claims& claims, Access access, int* device) {
  if (device_backend() == nullptr)
    Throw(p.Env(), Code::Device, p.Name("tensor") + ": expected a host array (device tensors need the CUDA module), got a device tensor");
  const int64_t id = p.Int("tensor", 1, kMaxSafeInt);
  TensorInfo info;
  Check(p.Env(), claims->claim(static_cast<uint64_t>(id), access, p.Name("tensor").c_str(), &info));
  LogitsView l;
  l.data = info.ptr;
  l.rows = info.rows;
  l.vocab = info.vocab;
  l.dtype = info.dtype;
  l.on_device = true;
  *device = info.device;
  return l;
}

// Reads a logits object already read by name. Host memory: a Float32Array for dtype 0 (float32), a
// Uint16Array for 1 (bfloat16) / 2 (float16); its element count goes into the view, and the public entry
// (core/backend.cc) checks the shape against it, once. A device tensor: claimed for reading (for
// `access`), its shape and dtype from the tensor table. *device: the tensor's device, -1 for host memory.
inline LogitsView ReadLogits(const Params& p, const Claims& claims, int* device, Access access = Access::Read) {
  *device = -1;
  if (p.Has("tensor")) return ReadTensor(p, claims, access, device);
  LogitsView l;
  l.dtype = static_cast<DType>(p.Int("dtype", 0, 2));
  l.rows = p.Int("rows", 0, kMaxSafeInt);
  l.vocab = p.Int("vocab", 1, kMaxSafeInt);
  if (l.dtype == DType::F32) {
    auto a = p.F32("data");
    l.data = a.data;
    l.length = a.length;
  } else {
    auto a = p.U16("data");
    l.data = a.data;
    l.length = a.length;
  }
  return l;
}

// rows * vocab of a view not yet checked, or -1 when it overflows or differs from the array's length: then
// nothing is sized from it (no output allocated or length-checked) and the public entry reports the shape.
inline int64_t Elements(const LogitsView& l) {
  if (l.rows < 0 || l.vocab < 1 || l.rows > kMaxSafeInt / l.vocab) return -1;
  const int64_t n = l.rows * l.vocab;
  return l.length >= 0 && l.length != n ? -1 : n;
}

// The work's context on device `device` (-1: the CPU), its rows x vocab output on the device or not.
inline ExecContext OnDevice(const ExecContext& c, int device, bool out_on_device) {
  ExecContext x = c;
  x.device = device;
  x.out_on_device = out_on_device;
  return x;
}

// The device a call runs on: its tensors' device (every logits argument on that one device, or every one
// in host memory), else the call's `device` parameter (-1, the default: the CPU; >= 0: that CUDA device,
// host logits staged through it).
inline int CallDevice(const Params& p, std::initializer_list<std::pair<const char*, int>> logits) {
  auto where = [](int d) { return d < 0 ? std::string("host memory") : "a tensor on cuda:" + std::to_string(d); };
  const auto& first = *logits.begin();
  for (const auto& [name, d] : logits)
    if (d != first.second)
      Throw(p.Env(), Code::Device, std::string(name) + ": expected " + where(first.second) + ", as " + first.first +
                                       " is, got " + where(d));
  const int64_t asked = p.Has("device") ? p.Int("device", -1, 1 << 20) : -1;
  if (first.second >= 0) {
    if (asked >= 0 && asked != first.second)
      Throw(p.Env(), Code::Device, "device: expected cuda:" + std::to_string(first.second) + ", the device of " +
                                       first.first + ", got cuda:" + std::to_string(asked));
    return first.second;
  }
  return static_cast<int>(asked);
}

// A backward's rows x vocab float32 output, decided before the work starts: the caller's host array
// (`out` a Float32Array), the caller's device tensor (`out` a { tensor } object, claimed for writing),
// the logits themselves (in place), or, for device logits with no `out`, a new device tensor the work
// allocates and the table receives once the work has succeeded.
struct GradOut {
  float* host = nullptr;            // a host array (or null)
  float* device_ptr = nullptr;      // a device tensor of the caller (or the logits, in place)
  bool make = false;                // allocate a new device tensor
  int device = -1;
  int64_t rows = 0, vocab = 0;
};

// The { tensor } property of a backward's `out` when it is a device tensor object (a typed array or an
// absent `out` reads as all-undefined).
inline Params OutTensorParams(const Params& p) {
  const Napi::Value v = p.Get("out");
  if (v.IsObject() && !v.IsTypedArray() && !v.IsArray()) return p.Object("out", {"tensor"});
  return p.Absent(p.Name("out"), {"tensor"});
}

// Reads a backward's `out` (with `in_place`) for logits `l` (on device `ldev`, -1 for host memory) of a
// call on device `dev`; `op` holds the `out` object's { tensor } property. `result_out` receives what the
// result's gradient property holds before the work (a new device tensor is set by the call's Finish).
inline GradOut ReadGradOut(const Params& p, const Params& lp, const Params& op, const LogitsView& l, int ldev, int dev,
                           bool in_place, const Claims& claims, Napi::Value* result_out) {
  Napi::Env env = p.Env();
  GradOut g;
  g.device = dev;
  g.rows = l.rows;
  g.vocab = l.vocab;
  const int64_t total = Elements(l);  // -1 (any length): the public entry refuses the shape first
  const Napi::Value outv = p.Get("out");
  if (in_place) {
    if (l.dtype != DType::F32)
      Throw(env, Code::DType, "inPlace: expected float32 logits (a Float32Array), got " + std::string(dtype_name(l.dtype)));
    if (p.Has("out")) Throw(env, Code::Option, "out: expected no out buffer with inPlace, got one");
    if (ldev >= 0) {
      int d2;
      ReadTensor(lp, claims, Access::Write, &d2);  // the logits are written
      g.device_ptr = const_cast<float*>(static_cast<const float*>(l.data));
      *result_out = p.Get("logits");
    } else {
      lp.Writes("data");  // no other array of the call may share the logits' memory
      g.host = total > 0 ? const_cast<float*>(static_cast<const float*>(l.data)) : nullptr;
      *result_out = lp.Get("data");
    }
    return g;
  }
  if (outv.IsTypedArray() || (p.Has("out") && !op.Has("tensor"))) {
    auto a = p.F32("out", total);
    g.host = total > 0 ? a.data : nullptr;
    *result_out = outv;
    return g;
  }
  if (op.Has("tensor")) {
    if (dev < 0)
      Throw(env, Code::Device, "out: expected a Float32Array for a call on the CPU, got a device tensor (run it on the device: "
                               "device logits or the device option)");
    int odev;
    const LogitsView o = ReadTensor(op, claims, Access::Write, &odev);
    if (odev != dev)
      Throw(env, Code::Device, "out: expected a tensor on cuda:" + std::to_string(dev) + ", got one on cuda:" + std::to_string(odev));
    if (o.dtype != DType::F32) Throw(env, Code::DType, "out: expected a float32 device tensor, got " + std::string(dtype_name(o.dtype)));
    if (o.rows != l.rows || o.vocab != l.vocab)
      Throw(env, Code::Shape, "out: expected a " + std::to_string(l.rows) + " x " + std::to_string(l.vocab) +
                                  " device tensor, got " + std::to_string(o.rows) + " x " + std::to_string(o.vocab));
    g.device_ptr = const_cast<float*>(static_cast<const float*>(o.data));
    *result_out = outv;
    return g;
  }
  if (ldev >= 0) {  // device logits: the gradient stays on the device
    g.make = true;
    *result_out = env.Undefined();
    return g;
  }
  Napi::Float32Array fresh = Napi::Float32Array::New(env, static_cast<size_t>(total < 0 ? 0 : total));
  g.host = total > 0 ? fresh.Data() : nullptr;
  *result_out = fresh;
  return g;
}

// What the work made: a new device tensor's memory (an upload's copy, or a backward's float32 gradient),
// returned to the pool unless the table took it.
struct NewTensor {
  int device = -1;
  void* ptr = nullptr;
  int64_t rows = 0, vocab = 0;
  DType dtype = DType::F32;
  bool adopted = false;
  ~NewTensor() {
    if (ptr != nullptr && !adopted && device_api() != nullptr) device_api()->free(device, ptr);
  }
  int64_t bytes() const { return rows * vocab * dtype_size(dtype); }
  // Allocates a float32 gradient (in the work); the output pointer. Sizes come from a checked tensor or
  // array, so rows * vocab already fits; the check keeps this safe on its own.
  Status alloc(float** out) {
    if (rows < 0 || vocab < 1 || rows > kMaxSafeInt / vocab)
      return error(Code::Shape, "out: expected a tensor size that fits in memory, got " + std::to_string(rows) + " x " +
                                    std::to_string(vocab));
    void* p = nullptr;
    const Status st = device_api()->alloc(device, bytes(), &p);
    ptr = p;
    *out = static_cast<float*>(p);
    return st;
  }
};

// The JavaScript description of a device tensor: { tensor, device, rows, vocab, dtype, bytes }.
inline Napi::Object TensorObject(Napi::Env env, uint64_t id, const TensorInfo& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("tensor", static_cast<double>(id));
  o.Set("device", t.device);
  o.Set("rows", static_cast<double>(t.rows));
  o.Set("vocab", static_cast<double>(t.vocab));
  o.Set("dtype", static_cast<int>(t.dtype));
  o.Set("bytes", static_cast<double>(t.bytes));
  return o;
}

// Hands a new tensor to the table (owned by this JS environment) and describes it to JavaScript.
inline Napi::Object AdoptTensor(Napi::Env env, NewTensor& t) {
  TensorInfo info;
  info.device = t.device;
  info.ptr = t.ptr;
  info.bytes = t.bytes();
  info.rows = t.rows;
  info.vocab = t.vocab;
  info.dtype = t.dtype;
  info.free = device_api()->free;
  const uint64_t id = tensor_table().add(info, JobsOf(env).get());
  t.adopted = true;
  return TensorObject(env, id, info);
}

}  // namespace gear::addon
