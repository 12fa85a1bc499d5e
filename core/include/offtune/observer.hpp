// Typed events the engine emits while it packs, copies, stashes and unpacks saved tensors, and
// spans that bracket its own work (the pack and unpack hooks, blocking waits) as it happens. The
// profiler implements Observer; with no observer attached the engine does nothing but test one
// pointer.
//
// Threads: events arrive on the forward thread and on autograd's backward threads, never under the
// engine's lock (an observer may call the offloader's stats() or resident()). An observer must be
// thread-safe. Times are host_sim::clock_ns() nanoseconds: the steady clock, or on host-sim with a
// device model the simulated one. A copy's completion is reported when the engine
// next notices it (a hook, the end of a backward, synchronize()), with the time the copy finished.
// An exception from an event is caught and warned about.
#pragma once

#include <cstdint>
#include <string_view>

#include "offtune/ids.hpp"

namespace offtune {

enum class PackDecision : uint8_t {
  Offloaded,     // a copy to host was issued
  Deduplicated,  // shares the host copy of a tensor packed earlier (same live storage and version)
  Kept,          // stays on the device; see KeepReason
};

enum class KeepReason : uint8_t {
  None,               // (offloaded or deduplicated)
  BelowThreshold,     // smaller than min_offload_size
  Parameter,          // a parameter (leaf requiring grad) or a view of one
  RegisteredStorage,  // storage of a registered parameter or buffer
  NotOnDevice,  // not a device tensor (a CPU tensor under backend cuda, a host-pool tensor, ...)
  Unsupported,  // no elements, or a kind offtune does not move (sparse, nested, quantized, conj/neg
                // bit)
  OtherDevice,  // on another GPU than the offloader's (one offloader per device)
  NotBoundary,  // OffloadSet::Boundaries and not a checkpointed region's input
  // Semantics::Trl with streams: at the address and dtype of a tensor offloaded and still in the
  // forward window, or of one kept this way earlier in the forward (the reference's de-duplication
  // keeps it on the device).
  SharedInWindow,
};

// Disk traffic (tier disk or auto) is reported as copies too, apart from the device link's: a
// write of a host copy to the arena file, and a read back into host memory (prefetch = read ahead).
enum class CopyDirection : uint8_t { DeviceToHost, HostToDevice, HostToDisk, DiskToHost };
inline bool is_disk(CopyDirection d) {
  return d == CopyDirection::HostToDisk || d == CopyDirection::DiskToHost;
}

enum class UnpackSource : uint8_t {
  Kept,          // was never offloaded
  ForwardStash,  // still on the device: its offload copy was in flight when backward began
  Reloaded,      // brought back when autograd asked for it
  Prefetched,    // brought back ahead of use
};

enum class WaitKind : uint8_t {
  ForwardWindow,  // forward waited for the oldest offload copy (window full)
  Reload,         // compute waited for a reload before the tensor was used
  Drain,          // end of backward / scope: waited for outstanding copies
  Spill,          // forward waited for host copies to reach disk (host budget or staging full)
  DiskRead,       // backward waited for a copy to be read back from disk
  Weights,        // a block waited for its frozen weights (layer_offload.hpp)
};

std::string_view to_string(PackDecision);
std::string_view to_string(KeepReason);
std::string_view to_string(CopyDirection);
std::string_view to_string(UnpackSource);
std::string_view to_string(WaitKind);

struct PackEvent {
  TensorId id;
  int64_t bytes = 0;  // bytes the tensor occupies in its storage
  PackDecision decision = PackDecision::Kept;
  KeepReason reason = KeepReason::None;
  int64_t time_ns = 0;
  // What a replay of the engine's rules needs (the what-if predictor, profiler/predict.hpp); set
  // for tensors the engine could offload (reason None or BelowThreshold), else left 0.
  uint64_t storage = 0;       // the storage's data address (identifies it while it lives)
  int64_t storage_bytes = 0;  // the whole storage's size
  int64_t span_lo = 0;        // first byte of the span the tensor touches, in its storage
  int64_t weight = 0;         // the size compared with min_offload_size under the semantics in use
  int64_t item_bytes = 0;     // element size
  uint32_t version = 0;       // the tensor's version counter at pack
  uint64_t generation = 0;    // the offload scope it was packed in
};

// A saved tensor that owned a share of an offloaded entry was released (its autograd node ran or
// its graph died). Kept tensors report nothing on release.
struct ReleaseEvent {
  TensorId id;
  int64_t time_ns = 0;
};

struct CopyEvent {
  TensorId id;
  CopyDirection direction = CopyDirection::DeviceToHost;
  int64_t bytes = 0;
  bool pinned = true;
  bool on_side_stream = true;  // false in single-stream mode
  bool prefetch = false;       // a reload issued ahead of use
  int64_t time_ns = 0;         // issue time, or completion time in on_copy_completed
  int64_t issued_ns = 0;       // in on_copy_completed: when it was issued (0 if unknown)
  // A block's frozen weights (layer_offload.hpp), not an activation: always HostToDevice; `id` is
  // the block's index and `bytes` the block's frozen bytes.
  bool weights = false;
};

struct UnpackEvent {
  TensorId id;
  UnpackSource source = UnpackSource::Kept;
  int64_t bytes = 0;
  int64_t time_ns = 0;
};

struct WaitEvent {
  WaitKind kind = WaitKind::ForwardWindow;
  TensorId id;  // the tensor waited for (invalid for Drain)
  int64_t begin_ns =
      0;  // host time spent blocked (host-sim) or at which the wait was enqueued (cuda)
  int64_t end_ns = 0;
};

// The engine's own work, reported while it happens: on_span_begin on entry, on_span_end on the way
// out, whether the work returns or throws. The events above arrive after the fact, once the outcome
// (a pack decision, an unpack source, a wait's length) is known; spans are what lets a tracer open
// a range at the right moment.
enum class SpanKind : uint8_t {
  Pack,    // the pack hook, entry to return: classification, de-duplication, issuing the offload
           // copy, and any forward-window wait (a nested Wait span)
  Unpack,  // the unpack hook: serving or reloading the tensor, the reload wait, prefetches
  Wait,    // one wait for a copy: blocking on host-sim; on cuda the host-side call that enqueues a
           // stream wait (the wait itself is the GPU's)
  Recompute,  // a checkpointed region rerun in backward (offtune/checkpoint.hpp), from inside the
              // unpack that needed it: its boundaries' unpacks (and their waits) nest inside
};

struct Span {
  SpanKind kind = SpanKind::Pack;
  WaitKind wait = WaitKind::ForwardWindow;  // which wait, for SpanKind::Wait; unused otherwise
};

struct StashEvent {
  int64_t fwd_count = 0;  // offloads in flight whose device memory the forward window holds
  int64_t fwd_bytes = 0;  // device bytes the window keeps alive: whole storages, each once
  int64_t bwd_count = 0;  // reloaded (or prefetched) tensors held on the device in backward
  int64_t bwd_bytes = 0;
  int64_t time_ns = 0;
  // The host side at the same moment: bytes of host copies alive, and the pinned bytes the host
  // pool reserves (kept for reuse; what the process holds pinned).
  int64_t host_bytes = 0;
  int64_t host_pool_bytes = 0;
};

// A checkpointed region recomputed in backward (offtune/checkpoint.hpp), reported to the observer
// of the offloader that holds the region's boundaries.
struct RecomputeEvent {
  int64_t begin_ns = 0;  // the engine's clock, as every event's
  int64_t end_ns = 0;
  int64_t tensors = 0;  // saved tensors the rerun brought back for the region's backward
  int64_t bytes = 0;    // their bytes (views counted at their own size)
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_pack(const PackEvent&) {}
  virtual void on_copy_issued(const CopyEvent&) {}
  virtual void on_copy_completed(const CopyEvent&) {}
  virtual void on_unpack(const UnpackEvent&) {}
  virtual void on_wait(const WaitEvent&) {}
  virtual void on_stash(const StashEvent&) {}
  virtual void on_release(const ReleaseEvent&) {}
  virtual void on_recompute(const RecomputeEvent&) {}

  // Spans nest strictly per thread, and both ends of one span are on the same thread (the one
  // running the hook or the wait), so a push/pop range per call is sound: a Wait span opens and
  // closes inside a Pack or Unpack span, or on its own (Drain). Another thread's spans may
  // interleave in time. Must not throw: on_span_end runs while an exception may be propagating
  // (the engine catches and warns rather than terminate).
  virtual void on_span_begin(Span) {}
  virtual void on_span_end(Span) {}
};

}  // namespace offtune
