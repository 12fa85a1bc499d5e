// The pieces of a measured run that the runner and the live run share (run_parts.hpp).
#include "run_parts.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>

#include "offtune/profiler/metrics.hpp"

namespace offtune::profiler::detail {
namespace {

// Warm-up until stable: a first measured step this much slower than the median of the others is
// warm-up.
constexpr double kUnsettled = 1.25;

}  // namespace

MemorySample memory_sample(const DeviceMemory& device,
                           const std::vector<const ActivationOffloader*>& offloaders) {
  MemorySample s{device.allocated, device.reserved};
  for (const ActivationOffloader* o : offloaders) {
    const ResidentState r = o->resident();
    s.host_bytes = std::max<int64_t>(s.host_bytes, 0) + r.host_bytes;
    s.host_pool_bytes = std::max<int64_t>(s.host_pool_bytes, 0) + r.host_pool_reserved_bytes;
  }
  return s;
}

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

PointStatus point_status(RunStatus s) {
  switch (s) {
    case RunStatus::Ok:
      return PointStatus::Ok;
    case RunStatus::OutOfMemory:
      return PointStatus::OutOfMemory;
    default:
      return PointStatus::Failed;
  }
}

std::string one_line(std::string s) {
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

void MemoryCurve::begin(int64_t time_ns, int64_t allocated) {
  std::lock_guard<std::mutex> lock(mutex_);
  bytes_ = allocated;
  points_.clear();
  points_.emplace_back(time_ns, allocated);
  active_ = true;
}

std::vector<std::pair<int64_t, int64_t>> MemoryCurve::end(int64_t time_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_ = false;
  if (points_.empty()) return {};
  const int64_t t0 = points_.front().first;
  const int64_t width = std::max<int64_t>((time_ns - t0) / kCurvePoints, 1);
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t bucket = -1;
  for (const auto& p : points_) {
    const int64_t b = (p.first - t0) / width;
    if (b != bucket || out.empty()) {
      out.push_back(p);
      bucket = b;
    } else if (p.second > out.back().second) {
      out.back() = p;
    }
  }
  out.emplace_back(time_ns, points_.back().second);
  points_.clear();
  return out;
}

void MemoryCurve::add(int64_t delta, int64_t time_ns) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return;
  bytes_ += delta;
  try {
    points_.emplace_back(time_ns, bytes_);
  } catch (...) {  // out of host memory: the curve is thinner, the run goes on
  }
}

std::unique_ptr<ActivityCollector> make_run_collector(bool host_sim, Collector which) {
  if (host_sim) {
    const DeviceModel* dm = host_sim::device_model();
    return make_null_collector(dm != nullptr
                                   ? "host-sim: time modelled for " + dm->title +
                                         " (device model " + dm->name + ")"
                                   : std::string("host-sim: copies timed by the copy thread"));
  }
  if (which == Collector::NvtxOnly) {
    return make_null_collector("nvtx-only: device activity left to Nsight");
  }
  return make_cupti_collector();
}

std::string start_run_collector(ActivityCollector& collector, Collector which) {
  collector.start();
  if (!collector.active() && which == Collector::Cupti) {
    throw std::runtime_error("CUPTI unavailable: " + collector.status());
  }
  return collector.status();
}

bool first_step_unsettled(const std::vector<double>& step_ms) {
  if (step_ms.size() < 3) return false;
  std::vector<double> rest(step_ms.begin() + 1, step_ms.end());
  std::sort(rest.begin(), rest.end());
  const size_t m = rest.size() / 2;
  const double median = rest.size() % 2 == 1 ? rest[m] : 0.5 * (rest[m - 1] + rest[m]);
  return step_ms.front() > kUnsettled * median;
}

StepRecord step_record(Recorder& recorder, RunId run, int64_t index, int64_t begin_ns,
                       int64_t end_ns, const DeviceMemory& memory, int64_t offloaded_bytes,
                       int64_t reloaded_bytes, double loss) {
  StepRecord s;
  s.run = run;
  s.step = index;
  s.begin_ns = begin_ns;
  s.end_ns = end_ns;
  s.peak_allocated = memory.peak_allocated;
  s.peak_reserved = memory.peak_reserved;
  s.offloaded_bytes = offloaded_bytes;
  s.reloaded_bytes = reloaded_bytes;
  const auto overlap =
      compute_overlap(recorder.events_between(begin_ns, end_ns), Interval{begin_ns, end_ns});
  s.hidden_copy_pct = overlap.hidden_pct;
  s.exposed_copy_ns = overlap.exposed_ns;
  s.loss = loss;
  return s;
}

Recorder::Snapshot finish_timeline(Recorder& recorder, ActivityCollector& collector, bool host_sim,
                                   bool dropped, int64_t kept_from, RunId run) {
  collector.stop();
  auto snapshot = recorder.take();
  if (dropped) {
    // The dropped steps lead: what the recorder saw before the first kept step goes, and the
    // step marks are named by the steps kept. (On cuda, CUPTI's records, merged below, keep
    // the GPU's own clock and are left as they are.)
    std::erase_if(snapshot.events, [&](const TimelineEvent& e) { return e.start_ns < kept_from; });
    std::erase_if(snapshot.occupancy,
                  [&](const OccupancySample& o) { return o.time_ns < kept_from; });
    int64_t n = 0;
    for (auto& e : snapshot.events) {
      if (e.kind == EventKind::Step) e.name = "step " + std::to_string(n++);
    }
  }
  if (collector.active() || !host_sim) {
    // CUPTI's kernels and copies replace the engine's observed copy times on cuda.
    auto device_events = collector.take();
    if (!device_events.empty()) {
      std::erase_if(snapshot.events, [](const TimelineEvent& e) {
        return e.kind == EventKind::CopyD2H || e.kind == EventKind::CopyH2D;
      });
      snapshot.events.insert(snapshot.events.end(), device_events.begin(), device_events.end());
      std::stable_sort(
          snapshot.events.begin(), snapshot.events.end(),
          [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_ns < b.start_ns; });
    }
  }
  for (auto& e : snapshot.events) e.run = run;
  for (auto& o : snapshot.occupancy) o.run = run;
  return snapshot;
}

RunSummary summarize(const std::vector<StepRecord>& steps, const std::vector<double>& step_ms,
                     const Recorder::Snapshot& timeline, bool modelled, const RunHoldings& held) {
  RunSummary sum;
  const auto st = step_stats(step_ms);
  set_step_time(sum, st);
  if (modelled && !step_ms.empty() && st.min_ms == st.max_ms) {
    // A device model times every step of a workload alike: even one step is exact (a level
    // above 0 with zero width, as several equal steps give).
    sum.step_ms_ci_low = sum.step_ms_ci_high = st.median_ms;
    sum.step_ms_ci_level = 1.0;
  }
  const auto n = static_cast<int64_t>(std::max<size_t>(steps.size(), 1));
  for (const auto& s : steps) {
    sum.peak_allocated = std::max(sum.peak_allocated, s.peak_allocated);
    sum.peak_reserved = std::max(sum.peak_reserved, s.peak_reserved);
    sum.offloaded_bytes += s.offloaded_bytes;
    sum.reloaded_bytes += s.reloaded_bytes;
  }
  sum.offloaded_bytes /= n;
  sum.reloaded_bytes /= n;
  const auto overlap = compute_overlap(timeline.events);
  sum.hidden_copy_pct = overlap.hidden_pct;
  sum.hidden_d2h_pct = overlap.d2h_hidden_pct;
  sum.hidden_h2d_pct = overlap.h2d_hidden_pct;
  sum.exposed_copy_ns = overlap.exposed_ns / n;
  sum.pageable_copies = overlap.pageable_copies / n;
  // Host copies of a step are all alive at the end of its forward: their peak is the step's
  // bytes.
  for (const auto& s : steps)
    sum.host_bytes_peak = std::max(sum.host_bytes_peak, s.offloaded_bytes);
  sum.pinned_bytes = held.pinned_bytes;
  sum.device_outside = held.device_outside;
  sum.host_rss_peak = held.host_rss_peak;
  sum.final_loss = steps.empty() ? 0.0 : steps.back().loss;
  return sum;
}

HostPeak::HostPeak(bool on) {
  if (!on) return;
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  measured_ = clear.good();
}

int64_t HostPeak::peak() const {
  if (!measured_) return 0;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      try {
        return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
      } catch (const std::exception&) {
        return 0;
      }
    }
  }
  return 0;
}

}  // namespace offtune::profiler::detail
