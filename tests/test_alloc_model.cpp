// The model of CUDA's caching allocator (core/src/alloc_model.hpp), specified by the allocator's
// own rules as torch 2.15.0 (git d0f2af8) has them in c10/cuda/CUDACachingAllocator.cpp: each test
// is a sequence of allocations and frees with the reserved, allocated, fragmentation (inactive
// split) and segment figures those rules give, the arithmetic in the comments.
#include <gtest/gtest.h>

#include <c10/core/AllocatorConfig.h>

#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "alloc_model.hpp"  // internal header: this suite tests the model itself
#include "offtune/allocator_model.hpp"

namespace offtune::detail {
namespace {

using sim::AllocatorSettings;
using M = sim::CachingAllocatorModel;

constexpr int64_t KiB = int64_t{1} << 10;
constexpr int64_t MiB = int64_t{1} << 20;

// torch's defaults, whatever PYTORCH_ALLOC_CONF says where the tests run.
AllocatorSettings defaults() { return AllocatorSettings{}; }

AllocatorSettings expandable() {
  AllocatorSettings s;
  s.expandable_segments = true;
  return s;
}

// ---- sizes, pools, splitting ------------------------------------------------------------------

TEST(CachingAllocatorModel, SizesRoundTo512AndSegmentsComeIn2And20MiBOrRoundedTo2MiB) {
  const AllocatorSettings s = defaults();
  EXPECT_EQ(M::round_size(1, s), 512);
  EXPECT_EQ(M::round_size(512, s), 512);
  EXPECT_EQ(M::round_size(513, s), 1024);
  EXPECT_EQ(M::segment_size(512, s), 2 * MiB);
  EXPECT_EQ(M::segment_size(MiB, s), 2 * MiB);
  EXPECT_EQ(M::segment_size(MiB + 512, s), 20 * MiB);
  EXPECT_EQ(M::segment_size(10 * MiB - 512, s), 20 * MiB);
  EXPECT_EQ(M::segment_size(10 * MiB, s), 10 * MiB);
  EXPECT_EQ(M::segment_size(11 * MiB, s), 12 * MiB);
}

TEST(CachingAllocatorModel, RoundupPower2DivisionsRoundToEqualStepsBetweenPowersOfTwo) {
  AllocatorSettings s;
  s.roundup_power2_divisions.fill(4);
  // 1200 is not above 4 x 512: plain 512 rounding.
  EXPECT_EQ(M::round_size(1200, s), 1536);
  // 4097 lies in [4096, 8192), steps of 1024: 5120 (512 rounding would give 4608).
  EXPECT_EQ(M::round_size(4097, s), 5120);
  // 5 MiB + 1 in [4, 8) MiB, steps of 1 MiB: 6 MiB; a power of two or a step stays.
  EXPECT_EQ(M::round_size(5 * MiB + 1, s), 6 * MiB);
  EXPECT_EQ(M::round_size(4 * MiB, s), 4 * MiB);
  EXPECT_EQ(M::round_size(6 * MiB, s), 6 * MiB);
  // The divisions are per interval: [1, 2) MiB (entry 0) off, [4, 8) MiB (entry 2) at 4.
  s.roundup_power2_divisions.fill(0);
  s.roundup_power2_divisions[2] = 4;
  EXPECT_EQ(M::round_size(MiB + MiB / 2 + 1, s), MiB + MiB / 2 + 512);
  EXPECT_EQ(M::round_size(5 * MiB + 1, s), 6 * MiB);
  s.roundup_power2_divisions[2] = 1;  // 1 division: no power-of-two rounding
  EXPECT_EQ(M::round_size(5 * MiB + 1, s), 5 * MiB + 512);

  // The allocator hands out the rounded size: 6 MiB out of a 20 MiB segment, 14 MiB left free.
  s.roundup_power2_divisions[2] = 4;
  M m(s);
  m.allocate(5 * MiB + 1, 0);
  EXPECT_EQ(m.allocated(), 6 * MiB);
  EXPECT_EQ(m.reserved(), 20 * MiB);
  EXPECT_EQ(m.inactive_split_bytes(), 14 * MiB);
}

TEST(CachingAllocatorModel, SmallRequestsShareASegmentPerStreamAndFreedBlocksAreReused) {
  M m(defaults());
  auto* a = m.allocate(100, 0);  // a 2 MiB small segment, split
  EXPECT_EQ(m.reserved(), 2 * MiB);
  auto* b = m.allocate(1000, 0);  // from the same segment's remainder
  EXPECT_EQ(m.reserved(), 2 * MiB);
  auto* c = m.allocate(100, 1);  // another stream: its own segment
  EXPECT_EQ(m.reserved(), 4 * MiB);
  EXPECT_EQ(m.segments(), 2);
  EXPECT_EQ(m.allocate(0, 0), nullptr);  // no block for nothing
  m.free(a);
  m.free(b);
  m.free(c);
  EXPECT_EQ(m.reserved(), 4 * MiB);  // cached, not given back
  // The whole segment merged back: a 2 MiB request... is large (over 1 MiB): a new 20 MiB segment.
  auto* d = m.allocate(2 * MiB, 0);
  EXPECT_EQ(m.reserved(), 24 * MiB);
  auto* e = m.allocate(MiB, 0);  // small: the merged 2 MiB block of stream 0
  EXPECT_EQ(m.reserved(), 24 * MiB);
  m.free(d);
  m.free(e);
  m.empty_cache();  // every segment is free: all given back
  EXPECT_EQ(m.reserved(), 0);
  EXPECT_EQ(m.peak_reserved(), 24 * MiB);
  m.reset_peak();
  EXPECT_EQ(m.peak_reserved(), 0);
}

TEST(CachingAllocatorModel, PoolsAndStreamsNeverShareBlocks) {
  M m(defaults());
  m.allocate(3 * MiB, 0);  // large pool, stream 0: a 20 MiB segment, 17 MiB left free
  // Small request: the 17 MiB free block is in the large pool, so a 2 MiB small segment.
  m.allocate(512 * KiB, 0);
  EXPECT_EQ(m.reserved(), 22 * MiB);
  // Stream 1 does not take stream 0's free 17 MiB: a segment of its own.
  m.allocate(3 * MiB, 1);
  EXPECT_EQ(m.reserved(), 42 * MiB);
  EXPECT_EQ(m.segments(), 3);
  EXPECT_EQ(m.allocated(), 6 * MiB + 512 * KiB);
  // Free inside partly used segments: 17 + 1.5 + 17 MiB.
  EXPECT_EQ(m.inactive_split_bytes(), 35 * MiB + 512 * KiB);
  EXPECT_EQ(m.stats().inactive_split, 3);
}

TEST(CachingAllocatorModel, SmallBlocksSplitDownTo512BytesLargeOnlyAboveOneMiB) {
  M m(defaults());
  m.allocate(MiB, 0);               // 2 MiB small segment: 1 MiB left, split
  m.allocate(MiB - 512, 0);         // the 1 MiB piece: 512 bytes left, still split (>= 512)
  auto* last = m.allocate(512, 0);  // exactly the last 512 bytes
  EXPECT_NE(last, nullptr);
  EXPECT_EQ(m.reserved(), 2 * MiB);
  EXPECT_EQ(m.allocated(), 2 * MiB);
  EXPECT_EQ(m.inactive_split_bytes(), 0);

  M l(defaults());
  l.allocate(3 * MiB, 0);             // 20 MiB segment: 17 MiB free piece
  auto* b = l.allocate(16 * MiB, 0);  // leaves exactly 1 MiB: not split, b holds all 17 MiB
  EXPECT_EQ(l.allocated(), 20 * MiB);
  EXPECT_EQ(l.inactive_split_bytes(), 0);
  l.free(b);
  EXPECT_EQ(l.inactive_split_bytes(), 17 * MiB);
  l.allocate(15 * MiB + 512 * KiB, 0);  // leaves 1.5 MiB: split
  EXPECT_EQ(l.allocated(), 18 * MiB + 512 * KiB);
  EXPECT_EQ(l.inactive_split_bytes(), MiB + 512 * KiB);
  EXPECT_EQ(l.reserved(), 20 * MiB);
}

TEST(CachingAllocatorModel, LargeBlocksSplitOnlyWhenMoreThan1MiBRemains) {
  M m(defaults());
  auto* a = m.allocate(3 * MiB, 0);             // a 20 MiB segment: 17 MiB remain, split off
  auto* b = m.allocate(16 * MiB + MiB / 2, 0);  // fits the 17 MiB remainder: 0.5 MiB left, kept
  EXPECT_EQ(m.reserved(), 20 * MiB);
  auto* c = m.allocate(2 * MiB, 0);  // nothing left in that segment: a new one
  EXPECT_EQ(m.reserved(), 40 * MiB);
  m.free(b);
  auto* d = m.allocate(17 * MiB, 0);  // b's whole 17 MiB block (not split) fits
  EXPECT_EQ(m.reserved(), 40 * MiB);
  m.free(a);
  m.free(c);
  m.free(d);
  m.empty_cache();
  EXPECT_EQ(m.reserved(), 0);
  // A request of 10 MiB and more gets a segment of its own size rounded to 2 MiB.
  auto* big = m.allocate(11 * MiB, 0);
  EXPECT_EQ(m.reserved(), 12 * MiB);
  m.free(big);
}

TEST(CachingAllocatorModel, FragmentationHoldsMoreThanIsAllocated) {
  // Two small tensors per 2 MiB segment, then every other one freed: the segments stay.
  M m(defaults());
  std::vector<M::Block*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(m.allocate(MiB, 0));
  EXPECT_EQ(m.reserved(), 8 * MiB);
  for (size_t i = 0; i < blocks.size(); i += 2) m.free(blocks[i]);
  m.empty_cache();  // no segment is wholly free
  EXPECT_EQ(m.reserved(), 8 * MiB);
  EXPECT_EQ(m.allocated(), 4 * MiB);
  EXPECT_EQ(m.inactive_split_bytes(), 4 * MiB);  // one free MiB in each of 4 segments
  for (size_t i = 1; i < blocks.size(); i += 2) m.free(blocks[i]);
  EXPECT_EQ(m.inactive_split_bytes(), 0);  // whole segments again
  m.empty_cache();
  EXPECT_EQ(m.reserved(), 0);
}

// ---- max_split_size ---------------------------------------------------------------------------

TEST(CachingAllocatorModel, OversizeBlocksAreNeitherSplitNorGivenToSmallerRequests) {
  AllocatorSettings s;
  s.max_split_size = 40 * MiB;  // max_non_split_rounding_size stays 20 MiB
  M m(s);
  auto* a = m.allocate(45 * MiB, 0);  // a 46 MiB segment (2 MiB rounding)
  m.free(a);
  // 42 MiB >= max_split_size takes the cached 46 MiB block (46 < 42 + 20) whole: 4 MiB unused
  // inside it but no split, so no free piece either.
  auto* b = m.allocate(42 * MiB, 0);
  EXPECT_EQ(m.allocated(), 46 * MiB);
  EXPECT_EQ(m.inactive_split_bytes(), 0);
  EXPECT_EQ(m.reserved(), 46 * MiB);
  m.free(b);
  // 5 MiB is under max_split_size: the only block that fits is oversize, so a new 20 MiB segment.
  m.allocate(5 * MiB, 0);
  EXPECT_EQ(m.reserved(), 66 * MiB);
  EXPECT_EQ(m.segments(), 2);
}

TEST(CachingAllocatorModel, OversizeBlockServesALargeRequestOnlyWithinMaxNonSplitRounding) {
  AllocatorSettings s;
  s.max_split_size = 40 * MiB;
  s.max_non_split_rounding_size = 20 * MiB;
  M m(s);
  m.free(m.allocate(62 * MiB, 0));  // a cached 62 MiB block
  // 62 >= 42 + 20: refused (torch refuses at block >= request + max_non_split_rounding).
  auto* a = m.allocate(42 * MiB, 0);
  EXPECT_EQ(m.reserved(), 104 * MiB);  // 62 + a new 42
  m.free(a);
  // 42 MiB + 512: the best fit is the 62 MiB block (the 42 MiB one is too small), and
  // 62 < 42 MiB + 512 + 20: taken whole.
  m.allocate(42 * MiB + 512, 0);
  EXPECT_EQ(m.allocated(), 62 * MiB);
  EXPECT_EQ(m.reserved(), 104 * MiB);
}

// ---- capacity and out of memory ---------------------------------------------------------------

TEST(CachingAllocatorModelCapacity, ReleasesTheCacheOfEveryStreamAndRetries) {
  M m(defaults());
  m.set_capacity(64 * MiB);
  auto* a = m.allocate(30 * MiB, 0);  // 30 MiB segment
  m.allocate(30 * MiB, 0);            // 30 MiB segment
  auto* c = m.allocate(MiB, 1);       // 2 MiB small segment on stream 1
  m.free(a);
  m.free(c);
  EXPECT_EQ(m.reserved(), 62 * MiB);
  // 32 MiB: no cached block fits, 62 + 32 > 64; release every wholly free segment (a's 30 and
  // stream 1's 2) and retry: 30 + 32 = 62.
  ASSERT_NE(m.allocate(32 * MiB, 0), nullptr);
  const M::Stats st = m.stats();
  EXPECT_EQ(st.reserved, 62 * MiB);
  EXPECT_EQ(st.allocated, 62 * MiB);
  EXPECT_EQ(st.segments, 2);
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_sync_all_streams, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(st.num_device_alloc, 4);
  EXPECT_EQ(st.num_device_free, 2);
  EXPECT_EQ(st.peak_reserved, 62 * MiB);
}

TEST(CachingAllocatorModelCapacity, OutOfMemoryReturnsNullAndReportsWhatWasNeeded) {
  M m(defaults());
  m.set_capacity(64 * MiB);
  m.allocate(40 * MiB, 0);  // 40 MiB segment
  m.allocate(5 * MiB, 0);   // 20 MiB segment, 15 MiB free piece
  // 16 MiB: the 15 MiB piece is too small, 60 + 16 > 64, nothing is wholly free to release.
  EXPECT_EQ(m.allocate(16 * MiB, 0), nullptr);
  const M::Stats st = m.stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_ooms, 1);
  EXPECT_EQ(st.reserved, 60 * MiB);
  EXPECT_EQ(st.allocated, 45 * MiB);
  EXPECT_EQ(st.inactive_split_bytes, 15 * MiB);  // free, but split: of no use to 16 MiB
  ASSERT_TRUE(m.last_oom().has_value());
  EXPECT_EQ(m.last_oom()->requested, 16 * MiB);
  EXPECT_EQ(m.last_oom()->alloc_size, 16 * MiB);
  EXPECT_EQ(m.last_oom()->free(), 4 * MiB);
  EXPECT_EQ(m.last_oom()->allocated, 45 * MiB);
  // What still fits goes on: 2 MiB comes from the free piece.
  EXPECT_NE(m.allocate(2 * MiB, 0), nullptr);
}

TEST(CachingAllocatorModelCapacity, ReleasesCachedOversizeBlocksBeforeTheWholeCache) {
  AllocatorSettings s;
  s.max_split_size = 40 * MiB;
  M m(s);
  m.set_capacity(120 * MiB);
  auto* a = m.allocate(50 * MiB, 0);
  auto* b = m.allocate(44 * MiB, 0);
  m.free(a);
  m.free(b);
  // 30 MiB is under max_split_size, so the cached 44 and 50 MiB are no use; 94 + 30 > 120:
  // release_available_cached_blocks frees the smallest oversize block >= 40 MiB (the 44) and the
  // allocation goes through without emptying the cache: 50 + 30.
  ASSERT_NE(m.allocate(30 * MiB, 0), nullptr);
  EXPECT_EQ(m.reserved(), 80 * MiB);
  EXPECT_EQ(m.stats().num_alloc_retries, 0);
  EXPECT_EQ(m.stats().num_sync_all_streams, 0);

  // No single oversize block covers 60 MiB: the largest ones go until 60 MiB are freed (50, then
  // 44: 94), leaving 0 + 60.
  M n(s);
  n.set_capacity(120 * MiB);
  a = n.allocate(50 * MiB, 0);
  b = n.allocate(44 * MiB, 0);
  n.free(a);
  n.free(b);
  ASSERT_NE(n.allocate(60 * MiB, 0), nullptr);
  EXPECT_EQ(n.reserved(), 60 * MiB);
  EXPECT_EQ(n.stats().num_device_free, 2);
  EXPECT_EQ(n.stats().num_alloc_retries, 0);
}

TEST(CachingAllocatorModelCapacity, GarbageCollectionFreesTheLongestUnusedSegmentsAboveThreshold) {
  AllocatorSettings s;
  s.garbage_collection_threshold = 0.5;
  M m(s);
  m.set_capacity(100 * MiB);  // collection starts above 50 MiB reserved
  // Large-pool lookups are the clock (#n below).
  auto* a = m.allocate(24 * MiB, 0);  // #1, new segment
  auto* b = m.allocate(26 * MiB, 0);  // #2, new segment
  auto* c = m.allocate(12 * MiB, 0);  // #3: 50 MiB is not above 50; new segment, 62 MiB
  m.free(a);                          // a free since #3
  m.free(c);
  c = m.allocate(12 * MiB, 0);  // #4 reuses c's block
  m.free(c);
  c = m.allocate(12 * MiB, 0);  // #5 reuses it again
  m.free(b);                    // b free since #5
  // #6: 30 MiB fits no cached block; 62 > 50, so 12 MiB must go. Ages: a 3, b 1, average 2:
  // a (24 MiB) goes, b stays; then a new 30 MiB segment: 38 + 30.
  ASSERT_NE(m.allocate(30 * MiB, 0), nullptr);
  EXPECT_EQ(m.reserved(), 68 * MiB);
  EXPECT_EQ(m.segments(), 3);  // b, c, the new one
  EXPECT_EQ(m.stats().num_device_free, 1);
  EXPECT_EQ(m.stats().num_alloc_retries, 0);
  // b is still cached: 26 MiB comes from it.
  ASSERT_NE(m.allocate(26 * MiB, 0), nullptr);
  EXPECT_EQ(m.reserved(), 68 * MiB);

  // Without a capacity there is no threshold to collect against: the same steps keep a.
  M u(s);
  a = u.allocate(24 * MiB, 0);
  u.allocate(26 * MiB, 0);
  u.allocate(12 * MiB, 0);
  u.free(a);
  u.allocate(30 * MiB, 0);
  EXPECT_EQ(u.reserved(), 92 * MiB);
}

// ---- other streams ----------------------------------------------------------------------------

TEST(CachingAllocatorModelStreams, ABlockRecordedOnAnotherStreamWaitsForIt) {
  M m(defaults());
  auto* a = m.allocate(12 * MiB, 0);  // 12 MiB segment
  m.record_stream(a, 0);              // its own stream: nothing to wait for
  m.record_stream(a, 1);
  const M::PendingFree id = m.free(a);
  EXPECT_NE(id, 0);
  EXPECT_EQ(m.allocated(), 0);
  EXPECT_EQ(m.pending_bytes(), 12 * MiB);
  EXPECT_EQ(m.reserved(), 12 * MiB);
  // Not reusable yet: the next 12 MiB needs a segment of its own.
  auto* b = m.allocate(12 * MiB, 0);
  EXPECT_EQ(m.reserved(), 24 * MiB);
  EXPECT_EQ(m.segments(), 2);
  m.complete(id);
  EXPECT_EQ(m.pending_bytes(), 0);
  m.allocate(12 * MiB, 0);  // a's block now
  EXPECT_EQ(m.reserved(), 24 * MiB);

  // Recorded on two streams: free once both are done.
  m.record_stream(b, 1);
  m.record_stream(b, 2);
  m.free(b);
  m.complete_stream(1);
  EXPECT_EQ(m.pending_bytes(), 12 * MiB);
  m.complete_stream(2);
  EXPECT_EQ(m.pending_bytes(), 0);
  EXPECT_EQ(m.stats().pending, 0);
  m.empty_cache();
  EXPECT_EQ(m.reserved(), 12 * MiB);  // b's segment went back
}

TEST(CachingAllocatorModelStreams, OutOfMemoryPathCompletesPendingFreesFirst) {
  M m(defaults());
  m.set_capacity(24 * MiB);
  auto* a = m.allocate(12 * MiB, 0);
  m.record_stream(a, 1);
  const M::PendingFree id = m.free(a);  // held back for stream 1
  m.allocate(12 * MiB, 0);              // a new segment: 24 MiB, the whole capacity
  // 12 MiB more: no free block, 24 + 12 > 24. Releasing the cache first waits for stream 1, which
  // frees a's segment, gives it back, and the retry fits: 12 + 12.
  ASSERT_NE(m.allocate(12 * MiB, 0), nullptr);
  const M::Stats st = m.stats();
  EXPECT_EQ(st.reserved, 24 * MiB);
  EXPECT_EQ(st.pending_bytes, 0);
  EXPECT_EQ(st.num_sync_all_streams, 1);
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_ooms, 0);
  m.complete(id);  // already done: nothing
  EXPECT_EQ(m.allocated(), 24 * MiB);
}

