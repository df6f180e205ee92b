// One op call on the device (call.h): the plan of its per-row arrays, the chunk runner, the error
// messages of bad rows, the launch grid, and the frame of an op driver.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../core/checks.h"
#include "call.h"

namespace gear {
namespace cuda {

// ---- Call ----

int Call::add(int kind, const void* in, void* out, int64_t bytes) {
  if ((kind == kInput && in == nullptr) || (kind == kOutput && out == nullptr) || bytes <= 0) return -1;
  Slot s;
  s.in = in;
  s.out = out;
  s.size = bytes;
  s.bytes = (bytes + 255) / 256 * 256;  // every slot 256-byte aligned
  s.kind = kind;
  slots_.push_back(s);
  (kind == kInput ? in_bytes_ : kind == kOutput ? out_bytes_ : scratch_bytes_) += s.bytes;
  return static_cast<int>(slots_.size()) - 1;
}
int Call::input(const void* host, int64_t bytes) { return add(kInput, host, nullptr, bytes); }
int Call::output(void* host, int64_t bytes) { return add(kOutput, nullptr, host, bytes); }
int Call::scratch(int64_t bytes) { return add(kScratch, nullptr, nullptr, bytes); }

// The device arena holds every slot (inputs, outputs, scratch: a mapped call uses only its scratch) and
// the page-locked arena the inputs and outputs, at the same offsets.
Status Call::size_arenas() {
  Device& d = *d_;
  const int64_t device_bytes = in_bytes_ + out_bytes_ + scratch_bytes_, pinned_bytes = in_bytes_ + out_bytes_;
  if (device_bytes > d.arena_bytes) {
    device_free(d, d.arena);
    d.arena = nullptr;
    d.arena_bytes = 0;
    void* p = nullptr;
    GEAR_TRY(device_alloc(d, std::max<int64_t>(device_bytes, int64_t{1} << 20), &p));
    d.arena = static_cast<char*>(p);
    d.arena_bytes = std::max<int64_t>(device_bytes, int64_t{1} << 20);
  }
  if (pinned_bytes > d.pinned_bytes) {
    // No transfer or kernel of the previous call uses it (every call synchronises). It grows
    // geometrically: row counts that grow call by call do not pay a cudaFreeHost + cudaHostAlloc (both
    // synchronising) each.
    const int64_t exact = std::max<int64_t>(pinned_bytes, int64_t{1} << 20);
    int64_t n = std::max<int64_t>(exact, 2 * d.pinned_bytes);
    if (d.pinned != nullptr) quiet(cudaFreeHost(d.pinned));
    d.pinned = d.pinned_dev = nullptr;
    d.pinned_bytes = 0;
    void* p = nullptr;
    const char* what = "the call's per-row arrays";
    Status st = host_alloc(n, &p, what);
    if (st.code == Code::OutOfMemory && n > exact) st = host_alloc(n = exact, &p, what);
    GEAR_TRY(st);
    d.pinned = static_cast<char*>(p);
    d.pinned_bytes = n;
    // Its device address: the same pointer under unified addressing (every 64-bit platform); without
    // one, calls stay staged.
    void* dev = nullptr;
    if (cudaHostGetDevicePointer(&dev, p, 0) == cudaSuccess) {
      d.pinned_dev = static_cast<char*>(dev);
    } else {
      cudaGetLastError();
      d.pinned_dev = d.unified ? d.pinned : nullptr;
    }
  }
  return Status::ok();
}

Status Call::commit() {
  // Layout, in the device arena and in the page-locked arena alike: inputs, then outputs, then scratch
  // (device only).
  int64_t in_off = 0, out_off = in_bytes_, scratch_off = in_bytes_ + out_bytes_;
  for (Slot& s : slots_) {
    int64_t& off = s.kind == kInput ? in_off : s.kind == kOutput ? out_off : scratch_off;
    s.offset = off;
    off += s.bytes;
  }
  GEAR_TRY(size_arenas());
  Device& d = *d_;
  mapped_ = want_mapped_ && d.pinned_dev != nullptr;
  for (const Slot& s : slots_)
    if (s.kind == kInput) std::memcpy(d.pinned + s.offset, s.in, static_cast<size_t>(s.size));
  if (mapped_) {  // the kernels read and write the page-locked arena: nothing to transfer
    std::memset(d.pinned + in_bytes_, 0, static_cast<size_t>(out_bytes_));
    return Status::ok();
  }
  if (in_bytes_ > 0)
    GEAR_CUDA_TRY(cudaMemcpyAsync(d.arena, d.pinned, static_cast<size_t>(in_bytes_), cudaMemcpyHostToDevice, d.compute));
  if (out_bytes_ > 0) GEAR_CUDA_TRY(cudaMemsetAsync(d.arena + in_bytes_, 0, static_cast<size_t>(out_bytes_), d.compute));
  return Status::ok();
}

Status Call::finish() {
  Device& d = *d_;
  GEAR_CUDA_TRY(cudaGetLastError());  // a launch that failed
  if (out_bytes_ > 0 && !mapped_)
    GEAR_CUDA_TRY(cudaMemcpyAsync(d.pinned + in_bytes_, d.arena + in_bytes_, static_cast<size_t>(out_bytes_),
                                  cudaMemcpyDeviceToHost, d.compute));
  GEAR_CUDA_TRY(cudaStreamSynchronize(d.compute));
  for (const Slot& s : slots_)
    if (s.kind == kOutput) std::memcpy(s.out, d.pinned + s.offset, static_cast<size_t>(s.size));
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

namespace {

// Everything on the device: one piece, its kernels timed when asked (kernel_ms).
Status run_on_device(Device& d, const RowIO& io, const ChunkFn& fn) {
  LogitsView v[2];
  for (int i = 0; i < io.inputs; ++i) v[i] = *io.in[i];
  const bool timed = d.time_kernels;
  if (timed) GEAR_CUDA_TRY(cudaEventRecord(d.kernels_begin, d.compute));
  GEAR_TRY(fn(0, io.in[0]->rows, v, io.out));
  GEAR_TRY(cuda_status(cudaGetLastError(), "kernel launch"));
  if (timed) {
    GEAR_CUDA_TRY(cudaEventRecord(d.kernels_end, d.compute));
    d.last_kernel_ms = 0.f;  // read once the call has synchronised (kernel_ms)
  }
  return Status::ok();
}

// The device buffers of a staged call: double-buffered copies of host inputs and of a host output, and
// the events that say when a buffer's kernels have read it. Freed (stream-ordered) when it goes.
struct StagingBuffers {
  Device& d;
  void* in[2][2] = {};
  void* out[2] = {};
  cudaEvent_t consumed[2] = {nullptr, nullptr};
  explicit StagingBuffers(Device& dev) : d(dev) {}
  ~StagingBuffers() {
    for (int b = 0; b < 2; ++b) {
      if (consumed[b]) quiet(cudaEventDestroy(consumed[b]));
      for (void* p : {in[b][0], in[b][1], out[b]}) device_free(d, p);
    }
  }
  Status alloc(const RowIO& io, int64_t rows, int64_t chunk, bool host_in, bool host_out) {
    const LogitsView& first = *io.in[0];
    const int64_t row_bytes = first.vocab * dtype_size(first.dtype);
    for (int b = 0; b < 2 && b * chunk < rows; ++b) {
      GEAR_CUDA_TRY(cudaEventCreateWithFlags(&consumed[b], cudaEventDisableTiming));
      for (int i = 0; host_in && i < io.inputs; ++i) GEAR_TRY(device_alloc(d, chunk * row_bytes, &in[b][i]));
      if (host_out) GEAR_TRY(device_alloc(d, chunk * first.vocab * 4, &out[b]));
    }
    return Status::ok();
  }
};

// Host inputs or a host output: chunks of rows through double-buffered device copies, each chunk's
// upload overlapping the previous chunk's kernels.
Status run_staged(Device& d, const RowIO& io, const ExecContext& ctx, const ChunkFn& fn) {
  const LogitsView& first = *io.in[0];
  const int64_t rows = first.rows, vocab = first.vocab;
  const bool host_in = !first.on_device, host_out = io.out != nullptr && !io.out_on_device;
  const int64_t row_bytes = vocab * dtype_size(first.dtype), chunk = chunk_rows(io);
  StagingBuffers buf(d);
  GEAR_TRY(buf.alloc(io, rows, chunk, host_in, host_out));
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
      v[i].data = static_cast<const char*>(src.data) + r0 * row_bytes;
      if (!host_in) continue;
      // The buffer's previous chunk (k - 2) has been read by its kernels before it is overwritten.
      if (k >= 2 && i == 0) GEAR_CUDA_TRY(cudaStreamWaitEvent(d.copy, buf.consumed[b], 0));
      GEAR_TRY(upload_bytes(d, buf.in[b][i], v[i].data, n * row_bytes, ctx, false, false));
      v[i].data = buf.in[b][i];
    }
    float* out = nullptr;
    if (io.out != nullptr) out = host_out ? static_cast<float*>(buf.out[b]) : io.out + r0 * vocab;
    GEAR_TRY(fn(r0, n, v, out));
    GEAR_CUDA_TRY(cudaGetLastError());
    GEAR_CUDA_TRY(cudaEventRecord(buf.consumed[b], d.compute));
    if (host_out) GEAR_TRY(download_bytes(d, io.out + r0 * vocab, out, n * vocab * 4, ctx));
  }
  return Status::ok();
}

}  // namespace

Status for_each_chunk(Call& call, const RowIO& io, const ExecContext& ctx, const ChunkFn& fn) {
  const bool staged = !io.in[0]->on_device || (io.out != nullptr && !io.out_on_device);
  return staged ? run_staged(call.device(), io, ctx, fn) : run_on_device(call.device(), io, fn);
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
    // Enough blocks for every multiprocessor (4 each), each part still a step of 16 logits per thread
    // (few rows: the pass is one memory latency or two, its pieces merged by one warp).
    const int64_t want = (4 * static_cast<int64_t>(d.sms) + rows - 1) / rows;
    const int64_t most = std::max<int64_t>(1, vocab / (16 * kThreads));
    g.parts = std::max<int64_t>(1, std::min(want, most));
  }
  g.items = rows * g.parts;
  const int64_t per_block = kThreads / g.group;
  g.blocks = static_cast<unsigned>((g.items + per_block - 1) / per_block);
  return g;
}

