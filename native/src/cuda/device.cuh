// What the CUDA kernels and their host drivers share: the per-device state (streams, the stream-ordered
// memory pool, a persistent pinned arena and device arena for the small per-row arrays of a call, the
// pinned staging ring for large host arrays), the call's traffic plan, the chunk runner that streams
// host logits through the ring, and the device-side building blocks of every row pass (16-byte vector
// loads per dtype, the online softmax accumulator, fixed-order group reductions).
//
// Calls on one device run one at a time (Device::mu); within a call, kernels and small copies go on the
// compute stream, large host transfers on the copy stream, ordered by events. Every call ends with the
// compute stream synchronised, so no work of one call is pending when the next starts.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "../core/checks.h"
#include "gear/dtype_convert.h"
#include "gear/row_math.h"
#include "gear/types.h"

namespace gear {
namespace cuda {

// ---- errors ----

// ERR_NATIVE naming the CUDA error ("what: expected cudaSuccess, got cudaErrorX (text)"). Clears the
// thread's last error (a sticky one stays: the context is then unusable).
Status cuda_status(cudaError_t e, const char* what);
// For a call whose error nobody reports (cleanup, best-effort work): clears the thread's last error, so
// that the next call checking cudaGetLastError() does not report it as its own.
void quiet(cudaError_t e);

#define GEAR_CUDA_TRY(expr)                                        \
  do {                                                             \
    ::gear::Status st_ = ::gear::cuda::cuda_status((expr), #expr); \
    if (!st_.is_ok()) return st_;                                  \
  } while (0)

// ---- per-device state ----

constexpr int kThreads = 256;                           // threads per block of every row kernel
constexpr int kRingSlots = 4;                           // pinned staging slots
constexpr int64_t kRingSlotBytes = int64_t{64} << 20;   // bytes per slot
constexpr int64_t kSmallTransferBytes = int64_t{4} << 20;  // pageable transfers below this skip the ring
constexpr int64_t kPinnedPieceBytes = int64_t{256} << 20;  // pieces of a pinned transfer (two in flight)
constexpr int64_t kChunkBytes = int64_t{512} << 20;     // logits bytes per staged chunk (per input)

struct Device {
  int ordinal = -1;
  int sms = 1;              // multiprocessors
  bool pools = true;        // stream-ordered allocation supported (cudaMallocFromPoolAsync)
  cudaMemPool_t pool = nullptr;  // the library's own pool on this device (not the device's default one)
  std::mutex mu;            // one call at a time on this device
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudaEvent_t copied = nullptr;    // copy stream -> compute stream
  cudaEvent_t computed = nullptr;  // compute stream -> copy stream
  // A call's small per-row arrays: packed into `pinned`, moved in one transfer each way, to and from
  // `arena` (device memory). Both persist and grow; never used by two calls at once (mu).
  char* pinned = nullptr;
  int64_t pinned_bytes = 0;
  char* arena = nullptr;
  int64_t arena_bytes = 0;
  // Kernel time of the last call (ms, CUDA events around its kernels): recorded only once kernel_ms has
  // been asked (time_kernels; two stream operations per call otherwise saved). last_kernel_ms is -1 when
  // the last call was staged in chunks, failed, was not timed or timed nothing (every call resets it).
  cudaEvent_t kernels_begin = nullptr, kernels_end = nullptr;
  bool time_kernels = false;
  float last_kernel_ms = -1.f;
  cudaEvent_t piece_done[2] = {};  // a pinned transfer's pieces (at most two in flight)
  // The staging ring (allocated whole at the first large pageable transfer; every slot or none).
  char* ring[kRingSlots] = {};
  cudaEvent_t ring_done[kRingSlots] = {};  // the slot's last transfer finished
};

// The state of device `ordinal`, initialised on first use (not locked). ERR_DEVICE for an ordinal
// without a device.
Status device_of(int ordinal, Device** out);

// Locks device `ordinal` for one call, initialising it on first use, and makes it current on this thread;
// clears the thread's last CUDA error (one nobody reported is not this call's) and the last kernel time.
// Calls on one device wait for each other here, unbounded (a sync call blocks its thread meanwhile).
// ERR_DEVICE for an ordinal without a device.
class DeviceLock {
 public:
  DeviceLock() = default;
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  ~DeviceLock();
  Status open(int ordinal);
  Device& operator*() const { return *d_; }
  Device* operator->() const { return d_; }

 private:
  Device* d_ = nullptr;
};

// Number of usable devices; 0 with the CUDA error in *err when there is none (no driver, no GPU).
int device_count(std::string* err);

// Stream-ordered allocation on the compute stream (the caller holds the device). On exhaustion the pool's
// cached memory is released and the allocation tried once more; then ERR_OUT_OF_MEMORY names the bytes
// asked and free.
Status device_alloc(Device& d, int64_t bytes, void** out);
void device_free(Device& d, void* p);

// ---- large transfers (the staging ring) ----

// Host -> device of `bytes` on the copy stream: a pinned source goes straight to the DMA engine (pieces, two
// in flight), a pageable one through the ring (host threads copy each slot while the previous slot is on
// the bus), or below kSmallTransferBytes through the driver's own staging. The compute
// stream's later work waits for the data. `after_compute`: the transfer first waits for the work queued
// on the compute stream (the destination was just allocated or written there). `finish`: returns only
// once the source has been read in full (else the caller synchronises the copy stream before the source
// is released). Polls ctx between slots and pieces.
Status upload_bytes(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx,
                    bool after_compute = true, bool finish = true);
// Device -> host of `bytes` after the work queued so far on the compute stream, by the same paths as
// upload_bytes; returns with `dst` written.
Status download_bytes(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx);
// Whether `p` is page-locked host memory (cudaHostAlloc, or registered).
bool is_pinned(const void* p);

// ---- one call's small arrays ----

// The traffic plan of one call: per-row inputs (host arrays packed into the pinned arena, one transfer
// up), outputs (kernels write them in the device arena; one transfer down, then copied to their host
// arrays) and device-only scratch. Declare everything, commit(), launch, finish().
class Call {
 public:
  explicit Call(Device& d) : d_(d) {}
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // Each returns a slot; the device pointer is `ptr<T>(slot)` once committed. A null host array gives a
  // slot whose pointer is null.
  int input(const void* host, int64_t bytes);
  int output(void* host, int64_t bytes);
  int scratch(int64_t bytes);
  // Sizes the arenas, packs the inputs, queues the upward transfer and zeroes the outputs.
  Status commit();
  template <typename T>
  T* ptr(int slot) const {
    return slot < 0 ? nullptr : reinterpret_cast<T*>(d_.arena + slots_[slot].offset);
  }
  // Queues the downward transfer, waits for the compute stream and copies the outputs to their arrays.
  Status finish();
  Device& device() const { return d_; }

 private:
  struct Slot {
    const void* in = nullptr;
    void* out = nullptr;
    int64_t size = 0;    // the host array's bytes
    int64_t bytes = 0;   // rounded up to 256
    int64_t offset = 0;  // in the device arena (and in the pinned arena for inputs and outputs)
    int kind = 0;        // 0 input, 1 output, 2 scratch
  };
  int add(int kind, const void* in, void* out, int64_t bytes);
  Device& d_;
  std::vector<Slot> slots_;
  int64_t in_bytes_ = 0, out_bytes_ = 0, scratch_bytes_ = 0;
};

// ---- streaming host logits through the device ----

// A call's logits inputs (1 or 2 views: student and teacher) and optional rows x vocab float32 output.
struct RowIO {
  const LogitsView* in[2] = {nullptr, nullptr};
  int inputs = 1;
  float* out = nullptr;       // rows x vocab, or null
  bool out_on_device = false;
};

// Rows per chunk of for_each_chunk for `io` (every row when nothing is staged).
int64_t chunk_rows(const RowIO& io);

// Runs fn(r0, n, views, out) over rows [0, rows): inputs and output already on the device in one piece;
// otherwise in chunks of rows (a multiple of 8, so chunk starts keep 16-byte alignment) through device
// buffers, host inputs uploaded and a host output downloaded by the ring. `fn` queues kernels on the
// compute stream for rows [r0, r0 + n) of device views (row 0 of a view is row r0) and a device output.
Status for_each_chunk(Call& call, const RowIO& io, const ExecContext& ctx,
                      const std::function<Status(int64_t r0, int64_t n, const LogitsView* v, float* out)>& fn);

// The first row r in [0, rows) with flags[r] != 0, or -1.
int64_t first_flagged(const int32_t* flags, int64_t rows);
// The ERR_NON_FINITE message of row r of `l` (host or device memory: a device row is copied first).
Status bad_row(const LogitsView& l, const char* what, int64_t r);
// bad_pair_at (core/checks.h) for row r of a student/teacher pair, on the device or the host.
Status bad_pair(const LogitsView& s, const LogitsView& t, int64_t r);

// ---- launch shape of a row pass ----

// Rows are split into `parts` contiguous pieces (long rows, few rows: enough blocks for every SM), each
// piece handled by a group of G threads: a warp for short rows (8 row pieces per block), a whole block
// for long ones.
struct RowGrid {
  int group = kThreads;  // G: 32 or kThreads
  int64_t parts = 1;
  int64_t items = 0;     // rows * parts
  unsigned blocks = 0;
};
RowGrid row_grid(const Device& d, int64_t rows, int64_t vocab);
// The grid `g` (its parts fixed for the whole call) over a chunk of n rows.
inline RowGrid sub_grid(const RowGrid& g, int64_t n) {
  RowGrid s = g;
  s.items = n * g.parts;
  const int64_t per_block = kThreads / g.group;
  s.blocks = static_cast<unsigned>((s.items + per_block - 1) / per_block);
  return s;
}
// A per-row array from row r0 (null stays null).
template <typename T>
T* at(T* p, int64_t r0) {
  return p == nullptr ? nullptr : p + r0;
}

// Launches KERNEL<D, G> over the grid for the runtime dtype and group size.
#define GEAR_LAUNCH_ROWS(grid, dtype, stream, KERNEL, ...)                                                     \
  do {                                                                                                         \
    const ::gear::cuda::RowGrid& g_ = (grid);                                                                  \
    if (g_.blocks == 0) break;                                                                                 \
    if (g_.group == 32) {                                                                                      \
      switch (dtype) {                                                                                         \
        case DType::F32: KERNEL<DType::F32, 32><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break;       \
        case DType::BF16: KERNEL<DType::BF16, 32><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break;     \
        case DType::F16: KERNEL<DType::F16, 32><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break;       \
      }                                                                                                        \
    } else {                                                                                                   \
      switch (dtype) {                                                                                         \
        case DType::F32: KERNEL<DType::F32, kThreads><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break; \
        case DType::BF16: KERNEL<DType::BF16, kThreads><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break; \
        case DType::F16: KERNEL<DType::F16, kThreads><<<g_.blocks, kThreads, 0, stream>>>(__VA_ARGS__); break; \
      }                                                                                                        \
    }                                                                                                          \
  } while (0)

// Launches KERNEL<D> with one thread per row for the runtime dtype.
#define GEAR_LAUNCH_PER_ROW(rows, dtype, stream, KERNEL, ...)                                        \
  do {                                                                                               \
    const unsigned b_ = static_cast<unsigned>(((rows) + kThreads - 1) / kThreads);                   \
    if (b_ == 0) break;                                                                              \
    switch (dtype) {                                                                                 \
      case DType::F32: KERNEL<DType::F32><<<b_, kThreads, 0, stream>>>(__VA_ARGS__); break;          \
      case DType::BF16: KERNEL<DType::BF16><<<b_, kThreads, 0, stream>>>(__VA_ARGS__); break;        \
      case DType::F16: KERNEL<DType::F16><<<b_, kThreads, 0, stream>>>(__VA_ARGS__); break;          \
    }                                                                                                \
  } while (0)

// ================================ kernel building blocks ================================
// __host__ __device__ where they can be: a host program (test/cuda/kernel_sim.cu) runs each thread's share
// of a pass, in the kernels' own code, to check the partitioning and the math without a GPU.

#if defined(__CUDACC__)

#define GEAR_HDI __host__ __device__ __forceinline__

#if !defined(__CUDA_ARCH__)
// The host simulation's stand-in for an approximate hardware instruction: the exact value moved by the
// instruction's documented largest error, up or down as a hash of the input's bits says (deterministic,
// and both signs occur), so that the kernels' error bounds are checked against the worst the device can do.
inline float worst_case(float exact, double err, float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u ^ (u >> 16)) * 0x45d9f3bu;
  u ^= u >> 16;
  return static_cast<float>(static_cast<double>(exact) + ((u & 1u) ? err : -err));
}
inline bool subnormal(float x) { return x != 0.f && fabsf(x) < 1.17549435e-38f; }
#endif

// 2^x: the hardware approximation on the device, MUFU.EX2 (relative error at most 2 ulp, 2^-22, exact at
// integers: 2^0 = 1, so a one-hot row has entropy 0; results below 2^-126 flush to 0, as the sums need).
// The host simulation gives the exact value moved by 2^-22 either way (integers exact), flushed alike.
GEAR_HDI float ex2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  if (subnormal(x)) x = 0.f;
  const float e = exp2f(x);
  if (!(e >= 1.17549435e-38f) || e == INFINITY) return e != e ? e : e == INFINITY ? e : 0.f;
  if (x == floorf(x)) return e;
  const float y = worst_case(e, ldexp(static_cast<double>(e), -22), x);
  return y < 1.17549435e-38f ? 0.f : y;
#endif
}

// log2(x): the hardware approximation on the device, MUFU.LG2 (absolute error at most 2^-22 for x in
// [0.5, 2], at most 2 ulp of the result elsewhere; a subnormal x flushes to 0, giving -Infinity). The host
// simulation moves the exact value by that much either way.
GEAR_HDI float lg2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  if (subnormal(x)) x = 0.f;
  const float e = log2f(x);
  if (!(fabsf(e) < INFINITY)) return e;
  const double err = x >= 0.5f && x <= 2.f ? ldexp(1.0, -22) : ldexp(static_cast<double>(fabsf(e)), -22);
  return worst_case(e, err, x);
#endif
}

