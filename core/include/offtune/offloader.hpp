// The offload engine's public API: an ActivationOffloader (the C++ `OffloadActivations`), the RAII
// OffloadScope under which saved tensors are offloaded, and regions that opt code out of it.
//
//   offtune::ActivationOffloader offloader(opts);       // once, reused every step
//   { auto scope = offloader.scope(); loss = model(x); } // forward: big saved tensors go to host
//   loss.backward();                                     // backward: they come back, prefetched
//
// Scopes nest per thread; the innermost wins, as with Python's saved_tensors_hooks. Saved tensors
// keep a handle on their offloader, so backward (on any autograd thread) needs no active scope.
// Tensors that backward itself saves (create_graph, checkpoint recompute), on whichever thread
// autograd runs it, go to the innermost scope of the thread that called backward() (none inside a
// NoOffloadRegion), else to the offloader of the graph being backwarded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "offtune/observer.hpp"
#include "offtune/options.hpp"

namespace at {
class Tensor;
}

namespace offtune {

namespace detail {
class Context;
}

// Device memory as the backend sees it: the caching allocator's stats on cuda, the accounting
// allocator's on host-sim.
struct DeviceMemory {
  int64_t allocated = 0;       // bytes in live tensors now
  int64_t peak_allocated = 0;  // since the last reset_peak()
  // Held by the caching allocator from the device: CUDA's on cuda; on host-sim what CUDA's would
  // hold for the same allocations (its model, core/src/alloc_model.hpp).
  int64_t reserved = 0;
  int64_t peak_reserved = 0;
  // Device memory the process holds outside the caching allocator (the CUDA context, kernel
  // images, the libraries' own state). Cuda: the device's used memory (cudaMemGetInfo) less
  // reserved, now: other processes on the same GPU count in it. Host-sim: the device model's
  // context_bytes (0 without a device model).
  int64_t outside_allocator = 0;
  // What the process takes of the device at its peak: peak reserved plus what lies outside.
  int64_t peak_device_total() const { return peak_reserved + outside_allocator; }
};

// The same figures with no offloader: for a front end that measures a training loop that may have
// none (its baseline). `backend` must be resolved (Cuda: the current device; HostSim: the
// accounting allocator's counters, which count only once host_sim::install() ran). Auto throws
// OptionsError.
DeviceMemory device_memory(BackendKind backend);
// Starts the peaks of device_memory(backend) over from the current figures.
void reset_peak_device_memory(BackendKind backend);

// Counters since construction (monotonic).
struct OffloadStats {
  int64_t packed = 0;           // saved tensors seen
  int64_t offloaded = 0;        // copies to host issued
  int64_t deduplicated = 0;     // saved tensors that shared an earlier host copy
  int64_t kept = 0;             // saved tensors left on the device
  int64_t offloaded_bytes = 0;  // bytes copied to host
  int64_t reloaded = 0;         // copies back to the device (prefetched ones included)
  int64_t reloaded_bytes = 0;
  int64_t prefetched = 0;          // reloads issued ahead of use
  int64_t prefetch_skipped = 0;    // prefetches not issued: no room on the device (or over
                                   // max_prefetch_bytes); the tensor is reloaded when used
  int64_t prefetch_dropped = 0;    // prefetched buffers given back unused because an allocation
                                   // needed the memory
  int64_t from_fwd_stash = 0;      // unpacks served from the forward window (no copy back needed)
  int64_t window_waits = 0;        // times forward waited for an offload copy
  int64_t record_streams = 0;      // device blocks released with a copy or another stream possibly
                                   // still using them, and so recorded on that stream
  int64_t pageable_fallbacks = 0;  // host blocks that could not be pinned
  // Disk tier (tier disk or auto).
  int64_t spilled = 0;             // host copies written to the arena file
  int64_t disk_written_bytes = 0;  // bytes of those writes
  int64_t disk_reads = 0;          // copies read back from disk (read-ahead included)
  int64_t disk_read_bytes = 0;
  int64_t disk_read_ahead = 0;  // reads issued ahead of use
  int64_t spill_waits = 0;      // times forward waited for writes (host budget or staging full)
  // Writes to the arena file that failed (full disk, I/O error): their copies stayed in host
  // memory and the step went on from there (the first failure is warned about, once).
  int64_t disk_write_failures = 0;
  // OffloadOptions::verify: unpacks of offloaded copies whose bytes were checked against pack's.
  int64_t verified = 0;
};

// What the engine holds right now. After a step (backward done, graph freed) every field but
// host_pool_reserved_bytes is back to zero: that is the engine's resting state.
struct ResidentState {
  int64_t tracked = 0;          // saved-tensor entries alive (graphs not yet backwarded or freed)
  int64_t host_bytes = 0;       // bytes of host copies alive
  int64_t fwd_stash_count = 0;  // forward window: offloads whose copy may still be in flight
  int64_t fwd_stash_bytes = 0;  // device bytes the window keeps alive (whole storages)
  int64_t bwd_stash_count = 0;  // reloaded/prefetched buffers held on the device
  int64_t bwd_stash_bytes = 0;
  int64_t pending_host_frees = 0;  // host blocks waiting for their reload copy to finish
  int64_t host_pool_in_use_bytes = 0;
  int64_t host_pool_reserved_bytes = 0;  // kept for reuse by the pool; see release_cached_memory()
  int64_t disk_bytes = 0;                // bytes of copies held in the arena file (disk tier)
  int64_t disk_io_in_flight = 0;         // disk writes and reads queued or running
  int64_t disk_arena_bytes = 0;  // size of the arena file, kept for reuse like the pool's slabs
  bool resting() const {
    return tracked == 0 && host_bytes == 0 && fwd_stash_count == 0 && bwd_stash_count == 0 &&
           pending_host_frees == 0 && host_pool_in_use_bytes == 0 && disk_bytes == 0 &&
           disk_io_in_flight == 0;
  }
};

// The disk tier as opened (tier disk or auto), for reports and for deciding whether it pays.
struct DiskTierInfo {
  bool enabled = false;     // an arena file is open (false for tier host, or a disk found too slow)
  std::string directory;    // where the (nameless) arena file lives
  std::string file_system;  // "ext4", "tmpfs", "xfs", ... (or the magic number in hex)
  bool direct_io = false;   // O_DIRECT in use (false where the file system refuses it)
  bool tmpfile = false;     // opened with O_TMPFILE (else created and unlinked at once)
  double write_gbps = 0.0;  // measured when opened (GB/s, 1e9 bytes/s); 0 when not measured
  double read_gbps = 0.0;
};

class OffloadScope;
class ExternalHooks;

// What brings saved tensors to an offloader.
enum class HookCarrier : uint8_t {
  // offtune's autograd engine, installed as libtorch's default by the first such offloader (a C++
  // program): saved tensors reach the offloader under its OffloadScope.
  OfftuneEngine,
  // Another engine's saved-tensor hooks: in a Python process, torch's saved_tensors_hooks calling
  // ExternalHooks (offtune/external_hooks.hpp). Nothing is installed, and scope() throws.
  External,
};

class ActivationOffloader {
 public:
  // Validates the options (OptionsError) and resolves the backend (EngineError when cuda is asked
  // for and no GPU is usable, or, with HookCarrier::OfftuneEngine, when another autograd engine,
  // e.g. Python's, is installed).
  explicit ActivationOffloader(OffloadOptions options = {},
                               HookCarrier carrier = HookCarrier::OfftuneEngine);
  ~ActivationOffloader();
  ActivationOffloader(const ActivationOffloader&) = delete;
  ActivationOffloader& operator=(const ActivationOffloader&) = delete;