// ---- the frame of an op driver ----

namespace {
// Counters for `rows` rows on device `d`, zero (grown on the compute stream, before the call's kernels).
Status ensure_counters(Device& d, int64_t rows) {
  if (rows <= d.counter_rows) return Status::ok();
  device_free(d, d.counters);
  d.counters = nullptr;
  d.counter_rows = 0;
  const int64_t n = std::max<int64_t>(rows, 4096);
  void* p = nullptr;
  GEAR_TRY(device_alloc(d, n * 4, &p));
  GEAR_CUDA_TRY(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * 4, d.compute));
  d.counters = static_cast<int32_t*>(p);
  d.counter_rows = n;
  return Status::ok();
}
}  // namespace

Status RowPass::open(const ExecContext& ctx, const LogitsView& a, const LogitsView* b, float* out) {
  GEAR_TRY(lock_.open(ctx.device));
  io.in[0] = &a;
  io.in[1] = b;
  io.inputs = b != nullptr ? 2 : 1;
  io.out = out;
  io.out_on_device = ctx.out_on_device;
  rows = a.rows;
  vocab = a.vocab;
  chunk = chunk_rows(io);
  grid = row_grid(*lock_, rows, vocab);
  // Mapped: a small forward call with everything on the device (a backward's kernels OR flags into
  // its per-row array with atomics, kept in device memory).
  const bool staged = !a.on_device || (out != nullptr && !ctx.out_on_device);
  call.bind(*lock_, out == nullptr && !staged && rows * vocab <= kMappedElems);
  flags.assign(static_cast<size_t>(rows), 0);
  flags_slot_ = call.output(flags.data(), rows * 4);
  return Status::ok();
}

Status RowPass::run(const ExecContext& ctx, const ChunkFn& fn) {
  GEAR_TRY(call.commit());
  GEAR_TRY(ensure_counters(*lock_, grid.parts > 1 ? chunk : 0));
  GEAR_TRY(for_each_chunk(call, io, ctx, fn));
  return call.finish();
}

int64_t RowPass::first_flagged() const {
  for (int64_t r = 0; r < rows; ++r)
    if (flags[r] != 0) return r;
  return -1;
}

}  // namespace cuda
}  // namespace gear
