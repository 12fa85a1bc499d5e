// The host pool: blocks from slabs, no per-tensor allocation, no power-of-two waste, coalescing,
// poison on free, pageable fallback (HostPool.*); and what it pins: at most 1.25 x the peak of the
// copies alive plus 2 MiB for the engine's orders, with no growth once a step has run, and a
// measured looser figure for other orders (HostPoolBound.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
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

// Addresses with no memory behind them, for patterns of many GiB: the pool only does arithmetic
// on them (no poison, and the tests never touch a block). It keeps what it handed out, so that
// reserved_bytes() can be checked against what the source really holds.
class AddressSource : public HostMemorySource {
 public:
  int64_t held = 0;
  int allocations = 0;
  int releases = 0;
  void* allocate(int64_t bytes, bool) override {
    ++allocations;
    held += bytes;
    const uintptr_t at = next_;
    next_ += static_cast<uintptr_t>((bytes + 4095) / 4096 * 4096 + 4096);
    return reinterpret_cast<void*>(at);
  }
  void release(void*, int64_t bytes, bool) override {
    ++releases;
    held -= bytes;
  }

 private:
  uintptr_t next_ = uintptr_t{1} << 44;
};

constexpr int64_t kKiB = 1 << 10;
constexpr int64_t kMiB = 1 << 20;

