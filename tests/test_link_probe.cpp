// The link measured in place (offtune/link_probe.hpp): the fit of latency and bandwidth, the link
// model it amounts to, and host-sim's copy path against the link model it waits out.
#include <gtest/gtest.h>

#include <stdexcept>

#include "offtune/link_probe.hpp"

namespace offtune {
namespace {

LinkSample sample(CopyDirection d, bool pinned, int64_t bytes, int64_t ns) {
  return {d, pinned, bytes, ns, ns};
}

// time = 10 us + bytes / 20 GB/s one way, 5 us + bytes / 10 GB/s the other; pageable 4 GB/s.
TEST(LinkProbe, TheFitRecoversLatencyAndBandwidthAndTheLinkTakesTheSlowerWay) {
  LinkCalibration c;
  for (const int64_t bytes : {int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 24}) {
    c.samples.push_back(sample(CopyDirection::DeviceToHost, true, bytes, 10'000 + bytes / 20));
    c.samples.push_back(sample(CopyDirection::HostToDevice, true, bytes, 5'000 + bytes / 10));
    c.samples.push_back(sample(CopyDirection::HostToDevice, false, bytes, bytes / 4));
  }
  const LinkFit d2h = c.fit(CopyDirection::DeviceToHost, true);
  EXPECT_NEAR(d2h.gbps, 20.0, 0.01);
  EXPECT_NEAR(d2h.latency_ns, 10'000, 2);
  const LinkFit h2d = c.fit(CopyDirection::HostToDevice, true);
  EXPECT_NEAR(h2d.gbps, 10.0, 0.01);
  EXPECT_NEAR(h2d.latency_ns, 5'000, 2);
  EXPECT_FALSE(c.fit(CopyDirection::DeviceToHost, false).measured());
  const LinkModel m = c.link();
  EXPECT_NEAR(m.pinned_gbps, 10.0, 0.01);  // the slower direction
  EXPECT_NEAR(m.latency_ns, 10'000, 2);    // the larger latency
  EXPECT_NEAR(m.pageable_gbps, 4.0, 0.01);
  // Times that shrink with size (noise) fit through the origin, never a negative latency.
  LinkCalibration noisy;
  noisy.samples = {sample(CopyDirection::DeviceToHost, true, 1000, 900),
                   sample(CopyDirection::DeviceToHost, true, 2000, 100)};
  const LinkFit f = noisy.fit(CopyDirection::DeviceToHost, true);
  EXPECT_EQ(f.latency_ns, 0);
  EXPECT_GT(f.gbps, 0.0);
}

// Host-sim's copies run on its copy thread and wait out the link model: every measured copy takes
// at least the model's time, in each direction, pinned or not.
TEST(LinkProbe, HostSimCopiesTakeAtLeastTheLinkModelsTime) {
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.link = LinkModel::pcie4();
  LinkProbeOptions probe;
  probe.sizes = {4096, int64_t{1} << 20};
  probe.repeats = 2;
  const LinkCalibration c = calibrate_link(o, probe);
  EXPECT_EQ(c.backend, BackendKind::HostSim);
  EXPECT_TRUE(c.skipped.empty());
  ASSERT_EQ(c.samples.size(), 8U);
  for (const LinkSample& s : c.samples) {
    EXPECT_GE(s.min_ns, o.link.copy_ns(s.bytes, s.pinned)) << s.bytes << " " << s.pinned;
    EXPECT_GE(s.median_ns, s.min_ns);
  }
  // The fit goes through the medians of the two sizes, each at least the model's time: at the
  // largest size it says a copy takes at least what the model says (3% for the through-the-origin
  // fallback). Its bandwidth alone may exceed the model's: a small copy's fixed cost on a loaded
  // machine (the copy thread's wake-up) is a latency that flattens the slope.
  const int64_t big = int64_t{1} << 20;
  EXPECT_GE(static_cast<double>(c.link().copy_ns(big, true)), 0.97 * o.link.copy_ns(big, true));
  probe.repeats = 0;
  EXPECT_THROW(calibrate_link(o, probe), std::invalid_argument);
  probe.repeats = 1;
  probe.sizes = {4096, -1};
  EXPECT_THROW(calibrate_link(o, probe), std::invalid_argument);
  probe.sizes.clear();
  EXPECT_THROW(calibrate_link(o, probe), std::invalid_argument);
}

}  // namespace
}  // namespace offtune