// Elements per 16-byte vector of each dtype (bf16 / fp16 travel as 16-bit words).
template <DType D>
struct Elems {
  static constexpr int kVec = D == DType::F32 ? 4 : 8;
};

GEAR_HDI float bf16_bits(uint32_t h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(h << 16);
#else
  const uint32_t u = h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}
GEAR_HDI float f16_bits(unsigned short h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return kern::f16_to_f32(h);
#endif
}

template <DType D>
GEAR_HDI float load1(const void* z, int64_t i) {
  if constexpr (D == DType::F32) {
#if defined(__CUDA_ARCH__)
    return __ldg(static_cast<const float*>(z) + i);
#else
    return static_cast<const float*>(z)[i];
#endif
  } else {
#if defined(__CUDA_ARCH__)
    const unsigned short h = __ldg(static_cast<const unsigned short*>(z) + i);
#else
    const unsigned short h = static_cast<const unsigned short*>(z)[i];
#endif
    if constexpr (D == DType::BF16) return bf16_bits(h);
    else return f16_bits(h);
  }
}

// load1 for a buffer the kernel may write (a backward in place): a plain coherent load, not __ldg's
// read-only path.
template <DType D>
GEAR_HDI float load1_rw(const void* z, int64_t i) {
  if constexpr (D == DType::F32) {
    return static_cast<const float*>(z)[i];
  } else {
    const unsigned short h = static_cast<const unsigned short*>(z)[i];
    if constexpr (D == DType::BF16) return bf16_bits(h);
    else return f16_bits(h);
  }
}

