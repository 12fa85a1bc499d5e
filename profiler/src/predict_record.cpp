// The recording half of the what-if predictor (predict.hpp): one step of a workload under an
// engine that copies every tensor it may offload on the compute stream over a free link, observed
// through the engine's events and host-sim's allocation listener.
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "offtune/host_sim.hpp"
#include "offtune/offload_rule.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/predict.hpp"

namespace offtune::profiler {
namespace {

// Unpack spans open on this thread: device memory allocated inside one is the engine's (a reload
// buffer), not the step's.
thread_local int t_in_unpack = 0;

class TraceRecorder final : public Observer, public host_sim::AllocationListener {
 public:
  void start(int64_t begin_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    begin_ = begin_ns;
    recording_ = true;
  }
  Trace stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    recording_ = false;
    return std::move(trace_);
  }

  void on_span_begin(Span span) override {
    if (span.kind == SpanKind::Unpack) ++t_in_unpack;
  }
  void on_span_end(Span span) override {
    if (span.kind == SpanKind::Unpack) --t_in_unpack;
  }

  void on_allocate(const void* data, int64_t bytes, int64_t time_ns) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recording_) return;
    try {
      if (t_in_unpack > 0) {
        engine_.insert(data);
        return;
      }
      const auto index = static_cast<int64_t>(trace_.blocks.size());
      trace_.blocks.push_back({bytes, false});
      live_[data] = index;
      add(Trace::Kind::Alloc, time_ns, index);
    } catch (...) {
      failed_ = true;  // out of host memory: the trace is incomplete (checked when it is taken)
    }
  }
  void on_free(const void* data, int64_t bytes, int64_t time_ns) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recording_) return;
    try {
      if (engine_.erase(data) > 0) return;
      const int64_t index = block_of(data, bytes);
      live_.erase(data);
      add(Trace::Kind::Free, time_ns, index);
    } catch (...) {
      failed_ = true;
    }
  }

  void on_pack(const PackEvent& e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recording_) return;
    Trace::Slot s;
    s.id = e.id.value;
    s.reason = e.reason;
    if (!kept_by_kind(e.reason)) {  // another min_offload_size may offload it
      s.reason = KeepReason::None;
      s.block = block_of(reinterpret_cast<const void*>(e.storage), e.storage_bytes);
      s.storage_bytes = e.storage_bytes;
      s.span_lo = e.span_lo;
      s.bytes = e.bytes;
      s.weight = e.weight;
      s.item_bytes = std::max<int64_t>(e.item_bytes, 1);
      s.version = e.version;
      s.generation = e.generation;
    }
    const auto index = static_cast<int64_t>(trace_.slots.size());
    trace_.slots.push_back(s);
    slot_of_[s.id] = index;
    add(Trace::Kind::Pack, e.time_ns, index);
  }
  void on_unpack(const UnpackEvent& e) override {
    slot_event(Trace::Kind::Unpack, e.id, e.time_ns);
  }
  void on_release(const ReleaseEvent& e) override {
    slot_event(Trace::Kind::Release, e.id, e.time_ns);
  }

  bool failed() const { return failed_; }

 private:
  void add(Trace::Kind kind, int64_t time_ns, int64_t index) {
    trace_.events.push_back({kind, time_ns - begin_, index});
  }
  // The block at `data`, or one allocated before the recording began.
  int64_t block_of(const void* data, int64_t bytes) {
    if (auto it = live_.find(data); it != live_.end()) return it->second;
    const auto index = static_cast<int64_t>(trace_.blocks.size());
    trace_.blocks.push_back({bytes, true});
    live_[data] = index;
    return index;
  }
  void slot_event(Trace::Kind kind, TensorId id, int64_t time_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recording_) return;
    // Slots packed before the recording began (an earlier step's) are not part of it.
    if (auto it = slot_of_.find(id.value); it != slot_of_.end()) add(kind, time_ns, it->second);
  }

  std::mutex mutex_;
  bool recording_ = false;
  bool failed_ = false;
  int64_t begin_ = 0;
  Trace trace_;
  std::unordered_map<const void*, int64_t> live_;
  std::unordered_set<const void*> engine_;
  std::unordered_map<int64_t, int64_t> slot_of_;
};

// Installs the listener for its lifetime.
class ListenerGuard {
 public:
  explicit ListenerGuard(host_sim::AllocationListener* l) { host_sim::set_allocation_listener(l); }
  ~ListenerGuard() { host_sim::set_allocation_listener(nullptr); }
  ListenerGuard(const ListenerGuard&) = delete;
  ListenerGuard& operator=(const ListenerGuard&) = delete;
};

