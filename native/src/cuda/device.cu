// Host side of the CUDA module's device layer (device.cuh): device state, the memory pool, the pinned
// arenas and staging ring, the call plan and the chunk runner; and the device memory services and
// queries the bindings use (gear/cuda.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "device.cuh"
#include "gear/backend.h"
#include "gear/cuda.h"
#include "gear/thread_pool.h"

namespace gear {
namespace cuda {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  if (e == cudaErrorMemoryAllocation) cudaGetLastError();  // not sticky: clear it for the next call
  return error(Code::Internal, std::string(what) + ": expected cudaSuccess, got " + cudaGetErrorName(e) + " (" +
                                   cudaGetErrorString(e) + ")");
}

int device_count(std::string* err) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (err) *err = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the error so later calls report their own
    return 0;
  }
  return n;
}

namespace {

constexpr int kMaxDevices = 64;
std::mutex g_devices_mu;
Device* g_devices[kMaxDevices] = {};

Status init_device(Device& d, int ordinal) {
  d.ordinal = ordinal;
  GEAR_CUDA_TRY(cudaSetDevice(ordinal));
  GEAR_CUDA_TRY(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, ordinal));
  int pools = 0;
  GEAR_CUDA_TRY(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal));
  d.pools = pools != 0;
  if (d.pools) {
    // Freed blocks stay in the pool for the next call (as PyTorch's caching allocator keeps them);
    // rl.cuda.trim() returns them.
    cudaMemPool_t pool;
    GEAR_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, ordinal));
    uint64_t keep = UINT64_MAX;
    GEAR_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  GEAR_CUDA_TRY(cudaStreamCreateWithFlags(&d.compute, cudaStreamNonBlocking));
  GEAR_CUDA_TRY(cudaStreamCreateWithFlags(&d.copy, cudaStreamNonBlocking));
  GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.copied, cudaEventDisableTiming));
  GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.computed, cudaEventDisableTiming));
  GEAR_CUDA_TRY(cudaEventCreate(&d.kernels_begin));
  GEAR_CUDA_TRY(cudaEventCreate(&d.kernels_end));
  return Status::ok();
}

// The ring's slots, allocated once per device at the first large host transfer.
Status ensure_ring(Device& d) {
  if (d.ring[0] != nullptr) return Status::ok();
  for (int i = 0; i < kRingSlots; ++i) {
    void* p = nullptr;
    GEAR_CUDA_TRY(cudaHostAlloc(&p, static_cast<size_t>(kRingSlotBytes), cudaHostAllocPortable));
    d.ring[i] = static_cast<char*>(p);
    GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.ring_done[i], cudaEventDisableTiming));
  }
  return Status::ok();
}

// memcpy of `bytes` on the addon's thread pool, in pieces of 4 MiB (page-locked staging memory is written
// fastest by several cores at once).
void parallel_copy(void* dst, const void* src, int64_t bytes) {
  constexpr int64_t kPiece = int64_t{4} << 20;
  const int64_t pieces = (bytes + kPiece - 1) / kPiece;
  if (pieces <= 1) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return;
  }
  global_pool().parallel_for(pieces, [&](int64_t k, int) {
    const int64_t off = k * kPiece, n = std::min(kPiece, bytes - off);
    std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off, static_cast<size_t>(n));
  });
}

Status aborted_status(const char* what) { return error(Code::Aborted, std::string(what) + ": aborted by the AbortSignal"); }

}  // namespace

DeviceLock::~DeviceLock() {
  if (d_ != nullptr) d_->mu.unlock();
}

Status device_of(int ordinal, Device** out) {
  std::string err;
  const int n = device_count(&err);
  if (ordinal < 0 || ordinal >= n || ordinal >= kMaxDevices)
    return error(Code::Device, "device: expected a CUDA device ordinal in [0, " + std::to_string(n) + "), got " +
                                   std::to_string(ordinal) + (n == 0 ? " (" + err + ")" : ""));
  std::lock_guard<std::mutex> lock(g_devices_mu);
  if (g_devices[ordinal] == nullptr) {
    auto fresh = std::make_unique<Device>();
    GEAR_TRY(init_device(*fresh, ordinal));
    g_devices[ordinal] = fresh.release();  // lives for the process (streams and pools are per process)
  }
  *out = g_devices[ordinal];
  return Status::ok();
}

