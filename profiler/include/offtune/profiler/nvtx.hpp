// NVTX annotations for Nsight Systems: an Observer that turns the engine's events into marks and
// counters in the "offtune" NVTX domain, and RAII ranges for the runner's step, forward and
// backward phases. With no NVTX tool attached every call is a load and a branch inside NVTX; built
// with OFFTUNE_NVTX=OFF (NVTX_DISABLE) the bodies are empty.
//
// This header includes no NVTX header on purpose: the library links NVTX privately and decides
// NVTX_DISABLE for itself, so a front end that includes this header neither needs NVTX's include
// path nor can disagree with the library about whether NVTX is compiled in. The names, categories,
// payloads and counters emitted are listed in docs/instrumentation.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "offtune/observer.hpp"

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

// A push/pop range in the offtune domain around one phase of a step: message "step", "forward" or
// "backward" (registered strings), payload the step index when one is given (>= 0). Ranges nest
// per thread; open and close each one on the same thread.
class NvtxRange {
 public:
  explicit NvtxRange(NvtxPhase phase, int64_t step = -1) noexcept;
  ~NvtxRange();

  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  NvtxRange(NvtxRange&&) = delete;
  NvtxRange& operator=(NvtxRange&&) = delete;
  // Scoped only: a range on the heap could outlive its thread's range stack.
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;
};

// Engine events as NVTX marks and counters (thread-safe, stateless after construction):
//   pack            mark "pack", payload bytes, category "pack: offloaded|deduplicated|kept"
//   copy issued     mark "offload" (D2H) / "reload" (H2D), payload bytes, category "copy: ..."
//   unpack          mark "unpack", payload bytes, category "unpack: <source>"
//   wait            mark "wait", payload the wait's length in ns, category "wait: <kind>"
//   stash           counters "stash forward bytes" and "stash backward bytes"
//   device bytes    counter "device bytes" (sample_device_bytes, from the runner)
// Waits are marks, not ranges: the engine reports a wait once it is over (or, on cuda, once it is
// enqueued on a stream), and an NVTX range can only be opened and closed at the time of the call.
// Completions are not emitted: on cuda Nsight Systems traces the copies themselves.
class NvtxObserver : public Observer {
 public:
  NvtxObserver() noexcept;

  void on_pack(const PackEvent& e) override;
  void on_copy_issued(const CopyEvent& e) override;
  void on_unpack(const UnpackEvent& e) override;
  void on_wait(const WaitEvent& e) override;
  void on_stash(const StashEvent& e) override;

  // Allocated device bytes now (the runner samples them, as for Recorder::sample_device_bytes).
  void sample_device_bytes(int64_t bytes) noexcept;
};

}  // namespace offtune::profiler
