// host-sim's memory history: every allocation, free and segment change of the modelled CUDA
// caching allocator (host_sim.hpp), as torch's allocator history records them on a GPU
// (torch.cuda.memory._record_memory_history), and the allocator's segments and blocks at any
// moment (torch.cuda.memory._snapshot()'s "segments"). The profiler records it with a run
// (`offtune run --memory-history`) and writes it as a memory snapshot that PyTorch's memory
// visualiser opens (docs/export.md). Addresses are the model's: segments laid end to end from
// 4 GiB; the `data` pointer of an allocation is the tensor storage's on host-sim, which identifies
// the tensor a block holds.
#pragma once

#include <cstdint>
#include <vector>

namespace offtune::host_sim {

struct MemoryEvent {
  // torch's TraceEntry actions, and their names in a snapshot (to_string).
  enum class Action : uint8_t {
    Alloc,          // a block handed out ("alloc")
    FreeRequested,  // its storage freed ("free_requested")
    FreeCompleted,  // the block back in the cache, once streams it was used on are done
    SegmentAlloc,   // a segment from the driver ("segment_alloc")
    SegmentFree,    // a segment given back ("segment_free")
    SegmentMap,     // pages of an expandable segment mapped ("segment_map")
    SegmentUnmap,   // and unmapped ("segment_unmap")
    Oom,            // a request that did not fit ("oom")
  };
  Action action = Action::Alloc;
  int64_t addr = 0;
  // A block's events: the bytes its allocation asked for, as torch's history has them (the curve
  // of memory_viz sums these); a segment's: its bytes or its pages'; Oom: the rounded request.
  int64_t size = 0;
  int64_t block_size = 0;  // Alloc, FreeRequested: the block's bytes (rounded to 512 and more)
  int64_t stream = 0;
  int64_t device_free = 0;     // Oom: the device's capacity less what is reserved
  int64_t time_ns = 0;         // host_sim::clock_ns()
  const void* data = nullptr;  // Alloc, FreeRequested: the storage's data pointer
};
const char* to_string(MemoryEvent::Action a);

// Receives every event as it happens, under the emulator's allocator lock: must be thread-safe,
// fast, must not allocate device memory and must not throw.
class MemoryHistoryListener {
 public:
  virtual ~MemoryHistoryListener() = default;
  virtual void on_memory_event(const MemoryEvent& event) noexcept = 0;
};
// One listener at a time (nullptr: none); the caller keeps it alive until it is replaced.
void set_memory_history_listener(MemoryHistoryListener* listener);

// The modelled allocator's segments and their blocks now, by address.
struct MemoryBlock {
  int64_t addr = 0;
  int64_t size = 0;
  int64_t requested = 0;  // allocated blocks: the bytes asked for
  enum class State : uint8_t { Allocated, Inactive, PendingFree } state = State::Inactive;
};
struct MemorySegment {
  int64_t addr = 0;
  int64_t size = 0;
  int64_t stream = 0;
  bool small_pool = false;  // requests of at most 1 MiB
  bool expandable = false;
  std::vector<MemoryBlock> blocks;
};
std::vector<MemorySegment> memory_segments();

}  // namespace offtune::host_sim
