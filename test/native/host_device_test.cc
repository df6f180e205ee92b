// The host device's runtime on its own (native/src/core/host_device.cc) with the tensor table, built with
// AddressSanitizer and UBSan by test/native/device_tensors.test.ts: its allocations (the size header
// before each block: a kernel reading every byte of a tensor stays inside it), the capacity accounting
// from several threads at once, out of memory, uploads and downloads polling the abort between pieces,
// the ordinal checks of the device table, page-locked host memory, the bandwidth buffers, and tensors
// freed through the table. A leak or an access outside a block fails it. The CPU table is a stand-in
// here (cpu_backend() and fill_nan below): the host device's own code is what runs.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../native/src/core/device_tensors.h"
#include "../../native/src/core/host_device.h"
#include "gear/backend.h"
#include "check.h"

using namespace gear;

// The stand-in CPU table: token_stats reads every element of the logits (ASan checks the bounds), its
// backward writes every element of the output.
static std::atomic<int> calls{0};
static Status stats_stub(const LogitsView& l, const int32_t*, double, float* logprob, float*, float*, const ExecContext&) {
  ++calls;
  const float* z = static_cast<const float*>(l.data);
  for (int64_t r = 0; r < l.rows; ++r) {
    double s = 0;
    for (int64_t v = 0; v < l.vocab; ++v) s += z[r * l.vocab + v];
    if (logprob) logprob[r] = static_cast<float>(s);
  }
  return Status::ok();
}
static Status backward_stub(const LogitsView& l, const int32_t*, const float*, const float*, double, const float*,
                            const float*, float* out, const ExecContext&) {
  ++calls;
  for (int64_t i = 0; i < l.rows * l.vocab; ++i) out[i] = 2.f * static_cast<const float*>(l.data)[i];
  return Status::ok();
}
namespace gear {
void fill_nan(float* p, int64_t n) {  // core/checks.cc's, without the rest of that file
  for (int64_t i = 0; i < n; ++i) p[i] = std::nanf("");
}
const Backend& cpu_backend() {
  static const Backend b = [] {
    Backend t{};
    t.name = "stub";
    t.token_stats = stats_stub;
    t.token_stats_backward = backward_stub;
    return t;
  }();
  return b;
}
}  // namespace gear

