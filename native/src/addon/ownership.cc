#include "ownership.h"

#include <cstddef>
#include <string>
#include <unordered_set>

#include "ops.h"
#include "args.h"
#include "invoke.h"

namespace gear::addon {

namespace {

napi_ref StrongRef(Napi::Env env, const Napi::Value& v) {
  napi_ref r = nullptr;
  if (napi_create_reference(env, v, 1, &r) != napi_ok) return nullptr;
  return r;
}

// worker_threads.markAsUntransferable, or an empty value when the runtime has none.
Napi::Value LookUpMark(Napi::Env env) {
  const Napi::Value process = env.Global().Get("process");
  if (!process.IsObject()) return Napi::Value();
  const Napi::Value get_builtin = process.As<Napi::Object>().Get("getBuiltinModule");
  if (!get_builtin.IsFunction()) return Napi::Value();  // Node < 20.16
  const Napi::Value wt = get_builtin.As<Napi::Function>().Call(process, {Napi::String::New(env, "node:worker_threads")});
  if (!wt.IsObject()) return Napi::Value();
  const Napi::Value mark = wt.As<Napi::Object>().Get("markAsUntransferable");
  return mark.IsFunction() ? mark : Napi::Value();
}

// The getter of ArrayBuffer.prototype.resizable, or an empty value on a runtime without resizable buffers.
Napi::Value LookUpResizable(Napi::Env env) {
  const Napi::Value ab = env.Global().Get("ArrayBuffer");
  const Napi::Value object = env.Global().Get("Object");
  if (!ab.IsFunction() || !object.IsFunction()) return Napi::Value();
  const Napi::Value proto = ab.As<Napi::Object>().Get("prototype");
  const Napi::Value gopd = object.As<Napi::Object>().Get("getOwnPropertyDescriptor");
  if (!proto.IsObject() || !gopd.IsFunction()) return Napi::Value();
  const Napi::Value desc = gopd.As<Napi::Function>().Call(object, {proto, Napi::String::New(env, "resizable")});
  if (!desc.IsObject()) return Napi::Value();
  const Napi::Value get = desc.As<Napi::Object>().Get("get");
  return get.IsFunction() ? get : Napi::Value();
}

// A JS function the lookup stored, or an empty one.
Napi::Function Stored(Napi::Env env, napi_ref ref) {
  napi_value v = nullptr;
  if (ref == nullptr || napi_get_reference_value(env, ref, &v) != napi_ok || v == nullptr) return Napi::Function();
  return Napi::Function(env, v);
}

// One array the job uses: where its elements were when the binding took its pointer.
struct Span {
  napi_value value;
  bool typed;  // a typed array (else a DataView)
  void* data;
  size_t length;
};

bool SpanOf(napi_env env, napi_value v, Span* s, napi_value* buffer) {
  bool is = false;
  if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
    napi_typedarray_type t;
    size_t off = 0;
    if (napi_get_typedarray_info(env, v, &t, &s->length, &s->data, buffer, &off) != napi_ok) return false;
    s->value = v, s->typed = true;
    return true;
  }
  if (napi_is_dataview(env, v, &is) == napi_ok && is) {
    size_t off = 0;
    if (napi_get_dataview_info(env, v, &s->length, &s->data, buffer, &off) != napi_ok) return false;
    s->value = v, s->typed = false;
    return true;
  }
  return false;
}

}  // namespace

void InitOwnership(Napi::Env env, Napi::Object) {
  EnvJobs& j = *JobsOf(env);
  if (j.ownership_ready) return;
  // A lookup that fails (a missing module, a throwing getter) leaves that function null: async calls
  // are then refused (no mark) or resizable buffers need no check (no getter, no resizable buffers).
  try {
    const Napi::Value mark = LookUpMark(env);
    if (!mark.IsEmpty()) j.mark_untransferable = StrongRef(env, mark);
  } catch (const Napi::Error&) {
  }
  try {
    const Napi::Value get = LookUpResizable(env);
    if (!get.IsEmpty()) j.resizable_getter = StrongRef(env, get);
  } catch (const Napi::Error&) {
  }
  j.ownership_ready = true;
}

void HoldForAsync(Napi::Env env, const std::vector<Napi::Value>& arrays) {
  const std::shared_ptr<EnvJobs> jobs = JobsOf(env);
  const Napi::Function mark = Stored(env, jobs->mark_untransferable);
  if (!jobs->ownership_ready)
    Throw(env, Code::Internal, "internal error: the addon's per-environment lookup (InitOwnership) did not run");
  if (mark.IsEmpty())
    Throw(env, Code::Internal,
          "async call: expected a runtime with worker_threads.markAsUntransferable (Node >= 20.16, through "
          "process.getBuiltinModule), got none; use the synchronous form");
  std::vector<Span> spans;
  std::vector<napi_value> buffers;
  std::unordered_set<void*> seen;  // one mark per buffer, however many views share it
  spans.reserve(arrays.size());
  for (const Napi::Value& v : arrays) {
    if (v.IsEmpty()) continue;
    Span s;
    napi_value ab = nullptr;
    if (!SpanOf(env, v, &s, &ab)) {
      bool is_ab = false;
      if (napi_is_arraybuffer(env, v, &is_ab) != napi_ok || !is_ab) continue;  // not an array
      ab = v;
    } else {
      if (s.length == 0) continue;  // no element is read or written
      spans.push_back(s);
    }
    bool plain = false;  // napi_is_arraybuffer is false for a SharedArrayBuffer
    if (napi_is_arraybuffer(env, ab, &plain) != napi_ok || !plain) continue;
    void* base = nullptr;
    size_t bytes = 0;
    if (napi_get_arraybuffer_info(env, ab, &base, &bytes) != napi_ok || bytes == 0) continue;
    if (seen.insert(base).second) buffers.push_back(ab);
  }
  // Refused before anything is marked: a refused call leaves no trace.
  const Napi::Function resizable = Stored(env, jobs->resizable_getter);
  if (!resizable.IsEmpty()) {
    for (napi_value ab : buffers) {
      Napi::Value r;
      try {
        r = resizable.Call(ab, {});
      } catch (const Napi::Error& e) {
        Throw(env, Code::Internal, std::string("async call: reading ArrayBuffer.prototype.resizable failed: ") + e.Message());
      }
      if (r.IsBoolean() && r.As<Napi::Boolean>().Value())
        Throw(env, Code::DType,
              "async call: expected fixed-length ArrayBuffers (the work reads and writes them in place), got a "
              "resizable one");
    }
  }
  for (napi_value ab : buffers) {
    try {
      mark.Call({ab});
    } catch (const Napi::Error& e) {
      Throw(env, Code::Internal, std::string("async call: marking a buffer untransferable failed: ") + e.Message());
    }
  }
  // JavaScript ran above (the runtime's own functions, unless a program replaced them before loading
  // this module): the arrays must still be where the binding's pointers point.
  for (const Span& s : spans) {
    Span now;
    napi_value ab = nullptr;
    if (!SpanOf(env, s.value, &now, &ab) || now.data != s.data || now.length != s.length)
      Throw(env, Code::Shape, "async call: expected its arrays to stay attached while it starts, got one detached or moved");
  }
}

// Runs in every JS environment that loads the module, before any exported function can be called.
GEAR_BINDING(InitOwnership);

}  // namespace gear::addon
