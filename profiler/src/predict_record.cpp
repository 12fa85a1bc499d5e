// The recording half of the what-if predictor (predict.hpp): steps of a workload under an engine
// that copies every tensor it may offload on the compute stream over a free link, observed through
// the engine's events and spans and host-sim's allocation listener.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/offload_rule.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/predict.hpp"

namespace offtune::profiler {
namespace {

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The engine's spans open on this thread, innermost last. The engine's own work is the time the
// innermost of them (Wait aside) is a pack or an unpack: a recompute inside an unpack is the
// step's compute, and device memory allocated in it is the step's; memory allocated in an unpack
// outside a recompute is the engine's (a reload buffer).
thread_local std::vector<SpanKind> t_spans;

SpanKind innermost() {
  for (auto it = t_spans.rbegin(); it != t_spans.rend(); ++it) {
    if (*it != SpanKind::Wait) return *it;
  }
  return SpanKind::Wait;  // none open
}
bool in_engine() {
  const SpanKind k = innermost();
  return k == SpanKind::Pack || k == SpanKind::Unpack;
}

class TraceRecorder final : public Observer, public host_sim::AllocationListener {
 public:
  // cpu: times are this CPU's wall clock, from which the engine's own work is taken out.
  explicit TraceRecorder(bool cpu) : cpu_(cpu) {}

  void start(int64_t begin_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    begin_ = begin_ns;
    engine_ns_ = 0;
    engine_ends_.clear();
    trace_ = Trace{};
    live_.clear();
    engine_.clear();
    slot_of_.clear();
    recording_ = true;
  }
  Trace stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    recording_ = false;
    return std::move(trace_);
  }
  // Engine time taken out of the step so far.
  int64_t engine_ns() {
    std::lock_guard<std::mutex> lock(mutex_);
    return engine_ns_;
  }
  // A clock_ns() time of the step recorded last, on the step's clock (the engine's time before it
  // taken out on this CPU's clock).
  int64_t step_time(int64_t t) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t engine = 0;
    for (const auto& [wall, total] : engine_ends_) {
      if (wall > t) break;
      engine = total;
    }
    return t - begin_ - engine;
  }

  void on_span_begin(Span span) override { moved(span.kind, /*begin=*/true); }
  void on_span_end(Span span) override { moved(span.kind, /*begin=*/false); }