  // Saved tensors created while the returned scope lives (on this thread) are managed by this
  // offloader. Throws EngineError for an offloader made with HookCarrier::External: no engine of
  // offtune's would hear the scope.
  [[nodiscard]] OffloadScope scope();
  HookCarrier carrier() const { return carrier_; }

  // The tensor's storage is never offloaded (parameters, buffers, caches). Held weakly.
  void never_offload(const at::Tensor& tensor);
  // Module-level exclusion (see ModuleRegion): calls under ModuleRegion(m) for a registered m save
  // tensors normally. The pointer is an identity only; it is never dereferenced.
  void exclude_module(const void* module);
  bool is_excluded(const void* module) const;

  // Attach (or, with nullptr, detach) an observer. Not while a scope or backward is running.
  void set_observer(std::shared_ptr<Observer> observer);

  const OffloadOptions& options() const;
  BackendKind backend() const;  // resolved: Cuda or HostSim
  OffloadStats stats() const;
  ResidentState resident() const;
  DeviceMemory device_memory() const;
  void reset_peak_device_memory();
  DiskTierInfo disk_tier() const;
  // Block until every copy this offloader issued has finished (disk writes and reads included).
  void synchronize();
  // Return unused host-pool slabs to the system.
  void release_cached_memory();

 private:
  friend class OffloadScope;
  friend class LayerOffloader;  // shares the backend, copy stream and observer (layer_offload.hpp)
  friend class ExternalHooks;
  std::shared_ptr<detail::Context> ctx_;
  HookCarrier carrier_ = HookCarrier::OfftuneEngine;
  // The process's expandable_segments setting before options().alloc_segments changed it, put
  // back by the destructor: -1 when this offloader changed nothing.
  int previous_expandable_ = -1;
};

// While alive, saved tensors on this thread go through `offloader` (innermost scope wins). It may
// be moved, also to another thread, and end there: it still ends on the thread that made it (that
// thread stops offloading into it before it next saves a tensor), and the other thread's own scopes
// are untouched.
class OffloadScope {
 public:
  OffloadScope(OffloadScope&& other) noexcept;
  OffloadScope& operator=(OffloadScope&&) = delete;
  OffloadScope(const OffloadScope&) = delete;
  OffloadScope& operator=(const OffloadScope&) = delete;
  ~OffloadScope();

