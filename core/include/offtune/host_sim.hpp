// The host-sim device: an emulated accelerator on the CPU, a documented mode of offtune, not a test
// double. "Device" tensors are ordinary CPU tensors; offtune replaces c10's CPU allocator with an
// accounting allocator that counts their bytes (current and peak). Offloaded copies live in
// offtune's host pool, which that counter does not see, so the device figures behave as a GPU's
// would.
//
// The emulator models what makes offloading hard to get right on a GPU:
// - Streams. Every thread has a current compute stream (kDefaultStream unless a StreamGuard says
//   otherwise); each offloader has a copy stream, a worker thread that runs copies in issue order
//   on raw memory. Compute runs at once on the calling thread.
// - The caching allocator's stream rule. Each device block belongs to the stream it was allocated
//   on; freeing it makes it reusable by that stream's later work, and by no other stream. With
//   set_caching(true) a freed block is kept per stream and handed to the next allocation of the
//   same size on that stream at once (a block freed too early is overwritten, as on a GPU).
// - Stream order, checked. With set_check_streams(true) every copy is tracked against the blocks it
//   touches, and two rules are checked by happens-before (stream waits, host observations of a
//   copy's completion, record_stream), not by timing: a block is not freed while a copy that may
//   still run reads or writes it, unless its stream waited for the copy or the block was recorded
//   on the copy stream; and a reloaded tensor is not handed to autograd on a stream that has not
//   waited for its reload. Violations are recorded (take_stream_races()) and the block is poisoned
//   at once, so that the values go wrong too.
//
// - Time, optionally as a named GPU would spend it (set_device_model): every ATen op advances a
//   simulated compute clock by its modelled duration (offtune/device_model.hpp), every side-stream
//   copy a simulated copy clock by the link model's time, and the engine's waits join the two. The
//   engine's event times, fence completions and the profiler's step times then read that clock:
//   identical from run to run and from machine to machine. The copies still run (the values are
//   real); only time is modelled.
//
// install() is idempotent and process-wide; the first host-sim ActivationOffloader calls it. Call
// it yourself before building the model if parameter bytes should count from the start. Every
// setting here is process-wide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "offtune/device_model.hpp"

namespace at {
class Tensor;
}

