// A model of CUDA's caching allocator as far as memory goes, for host-sim: the
// bytes a GPU process would hold from the driver (reserved), hand out (allocated) and hold idle
// inside partly used segments (inactive split) for the same sequence of allocations, frees and
// cross-stream uses, and whether a request would end in an out-of-memory error.
//
// It follows torch 2.15.0 (git d0f2af8b66b20da4baa50644c0cd3f887a2eae2e):
// c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) with the settings of
// c10/core/AllocatorConfig.h (AcceleratorAllocatorConfig), read from c10 itself:
// PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF and c10::CachingAllocator::setAllocatorSettings() at
// run time. Each rule below names the function of CUDACachingAllocator.cpp it follows. (The
// allocator's source was read from a recent main-branch copy, the pinned commit's not being at
// hand; the settings' behaviour was checked against the pinned libc10 itself.)
//
// Modelled:
// - rounding (round_size): at least 512 bytes, a multiple of 512, or the next of
//   roundup_power2_divisions steps between two powers of two;
// - two pools per stream (get_pool): requests of at most 1 MiB are small; segments
//   (get_allocation_size) are 2 MiB for small requests, large_segment_size (20 MiB) for requests
//   under 10 MiB, else the request rounded up to 2 MiB;
// - best fit (get_free_block): the smallest free block of the same stream and pool that fits; a
//   request under max_split_size never takes a block at or above it, a request at or above it
//   takes one only when smaller than request + max_non_split_rounding_size;
// - splitting (should_split): a small-pool block (or any block with expandable segments on) is
//   split when at least 512 bytes remain, a large one when more than 1 MiB remains and the request
//   is under max_split_size; a freed block merges with its free neighbours (free_block);
// - a capacity (the device's memory) and torch's order when no cached block fits (malloc):
//   garbage collection while reserved is above garbage_collection_threshold x capacity
//   (garbage_collect_cached_blocks), a new segment, else release of cached oversize blocks
//   (release_available_cached_blocks) and a new segment, else completion of every pending
//   cross-stream free and release of every wholly free segment (release_cached_blocks) and a
//   retry; else out of memory (allocate() returns nullptr), counted as torch's stats count it;
// - record_stream's delayed reuse (recordStream, insert_events, process_events): a block used on
//   other streams is held back after its free until those streams are done;
// - expandable segments (try_allocate_expandable_block, map_block, unmap_block): one growable
//   segment per stream and pool, mapped in pages of 2 MiB (small pool) or large_segment_size
//   (large pool) at the lowest free address; empty_cache and the out-of-memory path unmap every
//   whole free page, also in the middle of a segment;
// - torch's counters: allocated, reserved, inactive split (not for expandable segments, as torch),
//   peaks, alloc retries, OOMs, synchronisations, segment maps and frees.
//
// Not modelled: CUDA graph and user memory pools, the free-memory callbacks (host-sim reclaims on
// its own before it asks the model), several devices, IPC, release_lock_on_cudamalloc,
// throw_on_cudamalloc_oom, the expandable segments' address-space reserve settings (a segment's
// address space is 9/8 of the capacity, or unlimited), the driver's own overhead and
// fragmentation, and a memory fraction apart from the capacity: torch collects garbage only under
// set_per_process_memory_fraction, whose limit the capacity stands for here, and with a fraction it
// also refuses an expandable segment's growth when reserved + the nominal segment size would pass
// the limit, where the model (like the driver) counts only the pages mapped. Whether the driver
// supports expandable segments is not checked (c10's use_expandable_segments() is taken as is).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <set>
#include <vector>

#include "offtune/memory_history.hpp"

namespace offtune::detail::sim {

// The settings the allocator consults, as plain values: filled from c10 by current(), or given by a
// test. Sizes in bytes.
struct AllocatorSettings {
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
  // roundup_power2_divisions has one entry per power-of-two interval from 1 MiB (entry 0, which
  // also serves smaller sizes) to 32 GiB and up (entry 15); 0 or 1: no power-of-two rounding.
  static constexpr int kDivisionIntervals = 16;

  int64_t max_split_size = kUnlimited;
  int64_t max_non_split_rounding_size = int64_t{20} << 20;
  int64_t large_segment_size = int64_t{20} << 20;
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  std::array<int64_t, kDivisionIntervals> roundup_power2_divisions{};

  // The divisions for a request of `size` bytes (c10's roundup_power2_divisions(size)).
  int64_t divisions_for(int64_t size) const;
  // c10's AcceleratorAllocatorConfig now.
  static AllocatorSettings current();
};

class CachingAllocatorModel {
 public:
  struct Block;
  // A free held back for other streams (free()), 0 for a free that took effect at once.
  using PendingFree = int64_t;

  static constexpr int64_t kMinBlock = 512;
  static constexpr int64_t kSmallSize = int64_t{1} << 20;
  static constexpr int64_t kSmallBuffer = int64_t{2} << 20;
  static constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
  static constexpr int64_t kRoundLarge = int64_t{2} << 20;

