// Copying a run and its job between stores, for merge_stores (merge.hpp).
#include "merge.hpp"

#include <optional>

namespace offtune::profiler::detail {
namespace {

RunId copy_run(Store& dst, Store& src, const RunRecord& run, std::optional<RunId> job) {
  RunRecord copy = run;
  copy.job_run = job;  // ids are the destination's
  const RunId new_id = dst.begin_run(copy);
  auto steps = src.steps(run.id);
  for (auto& s : steps) s.run = new_id;
  dst.add_steps(steps);
  auto events = src.events(run.id);
  for (auto& e : events) e.run = new_id;
  dst.add_events(events);
  auto occupancy = src.occupancy(run.id);
  for (auto& o : occupancy) o.run = new_id;
  dst.add_occupancy(occupancy);
  // Its memory history, if it was recorded with one (add_memory_history renumbers the run).
  auto memory = src.memory_events(run.id);
  auto blocks = src.memory_blocks(run.id);
  if (!memory.empty() || !blocks.empty()) dst.add_memory_history(new_id, memory, blocks);
  dst.finish_run(new_id, run.status, run.error, run.summary, run.finished_unix_ns);
  return new_id;
}

}  // namespace

RunId copy_job(Store& dst, Store& src, RunId id) {
  const std::optional<RunRecord> run = src.run(id);
  if (!run) return id;
  // Its own job_run, if any, names a run that this point's copy does not bring along.
  const RunId new_id = copy_run(dst, src, *run, std::nullopt);
  for (const RunRecord& r : src.runs()) {
    if (r.job_run && *r.job_run == id && r.id != id) copy_run(dst, src, r, new_id);
  }
  return new_id;
}

}  // namespace offtune::profiler::detail
