// Memory bandwidth probes (see gear/bandwidth.h). Plain SSE2 loads/stores are enough to saturate DRAM
// and keep the probe on the baseline ISA, so the floor does not depend on the dispatch choice.
#include "gear/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#ifdef _WIN32
#include <malloc.h>  // _aligned_malloc
#endif
// MSVC does not define __SSE2__; SSE2 is part of x86-64 there too.
#if defined(__SSE2__) || defined(_M_X64)
#define GEAR_BW_SSE2 1
#include <emmintrin.h>
#endif

namespace gear {

namespace {

constexpr int64_t kLine = 64;
// Per-thread chunks are multiples of this, so both halves of a two-stream chunk stay line aligned.
constexpr int64_t kChunkAlign = 2 * kLine;

struct AlignedBuffer {
  void* p = nullptr;
  explicit AlignedBuffer(int64_t bytes) {
#ifdef _WIN32
    p = _aligned_malloc(static_cast<size_t>(bytes), 4096);  // the Windows CRTs have no posix_memalign
#else
    if (posix_memalign(&p, 4096, static_cast<size_t>(bytes)) != 0) p = nullptr;
#endif
  }
#ifdef _WIN32
  ~AlignedBuffer() { _aligned_free(p); }
#else
  ~AlignedBuffer() { std::free(p); }
#endif
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

// Folded into a global so the compiler cannot drop the loads.
std::atomic<float> g_sink{0.f};

float read1(const float* a, int64_t n) {
#if defined(GEAR_BW_SSE2)
  __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i < n; i += 16) {
    s0 = _mm_add_ps(s0, _mm_load_ps(a + i));
    s1 = _mm_add_ps(s1, _mm_load_ps(a + i + 4));
    s2 = _mm_add_ps(s2, _mm_load_ps(a + i + 8));
    s3 = _mm_add_ps(s3, _mm_load_ps(a + i + 12));
  }
  float r[4];
  _mm_storeu_ps(r, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
  return r[0] + r[1] + r[2] + r[3];
#else
  float s = 0.f;
  for (int64_t i = 0; i < n; i += 16) s += a[i];  // one load per line is enough to pull it in
  return s;
#endif
}

// Two independent sequential streams (the two halves of the chunk), interleaved line by line.
float read2(const float* a, const float* b, int64_t n) {
#if defined(GEAR_BW_SSE2)
  __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i < n; i += 16) {
    s0 = _mm_add_ps(s0, _mm_add_ps(_mm_load_ps(a + i), _mm_load_ps(a + i + 4)));
    s1 = _mm_add_ps(s1, _mm_add_ps(_mm_load_ps(a + i + 8), _mm_load_ps(a + i + 12)));
    s2 = _mm_add_ps(s2, _mm_add_ps(_mm_load_ps(b + i), _mm_load_ps(b + i + 4)));
    s3 = _mm_add_ps(s3, _mm_add_ps(_mm_load_ps(b + i + 8), _mm_load_ps(b + i + 12)));
  }
  float r[4];
  _mm_storeu_ps(r, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
  return r[0] + r[1] + r[2] + r[3];
#else
  float s = 0.f;
  for (int64_t i = 0; i < n; i += 16) s += a[i] + b[i];
  return s;
#endif
}

void copy_nt(float* dst, const float* src, int64_t n) {
#if defined(GEAR_BW_SSE2)
  for (int64_t i = 0; i < n; i += 16) {
    __m128 x0 = _mm_load_ps(src + i), x1 = _mm_load_ps(src + i + 4);
    __m128 x2 = _mm_load_ps(src + i + 8), x3 = _mm_load_ps(src + i + 12);
    _mm_stream_ps(dst + i, x0);
    _mm_stream_ps(dst + i + 4, x1);
    _mm_stream_ps(dst + i + 8, x2);
    _mm_stream_ps(dst + i + 12, x3);
  }
  _mm_sfence();
#else
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
#endif
}

void copy_plain(float* dst, const float* src, int64_t n) {
#if defined(GEAR_BW_SSE2)
  for (int64_t i = 0; i < n; i += 16) {
    __m128 x0 = _mm_load_ps(src + i), x1 = _mm_load_ps(src + i + 4);
    __m128 x2 = _mm_load_ps(src + i + 8), x3 = _mm_load_ps(src + i + 12);
    _mm_store_ps(dst + i, x0);
    _mm_store_ps(dst + i + 4, x1);
    _mm_store_ps(dst + i + 8, x2);
    _mm_store_ps(dst + i + 12, x3);
  }
#else
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
#endif
}

// Runs fn(thread) on `threads` threads (the caller is thread 0) once per phase; returns each phase's
// wall time, measured from the release of all threads to the last one finishing.
class Team {
 public:
  explicit Team(int threads) : threads_(threads) {
    for (int t = 1; t < threads; ++t) workers_.emplace_back([this, t] { loop(t); });
  }
  ~Team() {
    quit_.store(true);
    gen_.fetch_add(1);
    for (auto& w : workers_) w.join();
  }
  template <typename Fn>
  double run(Fn&& fn) {
    job_ = [&fn](int t) { fn(t); };
    done_.store(0);
    auto t0 = std::chrono::steady_clock::now();
    gen_.fetch_add(1, std::memory_order_release);
    job_(0);
    done_.fetch_add(1);
    while (done_.load(std::memory_order_acquire) < threads_) std::this_thread::yield();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count();
  }

