#include "invoke.h"

#include <exception>
#include <string>
#include <utility>

#include "args.h"
#include "gear/thread_pool.h"
#include "ownership.h"

namespace gear::addon {

namespace {
class Job : public Napi::AsyncWorker {
 public:
  Job(Napi::Env env, const std::vector<Napi::Value>& keep, std::function<Status(const ExecContext&)> work,
      Napi::Object result, const std::atomic<int32_t>* abort, Finish finish)
      : Napi::AsyncWorker(env, "gear-rl"), deferred_(Napi::Promise::Deferred::New(env)),
        work_(std::move(work)), finish_(std::move(finish)), abort_(abort), jobs_(JobsOf(env)) {
    result_ = Napi::Persistent(result);
    keep_.reserve(keep.size());
    for (const auto& v : keep) keep_.push_back(Napi::Persistent(v.As<Napi::Object>()));
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    {
      std::lock_guard<std::mutex> lock(jobs_->mu);
      if (jobs_->cancel.load() != 0) {  // the environment is gone or going: touch none of its memory
        status_ = error(Code::Aborted, "aborted: the JavaScript environment that started the call was torn down");
        return;
      }
      ++jobs_->running;
    }
    ExecContext ctx{&global_pool(), abort_, &jobs_->cancel};
    try {
      status_ = work_(ctx);
    } catch (const std::exception& e) {
      status_ = error(Code::Internal, std::string("internal error: ") + e.what());
    }
    if (status_.is_ok() && ctx.aborted()) status_ = error(Code::Aborted, "aborted: the AbortSignal fired");
    std::lock_guard<std::mutex> lock(jobs_->mu);
    if (--jobs_->running == 0) jobs_->idle.notify_all();
  }
  // Settling the promise can fail while the environment is shutting down (JS can no longer run): that
  // is not an error of the call, and an exception escaping here would terminate the whole process.
  void OnOK() override {
    try {
      Napi::HandleScope scope(Env());
      if (!status_.is_ok()) {
        deferred_.Reject(MakeError(Env(), status_.code, status_.message).Value());
        return;
      }
      Napi::Object result = result_.Value();
      if (finish_) finish_(result);
      deferred_.Resolve(result);
    } catch (const Napi::Error& e) {
      try {
        deferred_.Reject(e.Value());
      } catch (const Napi::Error&) {
      }
    }
  }
  void OnError(const Napi::Error& e) override {
    try {
      deferred_.Reject(e.Value());
    } catch (const Napi::Error&) {
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<Status(const ExecContext&)> work_;
  Finish finish_;
  Napi::ObjectReference result_;
  const std::atomic<int32_t>* abort_;
  std::shared_ptr<EnvJobs> jobs_;
  std::vector<Napi::ObjectReference> keep_;
  Status status_;
};
}  // namespace

Napi::Value Run(const Params& p, bool async, std::function<Status(const ExecContext&)> work, Napi::Object result,
                const std::atomic<int32_t>* abort, Finish finish) {
  const Napi::Env env = p.Env();
  p.CheckWrites();
  if (!async) {
    ExecContext ctx{&global_pool(), abort};
    Check(env, work(ctx));
    if (finish) finish(result);
    return result;
  }
  const std::vector<Napi::Value>& keep = p.Arrays();
  HoldForAsync(env, keep);  // throws (nothing queued) when a buffer cannot be held
  auto* job = new Job(env, keep, std::move(work), result, abort, std::move(finish));
  Napi::Promise promise = job->Promise();
  job->Queue();
  return promise;
}

}  // namespace gear::addon
