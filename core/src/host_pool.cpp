#include "host_pool.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "sysmem.hpp"

namespace offtune::detail {
namespace {
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kPage = 4096;
// The bound's additive term, and the growth step: the first slab is 2 MiB whatever it holds.
constexpr int64_t kSlack = 2 * kMiB;
// A new shared slab is an eighth of what is reserved: few slabs (about 40 up to 512 MiB, then
// host_pool_slab_bytes each), and the newest, not yet filled, is at most ~11% of the pool.
constexpr int64_t kGrowthDivisor = 8;
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
int64_t round_down(int64_t n, int64_t m) { return n / m * m; }
// A slab of its own is rounded to a power of two of at most 1/16 of the block (2 MiB at most): at
// most 6.25% more, which lets the same tensor grown a little next step (shapes that vary) still
// fit where it was.
int64_t own_slab_bytes(int64_t length) {
  int64_t grain = kPage;
  while (grain < kSlack && grain * 2 <= length / 16) grain *= 2;
  return round_up(length, grain);
}
}  // namespace

// 512 bytes is enough for any dtype and for DMA engines; O_DIRECT wants the file system's block.
HostPool::HostPool(HostMemorySource& source, int64_t slab_bytes, bool poison, int64_t align)
    : source_(source), slab_bytes_(slab_bytes), poison_(poison), align_(align) {}

HostPool::~HostPool() {
  // Blocks still referenced hold a shared_ptr to the pool, so only free slabs remain here.
  for (auto& l : lanes_) {
    for (auto& slab : l.slabs) source_.release(slab->base, slab->size, slab->pinned);
  }
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

// ---- Lanes: first fit over slabs in O(log n)

HostPool::Slab* HostPool::Lane::first_fit(int64_t length) const {
  if (width == 0 || largest[1] < length) return nullptr;
  size_t node = 1;
  while (node < width) node = largest[2 * node] >= length ? 2 * node : 2 * node + 1;
  return slabs[node - width].get();
}

void HostPool::Lane::update(const Slab& slab) {
  size_t node = width + slab.index;
  largest[node] = slab.largest();
  for (node /= 2; node >= 1; node /= 2) {
    largest[node] = std::max(largest[2 * node], largest[2 * node + 1]);
  }
}

void HostPool::Lane::rebuild() {
  width = 1;
  while (width < slabs.size()) width *= 2;
  largest.assign(2 * width, 0);
  for (size_t i = 0; i < slabs.size(); ++i) {
    slabs[i]->index = i;
    largest[width + i] = slabs[i]->largest();
  }
  for (size_t node = width - 1; node >= 1; --node) {
    largest[node] = std::max(largest[2 * node], largest[2 * node + 1]);
  }
}

// ---- Placement

HostPool::Slab* HostPool::take(bool pinned, int64_t length, int64_t& offset) {
  Lane& l = lane(pinned);
  Slab* slab = l.first_fit(length);
  if (slab == nullptr) return nullptr;
  // Best fit in that slab; on equal lengths the lowest offset.
  auto fit = slab->by_length.lower_bound({length, std::numeric_limits<int64_t>::min()});
  const auto [range_length, start] = *fit;
  offset = start;
  auto by_end = slab->by_end.find(start + range_length);
  if (range_length == length) {
    slab->by_length.erase(fit);
    slab->by_end.erase(by_end);
  } else {
    // The rest of the range keeps its end: a new value, and the length node reused.
    by_end->second = start + length;
    auto node = slab->by_length.extract(fit);
    node.value() = {range_length - length, start + length};
    slab->by_length.insert(std::move(node));
  }
  l.update(*slab);
  return slab;
}

void HostPool::release(Slab* slab, int64_t offset, int64_t length) {
  if (poison_) std::memset(slab->base + offset, 0xFF, static_cast<size_t>(length));
  std::lock_guard<std::mutex> lock(mutex_);
  // Ranges are disjoint: the first one ending after the block starts at or after its end, and
  // the one before it ends at or before its start.
  const int64_t end = offset + length;
  auto& ranges = slab->by_end;
  auto& lengths = slab->by_length;
  const auto next = ranges.lower_bound(end);
  const bool joins_next = next != ranges.end() && next->second == end;
  const auto prev = next == ranges.begin() ? ranges.end() : std::prev(next);
  const bool joins_prev = prev != ranges.end() && prev->first == offset;
  const int64_t start = joins_prev ? prev->second : offset;
  const int64_t stop = joins_next ? next->first : end;
  // The merged range's length node: one of the joined ranges' nodes, re-keyed, else a new one.
  if (joins_next || joins_prev) {
    auto node = joins_next ? lengths.extract({next->first - next->second, next->second})
                           : lengths.extract({prev->first - prev->second, prev->second});
    if (joins_next && joins_prev) lengths.erase({prev->first - prev->second, prev->second});
    node.value() = {stop - start, start};
    lengths.insert(std::move(node));
  } else {
    lengths.emplace(length, offset);
  }
  if (joins_next) {
    next->second = start;
    if (joins_prev) ranges.erase(prev);
  } else if (joins_prev) {
    auto node = ranges.extract(prev);  // its end moves: re-keyed in place, no new node
    node.key() = end;
    ranges.insert(next, std::move(node));
  } else {
    ranges.emplace_hint(next, end, offset);
  }
  lane(slab->pinned).update(*slab);
  slab->used -= length;
  in_use_ -= length;
}

// ---- Growth and release

// The most the pool may reserve once a block of `length` more is in use.
int64_t HostPool::bound_limit(int64_t length) const {
  const int64_t peak = std::max(peak_in_use_, in_use_ + length);
  return peak + peak / 4 + kSlack;
}

int64_t HostPool::grow_by(int64_t length) {
  const int64_t target =
      std::min(std::max(round_up(reserved_ / kGrowthDivisor, kSlack), kSlack), slab_bytes_);
  const int64_t want =
      length > target / 2 ? own_slab_bytes(length) : round_up(target / length * length, kPage);
  const int64_t least = round_up(length, kPage);
  const int64_t limit = bound_limit(length);
  // Cut to what the bound leaves room for, never below the block itself.
  auto fitted = [&] {
    return std::max(least, std::min(want, round_down(limit - reserved_, kPage)));
  };
  if (reserved_ + least > limit) give_back_free_slabs(limit, least);
  return fitted();
}

// Free ranges too small for the request hold more than the bound's margin. Fully free slabs
// (none of which fits the request, or first fit would have found it) go back until the block
// fits under the bound: pageable ones first (pinned memory is the one that is hard to get back),
// then the largest (each cudaFreeHost synchronises the device: as few as possible).
void HostPool::give_back_free_slabs(int64_t limit, int64_t need) {
  std::vector<Slab*> idle;
  for (auto& l : lanes_) {
    for (auto& slab : l.slabs) {
      if (slab->used == 0) idle.push_back(slab.get());
    }
  }
  std::sort(idle.begin(), idle.end(), [](const Slab* a, const Slab* b) {
    return std::pair(a->pinned, -a->size) < std::pair(b->pinned, -b->size);
  });
  bool gave[2] = {false, false};
  for (Slab* slab : idle) {
    if (reserved_ + need <= limit) break;
    source_.release(slab->base, slab->size, slab->pinned);
    reserved_ -= slab->size;
    ++slabs_given_back_;
    gave[slab->pinned ? 1 : 0] = true;
    slab->base = nullptr;  // marks it for removal below
  }
  for (int k = 0; k < 2; ++k) {
    if (!gave[k]) continue;
    std::erase_if(lanes_[k].slabs, [](const auto& slab) { return slab->base == nullptr; });
    lanes_[k].rebuild();
  }
}

HostPool::Slab* HostPool::add_slab(int64_t length, bool want_pinned) {
  const int64_t size = grow_by(length);
  check_host_ram(size);
  void* base = source_.allocate(size, want_pinned);
  if (base == nullptr && want_pinned) return nullptr;  // the caller falls back
  if (base == nullptr) {
    TORCH_CHECK(false, "offtune: out of host memory: could not reserve ", size,
                " bytes for offloaded activations");
  }
  auto slab = std::make_unique<Slab>(&nodes_);
  slab->base = static_cast<char*>(base);
  slab->size = size;
  slab->pinned = want_pinned;
  slab->by_end.emplace(size, 0);
  slab->by_length.emplace(size, 0);
  reserved_ += size;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  ++(want_pinned ? pinned_slabs_made_ : pageable_slabs_made_);
  Lane& l = lane(want_pinned);
  slab->index = l.slabs.size();
  l.slabs.push_back(std::move(slab));
  if (l.slabs.size() > l.width) {
    l.rebuild();
  } else {
    l.update(*l.slabs.back());
  }
  return l.slabs.back().get();
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
    if (chosen == nullptr) {
      if (want_pinned && pin_backoff_ > 0) {
        --pin_backoff_;  // pinning failed lately: skip this attempt (cudaHostAlloc is slow)
      } else if (add_slab(length, want_pinned) != nullptr) {
        if (want_pinned) pin_failures_in_row_ = 0;
        chosen = take(want_pinned, length, offset);
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
      if (chosen == nullptr) {
        // This request only: pageable space already reserved, else a pageable slab.
        chosen = take(false, length, offset);
        if (chosen == nullptr) {
          add_slab(length, false);
          chosen = take(false, length, offset);
        }
        ++fallbacks_;
      }
    }
    chosen->used += length;
    in_use_ += length;
    peak_in_use_ = std::max(peak_in_use_, in_use_);
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

void HostPool::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& l : lanes_) {
    const auto removed = std::erase_if(l.slabs, [&](const std::unique_ptr<Slab>& slab) {
      if (slab->used != 0) return false;
      source_.release(slab->base, slab->size, slab->pinned);
      reserved_ -= slab->size;
      ++slabs_given_back_;
      return true;
    });
    if (removed != 0) l.rebuild();
  }
}

// ---- Figures

int64_t HostPool::in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}
int64_t HostPool::peak_in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_in_use_;
}
int64_t HostPool::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}
int64_t HostPool::peak_reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_reserved_;
}
int64_t HostPool::pinned_slab_allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pinned_slabs_made_;
}
int64_t HostPool::pageable_fallbacks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fallbacks_;
}
HostPoolStats HostPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  HostPoolStats s;
  s.in_use_bytes = in_use_;
  s.peak_in_use_bytes = peak_in_use_;
  s.reserved_bytes = reserved_;
  s.peak_reserved_bytes = peak_reserved_;
  s.slabs = static_cast<int64_t>(lanes_[0].slabs.size() + lanes_[1].slabs.size());
  s.pinned_slab_allocations = pinned_slabs_made_;
  s.pageable_slab_allocations = pageable_slabs_made_;
  s.slab_releases = slabs_given_back_;
  s.pageable_fallbacks = fallbacks_;
  return s;
}

}  // namespace offtune::detail