// ---- expandable segments ----------------------------------------------------------------------

// 4 x 12 MiB, all freed, then 2 x 24 MiB.
int64_t reserved_after_mixed_sizes(M& m) {
  std::vector<M::Block*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(m.allocate(12 * MiB, 0));
  for (auto* b : blocks) m.free(b);
  m.allocate(24 * MiB, 0);
  m.allocate(24 * MiB, 0);
  return m.reserved();
}

TEST(CachingAllocatorModelExpandable, FreeSpaceMergesAcrossWhatWouldBeSeparateSegments) {
  // Fixed: four 12 MiB segments, cached but too small for 24 MiB: two more, 48 + 48.
  M fixed(defaults());
  EXPECT_EQ(reserved_after_mixed_sizes(fixed), 96 * MiB);
  EXPECT_EQ(fixed.segments(), 6);
  // Expandable: 48 MiB in one segment maps three 20 MiB pages; freed, it is one 60 MiB block
  // that holds both 24 MiB.
  M grow(expandable());
  EXPECT_EQ(reserved_after_mixed_sizes(grow), 60 * MiB);
  EXPECT_EQ(grow.segments(), 1);
  EXPECT_EQ(grow.stats().expandable_segments, 1);
  EXPECT_EQ(grow.allocated(), 48 * MiB);
  EXPECT_EQ(grow.inactive_split_bytes(), 0);  // not counted for expandable segments (as torch)
}

