// A run recorded from a training loop that steps itself (a Python script, a Hugging Face Trainer, a
// C++ program), where the runner (runner.hpp) would step a workload of its own. The loop tells
// the run where its steps begin and end; the run attaches the recorder (and NVTX) to the loop's
// offloaders, takes each step's figures as the runner does (step time on the engine's clock,
// peak device memory allocated and reserved, bytes moved, copy/compute overlap), and writes the
// same rows into the same store: a run row (status running first, its final status last), its
// steps, timeline and occupancy, so that `offtune report/export` and the dashboard read it as a
// CLI run.
//
// Rules.
// - Warm-up: the first `Workload::warmup` steps are not measured (no step rows, no timeline), as
//   the CLI's --warmup; then warm-up until stable drops leading measured steps that the runner's
//   rule (run_parts: a first step more than 25% slower than the median of the others) finds
//   unsettled, at most kMaxExtraWarmup of them, when the run finishes (3 or more measured steps;
//   never with a device model, which times every step alike).
// - Steps: begin_step() / end_step(), or step() for a loop that marks only one boundary per
//   iteration (it ends the open step and begins the next; the first begins at construction unless
//   LiveRunSpec::begin_first_step is false). A
//   step still open when the run finishes is not counted: it is the loop's tail.
// - Phases: begin_phase()/end_phase() mark forward and backward where the loop knows them. A step
//   with neither marked counts as compute from its begin to its end, less the engine's waits
//   (host-sim), and has no forward/backward spans in its timeline.
// - Offloaders: the run observes those attached (several may be: their events, byte counts and
//   pinned pools add up); none is the no-offload baseline. attach() replaces an offloader's
//   observer until detach() or finish, which set none. An attached offloader must outlive the
//   run or be detached first.
// - Device memory is the backend's, not an offloader's (offtune::device_memory): a baseline has
//   its peaks too. On host-sim it counts what the accounting allocator saw since
//   host_sim::install().
// - Device model: on host-sim, LiveRunSpec::device_model times the loop's ops as that GPU would
//   (host_sim::set_device_model) from construction to finish, and the model in use before is put
//   back after.
// - Sweep: with LiveRunSpec::sweep set, the run is also a point of the recorded sweep of that name
//   (one per name and workload; its grid is {"recorded": true}): each run recorded under the name
//   adds a point with its config, so that `offtune recommend` picks among what the loop measured
//   (the no-offload run is the baseline). An interrupted run adds no point.
// - Threads: begin_step/end_step/step/phases on one thread (the loop's; NVTX ranges are pushed and
//   popped there). Not for concurrent use.
// - Errors: a store that cannot be written throws StoreError; a step call out of order (end_step
//   with no step open, a phase outside a step) throws std::logic_error naming the call. After
//   finish() or fail(), every call but id()/record() throws std::logic_error.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "offtune/device_model.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/workload.hpp"