// Checks a vector access's 16-byte alignment in the host simulation (the device would fault).
GEAR_HDI void check_aligned(const void* p) {
#if !defined(__CUDA_ARCH__)
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    fprintf(stderr, "misaligned 16-byte access at %p\n", p);
    abort();
  }
#endif
}

// The 16-byte vector starting at element i (a multiple of kVec from a 16-byte aligned base).
template <DType D>
GEAR_HDI void load_vec(const void* z, int64_t i, float (&x)[Elems<D>::kVec]) {
  if constexpr (D == DType::F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(z) + i);
    check_aligned(p);
#if defined(__CUDA_ARCH__)
    const float4 v = __ldcs(p);
#else
    const float4 v = *p;
#endif
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  } else {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(z) + i);
    check_aligned(p);
#if defined(__CUDA_ARCH__)
    const uint4 v = __ldcs(p);
#else
    const uint4 v = *p;
#endif
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (D == DType::BF16) {
        x[2 * k] = bf16_bits(w[k] & 0xffffu);
        x[2 * k + 1] = bf16_bits(w[k] >> 16);
      } else {
        x[2 * k] = f16_bits(static_cast<unsigned short>(w[k] & 0xffffu));
        x[2 * k + 1] = f16_bits(static_cast<unsigned short>(w[k] >> 16));
      }
    }
  }
}

