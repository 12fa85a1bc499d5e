// The host-sim emulator on its own, driven through the backend interface the engine uses: streams,
// per-stream block ownership and caching, deferred frees, the stream-order checker, capacity and
// reclaim. Internals: this suite includes core/src.
#include <gtest/gtest.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <memory>

#include "alloc_model.hpp"
#include "backend.hpp"
#include "host_sim_internal.hpp"
#include "offtune/host_sim.hpp"
#include "pressure.hpp"

namespace offtune::detail {
namespace {

using host_sim::StreamGuard;
using host_sim::StreamId;

Stream sim(StreamId id) { return Stream(Stream::UNSAFE, c10::Device(c10::DeviceType::CPU), id); }

class Emulator : public ::testing::Test {
 protected:
  void SetUp() override {
    OffloadOptions o;
    o.backend = BackendKind::HostSim;
    o.poison_freed = true;
    o.reuse_freed = true;
    o.check_streams = true;
    o.debug_copy_delay_ns = 30'000'000;  // every copy runs 30 ms after it was issued
    backend_ = make_host_sim_backend(o);
    (void)host_sim::take_stream_races();
  }
  void TearDown() override {
    backend_->synchronize();
    (void)host_sim::take_stream_races();
  }

  // A device block of n bytes on `stream`, filled with `value`.
  c10::Storage block(int64_t n, StreamId stream, uint8_t value) {
    c10::Storage s = backend_->allocate_device(n, sim(stream));
    std::memset(s.mutable_data(), value, static_cast<size_t>(n));
    return s;
  }
  FencePtr offload(const c10::Storage& device, std::vector<uint8_t>& host) {
    return backend_->copy({CopyDirection::DeviceToHost, &device, 0, host.data(),
                           static_cast<int64_t>(host.size()), true, true, false});
  }
  FencePtr reload(const c10::Storage& device, std::vector<uint8_t>& host) {
    return backend_->copy({CopyDirection::HostToDevice, &device, 0, host.data(),
                           static_cast<int64_t>(host.size()), true, true, false});
  }
  static bool all(const std::vector<uint8_t>& v, uint8_t value) {
    for (uint8_t b : v) {
      if (b != value) return false;
    }
    return true;
  }

