#include "device_tensors.h"

#include <string>

namespace gear {

uint64_t TensorTable::add(const TensorInfo& t, const void* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  Entry e;
  e.info = t;
  e.owner = owner;
  entries_.emplace(id, e);
  return id;
}

Status TensorTable::claim(uint64_t id, Access a, const char* what, TensorInfo* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.dispose_pending)
    return error(Code::State, std::string(what) + ": expected a live device tensor, got one that was disposed");
  Entry& e = it->second;
  if (e.writer || (a == Access::Write && e.readers > 0))
    return error(Code::Busy, std::string(what) + ": expected a device tensor not in use by a running call, got one " +
                                 (e.writer ? "being written by one" : "being read by one"));
  if (a == Access::Write) e.writer = true;
  else ++e.readers;
  if (out) *out = e.info;
  return Status::ok();
}

void TensorTable::free_entry(const Entry& e) {
  if (e.info.free != nullptr && e.info.ptr != nullptr) e.info.free(e.info.device, e.info.ptr);
}

void TensorTable::release(uint64_t id, Access a) {
  Entry freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (a == Access::Write) e.writer = false;
    else if (e.readers > 0) --e.readers;
    if (!e.dispose_pending || e.writer || e.readers > 0) return;
    freed = e;
    entries_.erase(it);
  }
  free_entry(freed);  // outside the lock: returning memory may wait on the device
}

Status TensorTable::upgrade(uint64_t id, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return error(Code::State, std::string(what) + ": expected a live device tensor, got one that was disposed");
  Entry& e = it->second;
  if (e.writer || e.readers != 1)
    return error(Code::Busy, std::string(what) + ": expected a device tensor not in use by a running call, got one being read by one");
  e.readers = 0;
  e.writer = true;
  return Status::ok();
}

Status TensorTable::dispose(uint64_t id) {
  Entry freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.dispose_pending) return Status::ok();
    if (it->second.writer || it->second.readers > 0)
      return error(Code::Busy, "dispose: expected a device tensor not in use by a running call, got one in use");
    freed = it->second;
    entries_.erase(it);
  }
  free_entry(freed);
  return Status::ok();
}

void TensorTable::dispose_when_free(uint64_t id) {
  Entry freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    if (it->second.writer || it->second.readers > 0) {
      it->second.dispose_pending = true;
      return;
    }
    freed = it->second;
    entries_.erase(it);
  }
  free_entry(freed);
}

void TensorTable::dispose_owner(const void* owner) {
  std::vector<Entry> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.owner != owner) {
        ++it;
      } else if (it->second.writer || it->second.readers > 0) {  // a call of another environment uses it
        it->second.dispose_pending = true;
        ++it;
      } else {
        freed.push_back(it->second);
        it = entries_.erase(it);
      }
    }
  }
  for (const Entry& e : freed) free_entry(e);
}

void TensorTable::usage(int device, int64_t* count, int64_t* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t c = 0, b = 0;
  for (const auto& kv : entries_) {
    if (device >= 0 && kv.second.info.device != device) continue;
    ++c;
    b += kv.second.info.bytes;
  }
  *count = c;
  *bytes = b;
}

bool TensorTable::live(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && !it->second.dispose_pending;
}

TensorTable& tensor_table() {
  static TensorTable* t = new TensorTable();  // never destroyed: device memory outlives static teardown
  return *t;
}

TensorClaims::~TensorClaims() {
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) tensor_table().release(it->id, it->access);
}

Status TensorClaims::claim(uint64_t id, Access a, const char* what, TensorInfo* out) {
  for (Held& h : held_) {
    if (h.id != id) continue;
    if (a == Access::Write && h.access == Access::Read) {
      const Status st = tensor_table().upgrade(id, what);
      if (!st.is_ok()) return st;
      h.access = Access::Write;
    }
    if (out) *out = h.info;
    return Status::ok();
  }
  TensorInfo info;
  const Status st = tensor_table().claim(id, a, what, &info);
  if (!st.is_ok()) return st;
  held_.push_back({id, a, info});
  if (out) *out = info;
  return st;
}

}  // namespace gear