TEST(CachingAllocatorModelExpandable, GrowsInPagesOf2MiBForSmallAnd20MiBForLargePool) {
  M m(expandable());
  m.allocate(512 * KiB, 0);  // small pool: one 2 MiB page
  EXPECT_EQ(m.reserved(), 2 * MiB);
  m.allocate(MiB + MiB / 2, 0);  // large pool: one 20 MiB page
  EXPECT_EQ(m.reserved(), 22 * MiB);
  // 30 MiB: the 18.5 MiB free at the end of the mapped space plus one more page (20..40 MiB).
  m.allocate(30 * MiB, 0);
  EXPECT_EQ(m.reserved(), 42 * MiB);
  EXPECT_EQ(m.stats().num_device_alloc, 3);
  // Another stream: its own large segment.
  m.allocate(MiB + MiB / 2, 1);
  EXPECT_EQ(m.reserved(), 62 * MiB);
  EXPECT_EQ(m.segments(), 3);
  EXPECT_EQ(m.stats().expandable_segments, 3);

  AllocatorSettings pages40 = expandable();
  pages40.large_segment_size = 40 * MiB;
  M n(pages40);
  n.allocate(MiB + MiB / 2, 0);  // large pages follow large_segment_size
  EXPECT_EQ(n.reserved(), 40 * MiB);
}

