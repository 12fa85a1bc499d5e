// Option validation: every bad value gets its own clear error.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <c10/core/AllocatorConfig.h>

#include "offtune/core.hpp"
#include "offtune/host_sim.hpp"

namespace offtune {
namespace {

void expect_error(OffloadOptions o, const std::string& needle) {
  try {
    o.validate();
    FAIL() << "expected OptionsError mentioning " << needle;
  } catch (const OptionsError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Options, DefaultsMatchTheReference) {
  OffloadOptions o;
  EXPECT_TRUE(o.use_pin_memory);
  EXPECT_TRUE(o.use_streams);
  EXPECT_EQ(o.min_offload_size, 1024);
  EXPECT_EQ(o.max_fwd_stash_size, 5);
  EXPECT_NO_THROW(o.validate());
}

TEST(Options, RejectsBadValues) {
  OffloadOptions o;
  o.max_fwd_stash_size = 0;
  expect_error(o, "max_fwd_stash_size must be at least 1");
  o = {};
  o.min_offload_size = -1;
  expect_error(o, "min_offload_size");
  o = {};
  o.max_fwd_stash_bytes = -5;
  expect_error(o, "max_fwd_stash_bytes");
  o = {};
  o.prefetch = -1;
  expect_error(o, "prefetch");
  o = {};
  o.host_ram_warn_percent = 150;
  expect_error(o, "host_ram_warn_percent");
  o = {};
  o.host_pool_slab_bytes = 1000;
  expect_error(o, "host_pool_slab_bytes");
  o = {};
  o.link.pinned_gbps = -1;
  expect_error(o, "link model");
  o = {};
  o.device_index = -2;
  expect_error(o, "device_index");
  o = {};
  o.max_prefetch_bytes = -1;
  expect_error(o, "max_prefetch_bytes");
  o = {};
  o.debug_copy_delay_ns = -5;
  expect_error(o, "debug_copy_delay_ns");
}

TEST(Options, DefaultDeviceIsTheCurrentOne) {
  // -1: the current CUDA device when the offloader is made, not GPU 0 for every process.
  EXPECT_EQ(OffloadOptions{}.device_index, -1);
  EXPECT_EQ(OffloadOptions{}.max_prefetch_bytes, 0);
  EXPECT_EQ(OffloadOptions{}.debug_copy_delay_ns, 0);
}

TEST(Options, ConstructorValidates) {
  OffloadOptions o;
  o.max_fwd_stash_size = 0;
  EXPECT_THROW(ActivationOffloader{o}, OptionsError);
}

// alloc_segments sets the process's expandable_segments (c10's allocator settings, which CUDA's
// caching allocator and host-sim's model of it read) while the offloader lives, and puts back what
// it found; env changes nothing.
TEST(Options, AllocSegmentsSetTheAllocatorWhileTheOffloaderLivesAndPutItBack) {
  using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;
  const bool before = Config::use_expandable_segments();
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  for (const AllocSegments s : {AllocSegments::Expandable, AllocSegments::Fixed}) {
    o.alloc_segments = s;
    {
      ActivationOffloader off(o);
      EXPECT_EQ(Config::use_expandable_segments(), s == AllocSegments::Expandable);
    }
    EXPECT_EQ(Config::use_expandable_segments(), before);
  }
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:True");
  o.alloc_segments = AllocSegments::Env;
  {
    ActivationOffloader off(o);
    EXPECT_TRUE(Config::use_expandable_segments()) << "env leaves the setting as it is";
  }
  o.alloc_segments = AllocSegments::Fixed;
  {
    ActivationOffloader off(o);
    EXPECT_FALSE(Config::use_expandable_segments());
  }
  EXPECT_TRUE(Config::use_expandable_segments());
  c10::CachingAllocator::setAllocatorSettings(before ? "expandable_segments:True"
                                                     : "expandable_segments:False");
  EXPECT_EQ(parse_alloc_segments("expandable"), AllocSegments::Expandable);
  EXPECT_THROW(parse_alloc_segments("growing"), OptionsError);
}

TEST(Options, ParsesBackends) {
  EXPECT_EQ(parse_backend("auto"), BackendKind::Auto);
  EXPECT_EQ(parse_backend("cuda"), BackendKind::Cuda);
  EXPECT_EQ(parse_backend("host-sim"), BackendKind::HostSim);
  EXPECT_EQ(parse_backend("host_sim"), BackendKind::HostSim);
  try {
    parse_backend("tpu");
    FAIL();
  } catch (const OptionsError& e) {
    EXPECT_STREQ(e.what(), "unknown backend 'tpu' (valid: auto, cuda, host-sim)");
  }
  EXPECT_EQ(to_string(BackendKind::HostSim), "host-sim");
}

TEST(Options, CudaWithoutGpuIsAClearError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is available";
  OffloadOptions o;
  o.backend = BackendKind::Cuda;
  try {
    ActivationOffloader off(o);
    FAIL();
  } catch (const EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("host-sim"), std::string::npos) << e.what();
  }
}

TEST(Options, AutoPicksHostSimWithoutGpu) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is available";
  ActivationOffloader off;
  EXPECT_EQ(off.backend(), BackendKind::HostSim);
}

TEST(LinkModel, CopyCost) {
  LinkModel none;
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.copy_ns(1 << 20, true), 0);
  LinkModel l{10.0, 0.0, 1000};  // 10 GB/s pinned, pageable defaults to half
  EXPECT_EQ(l.copy_ns(10'000, true), 1000 + 1000);
  EXPECT_EQ(l.copy_ns(10'000, false), 1000 + 2000);
  EXPECT_TRUE(LinkModel::pcie4().enabled());
}

}  // namespace
}  // namespace offtune

namespace offtune {
namespace {

// The capacity is what the modelled caching allocator may reserve: with room for one 2 MiB small
// segment, a 4 KiB tensor fits and a 4 MiB one (a 20 MiB large segment) does not; the error says
// what it tried to allocate.
TEST(HostSim, CapacityRaisesOutOfMemoryLikeCuda) {
  host_sim::install();
  host_sim::empty_cache();
  host_sim::StreamGuard own(host_sim::new_stream());  // no cached block of another test serves it
  host_sim::set_capacity(host_sim::counters().modelled_reserved + (2 << 20));
  try {
    (void)torch::empty({1 << 20}, torch::kFloat);  // 4 MiB
    ADD_FAILURE() << "a 20 MiB segment does not fit";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("tried to allocate 20 MiB"), std::string::npos)
        << e.what();
    // Sizes a person reads (issue 43 defect 12: the dashboard's tooltip showed "a request of
    // 4194304 bytes").
    EXPECT_NE(std::string(e.what()).find("for a request of 4 MiB"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(" bytes"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(torch::empty({1024}, torch::kFloat));
  host_sim::set_capacity(0);
  EXPECT_NO_THROW(torch::empty({1 << 20}, torch::kFloat));
}

TEST(HostSim, CountsLiveBytesAndPeak) {
  host_sim::install();
  const auto base = host_sim::counters();
  host_sim::reset_peak();
  {
    auto t = torch::empty({1000}, torch::kFloat);
    EXPECT_EQ(host_sim::counters().allocated, base.allocated + 4000);
  }
  EXPECT_EQ(host_sim::counters().allocated, base.allocated);
  EXPECT_GE(host_sim::counters().peak, base.allocated + 4000);
}

}  // namespace
}  // namespace offtune
