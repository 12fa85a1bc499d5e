#include "alloc_model.hpp"

#include <c10/core/AllocatorConfig.h>

#include <algorithm>
#include <bit>
#include <tuple>

namespace offtune::detail::sim {

namespace {

// An expandable segment reserves address space for 9/8 of the device's memory (torch's
// ExpandableSegment), so that pages unmapped in the middle can be mapped again at the end. Without
// a capacity the model reserves this much, which no request reaches.
constexpr int64_t kUnlimitedAddressSpace = int64_t{1} << 48;

int64_t from_size_t(size_t v) {
  // c10 says "unlimited" with SIZE_MAX; sizes past int64_t mean the same here.
  return v > static_cast<size_t>(AllocatorSettings::kUnlimited) ? AllocatorSettings::kUnlimited
                                                                : static_cast<int64_t>(v);
}

int log2_floor(int64_t v) { return std::bit_width(static_cast<uint64_t>(v)) - 1; }

// The next of `divisions` equal steps between the powers of two around `size`
// (roundup_power2_next_division): with 4 divisions, 1200 lies between 1024 and 2048 and rounds to
// 1280.
int64_t next_power2_division(int64_t size, int64_t divisions) {
  const auto u = static_cast<uint64_t>(size);
  if (std::has_single_bit(u)) return size;
  const auto floor = static_cast<int64_t>(std::bit_floor(u));
  const int64_t step = floor >> log2_floor(divisions);
  if (step == 0) return floor << 1;
  const int64_t below = size & ~(step - 1);
  return below == size ? size : below + step;
}

}  // namespace

// ---- settings ------------------------------------------------------------------------------

int64_t AllocatorSettings::divisions_for(int64_t size) const {
  // c10's intervals: [1 MiB, 2 MiB) is entry 0 (with everything smaller), each power of two the
  // next, the last one open-ended.
  constexpr int kFirstIntervalLog2 = 20;
  const int index = std::clamp(log2_floor(std::max<int64_t>(size, 1)) - kFirstIntervalLog2, 0,
                               kDivisionIntervals - 1);
  return roundup_power2_divisions[static_cast<size_t>(index)];
}

AllocatorSettings AllocatorSettings::current() {
  using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;
  AllocatorSettings s;
  s.max_split_size = from_size_t(Config::max_split_size());
  s.max_non_split_rounding_size = from_size_t(Config::max_non_split_rounding_size());
  s.large_segment_size = from_size_t(Config::large_segment_size());
  s.garbage_collection_threshold = Config::garbage_collection_threshold();
  s.expandable_segments = Config::use_expandable_segments();
  const std::vector<size_t>& divisions = Config::roundup_power2_divisions();
  for (size_t i = 0; i < divisions.size() && i < s.roundup_power2_divisions.size(); ++i) {
    s.roundup_power2_divisions[i] = from_size_t(divisions[i]);
  }
  return s;
}

// ---- blocks and segments -------------------------------------------------------------------

struct CachingAllocatorModel::Segment {
  int64_t id = 0;    // creation order: stands for the address in the pools' orders
  int64_t base = 0;  // its modelled address (address())
  size_t index = 0;  // in segments_
  bool small = false;
  bool expandable = false;
  int64_t size = 0;  // fixed: the bytes from the driver; expandable: the address space
  int64_t page = 0;  // expandable: what one mapping adds
};

struct CachingAllocatorModel::Block {
  Segment* segment = nullptr;
  int64_t segment_id = -1;  // segment->id, kept here for the pools' comparisons
  int64_t stream = 0;
  int64_t offset = 0;
  int64_t size = 0;
  int64_t requested = 0;  // while allocated: the bytes asked for
  bool allocated = false;
  bool mapped = true;  // false: unmapped address space of an expandable segment
  Block* prev = nullptr;
  Block* next = nullptr;
  // Streams recorded on the block; after its free, those not yet done.
  std::vector<int64_t> stream_uses;
  PendingFree pending = 0;  // its free waits for stream_uses
  int64_t gc_base = 0;      // the pool's lookup count when it became free (its age starts)
};

struct CachingAllocatorModel::Request {
  const AllocatorSettings& s;
  int64_t stream = 0;
  int64_t size = 0;        // rounded
  int64_t alloc_size = 0;  // the segment a new one would be
  bool small = false;
};

bool CachingAllocatorModel::BySize::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->size, a->segment_id, a->offset) <
         std::tie(b->stream, b->size, b->segment_id, b->offset);
}

