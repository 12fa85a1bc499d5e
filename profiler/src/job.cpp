// A distributed job's figures from its ranks' runs (job.hpp).
#include "offtune/profiler/job.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace offtune::profiler {

std::vector<RunRecord> job_runs(Store& store, RunId rank0) {
  std::optional<RunRecord> first = store.run(rank0);
  if (!first) {
    throw StoreError(StoreError::Kind::Invalid,
                     "job summary: unknown run id " + std::to_string(rank0.value));
  }
  std::vector<RunRecord> out{*first};
  for (RunRecord& r : store.runs()) {
    if (r.job_run && *r.job_run == rank0 && r.id != rank0) out.push_back(std::move(r));
  }
  std::stable_sort(out.begin() + 1, out.end(),
                   [](const RunRecord& a, const RunRecord& b) { return a.rank < b.rank; });
  return out;
}

JobSummary job_summary(Store& store, RunId rank0) { return job_summary(job_runs(store, rank0)); }

JobSummary job_summary(const std::vector<RunRecord>& runs) {
  if (runs.empty()) throw std::invalid_argument("job summary: a job has at least rank 0's run");
  JobSummary job;
  job.job = runs.front().id;
  job.world_size = runs.front().world_size;
  job.status = RunStatus::Ok;
  bool settled = false;  // a rank that is not ok decided the status
  for (const RunRecord& r : runs) {
    job.ranks.push_back({r.rank, r.id, r.status, r.summary.step_ms_median, r.summary.peak_allocated,
                         r.summary.peak_reserved});
    job.step_ms_median = std::max(job.step_ms_median, r.summary.step_ms_median);
    job.peak_allocated = std::max(job.peak_allocated, r.summary.peak_allocated);
    job.peak_reserved = std::max(job.peak_reserved, r.summary.peak_reserved);
  }
  std::stable_sort(job.ranks.begin(), job.ranks.end(),
                   [](const RankFigures& a, const RankFigures& b) { return a.rank < b.rank; });
  for (const RankFigures& r : job.ranks) {
    if (!settled && r.status != RunStatus::Ok) {
      job.status = r.status;
      settled = true;
    }
  }
  return job;
}

}  // namespace offtune::profiler