TEST(CachingAllocatorModelExpandable, EmptyCacheUnmapsEveryWholeFreePage) {
  M m(expandable());
  // 5 x 12 MiB: 0..12, 12..24, 24..36, 36..48, 48..60 on three 20 MiB pages.
  std::vector<M::Block*> b;
  for (int i = 0; i < 5; ++i) b.push_back(m.allocate(12 * MiB, 0));
  EXPECT_EQ(m.reserved(), 60 * MiB);
  m.free(b[1]);
  m.free(b[2]);
  m.free(b[3]);  // free 12..48: only the page 20..40 is wholly free
  m.empty_cache();
  EXPECT_EQ(m.reserved(), 40 * MiB);
  EXPECT_EQ(m.segments(), 1);
  EXPECT_EQ(m.stats().num_device_free, 1);
  // 20 MiB: the lowest address with room is 12..20 (free) + the hole + 40..48 (free): the hole is
  // mapped again, nothing at the end.
  auto* again = m.allocate(20 * MiB, 0);
  EXPECT_EQ(m.reserved(), 60 * MiB);
  m.free(again);
  m.free(b[0]);
  m.free(b[4]);  // all free: every page goes, and the segment with them
  m.empty_cache();
  EXPECT_EQ(m.reserved(), 0);
  EXPECT_EQ(m.segments(), 0);
}

