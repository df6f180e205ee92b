// The one path from a binding to a kernel, synchronous or asynchronous. A binding reads and checks its
// parameter object, builds the result object around its outputs, and hands the kernel call to Run: the
// same reader and the same body serve the sync and the async form of every op.
#pragma once
#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "gear/types.h"

namespace gear::addon {

class Params;  // args.h

// What the async jobs of one JS environment (the main thread or a worker) share with its teardown: a
// cancel flag the kernels poll, and the count of jobs whose Execute is running. The environment's
// cleanup hook sets the flag and waits for the count to reach 0, so no job touches that environment's
// memory after it is freed; a job that starts afterwards sees the flag and touches nothing.
struct EnvJobs {
  std::mutex mu;
  std::condition_variable idle;
  int64_t running = 0;
  std::atomic<int32_t> cancel{0};
  // The runtime functions the ownership rule calls (ownership.h), looked up when the module loads in
  // this environment and used only on its JS thread; null where the runtime lacks them.
  bool ownership_ready = false;
  napi_ref mark_untransferable = nullptr;
  napi_ref resizable_getter = nullptr;
};

// The jobs record of `env` (created with the environment's instance data, torn down by its cleanup hook).
std::shared_ptr<EnvJobs> JobsOf(Napi::Env env);

// Fills scalar fields of the result once the work succeeded, on the JS thread (a kernel's statistics
// struct becomes named properties). May be empty.
using Finish = std::function<void(Napi::Object result)>;

// Runs `work` on the addon thread pool, synchronously (returns `result`) or, when `async` is true, on a
// libuv worker thread (returns a Promise resolved with `result` or rejected with the kernel's error).
// `result` is built before the work starts (the output arrays the kernel fills). `p` is the call's
// parameter object: every array of the caller's that its readers handed out a pointer for (inputs, `out`
// arrays, the abort flag; Params::Arrays) is held alive for the life of an async job, and its
// ArrayBuffer is marked untransferable before the work is queued (HoldForAsync, ownership.h). Arrays
// the binding allocated for the result need no mark (the caller sees them only once the promise
// settles). `abort` is the call's abort flag (or null).
Napi::Value Run(const Params& p, bool async, std::function<Status(const ExecContext&)> work, Napi::Object result,
                const std::atomic<int32_t>* abort, Finish finish = nullptr);

}  // namespace gear::addon
