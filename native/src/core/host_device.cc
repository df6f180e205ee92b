#include "host_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>

#include "checks.h"
#include "host_memory.h"
#include "gear/thread_pool.h"

namespace gear {

namespace {

// Transfers go in pieces with the abort polled between them, as the CUDA module's do.
constexpr int64_t kPieceBytes = int64_t{4} << 20;
// Device allocations: 64-byte aligned blocks after a header recording their size and device.
constexpr size_t kAlign = 64;
constexpr size_t kHeader = 64;

struct HostDevice {
  std::atomic<int64_t> used{0};            // bytes of live allocations
  std::atomic<bool> time_kernels{false};   // set by the first kernel_ms query
  std::atomic<double> last_kernel_ms{-1.0};
};
HostDevice g_devices[kHostDevices];
std::atomic<int64_t> g_capacity{0};

struct Header {
  int64_t bytes;
  int device;
};
static_assert(sizeof(Header) <= kHeader, "the header fits before the block");

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int64_t capacity() {
  const int64_t c = g_capacity.load(std::memory_order_relaxed);
  if (c > 0) return c;
  // the host's total memory, read once (it does not change; every allocation asks)
  static const int64_t dflt = [] {
    int64_t available, total;
    host_memory(&available, &total);
    return total > 0 ? total : int64_t{16} << 30;
  }();
  return dflt;
}

// What an allocation may still take: the capacity left, and no more than the host has available.
int64_t free_bytes(const HostDevice& d, int64_t cap) {
  int64_t available, total;
  host_memory(&available, &total);
  const int64_t left = std::max<int64_t>(0, cap - d.used.load(std::memory_order_relaxed));
  return available >= 0 ? std::min(left, available) : left;
}

std::string ordinal_text(int ordinal) { return "cuda:" + std::to_string(ordinal); }

Status check_ordinal(int ordinal) {
  if (ordinal >= 0 && ordinal < kHostDevices) return Status::ok();
  return error(Code::Device, "device: expected a host device ordinal in [0, " + std::to_string(kHostDevices) + "), got " +
                                 std::to_string(ordinal));
}

Status device_oom(int device, int64_t bytes, int64_t cap) {
  return error(Code::OutOfMemory, "device memory: expected " + std::to_string(bytes) + " bytes on " + ordinal_text(device) +
                                      ", got " + std::to_string(free_bytes(g_devices[device], cap)) + " bytes free of " +
                                      std::to_string(cap));
}

// ---- memory services (gear::DeviceApi) ----

Status api_alloc(int device, int64_t bytes, void** out) {
  *out = nullptr;
  GEAR_TRY(check_ordinal(device));
  if (bytes <= 0) return Status::ok();
  HostDevice& d = g_devices[device];
  const int64_t cap = capacity();
  int64_t used = d.used.load(std::memory_order_relaxed);
  do {
    if (bytes > cap - used) return device_oom(device, bytes, cap);
  } while (!d.used.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  void* raw = bytes > std::numeric_limits<int64_t>::max() - static_cast<int64_t>(kHeader)
                  ? nullptr
                  : ::operator new(kHeader + static_cast<size_t>(bytes), std::align_val_t{kAlign}, std::nothrow);
  if (raw == nullptr) {
    d.used.fetch_sub(bytes, std::memory_order_relaxed);
    return device_oom(device, bytes, cap);
  }
  *static_cast<Header*>(raw) = Header{bytes, device};
  *out = static_cast<char*>(raw) + kHeader;
  return Status::ok();
}

void api_free(int, void* p) {
  if (p == nullptr) return;
  void* raw = static_cast<char*>(p) - kHeader;
  const Header h = *static_cast<const Header*>(raw);
  g_devices[h.device].used.fetch_sub(h.bytes, std::memory_order_relaxed);
  ::operator delete(raw, std::align_val_t{kAlign});
}

void api_fill_nan(int, float* p, int64_t n) { fill_nan(p, n); }

const DeviceApi kApi{api_alloc, api_free, api_fill_nan};

// ---- the device table: the CPU kernels, on a checked device, timed once kernel_ms was asked ----

template <auto Field, typename Fn>
struct HostEntry;
template <auto Field, typename... A>
struct HostEntry<Field, Status (*)(A...)> {
  static Status run(A... a) {
    auto args = std::forward_as_tuple(a...);
    static_assert(std::is_same_v<std::decay_t<std::tuple_element_t<0, decltype(args)>>, LogitsView>,
                  "a device op reads logits first");
    static_assert(std::is_same_v<std::decay_t<std::tuple_element_t<sizeof...(A) - 1, decltype(args)>>, ExecContext>,
                  "a device op takes its context last");
    const LogitsView& l = std::get<0>(args);
    const ExecContext& ctx = std::get<sizeof...(A) - 1>(args);
    GEAR_TRY(check_ordinal(ctx.device));
    HostDevice& d = g_devices[ctx.device];
    d.last_kernel_ms.store(-1.0, std::memory_order_relaxed);
    const bool timed = l.on_device && d.time_kernels.load(std::memory_order_relaxed);
    const Clock::time_point t0 = Clock::now();
    const Status st = (cpu_backend().*Field)(a...);
    if (timed && st.is_ok()) d.last_kernel_ms.store(ms_since(t0), std::memory_order_relaxed);
    return st;
  }
};

const Backend& host_backend() {
  static const Backend kHost = [] {
    Backend b = cpu_backend();
    b.name = "host-device";
#define GEAR_HOST_ENTRY(op) b.op = &HostEntry<&Backend::op, decltype(&::gear::op)>::run;
    GEAR_DEVICE_OPS(GEAR_HOST_ENTRY)
#undef GEAR_HOST_ENTRY
    return b;
  }();
  return kHost;
}

// ---- the runtime's services ----

int device_count(std::string*) { return kHostDevices; }

Status device_props(int ordinal, DeviceInfo* out) {
  GEAR_TRY(check_ordinal(ordinal));
  out->ordinal = ordinal;
  out->name = "gear-rl host device " + std::to_string(ordinal) + " (test double: host memory, CPU kernels)";
  out->arch = "host";
  out->multiprocessors = global_pool().threads();
  out->total_bytes = capacity();
  return Status::ok();
}

Status device_info(int ordinal, DeviceInfo* out) {
  GEAR_TRY(device_props(ordinal, out));
  const HostDevice& d = g_devices[ordinal];
  out->free_bytes = free_bytes(d, out->total_bytes);
  out->pool_used_bytes = d.used.load(std::memory_order_relaxed);
  out->pool_reserved_bytes = out->pool_used_bytes;  // nothing cached
  return Status::ok();
}

void versions(int* runtime, int* driver) {
  *runtime = 0;
  *driver = 0;
}

Status trim(int ordinal) { return check_ordinal(ordinal); }

Status kernel_ms(int ordinal, double* out) {
  *out = -1.0;
  GEAR_TRY(check_ordinal(ordinal));
  HostDevice& d = g_devices[ordinal];
  if (!d.time_kernels.exchange(true, std::memory_order_relaxed)) return Status::ok();  // the first query
  *out = d.last_kernel_ms.load(std::memory_order_relaxed);
  return Status::ok();
}

Status aborted_status(const char* what) { return error(Code::Aborted, std::string(what) + ": aborted by the AbortSignal"); }

Status copy_in_pieces(void* dst, const void* src, int64_t bytes, const ExecContext& ctx, const char* what) {
  for (int64_t off = 0; off < bytes; off += kPieceBytes) {
    if (ctx.aborted()) return aborted_status(what);
    std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off,
                static_cast<size_t>(std::min(kPieceBytes, bytes - off)));
  }
  return Status::ok();
}

Status upload(int ordinal, const void* src, int64_t bytes, void** out, const ExecContext& ctx) {
  *out = nullptr;
  void* p = nullptr;
  GEAR_TRY(api_alloc(ordinal, std::max<int64_t>(bytes, 16), &p));
  const Status st = copy_in_pieces(p, src, bytes, ctx, "upload");
  if (!st.is_ok()) {
    api_free(ordinal, p);
    return st;
  }
  *out = p;
  return Status::ok();
}

Status download(int ordinal, void* dst, const void* src, int64_t bytes, const ExecContext& ctx) {
  GEAR_TRY(check_ordinal(ordinal));
  return copy_in_pieces(dst, src, bytes, ctx, "download");
}

Status alloc_host(int64_t bytes, void** out) {
  const int64_t n = std::max<int64_t>(bytes, 1);
  *out = static_cast<uint64_t>(n) <= SIZE_MAX ? std::calloc(static_cast<size_t>(n), 1) : nullptr;  // zeroed, as JS memory is
  if (*out != nullptr) return Status::ok();
  return host_oom(n, "rl.cuda.allocHost");
}

void free_host(void* p) { std::free(p); }

// memcpy rates: every mode copies host memory to host memory (mode 0 counts the read and the write).
Status bandwidth(int ordinal, int mode, int64_t bytes, int reps, std::vector<double>* gbps) {
  GEAR_TRY(check_ordinal(ordinal));
  void *dev = nullptr, *other = nullptr;
  GEAR_TRY(api_alloc(ordinal, bytes, &dev));
  struct Free {
    int ordinal;
    void* dev;
    void** other;
    int mode;
    ~Free() {
      api_free(ordinal, dev);
      if (mode == 0) api_free(ordinal, *other);
      else free_host(*other);
    }
  } guard{ordinal, dev, &other, mode};
  GEAR_TRY(mode == 0 ? api_alloc(ordinal, bytes, &other) : alloc_host(bytes, &other));
  std::memset(dev, 1, static_cast<size_t>(bytes));
  std::memset(other, 0, static_cast<size_t>(bytes));
  for (int r = 0; r < reps; ++r) {
    const Clock::time_point t0 = Clock::now();
    if (mode >= 3) std::memcpy(other, dev, static_cast<size_t>(bytes));
    else std::memcpy(dev, other, static_cast<size_t>(bytes));
    const double ms = std::max(ms_since(t0), 1e-6);
    gbps->push_back((mode == 0 ? 2.0 : 1.0) * static_cast<double>(bytes) / (ms * 1e6));
  }
  return Status::ok();
}

}  // namespace

const DeviceRuntime& host_device_runtime() {
  static const DeviceRuntime kRuntime{"host-device", &host_backend(), &kApi, device_count, device_props, device_info,
                                      versions, trim, kernel_ms, bandwidth, upload, download, alloc_host, free_host};
  return kRuntime;
}

void set_host_device_capacity(int64_t bytes) { g_capacity.store(bytes, std::memory_order_relaxed); }

}  // namespace gear