// Puts a phase mark after the events at or before its time.
void insert_mark(Trace& trace, Trace::Kind kind, int64_t time_ns) {
  auto it = std::upper_bound(trace.events.begin(), trace.events.end(), time_ns,
                             [](int64_t t, const Trace::Event& e) { return t < e.time_ns; });
  trace.events.insert(it, {kind, time_ns, -1});
}

}  // namespace

Trace record_trace(WorkloadInstance& workload, const Workload& spec, const OffloadOptions& base,
                   Semantics semantics) {
  const DeviceModel* model = host_sim::device_model();
  if (model == nullptr || base.backend == BackendKind::Cuda) {
    throw std::invalid_argument(
        "the what-if predictor replays a step timed by a device model: it needs backend host-sim "
        "with --device-model (on a GPU, or on this CPU's clock, op times are not known ahead)");
  }
  const auto wall_begin = std::chrono::steady_clock::now();
  OffloadOptions o = base;
  o.backend = BackendKind::HostSim;
  o.min_offload_size = 0;
  o.max_fwd_stash_size = 1;
  o.max_fwd_stash_bytes = 0;
  o.prefetch = 0;
  o.use_streams = false;  // copies on the compute stream: no hold, no wait
  o.link = LinkModel{};   // free: the compute clock sees only the ops
  o.semantics = semantics;
  o.debug_copy_delay_ns = 0;
  workload.set_checkpoint(CheckpointPolicy::none());
  auto offloader = workload.make_offloader(o);
  if (offloader->backend() != BackendKind::HostSim) {
    throw std::invalid_argument("the what-if predictor needs backend host-sim");
  }
  // As a measured run starts (runner.cpp): a fresh process's allocator and no cuBLAS workspaces.
  host_sim::clear_blas_workspaces();
  host_sim::empty_cache();
  auto recorder = std::make_shared<TraceRecorder>();
  offloader->set_observer(recorder);
  Trace trace;
  StepPhases phases;
  int64_t begin = 0, end = 0, base_allocated = 0;
  {
    ListenerGuard guard(recorder.get());
    for (int64_t i = 0; i < spec.warmup; ++i) {
      workload.synchronize();
      offloader->synchronize();
      StepPhases ignored;
      workload.step(offloader.get(), i, ignored);
    }
    workload.synchronize();
    offloader->synchronize();
    begin = host_sim::clock_ns();
    base_allocated = offloader->device_memory().allocated;
    recorder->start(begin);
    workload.step(offloader.get(), spec.warmup, phases);
    workload.synchronize();
    offloader->synchronize();
    end = host_sim::clock_ns();
    trace = recorder->stop();
  }
  offloader->set_observer(nullptr);
  if (recorder->failed()) throw std::runtime_error("recording the step's trace ran out of memory");
  trace.step_ns = end - begin;
  trace.base_allocated = base_allocated;
  trace.semantics = semantics;
  trace.device_model = model->name;
  if (phases.forward_begin > 0) {
    insert_mark(trace, Trace::Kind::ForwardBegin, phases.forward_begin - begin);
    insert_mark(trace, Trace::Kind::ForwardEnd, phases.forward_end - begin);
    insert_mark(trace, Trace::Kind::BackwardEnd, phases.backward_end - begin);
  }
  trace.record_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_begin)
          .count();
  return trace;
}

GridPrediction predict_grid(WorkloadInstance& workload, const Workload& spec,
                            const OffloadOptions& base, const std::vector<EngineConfig>& configs,
                            const std::vector<LinkModel>& links) {
  if (links.size() != configs.size()) {
    throw std::invalid_argument("predict_grid: one link per point");
  }
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  for (const auto& c : configs) {
    if (!plain_offloading(c)) {
      throw std::invalid_argument(
          "the what-if predictor replays plain offloading: points with --checkpoint, --offload "
          "boundaries, --tier other than host or --layer-offload are measured, not predicted");
    }
  }
  GridPrediction out;
  std::map<Semantics, Trace> traces;
  auto start = Clock::now();
  for (const auto& c : configs) {
    if (c.offload && !traces.count(c.semantics)) {
      traces.emplace(c.semantics, record_trace(workload, spec, base, c.semantics));
    }
  }
  if (traces.empty()) {  // the baseline alone: any semantics records the same step
    traces.emplace(Semantics::Offtune, record_trace(workload, spec, base, Semantics::Offtune));
  }
  out.traces = traces.size();
  out.record_ms = ms_since(start);
  start = Clock::now();
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto it = configs[i].offload ? traces.find(configs[i].semantics) : traces.begin();
    out.points.push_back(predict(it->second, configs[i], links[i]));
  }
  out.predict_ms = ms_since(start);
  return out;
}

}  // namespace offtune::profiler
