// Transfers between host and device memory (runtime.h): page-locked sources and destinations straight to
// the DMA engine in pieces, pageable ones through the page-locked staging ring, filled (one job over the
// whole upload) and drained by the addon's thread pool while other slots are on the bus; and rl.cuda's
// upload, download and bandwidth.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#endif

#include "gear/cuda.h"
#include "gear/thread_pool.h"
#include "runtime.h"

namespace gear {
namespace cuda {

// memcpy into a staging slot: its lines are read next by the DMA engine, not by this CPU, so non-temporal
// stores (x86-64: SSE2's, always present) write them without first reading them for ownership, and the
// cache keeps the source's lines instead: a third less memory traffic than a cached copy, which the
// pageable upload is bound by (the ring is filled by the host copy while the bus drains it). The stores
// are fenced before the copy returns (the slot is handed to the DMA engine after it).
void copy_streaming(void* dst, const void* src, int64_t bytes) {
#if defined(__x86_64__) || defined(_M_X64)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const int64_t lead = std::min<int64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, static_cast<size_t>(lead));
  int64_t i = lead;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  _mm_sfence();
  std::memcpy(d + i, s + i, static_cast<size_t>(bytes - i));
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

namespace {

// The ring's slots, allocated once per device at the first large pageable transfer. Built whole or not
// at all: a failure frees the slots and events made so far, and the next transfer tries again.
Status ensure_ring(Device& d) {
  if (d.ring[0] != nullptr) return Status::ok();  // published only complete
  char* slot[kRingSlots] = {};
  cudaEvent_t done[kRingSlots] = {};
  Status st = Status::ok();
  for (int i = 0; i < kRingSlots && st.is_ok(); ++i) {
    void* p = nullptr;
    st = host_alloc(kRingSlotBytes, &p, "a slot of the staging ring for pageable transfers");
    slot[i] = static_cast<char*>(p);
    if (st.is_ok()) st = cuda_status(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  if (!st.is_ok()) {
    for (int i = 0; i < kRingSlots; ++i) {
      if (slot[i] != nullptr) quiet(cudaFreeHost(slot[i]));
      if (done[i] != nullptr) quiet(cudaEventDestroy(done[i]));
    }
    return st;
  }
  for (int i = 0; i < kRingSlots; ++i) {
    d.ring[i] = slot[i];
    d.ring_done[i] = done[i];
  }
  return Status::ok();
}

// memcpy of `bytes` on the addon's thread pool, in pieces of kRingPiece handed out in order (draining a
// staging slot into pageable memory: several cores at once).
void parallel_copy(void* dst, const void* src, int64_t bytes) {
  const int64_t pieces = (bytes + kRingPiece - 1) / kRingPiece;
  global_pool().parallel_for(pieces, [&](int64_t k, int) {
    const int64_t off = k * kRingPiece, n = std::min(kRingPiece, bytes - off);
    std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off, static_cast<size_t>(n));
  });
}

Status aborted_status(const char* what) { return error(Code::Aborted, std::string(what) + ": aborted by the AbortSignal"); }

// A transfer between page-locked host memory and the device on the copy stream, straight to the DMA
// engine, in pieces with at most two in flight: the abort is polled between pieces, so an abort waits
// for two pieces at most (a few milliseconds) while the bus stays busy.
Status pinned_transfer(Device& d, void* dst, const void* src, int64_t bytes, cudaMemcpyKind kind, const ExecContext& ctx,
                       const char* what) {
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  int64_t k = 0;
  for (int64_t off = 0; off < bytes; off += kPinnedPieceBytes, ++k) {
    cudaEvent_t done = d.piece_done[k % 2];
    if (k >= 2) GEAR_CUDA_TRY(cudaEventSynchronize(done));  // piece k - 2 has finished
    if (ctx.aborted()) {
      quiet(cudaStreamSynchronize(d.copy));
      return aborted_status(what);
    }
    GEAR_CUDA_TRY(cudaMemcpyAsync(out + off, in + off, static_cast<size_t>(std::min(kPinnedPieceBytes, bytes - off)), kind,
                                  d.copy));
    GEAR_CUDA_TRY(cudaEventRecord(done, d.copy));
  }
  return Status::ok();
}

}  // namespace

void release_ring(Device& d) {
  for (int i = 0; i < kRingSlots; ++i) {
    if (d.ring[i] != nullptr) quiet(cudaFreeHost(d.ring[i]));
    if (d.ring_done[i] != nullptr) quiet(cudaEventDestroy(d.ring_done[i]));
    d.ring[i] = nullptr;
    d.ring_done[i] = nullptr;
  }
}

bool is_pinned(const void* p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

namespace {
// Host -> device of a pageable source through the ring, on the copy stream: one job of the addon's thread
// pool over the whole transfer, in pieces of kRingPiece taken in order, so that no thread waits for the
// others at the end of a slot. Slot s holds fills s, s + kRingSlots, ... (kRingSlotBytes of the source
// each); a piece first waits until its slot's previous fill has left it (for fill f >= kRingSlots, until
// fill f - kRingSlots was handed to the DMA engine, then its event), and the thread that copies a fill's
// last piece hands the fill to the DMA engine. Each wait is on a fill whose pieces were all taken
// before, by threads that are not waiting on this one: the job cannot deadlock.
Status ring_upload(Device& d, char* out, const char* in, int64_t bytes, const ExecContext& ctx) {
  GEAR_TRY(ensure_ring(d));
  constexpr int64_t kPerFill = kRingSlotBytes / kRingPiece;
  const int64_t fills = (bytes + kRingSlotBytes - 1) / kRingSlotBytes;
  const int64_t pieces = (bytes + kRingPiece - 1) / kRingPiece;
  std::unique_ptr<std::atomic<int64_t>[]> left(new std::atomic<int64_t>[fills]);
  std::unique_ptr<std::atomic<bool>[]> issued(new std::atomic<bool>[fills]);
  for (int64_t f = 0; f < fills; ++f) {
    left[f].store(std::min(kPerFill, (bytes - f * kRingSlotBytes + kRingPiece - 1) / kRingPiece));
    issued[f].store(false);
  }
  std::atomic<bool> stop{false};
  std::mutex err_mu;
  Status err = Status::ok();
  auto fail = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(err_mu);
    if (err.is_ok()) err = st;
    stop.store(true);
  };
  global_pool().parallel_for(pieces, [&](int64_t k, int) {
    const int64_t f = k / kPerFill;
    const int slot = static_cast<int>(f % kRingSlots);
    if (f >= kRingSlots)
      while (!issued[f - kRingSlots].load(std::memory_order_acquire) && !stop.load()) std::this_thread::yield();
    if (stop.load()) return;
    if (ctx.aborted()) return fail(aborted_status("upload"));
    // the pool's threads: this device current (the slot's events and the copy stream are its)
    Status st = cuda_status(cudaSetDevice(d.ordinal), "cudaSetDevice");
    if (st.is_ok()) st = cuda_status(cudaEventSynchronize(d.ring_done[slot]), "cudaEventSynchronize");
    if (!st.is_ok()) return fail(st);
    const int64_t off = k * kRingPiece;
    copy_streaming(d.ring[slot] + (k % kPerFill) * kRingPiece, in + off, std::min(kRingPiece, bytes - off));
    if (left[f].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    const int64_t foff = f * kRingSlotBytes, n = std::min(kRingSlotBytes, bytes - foff);
    st = cuda_status(cudaMemcpyAsync(out + foff, d.ring[slot], static_cast<size_t>(n), cudaMemcpyHostToDevice, d.copy),
                     "cudaMemcpyAsync");
    if (st.is_ok()) st = cuda_status(cudaEventRecord(d.ring_done[slot], d.copy), "cudaEventRecord");
    if (!st.is_ok()) return fail(st);
    issued[f].store(true, std::memory_order_release);
  });
  return err;
}

Status upload_bytes_on(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx,
                       bool after_compute, bool finish) {
  if (bytes <= 0) return Status::ok();
  if (after_compute) {
    GEAR_CUDA_TRY(cudaEventRecord(d.computed, d.compute));
    GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, d.computed, 0));
  }
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  if (is_pinned(src)) {
    GEAR_TRY(pinned_transfer(d, dst, src, bytes, cudaMemcpyHostToDevice, ctx, "upload"));
  } else if (bytes < kSmallTransferBytes) {
    // Small: the driver stages it itself (the source is read in full when this returns); not worth
    // building the ring for.
    GEAR_CUDA_TRY(cudaMemcpyAsync(out, in, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, d.copy));
  } else {
    GEAR_TRY(ring_upload(d, out, in, bytes, ctx));
  }
  GEAR_CUDA_TRY(cudaEventRecord(d.copied, d.copy));
  GEAR_CUDA_TRY(cudaStreamWaitEvent(d.compute, d.copied, 0));
  // The source must not be read once JavaScript owns it again.
  if (finish) GEAR_CUDA_TRY(cudaStreamSynchronize(d.copy));
  return Status::ok();
}

Status download_bytes_on(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx) {
  if (bytes <= 0) return Status::ok();
  GEAR_CUDA_TRY(cudaEventRecord(d.computed, d.compute));
  GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, d.computed, 0));
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  const bool pinned = is_pinned(dst);
  if (pinned || bytes < kSmallTransferBytes) {  // straight to the DMA engine, or small: the driver's own staging
    if (pinned) GEAR_TRY(pinned_transfer(d, dst, src, bytes, cudaMemcpyDeviceToHost, ctx, "download"));
    else GEAR_CUDA_TRY(cudaMemcpyAsync(out, in, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, d.copy));
    return cuda_status(cudaStreamSynchronize(d.copy), "download");
  }
  GEAR_TRY(ensure_ring(d));
  const int64_t pieces = (bytes + kRingSlotBytes - 1) / kRingSlotBytes;
  auto issue = [&](int64_t k) -> Status {
    const int slot = static_cast<int>(k % kRingSlots);
    const int64_t off = k * kRingSlotBytes, n = std::min(kRingSlotBytes, bytes - off);
    GEAR_CUDA_TRY(cudaMemcpyAsync(d.ring[slot], in + off, static_cast<size_t>(n), cudaMemcpyDeviceToHost, d.copy));
    GEAR_CUDA_TRY(cudaEventRecord(d.ring_done[slot], d.copy));
    return Status::ok();
  };
  // Up to kRingSlots transfers in flight; the host copies slot k out while k + 1.. are on the bus.
  for (int64_t k = 0; k < std::min<int64_t>(pieces, kRingSlots); ++k) GEAR_TRY(issue(k));
  for (int64_t k = 0; k < pieces; ++k) {
    const int slot = static_cast<int>(k % kRingSlots);
    const int64_t off = k * kRingSlotBytes, n = std::min(kRingSlotBytes, bytes - off);
    GEAR_CUDA_TRY(cudaEventSynchronize(d.ring_done[slot]));
    if (ctx.aborted()) {
      quiet(cudaStreamSynchronize(d.copy));
      return aborted_status("download");
    }
    parallel_copy(out + off, d.ring[slot], n);
    if (k + kRingSlots < pieces) GEAR_TRY(issue(k + kRingSlots));
  }
  return Status::ok();
}

}  // namespace

// A transfer that fails part-way may leave pieces queued on the copy stream: they finish before this
// returns, so nothing still reads the source (or writes the destination) once the caller frees it.
Status upload_bytes(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx, bool after_compute,
                    bool finish) {
  const Status st = upload_bytes_on(d, dst, src, bytes, ctx, after_compute, finish);
  if (!st.is_ok()) quiet(cudaStreamSynchronize(d.copy));
  return st;
}

Status download_bytes(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx) {
  const Status st = download_bytes_on(d, dst, src, bytes, ctx);
  if (!st.is_ok()) quiet(cudaStreamSynchronize(d.copy));
  return st;
}

Status upload(int ordinal, const void* src, int64_t bytes, void** out, const ExecContext& ctx) {
  *out = nullptr;
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  void* p = nullptr;
  GEAR_TRY(device_alloc(*lock, std::max<int64_t>(bytes, 16), &p));
  Status st = upload_bytes(*lock, p, src, bytes, ctx, true, false);
  // One wait: the compute stream waits for the transfer (`copied`), so this covers the allocation and
  // the transfer (the source is read in full).
  if (st.is_ok()) st = cuda_status(cudaStreamSynchronize(lock->compute), "upload");
  if (!st.is_ok()) {
    quiet(cudaStreamSynchronize(lock->copy));
    device_free(*lock, p);
    quiet(cudaStreamSynchronize(lock->compute));
    return st;
  }
  *out = p;
  return Status::ok();
}

Status download(int ordinal, void* dst, const void* src, int64_t bytes, const ExecContext& ctx) {
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  return download_bytes(*lock, dst, src, bytes, ctx);
}

Status bandwidth(int ordinal, int mode, int64_t bytes, int reps, std::vector<double>* gbps) {
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  Device& d = *lock;
  void *a = nullptr, *b = nullptr, *host = nullptr;
  std::vector<char> pageable;
  struct Free {
    Device& d;
    void** a;
    void** b;
    void** host;
    ~Free() {
      quiet(cudaStreamSynchronize(d.compute));
      device_free(d, *a);
      device_free(d, *b);
      if (*host) quiet(cudaFreeHost(*host));
      quiet(cudaStreamSynchronize(d.compute));
    }
  } guard{d, &a, &b, &host};
  GEAR_TRY(device_alloc(d, bytes, &a));
  if (mode == 0) GEAR_TRY(device_alloc(d, bytes, &b));
  if (mode == 1 || mode == 3) GEAR_TRY(host_alloc(bytes, &host, "cudaBandwidth's host buffer"));
  if (mode == 2 || mode == 4) pageable.assign(static_cast<size_t>(bytes), 1);
  void* h = mode == 1 || mode == 3 ? host : pageable.data();
  GEAR_CUDA_TRY(cudaMemsetAsync(a, 0, static_cast<size_t>(bytes), d.compute));
  GEAR_CUDA_TRY(cudaStreamSynchronize(d.compute));
  for (int r = 0; r < reps; ++r) {
    GEAR_CUDA_TRY(cudaEventRecord(d.kernels_begin, d.compute));
    cudaError_t e = cudaSuccess;
    switch (mode) {
      case 0: e = cudaMemcpyAsync(b, a, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, d.compute); break;
      case 1: case 2: e = cudaMemcpyAsync(a, h, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, d.compute); break;
      default: e = cudaMemcpyAsync(h, a, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, d.compute); break;
    }
    GEAR_CUDA_TRY(e);
    GEAR_CUDA_TRY(cudaEventRecord(d.kernels_end, d.compute));
    GEAR_CUDA_TRY(cudaEventSynchronize(d.kernels_end));
    float ms = 0.f;
    GEAR_CUDA_TRY(cudaEventElapsedTime(&ms, d.kernels_begin, d.kernels_end));
    // a device copy reads and writes every byte (the HBM floor counts both, as device copy rates do)
    gbps->push_back((mode == 0 ? 2.0 : 1.0) * static_cast<double>(bytes) / (ms * 1e6));
  }
  d.last_kernel_ms = -1.f;
  return Status::ok();
}

}  // namespace cuda
}  // namespace gear