bool CachingAllocatorModel::ByAddress::operator()(const Block* a, const Block* b) const {
  return std::tie(a->stream, a->segment_id, a->offset) <
         std::tie(b->stream, b->segment_id, b->offset);
}

int64_t CachingAllocatorModel::round_size(int64_t bytes, const AllocatorSettings& s) {
  if (bytes < kMinBlock) return kMinBlock;
  const int64_t divisions = s.divisions_for(bytes);
  if (divisions > 1 && bytes > kMinBlock * divisions) return next_power2_division(bytes, divisions);
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

int64_t CachingAllocatorModel::segment_size(int64_t size, const AllocatorSettings& s) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return s.large_segment_size;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocatorModel::CachingAllocatorModel() = default;
CachingAllocatorModel::CachingAllocatorModel(AllocatorSettings fixed) : fixed_(fixed) {}
CachingAllocatorModel::~CachingAllocatorModel() = default;

AllocatorSettings CachingAllocatorModel::settings() const {
  return fixed_ ? *fixed_ : AllocatorSettings::current();
}

CachingAllocatorModel::Pool& CachingAllocatorModel::pool_of(const Block& b) {
  return b.segment->small ? small_ : large_;
}

CachingAllocatorModel::Block* CachingAllocatorModel::make_block(Segment* segment, int64_t stream,
                                                                int64_t offset, int64_t size) {
  Block* b = nullptr;
  if (spare_blocks_.empty()) {
    block_store_.push_back(std::make_unique<Block>());
    b = block_store_.back().get();
  } else {
    b = spare_blocks_.back();
    spare_blocks_.pop_back();
  }
  b->segment = segment;
  b->segment_id = segment->id;
  b->stream = stream;
  b->offset = offset;
  b->size = size;
  return b;
}

void CachingAllocatorModel::drop_block(Block* b) {
  *b = Block();
  spare_blocks_.push_back(b);
}

void CachingAllocatorModel::to_pool(Block* b) {
  // insert_into_blocks: garbage collection ages a free block from here.
  Pool& pool = pool_of(*b);
  b->gc_base = pool.free_block_lookups;
  pool.blocks.insert(b);
}

bool CachingAllocatorModel::is_split(const Block* b) {
  return b->prev != nullptr || b->next != nullptr;
}

// try_merge_blocks: `src` joins `dst` if it is free (not held back for another stream) and on the
// same side of mapped. `dst` is in no set. Returns the bytes taken over, 0 for none.
int64_t CachingAllocatorModel::merge(Block* dst, Block* src) {
  if (src == nullptr || src->allocated || src->pending != 0 || src->mapped != dst->mapped) {
    return 0;
  }
  Pool& pool = pool_of(*src);
  if (src->mapped) {
    pool.blocks.erase(src);
  } else {
    pool.unmapped.erase(src);
  }
  if (dst->prev == src) {
    dst->offset = src->offset;
    dst->prev = src->prev;
    if (dst->prev != nullptr) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next != nullptr) dst->next->prev = dst;
  }
  const int64_t taken = src->size;
  dst->size += taken;
  drop_block(src);
  return taken;
}