  // The size a request of `bytes` takes (round_size).
  static int64_t round_size(int64_t bytes,
                            const AllocatorSettings& s = AllocatorSettings::current());
  // The segment the driver is asked for when no cached block fits a rounded request of `size`
  // bytes (get_allocation_size); with expandable segments, the nominal size torch reports.
  static int64_t segment_size(int64_t size,
                              const AllocatorSettings& s = AllocatorSettings::current());

  struct Stats {
    int64_t allocated = 0;             // bytes of blocks handed out (rounded, whole blocks)
    int64_t reserved = 0;              // bytes held from the driver (mapped, for expandable)
    int64_t inactive_split = 0;        // free blocks inside partly used fixed segments
    int64_t inactive_split_bytes = 0;  // their bytes: fragmentation
    int64_t pending = 0;               // freed blocks waiting for other streams
    int64_t pending_bytes = 0;
    int64_t peak_allocated = 0;
    int64_t peak_reserved = 0;
    // Fixed segments and expandable ones; an expandable segment goes when its last page is
    // unmapped (one whose first mapping failed stays, empty, as in torch).
    int64_t segments = 0;
    int64_t expandable_segments = 0;  // of which expandable
    int64_t num_alloc_retries = 0;    // allocations that had to release the cache and retry
    int64_t num_ooms = 0;
    int64_t num_sync_all_streams = 0;  // releases of the cache (each completes pending frees)
    int64_t num_device_alloc = 0;      // segment allocations and page mappings
    int64_t num_device_free = 0;       // segment frees and page unmappings
  };

  // The last out-of-memory: what the driver was asked for against what was free.
  struct OutOfMemory {
    int64_t requested = 0;   // the request, rounded
    int64_t alloc_size = 0;  // the segment it needed ("Tried to allocate" in torch's message)
    int64_t capacity = 0;
    int64_t reserved = 0;
    int64_t allocated = 0;
    int64_t free() const { return capacity - reserved; }
  };

  // Follows c10's settings, read at every allocation, so a change at run time applies to later
  // requests and segments.
  CachingAllocatorModel();
  // Fixed settings, whatever c10 says (tests).
  explicit CachingAllocatorModel(AllocatorSettings fixed);
  ~CachingAllocatorModel();
  CachingAllocatorModel(const CachingAllocatorModel&) = delete;
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  // The device's memory in bytes; 0: unlimited. Segments that would pass it fail as cudaMalloc
  // (or cuMemCreate) would, and garbage collection measures its threshold against it.
  void set_capacity(int64_t bytes) { capacity_ = bytes > 0 ? bytes : 0; }
  int64_t capacity() const { return capacity_; }

  // nullptr for 0 bytes (no block, as CUDA's allocator), and when the request does not fit the
  // capacity even after releasing the cache (the caller raises out of memory; last_oom() says why).
  Block* allocate(int64_t bytes, int64_t stream);
  // The block is used on `stream` too (torch's record_stream): its free waits for that stream.
  void record_stream(Block* block, int64_t stream);
  // Frees the block (nullptr: nothing). A block recorded on other streams is held back, still
  // reserved but neither allocated nor reusable, until complete() or complete_stream() says those
  // streams are done (or the cache is released, which waits for them); the returned id names it.
  // The block pointer is not to be used after free().
  PendingFree free(Block* block);
  // The streams a held-back free waits for are done (an id already completed: nothing).
  void complete(PendingFree id);
  // Everything `stream` had queued is done: frees waiting only for it take effect.
  void complete_stream(int64_t stream);
  // torch's emptyCache: completes pending frees, frees every wholly free fixed segment and unmaps
  // every whole free page of expandable segments.
  void empty_cache();

  int64_t reserved() const { return stats_.reserved; }
  int64_t allocated() const { return stats_.allocated; }
  int64_t peak_reserved() const { return stats_.peak_reserved; }
  int64_t peak_allocated() const { return stats_.peak_allocated; }
  int64_t inactive_split_bytes() const { return stats_.inactive_split_bytes; }
  int64_t pending_bytes() const { return stats_.pending_bytes; }
  void reset_peak() {
    stats_.peak_reserved = stats_.reserved;
    stats_.peak_allocated = stats_.allocated;
  }
  int64_t segments() const { return static_cast<int64_t>(segments_.size()); }
  Stats stats() const;
  const std::optional<OutOfMemory>& last_oom() const { return last_oom_; }

