// The host pool: blocks from slabs, no per-tensor allocation, no power-of-two waste, coalescing,
// poison on free, pageable fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "host_pool.hpp"  // internal header: this suite tests the pool itself

namespace offtune::detail {
namespace {

class CountingSource : public HostMemorySource {
 public:
  int allocations = 0;
  int releases = 0;
  bool fail_pinned = false;
  int pinned_refused = 0;
  void* allocate(int64_t bytes, bool pinned) override {
    if (pinned && fail_pinned) {
      ++pinned_refused;
      return nullptr;
    }
    ++allocations;
    // Page-aligned, as pinned memory is.
    return std::aligned_alloc(4096, static_cast<size_t>((bytes + 4095) / 4096 * 4096));
  }
  void release(void* p, int64_t, bool) override {
    ++releases;
    std::free(p);
  }
};

constexpr int64_t kMiB = 1 << 20;

TEST(HostPool, SubAllocatesFromOneSlab) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
  bool pinned = false;
  std::vector<HostBlock> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(pool->allocate(100'000, true, pinned));
  EXPECT_TRUE(pinned);
  EXPECT_EQ(src.allocations, 1);  // ten tensors, one reservation
  EXPECT_EQ(pool->reserved_bytes(), 4 * kMiB);
  EXPECT_GE(pool->in_use_bytes(), 10 * 100'000);
  EXPECT_LT(pool->in_use_bytes(), 10 * (100'000 + 512));
  for (auto& b : blocks) EXPECT_EQ(b.size(), 100'000);
  blocks.clear();
  EXPECT_EQ(pool->in_use_bytes(), 0);
  // Freed blocks coalesce: a request of the whole slab fits again without a new reservation.
  auto whole = pool->allocate(4 * kMiB, true, pinned);
  EXPECT_EQ(src.allocations, 1);
}

TEST(HostPool, LargeRequestsGetExactSlabsNotPowersOfTwo) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
  bool pinned = false;
  auto big = pool->allocate(9 * kMiB + 1, true, pinned);
  EXPECT_EQ(pool->reserved_bytes(), 10 * kMiB);  // rounded to 2 MiB, not to 16 MiB
  big.reset();
  pool->trim();
  EXPECT_EQ(pool->reserved_bytes(), 0);
  EXPECT_EQ(src.releases, 1);
}

TEST(HostPool, PoisonsFreedBlocks) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, true);
  bool pinned = false;
  auto a = pool->allocate(1024, true, pinned);
  std::memset(a.data(), 0x11, 1024);
  auto* raw = static_cast<unsigned char*>(a.data());
  a.reset();
  EXPECT_EQ(raw[0], 0xFF);
  EXPECT_EQ(raw[1023], 0xFF);
}

TEST(HostPool, FallsBackToPageableWhenPinningFails) {
  CountingSource src;
  src.fail_pinned = true;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
  bool pinned = true;
  auto a = pool->allocate(1024, true, pinned);
  EXPECT_FALSE(pinned);
  EXPECT_EQ(pool->pageable_fallbacks(), 1);
  auto b = pool->allocate(1024, true, pinned);  // pinning tried again, then the pageable slab
  EXPECT_FALSE(pinned);
  EXPECT_EQ(pool->pageable_fallbacks(), 2);  // counted per block, as OffloadStats says
  EXPECT_EQ(src.allocations, 1);
}

// One failure to pin does not make later pinned requests pageable: a pageable block's
// device-to-host copy blocks the host on CUDA. Pinned memory is tried again (with a backoff while
// it keeps failing), and pinned slabs are preferred to pageable space already reserved.
TEST(HostPool, APinningFailureFallsBackForThatRequestOnly) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
  bool pinned = true;
  src.fail_pinned = true;
  auto pageable = pool->allocate(100'000, true, pinned);
  EXPECT_FALSE(pinned);
  src.fail_pinned = false;  // pinned memory can be had again
  auto next = pool->allocate(100'000, true, pinned);
  EXPECT_TRUE(pinned) << "served from the pageable slab after one pinning failure";
  auto third = pool->allocate(100'000, true, pinned);
  EXPECT_TRUE(pinned) << "the pinned slab is preferred to pageable space";
  EXPECT_EQ(src.allocations, 2);
  EXPECT_EQ(pool->pageable_fallbacks(), 1);

  // While pinning keeps failing, it is not attempted for every request: after the k-th failure
  // in a row, the next 2^(k-1) - 1 requests that need a new slab go straight to pageable memory.
  auto fresh = std::make_shared<HostPool>(src, 4096, false);  // every request needs a new slab
  src.fail_pinned = true;
  std::vector<HostBlock> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(fresh->allocate(4096, true, pinned));
  EXPECT_FALSE(pinned);
  EXPECT_EQ(fresh->pageable_fallbacks(), 20);
  // The first pool's one refusal, then this pool's attempts at requests 1, 2, 4, 8 and 16.
  EXPECT_EQ(src.pinned_refused, 1 + 5);
}

TEST(HostPool, BlocksOutliveThePoolHandle) {
  CountingSource src;
  HostBlock block;
  {
    auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
    bool pinned = false;
    block = pool->allocate(4096, true, pinned);
  }
  std::memset(block.data(), 1, 4096);  // still valid: the block keeps the pool alive
  block.reset();
  EXPECT_EQ(src.releases, 1);
}

// Blocks given back in any order coalesce: whatever the order, the blocks of one slab never
// overlap, a freed range is handed out again first-fit, and once all are back the whole slab is
// one free range again (a block of the slab's size fits without a second reservation).
TEST(HostPool, CoalescesFreedRangesInAnyOrder) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 1 * kMiB, false);
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<HostBlock> blocks;
    bool pinned = false;
    for (int64_t used = 0;;) {
      const int64_t bytes = std::uniform_int_distribution<int64_t>(1, 40'000)(rng);
      const int64_t length = (bytes + 511) / 512 * 512;
      if (used + length > kMiB) break;
      blocks.push_back(pool->allocate(bytes, true, pinned));
      used += length;
    }
    ASSERT_EQ(src.allocations, 1) << "round " << round;
    std::vector<std::pair<char*, char*>> spans;
    for (const auto& b : blocks) {
      auto* p = static_cast<char*>(b.data());
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u);
      spans.emplace_back(p, p + b.size());
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) ASSERT_LE(spans[i - 1].second, spans[i].first);
    // A hole in the middle is reused first-fit by a block that fits it.
    const size_t mid = blocks.size() / 2;
    void* hole = blocks[mid].data();
    const int64_t hole_bytes = blocks[mid].size();
    blocks[mid].reset();
    HostBlock again = pool->allocate(hole_bytes, true, pinned);
    EXPECT_EQ(again.data(), hole);
    again.reset();
    std::shuffle(blocks.begin(), blocks.end(), rng);
    for (auto& b : blocks) b.reset();
    EXPECT_EQ(pool->in_use_bytes(), 0);
    HostBlock whole = pool->allocate(kMiB, true, pinned);
    EXPECT_EQ(src.allocations, 1) << "the freed ranges did not coalesce, round " << round;
  }
}

}  // namespace
}  // namespace offtune::detail