  void on_copy_completed(const CopyEvent& e) override {
    if (!cpu_ || e.weights || e.issued_ns <= 0 || e.time_ns < e.issued_ns) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recording_) return;
    const int64_t ns = e.time_ns - e.issued_ns;
    auto& rate = e.direction == CopyDirection::DeviceToHost ? d2h_ : h2d_;
    rate.bytes += e.bytes;
    rate.ns += ns;
    span_copy_ns_ += ns;
  }

  void on_allocate(const void* data, int64_t bytes, int64_t time_ns) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recording_) return;
    try {
      if (innermost() == SpanKind::Unpack) {
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
  // Over every step recorded: bytes per ns each way, and the hooks' median bookkeeping.
  double d2h_rate() const { return d2h_.rate(); }
  double h2d_rate() const { return h2d_.rate(); }
  int64_t pack_hook_ns() const { return median_of(pack_hooks_); }
  int64_t unpack_hook_ns() const { return median_of(unpack_hooks_); }

 private:
  struct Rate {
    int64_t bytes = 0, ns = 0;
    double rate() const {
      return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0;
    }
  };

  // A span opened or closed on this thread: the engine's time is taken out on this CPU's clock.
  void moved(SpanKind kind, bool begin) {
    const bool was = in_engine();
    if (begin) {
      t_spans.push_back(kind);
    } else if (!t_spans.empty()) {
      t_spans.pop_back();
    }
    const bool is = in_engine();
    if (!cpu_ || was == is) return;
    const int64_t now = host_sim::clock_ns();
    std::lock_guard<std::mutex> lock(mutex_);
    if (is) {
      engine_begin_ = now;
      span_copy_ns_ = 0;
      if (begin) cut_ = false;  // a new hook (not one going on after a recompute)
      return;
    }
    const int64_t spent = now - engine_begin_;
    if (begin) {
      cut_ = true;  // a recompute inside the hook: the hook's time is in two parts
    } else if (recording_ && !cut_) {
      // The hook's bookkeeping: the span less the copy it ran inline.
      auto& hooks = kind == SpanKind::Pack ? pack_hooks_ : unpack_hooks_;
      hooks.push_back(std::max<int64_t>(spent - span_copy_ns_, 0));
    }
    if (!recording_ || spent <= 0) return;
    engine_ns_ += spent;
    engine_ends_.emplace_back(now, engine_ns_);
  }

  void add(Trace::Kind kind, int64_t time_ns, int64_t index) {
    // Inside a hook the event is at the hook's start: the engine's time is not the step's.
    int64_t t = time_ns;
    if (cpu_ && in_engine()) t = std::min(t, engine_begin_);
    trace_.events.push_back({kind, t - begin_ - engine_ns_, index});
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

  const bool cpu_;
  std::mutex mutex_;
  bool recording_ = false;
  bool failed_ = false;
  int64_t begin_ = 0;
  int64_t engine_ns_ = 0;                                 // engine time so far in this step
  int64_t engine_begin_ = 0;                              // when the open engine span began
  int64_t span_copy_ns_ = 0;                              // copy time inside the open engine span
  bool cut_ = false;                                      // the open hook ran a recompute
  std::vector<std::pair<int64_t, int64_t>> engine_ends_;  // (clock_ns, engine_ns_) at span ends
  Rate d2h_, h2d_;
  std::vector<int64_t> pack_hooks_, unpack_hooks_;
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

bool same_shape(const Trace& a, const Trace& b) {
  if (a.events.size() != b.events.size() || a.blocks.size() != b.blocks.size() ||
      a.slots.size() != b.slots.size()) {
    return false;
  }
  for (size_t i = 0; i < a.events.size(); ++i) {
    if (a.events[i].kind != b.events[i].kind || a.events[i].index != b.events[i].index) {
      return false;
    }
  }
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    if (a.blocks[i].bytes != b.blocks[i].bytes) return false;
  }
  return true;
}

// Several steps as one: where they did the same things in the same order, each gap between two
// events (and the last event to the step's end) is the median of the steps' gaps; otherwise the
// step of median length stands for them.
Trace median_step(std::vector<Trace> steps) {
  std::sort(steps.begin(), steps.end(),
            [](const Trace& a, const Trace& b) { return a.step_ns < b.step_ns; });
  Trace out = steps[steps.size() / 2];
  out.steps = static_cast<int64_t>(steps.size());
  if (!std::all_of(steps.begin(), steps.end(),
                   [&](const Trace& t) { return same_shape(t, out); })) {
    out.steps = 1;
    return out;
  }
  int64_t t = 0;
  std::vector<int64_t> gaps(steps.size());
  for (size_t i = 0; i <= out.events.size(); ++i) {
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto& ev = steps[k].events;
      const int64_t next = i < ev.size() ? ev[i].time_ns : steps[k].step_ns;
      const int64_t prev = i == 0 ? 0 : ev[i - 1].time_ns;
      gaps[k] = std::max<int64_t>(next - prev, 0);
    }
    t += median_of(gaps);
    if (i < out.events.size()) {
      out.events[i].time_ns = t;
    } else {
      out.step_ns = t;
    }
  }
  return out;
}

}  // namespace

bool Trace::replays(const EngineConfig& config) const {
  if (!replayable(config) || !(config.checkpoint == checkpoint)) return false;
  return !config.offload || (config.semantics == semantics && config.offload_set == offload_set);
}

std::string Trace::source() const {
  if (clock == Clock::Model) {
    return "host-sim modelling " + device_model + ", " + std::to_string(steps) + " step recorded";
  }
  std::string s = "this CPU's clock (host-sim), median of " + std::to_string(steps) +
                  " recorded step" + (steps == 1 ? "" : "s");
  const double slow = std::min(d2h_bytes_per_ns > 0 ? d2h_bytes_per_ns : h2d_bytes_per_ns,
                               h2d_bytes_per_ns > 0 ? h2d_bytes_per_ns : d2h_bytes_per_ns);
  if (slow > 0) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f", slow);  // bytes per ns = GB/s
    s += std::string(", copies at >= ") + rate + " GB/s";
  }
  return s;
}

