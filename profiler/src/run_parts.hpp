// What a measured run does around its steps, shared by the runner (run_measured: a workload the
// profiler steps itself) and the live run (live_run.hpp: a training loop that steps itself): the
// host-sim memory curve, the activity collector, the step's figures, warm-up until stable, the
// timeline's last touches and the run's summary. Private to the profiler.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/profiler/cupti.hpp"
#include "offtune/profiler/recorder.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/runner.hpp"

namespace offtune::profiler::detail {

int64_t unix_now_ns();
// The first line of an error message (c10 errors carry a backtrace after it).
std::string one_line(std::string s);
// A sweep point's status from its run's: ok, out of memory, or failed (interrupted included).
PointStatus point_status(RunStatus s);
// Memory now, for Recorder::sample_memory: the device's figures and the host side of the
// offloaders (their host copies and pinned pools, summed; -1 without an offloader).
MemorySample memory_sample(const DeviceMemory& device,
                           const std::vector<const ActivationOffloader*>& offloaders);

// Device memory as the allocator changes it, one step at a time (host-sim): every allocation and
// free moves a running total, and the step's curve is kept at kCurvePoints buckets, each at its
// highest value (so that the peak survives the thinning).
class MemoryCurve final : public host_sim::AllocationListener {
 public:
  void begin(int64_t time_ns, int64_t allocated);
  // The step's curve, thinned; recording stops until the next begin().
  std::vector<std::pair<int64_t, int64_t>> end(int64_t time_ns);
  void on_allocate(const void*, int64_t bytes, int64_t time_ns) noexcept override {
    add(bytes, time_ns);
  }
  void on_free(const void*, int64_t bytes, int64_t time_ns) noexcept override {
    add(-bytes, time_ns);
  }

 private:
  static constexpr int64_t kCurvePoints = 400;
  void add(int64_t delta, int64_t time_ns) noexcept;
  std::mutex mutex_;
  bool active_ = false;
  int64_t bytes_ = 0;
  std::vector<std::pair<int64_t, int64_t>> points_;
};

// Installs a listener for its lifetime (one at a time, process-wide).
class ListenerScope {
 public:
  explicit ListenerScope(host_sim::AllocationListener* l) : on_(l != nullptr) {
    if (on_) host_sim::set_allocation_listener(l);
  }
  ~ListenerScope() {
    if (on_) host_sim::set_allocation_listener(nullptr);
  }
  ListenerScope(const ListenerScope&) = delete;
  ListenerScope& operator=(const ListenerScope&) = delete;

 private:
  bool on_;
};

// Device activity: host timestamps on host-sim (saying whether a device model times them), CUPTI
// on cuda unless told otherwise.
std::unique_ptr<ActivityCollector> make_run_collector(bool host_sim, Collector which);
// Starts it with the first measured step (warm-up activity stays out of the timeline); throws
// when CUPTI was required and is unavailable. Returns what records device activity.
std::string start_run_collector(ActivityCollector& collector, Collector which);

// Warm-up until stable: whether the first of `step_ms` (3 or more measured steps) is warm-up that
// the requested warm-up did not cover (allocator growth, caches, autotuning): more than 25% slower
// than the median of the others.
bool first_step_unsettled(const std::vector<double>& step_ms);

// One measured step's record from its times, its device memory and its engine counters' change;
// the overlap from the recorder's events between begin and end.
StepRecord step_record(Recorder& recorder, RunId run, int64_t index, int64_t begin_ns,
                       int64_t end_ns, const DeviceMemory& memory, int64_t offloaded_bytes,
                       int64_t reloaded_bytes, double loss);

// The run's timeline from the recorder's snapshot: what happened before `kept_from` (steps dropped
// as warm-up) goes and the step marks are renumbered when `dropped`; on cuda (or with CUPTI active)
// the collector's kernels and copies replace the engine's observed copies. Stops the collector.
// Every event and sample gets `run`.
Recorder::Snapshot finish_timeline(Recorder& recorder, ActivityCollector& collector, bool host_sim,
                                   bool dropped, int64_t kept_from, RunId run);

// What a run holds besides its steps' figures: host memory the engine's pool reserved, device
// memory outside the caching allocator (DeviceMemory::outside_allocator at the run's end) and the
// process's host peak (HostPeak; 0 when not measured).
struct RunHoldings {
  int64_t pinned_bytes = 0;
  int64_t device_outside = 0;
  int64_t host_rss_peak = 0;
};

// The run's summary from its measured steps and timeline. `modelled`: host-sim with a device
// model (every step timed alike: even one step gives an exact interval).
RunSummary summarize(const std::vector<StepRecord>& steps, const std::vector<double>& step_ms,
                     const Recorder::Snapshot& timeline, bool modelled, const RunHoldings& held);

// The process's peak resident host memory over a run: started when made, read by peak(). Linux:
// the kernel's high-water mark (VmHWM in /proc/self/status), reset by writing 5 to
// /proc/self/clear_refs. Without that reset (another OS, a kernel that refuses it) the mark would
// be the process's since it began, not the run's: peak() is then 0 (not measured). Off (`on`
// false, host-sim: its device memory lives on the host) it is 0 too.
class HostPeak {
 public:
  explicit HostPeak(bool on);
  int64_t peak() const;

 private:
  bool measured_ = false;
};

}  // namespace offtune::profiler::detail
