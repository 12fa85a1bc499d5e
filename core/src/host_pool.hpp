// Host memory pool for offloaded copies. Reserves memory in slabs (options.host_pool_slab_bytes; a
// larger request gets a slab of its own rounded to 2 MiB, never to a power of two) and
// sub-allocates 512-byte-aligned blocks (4 KiB with the disk tier, for O_DIRECT) with first-fit and
// coalescing. Avoids one cudaHostAlloc per
// tensor (slow, and it serialises with the GPU) and the power-of-two rounding of torch's caching
// host allocator. When pinning fails, that request gets pageable memory (warned once, counted per
// request); later pinned requests get pinned memory again whenever it can be had (pinned slabs
// first, then a new pinned slab, tried again with a backoff after failures).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
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

class HostPool : public std::enable_shared_from_this<HostPool> {
 public:
  // `align`: block addresses and lengths are multiples of it (a power of two, at most 4096: slabs
  // are page-aligned).
  HostPool(HostMemorySource& source, int64_t slab_bytes, bool poison, int64_t align = 512);

  // A block of `bytes`. `pinned` reports what was obtained (false after a pinning failure).
  HostBlock allocate(int64_t bytes, bool want_pinned, bool& pinned);

  int64_t in_use_bytes() const;
  int64_t reserved_bytes() const;
  int64_t pageable_fallbacks() const;
  // Returns every fully free slab to the source.
  void trim();
  ~HostPool();

 private:
  struct Slab {
    explicit Slab(std::pmr::memory_resource* nodes) : free(nodes) {}
    char* base = nullptr;
    int64_t size = 0;
    bool pinned = false;
    // Free ranges, coalesced: end offset -> start offset. Keyed by the end so that the usual
    // moves change a value, not the tree: a block taken from the front of a range, a block given
    // back just before a free range (backward frees in reverse pack order).
    std::pmr::map<int64_t, int64_t> free;
    int64_t used = 0;
  };
  friend class HostBlock;
  void release(Slab* slab, int64_t offset, int64_t length);
  // Under mutex_: a free range of `length` in a slab of that kind (nullptr when none); a new slab
  // holding one (nullptr when pinned memory was asked for and refused; throws when pageable memory
  // is refused).
  Slab* take(bool pinned, int64_t length, int64_t& offset);
  Slab* add_slab(int64_t length, bool want_pinned, bool& got_pinned);

  HostMemorySource& source_;
  const int64_t slab_bytes_;
  const bool poison_;
  const int64_t align_;
  mutable std::mutex mutex_;
  std::pmr::unsynchronized_pool_resource nodes_;  // the free lists' nodes (used under mutex_)
  std::vector<std::unique_ptr<Slab>> slabs_;
  int64_t in_use_ = 0;
  int64_t reserved_ = 0;
  int64_t fallbacks_ = 0;            // pinned requests served pageable
  int64_t pin_failures_in_row_ = 0;  // new pinned slabs refused since the last one granted
  int64_t pin_backoff_ = 0;          // pinned-slab attempts to skip before trying again
  bool warned_ = false;
};

}  // namespace offtune::detail
