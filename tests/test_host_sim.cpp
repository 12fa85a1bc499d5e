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
#include <mutex>
#include <vector>

#include "alloc_model.hpp"
#include "backend.hpp"
#include "host_sim_internal.hpp"
#include "offtune/device_model.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/memory_history.hpp"
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

// The memory history (memory_history.hpp): an allocation and its free as the modelled allocator
// saw them, with the storage's data pointer, a block recorded on a copy stream completing its free
// only once the copy ran; the allocator's state lists the live block.
TEST_F(Emulator, TheMemoryHistoryFollowsTheModelledAllocatorWithEachStoragesData) {
  struct Recorder final : host_sim::MemoryHistoryListener {
    std::mutex mutex;
    std::vector<host_sim::MemoryEvent> events;
    void on_memory_event(const host_sim::MemoryEvent& e) noexcept override {
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back(e);
    }
  } recorder;
  host_sim::set_memory_history_listener(&recorder);
  c10::Storage a = block(3000, host_sim::kDefaultStream, 1);
  const void* data = a.data();
  using A = host_sim::MemoryEvent::Action;
  int64_t addr = -1;
  {
    std::lock_guard<std::mutex> lock(recorder.mutex);
    ASSERT_FALSE(recorder.events.empty());
    const auto& alloc = recorder.events.back();
    EXPECT_EQ(alloc.action, A::Alloc);
    EXPECT_EQ(alloc.data, data);
    EXPECT_EQ(alloc.size, 3000);        // as asked for, as torch's history
    EXPECT_EQ(alloc.block_size, 3072);  // rounded to 512
    addr = alloc.addr;
  }
  bool live = false;
  for (const auto& seg : host_sim::memory_segments()) {
    for (const auto& b : seg.blocks) {
      live |= b.addr == addr && b.state == host_sim::MemoryBlock::State::Allocated &&
              b.requested == 3000;
    }
  }
  EXPECT_TRUE(live);
  // Offloaded (read by a copy on the side stream), then freed: the free completes once the copy
  // ran.
  std::vector<uint8_t> host(3000);
  offload(a, host)->synchronize();
  a = c10::Storage();
  backend_->synchronize();
  host_sim::set_memory_history_listener(nullptr);
  std::vector<A> after;
  for (const auto& e : recorder.events) {
    const bool freeing = e.action == A::FreeRequested || e.action == A::FreeCompleted;
    if (e.addr == addr && freeing) after.push_back(e.action);
  }
  EXPECT_EQ(after, (std::vector<A>{A::FreeRequested, A::FreeCompleted}));
  const size_t before = recorder.events.size();
  c10::Storage b = block(4096, host_sim::kDefaultStream, 2);  // nothing listens now
  EXPECT_EQ(recorder.events.size(), before);
  EXPECT_STREQ(host_sim::to_string(A::FreeCompleted), "free_completed");
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

// The device's capacity is what the modelled caching allocator may reserve. 8 MiB blocks come from
// 20 MiB segments (split: 12 MiB, then 4 MiB remain). A freed block recorded on the copy stream is
// still reserved until its copy ran; an allocation that fits only in it makes the allocator wait
// for the copy (CUDA's synchronize_and_free_events) and then reuse it; one more runs out.
TEST_F(Emulator, CapacityCountsReservedAndRetriesLikeCuda) {
  host_sim::install();
  host_sim::empty_cache();
  const StreamId own = host_sim::new_stream();  // no block cached by an earlier test serves it
  const int64_t n = 8 << 20;
  struct Guard {
    ~Guard() { host_sim::set_capacity(0); }
  } guard;
  host_sim::set_capacity(host_sim::counters().modelled_reserved + (20 << 20));  // one segment more
  c10::Storage a = block(n, own, 1);
  std::vector<uint8_t> host(static_cast<size_t>(n), 0);
  FencePtr f = offload(a, host);
  backend_->record_stream(a, backend_->copy_stream());
  a = c10::Storage();  // freed, but reserved until the copy ran (30 ms)
  EXPECT_EQ(host_sim::counters().modelled_pending, n);
  c10::Storage b = block(n, own, 2);  // the segment's other 12 MiB
  EXPECT_FALSE(f->query());
  // Only a's block can hold a third: the allocator waits for the copy, then reuses it.
  c10::Storage c = block(n, own, 3);
  EXPECT_TRUE(f->query());
  EXPECT_TRUE(all(host, 1));
  EXPECT_EQ(host_sim::counters().modelled_pending, 0);
  EXPECT_GE(host_sim::counters().cache_flushes, 1);
  EXPECT_THROW(block(n, own, 4), c10::OutOfMemoryError);
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
  const int64_t n = 12 << 20;  // a 20 MiB segment each (a request under 10 MiB would share one)
  struct Guard {
    ~Guard() { host_sim::set_capacity(0); }
  } guard;
  host_sim::empty_cache();
  const StreamId own = host_sim::new_stream();  // no block cached by an earlier test serves it
  // Room for one more segment of the modelled allocator: 12 MiB rounds to one of its own.
  host_sim::set_capacity(host_sim::counters().modelled_reserved + n);
  auto holder = std::make_shared<Holder>();
  holder->held = block(n, own, 1);
  register_reclaimer(holder);
  c10::Storage b = block(n, own, 2);  // fits only without the held block
  EXPECT_FALSE(holder->held);
  {
    NoReclaimScope no;  // a prefetch's own allocation fails instead
    EXPECT_THROW(block(n, own, 3), c10::OutOfMemoryError);
  }
}

// --device-capacity is the device's memory, as on a GPU: the CUDA context (the device model's
// context_bytes, 512 MiB for an H100) takes its share outside the allocator, whichever of the two
// is set first. A 600 MiB device under h100-sxm leaves the allocator 88 MiB: 100 MiB is refused.
// Before, the allocator had all 600 MiB and the allocation fit.
TEST_F(Emulator, TheDevicesCapacityLessTheContextIsWhatTheAllocatorHas) {
  host_sim::install();
  constexpr int64_t MiB = 1 << 20;
  const DeviceModel h100 = device_model_named("h100-sxm");
  ASSERT_EQ(h100.context_bytes, 512 * MiB);
  struct Guard {
    ~Guard() {
      host_sim::set_device_model(nullptr);
      host_sim::set_capacity(0);
    }
  } guard;
  host_sim::empty_cache();
  const StreamId own = host_sim::new_stream();
  host_sim::set_capacity(host_sim::counters().modelled_reserved + 600 * MiB);
  { c10::Storage fits = block(100 * MiB, own, 1); }  // no device model: no context
  host_sim::empty_cache();
  host_sim::set_device_model(&h100);
  EXPECT_THROW(block(100 * MiB, own, 2), c10::OutOfMemoryError);
  { c10::Storage small = block(64 * MiB, own, 3); }  // 88 MiB are there
  host_sim::empty_cache();
  // The other order: the device model first, then the capacity.
  host_sim::set_capacity(0);
  host_sim::set_capacity(host_sim::counters().modelled_reserved + 600 * MiB);
  EXPECT_THROW(block(100 * MiB, own, 4), c10::OutOfMemoryError);
  EXPECT_EQ(host_sim::capacity(), host_sim::counters().modelled_reserved + 600 * MiB)
      << "capacity() is the device's, as given";
}

// CUDA runs its free-memory callbacks inside the short device's allocator lock: only that device's
// offloaders may be asked, or a callback on each of two GPUs could wait for the other's lock (see
// pressure.hpp). Asked for device 1, the reclaimers of device 1 and of any device give back; that
// of device 0 is not called. Before, every reclaimer was asked whatever the device.
TEST_F(Emulator, ReclaimersAreAskedForTheShortDevicesMemoryOnly) {
  struct Counting : Reclaimer {
    explicit Counting(int d) : d_(d) {}
    int64_t reclaim_device_memory() noexcept override {
      ++asked;
      return 1;
    }
    int device() const noexcept override { return d_; }
    int asked = 0;
    int d_;
  };
  auto zero = std::make_shared<Counting>(0);
  auto one = std::make_shared<Counting>(1);
  auto any = std::make_shared<Counting>(kAnyDevice);
  for (const auto& r : {zero, one, any}) register_reclaimer(r);
  EXPECT_EQ(reclaim_device_memory(1), 2);
  EXPECT_EQ(zero->asked, 0);
  EXPECT_EQ(one->asked, 1);
  EXPECT_EQ(any->asked, 1);
  EXPECT_EQ(reclaim_device_memory(kAnyDevice), 3);  // host-sim's allocator: every one
  EXPECT_EQ(zero->asked, 1);
}

}  // namespace
}  // namespace offtune::detail
