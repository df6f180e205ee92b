// A persistent pool owned by the addon (libuv's 4-thread pool is shared with fs and dns).
// parallel_for hands out task indices; each task writes only its own outputs, so results never depend
// on how many threads ran or which thread ran which task.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gear/types.h"

namespace gear {

class ThreadPool {
 public:
  // `spin_us`: how long an idle worker (and a caller waiting for its workers) polls before it sleeps;
  // back-to-back small calls then find their workers awake instead of paying a futex wake each time.
  explicit ThreadPool(int threads, int spin_us = 50);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs fn(task, worker) for task in [0, tasks); blocks until all finish. worker is in [0, threads()).
  // Calls from several threads at once are serialised (one job at a time keeps every core on one job).
  void parallel_for(int64_t tasks, const std::function<void(int64_t task, int worker)>& fn);

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Changes the thread count (waits for the running job).
  void resize(int threads);

 private:
  // One parallel_for call, on its caller's stack: it returns only once no worker can still reach it.
  struct Job {
    const std::function<void(int64_t, int)>* fn;
    int64_t tasks;
    uint64_t generation;
    std::atomic<int64_t> next{0};
  };
  void start(int threads);
  void stop();
  void worker_loop(int id);
  // Polls `ready` for up to spin_us_; false if it did not become true.
  template <class F> bool spin(F ready) const;

  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;      // only to sleep and to wake sleepers without a lost wake-up
  std::condition_variable cv_work_, cv_done_;
  std::vector<std::thread> workers_;
  const int spin_us_;
  // All sequentially consistent: the sleep protocols below rely on a store-then-load order between
  // the caller and each worker (see thread_pool.cc).
  std::atomic<Job*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};    // workers that may hold the current job
  std::atomic<int> sleepers_{0};  // workers asleep on cv_work_
  std::atomic<bool> waiting_{false};  // the caller asleep on cv_done_
  std::atomic<bool> quit_{false};
};

// The process-wide pool used by the addon. Default size: the number of online CPUs, or
// GEAR_RL_NUM_THREADS when set; spin time GEAR_RL_SPIN_US (default 50, 0: sleep at once).
ThreadPool& global_pool();

// Splits [0, n) into blocks of `block` and runs them on ctx.pool (or inline), polling ctx.abort between
// blocks. Returns false if aborted.
bool parallel_blocks(const ExecContext& ctx, int64_t n, int64_t block,
                     const std::function<void(int64_t begin, int64_t end, int worker)>& fn);

}  // namespace gear