void CachingAllocatorModel::raise_reserved(int64_t bytes) {
  stats_.reserved += bytes;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

CachingAllocatorModel::Segment* CachingAllocatorModel::add_segment(bool small, bool expandable,
                                                                   int64_t size, int64_t page) {
  auto seg = std::make_unique<Segment>();
  seg->id = next_segment_++;
  seg->base = next_base_;
  next_base_ += (size + kSmallBuffer - 1) / kSmallBuffer * kSmallBuffer;
  seg->index = segments_.size();
  seg->small = small;
  seg->expandable = expandable;
  seg->size = size;
  seg->page = page;
  segments_.push_back(std::move(seg));
  if (expandable) ++stats_.expandable_segments;
  return segments_.back().get();
}

void CachingAllocatorModel::remove_segment(Segment* s) {
  if (s->expandable) --stats_.expandable_segments;
  const size_t i = s->index;
  std::swap(segments_[i], segments_.back());
  segments_[i]->index = i;
  segments_.pop_back();
}

// ---- allocation ----------------------------------------------------------------------------

CachingAllocatorModel::Block* CachingAllocatorModel::allocate(int64_t bytes, int64_t stream) {
  if (bytes <= 0) return nullptr;
  // Read once per request, as torch's malloc reads them while it serves one.
  const AllocatorSettings s = settings();
  const int64_t size = round_size(bytes, s);
  const Request r{s, stream, size, segment_size(size, s), size <= kSmallSize};
  Block* block = find_free_block(r);
  if (block == nullptr) {
    // malloc's order when no cached block fits.
    if (capacity_ > 0 && s.garbage_collection_threshold > 0.0) garbage_collect(s);
    block = new_segment(r, /*retry=*/false);
    if (block == nullptr && release_oversize(r)) block = new_segment(r, /*retry=*/false);
    if (block == nullptr) {
      release_cache();
      block = new_segment(r, /*retry=*/true);
    }
  }
  if (block == nullptr) {
    ++stats_.num_ooms;
    last_oom_ = OutOfMemory{size, r.alloc_size, capacity_, stats_.reserved, stats_.allocated};
    if (tracer_) {
      tracer_({TraceEvent::Action::Oom, 0, size, stream,
               capacity_ > 0 ? capacity_ - stats_.reserved : 0});
    }
    return nullptr;
  }
  Block* b = take(block, r);
  b->requested = bytes;
  return b;
}

// get_free_block: the smallest free block of the request's stream and pool that fits, or none.
CachingAllocatorModel::Block* CachingAllocatorModel::find_free_block(const Request& r) {
  Pool& pool = r.small ? small_ : large_;
  const AllocatorSettings& s = r.s;
  // Garbage collection's clock ticks only while it is on (torch: with a memory fraction).
  if (capacity_ > 0 && s.garbage_collection_threshold > 0.0) ++pool.free_block_lookups;
  Block probe;
  probe.stream = r.stream;
  probe.size = r.size;
  probe.offset = -1;
  auto it = pool.blocks.lower_bound(&probe);
  if (it == pool.blocks.end() || (*it)->stream != r.stream) return nullptr;
  if ((*it)->segment->expandable) {
    if (s.expandable_segments) {
      // A block followed by unmapped space counts as the size it could grow to: among such blocks
      // the one that could grow least is preferred.
      auto growable = [](const Block* b) {
        return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
      };
      for (auto next = std::next(it);
           (*it)->segment->expandable && next != pool.blocks.end() && (*next)->stream == r.stream &&
           growable(*next) < growable(*it);
           ++next) {
        it = next;
      }
    } else {
      // Expandable segments were turned off since: only fixed segments serve requests.
      do {
        ++it;
      } while (it != pool.blocks.end() && (*it)->segment->expandable && (*it)->stream == r.stream);
      if (it == pool.blocks.end() || (*it)->stream != r.stream) return nullptr;
    }
  }
  const int64_t found = (*it)->size;
  // An oversize block (>= max_split_size) is never split, so it serves no request under that size,
  // and a larger request only when the block wastes less than max_non_split_rounding_size.
  if (r.size < s.max_split_size && found >= s.max_split_size) return nullptr;
  if (r.size >= s.max_split_size && found - r.size >= s.max_non_split_rounding_size) return nullptr;
  Block* b = *it;
  pool.blocks.erase(it);
  return b;
}

// alloc_found_block with should_split: hands out the front of `block` and keeps the rest free.
CachingAllocatorModel::Block* CachingAllocatorModel::take(Block* block, const Request& r) {
  const int64_t remaining = block->size - r.size;
  const bool split = (block->segment->small || r.s.expandable_segments)
                         ? remaining >= kMinBlock
                         : r.size < r.s.max_split_size && remaining > kSmallSize;
  const bool fixed = !block->segment->expandable;
  const bool was_split = is_split(block);
  if (split) {
    Block* front = make_block(block->segment, block->stream, block->offset, r.size);
    front->prev = block->prev;
    if (front->prev != nullptr) front->prev->next = front;
    front->next = block;
    block->prev = front;
    block->offset += r.size;
    block->size = remaining;
    to_pool(block);
    if (fixed && was_split) {
      stats_.inactive_split_bytes -= r.size;  // a free piece shrank
    } else if (fixed) {
      ++stats_.inactive_split;  // a whole segment became partly used
      stats_.inactive_split_bytes += remaining;
    }
    block = front;
  } else if (fixed && was_split) {
    --stats_.inactive_split;
    stats_.inactive_split_bytes -= block->size;
  }
  block->allocated = true;
  stats_.allocated += block->size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return block;
}

// alloc_block: a new segment (or pages of an expandable one) for the request, or nullptr when the
// device has no room.
CachingAllocatorModel::Block* CachingAllocatorModel::new_segment(const Request& r, bool retry) {
  if (retry) ++stats_.num_alloc_retries;
  if (r.s.expandable_segments) return grow_expandable(r);
  if (capacity_ > 0 && stats_.reserved + r.alloc_size > capacity_) return nullptr;
  Segment* seg = add_segment(r.small, /*expandable=*/false, r.alloc_size, 0);
  Block* b = make_block(seg, r.stream, 0, r.alloc_size);
  raise_reserved(r.alloc_size);
  ++stats_.num_device_alloc;
  trace(TraceEvent::Action::SegmentAlloc, seg->base, r.alloc_size, r.stream);
  return b;
}

// ---- expandable segments -------------------------------------------------------------------

// try_allocate_expandable_block: maps pages at the lowest address with room for the request,
// joining the free space before them; nullptr when the device has no room for the pages.
CachingAllocatorModel::Block* CachingAllocatorModel::grow_expandable(const Request& r) {
  Block* c = find_expandable_space(r);
  if (!c->mapped && !map(c, std::min(c->size, r.size))) return nullptr;
  while (c->size < r.size) {
    // Free mapped space followed by unmapped space: map what is missing; it merges into one.
    Block* n = c->next;
    if (n == nullptr || n->mapped) return nullptr;  // not reached: the space was counted
    if (!map(n, std::min(r.size - c->size, n->size))) return nullptr;
    c = n;
  }
  pool_of(*c).blocks.erase(c);
  return c;
}

// find_expandable_block: the lowest address of the stream's expandable segments (of the request's
// pool) where free and unmapped space together hold the request; else a new segment.
CachingAllocatorModel::Block* CachingAllocatorModel::find_expandable_space(const Request& r) {
  Pool& pool = r.small ? small_ : large_;
  auto usable = [](const Block* b) { return b != nullptr && !b->allocated && b->pending == 0; };
  auto room = [&](const Block* b) {
    int64_t bytes = 0;
    for (; bytes < r.size && usable(b); b = b->next) bytes += b->size;
    return bytes >= r.size;
  };
  Block probe;
  probe.stream = r.stream;
  probe.offset = -1;
  for (auto it = pool.unmapped.lower_bound(&probe);
       it != pool.unmapped.end() && (*it)->stream == r.stream; ++it) {
    Block* c = *it;
    if (usable(c->prev)) c = c->prev;
    if (room(c)) return c;
  }
  // Pages: 2 MiB for the small pool, large_segment_size for the large one (read now: a change
  // applies to later segments).
  const int64_t page = r.small ? kSmallBuffer : r.s.large_segment_size;
  const int64_t space = capacity_ > 0 ? capacity_ + capacity_ / 8 : kUnlimitedAddressSpace;
  const int64_t pages = std::max<int64_t>((space + page - 1) / page, 1);
  Segment* seg = add_segment(r.small, /*expandable=*/true, pages * page, page);
  Block* c = make_block(seg, r.stream, 0, seg->size);
  c->mapped = false;
  pool.unmapped.insert(c);
  return c;
}

// map_block: maps the whole pages under the first `bytes` of unmapped `b` (all or none, as
// ExpandableSegment::map) and merges them with free neighbours.
bool CachingAllocatorModel::map(Block* b, int64_t bytes) {
  const int64_t page = b->segment->page;
  const int64_t first = b->offset / page;
  const int64_t end = (b->offset + bytes + page - 1) / page;
  const int64_t mapped = (end - first) * page;
  if (capacity_ > 0 && stats_.reserved + mapped > capacity_) return false;
  trace(TraceEvent::Action::SegmentMap, b->segment->base + first * page, mapped, b->stream);
  Pool& pool = pool_of(*b);
  pool.unmapped.erase(b);
  b->mapped = true;
  if (mapped < b->size) {
    Block* rest = make_block(b->segment, b->stream, b->offset + mapped, b->size - mapped);
    rest->mapped = false;
    rest->prev = b;
    rest->next = b->next;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = mapped;
    pool.unmapped.insert(rest);
  }
  merge(b, b->prev);
  merge(b, b->next);
  to_pool(b);
  raise_reserved(mapped);
  ++stats_.num_device_alloc;
  return true;
}

// unmap_block: unmaps the whole pages inside free block `b`; what is left at either end stays a
// free mapped block.
void CachingAllocatorModel::unmap(Block* b) {
  const int64_t page = b->segment->page;
  const int64_t first = (b->offset + page - 1) / page;
  const int64_t end = (b->offset + b->size) / page;
  if (first >= end) return;
  Pool& pool = pool_of(*b);
  pool.blocks.erase(b);
  if (const int64_t before = first * page - b->offset; before > 0) {
    Block* f = make_block(b->segment, b->stream, b->offset, before);
    f->prev = b->prev;
    if (f->prev != nullptr) f->prev->next = f;
    f->next = b;
    b->prev = f;
    to_pool(f);
  }
  if (const int64_t after = b->offset + b->size - end * page; after > 0) {
    Block* f = make_block(b->segment, b->stream, end * page, after);
    f->next = b->next;
    if (f->next != nullptr) f->next->prev = f;
    f->prev = b;
    b->next = f;
    to_pool(f);
  }
  const int64_t unmapped = (end - first) * page;
  trace(TraceEvent::Action::SegmentUnmap, b->segment->base + first * page, unmapped, b->stream);
  b->offset = first * page;
  b->size = unmapped;
  b->mapped = false;
  merge(b, b->prev);
  merge(b, b->next);
  pool.unmapped.insert(b);
  stats_.reserved -= unmapped;
  ++stats_.num_device_free;
}

// ---- giving memory back --------------------------------------------------------------------

// garbage_collect_cached_blocks: while reserved is above threshold x capacity, frees whole cached
// large-pool segments, those unused for at least the average time first, then again over those
// left, until enough is reclaimed. Only fixed segments; no waiting for other streams.
void CachingAllocatorModel::garbage_collect(const AllocatorSettings& s) {
  const auto threshold =
      static_cast<int64_t>(s.garbage_collection_threshold * static_cast<double>(capacity_));
  if (stats_.reserved <= threshold) return;
  const int64_t target = stats_.reserved - threshold;
  auto age = [&](const Block* b) { return large_.free_block_lookups - b->gc_base; };
  int64_t total_age = 0;
  int64_t candidates = 0;
  for (const Block* b : large_.blocks) {
    if (!is_split(b)) {
      total_age += age(b);
      ++candidates;
    }
  }
  int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && candidates > 0) {
    const double average = static_cast<double>(total_age) / static_cast<double>(candidates);
    freed = false;
    for (auto it = large_.blocks.begin(); it != large_.blocks.end();) {
      Block* b = *it++;
      if (!is_split(b) && !b->segment->expandable && static_cast<double>(age(b)) >= average) {
        freed = true;
        reclaimed += b->size;
        total_age -= age(b);
        --candidates;
        release_segment(b);
      }
    }
  }
}

