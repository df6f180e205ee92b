// Host side of the CUDA module's device layer (device.cuh): device state, the memory pool, the pinned
// arenas and staging ring, the call plan and the chunk runner; and the device memory services and
// queries the bindings use (gear/cuda.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

#include "device.cuh"
#include "gear/backend.h"
#include "gear/cuda.h"
#include "gear/thread_pool.h"

namespace gear {
namespace cuda {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  // Reset the thread's last error, so that the next call reports its own. A sticky error (the context is
  // unusable: an illegal address, a failed kernel) is not reset by this, and every later call reports it.
  cudaGetLastError();
  return error(Code::Internal, std::string(what) + ": expected cudaSuccess, got " + cudaGetErrorName(e) + " (" +
                                   cudaGetErrorString(e) + ")");
}

void quiet(cudaError_t e) {
  if (e != cudaSuccess) cudaGetLastError();
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

// Host memory the kernel reports as available (MemAvailable: free plus reclaimable) and in all, bytes;
// -1 where unknown.
void host_memory(int64_t* available, int64_t* total) {
  *available = -1;
  *total = -1;
#if defined(__linux__)
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      long long kb = 0;
      if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) *available = kb * 1024;
      else if (std::sscanf(line, "MemTotal: %lld kB", &kb) == 1) *total = kb * 1024;
    }
    std::fclose(f);
  }
  struct sysinfo si;
  if ((*available < 0 || *total < 0) && sysinfo(&si) == 0) {
    if (*available < 0) *available = static_cast<int64_t>(si.freeram) * si.mem_unit;
    if (*total < 0) *total = static_cast<int64_t>(si.totalram) * si.mem_unit;
  }
#endif
}

// ERR_OUT_OF_MEMORY for page-locked host memory, in the device's message style: the bytes asked (for
// `what`) and the host memory available.
Status host_oom(int64_t bytes, const char* what) {
  int64_t available = -1, total = -1;
  host_memory(&available, &total);
  const auto n = [](int64_t x) { return x < 0 ? std::string("unknown") : std::to_string(x); };
  return error(Code::OutOfMemory, std::string("host memory: expected ") + std::to_string(bytes) +
                                      " bytes of page-locked memory (" + what + "), got " + n(available) +
                                      " bytes available of " + n(total));
}

// Page-locked host memory, portable (usable with every device). Every pinned allocation goes through
// here: running out is host_oom, any other failure ERR_NATIVE.
Status host_alloc(int64_t bytes, void** out, const char* what) {
  *out = nullptr;
  const cudaError_t e = cudaHostAlloc(out, static_cast<size_t>(bytes), cudaHostAllocPortable);
  if (e == cudaSuccess) return Status::ok();
  *out = nullptr;
  if (e != cudaErrorMemoryAllocation) return cuda_status(e, "cudaHostAlloc");
  cudaGetLastError();  // not sticky
  return host_oom(bytes, what);
}

// Destroys what make_device created (a failure part-way leaves no stream or event behind).
void release_device(Device& d) {
  for (cudaStream_t* s : {&d.compute, &d.copy}) {
    if (*s != nullptr) quiet(cudaStreamDestroy(*s));
    *s = nullptr;
  }
  for (cudaEvent_t* e : {&d.copied, &d.computed, &d.kernels_begin, &d.kernels_end, &d.piece_done[0], &d.piece_done[1]}) {
    if (*e != nullptr) quiet(cudaEventDestroy(*e));
    *e = nullptr;
  }
  if (d.pool != nullptr) quiet(cudaMemPoolDestroy(d.pool));
  d.pool = nullptr;
}

Status make_device(Device& d, int ordinal) {
  d.ordinal = ordinal;
  GEAR_CUDA_TRY(cudaSetDevice(ordinal));
  GEAR_CUDA_TRY(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, ordinal));
  int pools = 0;
  GEAR_CUDA_TRY(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal));
  d.pools = pools != 0;
  if (d.pools) {
    // The library's own pool, not the device's default one: its settings and its trim() do not reach
    // other CUDA users in the process, and memory() reports what this library holds. Freed blocks stay
    // in it for the next call (as PyTorch's caching allocator keeps them); rl.cuda.trim() returns them.
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = ordinal;
    GEAR_CUDA_TRY(cudaMemPoolCreate(&d.pool, &props));
    uint64_t keep = UINT64_MAX;
    GEAR_CUDA_TRY(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  GEAR_CUDA_TRY(cudaStreamCreateWithFlags(&d.compute, cudaStreamNonBlocking));
  GEAR_CUDA_TRY(cudaStreamCreateWithFlags(&d.copy, cudaStreamNonBlocking));
  GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.copied, cudaEventDisableTiming));
  GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.computed, cudaEventDisableTiming));
  GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.piece_done[0], cudaEventDisableTiming));
  GEAR_CUDA_TRY(cudaEventCreateWithFlags(&d.piece_done[1], cudaEventDisableTiming));
  GEAR_CUDA_TRY(cudaEventCreate(&d.kernels_begin));
  GEAR_CUDA_TRY(cudaEventCreate(&d.kernels_end));
  return Status::ok();
}