int main() {
  const DeviceRuntime& rt = host_device_runtime();
  const DeviceApi& api = *rt.api;
  const int64_t cap = int64_t{1} << 20;
  set_host_device_capacity(cap);
  std::string err;
  CHECK(rt.device_count(&err) == 2 && err.empty());
  CHECK(std::string(rt.variant) == "host-device");
  DeviceInfo info;
  CHECK(rt.device_info(1, &info).is_ok() && info.total_bytes == cap && info.pool_used_bytes == 0 && info.arch == "host");
  CHECK(rt.device_info(2, &info).code == Code::Device);
  CHECK(rt.device_props(-1, &info).code == Code::Device);

  // uploads and downloads: every byte, both ways; the tensor table frees them
  std::vector<float> host(300 * 257);
  for (size_t i = 0; i < host.size(); ++i) host[i] = std::sin(static_cast<float>(i));
  const int64_t bytes = static_cast<int64_t>(host.size() * 4);
  ExecContext ctx;
  void* p = nullptr;
  CHECK(rt.upload(0, host.data(), bytes, &p, ctx).is_ok() && p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  CHECK(rt.device_info(0, &info).is_ok() && info.pool_used_bytes == bytes && info.free_bytes <= cap - bytes);
  std::vector<float> back(host.size());
  CHECK(rt.download(0, back.data(), p, bytes, ctx).is_ok() && back == host);
  CHECK(rt.download(5, back.data(), p, bytes, ctx).code == Code::Device);
  TensorInfo t;
  t.device = 0, t.ptr = p, t.bytes = bytes, t.rows = 300, t.vocab = 257, t.free = api.free;
  int env = 0;
  const uint64_t id = tensor_table().add(t, &env);

  // the device table: the stand-in kernels over the tensor, on a checked device; a new device output
  LogitsView l;
  l.data = p, l.rows = 300, l.vocab = 257, l.on_device = true;
  std::vector<float> lp(300);
  ExecContext on0 = ctx;
  on0.device = 0;
  CHECK(rt.backend->token_stats(l, nullptr, 1.0, lp.data(), nullptr, nullptr, on0).is_ok() && calls == 1);
  double ms = 0;
  CHECK(rt.kernel_ms(0, &ms).is_ok() && ms == -1.0);  // the first query
  CHECK(rt.backend->token_stats(l, nullptr, 1.0, lp.data(), nullptr, nullptr, on0).is_ok());
  CHECK(rt.kernel_ms(0, &ms).is_ok() && ms >= 0.0);
  ExecContext on7 = on0;
  on7.device = 7;
  CHECK(rt.backend->token_stats(l, nullptr, 1.0, lp.data(), nullptr, nullptr, on7).code == Code::Device);
  void* g = nullptr;
  CHECK(api.alloc(0, bytes, &g).is_ok());
  CHECK(rt.backend->token_stats_backward(l, nullptr, nullptr, nullptr, 1.0, nullptr, nullptr, static_cast<float*>(g), on0).is_ok());
  CHECK(static_cast<float*>(g)[bytes / 4 - 1] == 2.f * host.back());
  api.fill_nan(0, static_cast<float*>(g), bytes / 4);
  CHECK(std::isnan(static_cast<float*>(g)[0]) && std::isnan(static_cast<float*>(g)[bytes / 4 - 1]));
  api.free(0, g);

  // out of memory: what is left, and no more; nothing reserved by a failed allocation
  void* big = nullptr;
  const Status oom = api.alloc(0, cap, &big);
  CHECK(oom.code == Code::OutOfMemory && big == nullptr);
  CHECK(oom.message == "device memory: expected " + std::to_string(cap) + " bytes on cuda:0, got " +
                           std::to_string(cap - bytes) + " bytes free of " + std::to_string(cap));
  CHECK(rt.upload(0, host.data(), cap - bytes + 1, &big, ctx).code == Code::OutOfMemory);
  CHECK(api.alloc(1, cap, &big).is_ok());  // the other device is untouched
  api.free(1, big);
  CHECK(api.alloc(0, 0, &big).is_ok() && big == nullptr);
  CHECK(api.alloc(3, 16, &big).code == Code::Device);

  // allocations from several threads at once: the accounting holds, everything returns
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 500; ++i) {
        void* q = nullptr;
        const Status st = api.alloc(k % 2, 4096 + 64 * (i % 7), &q);
        if (!st.is_ok()) {
          ++refused;
          continue;
        }
        std::memset(q, k, 4096);
        api.free(k % 2, q);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(refused == 0);
  CHECK(rt.device_info(0, &info).is_ok() && info.pool_used_bytes == bytes);
  CHECK(rt.device_info(1, &info).is_ok() && info.pool_used_bytes == 0);

  // an abort before or between pieces: ERR_ABORTED, the new allocation returned
  std::atomic<int32_t> flag{1};
  ExecContext aborted = ctx;
  aborted.abort = &flag;
  void* q = nullptr;
  const Status ab = rt.upload(1, host.data(), bytes, &q, aborted);
  CHECK(ab.code == Code::Aborted && ab.message == "upload: aborted by the AbortSignal" && q == nullptr);
  CHECK(rt.download(0, back.data(), p, bytes, aborted).code == Code::Aborted);
  CHECK(rt.device_info(1, &info).is_ok() && info.pool_used_bytes == 0);

  // page-locked host memory: zeroed; bandwidth's buffers come back
  void* pinned = nullptr;
  CHECK(rt.alloc_host(4096, &pinned).is_ok() && static_cast<unsigned char*>(pinned)[4095] == 0);
  rt.free_host(pinned);
  std::vector<double> gbps;
  for (int mode = 0; mode <= 4; ++mode) CHECK(rt.bandwidth(1, mode, 1 << 16, 2, &gbps).is_ok());
  CHECK(gbps.size() == 10);
  CHECK(rt.bandwidth(1, 0, cap, 1, &gbps).code == Code::OutOfMemory);  // two buffers of the whole device
  CHECK(rt.device_info(1, &info).is_ok() && info.pool_used_bytes == 0);
  CHECK(rt.trim(0).is_ok() && rt.trim(2).code == Code::Device);

  // the table frees the tensor's memory through the runtime
  CHECK(tensor_table().dispose(id).is_ok());
  CHECK(rt.device_info(0, &info).is_ok() && info.pool_used_bytes == 0 && info.free_bytes <= cap);

  std::printf("%s: %d failures\n", failures.load() ? "FAIL" : "ok", failures.load());
  return failures.load() ? 1 : 0;
}