Status DeviceLock::open(int ordinal) {
  Device* d = nullptr;
  GEAR_TRY(device_of(ordinal, &d));
  d->mu.lock();
  d_ = d;
  const cudaError_t e = cudaSetDevice(ordinal);
  return cuda_status(e, "cudaSetDevice");
}

Status device_alloc(Device& d, int64_t bytes, void** out) {
  *out = nullptr;
  if (bytes <= 0) return Status::ok();
  auto try_alloc = [&] {
    return d.pools ? cudaMallocAsync(out, static_cast<size_t>(bytes), d.compute)
                   : cudaMalloc(out, static_cast<size_t>(bytes));
  };
  cudaError_t e = try_alloc();
  if (e == cudaErrorMemoryAllocation && d.pools) {  // return the pool's cached blocks and try once more
    cudaGetLastError();
    cudaStreamSynchronize(d.compute);
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, d.ordinal) == cudaSuccess) cudaMemPoolTrimTo(pool, 0);
    e = try_alloc();
  }
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return error(Code::OutOfMemory, "device memory: expected " + std::to_string(bytes) + " bytes on cuda:" +
                                        std::to_string(d.ordinal) + ", got " + std::to_string(free_b) +
                                        " bytes free of " + std::to_string(total_b));
  }
  return cuda_status(e, "cudaMallocAsync");
}

void device_free(Device& d, void* p) {
  if (p == nullptr) return;
  if (d.pools) cudaFreeAsync(p, d.compute);
  else cudaFree(p);
}

bool is_pinned(const void* p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

Status upload_bytes(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx, bool after_compute,
                    bool finish) {
  if (bytes <= 0) return Status::ok();
  if (after_compute) {
    GEAR_CUDA_TRY(cudaEventRecord(d.computed, d.compute));
    GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, d.computed, 0));
  }
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  if (is_pinned(src)) {  // the DMA engine reads it directly; pieces keep the abort responsive
    constexpr int64_t kPiece = int64_t{256} << 20;
    for (int64_t off = 0; off < bytes; off += kPiece) {
      if (ctx.aborted()) {
        cudaStreamSynchronize(d.copy);
        return aborted_status("upload");
      }
      GEAR_CUDA_TRY(cudaMemcpyAsync(out + off, in + off, static_cast<size_t>(std::min(kPiece, bytes - off)),
                                    cudaMemcpyHostToDevice, d.copy));
    }
  } else {
    GEAR_TRY(ensure_ring(d));
    int64_t k = 0;
    for (int64_t off = 0; off < bytes; off += kRingSlotBytes, ++k) {
      const int slot = static_cast<int>(k % kRingSlots);
      const int64_t n = std::min(kRingSlotBytes, bytes - off);
      GEAR_CUDA_TRY(cudaEventSynchronize(d.ring_done[slot]));  // the slot's previous transfer has left it
      if (ctx.aborted()) {
        cudaStreamSynchronize(d.copy);
        return aborted_status("upload");
      }
      parallel_copy(d.ring[slot], in + off, n);  // overlaps the transfer of the previous slots
      GEAR_CUDA_TRY(cudaMemcpyAsync(out + off, d.ring[slot], static_cast<size_t>(n), cudaMemcpyHostToDevice, d.copy));
      GEAR_CUDA_TRY(cudaEventRecord(d.ring_done[slot], d.copy));
    }
  }
  GEAR_CUDA_TRY(cudaEventRecord(d.copied, d.copy));
  GEAR_CUDA_TRY(cudaStreamWaitEvent(d.compute, d.copied, 0));
  // The source must not be read once JavaScript owns it again.
  if (finish) GEAR_CUDA_TRY(cudaStreamSynchronize(d.copy));
  return Status::ok();
}