Status init_device(Device& d, int ordinal) {
  const Status st = make_device(d, ordinal);
  if (!st.is_ok()) release_device(d);
  return st;
}

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

// The first device this process works on (its context exists), or -1.
int first_device_in_use() {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  for (int i = 0; i < kMaxDevices; ++i)
    if (g_devices[i] != nullptr) return i;
  return -1;
}

bool in_use(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices) return false;
  std::lock_guard<std::mutex> lock(g_devices_mu);
  return g_devices[ordinal] != nullptr;
}

}  // namespace

DeviceLock::~DeviceLock() {
  if (d_ != nullptr) d_->mu.unlock();
}

Status device_of(int ordinal, Device** out) {
  if (ordinal >= 0 && ordinal < kMaxDevices) {  // known: no device query
    std::lock_guard<std::mutex> lock(g_devices_mu);
    if (g_devices[ordinal] != nullptr) {
      *out = g_devices[ordinal];
      return Status::ok();
    }
  }
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
    // process.exit() ends without the environments' teardown: what was cached is freed at exit too,
    // before the CUDA runtime's own exit handler (registered earlier, so run later).
    static std::once_flag at_exit;
    std::call_once(at_exit, [] { std::atexit(release_all_cached); });
  }
  *out = g_devices[ordinal];
  return Status::ok();
}

Status DeviceLock::open(int ordinal) {
  Device* d = nullptr;
  GEAR_TRY(device_of(ordinal, &d));
  d->mu.lock();
  d_ = d;
  d->last_kernel_ms = -1.f;  // set again only by a call that times its kernels (for_each_chunk)
  cudaGetLastError();        // an error nobody reported (a finalizer's free, ...) is not this call's
  return cuda_status(cudaSetDevice(ordinal), "cudaSetDevice");
}

Status device_alloc(Device& d, int64_t bytes, void** out) {
  *out = nullptr;
  if (bytes <= 0) return Status::ok();
  auto try_alloc = [&] {
    return d.pools ? cudaMallocFromPoolAsync(out, static_cast<size_t>(bytes), d.pool, d.compute)
                   : cudaMalloc(out, static_cast<size_t>(bytes));
  };
  cudaError_t e = try_alloc();
  if (e == cudaErrorMemoryAllocation && d.pools) {  // return the pool's cached blocks and try once more
    cudaGetLastError();
    quiet(cudaStreamSynchronize(d.compute));
    quiet(cudaMemPoolTrimTo(d.pool, 0));
    e = try_alloc();
  }
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    quiet(cudaMemGetInfo(&free_b, &total_b));
    return error(Code::OutOfMemory, "device memory: expected " + std::to_string(bytes) + " bytes on cuda:" +
                                        std::to_string(d.ordinal) + ", got " + std::to_string(free_b) +
                                        " bytes free of " + std::to_string(total_b));
  }
  return cuda_status(e, d.pools ? "cudaMallocFromPoolAsync" : "cudaMalloc");
}

