// Host memory pool for offloaded copies: blocks carved from a few large reservations (slabs), so
// that there is no cudaHostAlloc per tensor (slow, and it serialises with the GPU) and no
// power-of-two rounding as in torch's caching host allocator. Blocks are 512-byte aligned (4 KiB
// with the disk tier, for O_DIRECT).
//
// What it pins is what the copies need: reserved_bytes() <= 1.25 x peak_in_use_bytes() + 2 MiB,
// its rounding of slabs included (in_use counts blocks rounded to the alignment). A new slab is
// cut to what that leaves room for, so growth alone does not break it; only free space stranded
// in ranges too small for the request at hand can, and then fully free slabs are given back first
// and the new slab is the block alone. tests/test_host_pool.cpp (HostPoolBound.*) checks the bound
// for the engine's order (forward allocates in order, backward frees in reverse, step after step)
// and the looser figure measured for others (the disk tier's window, random frees: up to 1.34 x
// for transformer-like copies, up to 1.75 x when one copy is near half the peak).
//
// - Placement: the first slab, in the order they were made, with a free range that fits; in it, the
//   smallest such range (best fit). A step that repeats the first (same sizes in the same order,
//   the last step's blocks all back) therefore places every block where the first step did: the
//   pool does not grow, and nothing is pinned after the first step.
// - Growth, when nothing fits: the target is an eighth of what is reserved, in 2 MiB steps, between
//   2 MiB and host_pool_slab_bytes (the largest shared slab). A request over half the target gets a
//   slab of its own, rounded up to a power of two no larger than 1/16 of it (at most 2 MiB: room
//   for the same tensor a little larger next step). Otherwise the slab holds as many blocks of the
//   request's size as the target allows (no tail lost to a size that does not divide it).
// - Release: slabs stay reserved when they become free. The peak repeats every step, and pinning
//   (cudaHostAlloc) is slow while cudaFreeHost synchronises the device, so churn would cost every
//   step. Fully free slabs go back only on trim() (release_cached_memory()), or when the pool must
//   grow past the bound (shapes that drift between steps): pageable ones first, then largest first.
// - When pinning fails, that request gets pageable memory (warned once, counted per request);
//   later pinned requests get pinned memory again whenever it can be had (pinned slabs first, then
//   a new pinned slab, tried again with a backoff after failures).
//
// Each allocate and release is O(log n) in slabs and free ranges; growing and giving back slabs
// (rare, and slower than the source's call anyway) is linear in slabs. Free-range nodes come from a
// pool resource: no heap allocation per block once the pool has warmed up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "backend.hpp"

namespace offtune::detail {

class HostPool;

// One block of a pool: raw memory, returned to the pool when the handle is reset or destroyed. It
// keeps the pool alive. Move-only; no tensor is made for it (copies use raw pointers).
class HostBlock {
 public:
  HostBlock() = default;
  HostBlock(HostBlock&& other) noexcept { *this = std::move(other); }
  HostBlock& operator=(HostBlock&& other) noexcept;
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  ~HostBlock() { reset(); }

  void* data() const { return data_; }
  int64_t size() const { return size_; }  // the bytes asked for
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  friend class HostPool;
  std::shared_ptr<HostPool> pool_;
  void* slab_ = nullptr;
  void* data_ = nullptr;
  int64_t offset_ = 0, length_ = 0, size_ = 0;
};

// One consistent snapshot of a pool's figures (one lock), for reports.
struct HostPoolStats {
  int64_t in_use_bytes = 0;  // live blocks, each rounded up to the pool's alignment
  int64_t peak_in_use_bytes = 0;
  int64_t reserved_bytes = 0;  // slabs held, pinned and pageable
  int64_t peak_reserved_bytes = 0;
  int64_t slabs = 0;                      // slabs held now
  int64_t pinned_slab_allocations = 0;    // pinned reservations made over the pool's life
  int64_t pageable_slab_allocations = 0;  // pageable ones (after pinning failed, or not wanted)
  int64_t slab_releases = 0;              // slabs given back: trim() and growth past the bound
  int64_t pageable_fallbacks = 0;         // pinned requests served pageable
};

class HostPool : public std::enable_shared_from_this<HostPool> {
 public:
  // `slab_bytes`: the largest shared slab (larger requests get a slab of their own). `align`: block
  // addresses and lengths are multiples of it (a power of two, at most 4096: slabs are
  // page-aligned).
  HostPool(HostMemorySource& source, int64_t slab_bytes, bool poison, int64_t align = 512);