  // What the model does with the driver's memory, as torch's allocator history records it
  // (CUDACachingAllocator's TraceEntry), for memory snapshots (offtune/memory_history.hpp). A
  // block's allocation and the request of its free are the caller's to report (it knows the
  // tensor); the model reports the rest as it happens: segments allocated, freed, mapped and
  // unmapped, frees completed (at once, or once the streams a block was recorded on are done), and
  // out-of-memory.
  struct TraceEvent {
    // The history's own actions (the model reports those but Alloc and FreeRequested).
    using Action = host_sim::MemoryEvent::Action;
    Action action = Action::SegmentAlloc;
    int64_t addr = 0;  // address() of the block, or of the segment or pages
    // Bytes: a segment's or pages'; a completed free's, the bytes its allocation asked for (as
    // torch's history, whose block entries carry the requested size); Oom: the rounded request.
    int64_t size = 0;
    int64_t stream = 0;
    int64_t device_free = 0;  // Oom: the capacity less what is reserved
  };
  // Called as each happens, in the model's call (under its caller's lock); empty: none. It must not
  // call the model.
  void set_tracer(std::function<void(const TraceEvent&)> tracer) { tracer_ = std::move(tracer); }
  // A block's modelled address: its segment's base plus its offset. Segments are laid end to end
  // from 4 GiB, each rounded up to 2 MiB, in the order they were made; an address is stable while
  // its block lives.
  static int64_t address(const Block* b);
  static int64_t size_of(const Block* b);
  static int64_t requested_of(const Block* b);  // the bytes asked for, while allocated
  static int64_t stream_of(const Block* b);
  // The segments and their blocks now, by address: fixed segments whole, an expandable segment's
  // mapped pages as one segment per contiguous run (its unmapped address space is left out).
  struct BlockState {
    int64_t addr = 0;
    int64_t size = 0;
    int64_t requested = 0;  // the bytes asked for (allocated blocks)
    bool allocated = false;
    bool pending = false;  // freed, waiting for other streams
  };
  struct SegmentState {
    int64_t addr = 0;
    int64_t size = 0;
    int64_t stream = 0;
    bool small = false;
    bool expandable = false;
    std::vector<BlockState> blocks;
  };
  std::vector<SegmentState> state() const;

 private:
  struct Segment;
  struct Request;
  // Free blocks, best fit first: stream, size, then address (segment, offset).
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  // Unmapped address space of expandable segments: stream, address.
  struct ByAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  // The sets' nodes come from the model's node pool (nodes_): host-sim allocates through the model
  // on every device allocation, and the engine's hooks must not cost a heap allocation each
  // (tests/test_allocations.cpp counts them).
  struct Pool {
    explicit Pool(std::pmr::memory_resource* nodes) : blocks(nodes), unmapped(nodes) {}
    std::pmr::set<Block*, BySize> blocks;
    std::pmr::set<Block*, ByAddress> unmapped;
    int64_t free_block_lookups = 0;  // garbage collection's clock (get_free_blocks_call_count)
  };

  AllocatorSettings settings() const;
  Pool& pool_of(const Block& b);
  Block* make_block(Segment* segment, int64_t stream, int64_t offset, int64_t size);
  void drop_block(Block* b);
  void to_pool(Block* b);
  static bool is_split(const Block* b);
  int64_t merge(Block* dst, Block* src);
  void raise_reserved(int64_t bytes);
  Segment* add_segment(bool small, bool expandable, int64_t size, int64_t page);
  void remove_segment(Segment* s);

  Block* find_free_block(const Request& r);
  Block* take(Block* block, const Request& r);
  void free_block(Block* b);
  Block* new_segment(const Request& r, bool retry);
  Block* grow_expandable(const Request& r);
  Block* find_expandable_space(const Request& r);
  bool map(Block* b, int64_t bytes);
  void unmap(Block* b);
  void garbage_collect(const AllocatorSettings& s);
  bool release_oversize(const Request& r);
  void release_cache();
  void release_blocks(Pool& pool);
  void release_segment(Block* b);
  void release_expandable(Block* b);
  void complete_all();
  void finish_pending(std::pmr::map<PendingFree, Block*>::iterator it);

  void trace(TraceEvent::Action action, int64_t addr, int64_t size, int64_t stream) const {
    if (tracer_) tracer_({action, addr, size, stream, 0});
  }

  std::optional<AllocatorSettings> fixed_;
  int64_t capacity_ = 0;
  std::function<void(const TraceEvent&)> tracer_;
  int64_t next_base_ = int64_t{1} << 32;          // the next segment's base address
  std::pmr::unsynchronized_pool_resource nodes_;  // before the containers that use it
  Pool small_{&nodes_}, large_{&nodes_};
  std::vector<std::unique_ptr<Segment>> segments_;
  int64_t next_segment_ = 0;
  std::vector<std::unique_ptr<Block>> block_store_;
  std::vector<Block*> spare_blocks_;
  std::pmr::map<PendingFree, Block*> pending_{&nodes_};  // in the order of their frees
  PendingFree next_pending_ = 1;
  Stats stats_;
  std::optional<OutOfMemory> last_oom_;
};

}  // namespace offtune::detail::sim