  std::unique_ptr<Backend> backend_;
};

TEST_F(Emulator, StreamGuardSetsAndRestoresTheCurrentStream) {
  const StreamId s = host_sim::new_stream();
  EXPECT_EQ(host_sim::current_stream(), host_sim::kDefaultStream);
  {
    StreamGuard on(s);
    EXPECT_EQ(host_sim::current_stream(), s);
    EXPECT_EQ(backend_->current_stream().id(), s);
  }
  EXPECT_EQ(host_sim::current_stream(), host_sim::kDefaultStream);
}

TEST_F(Emulator, AFreedBlockGoesBackToItsOwnStreamAtOnce) {
  const StreamId s1 = host_sim::new_stream(), s2 = host_sim::new_stream();
  c10::Storage a = block(4096, s1, 1);
  const void* where = a.data();
  {
    StreamGuard on(s1);
    EXPECT_EQ(host_sim::owner_stream(at::empty({0}).set_(a)), s1);
  }
  a = c10::Storage();
  c10::Storage other = block(4096, s2, 2);  // another stream: not that block
  EXPECT_NE(other.data(), where);
  c10::Storage again = block(4096, s1, 3);  // its stream: that block, at once
  EXPECT_EQ(again.data(), where);
}

TEST_F(Emulator, FreeingABlockACopyMayStillReadIsAReportedRace) {
  c10::Storage a = block(4096, host_sim::kDefaultStream, 7);
  std::vector<uint8_t> host(4096, 0);
  FencePtr f = offload(a, host);
  a = c10::Storage();  // no wait, no record: the block may be reused before the copy read it
  f->synchronize();
  const auto races = host_sim::take_stream_races();
  ASSERT_EQ(races.size(), 1u);
  EXPECT_NE(races[0].find("may still read"), std::string::npos) << races[0];
  EXPECT_TRUE(all(host, 0xFF)) << "the copy should have read the poisoned block";
}

TEST_F(Emulator, ARecordedBlockStaysIntactAndUnusedUntilTheCopyRanIt) {
  c10::Storage a = block(4096, host_sim::kDefaultStream, 7);
  const void* where = a.data();
  std::vector<uint8_t> host(4096, 0);
  FencePtr f = offload(a, host);
  backend_->record_stream(a, backend_->copy_stream());
  a = c10::Storage();
  c10::Storage b = block(4096, host_sim::kDefaultStream, 9);  // must not get the block yet
  EXPECT_NE(b.data(), where);
  EXPECT_GT(host_sim::counters().reserved, host_sim::counters().allocated);
  f->synchronize();
  EXPECT_TRUE(host_sim::take_stream_races().empty());
  EXPECT_TRUE(all(host, 7));
}

TEST_F(Emulator, AnOwnerThatWaitedMayFreeAtOnce) {
  c10::Storage a = block(4096, host_sim::kDefaultStream, 7);
  std::vector<uint8_t> host(4096, 0);
  FencePtr f = offload(a, host);
  backend_->stream_wait(sim(host_sim::kDefaultStream), f);  // the owner's later work follows it
  a = c10::Storage();
  f->synchronize();
  EXPECT_TRUE(host_sim::take_stream_races().empty());
  EXPECT_TRUE(all(host, 7)) << "the block was reused before the copy the owner waited for ran";
}

TEST_F(Emulator, ASeenCompletionOrdersEverythingAfterIt) {
  c10::Storage a = block(4096, host_sim::kDefaultStream, 7);
  std::vector<uint8_t> host(4096, 0);
  FencePtr f = offload(a, host);
  f->synchronize();  // the host saw it complete
  a = c10::Storage();
  EXPECT_TRUE(host_sim::take_stream_races().empty());
  EXPECT_TRUE(all(host, 7));
}

TEST_F(Emulator, HandingOutAReloadBeforeTheStreamWaitedIsARace) {
  const StreamId s = host_sim::new_stream();
  std::vector<uint8_t> host(4096, 5);
  c10::Storage a = block(4096, s, 0);
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(at::kByte)).set_(a);
  FencePtr f = reload(a, host);
  {
    StreamGuard on(s);
    sim::check_handout(t);
  }
  EXPECT_EQ(host_sim::take_stream_races().size(), 1u);
  FencePtr g = reload(a, host);
  backend_->stream_wait(sim(s), g);
  {
    StreamGuard on(s);
    sim::check_handout(t);
  }
  EXPECT_TRUE(host_sim::take_stream_races().empty());
  backend_->host_block_for(sim(s), g);
  EXPECT_EQ(static_cast<const uint8_t*>(a.data())[100], 5);
}

TEST_F(Emulator, CapacityCountsReservedAndRetriesLikeCuda) {
  host_sim::install();
  host_sim::empty_cache();
  const auto base = host_sim::counters();
  const int64_t n = 1 << 20;
  struct Guard {
    ~Guard() { host_sim::set_capacity(0); }
  } guard;
  host_sim::set_capacity(base.reserved + 2 * n);
  c10::Storage a = block(n, host_sim::kDefaultStream, 1);
  std::vector<uint8_t> host(static_cast<size_t>(n), 0);
  FencePtr f = offload(a, host);
  backend_->record_stream(a, backend_->copy_stream());
  a = c10::Storage();  // freed, but reserved until the copy ran
  c10::Storage b = block(n, host_sim::kDefaultStream, 2);
  // A third block fits only once the freed one is back: the allocator waits for the copy.
  c10::Storage c = block(n, host_sim::kDefaultStream, 3);
  EXPECT_TRUE(f->query());
  EXPECT_TRUE(all(host, 1));
  EXPECT_THROW(block(n, host_sim::kDefaultStream, 4), c10::OutOfMemoryError);
}

TEST_F(Emulator, AnAllocationThatWouldFailAsksReclaimersFirst) {
  host_sim::install();
  struct Holder : Reclaimer {
    c10::Storage held;
    int64_t reclaim_device_memory() noexcept override {
      const auto n = static_cast<int64_t>(held.nbytes());
      held = c10::Storage();
      return n;
    }
  };
  const int64_t n = 1 << 20;
  struct Guard {
    ~Guard() { host_sim::set_capacity(0); }
  } guard;
  host_sim::empty_cache();
  host_sim::set_capacity(host_sim::counters().reserved + n + 4096);
  auto holder = std::make_shared<Holder>();
  holder->held = block(n, host_sim::kDefaultStream, 1);
  register_reclaimer(holder);
  c10::Storage b = block(n, host_sim::kDefaultStream, 2);  // fits only without the held block
  EXPECT_FALSE(holder->held);
  {
    NoReclaimScope no;  // a prefetch's own allocation fails instead
    EXPECT_THROW(block(n, host_sim::kDefaultStream, 3), c10::OutOfMemoryError);
  }
}

// ---- the caching allocator model (reserved memory with a device model) ------------------------

constexpr int64_t MiB = int64_t{1} << 20;

TEST(CachingAllocatorModel, SizesRoundTo512AndSegmentsComeIn2And20MiBOrRoundedTo2MiB) {
  using M = sim::CachingAllocatorModel;
  EXPECT_EQ(M::round_size(1), 512);
  EXPECT_EQ(M::round_size(512), 512);
  EXPECT_EQ(M::round_size(513), 1024);
  EXPECT_EQ(M::segment_size(512), 2 * MiB);
  EXPECT_EQ(M::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(M::segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(M::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(M::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(M::segment_size(11 * MiB), 12 * MiB);
}

TEST(CachingAllocatorModel, SmallRequestsShareASegmentPerStreamAndFreedBlocksAreReused) {
  sim::CachingAllocatorModel m;
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

TEST(CachingAllocatorModel, LargeBlocksSplitOnlyWhenMoreThan1MiBRemains) {
  sim::CachingAllocatorModel m;
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
  sim::CachingAllocatorModel m;
  std::vector<sim::CachingAllocatorModel::Block*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(m.allocate(MiB, 0));
  EXPECT_EQ(m.reserved(), 8 * MiB);
  for (size_t i = 0; i < blocks.size(); i += 2) m.free(blocks[i]);
  m.empty_cache();  // no segment is wholly free
  EXPECT_EQ(m.reserved(), 8 * MiB);
  for (size_t i = 1; i < blocks.size(); i += 2) m.free(blocks[i]);
  m.empty_cache();
  EXPECT_EQ(m.reserved(), 0);
}

}  // namespace
}  // namespace offtune::detail
