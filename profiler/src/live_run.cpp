// A run recorded from a loop that steps itself (live_run.hpp): the runner's measurement, one call
// at a time. What a step's figures are and how the timeline and summary are made is shared with
// the runner (run_parts.hpp); this file only decides when each piece runs.
#include "offtune/profiler/live_run.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "memory_history.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/profiler/nvtx.hpp"
#include "offtune/profiler/recorder.hpp"
#include "run_parts.hpp"

namespace offtune::profiler {

namespace {

// A recorded sweep's identity: the name and what makes its points comparable (the workload and
// where it ran). Written field by field, as sweep_key is: it is compared byte for byte.
std::string recorded_sweep_key(const LiveRunSpec& spec) {
  nlohmann::json key{{"recorded", spec.sweep},       {"model", spec.workload.model},
                     {"batch", spec.workload.batch}, {"seq", spec.workload.seq},
                     {"dtype", spec.workload.dtype}, {"backend", spec.env.backend}};
  if (spec.workload.lora_rank != 0) key["lora_rank"] = spec.workload.lora_rank;
  if (spec.device_model) key["device_model"] = {{"name", spec.device_model->name}};
  return key.dump();
}

// Host timestamps bracket the step's work: the GPU and the copies done.
void settle(BackendKind backend, const std::vector<ActivationOffloader*>& offloaders) {
  if (backend == BackendKind::Cuda) torch::cuda::synchronize();
  for (auto* o : offloaders) o->synchronize();
}

}  // namespace

struct LiveRun::State {
  BackendKind backend = BackendKind::HostSim;
  bool host_sim = true;
  bool modelled = false;
  const DeviceModel* previous_model = nullptr;
  std::shared_ptr<Recorder> recorder;
  std::shared_ptr<NvtxObserver> nvtx;
  std::shared_ptr<Observer> observer;  // what attach() sets: the recorder and NVTX
  std::unique_ptr<ActivityCollector> collector;
  std::shared_ptr<detail::MemoryHistory> history;  // with spec.memory_history
  detail::MemoryCurve curve;
  std::optional<detail::ListenerScope> listening;
  std::optional<detail::HostPeak> host_peak;
  // The open step.
  bool open = false;
  bool measured = false;
  int64_t index = -1;  // among measured steps
  int64_t begin_ns = 0;
  bool phases_marked = false;
  int64_t phase_begin[2] = {-1, -1};  // by StepPhase, while one is open
  std::vector<std::pair<ActivationOffloader*, OffloadStats>> before;
};

LiveRun::LiveRun(std::shared_ptr<Store> store, LiveRunSpec spec)
    : store_(std::move(store)), spec_(std::move(spec)), state_(std::make_unique<State>()) {
  State& st = *state_;
  try {
    st.backend = parse_backend(spec_.env.backend);
  } catch (const std::exception&) {
    throw std::invalid_argument("live run: backend '" + spec_.env.backend +
                                "' is not cuda or host-sim");
  }
  if (st.backend == BackendKind::Auto) {
    throw std::invalid_argument("live run: resolve the backend (cuda or host-sim) first");
  }
  st.host_sim = st.backend == BackendKind::HostSim;
  if (spec_.device_model && !st.host_sim) {
    throw std::invalid_argument("a device model applies to host-sim only (cuda measures the GPU)");
  }
  if (spec_.memory_history && !st.host_sim) {
    throw std::invalid_argument(
        "memory_history records host-sim's modelled allocator; on cuda record torch's own "
        "(torch.cuda.memory._record_memory_history())");
  }
  if (st.host_sim) {
    host_sim::install();
    st.previous_model = host_sim::device_model();
    if (spec_.device_model) host_sim::set_device_model(&*spec_.device_model);
    // As the runner: reserved memory does not depend on what the process cached before.
    host_sim::clear_blas_workspaces();
    host_sim::empty_cache();
  }
  st.modelled = st.host_sim && host_sim::device_model() != nullptr;
  st.host_peak.emplace(!st.host_sim);
  st.recorder = std::make_shared<Recorder>(st.host_sim);
  st.recorder->set_device_probe([b = st.backend] {
    const DeviceMemory m = device_memory(b);
    return MemorySample{m.allocated, m.reserved};
  });
  st.nvtx = std::make_shared<NvtxObserver>();
  std::vector<std::shared_ptr<Observer>> observers{st.recorder, st.nvtx};
  if (spec_.memory_history) {
    st.history = std::make_shared<detail::MemoryHistory>();
    observers.push_back(st.history);
  }
  st.observer = std::make_shared<TeeObserver>(std::move(observers));
  st.collector = detail::make_run_collector(st.host_sim, spec_.collector);
  if (st.host_sim) st.listening.emplace(&st.curve);

  record_.status = RunStatus::Running;
  record_.label = spec_.label;
  record_.env = spec_.env;
  record_.workload = spec_.workload;
  record_.config = spec_.config;
  record_.started_unix_ns = detail::unix_now_ns();
  record_.rank = spec_.rank;
  record_.world_size = spec_.world_size;
  record_.job_run = spec_.job_run;
  try {
    if (spec_.continue_run) {
      continue_begun_run();
    } else {
      record_.id = store_->begin_run(record_);
    }
  } catch (...) {
    st.listening.reset();
    if (st.host_sim && spec_.device_model) host_sim::set_device_model(st.previous_model);
    throw;
  }
  if (!spec_.begin_first_step) return;
  try {
    begin_step();
  } catch (const std::exception& e) {
    // CUPTI required and unavailable, a device that fails: the run is recorded as failed and the
    // process-wide settings are put back (the destructor does not run for a throwing constructor).
    close(RunStatus::Failed, e.what());
    throw;
  }
}

void LiveRun::continue_begun_run() {
  const RunId id = *spec_.continue_run;
  const std::optional<RunRecord> begun = store_->run(id);
  const std::string where = store_->path().empty() ? "the store" : store_->path();
  if (!begun) {
    throw std::invalid_argument("live run: run " + std::to_string(id.value) +
                                " to continue is not in " + where +
                                " (was the store given the one the run was begun in?)");
  }
  if (begun->status != RunStatus::Running) {
    throw std::invalid_argument("live run: run " + std::to_string(id.value) + " of " + where +
                                " is " + to_string(begun->status) +
                                ", not running: only a run still running can be continued");
  }
  store_->describe_run(id, {.workload = record_.workload,
                            .env = record_.env,
                            .rank = record_.rank,
                            .world_size = record_.world_size,
                            .job_run = record_.job_run});
  // What the process that began it decided stays: the label, the config (the point's), the start.
  record_.id = id;
  record_.label = begun->label;
  record_.config = begun->config;
  record_.started_unix_ns = begun->started_unix_ns;
}

bool LiveRun::step_open() const { return !finished_ && state_->open; }

LiveRun::~LiveRun() {
  if (finished_) return;
  try {
    close(RunStatus::Interrupted, "the recording ended without finish()");
  } catch (...) {  // the store failed: the run reads as interrupted once this process ends
  }
}

void LiveRun::require_open(const char* call) const {
  if (finished_) throw std::logic_error(std::string("live run: ") + call + " after the run ended");
}

DeviceMemory LiveRun::memory() const { return device_memory(state_->backend); }

void LiveRun::attach(ActivationOffloader& offloader) {
  require_open("attach");
  if (std::find(offloaders_.begin(), offloaders_.end(), &offloader) != offloaders_.end()) return;
  offloader.set_observer(state_->observer);
  offloaders_.push_back(&offloader);
  state_->before.emplace_back(&offloader, offloader.stats());
}

void LiveRun::detach(ActivationOffloader& offloader) {
  require_open("detach");
  const auto it = std::find(offloaders_.begin(), offloaders_.end(), &offloader);
  if (it == offloaders_.end()) return;
  offloader.synchronize();
  offloader.set_observer(nullptr);
  offloaders_.erase(it);
  std::erase_if(state_->before, [&](const auto& b) { return b.first == &offloader; });
}

void LiveRun::begin_step() {
  require_open("begin_step");
  State& st = *state_;
  if (st.open) throw std::logic_error("live run: begin_step while a step is open (end_step first)");
  settle(st.backend, offloaders_);
  const int64_t warmup = spec_.workload.warmup;
  if (begun_ <= warmup) st.recorder->take();  // warm-up events are not kept
  if (begun_ == warmup) {
    collector_status_ = detail::start_run_collector(*st.collector, spec_.collector);
    if (st.history) st.history->start();
  }
  for (auto& [o, stats] : st.before) stats = o->stats();
  reset_peak_device_memory(st.backend);
  st.measured = begun_ >= warmup;
  st.index = st.measured ? begun_ - warmup : -1;
  st.phases_marked = false;
  st.phase_begin[0] = st.phase_begin[1] = -1;
  // The engine's clock (its events use it): steady, or host-sim's device model's.
  st.begin_ns = host_sim::clock_ns();
  const DeviceMemory at_begin = memory();
  const int64_t allocated = at_begin.allocated;
  st.recorder->sample_memory(
      st.begin_ns, detail::memory_sample(at_begin, {offloaders_.begin(), offloaders_.end()}));
  if (st.host_sim && st.measured) st.curve.begin(st.begin_ns, allocated);
  nvtx_phase_push(NvtxPhase::Step, st.index);
  st.open = true;
  ++begun_;
}

void LiveRun::end_step(double loss) {
  require_open("end_step");
  State& st = *state_;
  if (!st.open) throw std::logic_error("live run: end_step with no step open (begin_step first)");
  for (int p = 0; p < 2; ++p) {
    if (st.phase_begin[p] >= 0) end_phase(static_cast<StepPhase>(p));
  }
  settle(st.backend, offloaders_);
  const int64_t end = host_sim::clock_ns();
  nvtx_phase_pop();
  st.open = false;
  const auto mem = memory();
  st.nvtx->sample_device_bytes(mem.allocated);
  if (!st.measured) return;
  if (st.host_sim) st.recorder->add_device_curve(st.curve.end(end));
  int64_t offloaded = 0, reloaded = 0;
  for (const auto& [o, before] : st.before) {
    const auto after = o->stats();
    offloaded += after.offloaded_bytes - before.offloaded_bytes;
    reloaded += after.reloaded_bytes - before.reloaded_bytes;
  }
  st.recorder->mark(EventKind::Step, st.begin_ns, end, "step " + std::to_string(st.index));
  if (!st.phases_marked) st.recorder->mark_busy(st.begin_ns, end);
  st.recorder->sample_memory(end,
                             detail::memory_sample(mem, {offloaders_.begin(), offloaders_.end()}));
  steps_.push_back(detail::step_record(*st.recorder, record_.id, st.index, st.begin_ns, end, mem,
                                       offloaded, reloaded, loss));  // NaN: not given
  step_ms_.push_back(static_cast<double>(end - st.begin_ns) / 1e6);
}

void LiveRun::step(double loss) {
  require_open("step");
  if (state_->open) end_step(loss);
  begin_step();
}

void LiveRun::begin_phase(StepPhase phase) {
  require_open("begin_phase");
  State& st = *state_;
  const int p = static_cast<int>(phase);
  if (!st.open) throw std::logic_error("live run: begin_phase outside a step (begin_step first)");
  if (st.phase_begin[p] >= 0) {
    throw std::logic_error(std::string("live run: begin_phase(") +
                           (phase == StepPhase::Forward ? "forward" : "backward") +
                           ") while that phase is open");
  }
  st.phases_marked = true;
  st.phase_begin[p] = host_sim::clock_ns();
  nvtx_phase_push(phase == StepPhase::Forward ? NvtxPhase::Forward : NvtxPhase::Backward);
}

void LiveRun::end_phase(StepPhase phase) {
  require_open("end_phase");
  State& st = *state_;
  const int p = static_cast<int>(phase);
  if (!st.open || st.phase_begin[p] < 0) {
    throw std::logic_error(std::string("live run: end_phase(") +
                           (phase == StepPhase::Forward ? "forward" : "backward") +
                           ") with that phase not begun");
  }
  const int64_t end = host_sim::clock_ns();
  nvtx_phase_pop();
  if (st.measured) {
    st.recorder->mark(phase == StepPhase::Forward ? EventKind::Forward : EventKind::Backward,
                      st.phase_begin[p], end);
  }
  st.phase_begin[p] = -1;
}

const RunRecord& LiveRun::finish() {
  require_open("finish");
  return close(RunStatus::Ok, {});
}

const RunRecord& LiveRun::fail(RunStatus status, const std::string& error) {
  require_open("fail");
  if (status == RunStatus::Ok || status == RunStatus::Running) {
    throw std::invalid_argument("live run: fail() takes failed, oom or interrupted");
  }
  return close(status, error);
}

const RunRecord& LiveRun::close(RunStatus status, const std::string& error) {
  State& st = *state_;
  finished_ = true;
  // The step still open is the loop's tail (or the step that failed): not measured.
  if (st.open) {
    for (int p = 0; p < 2; ++p) {
      if (st.phase_begin[p] >= 0) nvtx_phase_pop();
    }
    nvtx_phase_pop();
    if (st.host_sim && st.measured) st.curve.end(host_sim::clock_ns());
    st.open = false;
  }
  std::string message = detail::one_line(error);
  try {
    settle(st.backend, offloaders_);
  } catch (const std::exception& e) {
    if (status == RunStatus::Ok) {
      status = RunStatus::Failed;
      message = detail::one_line(e.what());
    }
  }
  // Warm-up until stable, as the runner does it (run_parts.hpp), on the steps the loop ran.
  if (!st.modelled) {
    while (warmup_added_ < kMaxExtraWarmup && detail::first_step_unsettled(step_ms_)) {
      step_ms_.erase(step_ms_.begin());
      steps_.erase(steps_.begin());
      ++warmup_added_;
    }
  }
  for (size_t k = 0; k < steps_.size(); ++k) steps_[k].step = static_cast<int64_t>(k);
  if (status == RunStatus::Ok && steps_.empty()) {
    status = RunStatus::Failed;
    message = "no step was measured: " + std::to_string(begun_ > 0 ? begun_ - 1 : 0) +
              " step(s) ended, and the first " + std::to_string(spec_.workload.warmup) +
              " are warm-up (mark each step's end, or lower the warm-up)";
  }
  const int64_t kept_from = steps_.empty() ? 0 : steps_.front().begin_ns;
  auto timeline = detail::finish_timeline(*st.recorder, *st.collector, st.host_sim,
                                          warmup_added_ > 0, kept_from, record_.id);
  int64_t pinned = 0;
  for (auto* o : offloaders_) {
    pinned += o->resident().host_pool_reserved_bytes;
    o->set_observer(nullptr);
  }
  offloaders_.clear();
  st.listening.reset();
  const detail::RunHoldings held{pinned, memory().outside_allocator,
                                 st.host_peak ? st.host_peak->peak() : 0};
  if (st.host_sim && spec_.device_model) host_sim::set_device_model(st.previous_model);

  record_.status = status;
  record_.error = message;
  record_.summary = detail::summarize(steps_, step_ms_, timeline, st.modelled, held);
  record_.finished_unix_ns = detail::unix_now_ns();
  // Rows first, the final status last: a run that reads ok has every row.
  store_->add_steps(steps_);
  if (st.history) {
    auto history = st.history->finish(kept_from, steps_);
    st.history.reset();
    if (!history.events.empty()) {
      store_->add_memory_history(record_.id, history.events, history.blocks);
    }
  }
  if (spec_.record_timeline) {
    store_->add_events(timeline.events);
    store_->add_occupancy(timeline.occupancy);
  }
  store_->finish_run(record_.id, record_.status, record_.error, record_.summary,
                     record_.finished_unix_ns);
  if (!spec_.sweep.empty() && status != RunStatus::Interrupted) {
    SweepRecord sweep;
    sweep.name = spec_.sweep;
    sweep.key = recorded_sweep_key(spec_);
    sweep.workload = spec_.workload;
    sweep.grid = R"({"recorded":true})";
    sweep.created_unix_ns = record_.started_unix_ns;
    const SweepId id = store_->create_sweep(sweep);
    PointRecord point;
    point.sweep = id;
    int64_t next = 0;  // after the points held (several processes may record under one name)
    for (const auto& p : store_->points(id)) next = std::max(next, p.index + 1);
    point.index = next;
    point.config = record_.config;
    point.status = detail::point_status(status);
    point.error = message;
    point.run = record_.id;
    point.summary = record_.summary;
    store_->put_point(point);
  }
  return record_;
}

}  // namespace offtune::profiler