Status download_bytes(Device& d, void* dst, const void* src, int64_t bytes, const ExecContext& ctx) {
  if (bytes <= 0) return Status::ok();
  GEAR_CUDA_TRY(cudaEventRecord(d.computed, d.compute));
  GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, d.computed, 0));
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  if (is_pinned(dst)) {
    GEAR_CUDA_TRY(cudaMemcpyAsync(out, in, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, d.copy));
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
      cudaStreamSynchronize(d.copy);
      return aborted_status("download");
    }
    parallel_copy(out + off, d.ring[slot], n);
    if (k + kRingSlots < pieces) GEAR_TRY(issue(k + kRingSlots));
  }
  return Status::ok();
}

// ---- Call ----

int Call::add(int kind, const void* in, void* out, int64_t bytes) {
  if ((kind == 0 && in == nullptr) || (kind == 1 && out == nullptr) || bytes <= 0) return -1;
  Slot s;
  s.in = in;
  s.out = out;
  s.size = bytes;
  s.bytes = (bytes + 255) / 256 * 256;  // every slot 256-byte aligned
  s.kind = kind;
  slots_.push_back(s);
  (kind == 0 ? in_bytes_ : kind == 1 ? out_bytes_ : scratch_bytes_) += s.bytes;
  return static_cast<int>(slots_.size()) - 1;
}
int Call::input(const void* host, int64_t bytes) { return add(0, host, nullptr, bytes); }
int Call::output(void* host, int64_t bytes) { return add(1, nullptr, host, bytes); }
int Call::scratch(int64_t bytes) { return add(2, nullptr, nullptr, bytes); }

Status Call::commit() {
  // Layout, in the device arena and in the pinned arena alike: inputs, then outputs, then scratch (device only).
  int64_t in_off = 0, out_off = in_bytes_, scratch_off = in_bytes_ + out_bytes_;
  for (Slot& s : slots_) {
    int64_t& off = s.kind == 0 ? in_off : s.kind == 1 ? out_off : scratch_off;
    s.offset = off;
    off += s.bytes;
  }
  const int64_t device_bytes = in_bytes_ + out_bytes_ + scratch_bytes_, pinned_bytes = in_bytes_ + out_bytes_;
  if (device_bytes > d_.arena_bytes) {
    device_free(d_, d_.arena);
    d_.arena = nullptr;
    d_.arena_bytes = 0;
    void* p = nullptr;
    GEAR_TRY(device_alloc(d_, std::max<int64_t>(device_bytes, int64_t{1} << 20), &p));
    d_.arena = static_cast<char*>(p);
    d_.arena_bytes = std::max<int64_t>(device_bytes, int64_t{1} << 20);
  }
  if (pinned_bytes > d_.pinned_bytes) {
    // Growing waits for the previous call's transfers (they ended with it: every call synchronises).
    if (d_.pinned != nullptr) cudaFreeHost(d_.pinned);
    d_.pinned = nullptr;
    d_.pinned_bytes = 0;
    const int64_t n = std::max<int64_t>(pinned_bytes, int64_t{1} << 20);
    void* p = nullptr;
    GEAR_CUDA_TRY(cudaHostAlloc(&p, static_cast<size_t>(n), cudaHostAllocPortable));
    d_.pinned = static_cast<char*>(p);
    d_.pinned_bytes = n;
  }
  for (const Slot& s : slots_)
    if (s.kind == 0) std::memcpy(d_.pinned + s.offset, s.in, static_cast<size_t>(s.size));
  if (in_bytes_ > 0)
    GEAR_CUDA_TRY(cudaMemcpyAsync(d_.arena, d_.pinned, static_cast<size_t>(in_bytes_), cudaMemcpyHostToDevice, d_.compute));
  if (out_bytes_ > 0) GEAR_CUDA_TRY(cudaMemsetAsync(d_.arena + in_bytes_, 0, static_cast<size_t>(out_bytes_), d_.compute));
  return Status::ok();
}

