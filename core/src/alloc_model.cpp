#include "alloc_model.hpp"

#include <algorithm>

namespace offtune::detail::sim {

struct CachingAllocatorModel::Segment {
  int64_t id = 0;
  int64_t size = 0;
  bool small = false;
  std::vector<std::unique_ptr<Block>> blocks;  // owned; linked by prev/next
};

struct CachingAllocatorModel::Block {
  Segment* segment = nullptr;
  int64_t stream = 0;
  int64_t offset = 0;
  int64_t size = 0;
  bool free = true;
  Block* prev = nullptr;
  Block* next = nullptr;
};

bool CachingAllocatorModel::Order::operator()(const Block* a, const Block* b) const {
  // Deterministic: no addresses, so the same sequence picks the same blocks on every run.
  return std::tie(a->stream, a->size, a->segment->id, a->offset) <
         std::tie(b->stream, b->size, b->segment->id, b->offset);
}

int64_t CachingAllocatorModel::round_size(int64_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

int64_t CachingAllocatorModel::segment_size(int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocatorModel::CachingAllocatorModel() = default;
CachingAllocatorModel::~CachingAllocatorModel() = default;

CachingAllocatorModel::Pool& CachingAllocatorModel::pool_of(const Block& b) {
  return b.segment->small ? small_ : large_;
}

CachingAllocatorModel::Block* CachingAllocatorModel::allocate(int64_t bytes, int64_t stream) {
  if (bytes <= 0) return nullptr;
  const int64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_ : large_;
  // The smallest free block of this stream that fits: search from (stream, size, first segment).
  Segment probe_segment;
  probe_segment.id = -1;
  Block probe;
  probe.segment = &probe_segment;
  probe.stream = stream;
  probe.size = size;
  Block* block = nullptr;
  if (auto it = pool.lower_bound(&probe); it != pool.end() && (*it)->stream == stream) {
    block = *it;
    pool.erase(it);
  } else {
    auto seg = std::make_unique<Segment>();
    seg->id = next_segment_++;
    seg->size = segment_size(size);
    seg->small = small;
    auto whole = std::make_unique<Block>();
    whole->segment = seg.get();
    whole->stream = stream;
    whole->size = seg->size;
    block = whole.get();
    seg->blocks.push_back(std::move(whole));
    reserved_ += seg->size;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    segments_.push_back(std::move(seg));
  }
  const int64_t remaining = block->size - size;
  if (small ? remaining >= kMinBlock : remaining > kSmallSize) {
    auto rest = std::make_unique<Block>();
    rest->segment = block->segment;
    rest->stream = stream;
    rest->offset = block->offset + size;
    rest->size = remaining;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest.get();
    block->next = rest.get();
    block->size = size;
    pool.insert(rest.get());
    block->segment->blocks.push_back(std::move(rest));
  }
  block->free = false;
  return block;
}

void CachingAllocatorModel::free(Block* b) {
  if (b == nullptr) return;
  Pool& pool = pool_of(*b);
  b->free = true;
  auto& owned = b->segment->blocks;
  auto drop = [&](Block* gone) {
    owned.erase(std::find_if(owned.begin(), owned.end(),
                             [&](const std::unique_ptr<Block>& p) { return p.get() == gone; }));
  };
  if (Block* p = b->prev; p != nullptr && p->free) {
    pool.erase(p);
    b->offset = p->offset;
    b->size += p->size;
    b->prev = p->prev;
    if (p->prev != nullptr) p->prev->next = b;
    drop(p);
  }
  if (Block* n = b->next; n != nullptr && n->free) {
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    drop(n);
  }
  pool.insert(b);
}

void CachingAllocatorModel::release(Segment* s) {
  reserved_ -= s->size;
  segments_.erase(std::find_if(segments_.begin(), segments_.end(),
                               [&](const std::unique_ptr<Segment>& p) { return p.get() == s; }));
}

void CachingAllocatorModel::empty_cache() {
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->offset == 0 && b->size == b->segment->size) {
        it = pool->erase(it);
        release(b->segment);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace offtune::detail::sim