TEST(CachingAllocatorModelExpandable, OutOfMemoryUnmapsFreePagesAndRetries) {
  M m(expandable());
  m.set_capacity(60 * MiB);
  auto* a = m.allocate(20 * MiB, 0);  // page 0
  m.allocate(20 * MiB, 0);            // page 1
  m.free(a);                          // page 0 free, still mapped
  // 40 MiB: the free page 0 ends at the allocated page 1, so two pages at the end: 80 > 60.
  // Releasing the cache unmaps page 0 (reserved 20) and the retry maps them: 20 + 40 = 60.
  ASSERT_NE(m.allocate(40 * MiB, 0), nullptr);
  EXPECT_EQ(m.reserved(), 60 * MiB);
  EXPECT_EQ(m.stats().num_alloc_retries, 1);
  // Nothing left to unmap: out of memory.
  EXPECT_EQ(m.allocate(MiB + MiB / 2, 0), nullptr);
  EXPECT_EQ(m.stats().num_ooms, 1);
}

// ---- any sequence -----------------------------------------------------------------------------

// Random requests, frees, cross-stream uses and cache releases under random settings: the device
// never holds more than its capacity, the counters agree with what was handed out, and once all is
// freed and the cache emptied nothing stays reserved.
TEST(CachingAllocatorModelProperties, AnySequenceStaysWithinCapacityAndGivesEverythingBack) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed);
    AllocatorSettings s;
    s.expandable_segments = rng() % 2 == 0;
    if (rng() % 3 == 0) s.max_split_size = static_cast<int64_t>(20 + rng() % 40) * MiB;
    if (rng() % 3 == 0) s.roundup_power2_divisions.fill(int64_t{1} << (rng() % 4));
    if (rng() % 4 == 0) s.garbage_collection_threshold = 0.5;
    M m(s);
    const int64_t capacity = rng() % 2 == 0 ? static_cast<int64_t>(64 + rng() % 512) * MiB : 0;
    m.set_capacity(capacity);
    std::vector<std::pair<M::Block*, int64_t>> live;  // block, its share of allocated()
    std::vector<M::PendingFree> pending;
    for (int step = 0; step < 2000; ++step) {
      const uint64_t op = rng() % 100;
      if (op < 45) {
        const int64_t limits[] = {4 * KiB, MiB, 12 * MiB, 80 * MiB};
        const int64_t bytes = 1 + static_cast<int64_t>(rng() % limits[rng() % 4]);
        const int64_t before = m.allocated();
        M::Block* b = m.allocate(bytes, static_cast<int64_t>(rng() % 3));
        if (b == nullptr) {
          ASSERT_GT(capacity, 0) << "seed " << seed << " step " << step;
        } else {
          ASSERT_GE(m.allocated() - before, M::round_size(bytes, s));
          live.emplace_back(b, m.allocated() - before);
        }
      } else if (op < 85 && !live.empty()) {
        const size_t i = rng() % live.size();
        const auto [b, share] = live[i];
        live[i] = live.back();
        live.pop_back();
        if (rng() % 4 == 0) m.record_stream(b, static_cast<int64_t>(rng() % 4));
        const int64_t before = m.allocated();
        if (const M::PendingFree id = m.free(b); id != 0) pending.push_back(id);
        ASSERT_EQ(before - m.allocated(), share);
      } else if (op < 90 && !pending.empty()) {
        m.complete(pending[rng() % pending.size()]);
      } else if (op < 94) {
        m.complete_stream(static_cast<int64_t>(rng() % 4));
      } else if (op < 96) {
        m.empty_cache();
      }
      if (capacity > 0) {
        ASSERT_LE(m.reserved(), capacity);
      }
      ASSERT_GE(m.reserved(), m.allocated() + m.pending_bytes() + m.inactive_split_bytes());
    }
    for (const auto& [b, share] : live) m.free(b);
    m.empty_cache();
    EXPECT_EQ(m.reserved(), 0) << "seed " << seed;
    EXPECT_EQ(m.allocated(), 0);
    EXPECT_EQ(m.pending_bytes(), 0);
    EXPECT_EQ(m.inactive_split_bytes(), 0);
  }
}

