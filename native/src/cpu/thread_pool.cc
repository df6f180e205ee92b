#include "gear/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace gear {

ThreadPool::ThreadPool(int threads) { start(threads); }
ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::start(int threads) {
  threads = std::max(1, threads);
  quit_ = false;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::resize(int threads) {
  std::lock_guard<std::mutex> job(job_mu_);
  stop();
  start(threads);
}

void ThreadPool::worker_loop(int id) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int)>* fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      fn = fn_;
      ++active_;
    }
    for (;;) {
      int64_t t;
      {
        std::lock_guard<std::mutex> lk(mu_);
        // A worker that woke late may see the next job's counters: it only takes tasks of the job whose
        // function it read.
        if (fn == nullptr || generation_ != seen || next_ >= tasks_) break;
        t = next_++;
      }
      (*fn)(t, id);
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--active_ == 0) cv_done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t tasks, const std::function<void(int64_t, int)>& fn) {
  if (tasks <= 0) return;
  std::lock_guard<std::mutex> job(job_mu_);
  if (workers_.empty() || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = &fn;
    tasks_ = tasks;
    next_ = 0;
    ++generation_;
  }
  cv_work_.notify_all();
  // The calling thread works too (worker 0).
  for (;;) {
    int64_t t;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (next_ >= tasks_) break;
      t = next_++;
    }
    fn(t, 0);
  }
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [&] { return active_ == 0 && next_ >= tasks_; });
  fn_ = nullptr;
}

static int default_threads() {
  if (const char* s = std::getenv("GEAR_RL_NUM_THREADS")) {
    int n = std::atoi(s);
    if (n >= 1 && n <= 1024) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

ThreadPool& global_pool() {
  static ThreadPool* pool = new ThreadPool(default_threads());  // never destroyed: workers may outlive statics
  return *pool;
}

bool parallel_blocks(const ExecContext& ctx, int64_t n, int64_t block,
                     const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return !ctx.aborted();
  block = std::max<int64_t>(1, block);
  const int64_t tasks = (n + block - 1) / block;
  auto body = [&](int64_t t, int w) {
    if (ctx.aborted()) return;
    const int64_t b = t * block;
    fn(b, std::min(n, b + block), w);
  };
  if (ctx.pool) ctx.pool->parallel_for(tasks, body);
  else for (int64_t t = 0; t < tasks; ++t) body(t, 0);
  return !ctx.aborted();
}

}  // namespace gear
