#include "offtune/profiler/sweep.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>

#include "offtune/profiler/json.hpp"

namespace offtune::profiler {
namespace {

bool finished(PointStatus s) { return s != PointStatus::Pending; }

PointStatus point_status(RunStatus s) {
  switch (s) {
    case RunStatus::Ok:
      return PointStatus::Ok;
    case RunStatus::OutOfMemory:
      return PointStatus::OutOfMemory;
    default:
      return PointStatus::Failed;
  }
}

}  // namespace

std::vector<EngineConfig> expand_grid(const Grid& grid) {
  std::vector<EngineConfig> out;
  EngineConfig baseline = grid.base;
  baseline.offload = false;
  out.push_back(baseline);
  for (int64_t size : grid.min_offload_sizes) {
    for (int64_t window : grid.max_fwd_stash_sizes) {
      EngineConfig c = grid.base;
      c.offload = true;
      c.min_offload_size = size;
      c.max_fwd_stash_size = window;
      out.push_back(c);
    }
  }
  return out;
}

std::string grid_json(const Grid& grid) {
  return nlohmann::json{{"min_offload_size", grid.min_offload_sizes},
                        {"max_fwd_stash_size", grid.max_fwd_stash_sizes},
                        {"base", to_json(grid.base)}}
      .dump();
}

std::string sweep_key(const Workload& w, const Grid& grid, const OffloadOptions& base,
                      std::string_view model_input) {
  nlohmann::json key{
      {"model", w.model},
      {"batch", w.batch},
      {"seq", w.seq},
      {"dtype", w.dtype},
      {"seed", w.seed},
      {"steps", w.steps},
      {"warmup", w.warmup},
      {"optimizer", w.optimizer},
      {"grid", grid_json(grid)},
      {"backend", std::string(to_string(base.backend))},
      {"link", {base.link.pinned_gbps, base.link.pageable_gbps, base.link.latency_ns}}};
  if (!model_input.empty()) key["input"] = std::string(model_input);
  return key.dump();
}

SweepOutcome run_sweep(WorkloadInstance& workload, const SweepSpec& spec, Store& store,
                       const std::function<void(const SweepProgress&)>& progress,
                       const std::atomic<bool>* cancel) {
  SweepOutcome out;
  const std::string key = sweep_key(spec.workload, spec.grid, spec.base, spec.model_input);
  if (auto existing = store.find_sweep(key)) {
    out.sweep = existing->id;
  } else {
    SweepRecord rec;
    rec.name = spec.name;
    rec.key = key;
    rec.workload = spec.workload;
    rec.grid = grid_json(spec.grid);
    rec.created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    out.sweep = store.create_sweep(rec);
  }
  std::map<int64_t, PointRecord> known;
  for (auto& p : store.points(out.sweep)) known[p.index] = p;

  const auto configs = expand_grid(spec.grid);
  std::vector<int64_t> mine;
  for (int64_t i = 0; i < static_cast<int64_t>(configs.size()); ++i) {
    if (in_shard(i, spec.shard)) mine.push_back(i);
  }
  SweepProgress prog;
  prog.total = static_cast<int64_t>(mine.size());
  for (int64_t index : mine) {
    auto it = known.find(index);
    if (it != known.end() && finished(it->second.status)) {
      ++out.skipped;
      ++prog.done;
      if (progress) progress(prog);
      continue;
    }
    if (cancel && cancel->load()) {
      out.interrupted = true;
      break;
    }
    PointRecord point;
    point.sweep = out.sweep;
    point.index = index;
    point.config = configs[static_cast<size_t>(index)];
    point.status = PointStatus::Pending;
    store.put_point(point);  // visible as pending while it runs

    RunSpec run;
    run.workload = spec.workload;
    run.config = point.config;
    run.base = spec.base;
    run.env = spec.env;
    run.label = spec.name + " point " + std::to_string(index);
    run.collector = spec.collector;
    const RunOutcome result = run_measured(workload, run, store);
    point.run = result.record.id;
    point.status = point_status(result.record.status);
    point.error = result.record.error;
    point.summary = result.record.summary;
    store.put_point(point);
    ++out.ran;
    out.ok += point.status == PointStatus::Ok;
    out.failed += point.status == PointStatus::Failed;
    out.oom += point.status == PointStatus::OutOfMemory;
    ++prog.done;
    prog.last = &point;
    if (progress) progress(prog);
    prog.last = nullptr;
  }
  return out;
}

int64_t merge_stores(Store& dst, Store& src) {
  int64_t copied = 0;
  for (const auto& sweep : src.sweeps()) {
    SweepId target;
    if (auto existing = dst.find_sweep(sweep.key)) {
      target = existing->id;
    } else {
      SweepRecord rec = sweep;
      target = dst.create_sweep(rec);
    }
    std::map<int64_t, PointRecord> have;
    for (auto& p : dst.points(target)) have[p.index] = p;
    for (auto point : src.points(sweep.id)) {
      auto it = have.find(point.index);
      if (it != have.end() && finished(it->second.status)) continue;
      if (!finished(point.status)) continue;
      if (point.run.valid()) {
        if (auto run = src.run(point.run)) {
          RunRecord copy = *run;
          const RunId new_id = dst.begin_run(copy);
          auto steps = src.steps(run->id);
          for (auto& s : steps) s.run = new_id;
          dst.add_steps(steps);
          auto events = src.events(run->id);
          for (auto& e : events) e.run = new_id;
          dst.add_events(events);
          auto occupancy = src.occupancy(run->id);
          for (auto& o : occupancy) o.run = new_id;
          dst.add_occupancy(occupancy);
          dst.finish_run(new_id, run->status, run->error, run->summary, run->finished_unix_ns);
          point.run = new_id;
        }
      }
      point.sweep = target;
      dst.put_point(point);
      ++copied;
    }
  }
  return copied;
}

}  // namespace offtune::profiler