// release_available_cached_blocks (with max_split_size set): frees the smallest cached oversize
// block that covers the request (at least max_split_size), else the largest ones of the stream
// until that much is freed. True when enough was freed.
bool CachingAllocatorModel::release_oversize(const Request& r) {
  const int64_t mss = r.s.max_split_size;
  if (mss == AllocatorSettings::kUnlimited) return false;
  Pool& pool = r.small ? small_ : large_;
  Block probe;
  probe.stream = r.stream;
  probe.size = std::max(r.size, mss);
  probe.offset = -1;
  // Only whole fixed segments go back: an oversize block is one unless the settings changed since
  // it was split (torch would hand the driver part of a segment then).
  auto releasable = [](const Block* b) { return !b->segment->expandable && !is_split(b); };
  auto it = pool.blocks.lower_bound(&probe);
  if (it != pool.blocks.end() && (*it)->stream == r.stream && !(*it)->segment->expandable) {
    if (!releasable(*it)) return false;
    release_segment(*it);
    return true;
  }
  if (it == pool.blocks.begin()) return false;
  int64_t released = 0;
  --it;  // the stream's largest block below the probe
  while (released < probe.size && (*it)->size >= mss && (*it)->stream == r.stream) {
    const auto current = it;
    const bool first = current == pool.blocks.begin();
    if (!first) --it;
    if (releasable(*current)) {
      released += (*current)->size;
      release_segment(*current);
    }
    if (first) break;
  }
  return released >= probe.size;
}

