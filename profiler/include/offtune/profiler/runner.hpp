// Runs one measured configuration of a workload under the engine and the recorder, and writes what
// happened to a store: warm-up steps, measured steps (time, peak device memory, bytes moved,
// overlap), the timeline and stash occupancy, and a summary. An out-of-memory error or any other
// failure is a result (status oom / failed with its message), never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "offtune/offloader.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/workload.hpp"

namespace offtune::profiler {

// The workload contract lives in core (offtune/workload.hpp); these names keep the profiler's
// spelling of it.
using offtune::StepPhases;
using offtune::WorkloadInstance;

// Device-activity source on cuda: Auto (CUPTI when it can be had, else NVTX only), Cupti (fail the
// run if CUPTI is unavailable), NvtxOnly (for runs under nsys/ncu). host-sim always uses the
// recorder's host timestamps. NVTX ranges and counters are emitted in every mode. Parsed from
// "auto", "cupti", "nvtx-only" by offtune::requests.
enum class Collector : uint8_t { Auto, Cupti, NvtxOnly };

struct RunSpec {
  Workload workload;
  EngineConfig config;
  OffloadOptions base;  // backend, device, link model: what the config does not carry (options_of)
  Environment env;
  std::string label;
  bool record_timeline = true;
  Collector collector = Collector::Auto;
  // Record the allocator's history from the first measured step to the last (host-sim only; a
  // cuda run with it fails, saying so), for memory snapshots (export.hpp). An out-of-memory run
  // keeps its history up to the failure.
  bool memory_history = false;
};

struct RunOutcome {
  RunRecord record;  // status, error, summary; id assigned by the store
  std::vector<StepRecord> steps;
  std::string collector_status;  // what recorded device activity, or why CUPTI stepped aside
  int64_t dropped_records = 0;   // CUPTI records lost (buffers full)
  // Leading measured steps found to be warm-up and measured again (warm-up until stable: a first
  // step more than 25% slower than the median of the others; at most kMaxExtraWarmup).
  int64_t warmup_added = 0;
};
inline constexpr int64_t kMaxExtraWarmup = 10;

// Fans engine events out to several observers (the recorder and NVTX), in order. Spans end in the
// reverse order they began, so that targets that open ranges of their own nest them properly.
class TeeObserver : public Observer {
 public:
  explicit TeeObserver(std::vector<std::shared_ptr<Observer>> targets)
      : targets_(std::move(targets)) {}
  void on_pack(const PackEvent& e) override;
  void on_copy_issued(const CopyEvent& e) override;
  void on_copy_completed(const CopyEvent& e) override;
  void on_unpack(const UnpackEvent& e) override;
  void on_wait(const WaitEvent& e) override;
  void on_stash(const StashEvent& e) override;
  void on_release(const ReleaseEvent& e) override;
  void on_recompute(const RecomputeEvent& e) override;
  void on_span_begin(Span span) override;
  void on_span_end(Span span) override;

 private:
  std::vector<std::shared_ptr<Observer>> targets_;
};

// Measures `spec` on `workload`, writing the run to `store` as it goes (the run row first, status
// running; steps, events and occupancy in batches; the final status last).
RunOutcome run_measured(WorkloadInstance& workload, const RunSpec& spec, Store& store);

}  // namespace offtune::profiler