// ---- settings from c10 ------------------------------------------------------------------------

// Restores c10's allocator settings after a test changes them: expandable segments, which a new
// settings string does not reset, then the string that was in force.
class C10Settings : public ::testing::Test {
 protected:
  using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;
  void SetUp() override {
    saved_ = c10::CachingAllocator::getAllocatorSettings();
    saved_expandable_ = Config::use_expandable_segments();
  }
  void TearDown() override {
    std::string restore =
        std::string("expandable_segments:") + (saved_expandable_ ? "True" : "False");
    if (!saved_.empty()) restore += "," + saved_;
    c10::CachingAllocator::setAllocatorSettings(restore);
  }
  std::string saved_;
  bool saved_expandable_ = false;
};

using CachingAllocatorModelSettings = C10Settings;

TEST_F(CachingAllocatorModelSettings, ReadsC10SettingsAtEveryAllocation) {
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:False");
  M m;                     // follows c10
  m.allocate(6 * MiB, 0);  // a fixed 20 MiB segment, 14 MiB free piece
  EXPECT_EQ(m.reserved(), 20 * MiB);
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:True");
  EXPECT_TRUE(AllocatorSettings::current().expandable_segments);
  m.allocate(6 * MiB, 0);  // the cached fixed piece still serves: 8 MiB left
  EXPECT_EQ(m.reserved(), 20 * MiB);
  m.allocate(12 * MiB, 0);  // nothing cached fits: a new expandable segment, one 20 MiB page
  EXPECT_EQ(m.reserved(), 40 * MiB);
  EXPECT_EQ(m.stats().expandable_segments, 1);
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:False");
  m.allocate(12 * MiB, 0);  // fixed again: a 12 MiB segment
  EXPECT_EQ(m.reserved(), 52 * MiB);
  EXPECT_EQ(m.segments(), 3);
}