// release_cached_blocks: completes the frees held back for other streams (synchronize_and_free_
// events), then gives back every wholly free fixed segment and every whole free page of expandable
// segments, of every stream.
void CachingAllocatorModel::release_cache() {
  ++stats_.num_sync_all_streams;
  complete_all();
  release_blocks(large_);
  release_blocks(small_);
}

void CachingAllocatorModel::release_blocks(Pool& pool) {
  std::vector<Block*> expandable;
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* b = *it++;
    if (b->segment->expandable) {
      expandable.push_back(b);  // unmapping changes the pool: afterwards
    } else if (!is_split(b)) {
      release_segment(b);
    }
  }
  for (Block* b : expandable) {
    unmap(b);
    if (!b->mapped && !is_split(b)) release_expandable(b);
  }
}

// release_block: the free whole fixed segment `b` goes back to the driver.
void CachingAllocatorModel::release_segment(Block* b) {
  trace(TraceEvent::Action::SegmentFree, address(b), b->size, b->stream);
  pool_of(*b).blocks.erase(b);
  stats_.reserved -= b->size;
  ++stats_.num_device_free;
  remove_segment(b->segment);
  drop_block(b);
}

// release_expandable_segment: an expandable segment with nothing mapped is dropped.
void CachingAllocatorModel::release_expandable(Block* b) {
  pool_of(*b).unmapped.erase(b);
  remove_segment(b->segment);
  drop_block(b);
}

