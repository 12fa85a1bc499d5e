// The host<->device link measured in place: what one copy of n bytes costs each way, from pinned
// and from pageable host memory, through the engine's own copy path (the backend's copy stream).
// On cuda that is the GPU's link (cudaMemcpyAsync, the launch and the wait included); on host-sim
// it is the emulation's copy thread (a memcpy, the hand-off to the thread and the wake-up of the
// waiter, and at least the link model's time). `offtune calibrate` prints it and the `--link` it
// amounts to; the what-if predictor's copies are timed by a link model, which this checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "offtune/observer.hpp"
#include "offtune/options.hpp"

namespace offtune {

// One size in one direction: each copy timed from its issue until the waiting thread has seen it
// complete (what a reload's wait costs the engine), over the repeats after one warm-up copy.
struct LinkSample {
  CopyDirection direction = CopyDirection::DeviceToHost;
  bool pinned = true;
  int64_t bytes = 0;
  int64_t median_ns = 0;
  int64_t min_ns = 0;
};

// time = latency_ns + bytes / (gbps bytes per ns), least squares over a direction's sizes
// (medians); a negative latency is taken as 0 and the bandwidth fitted through the origin.
struct LinkFit {
  double gbps = 0.0;
  int64_t latency_ns = 0;
  bool measured() const { return gbps > 0.0; }
};

struct LinkCalibration {
  BackendKind backend = BackendKind::HostSim;
  std::string device;                // the backend's device name
  LinkModel link_in_use;             // host-sim: the link model its copies waited out
  std::vector<LinkSample> samples;   // by direction, then pinned before pageable, then size
  std::vector<std::string> skipped;  // what could not be measured, and why (pinned memory refused)

  LinkFit fit(CopyDirection direction, bool pinned) const;
  // The link model it amounts to: of the two directions the slower one's pinned bandwidth and
  // the larger latency, and the slower pageable bandwidth (0 when pageable was not measured).
  LinkModel link() const;
};

struct LinkProbeOptions {
  std::vector<int64_t> sizes = {int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20,
                                int64_t{64} << 20};
  int64_t repeats = 5;
};

// Measures the link of the backend `options` names (cuda: options.device_index; host-sim: with
// options.link as its link model). Throws EngineError when the backend cannot be had and
// std::invalid_argument on an empty or non-positive size or a repeat count below 1.
LinkCalibration calibrate_link(const OffloadOptions& options, const LinkProbeOptions& probe = {});

}  // namespace offtune
