// A model of CUDA's caching allocator as far as reserved memory goes, for host-sim with a device
// model: the bytes a GPU process would hold from the driver for the same sequence of allocations
// and frees. The rules are those of c10's CUDACachingAllocator with its default settings:
// - sizes round up to a multiple of 512 bytes (at least 512);
// - requests of at most 1 MiB come from the small pool, whose segments are 2 MiB; larger ones from
//   the large pool, whose segments are 20 MiB for requests under 10 MiB, else the request rounded
//   up to 2 MiB;
// - a request takes the smallest free block of its pool and stream that fits (ties: the oldest
//   segment, lowest offset); a block is split when what remains is at least 512 bytes (small pool)
//   or more than 1 MiB (large pool), and a freed block merges with free neighbours of its segment;
// - blocks belong to the stream they were allocated on; segments go back to the driver only on
//   empty_cache().
// Not modelled: record_stream's delayed reuse (a block is free when its tensor is), expandable
// segments, the allocator's configuration options.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

namespace offtune::detail::sim {

class CachingAllocatorModel {
 public:
  struct Block;

  static constexpr int64_t kMinBlock = 512;
  static constexpr int64_t kSmallSize = int64_t{1} << 20;
  static constexpr int64_t kSmallBuffer = int64_t{2} << 20;
  static constexpr int64_t kLargeBuffer = int64_t{20} << 20;
  static constexpr int64_t kMinLargeAlloc = int64_t{10} << 20;
  static constexpr int64_t kRoundLarge = int64_t{2} << 20;

  static int64_t round_size(int64_t bytes);
  // The segment the driver is asked for when no cached block fits a request of `size` bytes.
  static int64_t segment_size(int64_t size);

  CachingAllocatorModel();
  ~CachingAllocatorModel();
  CachingAllocatorModel(const CachingAllocatorModel&) = delete;
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  // nullptr for 0 bytes (no block, as CUDA's allocator).
  Block* allocate(int64_t bytes, int64_t stream);
  void free(Block* block);  // nullptr: nothing
  void empty_cache();

  int64_t reserved() const { return reserved_; }
  int64_t peak_reserved() const { return peak_reserved_; }
  void reset_peak() { peak_reserved_ = reserved_; }
  int64_t segments() const { return static_cast<int64_t>(segments_.size()); }

 private:
  struct Segment;
  struct Order {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, Order>;
  Pool& pool_of(const Block& b);
  void release(Segment* s);

  Pool small_, large_;
  std::vector<std::unique_ptr<Segment>> segments_;
  int64_t next_segment_ = 0;
  int64_t reserved_ = 0;
  int64_t peak_reserved_ = 0;
};

}  // namespace offtune::detail::sim