  // A block of `bytes`. `pinned` reports what was obtained (false after a pinning failure).
  HostBlock allocate(int64_t bytes, bool want_pinned, bool& pinned);

  int64_t in_use_bytes() const;
  int64_t peak_in_use_bytes() const;
  int64_t reserved_bytes() const;
  int64_t peak_reserved_bytes() const;
  int64_t pinned_slab_allocations() const;
  int64_t pageable_fallbacks() const;
  HostPoolStats stats() const;
  // Returns every fully free slab to the source.
  void trim();
  ~HostPool();

 private:
  struct Slab {
    explicit Slab(std::pmr::memory_resource* nodes) : by_end(nodes), by_length(nodes) {}
    char* base = nullptr;
    int64_t size = 0;
    bool pinned = false;
    size_t index = 0;  // its place in its lane: the order first fit walks
    // Free ranges, coalesced, twice. By end: end offset -> start offset, keyed by the end so that
    // the usual moves change a value, not the tree (a block taken from the front of a range, a
    // block given back just before a free range: backward frees in reverse pack order). By length:
    // (length, start), for best fit and for the slab's largest range.
    std::pmr::map<int64_t, int64_t> by_end;
    std::pmr::set<std::pair<int64_t, int64_t>> by_length;
    int64_t used = 0;
    int64_t largest() const { return by_length.empty() ? 0 : by_length.rbegin()->first; }
  };
  // The slabs of one kind (pinned or pageable) in the order they were made, and a max segment tree
  // over their largest free ranges: the first slab that fits is found in O(log n).
  struct Lane {
    std::vector<std::unique_ptr<Slab>> slabs;
    std::vector<int64_t> largest;  // node 1 is the root; leaves at [width, 2 * width)
    size_t width = 0;
    Slab* first_fit(int64_t length) const;
    void update(const Slab& slab);
    void rebuild();  // after slabs were added past the width or removed
  };
  friend class HostBlock;
  void release(Slab* slab, int64_t offset, int64_t length);
  // Under mutex_: a free range of `length` taken from a slab of that kind (nullptr when none); a
  // new slab with room for it (nullptr when pinned memory was asked for and refused; throws when
  // pageable memory is refused).
  Slab* take(bool pinned, int64_t length, int64_t& offset);
  Slab* add_slab(int64_t length, bool want_pinned);
  // Under mutex_: the size of a new slab for a block of `length` (the growth policy above),
  // giving back fully free slabs first when even the block alone would break the bound.
  int64_t grow_by(int64_t length);
  int64_t bound_limit(int64_t length) const;
  void give_back_free_slabs(int64_t limit, int64_t need);
  Lane& lane(bool pinned) { return lanes_[pinned ? 1 : 0]; }

  HostMemorySource& source_;
  const int64_t slab_bytes_;
  const bool poison_;
  const int64_t align_;
  mutable std::mutex mutex_;
  std::pmr::unsynchronized_pool_resource nodes_;  // the free lists' nodes (used under mutex_)
  Lane lanes_[2];                                 // pageable, pinned
  int64_t in_use_ = 0;
  int64_t peak_in_use_ = 0;
  int64_t reserved_ = 0;
  int64_t peak_reserved_ = 0;
  int64_t pinned_slabs_made_ = 0;
  int64_t pageable_slabs_made_ = 0;
  int64_t slabs_given_back_ = 0;
  int64_t fallbacks_ = 0;            // pinned requests served pageable
  int64_t pin_failures_in_row_ = 0;  // new pinned slabs refused since the last one granted
  int64_t pin_backoff_ = 0;          // pinned-slab attempts to skip before trying again
  bool warned_ = false;
};

}  // namespace offtune::detail
