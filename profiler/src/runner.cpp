#include "offtune/profiler/runner.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/profiler/cupti.hpp"
#include "offtune/profiler/metrics.hpp"
#include "offtune/profiler/nvtx.hpp"
#include "offtune/profiler/recorder.hpp"

namespace offtune::profiler {
namespace {

// Warm-up until stable (run_measured): a first measured step this much slower than the median of
// the others is warm-up.
constexpr double kUnsettled = 1.25;

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string one_line(std::string s) {
  // c10 errors carry a backtrace after the first line: keep the message.
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

// Device memory as the allocator changes it, one step at a time (host-sim): every allocation and
// free moves a running total, and the step's curve is kept at kCurvePoints buckets, each at its
// highest value (so that the peak survives the thinning).
class MemoryCurve final : public host_sim::AllocationListener {
 public:
  void begin(int64_t time_ns, int64_t allocated) {
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_ = allocated;
    points_.clear();
    points_.emplace_back(time_ns, allocated);
    active_ = true;
  }
  // The step's curve, thinned; recording stops until the next begin().
  std::vector<std::pair<int64_t, int64_t>> end(int64_t time_ns) {
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
  void on_allocate(const void*, int64_t bytes, int64_t time_ns) noexcept override {
    add(bytes, time_ns);
  }
  void on_free(const void*, int64_t bytes, int64_t time_ns) noexcept override {
    add(-bytes, time_ns);
  }

 private:
  static constexpr int64_t kCurvePoints = 400;
  void add(int64_t delta, int64_t time_ns) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!active_) return;
    bytes_ += delta;
    try {
      points_.emplace_back(time_ns, bytes_);
    } catch (...) {  // out of host memory: the curve is thinner, the run goes on
    }
  }
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

}  // namespace

void TeeObserver::on_pack(const PackEvent& e) {
  for (auto& t : targets_) t->on_pack(e);
}
void TeeObserver::on_copy_issued(const CopyEvent& e) {
  for (auto& t : targets_) t->on_copy_issued(e);
}
void TeeObserver::on_copy_completed(const CopyEvent& e) {
  for (auto& t : targets_) t->on_copy_completed(e);
}
void TeeObserver::on_unpack(const UnpackEvent& e) {
  for (auto& t : targets_) t->on_unpack(e);
}
void TeeObserver::on_wait(const WaitEvent& e) {
  for (auto& t : targets_) t->on_wait(e);
}
void TeeObserver::on_stash(const StashEvent& e) {
  for (auto& t : targets_) t->on_stash(e);
}
void TeeObserver::on_release(const ReleaseEvent& e) {
  for (auto& t : targets_) t->on_release(e);
}
void TeeObserver::on_recompute(const RecomputeEvent& e) {
  for (auto& t : targets_) t->on_recompute(e);
}
void TeeObserver::on_span_begin(Span span) {
  size_t begun = 0;
  try {
    for (; begun < targets_.size(); ++begun) targets_[begun]->on_span_begin(span);
  } catch (...) {
    // The engine ends no span whose begin threw: end those that began here, or their ranges stay
    // open.
    while (begun > 0) targets_[--begun]->on_span_end(span);
    throw;
  }
}
void TeeObserver::on_span_end(Span span) {
  for (auto it = targets_.rbegin(); it != targets_.rend(); ++it) (*it)->on_span_end(span);
}

OffloadOptions to_options(const EngineConfig& config, const OffloadOptions& base) {
  OffloadOptions o = base;
  o.min_offload_size = config.min_offload_size;
  o.max_fwd_stash_size = config.max_fwd_stash_size;
  o.max_fwd_stash_bytes = config.max_fwd_stash_bytes;
  o.prefetch = config.prefetch;
  o.use_streams = config.use_streams;
  o.use_pin_memory = config.use_pin_memory;
  o.verify = config.verify;
  o.semantics = parse_semantics(config.semantics);
  o.offload = parse_offload_set(config.offload_set);
  o.tier = parse_tier(config.tier);
  return o;
}

RunOutcome run_measured(WorkloadInstance& workload, const RunSpec& spec, Store& store) {
  RunOutcome out;
  RunRecord& rec = out.record;
  rec.status = RunStatus::Running;
  rec.label = spec.label;
  rec.env = spec.env;
  rec.workload = spec.workload;
  rec.config = spec.config;
  rec.started_unix_ns = unix_now_ns();
  rec.id = store.begin_run(rec);

  std::vector<double> step_ms;
  try {
    OffloadOptions options = to_options(spec.config, spec.base);
    // Layer offloading without activation offloading still needs an offloader's hooks: they are
    // what sees autograd save the frozen weights and keeps references to the layer offloader's
    // copies instead (layer_offload.hpp); without them every block's weights stay on the device
    // until backward. That offloader moves no activation.
    const bool layers = spec.config.layer_offload != "off";
    const bool weights_only = layers && !spec.config.offload;
    if (weights_only) options.min_offload_size = std::numeric_limits<int64_t>::max();
    // Every run sets them: a sweep's points share one workload.
    workload.set_checkpoint(parse_checkpoint_policy(spec.config.checkpoint));
    workload.set_layer_offload(parse_layer_offload(spec.config.layer_offload));
    // The workload marks its phases and blocks as NVTX ranges for Nsight Systems.
    workload.set_marks(nvtx_step_marks());
    auto offloader = workload.make_offloader(options);
    const bool host_sim = offloader->backend() == BackendKind::HostSim;
    // Each run starts from an empty allocator cache, as in a fresh process: what an earlier run of
    // the same process left cached would otherwise count in this one's reserved memory (and make
    // it depend on which points a sweep ran before it).
    if (host_sim) host_sim::empty_cache();
    auto recorder = std::make_shared<Recorder>(host_sim);
    // Device memory along the step, at each stash change (the offloader outlives its events).
    recorder->set_device_probe([off = offloader.get()] { return off->device_memory().allocated; });
    MemoryCurve curve;
    const ListenerScope listening(host_sim ? &curve : nullptr);
    auto nvtx = std::make_shared<NvtxObserver>();
    if (spec.config.offload || layers) {
      offloader->set_observer(
          std::make_shared<TeeObserver>(std::vector<std::shared_ptr<Observer>>{recorder, nvtx}));
    }
    ActivationOffloader* active = spec.config.offload || layers ? offloader.get() : nullptr;

    // Device activity: CUPTI on cuda unless told otherwise; host timestamps on host-sim.
    std::unique_ptr<ActivityCollector> collector;
    if (host_sim) {
      const DeviceModel* dm = host_sim::device_model();
      collector = make_null_collector(
          dm != nullptr
              ? "host-sim: time modelled for " + dm->title + " (device model " + dm->name + ")"
              : std::string("host-sim: copies timed by the copy thread"));
    } else if (spec.collector == Collector::NvtxOnly) {
      collector = make_null_collector("nvtx-only: device activity left to Nsight");
    } else {
      collector = make_cupti_collector();
    }
    // Started with the first measured step, so warm-up activity stays out of the timeline.
    const auto start_collector = [&] {
      collector->start();
      if (!collector->active() && spec.collector == Collector::Cupti) {
        throw std::runtime_error("CUPTI unavailable: " + collector->status());
      }
      out.collector_status = collector->status();
    };

    // Warm-up until stable: a first measured step much slower than the others is warm-up that the
    // requested --warmup did not cover (allocator growth, caches, autotuning); it is dropped and
    // one more step is measured, at most kMaxExtraWarmup times. Needs 3 steps to judge; a device
    // model times every step alike, so it never applies there.
    const bool modelled = host_sim && host_sim::device_model() != nullptr;
    const bool settle = !modelled && spec.workload.steps >= 3;
    int64_t total = spec.workload.warmup + spec.workload.steps;
    for (int64_t i = 0; i < total; ++i) {
      const bool measured = i >= spec.workload.warmup;
      workload.synchronize();
      offloader->synchronize();
      if (i <= spec.workload.warmup) recorder->take();  // warm-up events are not kept
      if (i == spec.workload.warmup) start_collector();
      const auto stats_before = offloader->stats();
      offloader->reset_peak_device_memory();
      StepPhases phases;
      // The engine's clock (its events use it): steady, or host-sim's device model's.
      const int64_t begin = host_sim::clock_ns();
      recorder->sample_device_bytes(begin, offloader->device_memory().allocated);
      if (host_sim && measured) curve.begin(begin, offloader->device_memory().allocated);
      {
        NvtxRange range(NvtxPhase::Step, measured ? i - spec.workload.warmup : -1);
        workload.step(active, i, phases);
        workload.synchronize();
        offloader->synchronize();
      }
      const int64_t end = host_sim::clock_ns();
      nvtx->sample_device_bytes(offloader->device_memory().allocated);
      if (!measured) continue;
      if (host_sim) recorder->add_device_curve(curve.end(end));
      const auto mem = offloader->device_memory();
      const auto stats_after = offloader->stats();
      recorder->mark(EventKind::Step, begin, end,
                     "step " + std::to_string(i - spec.workload.warmup));
      if (phases.forward_begin > 0) {
        recorder->mark(EventKind::Forward, phases.forward_begin, phases.forward_end);
        recorder->mark(EventKind::Backward, phases.forward_end, phases.backward_end);
      }
      recorder->sample_device_bytes(end, mem.allocated);
      StepRecord s;
      s.run = rec.id;
      s.step = i - spec.workload.warmup;
      s.begin_ns = begin;
      s.end_ns = end;
      s.peak_allocated = mem.peak_allocated;
      s.peak_reserved = mem.peak_reserved;
      s.offloaded_bytes = stats_after.offloaded_bytes - stats_before.offloaded_bytes;
      s.reloaded_bytes = stats_after.reloaded_bytes - stats_before.reloaded_bytes;
      const auto overlap =
          compute_overlap(recorder->events_between(begin, end), Interval{begin, end});
      s.hidden_copy_pct = overlap.hidden_pct;
      s.exposed_copy_ns = overlap.exposed_ns;
      s.loss = phases.loss;
      out.steps.push_back(s);
      step_ms.push_back(static_cast<double>(end - begin) / 1e6);
      if (settle && static_cast<int64_t>(step_ms.size()) == spec.workload.steps &&
          out.warmup_added < kMaxExtraWarmup) {
        std::vector<double> rest(step_ms.begin() + 1, step_ms.end());
        std::sort(rest.begin(), rest.end());
        const size_t m = rest.size() / 2;
        const double median = rest.size() % 2 == 1 ? rest[m] : 0.5 * (rest[m - 1] + rest[m]);
        if (step_ms.front() > kUnsettled * median) {
          step_ms.erase(step_ms.begin());
          out.steps.erase(out.steps.begin());
          ++out.warmup_added;
          ++total;
        }
      }
    }
    // Steps are numbered from the first one kept; the timeline keeps what they covered.
    for (size_t k = 0; k < out.steps.size(); ++k) out.steps[k].step = static_cast<int64_t>(k);
    const int64_t kept_from = out.steps.empty() ? 0 : out.steps.front().begin_ns;
    collector->stop();
    out.dropped_records = collector->dropped_records();
    auto snapshot = recorder->take();
    if (out.warmup_added > 0) {
      // The dropped steps lead: what the recorder saw before the first kept step goes, and the
      // step marks are named by the steps kept. (On cuda, CUPTI's records, merged below, keep
      // the GPU's own clock and are left as they are.)
      std::erase_if(snapshot.events,
                    [&](const TimelineEvent& e) { return e.start_ns < kept_from; });
      std::erase_if(snapshot.occupancy,
                    [&](const OccupancySample& o) { return o.time_ns < kept_from; });
      int64_t n = 0;
      for (auto& e : snapshot.events) {
        if (e.kind == EventKind::Step) e.name = "step " + std::to_string(n++);
      }
    }
    if (collector->active() || !host_sim) {
      // CUPTI's kernels and copies replace the engine's observed copy times on cuda.
      auto device_events = collector->take();
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
    for (auto& e : snapshot.events) e.run = rec.id;
    for (auto& o : snapshot.occupancy) o.run = rec.id;
    store.add_steps(out.steps);
    if (spec.record_timeline) {
      store.add_events(snapshot.events);
      store.add_occupancy(snapshot.occupancy);
    }

    RunSummary& sum = rec.summary;
    const auto st = step_stats(step_ms);
    set_step_time(sum, st);
    if (host_sim && host_sim::device_model() != nullptr && !step_ms.empty() &&
        st.min_ms == st.max_ms) {
      // A device model times every step of a workload alike: even one step is exact (a level
      // above 0 with zero width, as several equal steps give).
      sum.step_ms_ci_low = sum.step_ms_ci_high = st.median_ms;
      sum.step_ms_ci_level = 1.0;
    }
    const auto steps = static_cast<int64_t>(std::max<size_t>(out.steps.size(), 1));
    for (const auto& s : out.steps) {
      sum.peak_allocated = std::max(sum.peak_allocated, s.peak_allocated);
      sum.peak_reserved = std::max(sum.peak_reserved, s.peak_reserved);
      sum.offloaded_bytes += s.offloaded_bytes;
      sum.reloaded_bytes += s.reloaded_bytes;
    }
    sum.offloaded_bytes /= steps;
    sum.reloaded_bytes /= steps;
    const auto overlap = compute_overlap(snapshot.events);
    sum.hidden_copy_pct = overlap.hidden_pct;
    sum.hidden_d2h_pct = overlap.d2h_hidden_pct;
    sum.hidden_h2d_pct = overlap.h2d_hidden_pct;
    sum.exposed_copy_ns = overlap.exposed_ns / steps;
    sum.pageable_copies = overlap.pageable_copies / steps;
    // Host copies of a step are all alive at the end of its forward: their peak is the step's
    // bytes.
    for (const auto& s : out.steps) {
      sum.host_bytes_peak = std::max(sum.host_bytes_peak, s.offloaded_bytes);
    }
    sum.pinned_bytes = offloader->resident().host_pool_reserved_bytes;
    sum.final_loss = out.steps.empty() ? 0.0 : out.steps.back().loss;
    offloader->set_observer(nullptr);
    rec.status = RunStatus::Ok;
  } catch (const StoreError&) {
    throw;  // the store itself failed (disk full, ...): the caller must stop, not record a point
  } catch (const c10::OutOfMemoryError& e) {
    rec.status = RunStatus::OutOfMemory;
    rec.error = one_line(e.what_without_backtrace());
  } catch (const c10::Error& e) {
    rec.status = RunStatus::Failed;
    rec.error = one_line(e.what_without_backtrace());
  } catch (const std::exception& e) {
    rec.status = RunStatus::Failed;
    rec.error = one_line(e.what());
  }
  rec.finished_unix_ns = unix_now_ns();
  store.finish_run(rec.id, rec.status, rec.error, rec.summary, rec.finished_unix_ns);
  return out;
}

}  // namespace offtune::profiler
