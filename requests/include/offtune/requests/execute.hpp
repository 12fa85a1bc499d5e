// Running a request: prepare the backend, build the samples' workload, measure it into a store.
// Both front ends run runs and sweeps through here, so that a request means the same measurement
// whichever of them started it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::requests {

// The specs a request measures with, its backend prepared and its workload built. Preparing is
// process-wide (host-sim's allocator and capacity, the intra-op threads: see prepare_backend in
// profiler/backend.hpp). Each throws RequestError for an invalid request, and std::invalid_argument
// (one line) for a model that cannot be built (a TorchScript file that does not load, a sequence
// longer than a built-in model takes).
struct PreparedRun {
  profiler::RunSpec spec;
  std::unique_ptr<WorkloadInstance> workload;
};
PreparedRun prepare(const RunRequest& request);

struct PreparedSweep {
  profiler::SweepSpec spec;
  std::unique_ptr<WorkloadInstance> workload;
  int64_t refine_steps = 0;  // SweepRequest::refine_steps
};
PreparedSweep prepare(const SweepRequest& request);

// Measures a prepared request into `store`. A front end prepares first and opens (creates) the
// store after, so that a model that cannot be built leaves no store file behind.
profiler::RunOutcome execute(PreparedRun& run, profiler::Store& store);
// A sweep that ran to its end (not interrupted) as a whole (shard 1/1) then refines its finalists
// (profiler::refine_finalists, default constraint); *refined says what that did.
profiler::SweepOutcome execute(PreparedSweep& sweep, profiler::Store& store,
                               const std::function<void(const profiler::SweepProgress&)>& progress,
                               const std::atomic<bool>* cancel,
                               profiler::RefineOutcome* refined = nullptr);

}  // namespace offtune::requests
