// One op call on the device (call.cc): the traffic plan of its small per-row arrays (Call), the launch
// grid of its row passes (RowGrid), the chunk runner that streams host logits through the device
// (for_each_chunk), and RowPass, the frame every op driver opens: device locked, logits, grid, chunking,
// plan and per-row flags in one place.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime.h"

namespace gear {
namespace cuda {

// The traffic plan of one call: per-row inputs (host arrays), outputs (host arrays the kernels' results go
// to) and device-only scratch. Declare everything, commit(), launch, finish(). Inputs and outputs are
// packed into the device's page-locked arena; staged, they move in one transfer each way to and from its
// device arena; mapped (a small call), the kernels read and write them in the page-locked arena itself,
// so that the call needs no copy and no memset, only its kernels and one synchronisation.
class Call {
 public:
  Call() = default;
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  // The device (locked by the caller) and whether the call asks to be mapped (granted where the
  // page-locked arena has a device address).
  void bind(Device& d, bool mapped) {
    d_ = &d;
    want_mapped_ = mapped;
  }

  // Each returns a slot; the device pointer is `ptr<T>(slot)` once committed. A null host array gives a
  // slot whose pointer is null.
  int input(const void* host, int64_t bytes);
  int output(void* host, int64_t bytes);
  int scratch(int64_t bytes);
  // Sizes the arenas and packs the inputs; staged, queues the upward transfer and zeroes the outputs on
  // the device; mapped, zeroes them in the page-locked arena.
  Status commit();
  template <typename T>
  T* ptr(int slot) const {
    if (slot < 0) return nullptr;
    const Slot& s = slots_[slot];
    return reinterpret_cast<T*>((mapped_ && s.kind != kScratch ? d_->pinned_dev : d_->arena) + s.offset);
  }
  // Waits for the compute stream (staged: after the downward transfer) and copies the outputs to their arrays.
  Status finish();
  Device& device() const { return *d_; }
  bool mapped() const { return mapped_; }

 private:
  enum Kind : int { kInput = 0, kOutput = 1, kScratch = 2 };
  struct Slot {
    const void* in = nullptr;
    void* out = nullptr;
    int64_t size = 0;    // the host array's bytes
    int64_t bytes = 0;   // rounded up to 256
    int64_t offset = 0;  // in the device arena (and in the page-locked arena for inputs and outputs)
    int kind = kInput;
  };
  int add(int kind, const void* in, void* out, int64_t bytes);
  Status size_arenas();
  Device* d_ = nullptr;
  bool want_mapped_ = false, mapped_ = false;
  std::vector<Slot> slots_;
  int64_t in_bytes_ = 0, out_bytes_ = 0, scratch_bytes_ = 0;
};

// A call's logits inputs (1 or 2 views: student and teacher) and optional rows x vocab float32 output.
struct RowIO {
  const LogitsView* in[2] = {nullptr, nullptr};
  int inputs = 1;
  float* out = nullptr;       // rows x vocab, or null
  bool out_on_device = false;
};

// Rows per chunk of for_each_chunk for `io` (every row when nothing is staged).
int64_t chunk_rows(const RowIO& io);

// Runs fn(r0, n, views, out) over rows [0, rows): inputs and output already on the device in one piece;
// otherwise in chunks of rows (a multiple of 8, so chunk starts keep 16-byte alignment) through device
// buffers, host inputs uploaded and a host output downloaded by the ring. `fn` queues kernels on the
// compute stream for rows [r0, r0 + n) of device views (row 0 of a view is row r0) and a device output.
using ChunkFn = std::function<Status(int64_t r0, int64_t n, const LogitsView* v, float* out)>;
Status for_each_chunk(Call& call, const RowIO& io, const ExecContext& ctx, const ChunkFn& fn);

// The ERR_NON_FINITE message of row r of `l` (host or device memory: a device row is copied first).
Status bad_row(const LogitsView& l, const char* what, int64_t r);
// bad_pair_at (core/checks.h) for row r of a student/teacher pair, on the device or the host.
Status bad_pair(const LogitsView& s, const LogitsView& t, int64_t r);

// ---- launch shape of a row pass ----

// Rows are split into `parts` contiguous pieces (long rows, few rows: enough blocks for every SM), each
// piece handled by a group of G threads: a warp for short rows (8 row pieces per block), a whole block
// for long ones.
struct RowGrid {
  int group = kThreads;  // G: 32 or kThreads
  int64_t parts = 1;
  int64_t items = 0;     // rows * parts
  unsigned blocks = 0;
};
RowGrid row_grid(const Device& d, int64_t rows, int64_t vocab);
// The grid `g` (its parts fixed for the whole call) over a chunk of n rows.
inline RowGrid sub_grid(const RowGrid& g, int64_t n) {
  RowGrid s = g;
  s.items = n * g.parts;
  const int64_t per_block = kThreads / g.group;
  s.blocks = static_cast<unsigned>((s.items + per_block - 1) / per_block);
  return s;
}
// A per-row array from row r0 (null stays null).
template <typename T>
T* at(T* p, int64_t r0) {
  return p == nullptr ? nullptr : p + r0;
}

// ---- the frame of an op driver ----

// Logits of at most this many elements, on the device with nothing staged, make a small call: its
// per-row arrays are mapped (Call), read and written by the kernels in page-locked memory.
constexpr int64_t kMappedElems = int64_t{1} << 22;

// What every op driver opens first: the device locked for the whole call, its logits (one view, or a
// student and a teacher) and optional rows x vocab output, the grid and the rows per chunk, the call plan
// with a per-row flags output (`flags`, read after run()), and per-row counters for the row kernels.
class RowPass {
 public:
  Status open(const ExecContext& ctx, const LogitsView& a, const LogitsView* b = nullptr, float* out = nullptr);
  Device& device() const { return *lock_; }
  // Scratch of `bytes` per (row, part) item of a chunk, or per row of a chunk.
  int item_scratch(int64_t bytes) { return call.scratch(chunk * grid.parts * bytes); }
  int row_scratch(int64_t bytes) { return call.scratch(chunk * bytes); }
  // The flags of a chunk's rows from r0, and the per-row counters (every row kernel leaves them zero).
  int32_t* flags_at(int64_t r0) const { return call.ptr<int32_t>(flags_slot_) + r0; }
  int32_t* counters() const { return lock_->counters; }
  // Commits the plan, runs fn over the chunks (for_each_chunk) and finishes the call.
  Status run(const ExecContext& ctx, const ChunkFn& fn);
  // The first row flagged, or -1.
  int64_t first_flagged() const;

  Call call;
  RowIO io;
  RowGrid grid;
  int64_t rows = 0, vocab = 0, chunk = 0;
  std::vector<int32_t> flags;

 private:
  DeviceLock lock_;
  int flags_slot_ = -1;
};

}  // namespace cuda
}  // namespace gear
