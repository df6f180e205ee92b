#include "gear/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gear {

ThreadPool::ThreadPool(int threads, int spin_us) : spin_us_(std::max(0, spin_us)) { start(threads); }
ThreadPool::~ThreadPool() { stop(); }

static inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__) || defined(_M_ARM64)
  __asm__ __volatile__("yield");
#endif
}

template <class F>
bool ThreadPool::spin(F ready) const {
  if (spin_us_ == 0) return ready();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return ready();
  }
}

void ThreadPool::start(int threads) {
  threads = std::max(1, threads);
  quit_ = false;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

void ThreadPool::stop() {
  quit_ = true;
  { std::lock_guard<std::mutex> lk(mu_); }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::resize(int threads) {
  std::lock_guard<std::mutex> job(job_mu_);
  stop();
  start(threads);
}

// Sleeping without a lost wake-up: a sleeper raises sleepers_ and then reads generation_ (under mu_); a
// caller stores generation_ and then reads sleepers_, and if it saw a sleeper it passes through mu_
// before notifying. In the single order of these sequentially consistent operations either the sleeper
// reads the new generation, or the caller sees the sleeper and its notify finds it waiting. The same
// holds for the caller's sleep on active_ (waiting_ / active_).
void ThreadPool::worker_loop(int id) {
  uint64_t seen = 0;
  for (;;) {
    auto woken = [&] { return quit_.load() || generation_.load() != seen; };
    if (!spin(woken)) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1);
      cv_work_.wait(lk, woken);
      sleepers_.fetch_sub(1);
    }
    if (quit_.load()) return;
    // Counted before the job is read: the caller returns (and its Job goes) only once active_ is 0 after
    // it cleared job_, so a job read here stays alive until this worker is done with it.
    active_.fetch_add(1);
    const uint64_t g = generation_.load();
    Job* j = job_.load();
    seen = j != nullptr ? j->generation : g;
    if (j != nullptr) {
      for (int64_t t; (t = j->next.fetch_add(1)) < j->tasks;) (*j->fn)(t, id);
    }
    if (active_.fetch_sub(1) == 1 && waiting_.load()) {
      { std::lock_guard<std::mutex> lk(mu_); }
      cv_done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t tasks, const std::function<void(int64_t, int)>& fn) {
  if (tasks <= 0) return;
  std::lock_guard<std::mutex> one(job_mu_);
  if (workers_.empty() || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  Job job{&fn, tasks, generation_.load() + 1};
  job_.store(&job);
  generation_.store(job.generation);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lk(mu_); }
    cv_work_.notify_all();
  }
  // The calling thread works too (worker 0).
  for (int64_t t; (t = job.next.fetch_add(1)) < tasks;) fn(t, 0);
  // Every task is taken; wait for the workers still running one (or still holding the job's address).
  job_.store(nullptr);
  auto idle = [&] { return active_.load() == 0; };
  if (!spin(idle)) {
    std::unique_lock<std::mutex> lk(mu_);
    waiting_.store(true);
    cv_done_.wait(lk, idle);
    waiting_.store(false);
  }
}

static int spin_us() {
  if (const char* s = std::getenv("GEAR_RL_SPIN_US")) {
    int n = std::atoi(s);
    if (n >= 0 && n <= 1000000) return n;
  }
  return 50;
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
  static ThreadPool* pool = new ThreadPool(default_threads(), spin_us());  // never destroyed: workers may outlive statics
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