 private:
  void loop(int t) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g;
      while ((g = gen_.load(std::memory_order_acquire)) == seen) std::this_thread::yield();
      seen = g;
      if (quit_.load()) return;
      job_(t);
      done_.fetch_add(1, std::memory_order_release);
    }
  }
  int threads_;
  std::vector<std::thread> workers_;
  std::function<void(int)> job_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> quit_{false};
};

}  // namespace

Status memory_bandwidth(BandwidthMode mode, int64_t bytes, int threads, int reps, double* out_gbs) {
  const int m = static_cast<int>(mode);
  if (m < 0 || m > 3) return error(Code::Option, "mode: expected 0..3, got " + std::to_string(m));
  if (threads < 1 || threads > 1024)
    return error(Code::Option, "threads: expected an integer in [1, 1024], got " + std::to_string(threads));
  if (reps < 1 || reps > 1000)
    return error(Code::Option, "reps: expected an integer in [1, 1000], got " + std::to_string(reps));
  const int64_t chunk = (bytes / threads) / kChunkAlign * kChunkAlign;  // bytes per thread
  if (bytes > (int64_t{1} << 40) || chunk < kChunkAlign)
    return error(Code::Option, "bytes: expected at least " + std::to_string(kChunkAlign) + " per thread and at most 2^40, got " +
                                   std::to_string(bytes));
  const int64_t total = chunk * threads;
  const bool copy = mode == BandwidthMode::CopyNT || mode == BandwidthMode::CopyPlain;

  AlignedBuffer src(total);
  AlignedBuffer dst(copy ? total : 0);
  if (!src.p || (copy && !dst.p))
    return error(Code::Internal, "memoryBandwidth: expected to allocate " + std::to_string(copy ? 2 * total : total) +
                                     " bytes, got an allocation failure");
  auto* s = static_cast<float*>(src.p);
  auto* d = static_cast<float*>(dst.p);
  const int64_t per = chunk / static_cast<int64_t>(sizeof(float));  // floats per thread

  Team team(threads);
  // Each thread touches its own chunk first (page faults out of the timed region, first-touch placement).
  team.run([&](int t) {
    float* a = s + t * per;
    for (int64_t i = 0; i < per; ++i) a[i] = static_cast<float>(i & 1023) * 1e-3f;
    if (copy) std::memset(d + t * per, 0, static_cast<size_t>(chunk));
  });

  auto pass = [&](int t) {
    const float* a = s + t * per;
    switch (mode) {
      case BandwidthMode::Read1: {
        float r = read1(a, per);
        g_sink.store(g_sink.load(std::memory_order_relaxed) + r, std::memory_order_relaxed);
        break;
      }
      case BandwidthMode::Read2: {
        float r = read2(a, a + per / 2, per / 2);
        g_sink.store(g_sink.load(std::memory_order_relaxed) + r, std::memory_order_relaxed);
        break;
      }
      case BandwidthMode::CopyNT: copy_nt(d + t * per, a, per); break;
      case BandwidthMode::CopyPlain: copy_plain(d + t * per, a, per); break;
    }
  };
  team.run(pass);  // warm-up: TLB, frequency, prefetchers
  const double moved = static_cast<double>(copy ? 2 * total : total);
  for (int r = 0; r < reps; ++r) {
    double sec = team.run(pass);
    out_gbs[r] = sec > 0 ? moved / sec / 1e9 : 0.0;
  }
  return Status::ok();
}

}  // namespace gear
