// The CUDA module's device runtime (runtime.h): the device table, each device's state (streams, pool,
// events), device memory, page-locked host memory, and the device services and queries the bindings use
// (gear/cuda.h). Transfers are in transfers.cc; a call's plan and its chunk runner in call.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "../core/host_memory.h"
#include "gear/backend.h"
#include "gear/cuda.h"
#include "runtime.h"

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

}  // namespace

// Every page-locked allocation goes through here.
Status host_alloc(int64_t bytes, void** out, const char* what) {
  *out = nullptr;
  const cudaError_t e = cudaHostAlloc(out, static_cast<size_t>(bytes), cudaHostAllocPortable);
  if (e == cudaSuccess) return Status::ok();
  *out = nullptr;
  if (e != cudaErrorMemoryAllocation) return cuda_status(e, "cudaHostAlloc");
  cudaGetLastError();  // not sticky
  return host_oom(bytes, what);
}

namespace {

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
  int unified = 0;
  GEAR_CUDA_TRY(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, ordinal));
  d.unified = unified != 0;
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

bool in_use(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices) return false;
  std::lock_guard<std::mutex> lock(g_devices_mu);
  return g_devices[ordinal] != nullptr;
}

}  // namespace

int first_device_in_use() {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  for (int i = 0; i < kMaxDevices; ++i)
    if (g_devices[i] != nullptr) return i;
  return -1;
}

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

namespace {
// Frees what device `d` (locked, current) keeps between calls: the call arenas (device and page-locked),
// the staging ring, and the pool's cached blocks. Each is allocated again by the next call that needs it.
Status release_cached(Device& d) {
  // Nothing queued may still use them (every call ends synchronised; a failed one may leave copies queued).
  Status st = cuda_status(cudaStreamSynchronize(d.copy), "cudaStreamSynchronize");
  device_free(d, d.arena);
  d.arena = nullptr;
  d.arena_bytes = 0;
  device_free(d, d.counters);
  d.counters = nullptr;
  d.counter_rows = 0;
  const Status sc = cuda_status(cudaStreamSynchronize(d.compute), "cudaStreamSynchronize");
  if (st.is_ok()) st = sc;
  if (d.pinned != nullptr) quiet(cudaFreeHost(d.pinned));
  d.pinned = d.pinned_dev = nullptr;
  d.pinned_bytes = 0;
  release_ring(d);
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
