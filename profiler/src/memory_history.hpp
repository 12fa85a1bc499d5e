// A run's memory history on host-sim (`offtune run --memory-history`): the modelled allocator's
// events (offtune/memory_history.hpp) with what the engine says of the blocks' tensors, for the
// store and the memory-snapshot export (export.hpp).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "offtune/memory_history.hpp"
#include "offtune/observer.hpp"
#include "offtune/profiler/records.hpp"

namespace offtune::profiler::detail {

// Listens from start() to finish() (or its destruction), and observes the offloader (an Observer
// beside the recorder) to name blocks:
// - a storage the engine offloaded (a pack with decision Offloaded names its data pointer):
//   "offloaded by offtune: tensor N";
// - a block allocated inside the engine's unpack hook, where it allocates reload buffers (and
//   prefetches'): "reloaded by offtune: tensor N", the tensor of the reload issued next in that
//   hook on that thread, or "weights reloaded by offtune: block N" for layer offloading's.
// Each naming is also an "annotate" entry (torch's action for metadata attached to a live
// allocation) at the pack or the reload. Every note ends with the measured step it falls in
// ("(step 2)").
class MemoryHistory final : public host_sim::MemoryHistoryListener, public Observer {
 public:
  MemoryHistory() = default;
  ~MemoryHistory() override;
  MemoryHistory(const MemoryHistory&) = delete;
  MemoryHistory& operator=(const MemoryHistory&) = delete;

  void start();  // listens from now on (host-sim's one listener)

  void on_memory_event(const host_sim::MemoryEvent& e) noexcept override;
  void on_pack(const PackEvent& e) override;
  void on_copy_issued(const CopyEvent& e) override;
  void on_span_begin(Span span) override;
  void on_span_end(Span span) override;

  struct History {
    std::vector<MemoryEventRecord> events;
    std::vector<MemoryBlockRecord> blocks;
  };
  // Stops listening. The events from `from_ns` on (the timeline's first kept step), notes ending
  // with the step of `steps` each was in, and the allocator's segments and blocks now; nothing
  // when start() was never called (the run ended in its warm-up).
  History finish(int64_t from_ns, const std::vector<StepRecord>& steps);

 private:
  struct Entry {
    host_sim::MemoryEvent event;
    std::string note;         // without the step
    bool annotation = false;  // torch's "annotate" of the live block at `event.addr`
  };
  void stop();

  std::mutex mu_;
  bool listening_ = false;
  bool started_ = false;
  std::vector<Entry> entries_;
  std::unordered_map<const void*, size_t> live_;  // a live block's data pointer -> its alloc entry
  std::unordered_map<int64_t, std::string>
      freeing_;  // addr -> note, from free request to completion
};

}  // namespace offtune::profiler::detail