TEST(HostPool, SubAllocatesFromOneSlab) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
  bool pinned = false;
  std::vector<HostBlock> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(pool->allocate(100'000, true, pinned));
  EXPECT_TRUE(pinned);
  EXPECT_EQ(src.allocations, 1);  // ten tensors, one reservation
  // The first slab is 2 MiB, cut to a whole number of these blocks: not host_pool_slab_bytes.
  EXPECT_LE(pool->reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(pool->reserved_bytes() % 100'352, 0);
  EXPECT_GE(pool->in_use_bytes(), 10 * 100'000);
  EXPECT_LT(pool->in_use_bytes(), 10 * (100'000 + 512));
  for (auto& b : blocks) EXPECT_EQ(b.size(), 100'000);
  blocks.clear();
  EXPECT_EQ(pool->in_use_bytes(), 0);
  // Freed blocks coalesce: a request of the whole slab fits again without a new reservation.
  auto whole = pool->allocate(pool->reserved_bytes(), true, pinned);
  EXPECT_EQ(src.allocations, 1);
}

TEST(HostPool, LargeRequestsGetSlabsOfTheirOwnNotPowersOfTwo) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 4 * kMiB, false);
  bool pinned = false;
  auto big = pool->allocate(9 * kMiB + 1, true, pinned);
  // Rounded to a power of two of at most 1/16 of itself (512 KiB here), not to 16 MiB.
  EXPECT_EQ(pool->reserved_bytes(), 9 * kMiB + 512 * kKiB);
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
  const HostPoolStats s = pool->stats();
  EXPECT_EQ(s.pinned_slab_allocations, 0);
  EXPECT_EQ(s.pageable_slab_allocations, 1);
  EXPECT_EQ(s.pageable_fallbacks, 2);
  // The pageable slab is as lean as a pinned one would be.
  EXPECT_LE(s.reserved_bytes, s.peak_in_use_bytes + s.peak_in_use_bytes / 4 + 2 * kMiB);
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
  EXPECT_EQ(pool->pinned_slab_allocations(), 1);

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
// overlap, a freed range is handed out again to a block that fits it exactly, and once all are
// back the whole slab is one free range again (a block of the slab's size fits without a second
// reservation).
TEST(HostPool, CoalescesFreedRangesInAnyOrder) {
  CountingSource src;
  auto pool = std::make_shared<HostPool>(src, 1 * kMiB, false);
  bool pinned = false;
  pool->allocate(kMiB, true, pinned).reset();  // one slab of 1 MiB, free again
  ASSERT_EQ(pool->reserved_bytes(), kMiB);
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<HostBlock> blocks;
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
    // A hole in the middle is the best fit of a block of its size.
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

// ---- The bound: reserved <= 1.25 x the peak of the copies alive + 2 MiB

// Against the bytes the copies asked for: the pool's rounding, of slabs and of blocks, counts
// against it.
int64_t bound_of(int64_t peak_live, double factor = 1.25) {
  return static_cast<int64_t>(factor * static_cast<double>(peak_live)) + 2 * kMiB;
}

struct Figures {
  int64_t peak_live = 0;                  // the most bytes of copies alive at once
  std::vector<int64_t> reserved;          // after each step
  std::vector<int64_t> slab_allocations;  // after each step
  double worst = 0;                       // the largest (reserved - 2 MiB) / peak_live seen
};

// Checks after every allocation that the bound holds (`factor` x the peak + 2 MiB), that
// reserved_bytes() is what the source holds, and that the block overlaps no other live block.
class Player {
 public:
  explicit Player(int64_t slab_bytes = 64 * kMiB, double factor = 1.25)
      : pool(std::make_shared<HostPool>(src, slab_bytes, false)), factor_(factor) {}
  AddressSource src;
  std::shared_ptr<HostPool> pool;
  Figures run;
  int64_t live = 0;

  HostBlock allocate(int64_t bytes, const std::string& what) {
    bool pinned = false;
    HostBlock b = pool->allocate(bytes, true, pinned);
    live += bytes;
    run.peak_live = std::max(run.peak_live, live);
    const int64_t reserved = pool->reserved_bytes();
    EXPECT_EQ(reserved, src.held) << what;
    EXPECT_LE(reserved, bound_of(run.peak_live, factor_))
        << what << ": " << reserved << " reserved for a peak of " << run.peak_live;
    run.worst = std::max(
        run.worst, static_cast<double>(reserved - 2 * kMiB) / static_cast<double>(run.peak_live));
    const auto begin = reinterpret_cast<uintptr_t>(b.data());
    const auto end = begin + static_cast<uintptr_t>(bytes);
    const auto after = spans_.lower_bound(begin);
    EXPECT_TRUE(after == spans_.end() || after->first >= end) << what << ": blocks overlap";
    EXPECT_TRUE(after == spans_.begin() || std::prev(after)->second <= begin)
        << what << ": blocks overlap";
    spans_.emplace(begin, end);
    return b;
  }
  void free(HostBlock& b) {
    live -= b.size();
    spans_.erase(reinterpret_cast<uintptr_t>(b.data()));
    b.reset();
  }
  void end_step() {
    run.reserved.push_back(pool->reserved_bytes());
    run.slab_allocations.push_back(pool->pinned_slab_allocations());
  }

 private:
  double factor_;
  std::map<uintptr_t, uintptr_t> spans_;  // live blocks: start -> end
};

// Forward allocates `sizes` in order, backward frees them in reverse, `steps` times.
Figures forward_backward(const std::vector<int64_t>& sizes, int steps, const std::string& what,
                         int64_t slab_bytes = 64 * kMiB) {
  Player p(slab_bytes);
  std::vector<HostBlock> blocks;
  for (int step = 0; step < steps; ++step) {
    for (int64_t bytes : sizes) blocks.push_back(p.allocate(bytes, what));
    while (!blocks.empty()) {
      p.free(blocks.back());
      blocks.pop_back();
    }
    p.end_step();
  }
  return p.run;
}

// A later step places every block where the first step did: nothing is reserved, nothing pinned.
void expect_no_growth_after_first_step(const Figures& run, const std::string& what) {
  for (size_t i = 1; i < run.reserved.size(); ++i) {
    EXPECT_EQ(run.reserved[i], run.reserved[0]) << what << ": the pool grew at step " << i;
    EXPECT_EQ(run.slab_allocations[i], run.slab_allocations[0]) << what << ", step " << i;
  }
}

std::vector<int64_t> repeated(int64_t bytes, int count) {
  return std::vector<int64_t>(static_cast<size_t>(count), bytes);
}

// A transformer's saved tensors per layer: norms' small statistics, the hidden state, the fused
// QKV projection, the attention output, the MLP's two 4x activations.
std::vector<int64_t> transformer(int64_t hidden, int layers, int64_t small = 64 * kKiB) {
  std::vector<int64_t> sizes;
  for (int layer = 0; layer < layers; ++layer) {
    for (int64_t bytes :
         {small, hidden, 3 * hidden, hidden, small, hidden, 4 * hidden, 4 * hidden, hidden}) {
      sizes.push_back(bytes);
    }
  }
  return sizes;
}

// As measured on the main job before: 8 MiB of host copies held a 64 MiB slab.
TEST(HostPoolBound, EightMiBOfCopiesPinAtMostTwelve) {
  for (const auto& [sizes, what] : {std::pair{repeated(kMiB, 8), "8 x 1 MiB"},
                                    std::pair{repeated(4 * kKiB, 2048), "2048 x 4 KiB"},
                                    std::pair{repeated(8 * kMiB, 1), "one 8 MiB"}}) {
    const Figures run = forward_backward(sizes, 3, what);
    EXPECT_EQ(run.peak_live, 8 * kMiB);
    EXPECT_LE(run.reserved.back(), 12 * kMiB) << what;  // 1.25 x 8 MiB + 2 MiB
    expect_no_growth_after_first_step(run, what);
  }
}

TEST(HostPoolBound, HoldsForUniformSizesStepAfterStep) {
  const std::pair<int64_t, int> shapes[] = {
      {4 * kKiB, 2048}, {100 * kKiB, 500}, {kMiB, 200},     {3 * kMiB, 64},   {5 * kMiB, 64},
      {17 * kMiB, 40},  {24 * kMiB, 40},   {40 * kMiB, 20}, {100 * kMiB, 10}, {300 * kMiB, 4}};
  for (const auto& [bytes, count] : shapes) {
    const std::string what = std::to_string(count) + " x " + std::to_string(bytes) + " bytes";
    const Figures run = forward_backward(repeated(bytes, count), 3, what);
    expect_no_growth_after_first_step(run, what);
  }
}

TEST(HostPoolBound, HoldsForMixedSmallAndLargeCopies) {
  // Hidden states from 256 KiB to 48 MiB, and one not a multiple of the alignment.
  for (int64_t hidden : {256 * kKiB, kMiB, 2 * kMiB, 6 * kMiB + 100, 16 * kMiB, 48 * kMiB}) {
    const std::string what = "transformer, hidden " + std::to_string(hidden) + " bytes";
    const Figures run = forward_backward(transformer(hidden, 24), 3, what);
    expect_no_growth_after_first_step(run, what);
  }
  // Sizes spread over five decades, in a fixed random order.
  std::mt19937 rng(1);
  std::vector<int64_t> spread;
  for (int i = 0; i < 300; ++i) {
    spread.push_back(static_cast<int64_t>(std::exp(
        std::uniform_real_distribution<double>(std::log(4096.0), std::log(256.0 * kMiB))(rng))));
  }
  expect_no_growth_after_first_step(forward_backward(spread, 3, "4 KiB..256 MiB"), "spread");
}

TEST(HostPoolBound, HoldsWithOneHugeCopyAmongSmallOnes) {
  std::vector<int64_t> sizes = repeated(64 * kKiB, 10);
  sizes.push_back(700 * kMiB);
  sizes.insert(sizes.end(), 10, 64 * kKiB);
  const Figures run = forward_backward(sizes, 3, "one 700 MiB copy");
  expect_no_growth_after_first_step(run, "one 700 MiB copy");
  EXPECT_LE(run.reserved.back(), 700 * kMiB + 4 * kMiB);
}

TEST(HostPoolBound, ManyStepsReserveAndPinOnlyInTheFirst) {
  const Figures run = forward_backward(transformer(4 * kMiB, 32), 20, "20 steps");
  ASSERT_EQ(run.reserved.size(), 20u);
  expect_no_growth_after_first_step(run, "20 steps");
  // And few reservations: slabs grow with the pool (an eighth of it) up to host_pool_slab_bytes.
  EXPECT_LT(run.slab_allocations.back(), 64);
}

// Several forwards before one backward: the same order over the micro-batches' union.
TEST(HostPoolBound, HoldsForGradientAccumulation) {
  std::vector<int64_t> sizes;
  for (int micro = 0; micro < 4; ++micro) {
    const auto one = transformer(3 * kMiB, 12);
    sizes.insert(sizes.end(), one.begin(), one.end());
  }
  expect_no_growth_after_first_step(forward_backward(sizes, 3, "4 micro-batches"), "accumulate");
}

// Shapes that change between steps (sequence lengths): free slabs that no longer fit are given
// back rather than kept beside the new ones, so the bound still holds.
TEST(HostPoolBound, ShapesThatDriftGiveBackSlabsThatNoLongerFit) {
  Player p;
  std::vector<HostBlock> blocks;
  for (int step = 0; step < 12; ++step) {
    // The hidden state grows by 10% a step.
    const auto sizes =
        transformer(static_cast<int64_t>(20 * kMiB * (1.0 + 0.1 * step)) / 512 * 512, 8);
    for (int64_t bytes : sizes) blocks.push_back(p.allocate(bytes, "step " + std::to_string(step)));
    while (!blocks.empty()) {
      p.free(blocks.back());
      blocks.pop_back();
    }
    p.end_step();
  }
  EXPECT_GT(p.pool->stats().slab_releases, 0);
  p.pool->trim();
  EXPECT_EQ(p.pool->reserved_bytes(), 0);
  EXPECT_EQ(p.src.held, 0);
}

// Orders other than forward-then-reverse strand free space between live blocks, so the bound is
// looser there. Measured over 200 seeds of each: the disk tier's window (forward keeps the newest
// copies, backward stages each read for two reloads) and frees in random order stay within 1.34 x
// the peak + 2 MiB for transformer-like copies; copies of random sizes up to 256 MiB (one of them
// near half the peak) reach 1.75 x. Checked here at 1.5 x on a few of those seeds.
TEST(HostPoolBound, OtherOrdersStayWithinAMeasuredLooserFigure) {
  for (int64_t hidden : {kMiB, 16 * kMiB}) {
    const auto sizes = transformer(hidden, 12);
    for (unsigned seed = 0; seed < 8; ++seed) {
      const std::string what =
          "hidden " + std::to_string(hidden) + " bytes, seed " + std::to_string(seed);
      {
        Player p(64 * kMiB, 1.5);
        std::mt19937 rng(seed);
        const size_t window = 8 + rng() % 16;
        for (int step = 0; step < 3; ++step) {
          std::deque<HostBlock> held;
          for (int64_t bytes : sizes) {
            held.push_back(p.allocate(bytes, "window, " + what));
            if (held.size() > window) {
              p.free(held.front());
              held.pop_front();
            }
          }
          for (auto& b : held) p.free(b);
          held.clear();
          for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
            held.push_back(p.allocate(*it, "window, " + what));
            if (held.size() > 2) {
              p.free(held.front());
              held.pop_front();
            }
          }
          for (auto& b : held) p.free(b);
        }
        EXPECT_EQ(p.pool->in_use_bytes(), 0);
      }
      {
        Player p(64 * kMiB, 1.5);
        std::mt19937 rng(seed);
        const size_t keep = 10 + rng() % 40;
        std::vector<HostBlock> held;
        for (int step = 0; step < 3; ++step) {
          for (int64_t bytes : sizes) {
            held.push_back(p.allocate(bytes, "random frees, " + what));
            if (held.size() > keep) {
              const size_t victim = rng() % held.size();
              p.free(held[victim]);
              held.erase(held.begin() + static_cast<std::ptrdiff_t>(victim));
            }
          }
        }
        for (auto& b : held) p.free(b);
        p.pool->trim();
        EXPECT_EQ(p.src.held, 0) << "random frees, " << what << ": a slab was not whole again";
      }
    }
  }
}

}  // namespace
}  // namespace offtune::detail
