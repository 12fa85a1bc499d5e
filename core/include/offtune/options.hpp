// Options of the offload engine: the knobs of the reference `OffloadActivations` plus the ones
// offtune adds (a byte bound on the forward window, backward prefetch, the backend and its link
// model). Validated once, with one clear error per bad value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace offtune {

// Thrown for an invalid option value; what() is one line naming the option and the valid range.
class OptionsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Thrown when the engine cannot run as asked (no GPU for backend cuda, a foreign autograd engine,
// ...).
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where "device" tensors live and how copies run.
enum class BackendKind {
  Auto,     // cuda when a GPU is available, else host-sim (the choice is logged once)
  Cuda,     // c10 CUDA streams and events, pinned host memory, the caching allocator's stats
  HostSim,  // emulated accelerator on the CPU: accounted "device" memory, a copy thread, a link
            // model
};

std::string_view to_string(BackendKind kind);
// Accepts "auto", "cuda", "host-sim" (also "hostsim", "host_sim"); throws OptionsError otherwise.
BackendKind parse_backend(std::string_view text);

// Whose rules the engine follows.
enum class Semantics {
  // offtune's: the window counts offloaded copies in flight and releases a copy as soon as it is
  // known complete; tensors on one storage are copied once; backward prefetches; views of
  // parameters stay; sizes are the storage span a tensor occupies.
  Offtune,
  // The reference's (TRL's and torchtune's OffloadActivations), to measure what its knobs mean:
  // every saved tensor takes an id, kept ones included, and an offload with id T releases the held
  // activations with ids <= T - max_fwd_stash_size, and only those (a finished copy is not
  // released earlier); every offloaded tensor is copied on its own, and with use_streams a tensor
  // at the address and dtype of one still in the window (or of one kept so earlier in that
  // forward) is kept on the device (the newest TRL's storage de-duplication,
  // KeepReason::SharedInWindow); no prefetch (prefetch and max_fwd_stash_bytes are ignored); only
  // leaf tensors that require grad count as parameters (views of them are offloaded; the Python
  // drop-in registers every parameter's storage as TRL does); sizes are element size x number of
  // elements. Not reproduced:
  // its pinned allocation per tensor (offtune's pool serves it) and its freeing of the whole
  // forward window at the first backward node.
  Trl,
};
std::string_view to_string(Semantics semantics);
// Accepts "offtune", "trl"; throws OptionsError otherwise.
Semantics parse_semantics(std::string_view text);

// Which saved tensors an offloader may move.
enum class OffloadSet : uint8_t {
  // Every saved tensor that passes the other rules (size, parameters, ...).
  All,
  // With gradient checkpointing (offtune/checkpoint.hpp): only the checkpoint boundaries, the
  // inputs of checkpointed regions, which are all that a checkpointed forward keeps; everything
  // else
  // saved under the scope stays on the device (KeepReason::NotBoundary). Axolotl's offloaded
  // gradient checkpointing; with use_streams = false, its `activation_offloading: legacy`.
  Boundaries,
};
std::string_view to_string(OffloadSet set);
// Accepts "all", "boundaries"; throws OptionsError otherwise.
OffloadSet parse_offload_set(std::string_view text);

// Where offloaded copies live.
enum class Tier {
  Host,  // pinned (or pageable) host memory only: the reference's behaviour
  Disk,  // every offloaded copy goes on to an arena file in disk_dir; host memory only stages it
  Auto,  // host memory up to host_budget_bytes; beyond it, the oldest copies spill to the file
};
std::string_view to_string(Tier tier);
// Accepts "host", "disk", "auto"; throws OptionsError otherwise.
Tier parse_tier(std::string_view text);

// The device caching allocator's segments (PYTORCH_CUDA_ALLOC_CONF's expandable_segments) while an
// offloader lives. Process-wide: the offloader sets it when it is made and puts the process's
// setting back when it is destroyed (through c10's setAllocatorSettings, as
// torch.cuda.memory._set_allocator_settings does; a setting applies to segments made after it).
// host-sim's model of the allocator follows the same setting (docs/memory.md).
enum class AllocSegments : uint8_t {
  Env,         // leave it as PYTORCH_CUDA_ALLOC_CONF (or an earlier setting) has it
  Fixed,       // expandable_segments:False: segments of fixed size, 2 MiB, 20 MiB or the request's
  Expandable,  // expandable_segments:True: one growing segment per stream and pool
};
std::string_view to_string(AllocSegments segments);
// Accepts "env", "fixed", "expandable"; throws OptionsError otherwise.
AllocSegments parse_alloc_segments(std::string_view text);

// Debug: fault injection for the disk tier (tests). Counted per offloader, from 1.
struct DiskFaults {
  int64_t fail_write = 0;      // the Nth write to the arena file fails (0 = never)
  int64_t fail_read = 0;       // the Nth read from it fails (0 = never)
  int error = 28;              // with this errno: ENOSPC (28), EIO (5), ...
  bool refuse_direct = false;  // open as if the file system refused O_DIRECT (as tmpfs did)
};

// Cost model of the host<->device link on host-sim: a copy of n bytes takes at least
// latency_ns + n / bandwidth. With every field 0 copies cost only their memcpy.
struct LinkModel {
  double pinned_gbps = 0.0;    // GB/s (1e9 bytes/s) for pinned host memory; 0 = unlimited
  double pageable_gbps = 0.0;  // GB/s for pageable host memory; 0 = half of pinned_gbps
  int64_t latency_ns = 0;      // fixed cost per copy

  bool enabled() const { return pinned_gbps > 0.0 || latency_ns > 0; }
  // Time a copy of `bytes` takes under this model, in nanoseconds (0 when disabled).
  int64_t copy_ns(int64_t bytes, bool pinned) const;
  // Planning profiles, about 75-80% of the link's per-direction peak for pinned memory (what
  // cudaMemcpyAsync reaches in practice), less for pageable memory (a staging copy on the CPU).
  // PCIe 4.0 x16 (31.5 GB/s per direction, PCI-SIG): 24 GB/s pinned, 10 GB/s pageable, 10 us.
  static LinkModel pcie4();
  // PCIe 5.0 x16 (63 GB/s per direction, PCI-SIG): 48 GB/s pinned, 16 GB/s pageable, 8 us.
  static LinkModel pcie5();
  // NVLink-C2C of Grace Hopper (450 GB/s per direction, NVIDIA GH200 whitepaper): 350 GB/s
  // pinned, 120 GB/s pageable, 3 us.
  static LinkModel nvlink_c2c();
};

struct OffloadOptions {
  // Offloaded copies go to page-locked host memory (from offtune's pool) rather than pageable
  // memory.
  bool use_pin_memory = true;
  // Copies run on a side stream, overlapped with compute; false is the reference's single-stream
  // ("legacy") mode, where copies run on the compute stream.
  bool use_streams = true;
  // Tensors smaller than this many bytes stay on the device (bytes of the storage span they
  // occupy).
  int64_t min_offload_size = 1024;
  // Forward window: how many offloaded tensors may still be in flight (their device memory held
  // until their copy completes) before forward waits for the oldest. Must be >= 1.
  int64_t max_fwd_stash_size = 5;
  // Optional byte bound on the same window; 0 = count only. (The reference counts tensors only, so
  // a window of 5 can hold 5 GiB.)
  int64_t max_fwd_stash_bytes = 0;
  // Backward prefetch: how many offloaded tensors to start bringing back ahead of their use. 0 is
  // the reference's behaviour (each tensor is reloaded when autograd asks for it). A prefetch never
  // causes an out-of-memory: it is skipped when the device lacks room for it, and prefetched
  // buffers not yet used are given back when an allocation would otherwise fail (both counted in
  // OffloadStats), so a step that fits with prefetch 0 fits with any prefetch.
  int64_t prefetch = 1;
  // Optional bound on the bytes of prefetched buffers not yet used; 0 = only the count above.
  int64_t max_prefetch_bytes = 0;
  BackendKind backend = BackendKind::Auto;
  // CUDA device for backend cuda; -1 = the current device when the offloader is created. Tensors
  // saved on another GPU stay where they are (KeepReason::OtherDevice, with one warning): use one
  // offloader per device.
  int device_index = -1;
  // Warn (once per crossing) when system RAM use goes above this percentage while offloading.
  double host_ram_warn_percent = 60.0;
  // Host pool: the largest shared slab of pinned memory. The pool reserves what the copies need:
  // slabs of an eighth of what it holds (2 MiB steps, from 2 MiB up to this size; a larger tensor
  // gets a slab of its own, rounded up by at most 1/16 of it and 2 MiB), at most 1.25 x the peak of
  // host copies + 2 MiB (docs/engine.md, "Pinned memory from a pool").
  int64_t host_pool_slab_bytes = int64_t{64} << 20;
  // Disk tier (docs/disk-tier.md). Where offloaded copies live; see Tier.
  Tier tier = Tier::Host;
  // The most bytes of host copies alive at once. Auto: beyond it the oldest copies are written to
  // disk and their host memory reused (0 = half of the RAM available when the offloader is made).
  // Disk: the staging memory that copies pass through on their way to disk, forward waits when it
  // is full (0 = 256 MiB). Unused with tier host.
  int64_t host_budget_bytes = 0;
  // Directory of the arena file (its file system must have room for a step's spilled copies).
  // Empty = $TMPDIR, else /tmp. The file has no name: it is gone when the process ends, however.
  std::string disk_dir;
  // Size limit of the arena file; 0 = grows as needed (it is preallocated and reused by later
  // steps, never shrunk while the offloader lives).
  int64_t disk_arena_bytes = 0;
  // Backward reads copies back from disk ahead of their use, in backward order, up to this many
  // bytes staged in host memory (a read takes milliseconds: a prefetch by count would not cover
  // it). 0 = read each copy when autograd asks for it.
  int64_t disk_read_ahead_bytes = int64_t{256} << 20;
  // The offloader measures the disk's write and read bandwidth when it opens the arena (64 MiB
  // each way) and refuses a disk slower than this many GB/s (tier disk: EngineError; tier auto:
  // a warning, and copies stay in host memory). 0 = no measurement, no check.
  double disk_min_gbps = 0.25;
  // Debug: make the Nth disk write or read fail (tests of the error paths).
  DiskFaults debug_disk_faults{};
  // host-sim only: the link's cost.
  LinkModel link{};
  // Whose rules the engine follows (see Semantics).
  Semantics semantics = Semantics::Offtune;
  // Which saved tensors may be offloaded (see OffloadSet).
  OffloadSet offload = OffloadSet::All;
  // The device allocator's segments while this offloader lives (see AllocSegments).
  AllocSegments alloc_segments = AllocSegments::Env;
  // host-sim only (debug): fill freed device and host-pool memory with 0xFF, so that a buffer freed
  // or reused too early shows up as NaNs instead of passing by luck.
  bool poison_freed = false;
  // host-sim only (debug): cache freed device blocks per stream and hand them to the next
  // allocation of the same size at once, as CUDA's caching allocator does (host_sim::set_caching).
  bool reuse_freed = false;
  // host-sim only (debug): check stream order by happens-before and record violations
  // (host_sim::set_check_streams, host_sim::take_stream_races).
  bool check_streams = false;
  // Correctness sentinel (off by default; costs a hash of every offloaded byte at pack and of
  // every byte handed back at unpack): each offloaded copy is checksummed at pack, from the tensor
  // autograd saved, and checked at unpack on the bytes handed back, whichever way they came (the
  // forward window, host memory, the disk tier). A mismatch is an EngineError naming the tensor,
  // its size and where its copy went. Use it to check offtune's copies in your own training loop
  // (host-sim: xxHash of both ends on the CPU; cuda: a checksum computed on the device by torch
  // ops, at pack on the source and at unpack on the reloaded buffer, which syncs each unpack).
  bool verify = false;
  // Debug: hold every side-stream copy back by this many nanoseconds (host-sim sleeps on the copy
  // thread; cuda runs a device-side sleep on the copy stream first), so that a missing wait or an
  // early free has room to show as wrong values. 0 = off.
  int64_t debug_copy_delay_ns = 0;

  // Throws OptionsError naming the first bad field.
  void validate() const;
};

}  // namespace offtune