Status Call::finish() {
  GEAR_CUDA_TRY(cudaGetLastError());  // a launch that failed
  if (out_bytes_ > 0)
    GEAR_CUDA_TRY(cudaMemcpyAsync(d_.pinned + in_bytes_, d_.arena + in_bytes_, static_cast<size_t>(out_bytes_),
                                  cudaMemcpyDeviceToHost, d_.compute));
  GEAR_CUDA_TRY(cudaStreamSynchronize(d_.compute));
  for (const Slot& s : slots_)
    if (s.kind == 1) std::memcpy(s.out, d_.pinned + s.offset, static_cast<size_t>(s.size));
  return Status::ok();
}

// ---- chunks ----

int64_t chunk_rows(const RowIO& io) {
  const LogitsView& first = *io.in[0];
  const bool staged = !first.on_device || (io.out != nullptr && !io.out_on_device);
  if (!staged || first.rows == 0) return first.rows;
  const int64_t row_bytes = first.vocab * dtype_size(first.dtype);
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / std::max<int64_t>(row_bytes, 4 * first.vocab));
  return chunk >= first.rows ? first.rows : std::max<int64_t>(8, chunk / 8 * 8);  // chunk starts stay 16-byte aligned
}

Status for_each_chunk(Call& call, const RowIO& io, const ExecContext& ctx,
                      const std::function<Status(int64_t, int64_t, const LogitsView*, float*)>& fn) {
  Device& d = call.device();
  const LogitsView& first = *io.in[0];
  const int64_t rows = first.rows, vocab = first.vocab;
  const bool host_in = !first.on_device;
  const bool host_out = io.out != nullptr && !io.out_on_device;
  if (!host_in && !host_out) {  // everything on the device: one piece, its kernels timed
    LogitsView v[2];
    for (int i = 0; i < io.inputs; ++i) v[i] = *io.in[i];
    GEAR_CUDA_TRY(cudaEventRecord(d.kernels_begin, d.compute));
    GEAR_TRY(fn(0, rows, v, io.out));
    GEAR_CUDA_TRY(cudaEventRecord(d.kernels_end, d.compute));
    d.last_kernel_ms = 0.f;  // read once the call has synchronised (kernel_ms)
    return cuda_status(cudaGetLastError(), "kernel launch");
  }
  d.last_kernel_ms = -1.f;
  const int64_t row_bytes = vocab * dtype_size(first.dtype);
  const int64_t chunk = chunk_rows(io);
  // Double-buffered device copies of host inputs, and of a host output.
  struct Buf {
    void* p = nullptr;
    Device* d = nullptr;
    ~Buf() {
      if (p) device_free(*d, p);
    }
  } in_buf[2][2], out_buf[2];
  cudaEvent_t consumed[2] = {nullptr, nullptr};
  struct Events {
    cudaEvent_t* e;
    ~Events() {
      for (int i = 0; i < 2; ++i)
        if (e[i]) cudaEventDestroy(e[i]);
    }
  } guard{consumed};
  for (int b = 0; b < 2 && b * chunk < rows; ++b) {
    GEAR_CUDA_TRY(cudaEventCreateWithFlags(&consumed[b], cudaEventDisableTiming));
    for (int i = 0; host_in && i < io.inputs; ++i) {
      in_buf[b][i].d = &d;
      GEAR_TRY(device_alloc(d, chunk * row_bytes, &in_buf[b][i].p));
    }
    if (host_out) {
      out_buf[b].d = &d;
      GEAR_TRY(device_alloc(d, chunk * vocab * 4, &out_buf[b].p));
    }
  }
  // Destroyed before the buffers: no transfer is in flight when they go back to the pool, and the
  // host inputs are fully read when this returns.
  struct CopyDrain {
    Device& d;
    ~CopyDrain() { cudaStreamSynchronize(d.copy); }
  } drain{d};
  // The buffers were allocated on the compute stream.
  GEAR_CUDA_TRY(cudaEventRecord(d.computed, d.compute));
  GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, d.computed, 0));
  int64_t k = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk, ++k) {
    if (ctx.aborted()) {
      cudaStreamSynchronize(d.compute);
      return error(Code::Aborted, "aborted by the AbortSignal");
    }
    const int b = static_cast<int>(k % 2);
    const int64_t n = std::min(chunk, rows - r0);
    LogitsView v[2];
    for (int i = 0; i < io.inputs; ++i) {
      const LogitsView& src = *io.in[i];
      v[i] = src;
      v[i].rows = n;
      v[i].on_device = true;
      if (host_in) {
        // The buffer's previous chunk (k - 2) has been read by its kernels before it is overwritten.
        if (k >= 2 && i == 0) GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, consumed[b], 0));
        GEAR_TRY(upload_bytes(d, in_buf[b][i].p, static_cast<const char*>(src.data) + r0 * row_bytes, n * row_bytes, ctx,
                              false, false));
        v[i].data = in_buf[b][i].p;
      } else {
        v[i].data = static_cast<const char*>(src.data) + r0 * row_bytes;
      }
    }
    float* out = nullptr;
    if (io.out != nullptr) out = host_out ? static_cast<float*>(out_buf[b].p) : io.out + r0 * vocab;
    GEAR_TRY(fn(r0, n, v, out));
    GEAR_CUDA_TRY(cudaGetLastError());
    GEAR_CUDA_TRY(cudaEventRecord(consumed[b], d.compute));
    if (host_out) GEAR_TRY(download_bytes(d, io.out + r0 * vocab, out, n * vocab * 4, ctx));
  }
  return Status::ok();
}