Trace record_trace(WorkloadInstance& workload, const Workload& spec, const OffloadOptions& base,
                   Semantics semantics) {
  EngineConfig like;
  like.semantics = semantics;
  return record_trace(workload, spec, base, like);
}

OffloadOptions recording_options(OffloadOptions o, const EngineConfig& like) {
  o.backend = BackendKind::HostSim;
  o.min_offload_size = 0;
  o.max_fwd_stash_size = 1;
  o.max_fwd_stash_bytes = 0;
  o.prefetch = 0;
  o.use_streams = false;  // copies on the compute stream: no hold, no wait
  o.link = LinkModel{};   // free: the compute clock sees only the ops
  o.semantics = like.semantics;
  o.offload = like.offload_set;
  o.tier = Tier::Host;
  o.debug_copy_delay_ns = 0;
  return o;
}

struct TraceSession::Impl {
  explicit Impl(ActivationOffloader& o)
      : offloader(o),
        cpu(host_sim::device_model() == nullptr),
        recorder(std::make_shared<TraceRecorder>(cpu)),
        guard(recorder.get()) {
    offloader.set_observer(recorder);
  }
  ~Impl() { offloader.set_observer(nullptr); }
  ActivationOffloader& offloader;
  const bool cpu;
  std::shared_ptr<TraceRecorder> recorder;
  ListenerGuard guard;
  std::vector<Trace> steps;
  bool open = false;
  int64_t begin = 0, base_allocated = 0;
};

TraceSession::TraceSession(ActivationOffloader& offloader) {
  if (offloader.backend() != BackendKind::HostSim) {
    throw std::invalid_argument(
        "the what-if predictor records a step on host-sim (with a device model, or on this CPU's "
        "clock); on a GPU, measure the points");
  }
  impl_ = std::make_unique<Impl>(offloader);
}

TraceSession::~TraceSession() = default;

void TraceSession::begin_step() {
  Impl& s = *impl_;
  s.offloader.synchronize();
  s.begin = host_sim::clock_ns();
  s.base_allocated = s.offloader.device_memory().allocated;
  s.recorder->start(s.begin);
  s.open = true;
}

void TraceSession::end_step(const StepPhases* phases) {
  Impl& s = *impl_;
  if (!s.open) throw std::logic_error("TraceSession::end_step without a step begun");
  s.open = false;
  s.offloader.synchronize();
  const int64_t end = host_sim::clock_ns();
  const int64_t engine = s.recorder->engine_ns();
  Trace trace = s.recorder->stop();
  if (s.recorder->failed())
    throw std::runtime_error("recording the step's trace ran out of memory");
  trace.step_ns = end - s.begin - engine;
  trace.base_allocated = s.base_allocated;
  // On this CPU's clock a mark is less the engine's time before it.
  if (phases != nullptr && phases->forward_begin > 0) {
    insert_mark(trace, Trace::Kind::ForwardBegin, s.recorder->step_time(phases->forward_begin));
    insert_mark(trace, Trace::Kind::ForwardEnd, s.recorder->step_time(phases->forward_end));
    insert_mark(trace, Trace::Kind::BackwardEnd, s.recorder->step_time(phases->backward_end));
  } else {  // one phase: the step
    insert_mark(trace, Trace::Kind::ForwardBegin, 0);
    insert_mark(trace, Trace::Kind::ForwardEnd, trace.step_ns);
    insert_mark(trace, Trace::Kind::BackwardEnd, trace.step_ns);
  }
  s.steps.push_back(std::move(trace));
}

int64_t TraceSession::steps() const { return static_cast<int64_t>(impl_->steps.size()); }