namespace offtune::profiler {

struct LiveRunSpec {
  // The model and batches as the caller describes them (model name or class, batch, seq, dtype);
  // `warmup` is used as above; `steps` is recorded as given (0 when not known in advance: the
  // step rows count them).
  Workload workload;
  // The engine settings (knobs_of() of the attached offloader's options; offload false for
  // the baseline), and what the workload does that the engine does not see (checkpoint: the
  // model's own gradient checkpointing, described by the caller).
  EngineConfig config;
  Environment env;  // fill_environment() (backend.hpp); env.backend decides the backend below
  std::string label;
  std::string sweep;  // empty: no sweep point
  bool record_timeline = true;
  Collector collector = Collector::Auto;
  // Record the allocator's history over the measured steps, kept whatever the run's end (an
  // out-of-memory error included), for memory snapshots (export.hpp). host-sim only
  // (std::invalid_argument on cuda).
  bool memory_history = false;
  std::optional<DeviceModel> device_model;  // host-sim only (std::invalid_argument on cuda)
  // The first step begins at construction (for loops that call step() after each iteration);
  // false: at the first begin_step() (for callbacks told where each step begins).
  bool begin_first_step = true;
  // A run begun by another process to continue instead of beginning one: `offtune sweep --script`
  // begins each point's run (status running, the point's config and label) and the script records
  // it. The run's workload and env are then written over with this spec's (Store::describe_run),
  // with the rank, world size and job below; its label, config and start time stay the begun
  // run's. A run that is not in the store, or not running: std::invalid_argument naming it.
  std::optional<RunId> continue_run;
  // The run's place in a distributed job (torchrun): this process's rank among world_size, and
  // rank 0's run in the same store when this is another rank's (none for rank 0 or one process).
  int64_t rank = 0;
  int64_t world_size = 1;
  std::optional<RunId> job_run;
};

class LiveRun {
 public:
  // Resolves the backend from spec.env.backend ("cuda" or "host-sim"; std::invalid_argument
  // otherwise), installs host-sim's allocator and the device model when asked, writes the run row
  // (status running; or describes the run it continues) and begins the first step.
  LiveRun(std::shared_ptr<Store> store, LiveRunSpec spec);
  // Not finished: finishes as interrupted ("the recording ended without finish()").
  ~LiveRun();
  LiveRun(const LiveRun&) = delete;
  LiveRun& operator=(const LiveRun&) = delete;

  void attach(ActivationOffloader& offloader);
  void detach(ActivationOffloader& offloader);

  void begin_step();  // std::logic_error when a step is open
  // Ends the open step (std::logic_error when none is); `loss` (NaN: not known, recorded as
  // such: a NULL in the store, a blank in the CSV, never a loss of 0).
  void end_step(double loss = std::numeric_limits<double>::quiet_NaN());
  // Ends the open step, if any, and begins the next.
  void step(double loss = std::numeric_limits<double>::quiet_NaN());
  void begin_phase(StepPhase phase);
  void end_phase(StepPhase phase);

  // Steps begun so far (warm-up included) and measured so far (after finish(), less the leading
  // steps that warm-up until stable dropped: warmup_added()).
  int64_t steps_begun() const { return begun_; }
  bool step_open() const;
  int64_t steps_measured() const { return static_cast<int64_t>(steps_.size()); }
  RunId id() const { return record_.id; }

  // Finishes the run: status ok with its summary, or failed when no step was measured. Writes the
  // steps, the timeline and the sweep point. Returns the run as recorded.
  const RunRecord& finish();
  // Finishes the run with `status` (failed, oom or interrupted) and `error` (its first line is
  // kept), writing what was measured before.
  const RunRecord& fail(RunStatus status, const std::string& error);
  const RunRecord& record() const { return record_; }
  // The run was measured under another tool's saved-tensor hooks (TRL's own offloading, say),
  // which offtune does not see: its "offload off" is not a baseline, so it becomes no point of the
  // recorded sweep (what recommend compares). The Python recorder calls it when it finds them.
  void leave_sweep() { spec_.sweep.clear(); }
  // Leading steps warm-up until stable dropped (after finish).
  int64_t warmup_added() const { return warmup_added_; }
  std::string collector_status() const { return collector_status_; }

 private:
  struct State;
  void require_open(const char* call) const;
  void continue_begun_run();
  const RunRecord& close(RunStatus status, const std::string& error);
  DeviceMemory memory() const;

  std::shared_ptr<Store> store_;
  LiveRunSpec spec_;
  RunRecord record_;
  std::unique_ptr<State> state_;
  std::vector<ActivationOffloader*> offloaders_;
  std::vector<StepRecord> steps_;
  std::vector<double> step_ms_;
  int64_t begun_ = 0;
  int64_t warmup_added_ = 0;
  std::string collector_status_;
  bool finished_ = false;
};

}  // namespace offtune::profiler