int64_t first_flagged(const int32_t* flags, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r)
    if (flags[r] != 0) return r;
  return -1;
}

Status bad_row(const LogitsView& l, const char* what, int64_t r) {
  if (!l.on_device) return bad_row_status(l, what, r);
  const int64_t row_bytes = l.vocab * dtype_size(l.dtype);
  std::vector<char> row(static_cast<size_t>(row_bytes));
  GEAR_CUDA_TRY(cudaMemcpy(row.data(), static_cast<const char*>(l.data) + r * row_bytes, static_cast<size_t>(row_bytes),
                           cudaMemcpyDeviceToHost));
  return bad_row_at(row.data(), l.vocab, l.dtype, what, r);
}

RowGrid row_grid(const Device& d, int64_t rows, int64_t vocab) {
  RowGrid g;
  if (rows <= 0) return g;
  if (vocab <= 2048) {  // short rows: a warp each, 8 rows per block
    g.group = 32;
    g.parts = 1;
  } else {
    g.group = kThreads;
    // Enough blocks for every multiprocessor (4 each), each part still several vectors per thread.
    const int64_t want = (4 * static_cast<int64_t>(d.sms) + rows - 1) / rows;
    const int64_t most = std::max<int64_t>(1, vocab / (8 * 4 * kThreads));
    g.parts = std::max<int64_t>(1, std::min(want, most));
  }
  g.items = rows * g.parts;
  const int64_t per_block = kThreads / g.group;
  g.blocks = static_cast<unsigned>((g.items + per_block - 1) / per_block);
  return g;
}

// ---- device memory services (gear/backend.h) and queries (gear/cuda.h) ----

namespace {
Status api_alloc(int device, int64_t bytes, void** out) {
  DeviceLock lock;
  GEAR_TRY(lock.open(device));
  GEAR_TRY(device_alloc(*lock, bytes, out));
  // Usable on every stream once this returns (uploads write it on the copy stream).
  return cuda_status(cudaStreamSynchronize(lock->compute), "cudaStreamSynchronize");
}

void api_free(int device, void* p) {
  if (p == nullptr || device < 0 || device >= kMaxDevices) return;
  Device* d;
  {
    std::lock_guard<std::mutex> lock(g_devices_mu);
    d = g_devices[device];
  }
  if (d == nullptr) return;
  // Without the call lock: stream-ordered after the work queued so far, and no call uses this memory
  // (the tensor table's claims); a garbage-collected tensor must not wait for a running call.
  int current = -1;
  cudaGetDevice(&current);
  if (current != device) cudaSetDevice(device);
  device_free(*d, p);
  if (current != device && current >= 0) cudaSetDevice(current);
}

void api_fill_nan(int device, float* p, int64_t n) {
  DeviceLock lock;
  if (!lock.open(device).is_ok()) return;
  cudaMemsetAsync(p, 0xff, static_cast<size_t>(n) * 4, lock->compute);  // all-ones bits: a NaN
  cudaStreamSynchronize(lock->compute);
}
}  // namespace