namespace offtune::host_sim {

void install();
bool installed();

// Intra-op threads for a training program. On host-sim, compute and the copy thread share the CPU,
// whereas on a GPU the copy engine takes nothing from compute: by default leave one core to the
// copy thread (with every core given to OpenMP, its spinning barriers also starve the copy thread;
// on a 2-core VM that made steps 30-60x slower). requested >= 0 wins; 0 means torch's default.
// Returns the count to pass to at::set_num_threads, or 0 to leave torch's default.
int64_t default_threads(int64_t requested, bool host_sim);

struct Counters {
  int64_t allocated = 0;    // bytes in live CPU ("device") allocations
  int64_t peak = 0;         // of allocated, since reset_peak()
  int64_t allocations = 0;  // allocations made (monotonic)
  // Bytes the emulated caching allocator holds: allocated, plus freed blocks cached for reuse
  // (set_caching) and freed blocks that wait for a copy stream before they may be reused.
  int64_t reserved = 0;
  int64_t peak_reserved = 0;
  // Allocations that released the modelled allocator's cache to fit the capacity (CUDA's
  // num_alloc_retries).
  int64_t cache_flushes = 0;
  // What CUDA's caching allocator would hold from the driver for the same allocations, frees and
  // copy-stream uses, by the model of the pinned torch's allocator and its settings
  // (PYTORCH_CUDA_ALLOC_CONF; docs/memory.md): reserved and its peak, allocated (whole blocks),
  // the free bytes inside partly used segments (fragmentation), and freed blocks that wait for a
  // copy stream before they may be reused. The device's figures (DeviceMemory) report these.
  int64_t modelled_reserved = 0;
  int64_t modelled_peak_reserved = 0;
  int64_t modelled_allocated = 0;
  int64_t modelled_inactive_split = 0;
  int64_t modelled_pending = 0;
};
Counters counters();
void reset_peak();  // both peaks

// Every device allocation and free as it happens, with host_sim::clock_ns() times: what the
// what-if predictor replays (profiler/predict.hpp) and what a memory curve samples where memory
// changes. Called on the allocating or freeing thread, outside the allocator's locks; must be
// thread-safe, must not allocate device memory and must not throw. `data` identifies the block
// while it lives (addresses are reused once it is freed).
class AllocationListener {
 public:
  virtual ~AllocationListener() = default;
  virtual void on_allocate(const void* data, int64_t bytes, int64_t time_ns) noexcept = 0;
  virtual void on_free(const void* data, int64_t bytes, int64_t time_ns) noexcept = 0;
};
// One listener at a time (nullptr: none); the caller keeps it alive until it is replaced.
void set_allocation_listener(AllocationListener* listener);

// Device capacity in bytes (0 = unlimited). An allocation the modelled caching allocator cannot
// place within it (after releasing its cache, as CUDA's does, and asking offloaders to give back
// prefetched buffers they can bring back later) throws c10::OutOfMemoryError, as a GPU would.
void set_capacity(int64_t bytes);
int64_t capacity();

// Debug (stays on once set): fill freed device memory with 0xFF (NaN for floating types) before it
// is returned or cached.
void set_poison(bool on);
bool poison();

// Debug (stays on once set): cache freed blocks per stream and reuse them at once (see above).
void set_caching(bool on);
bool caching();
// Gives every cached block back (torch.cuda.empty_cache), after waiting for the copies that freed
// blocks still wait for.
void empty_cache();
// Gives back cuBLAS's workspaces (torch._C._cuda_clearCublasWorkspaces): with a device model,
// host-sim allocates one per (handle, stream) pair on its first matmul, as torch does
// (DeviceModel::blas_workspace_bytes), and keeps it; empty_cache() leaves them. A run that should
// start as a fresh process calls both. Setting a device model also clears them.
void clear_blas_workspaces();

// Streams. A stream id is a number; kDefaultStream is every thread's stream unless changed.
using StreamId = int64_t;
inline constexpr StreamId kDefaultStream = 0;
StreamId new_stream();      // a new compute stream
StreamId current_stream();  // this thread's current stream
// Makes `stream` this thread's current stream while alive (the emulated CUDAStreamGuard).
class StreamGuard {
 public:
  explicit StreamGuard(StreamId stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  StreamId previous_;
};

// The stream a tensor's block belongs to; -1 when it is not a host-sim device block.
StreamId owner_stream(const at::Tensor& t);

// Debug (stays on once set): check stream order (see above). Off by default: it costs a lock per
// copy and per freed block that a copy touched.
void set_check_streams(bool on);
bool check_streams();
// Violations found since the last call, one line each, oldest first (at most 1000 are kept).
std::vector<std::string> take_stream_races();

// The device model (see above): nullptr turns it off. Validates and copies the model
// (OptionsError). Process-wide: set it before a run, not while one is in progress.
void set_device_model(const DeviceModel* model);
// The model in use, or nullptr; stays valid for the life of the process.
const DeviceModel* device_model();
// The clock that events and step times use: the simulated compute clock with a device model, else
// the steady clock. Nanoseconds, monotonic.
int64_t clock_ns();
struct ModelCounters {
  int64_t kernels = 0;     // ops timed as kernels
  int64_t kernel_ns = 0;   // their modelled time
  int64_t copies = 0;      // copies timed by the link model on a copy stream
  int64_t stalled_ns = 0;  // compute clock time spent waiting for copies
};
// Since the process started (monotonic); take differences.
ModelCounters model_counters();

}  // namespace offtune::host_sim
