// The thread pool on its own (native/src/cpu/thread_pool.cc): every task of every job runs exactly once
// and the job is complete when parallel_for returns, across jobs of every size back to back (workers
// awake), after idle gaps (workers asleep), from several calling threads at once, through resizes, and
// with spinning off. Built and run by test/ops/thread_pool.test.ts under ThreadSanitizer and under
// AddressSanitizer (a worker touching a finished job's stack frame fails there).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gear/thread_pool.h"
#include "check.h"

using gear::ThreadPool;

// One job: each task adds its index + 1 to its own slot and records the worker id; after return, every
// slot must hold exactly index + 1 (not 0: a task skipped; not 2(i+1): a task run twice).
static void one_job(ThreadPool& pool, int64_t tasks, uint32_t seed) {
  std::vector<int64_t> slot(static_cast<size_t>(tasks), 0);
  std::atomic<int> bad_worker{0};
  // (a resize from another thread may change the count between a read of threads() and the job)
  const int threads = 8;
  pool.parallel_for(tasks, [&](int64_t t, int w) {
    if (w < 0 || w >= threads) bad_worker.fetch_add(1);
    // uneven work, so tasks finish out of order
    volatile uint32_t x = seed + static_cast<uint32_t>(t);
    for (uint32_t i = 0; i < (x % 7) * 50; ++i) x = x * 1664525u + 1013904223u;
    slot[static_cast<size_t>(t)] += t + 1;
  });
  CHECK(bad_worker.load() == 0);
  for (int64_t t = 0; t < tasks; ++t) {
    if (slot[static_cast<size_t>(t)] != t + 1) {
      CHECK(slot[static_cast<size_t>(t)] == t + 1);
      return;
    }
  }
}

static void stress(ThreadPool& pool, int jobs, uint32_t seed) {
  for (int i = 0; i < jobs; ++i) {
    const uint32_t r = seed * 2654435761u + static_cast<uint32_t>(i) * 40503u;
    one_job(pool, 1 + static_cast<int64_t>(r % 97), r);
    // now and then an idle gap longer than the spin, so the next job wakes sleeping workers
    if (r % 61 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
}

int main() {
  for (int spin : {50, 0}) {
    for (int threads : {1, 2, 4, 8}) {
      ThreadPool pool(threads, spin);
      CHECK(pool.threads() == threads);
      stress(pool, 400, static_cast<uint32_t>(threads * 31 + spin));
      one_job(pool, 0, 1);
      one_job(pool, 100000, 7);
    }
    // several callers at once: their jobs are serialised, each still complete
    ThreadPool pool(4, spin);
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) callers.emplace_back([&pool, c] { stress(pool, 300, 1000u + static_cast<uint32_t>(c)); });
    // resizes while the callers run (each waits for the running job)
    for (int k : {2, 6, 3, 1, 4}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      pool.resize(k);
    }
    for (auto& t : callers) t.join();
    CHECK(pool.threads() == 4);
    // the nested case the addon never uses but must not deadlock on: a job from inside a task of a
    // different pool
    ThreadPool inner(2, spin);
    pool.parallel_for(8, [&](int64_t, int) { one_job(inner, 5, 3); });
  }
  std::printf("ok: %d failures\n", failures.load());
  return failures.load() == 0 ? 0 : 1;
}