const DeviceApi& device_api_impl() {
  static const DeviceApi api{api_alloc, api_free, api_fill_nan};
  return api;
}

Status device_info(int ordinal, DeviceInfo* out) {
  Device* d = nullptr;
  GEAR_TRY(device_of(ordinal, &d));  // not locked: a query must not wait for a running call
  cudaDeviceProp p;
  GEAR_CUDA_TRY(cudaGetDeviceProperties(&p, ordinal));
  out->ordinal = ordinal;
  out->name = p.name;
  out->arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  out->total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  out->multiprocessors = p.multiProcessorCount;
  GEAR_CUDA_TRY(cudaSetDevice(ordinal));
  size_t free_b = 0, total_b = 0;
  GEAR_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  out->free_bytes = static_cast<int64_t>(free_b);
  out->pool_reserved_bytes = 0;
  out->pool_used_bytes = 0;
  if (d->pools) {
    cudaMemPool_t pool;
    GEAR_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, ordinal));
    uint64_t v = 0;
    GEAR_CUDA_TRY(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v));
    out->pool_reserved_bytes = static_cast<int64_t>(v);
    GEAR_CUDA_TRY(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v));
    out->pool_used_bytes = static_cast<int64_t>(v);
  }
  return Status::ok();
}

Status kernel_ms(int ordinal, double* out) {
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  *out = -1.0;
  if (lock->last_kernel_ms < 0.f) return Status::ok();
  float ms = 0.f;
  GEAR_CUDA_TRY(cudaEventElapsedTime(&ms, lock->kernels_begin, lock->kernels_end));
  *out = ms;
  return Status::ok();
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
      cudaStreamSynchronize(d.compute);
      device_free(d, *a);
      device_free(d, *b);
      if (*host) cudaFreeHost(*host);
      cudaStreamSynchronize(d.compute);
    }
  } guard{d, &a, &b, &host};
  GEAR_TRY(device_alloc(d, bytes, &a));
  if (mode == 0) GEAR_TRY(device_alloc(d, bytes, &b));
  if (mode == 1 || mode == 3) GEAR_CUDA_TRY(cudaHostAlloc(&host, static_cast<size_t>(bytes), cudaHostAllocPortable));
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

Status trim(int ordinal) {
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  // The call arena goes back too; the next call allocates it again.
  device_free(*lock, lock->arena);
  lock->arena = nullptr;
  lock->arena_bytes = 0;
  GEAR_CUDA_TRY(cudaStreamSynchronize(lock->compute));
  if (!lock->pools) return Status::ok();
  cudaMemPool_t pool;
  GEAR_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, ordinal));
  return cuda_status(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
}

Status upload(int ordinal, const void* src, int64_t bytes, void** out, const ExecContext& ctx) {
  *out = nullptr;
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  void* p = nullptr;
  GEAR_TRY(device_alloc(*lock, std::max<int64_t>(bytes, 16), &p));
  const Status st = upload_bytes(*lock, p, src, bytes, ctx);
  if (!st.is_ok()) {
    cudaStreamSynchronize(lock->copy);
    device_free(*lock, p);
    cudaStreamSynchronize(lock->compute);
    return st;
  }
  GEAR_CUDA_TRY(cudaStreamSynchronize(lock->compute));
  *out = p;
  return Status::ok();
}

Status download(int ordinal, void* dst, const void* src, int64_t bytes, const ExecContext& ctx) {
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  return download_bytes(*lock, dst, src, bytes, ctx);
}

Status alloc_host(int64_t bytes, void** out) {
  *out = nullptr;
  return cuda_status(cudaHostAlloc(out, static_cast<size_t>(std::max<int64_t>(bytes, 1)), cudaHostAllocPortable),
                     "cudaHostAlloc");
}

void free_host(void* p) {
  if (p != nullptr) cudaFreeHost(p);
}

}  // namespace cuda
}  // namespace gear
