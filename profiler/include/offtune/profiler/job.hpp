// A distributed job as one result. Under torchrun every rank trains on its own device and records
// a run of its own (schema 7: RunRecord::rank, world_size, job_run): rank 0's run is the job's,
// and the other ranks' runs name it as their job_run. A job is as slow as its slowest rank (the
// ranks wait for each other at every gradient all-reduce) and needs the memory of its hungriest
// rank on every device, so its step time is the ranks' highest median and its peaks the ranks'
// highest; each rank's figures stay available (`offtune report --ranks`).
#pragma once

#include <cstdint>
#include <vector>

#include "offtune/profiler/records.hpp"
#include "offtune/profiler/store.hpp"

namespace offtune::profiler {

// One rank's figures.
struct RankFigures {
  int64_t rank = 0;
  RunId run;
  RunStatus status = RunStatus::Running;
  double step_ms_median = 0.0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
};

struct JobSummary {
  RunId job;               // rank 0's run
  int64_t world_size = 1;  // as rank 0's run recorded it
  // Ok when every rank recorded is ok; else the status of the lowest rank that is not (a job
  // whose rank failed has failed).
  RunStatus status = RunStatus::Running;
  double step_ms_median = 0.0;     // the slowest rank's median step time
  int64_t peak_allocated = 0;      // the highest rank's
  int64_t peak_reserved = 0;       // the highest rank's
  std::vector<RankFigures> ranks;  // by rank; fewer than world_size when a rank recorded nothing
};

// The runs of the job of rank 0's run `rank0`: that run, then the runs naming it as their job, by
// rank. A single-process run is a job of one rank. Unknown run: StoreError(Invalid).
std::vector<RunRecord> job_runs(Store& store, RunId rank0);
// The job's figures (see above). Unknown run: StoreError(Invalid).
//
// Takes a Store& rather than the const Store& first agreed: the Store interface reads through
// non-const calls (a read may decide that a run's owner has ended).
JobSummary job_summary(Store& store, RunId rank0);
// The same from the job's runs as job_runs() returns them (rank 0's first; not empty), for a
// reader that holds every run already (`offtune report`).
JobSummary job_summary(const std::vector<RunRecord>& runs);

}  // namespace offtune::profiler
