// The device-tensor table on its own (native/src/core/device_tensors.cc), with host memory standing in
// for device memory: ids, claims, disposal while a call runs, the garbage collector's deferred path and
// an environment's teardown, and claims from several threads at once. Built and run by
// test/ops/device_tensors.test.ts (with AddressSanitizer: a use after free or a double free fails it).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../native/src/core/device_tensors.h"
#include "check.h"

using gear::Access;
using gear::Code;
using gear::TensorClaims;
using gear::TensorInfo;
using gear::tensor_table;

static std::atomic<int> freed{0};
static void host_free(int, void* p) {
  ++freed;
  std::free(p);
}

static uint64_t make(const void* owner, int64_t rows = 2, int64_t vocab = 3) {
  TensorInfo t;
  t.device = 0;
  t.rows = rows;
  t.vocab = vocab;
  t.bytes = rows * vocab * 4;
  t.ptr = std::malloc(static_cast<size_t>(t.bytes));
  t.free = host_free;
  return tensor_table().add(t, owner);
}

int main() {
  int env_a = 0, env_b = 0;
  // ids are never reused
  std::set<uint64_t> ids;
  for (int i = 0; i < 100; ++i) {
    const uint64_t id = make(&env_a);
    CHECK(ids.insert(id).second);
    CHECK(tensor_table().dispose(id).is_ok());
  }
  CHECK(freed == 100);
  const uint64_t stale = *ids.begin();
  TensorInfo info;
  // a disposed id is ERR_STATE; disposing it again is a no-op
  CHECK(tensor_table().claim(stale, Access::Read, "logits", &info).code == Code::State);
  CHECK(tensor_table().dispose(stale).is_ok());
  CHECK(tensor_table().claim(123456789, Access::Read, "logits", &info).code == Code::State);

  // readers share; a writer excludes; dispose while claimed is ERR_BUSY
  const uint64_t t = make(&env_a, 4, 5);
  {
    TensorClaims c1, c2;
    CHECK(c1.claim(t, Access::Read, "student", &info).is_ok());
    CHECK(info.rows == 4 && info.vocab == 5);
    CHECK(c2.claim(t, Access::Read, "teacher", &info).is_ok());
    TensorClaims w;
    CHECK(w.claim(t, Access::Write, "out", &info).code == Code::Busy);
    CHECK(tensor_table().dispose(t).code == Code::Busy);
    CHECK(tensor_table().live(t));
  }
  {
    TensorClaims w;
    CHECK(w.claim(t, Access::Write, "out", &info).is_ok());
    TensorClaims r;
    CHECK(r.claim(t, Access::Read, "logits", &info).code == Code::Busy);
    // the same call may claim what it already writes, and upgrade its own read
    CHECK(w.claim(t, Access::Read, "logits", &info).is_ok());
  }
  {
    TensorClaims c;  // in place: read, then write by the same call
    CHECK(c.claim(t, Access::Read, "logits", &info).is_ok());
    CHECK(c.claim(t, Access::Write, "logits", &info).is_ok());
    TensorClaims other;
    CHECK(other.claim(t, Access::Read, "logits", &info).code == Code::Busy);
  }
  {
    TensorClaims a, b;  // an upgrade fails while another call reads
    CHECK(a.claim(t, Access::Read, "logits", &info).is_ok());
    CHECK(b.claim(t, Access::Read, "logits", &info).is_ok());
    CHECK(a.claim(t, Access::Write, "logits", &info).code == Code::Busy);
  }
  // every claim is released: disposable now
  int before = freed;
  CHECK(tensor_table().dispose(t).is_ok());
  CHECK(freed == before + 1);

  // the collector's path: deferred until the last claim goes
  const uint64_t g = make(&env_a);
  {
    TensorClaims c;
    CHECK(c.claim(g, Access::Read, "logits", &info).is_ok());
    before = freed;
    tensor_table().dispose_when_free(g);
    CHECK(freed == before);
    CHECK(!tensor_table().live(g));
    TensorClaims late;
    CHECK(late.claim(g, Access::Read, "logits", &info).code == Code::State);
  }
  CHECK(freed == before + 1);

  // an environment's teardown frees its own tensors, not another's; one another environment's call
  // holds goes when that call ends
  const uint64_t a1 = make(&env_a), a2 = make(&env_a), b1 = make(&env_b);
  {
    TensorClaims held_by_b;
    CHECK(held_by_b.claim(a2, Access::Read, "logits", &info).is_ok());
    before = freed;
    tensor_table().dispose_owner(&env_a);
    CHECK(freed == before + 1);  // a1
    CHECK(!tensor_table().live(a1) && !tensor_table().live(a2) && tensor_table().live(b1));
  }
  CHECK(freed == before + 2);  // a2, once released
  int64_t count = 0, bytes = 0;
  tensor_table().usage(-1, &count, &bytes);
  CHECK(count == 1 && bytes == 24);
  CHECK(tensor_table().dispose(b1).is_ok());

  // claims from several threads: each thread's write claim excludes every other's; no double free
  const uint64_t shared = make(&env_a);
  std::atomic<int> writers{0}, max_writers{0}, busy{0};
  std::vector<std::thread> pool;
  for (int k = 0; k < 8; ++k) {
    pool.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        TensorClaims c;
        TensorInfo x;
        if (c.claim(shared, Access::Write, "out", &x).is_ok()) {
          const int now = ++writers;
          int m = max_writers.load();
          while (now > m && !max_writers.compare_exchange_weak(m, now)) {
          }
          --writers;
        } else {
          ++busy;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(max_writers == 1);
  before = freed;
  CHECK(tensor_table().dispose(shared).is_ok());
  CHECK(freed == before + 1);

  std::printf("%s: %d failures\n", failures.load() ? "FAIL" : "ok", failures.load());
  return failures.load() ? 1 : 0;
}