void device_free(Device& d, void* p) {
  if (p == nullptr) return;
  quiet(d.pools ? cudaFreeAsync(p, d.compute) : cudaFree(p));
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
    GEAR_TRY(ensure_ring(d));
    int64_t k = 0;
    for (int64_t off = 0; off < bytes; off += kRingSlotBytes, ++k) {
      const int slot = static_cast<int>(k % kRingSlots);
      const int64_t n = std::min(kRingSlotBytes, bytes - off);
      GEAR_CUDA_TRY(cudaEventSynchronize(d.ring_done[slot]));  // the slot's previous transfer has left it
      if (ctx.aborted()) {
        quiet(cudaStreamSynchronize(d.copy));
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
    // No transfer of the previous call reads it (every call synchronises). It grows geometrically: row
    // counts that grow call by call do not pay a cudaFreeHost + cudaHostAlloc (both synchronising) each.
    const int64_t exact = std::max<int64_t>(pinned_bytes, int64_t{1} << 20);
    int64_t n = std::max<int64_t>(exact, 2 * d_.pinned_bytes);
    if (d_.pinned != nullptr) quiet(cudaFreeHost(d_.pinned));
    d_.pinned = nullptr;
    d_.pinned_bytes = 0;
    void* p = nullptr;
    const char* what = "the call's per-row arrays";
    Status st = host_alloc(n, &p, what);
    if (st.code == Code::OutOfMemory && n > exact) st = host_alloc(n = exact, &p, what);
    GEAR_TRY(st);
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
  if (!host_in && !host_out) {  // everything on the device: one piece, its kernels timed when asked (kernel_ms)
    LogitsView v[2];
    for (int i = 0; i < io.inputs; ++i) v[i] = *io.in[i];
    const bool timed = d.time_kernels;
    if (timed) GEAR_CUDA_TRY(cudaEventRecord(d.kernels_begin, d.compute));
    GEAR_TRY(fn(0, rows, v, io.out));
    GEAR_TRY(cuda_status(cudaGetLastError(), "kernel launch"));
    if (timed) {
      GEAR_CUDA_TRY(cudaEventRecord(d.kernels_end, d.compute));
      d.last_kernel_ms = 0.f;  // read once the call has synchronised (kernel_ms)
    }
    return Status::ok();
  }
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
        if (e[i]) quiet(cudaEventDestroy(e[i]));
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
    ~CopyDrain() { quiet(cudaStreamSynchronize(d.copy)); }
  } drain{d};
  // The buffers were allocated on the compute stream.
  GEAR_CUDA_TRY(cudaEventRecord(d.computed, d.compute));
  GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, d.computed, 0));
  int64_t k = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk, ++k) {
    if (ctx.aborted()) {
      quiet(cudaStreamSynchronize(d.compute));
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

namespace {
// Row r of `l` in host memory: in place for a host view, else copied into *buf.
Status host_row(const LogitsView& l, int64_t r, std::vector<char>* buf, const void** out) {
  const int64_t row_bytes = l.vocab * dtype_size(l.dtype);
  const char* p = static_cast<const char*>(l.data) + r * row_bytes;
  *out = p;
  if (!l.on_device) return Status::ok();
  buf->resize(static_cast<size_t>(row_bytes));
  GEAR_CUDA_TRY(cudaMemcpy(buf->data(), p, static_cast<size_t>(row_bytes), cudaMemcpyDeviceToHost));
  *out = buf->data();
  return Status::ok();
}
}  // namespace

Status bad_row(const LogitsView& l, const char* what, int64_t r) {
  std::vector<char> buf;
  const void* row;
  GEAR_TRY(host_row(l, r, &buf, &row));
  return bad_row_at(row, l.vocab, l.dtype, what, r);
}

Status bad_pair(const LogitsView& s, const LogitsView& t, int64_t r) {
  std::vector<char> bs, bt;
  const void *rs, *rt;
  GEAR_TRY(host_row(s, r, &bs, &rs));
  GEAR_TRY(host_row(t, r, &bt, &rt));
  return bad_pair_at(rs, rt, s.vocab, s.dtype, r);
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
  // Stream-ordered on the compute stream, and so is every use of a device tensor: kernels and NaN fills
  // run on it, transfers on the copy stream first wait for its work (`computed`), frees are cudaFreeAsync
  // on it. So no wait here.
  return device_alloc(*lock, bytes, out);
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
  // (the tensor table's claims); a garbage-collected tensor must not wait for a running call. Errors are
  // cleared here (nobody reads them), so that a later call on this thread reports its own.
  int current = -1;
  quiet(cudaGetDevice(&current));
  if (current != device) quiet(cudaSetDevice(device));
  device_free(*d, p);
  // Back to the thread's device only where its context exists (one this process uses): setting a
  // device creates its context.
  if (current != device && in_use(current)) quiet(cudaSetDevice(current));
}

void api_fill_nan(int device, float* p, int64_t n) {
  DeviceLock lock;
  if (!lock.open(device).is_ok()) return;
  quiet(cudaMemsetAsync(p, 0xff, static_cast<size_t>(n) * 4, lock->compute));  // all-ones bits: a NaN
  quiet(cudaStreamSynchronize(lock->compute));
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
    uint64_t v = 0;
    GEAR_CUDA_TRY(cudaMemPoolGetAttribute(d->pool, cudaMemPoolAttrReservedMemCurrent, &v));
    out->pool_reserved_bytes = static_cast<int64_t>(v);
    GEAR_CUDA_TRY(cudaMemPoolGetAttribute(d->pool, cudaMemPoolAttrUsedMemCurrent, &v));
    out->pool_used_bytes = static_cast<int64_t>(v);
  }
  return Status::ok();
}

Status kernel_ms(int ordinal, double* out) {
  *out = -1.0;
  Device* d = nullptr;
  GEAR_TRY(device_of(ordinal, &d));
  std::lock_guard<std::mutex> lock(d->mu);  // not a DeviceLock: opening one clears the time read here
  d->time_kernels = true;                   // from now on (the first query returns -1)
  if (d->last_kernel_ms < 0.f) return Status::ok();
  cudaGetLastError();
  GEAR_CUDA_TRY(cudaSetDevice(ordinal));
  float ms = 0.f;
  GEAR_CUDA_TRY(cudaEventElapsedTime(&ms, d->kernels_begin, d->kernels_end));
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

namespace {
// Frees what device `d` (locked, current) keeps between calls: the call arenas (device and page-locked),
// the staging ring, and the pool's cached blocks. Each is allocated again by the next call that needs it.
Status release_cached(Device& d) {
  // Nothing queued may still use them (every call ends synchronised; a failed one may leave copies queued).
  Status st = cuda_status(cudaStreamSynchronize(d.copy), "cudaStreamSynchronize");
  device_free(d, d.arena);
  d.arena = nullptr;
  d.arena_bytes = 0;
  const Status sc = cuda_status(cudaStreamSynchronize(d.compute), "cudaStreamSynchronize");
  if (st.is_ok()) st = sc;
  if (d.pinned != nullptr) quiet(cudaFreeHost(d.pinned));
  d.pinned = nullptr;
  d.pinned_bytes = 0;
  for (int i = 0; i < kRingSlots; ++i) {
    if (d.ring[i] != nullptr) quiet(cudaFreeHost(d.ring[i]));
    if (d.ring_done[i] != nullptr) quiet(cudaEventDestroy(d.ring_done[i]));
    d.ring[i] = nullptr;
    d.ring_done[i] = nullptr;
  }
  if (d.pools) {
    const Status sp = cuda_status(cudaMemPoolTrimTo(d.pool, 0), "cudaMemPoolTrimTo");
    if (st.is_ok()) st = sp;
  }
  return st;
}
}  // namespace

Status trim(int ordinal) {
  DeviceLock lock;
  GEAR_TRY(lock.open(ordinal));
  return release_cached(*lock);
}

void release_all_cached() {
  for (int i = 0; i < kMaxDevices; ++i) {
    Device* d;
    {
      std::lock_guard<std::mutex> lock(g_devices_mu);
      d = g_devices[i];  // only devices already in use: no context is created here
    }
    if (d == nullptr) continue;
    // A device with a call still running (an exit while another thread works) is left as it is.
    std::unique_lock<std::mutex> busy(d->mu, std::try_to_lock);
    if (!busy.owns_lock()) continue;
    if (cudaSetDevice(i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    (void)release_cached(*d);  // its errors are cleared: nobody reads them at teardown
  }
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

// Page-locked memory needs a context; cudaHostAlloc and cudaFreeHost use the calling thread's current
// device's, creating it when it does not exist. So both run on the first device this process already
// works on; only when there is none does allocHost start one: the thread's current device (0 unless
// set), as any first call would. The memory is portable: usable with every device.
Status alloc_host(int64_t bytes, void** out) {
  *out = nullptr;
  int dev = first_device_in_use();
  if (dev < 0) {
    if (cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();
      dev = 0;
    }
    Device* d = nullptr;
    GEAR_TRY(device_of(dev, &d));  // ERR_DEVICE without a device
  }
  GEAR_CUDA_TRY(cudaSetDevice(dev));
  return host_alloc(std::max<int64_t>(bytes, 1), out, "rl.cuda.allocHost");
}

void free_host(void* p) {
  if (p == nullptr) return;
  const int dev = first_device_in_use();  // runs in a finalizer on the JavaScript thread: errors are cleared
  if (dev >= 0) quiet(cudaSetDevice(dev));
  quiet(cudaFreeHost(p));
}

}  // namespace cuda
}  // namespace gear
