// NVTX annotations for Nsight Systems, in the "offtune" NVTX domain:
//   - RAII ranges for the runner's step, forward and backward phases (NvtxRange);
//   - per-layer ranges, forward (push/pop) and backward (start/end), as functions a front end hands
//     to the built-in models' layer hooks (the models know nothing of NVTX);
//   - an Observer (NvtxObserver) that turns the engine's spans into pack, unpack and wait ranges,
//     its decisions into marks inside them, and its stash and device bytes into counters.
// With no NVTX tool attached every call is a load and a branch inside NVTX; built with
// OFFTUNE_NVTX=OFF (NVTX_DISABLE) the bodies are empty.
//
// This header includes no NVTX header on purpose: the library links NVTX privately and decides
// NVTX_DISABLE for itself, so a front end that includes this header neither needs NVTX's include
// path nor can disagree with the library about whether NVTX is compiled in. The names, categories,
// payloads and counters emitted are listed in docs/instrumentation.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "offtune/observer.hpp"
#include "offtune/workload.hpp"

namespace offtune::profiler {

// Tag type naming offtune's NVTX domain. Code that includes <nvtx3/nvtx3.hpp> itself can pass it as
// the domain of nvtx3's templates (nvtx3::scoped_range_in<NvtxDomain>, nvtx3::mark_in<NvtxDomain>).
struct NvtxDomain {
  static constexpr const char* name = "offtune";
};

// False when the library was built with OFFTUNE_NVTX=OFF: nothing below emits anything.
bool nvtx_compiled_in() noexcept;

// Creates the domain and registers its strings, categories and counters now. Optional: the first
// range or observer does it otherwise; call it before a timed region so that the first NVTX call
// (which loads the tool, if any) is not timed.
void nvtx_initialize() noexcept;

enum class NvtxPhase : uint8_t { Step, Forward, Backward };

// The push and pop of a phase range (below), for code whose begin and end are separate calls on one
// thread.
void nvtx_phase_push(NvtxPhase phase, int64_t step = -1) noexcept;
void nvtx_phase_pop() noexcept;

// A push/pop range in the offtune domain around one phase of a step: message "step", "forward" or
// "backward" (registered strings), payload the step index when one is given (>= 0). Ranges nest
// per thread; open and close each one on the same thread.
class NvtxRange {
 public:
  explicit NvtxRange(NvtxPhase phase, int64_t step = -1) noexcept { nvtx_phase_push(phase, step); }
  ~NvtxRange() { nvtx_phase_pop(); }

  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  NvtxRange(NvtxRange&&) = delete;
  NvtxRange& operator=(NvtxRange&&) = delete;
  // Scoped only: a range on the heap could outlive its thread's range stack.
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;
};

// Per-layer ranges: message "layer N" (a registered string for N < 128, else "layer"), int64
// payload N, category "layer: forward" or "layer: backward".
//
// Forward: a push/pop range around one block's forward, on the thread running it; begin and end on
// the same thread, nested inside "forward" (and around the block's pack ranges).
void nvtx_layer_forward_begin(int64_t layer) noexcept;
void nvtx_layer_forward_end() noexcept;
// Backward: a start/end range, since nothing guarantees that autograd ends a block's backward on
// the thread that began it (on cuda it runs on a device thread, not the one that pushed
// "backward"). begin returns the range's id for end; 0 when no tool is attached (end ignores it
// then).
uint64_t nvtx_layer_backward_begin(int64_t layer) noexcept;
void nvtx_layer_backward_end(uint64_t range_id) noexcept;

// The phase and layer ranges above as the marks a WorkloadInstance emits (the runner sets them on
// the workload it measures); empty when NVTX is compiled out, so that the models then skip the
// per-block calls and the backward tensor hooks altogether.
StepMarks nvtx_step_marks();

// The engine's work as NVTX ranges, its events as marks inside them, and counters (thread-safe,
// stateless after construction):
//   pack hook       range "pack", category "hook: pack", around the whole pack hook
//     decision      mark "pack" inside it, payload bytes, category "pack: offloaded|dedup...|kept"
//     copy issued   mark "offload" (D2H), payload bytes, category "copy: d2h"
//   unpack hook     range "unpack", category "hook: unpack"
//     source        mark "unpack" inside it, payload bytes, category "unpack: <source>"
//     copy issued   mark "reload" (H2D), payload bytes, category "copy: h2d[ prefetch]"
//   wait            range "wait", category "wait: forward-window|reload|drain", around the blocking
//                   call (on cuda the call that enqueues the stream wait); forward-window and
//                   reload waits nested in their pack or unpack range, drains on their own
//   stash           counters "stash forward bytes" and "stash backward bytes"
//   device bytes    counter "device bytes" (sample_device_bytes, from the runner)
// Ranges are push/pop: the engine opens and closes each span on one thread within one call. The
// decision and source are marks because they are known only at the end of the hook. The engine's
// after-the-fact on_wait is not emitted: the wait range is the wait. Completions are not emitted
// either: on cuda Nsight Systems traces the copies themselves.
class NvtxObserver : public Observer {
 public:
  NvtxObserver() noexcept;

  void on_pack(const PackEvent& e) override;
  void on_copy_issued(const CopyEvent& e) override;
  void on_unpack(const UnpackEvent& e) override;
  void on_stash(const StashEvent& e) override;
  void on_span_begin(Span span) override;
  void on_span_end(Span span) override;

  // Allocated device bytes now (the runner samples them, as for Recorder::sample_device_bytes).
  void sample_device_bytes(int64_t bytes) noexcept;
};

}  // namespace offtune::profiler
