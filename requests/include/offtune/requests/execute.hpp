// Running a request: prepare the backend, build the samples' workload, measure it into a store.
// Both front ends run runs and sweeps through here, so that a request means the same measurement
// whichever of them started it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/script_point.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::requests {

// The specs a request measures with, its backend prepared and its workload built. Preparing is
// process-wide (host-sim's allocator and capacity, the intra-op threads: see prepare_backend in
// profiler/backend.hpp). A request is checked once, by check() (request.hpp), and prepared from
// what it parsed: nothing is validated or read again here. Each throws UsageError (one line) for a
// model that cannot be built (a TorchScript file that does not load, a sequence longer than a
// built-in model takes) or a backend that refuses what was asked of it (a device capacity where
// auto found a GPU).
struct PreparedRun {
  profiler::RunSpec spec;
  std::unique_ptr<WorkloadInstance> workload;
  // What a front end should show before it runs (one line each, no "warning:" prefix; not when it
  // is told to be quiet): a TorchScript model's head that offloading cannot leave out, when the
  // run offloads.
  std::vector<std::string> warnings;
};
PreparedRun prepare(const ValidRun& request);

// What a predict-first sweep predicted (execute fills it).
struct SweepPredictions {
  std::vector<profiler::Prediction> points;  // by grid index, every point of the grid
  std::vector<int64_t> chosen;               // the grid indices it then measured
  double record_ms = 0.0;                    // recording the step(s), wall time
  double predict_ms = 0.0;                   // replaying every point, wall time
  std::string source;                        // what they rest on (profiler::Trace::source)
};

struct PreparedSweep {
  profiler::SweepSpec spec;
  std::unique_ptr<WorkloadInstance> workload;  // null for a script sweep
  // A script sweep (SweepRequest::script): how each point runs it. A front end sets pass_stderr
  // (the CLI: not under --quiet or --json). spec.script and spec.script_hash are its identity.
  std::optional<profiler::ScriptSpec> script;
  // The script file whose hash is in the identity (profiler::script_identity); empty: the command
  // names no file and is the identity alone (a front end says so).
  std::string script_file;
  int64_t refine_steps = 0;  // SweepRequest::refine_steps
  bool predict_first = false;
  std::optional<SweepPredictions> predictions;
  std::vector<std::string> warnings;  // as PreparedRun's (a sweep's points offload)
};
PreparedSweep prepare(const ValidSweep& request);

// What a front end tells the user of a prepared script sweep's identity before it runs, when they
// should know it: the command names no script file (a changed script would resume the same sweep),
// or the script changed since an earlier sweep of the same command in `store` (a new sweep
// starts). One line; empty otherwise, and for a sweep of a model.
std::string script_identity_note(const PreparedSweep& sweep, profiler::Store& store);

// Measures a prepared request into `store`. A front end prepares first and opens (creates) the
// store after, so that a model that cannot be built leaves no store file behind.
profiler::RunOutcome execute(PreparedRun& run, profiler::Store& store);
// The measurer of a prepared sweep: its script, or its workload in this process.
std::unique_ptr<profiler::PointMeasurer> make_measurer(PreparedSweep& sweep);
// Records the steps of the sweep's grid (per semantics, checkpoint policy and offload set: its
// workload in this process, or its script run on host-sim) and predicts every point (what execute
// does first for a predict-first sweep). `cancel` stops a script's run.
SweepPredictions predict_sweep(PreparedSweep& sweep, const std::atomic<bool>* cancel = nullptr);
// A sweep that ran to its end (not interrupted) as a whole (shard 1/1) then refines its finalists
// (profiler::refine_finalists, default constraint); *refined says what that did. A predict-first
// sweep first records one step per semantics of its grid, predicts every point, and measures only
// the points that matter (sweep.predictions says which, with every prediction).
profiler::SweepOutcome execute(PreparedSweep& sweep, profiler::Store& store,
                               const std::function<void(const profiler::SweepProgress&)>& progress,
                               const std::atomic<bool>* cancel,
                               profiler::RefineOutcome* refined = nullptr);

// What a front end says of a finished sweep, in one line: "sweep 3: ran 5, skipped 0 (already
// measured), ok 5, failed 0, out of memory 0", then ", measured by another offtune process N" and
// ", runs of later rounds (--repeat R) N" where there were any.
std::string sweep_summary(const profiler::SweepOutcome& outcome, int64_t repeat);

}  // namespace offtune::requests