TEST_F(CachingAllocatorModelSettings, TakesC10sParsedValuesAsTheyAre) {
  c10::CachingAllocator::setAllocatorSettings(
      "max_split_size_mb:40,garbage_collection_threshold:0.5,"
      "roundup_power2_divisions:[64:8,256:4,>:1]");
  const AllocatorSettings s = AllocatorSettings::current();
  EXPECT_EQ(s.max_split_size, 40 * MiB);
  EXPECT_EQ(s.max_non_split_rounding_size,
            static_cast<int64_t>(Config::max_non_split_rounding_size()));
  EXPECT_EQ(s.large_segment_size, 20 * MiB);
  EXPECT_DOUBLE_EQ(s.garbage_collection_threshold, 0.5);
  for (int64_t size = 512; size < (int64_t{1} << 40); size = size * 3 / 2) {
    EXPECT_EQ(s.divisions_for(size),
              static_cast<int64_t>(Config::roundup_power2_divisions(static_cast<size_t>(size))))
        << size;
  }
  // "64:8" gives every interval up to [64, 128) MiB 8 divisions: in [4, 8) MiB, steps of 512 KiB.
  EXPECT_EQ(M::round_size(5 * MiB + 1), 5 * MiB + 512 * KiB);
}

// ---- memory history ----------------------------------------------------------------------------

