// A persistent pool owned by the addon (libuv's 4-thread pool is shared with fs and dns).
// parallel_for hands out task indices; each task writes only its own outputs, so results never depend
// on how many threads ran or which thread ran which task.
#pragma once
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
  explicit ThreadPool(int threads);
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
  void start(int threads);
  void stop();
  void worker_loop(int id);

  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t tasks_ = 0;
  int64_t next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool quit_ = false;
};

// The process-wide pool used by the addon. Default size: the number of online CPUs, or
// GEAR_RL_NUM_THREADS when set.
ThreadPool& global_pool();

// Splits [0, n) into blocks of `block` and runs them on ctx.pool (or inline), polling ctx.abort between
// blocks. Returns false if aborted.
bool parallel_blocks(const ExecContext& ctx, int64_t n, int64_t block,
                     const std::function<void(int64_t begin, int64_t end, int worker)>& fn);

}  // namespace gear