void CachingAllocatorModel::empty_cache() { release_cache(); }

// ---- frees and other streams ---------------------------------------------------------------

void CachingAllocatorModel::record_stream(Block* block, int64_t stream) {
  // Uses on the allocation stream need nothing (recordStream ignores them).
  if (block == nullptr || stream == block->stream) return;
  auto& uses = block->stream_uses;
  if (std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
}

CachingAllocatorModel::PendingFree CachingAllocatorModel::free(Block* block) {
  if (block == nullptr) return 0;
  block->allocated = false;
  stats_.allocated -= block->size;
  if (block->stream_uses.empty()) {
    trace(TraceEvent::Action::FreeCompleted, address(block), block->requested, block->stream);
    free_block(block);
    return 0;
  }
  // insert_events: the block waits for an event on each recorded stream.
  const PendingFree id = next_pending_++;
  block->pending = id;
  pending_.emplace(id, block);
  ++stats_.pending;
  stats_.pending_bytes += block->size;
  return id;
}

// free_block: merges the freed block with its free neighbours and caches it, keeping the count of
// free pieces of partly used fixed segments.
void CachingAllocatorModel::free_block(Block* b) {
  int64_t pieces = 0;
  int64_t bytes = 0;
  for (Block* neighbour : {b->prev, b->next}) {
    if (const int64_t taken = merge(b, neighbour); taken > 0) {
      --pieces;
      bytes -= taken;
    }
  }
  to_pool(b);
  if (is_split(b)) {
    ++pieces;
    bytes += b->size;
  }
  // Like torch, free space of expandable segments is not fragmentation: its pages can be unmapped.
  if (!b->segment->expandable) {
    stats_.inactive_split += pieces;
    stats_.inactive_split_bytes += bytes;
  }
}

void CachingAllocatorModel::finish_pending(std::pmr::map<PendingFree, Block*>::iterator it) {
  Block* b = it->second;
  pending_.erase(it);
  --stats_.pending;
  stats_.pending_bytes -= b->size;
  b->pending = 0;
  b->stream_uses.clear();
  trace(TraceEvent::Action::FreeCompleted, address(b), b->requested, b->stream);
  free_block(b);
}

void CachingAllocatorModel::complete(PendingFree id) {
  if (auto it = pending_.find(id); it != pending_.end()) finish_pending(it);
}

void CachingAllocatorModel::complete_stream(int64_t stream) {
  // process_events: frees complete in the order they were made.
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto& uses = it->second->stream_uses;
    uses.erase(std::remove(uses.begin(), uses.end(), stream), uses.end());
    if (uses.empty()) {
      finish_pending(it++);
    } else {
      ++it;
    }
  }
}

