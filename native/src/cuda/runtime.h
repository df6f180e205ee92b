// The CUDA module's device runtime, host side: the per-device state (streams, the stream-ordered memory
// pool, a persistent page-locked arena and device arena for the small per-row arrays of a call, the
// page-locked staging ring for large host arrays), device memory, and the transfers between host and
// device. Plain C++ over the CUDA runtime API (no kernels): runtime.cc, transfers.cc.
//
// Calls on one device run one at a time (Device::mu); within a call, kernels and small copies go on the
// compute stream, large host transfers on the copy stream, ordered by events. Every call ends with the
// compute stream synchronised, so no work of one call is pending when the next starts.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <string>

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
constexpr int64_t kRingPiece = int64_t{1} << 20;        // a thread's share of filling a slot, at a time
constexpr int64_t kSmallTransferBytes = int64_t{4} << 20;  // pageable transfers below this skip the ring
constexpr int64_t kPinnedPieceBytes = int64_t{256} << 20;  // pieces of a pinned transfer (two in flight)
constexpr int64_t kChunkBytes = int64_t{512} << 20;     // logits bytes per staged chunk (per input)

struct Device {
  int ordinal = -1;
  int sms = 1;              // multiprocessors
  bool pools = true;        // stream-ordered allocation supported (cudaMallocFromPoolAsync)
  bool unified = false;     // unified addressing: page-locked memory is at the same address on the device
  cudaMemPool_t pool = nullptr;  // the library's own pool on this device (not the device's default one)
  std::mutex mu;            // one call at a time on this device
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudaEvent_t copied = nullptr;    // copy stream -> compute stream
  cudaEvent_t computed = nullptr;  // compute stream -> copy stream
  // A call's small per-row arrays: packed into `pinned`, moved in one transfer each way, to and from
  // `arena` (device memory); or, for a small call, read and written by the kernels in `pinned` itself
  // through its device address `pinned_dev` (null where the platform cannot map it). Both persist and
  // grow; never used by two calls at once (mu).
  char* pinned = nullptr;
  char* pinned_dev = nullptr;
  int64_t pinned_bytes = 0;
  char* arena = nullptr;
  int64_t arena_bytes = 0;
  // Per-row counters of the row kernels (the last block of a row's parts finishes the row): zero between
  // kernels (each kernel leaves them as it found them), grown with the rows of a call.
  int32_t* counters = nullptr;
  int64_t counter_rows = 0;
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

// Stream-ordered allocation on the compute stream (the caller holds the device). On exhaustion the pool's
// cached memory is released and the allocation tried once more; then ERR_OUT_OF_MEMORY names the bytes
// asked and free.
Status device_alloc(Device& d, int64_t bytes, void** out);
void device_free(Device& d, void* p);
// Page-locked host memory, portable (usable with every device; kernels reach it at the same address, by
// unified addressing). Running out is ERR_OUT_OF_MEMORY naming the bytes asked (for `what`) and the host
// memory available, any other failure ERR_NATIVE.
Status host_alloc(int64_t bytes, void** out, const char* what);
// The first device this process works on (its context exists), or -1.
int first_device_in_use();

// ---- transfers (transfers.cc) ----

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
// Frees the staging ring of `d` (nothing may be queued that uses it).
void release_ring(Device& d);
// memcpy into staging memory (see transfers.cc): non-temporal stores where the CPU has them, fenced.
void copy_streaming(void* dst, const void* src, int64_t bytes);

}  // namespace cuda
}  // namespace gear
