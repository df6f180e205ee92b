// The table of device tensors (rl.cuda's DeviceLogits): memory on a CUDA device, owned by the JS
// environment that made it, named to JavaScript by an id that is never reused. Plain C++ (no N-API, no
// CUDA): the CUDA module fills it, the bindings claim its entries for the calls that use them.
//
// A call claims every tensor it reads (shared) or writes (exclusive) before its work starts and
// releases the claims when the work has ended, so a tensor cannot be freed, or written by one call while
// another reads it, under a running call (ERR_BUSY). An id that was disposed (or never existed) is
// ERR_STATE: JavaScript can hold a stale id, never a stale pointer.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "gear/types.h"

namespace gear {

struct TensorInfo {
  int device = 0;
  void* ptr = nullptr;  // device memory of `bytes` bytes
  int64_t bytes = 0;
  int64_t rows = 0;
  int64_t vocab = 0;
  DType dtype = DType::F32;
  void (*free)(int device, void* ptr) = nullptr;  // returns the memory (the CUDA module's pool)
};

enum class Access { Read, Write };

class TensorTable {
 public:
  // Takes ownership of `t`'s memory for `owner` (a JS environment); returns its id (>= 1, never reused).
  uint64_t add(const TensorInfo& t, const void* owner);
  // Claims tensor `id`: shared for Read, exclusive for Write. ERR_STATE for an id that is not live,
  // ERR_BUSY when a running call's claim conflicts. `what` names the argument in messages.
  Status claim(uint64_t id, Access a, const char* what, TensorInfo* out);
  void release(uint64_t id, Access a);
  // Turns the caller's own Read claim into a Write claim: ERR_BUSY when another call also reads it.
  Status upgrade(uint64_t id, const char* what);
  // Frees the tensor now. ERR_BUSY while a call holds it; an id that is not live is a no-op (dispose
  // twice is allowed).
  Status dispose(uint64_t id);
  // The garbage collector's path (a DeviceLogits that was never disposed): frees it now, or when its
  // last claim is released.
  void dispose_when_free(uint64_t id);
  // Frees every tensor of `owner`, whose environment is being torn down (none of its calls still runs;
  // a tensor a call of another environment holds goes when that call ends).
  void dispose_owner(const void* owner);
  // Live tensors and their bytes, on `device` (-1: every device).
  void usage(int device, int64_t* count, int64_t* bytes);
  // Whether `id` is live.
  bool live(uint64_t id);

 private:
  struct Entry {
    TensorInfo info;
    const void* owner = nullptr;
    int readers = 0;
    bool writer = false;
    bool dispose_pending = false;
  };
  void free_entry(const Entry& e);

  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Entry> entries_;
};

// The process-wide table.
TensorTable& tensor_table();

// The claims of one call, released together when it is destroyed (when the call's work has ended).
class TensorClaims {
 public:
  TensorClaims() = default;
  TensorClaims(const TensorClaims&) = delete;
  TensorClaims& operator=(const TensorClaims&) = delete;
  ~TensorClaims();
  // Claims `id` for this call (a tensor already claimed by this call for writing is not claimed again;
  // a Write after this call's own Read upgrades it when no other call reads it).
  Status claim(uint64_t id, Access a, const char* what, TensorInfo* out);

 private:
  struct Held {
    uint64_t id;
    Access access;
    TensorInfo info;
  };
  std::vector<Held> held_;
};

}  // namespace gear
