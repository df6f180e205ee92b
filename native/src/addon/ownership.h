// The memory-ownership rule of async calls (docs/ownership.md). An async job reads and writes the
// caller's arrays in place on a worker thread after the call has returned to JavaScript. A transfer of
// one of their ArrayBuffers (structuredClone or postMessage with a transfer list) would move the memory
// away and, after a GC, free it under the job. Before the work is queued, every ArrayBuffer behind the
// job's arrays is therefore marked untransferable with the runtime's own
// worker_threads.markAsUntransferable: from then on a transfer copies it (Node 20) or throws a
// DataCloneError (Node >= 21), and the caller's buffer stays attached. The mark is permanent.
#pragma once
#include <napi.h>

#include <vector>

namespace gear::addon {

// Looks up, once per JS environment at module load (before any caller's argument can run a getter),
// the runtime functions HoldForAsync calls: worker_threads.markAsUntransferable (through
// process.getBuiltinModule, Node >= 20.16) and ArrayBuffer.prototype's `resizable` getter.
void InitOwnership(Napi::Env env, Napi::Object exports);

// For an async call, before its work is queued: refuses (ERR_DTYPE) a resizable ArrayBuffer behind any
// of `arrays` (it could shrink under the work), marks every other ArrayBuffer behind them
// untransferable, then checks that no array was detached or moved while that ran (ERR_SHAPE).
// SharedArrayBuffers are left alone (they are never detached; a growable one only grows), and so are
// values that are not typed arrays, DataViews or ArrayBuffers (lists, plain objects, undefined).
// ERR_NATIVE when the runtime lacks markAsUntransferable: async calls are refused there.
void HoldForAsync(Napi::Env env, const std::vector<Napi::Value>& arrays);

}  // namespace gear::addon