Trace TraceSession::finish(const CheckpointPolicy& checkpoint) {
  Impl& s = *impl_;
  if (s.steps.empty()) throw std::logic_error("TraceSession::finish with no step recorded");
  Trace trace = median_step(std::move(s.steps));
  s.steps.clear();
  const OffloadOptions& o = s.offloader.options();
  trace.semantics = o.semantics;
  trace.checkpoint = checkpoint;
  trace.offload_set = o.offload;
  trace.clock = s.cpu ? Trace::Clock::Cpu : Trace::Clock::Model;
  if (const DeviceModel* model = host_sim::device_model()) trace.device_model = model->name;
  if (s.cpu) {
    trace.d2h_bytes_per_ns = s.recorder->d2h_rate();
    trace.h2d_bytes_per_ns = s.recorder->h2d_rate();
    trace.pack_hook_ns = s.recorder->pack_hook_ns();
    trace.unpack_hook_ns = s.recorder->unpack_hook_ns();
  }
  return trace;
}

Trace record_trace(WorkloadInstance& workload, const Workload& spec, const OffloadOptions& base,
                   const EngineConfig& like) {
  if (base.backend == BackendKind::Cuda) {
    throw std::invalid_argument(
        "the what-if predictor records a step on host-sim (with --device-model, or on this CPU's "
        "clock); on a GPU, measure the points");
  }
  if (!replayable(like)) {
    throw std::invalid_argument(
        "the what-if predictor replays the host tier without layer offloading: points with "
        "--tier disk or --layer-offload are measured, not predicted");
  }
  const auto wall_begin = std::chrono::steady_clock::now();
  workload.set_checkpoint(like.checkpoint);
  struct Restore {
    WorkloadInstance& w;
    ~Restore() { w.set_checkpoint(CheckpointPolicy::none()); }
  } restore{workload};
  auto offloader = workload.make_offloader(recording_options(base, like));
  // As a measured run starts (runner.cpp): a fresh process's allocator and no cuBLAS workspaces.
  host_sim::clear_blas_workspaces();
  host_sim::empty_cache();
  TraceSession session(*offloader);
  for (int64_t i = 0; i < spec.warmup; ++i) {
    workload.synchronize();
    StepPhases ignored;
    workload.step(offloader.get(), i, ignored);
  }
  const int64_t count = host_sim::device_model() == nullptr ? kCpuSteps : 1;
  for (int64_t k = 0; k < count; ++k) {
    workload.synchronize();
    session.begin_step();
    StepPhases phases;
    workload.step(offloader.get(), spec.warmup + k, phases);
    workload.synchronize();
    session.end_step(&phases);
  }
  Trace trace = session.finish(like.checkpoint);
  trace.record_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_begin)
          .count();
  return trace;
}

GridPrediction predict_grid(const std::function<Trace(const EngineConfig& like)>& record,
                            const std::vector<EngineConfig>& configs,
                            const std::vector<LinkModel>& links) {
  if (links.size() != configs.size()) {
    throw std::invalid_argument("predict_grid: one link per point");
  }
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  for (const auto& c : configs) {
    if (!replayable(c)) {
      throw std::invalid_argument(
          "the what-if predictor replays the host tier without layer offloading: points with "
          "--tier disk or --layer-offload are measured, not predicted");
    }
  }
  GridPrediction out;
  std::vector<Trace> traces;
  const auto trace_for = [&](const EngineConfig& c) -> const Trace* {
    for (const Trace& t : traces) {
      if (t.replays(c)) return &t;
    }
    return nullptr;
  };
  auto start = Clock::now();
  // Offloading points first: a baseline replays from any trace of its checkpoint policy.
  for (const bool offload : {true, false}) {
    for (const auto& c : configs) {
      if (c.offload == offload && trace_for(c) == nullptr) traces.push_back(record(c));
    }
  }
  out.traces = traces.size();
  if (!traces.empty()) out.source = traces.front().source();
  out.record_ms = ms_since(start);
  start = Clock::now();
  for (size_t i = 0; i < configs.size(); ++i) {
    out.points.push_back(predict(*trace_for(configs[i]), configs[i], links[i]));
  }
  out.predict_ms = ms_since(start);
  return out;
}

GridPrediction predict_grid(WorkloadInstance& workload, const Workload& spec,
                            const OffloadOptions& base, const std::vector<EngineConfig>& configs,
                            const std::vector<LinkModel>& links) {
  return predict_grid(
      [&](const EngineConfig& like) { return record_trace(workload, spec, base, like); }, configs,
      links);
}

}  // namespace offtune::profiler