// The model reports what torch's allocator history records (memory snapshots, docs/export.md):
// segments at their addresses, laid end to end from 4 GiB, frees completed at once or once the
// streams a block was used on are done; its state lists segments and blocks by address.
TEST(CachingAllocatorModel, ItsHistoryAndStateNameSegmentsAndBlocksByAddress) {
  M m(defaults());
  std::vector<M::TraceEvent> events;
  m.set_tracer([&](const M::TraceEvent& e) { events.push_back(e); });
  using A = M::TraceEvent::Action;
  constexpr int64_t kBase = int64_t{1} << 32;

  M::Block* a = m.allocate(1000, 0);  // a 2 MiB small segment at the base; the block rounds to 1024
  M::Block* b = m.allocate(3000, 0);  // beside it in the same segment: 3072
  M::Block* c = m.allocate(12 * MiB, 0);  // a 12 MiB segment of its own, after the first
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].action, A::SegmentAlloc);
  EXPECT_EQ(events[0].addr, kBase);
  EXPECT_EQ(events[0].size, 2 * MiB);
  EXPECT_EQ(events[1].action, A::SegmentAlloc);
  EXPECT_EQ(events[1].addr, kBase + 2 * MiB);
  EXPECT_EQ(events[1].size, 12 * MiB);
  EXPECT_EQ(M::address(a), kBase);
  EXPECT_EQ(M::address(b), kBase + 1024);
  EXPECT_EQ(M::size_of(b), 3072);
  EXPECT_EQ(M::address(c), kBase + 2 * MiB);

  // b is used on stream 7 too: its free waits for it.
  m.record_stream(b, 7);
  m.free(a);
  m.free(b);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].action, A::FreeCompleted);
  EXPECT_EQ(events[2].addr, kBase);
  EXPECT_EQ(events[2].size, 1000);  // the bytes asked for, as torch's history

  const auto state = m.state();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].addr, kBase);
  EXPECT_EQ(state[0].size, 2 * MiB);
  EXPECT_TRUE(state[0].small);
  ASSERT_EQ(state[0].blocks.size(), 3u);  // a's free piece, b (pending), the rest
  EXPECT_FALSE(state[0].blocks[0].allocated);
  EXPECT_FALSE(state[0].blocks[0].pending);
  EXPECT_EQ(state[0].blocks[1].addr, kBase + 1024);
  EXPECT_TRUE(state[0].blocks[1].pending);
  EXPECT_EQ(state[0].blocks[2].size, 2 * MiB - 4096);
  ASSERT_EQ(state[1].blocks.size(), 1u);
  EXPECT_TRUE(state[1].blocks[0].allocated);
  EXPECT_EQ(state[1].blocks[0].requested, 12 * MiB);

  m.complete_stream(7);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3].action, A::FreeCompleted);
  EXPECT_EQ(events[3].addr, kBase + 1024);
  // The small segment is whole and free again: emptying the cache gives it back; c's stays.
  m.empty_cache();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[4].action, A::SegmentFree);
  EXPECT_EQ(events[4].addr, kBase);
  EXPECT_EQ(events[4].size, 2 * MiB);
  ASSERT_EQ(m.state().size(), 1u);

  // A request past the capacity: out of memory, with what was free.
  m.set_capacity(20 * MiB);
  EXPECT_EQ(m.allocate(30 * MiB, 0), nullptr);
  ASSERT_EQ(events.back().action, A::Oom);
  EXPECT_EQ(events.back().size, 30 * MiB);
  EXPECT_EQ(events.back().device_free, 8 * MiB);
  m.free(c);
}

// Expandable segments report the pages they map and unmap, and their state is the mapped pages.
TEST(CachingAllocatorModel, ItsHistoryShowsExpandableSegmentsMappingPages) {
  M m(expandable());
  std::vector<M::TraceEvent> events;
  m.set_tracer([&](const M::TraceEvent& e) { events.push_back(e); });
  M::Block* a = m.allocate(30 * MiB, 0);  // two 20 MiB pages of the large pool
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].action, M::TraceEvent::Action::SegmentMap);
  EXPECT_EQ(events[0].size, 40 * MiB);
  const auto state = m.state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_TRUE(state[0].expandable);
  EXPECT_EQ(state[0].size, 40 * MiB);
  m.free(a);
  m.empty_cache();
  EXPECT_EQ(events.back().action, M::TraceEvent::Action::SegmentUnmap);
  EXPECT_EQ(events.back().size, 40 * MiB);
  EXPECT_TRUE(m.state().empty());
}

}  // namespace
}  // namespace offtune::detail

namespace offtune {
namespace {

// The public face (offtune/allocator_model.hpp) follows the model: a small request takes a 2 MiB
// segment, a freed block is cached and reused, a large one takes its rounded size, and a block
// freed while recorded on another stream is reused only once that stream is done.
TEST(AllocatorModel, ReplaysAllocationsAsTheCachingAllocatorReservesThem) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  AllocatorModel m;
  const int64_t a = m.allocate(1000);
  EXPECT_EQ(m.allocated(), 1024);  // rounded to 512
  EXPECT_EQ(m.reserved(), 2 * kMiB);
  m.free(a);
  const int64_t b = m.allocate(1000);
  EXPECT_NE(a, b);
  EXPECT_EQ(m.reserved(), 2 * kMiB) << "the cached block is reused";
  const int64_t big = m.allocate(11 * kMiB);
  EXPECT_EQ(m.reserved(), 2 * kMiB + 12 * kMiB);  // large: rounded up to 2 MiB
  m.record_stream(big, 1);
  m.free(big);
  m.free(big);  // a freed handle: nothing happens
  const int64_t again = m.allocate(11 * kMiB);
  EXPECT_EQ(m.reserved(), 2 * kMiB + 24 * kMiB) << "held back for stream 1";
  EXPECT_EQ(m.peak_reserved(), 26 * kMiB);
  m.free(again);
  m.complete_stream(1);
  m.reset_peak();
  m.allocate(11 * kMiB);
  m.allocate(11 * kMiB);
  EXPECT_EQ(m.peak_reserved(), 26 * kMiB) << "both cached segments reused";
  EXPECT_THROW(m.allocate(0), std::invalid_argument);
}

}  // namespace
}  // namespace offtune