// Stores 4 float32 values at a 16-byte aligned address (streaming: the output is not read again soon).
GEAR_HDI void store4(float* p, float a, float b, float c, float d) {
  check_aligned(p);
#if defined(__CUDA_ARCH__)
  __stcs(reinterpret_cast<float4*>(p), make_float4(a, b, c, d));
#else
  p[0] = a, p[1] = b, p[2] = c, p[3] = d;
#endif
}

// The element layout of row `row` of a rows x vocab view whose base is 16-byte aligned: `head` scalars up
// to the first aligned element, whole vectors from element `vec0`, then `tail` scalars. Part p of `parts`
// covers vectors [vb, ve); part 0 also takes the head, the last part the tail.
struct RowSpan {
  int64_t e0;    // first element of the row
  int64_t vec0;  // first element of the first whole vector
  int64_t vb, ve;
  int head, tail;
  bool first, last;
};

template <int kVec>
GEAR_HDI RowSpan row_span(int64_t row, int64_t vocab, int64_t part, int64_t parts) {
  RowSpan s;
  s.e0 = row * vocab;
  const int64_t mis = s.e0 % kVec;
  int64_t head = mis == 0 ? 0 : kVec - mis;
  if (head > vocab) head = vocab;
  const int64_t nvec = (vocab - head) / kVec;
  s.head = static_cast<int>(head);
  s.tail = static_cast<int>(vocab - head - nvec * kVec);
  s.vec0 = s.e0 + head;
  const int64_t per = (nvec + parts - 1) / parts;
  s.vb = part * per < nvec ? part * per : nvec;
  s.ve = s.vb + per < nvec ? s.vb + per : nvec;
  s.first = part == 0;
  s.last = part == parts - 1;
  return s;
}