 private:
  friend class ActivationOffloader;
  explicit OffloadScope(std::shared_ptr<detail::Context> ctx);
  std::shared_ptr<detail::Context> ctx_;
  uint64_t token_ = 0;  // its frame on this thread's stack (0 once moved from)
};

// The C++ `NoOpManager`: inside it, saved tensors are saved normally even under an OffloadScope.
class NoOffloadRegion {
 public:
  NoOffloadRegion();
  ~NoOffloadRegion();
  NoOffloadRegion(const NoOffloadRegion&) = delete;
  NoOffloadRegion& operator=(const NoOffloadRegion&) = delete;

 private:
  uint64_t token_;
};

// What a HookFloorScope's hook does with each saved tensor.
enum class HookFloor : uint8_t {
  // Keeps it and hands it back: what autograd itself spends on any C++ hook (it detaches the
  // tensor at pack and rebuilds a variable at unpack), a floor offtune's hooks cannot go below.
  NoOp,
  // Copies its bytes to host memory at pack and into a new tensor on its device at unpack, on the
  // calling thread, with no stream, window, pool or bookkeeping: the least a hook that moves every
  // saved tensor must do (a device allocation, a tensor and two copies). A tensor that is not
  // contiguous, or has no storage, is kept as NoOp keeps it.
  Copy,
};

// For benchmarks: while alive, every tensor autograd saves on this thread gets the floor hook of
// `kind` and no offloader sees it. `offtune-bench --section hooks` reports offtune's cost above
// these floors. Innermost wins, as with scopes.
class HookFloorScope {
 public:
  explicit HookFloorScope(HookFloor kind = HookFloor::NoOp);
  ~HookFloorScope();
  HookFloorScope(const HookFloorScope&) = delete;
  HookFloorScope& operator=(const HookFloorScope&) = delete;

 private:
  uint64_t token_;
};

// Marks the forward of one module. If the innermost active offloader excludes `module` (an output
// head found by make_offloader_for()), the region behaves as a NoOffloadRegion; otherwise it costs
// a thread-local read. Model code wraps submodule calls in it: the C++ stand-in for the forward
// pre-hooks the Python factory registers.
class ModuleRegion {
 public:
  explicit ModuleRegion(const void* module);
  ~ModuleRegion();
  ModuleRegion(const ModuleRegion&) = delete;
  ModuleRegion& operator=(const ModuleRegion&) = delete;

 private:
  uint64_t token_ = 0;
};

// True when an offload scope is active on this thread (and no no-offload region is innermost).
bool offloading_active();

}  // namespace offtune
