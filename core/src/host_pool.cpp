#include "host_pool.hpp"

#include <c10/util/Exception.h>

#include <cstring>
#include <utility>

#include "sysmem.hpp"

namespace offtune::detail {
namespace {
constexpr int64_t kBigSlabRound = 2 << 20;  // granularity of dedicated slabs
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
}  // namespace

// 512 bytes is enough for any dtype and for DMA engines; O_DIRECT wants the file system's block.
HostPool::HostPool(HostMemorySource& source, int64_t slab_bytes, bool poison, int64_t align)
    : source_(source), slab_bytes_(slab_bytes), poison_(poison), align_(align) {}

HostPool::~HostPool() {
  // Blocks still referenced hold a shared_ptr to the pool, so only free slabs remain here.
  for (auto& slab : slabs_) source_.release(slab->base, slab->size, slab->pinned);
}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::move(other.pool_);
    slab_ = std::exchange(other.slab_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    offset_ = other.offset_;
    length_ = other.length_;
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HostBlock::reset() {
  if (data_ == nullptr) return;
  pool_->release(static_cast<HostPool::Slab*>(slab_), offset_, length_);
  pool_.reset();
  data_ = slab_ = nullptr;
  size_ = 0;
}

HostPool::Slab* HostPool::take(bool pinned, int64_t length, int64_t& offset) {
  for (auto& slab : slabs_) {
    if (slab->pinned != pinned) continue;
    for (auto it = slab->free.begin(); it != slab->free.end(); ++it) {
      const int64_t start = it->second;
      if (it->first - start < length) continue;  // first fit, in address order
      offset = start;
      if (it->first - start == length) {
        slab->free.erase(it);
      } else {
        it->second = start + length;
      }
      return slab.get();
    }
  }
  return nullptr;
}

HostPool::Slab* HostPool::add_slab(int64_t length, bool want_pinned, bool& got_pinned) {
  const int64_t size = length > slab_bytes_ ? round_up(length, kBigSlabRound) : slab_bytes_;
  check_host_ram(size);
  void* base = source_.allocate(size, want_pinned);
  got_pinned = want_pinned;
  if (base == nullptr && want_pinned) return nullptr;  // the caller falls back
  if (base == nullptr) {
    TORCH_CHECK(false, "offtune: out of host memory: could not reserve ", size,
                " bytes for offloaded activations");
  }
  auto slab = std::make_unique<Slab>(&nodes_);
  slab->base = static_cast<char*>(base);
  slab->size = size;
  slab->pinned = want_pinned;
  if (size > length) slab->free.emplace(size, length);
  reserved_ += size;
  slabs_.push_back(std::move(slab));
  return slabs_.back().get();
}

HostBlock HostPool::allocate(int64_t bytes, bool want_pinned, bool& pinned) {
  const int64_t length = round_up(std::max<int64_t>(bytes, 1), align_);
  Slab* chosen = nullptr;
  int64_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Pinned requests are served from pinned memory whenever it can be had, and fall back one
    // request at a time: a pageable block makes its device-to-host copy block the host (CUDA
    // stages it synchronously), so one failure must not turn every later request pageable.
    chosen = take(want_pinned, length, offset);
    bool got_pinned = want_pinned;
    if (chosen == nullptr) {
      if (want_pinned && pin_backoff_ > 0) {
        --pin_backoff_;  // pinning failed lately: skip this attempt (cudaHostAlloc is slow)
      } else {
        chosen = add_slab(length, want_pinned, got_pinned);
        if (chosen != nullptr) {
          offset = 0;
          if (want_pinned) pin_failures_in_row_ = 0;
        } else {
          // Pinning failed: try again after 0, 1, 3, 7, ... requests (at most 255) that needed
          // a new pinned slab, so that memory freed meanwhile is pinned again.
          pin_backoff_ = (int64_t{1} << std::min<int64_t>(pin_failures_in_row_, 8)) - 1;
          ++pin_failures_in_row_;
          if (!warned_) {
            warned_ = true;
            TORCH_WARN(
                "offtune: could not pin host memory; offloading this copy to pageable "
                "memory instead (its device-to-host copy blocks the host); pinned memory "
                "is tried again for later copies");
          }
        }
      }
      if (chosen == nullptr) {
        // This request only: pageable space already reserved, else a pageable slab.
        chosen = take(false, length, offset);
        if (chosen == nullptr) {
          chosen = add_slab(length, false, got_pinned);
          offset = 0;
        }
        ++fallbacks_;
      }
    }
    chosen->used += length;
    in_use_ += length;
    pinned = chosen->pinned;
  }
  HostBlock block;
  block.pool_ = shared_from_this();
  block.slab_ = chosen;
  block.data_ = chosen->base + offset;
  block.offset_ = offset;
  block.length_ = length;
  block.size_ = bytes;
  return block;
}

void HostPool::release(Slab* slab, int64_t offset, int64_t length) {
  if (poison_) std::memset(slab->base + offset, 0xFF, static_cast<size_t>(length));
  std::lock_guard<std::mutex> lock(mutex_);
  // Ranges are disjoint: the first one ending after the block starts at or after its end, and
  // the one before it ends at or before its start.
  const int64_t end = offset + length;
  auto& ranges = slab->free;
  const auto next = ranges.lower_bound(end);
  const bool joins_next = next != ranges.end() && next->second == end;
  const auto prev = next == ranges.begin() ? ranges.end() : std::prev(next);
  const bool joins_prev = prev != ranges.end() && prev->first == offset;
  if (joins_next) {
    next->second = joins_prev ? prev->second : offset;
    if (joins_prev) ranges.erase(prev);
  } else if (joins_prev) {
    auto node = ranges.extract(prev);  // its end moves: re-keyed in place, no new node
    node.key() = end;
    ranges.insert(next, std::move(node));
  } else {
    ranges.emplace_hint(next, end, offset);
  }
  slab->used -= length;
  in_use_ -= length;
}

void HostPool::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = slabs_.begin(); it != slabs_.end();) {
    if ((*it)->used == 0) {
      source_.release((*it)->base, (*it)->size, (*it)->pinned);
      reserved_ -= (*it)->size;
      it = slabs_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t HostPool::in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}
int64_t HostPool::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}
int64_t HostPool::pageable_fallbacks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fallbacks_;
}

}  // namespace offtune::detail