void CachingAllocatorModel::complete_all() {
  while (!pending_.empty()) finish_pending(pending_.begin());
}

// ---- memory history ------------------------------------------------------------------------

int64_t CachingAllocatorModel::address(const Block* b) { return b->segment->base + b->offset; }
int64_t CachingAllocatorModel::size_of(const Block* b) { return b->size; }
int64_t CachingAllocatorModel::requested_of(const Block* b) { return b->requested; }
int64_t CachingAllocatorModel::stream_of(const Block* b) { return b->stream; }

std::vector<CachingAllocatorModel::SegmentState> CachingAllocatorModel::state() const {
  // Each live segment's first block, found among the blocks in use (dropped ones have no segment).
  std::vector<const Block*> heads;
  for (const auto& b : block_store_) {
    if (b->segment != nullptr && b->prev == nullptr) heads.push_back(b.get());
  }
  std::vector<SegmentState> out;
  for (const Block* head : heads) {
    SegmentState* seg = nullptr;
    for (const Block* b = head; b != nullptr; b = b->next) {
      if (!b->mapped) {  // the end of a run of mapped pages
        seg = nullptr;
        continue;
      }
      if (seg == nullptr) {
        out.push_back({address(b), 0, b->stream, b->segment->small, b->segment->expandable, {}});
        seg = &out.back();
      }
      seg->size += b->size;
      seg->blocks.push_back(
          {address(b), b->size, b->allocated ? b->requested : 0, b->allocated, b->pending != 0});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentState& a, const SegmentState& b) { return a.addr < b.addr; });
  return out;
}

CachingAllocatorModel::Stats CachingAllocatorModel::stats() const {
  Stats s = stats_;
  s.segments = segments();
  return s;
}

}  // namespace offtune::detail::sim
