#include "offtune/profiler/runner.hpp"

#include <c10/util/Exception.h>

#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "memory_history.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/profiler/nvtx.hpp"
#include "offtune/profiler/recorder.hpp"
#include "run_parts.hpp"

namespace offtune::profiler {

using detail::ListenerScope;
using detail::MemoryCurve;
using detail::one_line;
using detail::unix_now_ns;

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
  std::shared_ptr<detail::MemoryHistory> history;
  // The history to the end of the last step kept, or to an out-of-memory error.
  const auto keep_history = [&](int64_t from_ns) {
    if (!history) return;
    auto h = history->finish(from_ns, out.steps);
    history.reset();
    if (!h.events.empty()) store.add_memory_history(rec.id, h.events, h.blocks);
  };
  try {
    OffloadOptions options = options_of(spec.config, spec.base);
    // Layer offloading without activation offloading still needs an offloader's hooks: they are
    // what sees autograd save the frozen weights and keeps references to the layer offloader's
    // copies instead (layer_offload.hpp); without them every block's weights stay on the device
    // until backward. That offloader moves no activation.
    const bool layers = spec.config.layer_offload > 0;
    const bool weights_only = layers && !spec.config.offload;
    if (weights_only) options.min_offload_size = std::numeric_limits<int64_t>::max();
    // Every run sets them: a sweep's points share one workload.
    workload.set_checkpoint(spec.config.checkpoint);
    workload.set_layer_offload(spec.config.layer_offload);
    // Every run from the model's own starting state (the weights it was built with, its
    // optimizer's state) and with its one-time work done: a sweep's points and repeats share one
    // workload, and must measure the same steps whatever ran before them.
    workload.reset();
    // The workload marks its phases and blocks as NVTX ranges for Nsight Systems.
    workload.set_marks(nvtx_step_marks());
    auto offloader = workload.make_offloader(options);
    const bool host_sim = offloader->backend() == BackendKind::HostSim;
    // Each run starts from an empty allocator cache and without cuBLAS's workspaces, as in a fresh
    // process: what an earlier run of the same process left would otherwise count in this one's
    // memory (and make it depend on which points a sweep ran before it).
    if (host_sim) {
      host_sim::clear_blas_workspaces();
      host_sim::empty_cache();
    }
    const detail::HostPeak host_peak(!host_sim);
    auto recorder = std::make_shared<Recorder>(host_sim);
    // Device memory along the step, at each stash change (the offloader outlives its events).
    recorder->set_device_probe([off = offloader.get()] {
      const DeviceMemory m = off->device_memory();
      return MemorySample{m.allocated, m.reserved};
    });
    MemoryCurve curve;
    const ListenerScope listening(host_sim ? &curve : nullptr);
    auto nvtx = std::make_shared<NvtxObserver>();
    std::vector<std::shared_ptr<Observer>> observers{recorder, nvtx};
    if (spec.memory_history) {
      if (!host_sim) {
        throw std::runtime_error(
            "--memory-history records host-sim runs (its modelled allocator); on cuda, record "
            "torch's own: torch.cuda.memory._record_memory_history()");
      }
      history = std::make_shared<detail::MemoryHistory>();
      observers.push_back(history);
    }
    if (spec.config.offload || layers) {
      offloader->set_observer(std::make_shared<TeeObserver>(observers));
    }
    ActivationOffloader* active = spec.config.offload || layers ? offloader.get() : nullptr;

    // Device activity: CUPTI on cuda unless told otherwise; host timestamps on host-sim.
    auto collector = detail::make_run_collector(host_sim, spec.collector);
    // Started with the first measured step, so warm-up activity stays out of the timeline.
    const auto start_collector = [&] {
      out.collector_status = detail::start_run_collector(*collector, spec.collector);
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
      if (i == spec.workload.warmup) {
        start_collector();
        if (history) history->start();
      }
      const auto stats_before = offloader->stats();
      offloader->reset_peak_device_memory();
      StepPhases phases;
      // The engine's clock (its events use it): steady, or host-sim's device model's.
      const int64_t begin = host_sim::clock_ns();
      recorder->sample_memory(begin,
                              detail::memory_sample(offloader->device_memory(), {offloader.get()}));
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
      recorder->sample_memory(end, detail::memory_sample(mem, {offloader.get()}));
      StepRecord s = detail::step_record(
          *recorder, rec.id, i - spec.workload.warmup, begin, end, mem,
          stats_after.offloaded_bytes - stats_before.offloaded_bytes,
          stats_after.reloaded_bytes - stats_before.reloaded_bytes, phases.loss);
      out.steps.push_back(s);
      step_ms.push_back(static_cast<double>(end - begin) / 1e6);
      if (settle && static_cast<int64_t>(step_ms.size()) == spec.workload.steps &&
          out.warmup_added < kMaxExtraWarmup && detail::first_step_unsettled(step_ms)) {
        step_ms.erase(step_ms.begin());
        out.steps.erase(out.steps.begin());
        ++out.warmup_added;
        ++total;
      }
    }
    // Steps are numbered from the first one kept; the timeline keeps what they covered.
    for (size_t k = 0; k < out.steps.size(); ++k) out.steps[k].step = static_cast<int64_t>(k);
    const int64_t kept_from = out.steps.empty() ? 0 : out.steps.front().begin_ns;
    auto snapshot = detail::finish_timeline(*recorder, *collector, host_sim, out.warmup_added > 0,
                                            kept_from, rec.id);
    out.dropped_records = collector->dropped_records();
    store.add_steps(out.steps);
    keep_history(kept_from);
    if (spec.record_timeline) {
      store.add_events(snapshot.events);
      store.add_occupancy(snapshot.occupancy);
    }

    rec.summary =
        detail::summarize(out.steps, step_ms, snapshot, modelled,
                          {offloader->resident().host_pool_reserved_bytes,
                           offloader->device_memory().outside_allocator, host_peak.peak()});
    offloader->set_observer(nullptr);
    rec.status = RunStatus::Ok;
  } catch (const StoreError&) {
    throw;  // the store itself failed (disk full, ...): the caller must stop, not record a point
  } catch (const c10::OutOfMemoryError& e) {
    rec.status = RunStatus::OutOfMemory;
    rec.error = one_line(e.what_without_backtrace());
    keep_history(out.steps.empty() ? 0 : out.steps.front().begin_ns);
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