// One thread's share of item (row, part) of z copied to float32 `out` unchanged: what a backward writes for
// a row it found bad (in place, the row keeps its logits, so the error can name the bad entry; the
// output is NaN-filled after the error either way).
template <DType D>
GEAR_HDI void copy_thread(const void* z, int64_t vocab, int64_t row, int64_t part, int64_t parts, int lane, int G,
                          float* out) {
  constexpr int V = Elems<D>::kVec;
  const RowSpan sp = row_span<V>(row, vocab, part, parts);
  if (sp.first && lane < sp.head) out[sp.e0 + lane] = load1_rw<D>(z, sp.e0 + lane);
  for (int64_t j = sp.vb + lane; j < sp.ve; j += G) {
    float x[V];
    load_vec<D>(z, sp.vec0 + j * V, x);
#pragma unroll
    for (int k = 0; k < V / 4; ++k) store4(out + sp.vec0 + j * V + 4 * k, x[4 * k], x[4 * k + 1], x[4 * k + 2], x[4 * k + 3]);
  }
  if (sp.last && lane < sp.tail) {
    const int64_t e = sp.vec0 + sp.ve * V + lane;
    out[e] = load1_rw<D>(z, e);
  }
}

// A thread's online softmax statistics of the logits it has seen. Float sums s, a (a in log2 units) over
// at most kFold vectors, relative to the running pivot m (the largest raw logit so far), are folded into
// float64 sums S, A (nats) relative to the pivot M of the last fold. A pivot move in the loop rescales only
// the float sums, by ex2 (a few instructions, no float64: moves are frequent early in a row, and a warp
// takes the branch when any lane does); the fold rescales the float64 sums exactly, once, when the pivot
// moved since the last fold. Error: an entry's weight carries its own ex2's (2^-22) and those of at most
// kFold - 1 moves within its fold (each 2^-22 + |r| ln 2 2^-24 for a move of r log2 units, whose weight
// is 2^r): within 1.3e-6 relative, inside tokenStatsPartial's 2e-6 (the simulation checks it with ex2 at
// its worst).
struct SoftmaxAcc {
  static constexpr int kFold = 4;
  float m = -INFINITY;      // running pivot (of s, a)
  float s = 0.f, a = 0.f;
  float M = -INFINITY;      // pivot of S, A
  double S = 0.0, A = 0.0;  // folded: sum e, sum e * (z - M) / T (nats)
  int pending = 0;
  bool nan_seen = false;    // a NaN in a vector skipped while every logit so far was -inf

  __host__ __device__ void fold(double inv_t) {
    if (m > M) {  // rescale S, A exactly to the current pivot (rowmath::stats_rescale)
      rowmath::SoftmaxStats st{M, S, A};
      rowmath::stats_rescale(st, m, inv_t);
      S = st.s, A = st.a;
      M = m;
    }
    S += s;
    A += static_cast<double>(a) * rowmath::kLn2;
    s = a = 0.f;
    pending = 0;
  }
  GEAR_HDI void move_pivot(float new_m, float c2) {
    if (s > 0.f) {  // r = (m - new_m) k < 0 (clamped: past -126 the old sums weigh 0)
      const float r = fmaxf((m - new_m) * c2, -256.f);
      const float f = ex2(r);
      a = f * fmaf(r, s, a);
      s *= f;
    }
    m = new_m;
  }
  template <int N>
  GEAR_HDI void add(const float (&x)[N], float c2, double inv_t) {
    float vm = x[0];
#pragma unroll
    for (int k = 1; k < N; ++k) vm = fmaxf(vm, x[k]);
    if (vm > m) move_pivot(vm, c2);
    if (m == -INFINITY) {  // every logit so far masked: only a NaN can matter here
#pragma unroll
      for (int k = 0; k < N; ++k) nan_seen |= x[k] != x[k];
      return;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float d = (x[k] - m) * c2;  // log2 units; -inf for a masked entry, NaN for a NaN one
      const float e = ex2(d);
      s += e;
      a = fmaf(e, fmaxf(d, -256.f), a);  // a masked entry adds 0 * -256, not 0 * -inf
    }
    if (++pending == kFold) fold(inv_t);
  }
  GEAR_HDI void add1(float x, float c2, double inv_t) {
    const float v[1] = {x};
    add<1>(v, c2, inv_t);
  }
  // Finishes: the statistics in float64 and whether a NaN or +Infinity was seen.
  __host__ __device__ rowmath::SoftmaxStats stats(double inv_t, int* bad) {
    fold(inv_t);
    *bad = nan_seen || m == INFINITY || S != S || A != A;
    return rowmath::SoftmaxStats{static_cast<double>(M), S, A};
  }
};

// A row piece's softmax statistics, the unit every row pass writes per (row, part) and a per-row kernel
// merges in part order.
struct PartStats {
  double m, s, a;
  int32_t bad;
  int32_t pad;
};

GEAR_HDI PartStats part_merge(const PartStats& x, const PartStats& y, double inv_t) {
  const rowmath::SoftmaxStats r = rowmath::stats_merge(rowmath::SoftmaxStats{x.m, x.s, x.a},
                                                       rowmath::SoftmaxStats{y.m, y.s, y.a}, inv_t);
  return PartStats{r.m, r.s, r.a, x.bad | y.bad, 0};
}

// Fixed-order reduction of a group's values to its lane 0 (other lanes get partial results): warp
// shuffles down, then (G = block) the warps' results through shared memory. `merge` must be a pure
// function of its arguments; T is a trivially copyable struct of 4-byte multiples.
template <typename T>
__device__ __forceinline__ T shfl_down(const T& v, int offset) {
  static_assert(sizeof(T) % 4 == 0, "4-byte fields");
  T out;
  const int* src = reinterpret_cast<const int*>(&v);
  int* dst = reinterpret_cast<int*>(&out);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 4); ++i) dst[i] = __shfl_down_sync(0xffffffffu, src[i], offset);
  return out;
}

template <int G, typename T, typename Merge>
__device__ __forceinline__ T group_reduce(T v, Merge merge) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = merge(v, shfl_down(v, o));
  if constexpr (G > 32) {
    __shared__ T warp_vals[G / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
      T w = lane < G / 32 ? warp_vals[lane] : warp_vals[0];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const T other = shfl_down(w, o);
        if (lane + o < G / 32) w = merge(w, other);
      }
      v = w;
    }
    __syncthreads();  // warp_vals is reused by the next reduction of the block
  }
  return v;
}

// The largest of a group's values, in every lane (max is exact: the order does not matter).
template <int G>
__device__ __forceinline__ double group_max(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (G > 32) {
    __shared__ double warp_max[G / 32];
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = v;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < G / 32; ++w) v = fmax(v, warp_max[w]);
    __syncthreads();  // warp_max is reused by the next reduction of the block
  }
  return v;
}

// A lane's statistics moved to the group's pivot M (>= its own), ready to be added.
GEAR_HDI PartStats part_at(const PartStats& x, double M, double inv_t) {
  rowmath::SoftmaxStats st{x.m, x.s, x.a};
  rowmath::stats_rescale(st, M, inv_t);
  return PartStats{M, st.s, st.a, x.bad, 0};
}
GEAR_HDI PartStats part_add(const PartStats& x, const PartStats& y) { return PartStats{x.m, x.s + y.s, x.a + y.a, x.bad | y.bad, 0}; }

// A group's statistics at its lane 0: every lane rescaled once to the group's largest pivot, then added
// in group_reduce's fixed order (one exp per lane, instead of two per merge at every level).
template <int G>
__device__ __forceinline__ PartStats group_stats(const PartStats& x, double inv_t) {
  const double M = group_max<G>(x.m);
  return group_reduce<G>(part_at(x, M, inv_t), [](const PartStats& p, const PartStats& q) { return part_add(p, q); });
}

#endif  // __CUDACC__

}  // namespace cuda
}  // namespace gear
