#include "offtune/profiler/sweep.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "merge.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/metrics.hpp"
#include "run_parts.hpp"

namespace offtune::profiler {
namespace {

bool finished(PointStatus s) { return s != PointStatus::Pending; }

// How often a sweep looks at the points another process holds: short next to a point's measurement
// (seconds), long enough that the look (one read of the points) costs nothing.
constexpr auto kPollInterval = std::chrono::milliseconds(150);

}  // namespace

namespace {

std::vector<std::string> axis(const std::vector<std::string>& values, const std::string& base) {
  return values.empty() ? std::vector<std::string>{base} : values;
}

// Offloading only the boundaries of a model that checkpoints nothing offloads nothing: no point.
bool meaningful(const std::string& checkpoint, const std::string& offload_set) {
  return offload_set != "boundaries" || checkpoint != "none";
}

// One axis of the offload points below the (checkpoint, layer offloading, offload set) triple: how
// many values it has and how its i-th sets a config's knob.
struct InnerAxis {
  size_t size;
  std::function<void(EngineConfig&, size_t)> set;
};

// An axis over `values`, or over base's own value when there are none (an absent axis is one
// value: the grid as it was before the axis existed).
template <typename T, typename Values>
InnerAxis knob_axis(const Values& values, T EngineConfig::*knob) {
  if (values.empty()) return {1, [](EngineConfig&, size_t) {}};
  return {values.size(), [&values, knob](EngineConfig& c, size_t i) { c.*knob = values[i]; }};
}

// The axes every offload point crosses, outer to inner (expand_grid's order); the sizes and
// windows are never empty-means-base: no size, no offload point.
std::vector<InnerAxis> inner_axes(const Grid& g) {
  return {knob_axis(g.tiers, &EngineConfig::tier),
          knob_axis(g.semantics, &EngineConfig::semantics),
          knob_axis(g.prefetches, &EngineConfig::prefetch),
          knob_axis(g.links, &EngineConfig::link),
          knob_axis(g.streams, &EngineConfig::use_streams),
          knob_axis(g.pin_memory, &EngineConfig::use_pin_memory),
          knob_axis(g.max_fwd_stash_bytes, &EngineConfig::max_fwd_stash_bytes),
          {g.min_offload_sizes.size(),
           [&g](EngineConfig& c, size_t i) { c.min_offload_size = g.min_offload_sizes[i]; }},
          {g.max_fwd_stash_sizes.size(),
           [&g](EngineConfig& c, size_t i) { c.max_fwd_stash_size = g.max_fwd_stash_sizes[i]; }}};
}

// Calls point(config) for each point of the grid in expand_grid's order.
template <typename Point>
void for_each_point(const Grid& grid, Point point) {
  const auto checkpoints = axis(grid.checkpoints, grid.base.checkpoint);
  const auto layers = axis(grid.layer_offloads, grid.base.layer_offload);
  EngineConfig baseline = grid.base;
  baseline.offload = false;
  baseline.checkpoint = "none";
  baseline.layer_offload = "off";
  point(baseline);
  for (const std::string& ckpt : checkpoints) {
    for (const std::string& layer : layers) {
      if (ckpt == "none" && layer == "off") continue;
      EngineConfig alone = baseline;
      alone.checkpoint = ckpt;
      alone.layer_offload = layer;
      point(alone);
    }
  }
  const auto inner = inner_axes(grid);
  for (const std::string& ckpt : checkpoints) {
    for (const std::string& layer : layers) {
      for (const std::string& set : axis(grid.offload_sets, grid.base.offload_set)) {
        if (!meaningful(ckpt, set)) continue;
        EngineConfig c = grid.base;
        c.offload = true;
        c.checkpoint = ckpt;
        c.layer_offload = layer;
        c.offload_set = set;
        // Every combination of the inner axes, the last one fastest (an odometer).
        std::vector<size_t> at(inner.size(), 0);
        if (std::any_of(inner.begin(), inner.end(),
                        [](const InnerAxis& a) { return a.size == 0; })) {
          continue;
        }
        for (;;) {
          for (size_t k = 0; k < inner.size(); ++k) inner[k].set(c, at[k]);
          point(c);
          size_t k = inner.size();
          while (k > 0 && ++at[k - 1] == inner[k - 1].size) at[--k] = 0;
          if (k == 0) break;
        }
      }
    }
  }
}

}  // namespace

std::vector<EngineConfig> expand_grid(const Grid& grid) {
  std::vector<EngineConfig> out;
  for_each_point(grid, [&](const EngineConfig& c) { out.push_back(c); });
  return out;
}

int64_t grid_size(const Grid& grid) {
  const auto checkpoints = axis(grid.checkpoints, grid.base.checkpoint);
  const auto layers = axis(grid.layer_offloads, grid.base.layer_offload);
  const auto sets = axis(grid.offload_sets, grid.base.offload_set);
  int64_t combos = 0, alone = 0;
  for (const std::string& ckpt : checkpoints) {
    for (const std::string& layer : layers) {
      alone += ckpt != "none" || layer != "off";
      for (const std::string& set : sets) combos += meaningful(ckpt, set);
    }
  }
  for (const InnerAxis& a : inner_axes(grid)) combos *= static_cast<int64_t>(a.size);
  return 1 + alone + combos;
}

std::vector<int64_t> measurement_order(const std::vector<int64_t>& indices) {
  // Bit-reversed positions: 0, m/2, m/4, 3m/4, ... (positions past the end are skipped).
  const size_t m = indices.size();
  int bits = 0;
  while ((size_t{1} << bits) < m) ++bits;
  std::vector<int64_t> out;
  out.reserve(m);
  for (size_t i = 0; i < (size_t{1} << bits); ++i) {
    size_t r = 0;
    for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1U) << (bits - 1 - b);
    if (r < m) out.push_back(indices[r]);
  }
  return out;
}

std::string grid_json(const Grid& grid) {
  nlohmann::json j{{"min_offload_size", grid.min_offload_sizes},
                   {"max_fwd_stash_size", grid.max_fwd_stash_sizes},
                   {"base", to_json(grid.base)}};
  if (!grid.semantics.empty()) j["semantics"] = grid.semantics;
  if (!grid.checkpoints.empty()) j["checkpoint"] = grid.checkpoints;
  if (!grid.offload_sets.empty()) j["offload_set"] = grid.offload_sets;
  if (!grid.tiers.empty()) j["tier"] = grid.tiers;
  if (!grid.layer_offloads.empty()) j["layer_offload"] = grid.layer_offloads;
  if (!grid.prefetches.empty()) j["prefetch"] = grid.prefetches;
  if (!grid.links.empty()) j["link"] = grid.links;
  if (!grid.streams.empty()) j["use_streams"] = grid.streams;
  if (!grid.pin_memory.empty()) j["use_pin_memory"] = grid.pin_memory;
  if (!grid.max_fwd_stash_bytes.empty()) j["max_fwd_stash_bytes"] = grid.max_fwd_stash_bytes;
  return j.dump();
}

Grid parse_grid_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    Grid g;
    g.min_offload_sizes = j.at("min_offload_size").get<std::vector<int64_t>>();
    g.max_fwd_stash_sizes = j.at("max_fwd_stash_size").get<std::vector<int64_t>>();
    const auto list = [&](const char* key) {
      return j.contains(key) ? j[key].get<std::vector<std::string>>() : std::vector<std::string>{};
    };
    g.semantics = list("semantics");
    g.checkpoints = list("checkpoint");
    g.offload_sets = list("offload_set");
    g.tiers = list("tier");
    g.layer_offloads = list("layer_offload");
    const auto values = [&]<typename T>(const char* key, std::vector<T>& out) {
      if (j.contains(key)) out = j[key].get<std::vector<T>>();
    };
    values("prefetch", g.prefetches);
    values("link", g.links);
    values("use_streams", g.streams);
    values("use_pin_memory", g.pin_memory);
    values("max_fwd_stash_bytes", g.max_fwd_stash_bytes);
    // The knobs every point shares (to_json(EngineConfig)); absent ones keep their defaults.
    if (j.contains("base")) {
      const auto& b = j["base"];
      EngineConfig& c = g.base;
      c.max_fwd_stash_bytes = b.value("max_fwd_stash_bytes", c.max_fwd_stash_bytes);
      c.prefetch = b.value("prefetch", c.prefetch);
      c.use_streams = b.value("use_streams", c.use_streams);
      c.use_pin_memory = b.value("use_pin_memory", c.use_pin_memory);
      c.link = b.value("link", c.link);
      c.semantics = b.value("semantics", c.semantics);
      c.checkpoint = b.value("checkpoint", c.checkpoint);
      c.offload_set = b.value("offload_set", c.offload_set);
      c.tier = b.value("tier", c.tier);
      c.layer_offload = b.value("layer_offload", c.layer_offload);
      c.verify = b.value("verify", c.verify);
    }
    return g;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("not a sweep grid: ") + e.what());
  }
}

std::string sweep_key(const Workload& w, const Grid& grid, const OffloadOptions& base,
                      std::string_view model_input, const DeviceModel* dm, std::string_view blocks,
                      int64_t device_capacity, std::string_view script,
                      std::string_view script_hash) {
  // The key is stored and compared byte for byte to resume a sweep: it is a file format, written
  // out field by field here so that a field added to to_json(Workload) never changes the key of
  // an existing sweep.
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
  if (!blocks.empty()) key["blocks"] = std::string(blocks);
  if (w.lora_rank != 0) key["lora_rank"] = w.lora_rank;
  if (device_capacity > 0) key["device_capacity"] = device_capacity;
  if (!script.empty()) key["script"] = std::string(script);
  if (!script_hash.empty()) key["script_hash"] = std::string(script_hash);
  if (dm != nullptr) {
    key["device_model"] = {
        {"title", dm->title},
        {"fp32_tflops", dm->fp32_tflops},
        {"bf16_tflops", dm->bf16_tflops},
        {"memory_gbps", dm->memory_gbps},
        {"kernel_overhead_ns", dm->kernel_overhead_ns},
        {"efficiency", {dm->matmul_efficiency, dm->attention_efficiency, dm->memory_efficiency}}};
  }
  return key.dump();
}

std::string sweep_key(const SweepSpec& spec) {
  return sweep_key(spec.workload, spec.grid, spec.base, spec.model_input,
                   spec.device_model ? &*spec.device_model : nullptr, spec.blocks,
                   spec.device_capacity, spec.script, spec.script_hash);
}

RunRecord WorkloadMeasurer::measure(const PointRun& point, Store& store,
                                    const std::atomic<bool>* /*cancel*/) {
  RunSpec run;
  run.workload = spec_.workload;
  if (point.steps > 0) run.workload.steps = point.steps;
  run.config = point.config;
  run.base = spec_.base;
  run.env = spec_.env;
  // A sweep over links: the backend was prepared with the first; each point runs over its own, and
  // its environment names it ("host-sim (link pcie5)") as a run over that link alone would.
  if (!spec_.grid.links.empty() && !point.config.link.empty()) {
    run.base.link = parse_link(point.config.link);
    fill_environment(run.env, run.base.backend, spec_.device_model ? &*spec_.device_model : nullptr,
                     point.config.link);
  }
  run.label = point.label;
  run.collector = spec_.collector;
  return run_measured(workload_, run, store).record;
}

namespace {

// The summary of a point measured in several runs: the step time over every step of all of them,
// the peaks at their highest, the rest as the last run had it.
RunSummary combined_summary(Store& store, const std::vector<RunId>& runs) {
  std::vector<double> step_ms;
  RunSummary out;
  int64_t peak_allocated = 0, peak_reserved = 0;
  for (const RunId id : runs) {
    const auto run = store.run(id);
    if (!run) continue;
    out = run->summary;
    peak_allocated = std::max(peak_allocated, run->summary.peak_allocated);
    peak_reserved = std::max(peak_reserved, run->summary.peak_reserved);
    for (const StepRecord& s : store.steps(id)) {
      step_ms.push_back(static_cast<double>(s.end_ns - s.begin_ns) / 1e6);
    }
  }
  set_step_time(out, step_stats(step_ms));
  out.peak_allocated = peak_allocated;
  out.peak_reserved = peak_reserved;
  return out;
}

}  // namespace

SweepOutcome run_sweep(WorkloadInstance& workload, const SweepSpec& spec, Store& store,
                       const std::function<void(const SweepProgress&)>& progress,
                       const std::atomic<bool>* cancel) {
  WorkloadMeasurer measurer(workload, spec);
  return run_sweep(measurer, spec, store, progress, cancel);
}

SweepOutcome run_sweep(PointMeasurer& measurer, const SweepSpec& spec, Store& store,
                       const std::function<void(const SweepProgress&)>& progress,
                       const std::atomic<bool>* cancel) {
  SweepOutcome out;
  SweepRecord rec;
  rec.name = spec.name;
  rec.key = sweep_key(spec);
  rec.workload = spec.workload;
  rec.grid = grid_json(spec.grid);
  rec.created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  // Find or create in one step: the same sweep started twice at once is one sweep.
  out.sweep = store.create_sweep(rec);
  if (!spec.predictions.empty()) {
    std::vector<PointPrediction> predictions = spec.predictions;
    for (auto& p : predictions) p.sweep = out.sweep;
    store.put_predictions(predictions);
  }
  std::map<int64_t, PointRecord> known;
  for (auto& p : store.points(out.sweep)) known[p.index] = p;

  const auto configs = expand_grid(spec.grid);
  std::vector<int64_t> in_grid_order;
  for (int64_t i = 0; i < static_cast<int64_t>(configs.size()); ++i) {
    const bool wanted =
        spec.only.empty() || std::find(spec.only.begin(), spec.only.end(), i) != spec.only.end();
    if (wanted && in_shard(i, spec.shard)) in_grid_order.push_back(i);
  }
  const std::vector<int64_t> mine = measurement_order(in_grid_order);
  SweepProgress prog;
  prog.total = static_cast<int64_t>(mine.size()) * std::max<int64_t>(spec.repeat, 1);
  const auto report = [&](const PointRecord* last) {
    ++prog.done;
    prog.last = last;
    if (progress) progress(prog);
    prog.last = nullptr;
  };
  const auto cancelled = [&] { return cancel != nullptr && cancel->load(); };
  const auto release = [&](int64_t index) {
    // A claim left behind is harmless: the point is finished, or this process's end frees it. A
    // failure to release must not fail a sweep, nor hide the error that ended a measurement.
    try {
      store.release_point(out.sweep, index);
    } catch (const StoreError&) {
    }
  };
  // Measures a point this process has claimed; the claim goes once the result is stored. False
  // when the measurer stopped it for cancel: the point stays pending, for a resume to measure.
  const auto measure = [&](int64_t index) {
    PointRecord point;
    point.sweep = out.sweep;
    point.index = index;
    point.config = configs[static_cast<size_t>(index)];
    point.status = PointStatus::Pending;
    try {
      store.put_point(point);  // visible as pending while it runs
      PointRun run;
      run.sweep = out.sweep;
      run.index = index;
      run.config = point.config;
      run.label = spec.name + " point " + std::to_string(index);
      const RunRecord result = measurer.measure(run, store, cancel);
      if (result.status == RunStatus::Interrupted && cancelled()) {
        release(index);
        out.interrupted = true;
        return false;
      }
      point.run = result.id;
      point.status = detail::point_status(result.status);
      point.error = result.error;
      point.summary = result.summary;
      store.put_point(point);
    } catch (...) {
      release(index);
      throw;
    }
    release(index);
    ++out.ran;
    out.ok += point.status == PointStatus::Ok;
    out.failed += point.status == PointStatus::Failed;
    out.oom += point.status == PointStatus::OutOfMemory;
    report(&point);
    return true;
  };

  // Points another live process holds, with their holder, to come back to.
  struct Held {
    int64_t index;
    Owner holder;
  };
  std::vector<Held> held;
  for (int64_t index : mine) {
    auto it = known.find(index);
    if (it != known.end() && finished(it->second.status)) {
      ++out.skipped;
      report(nullptr);
      continue;
    }
    if (cancelled()) {
      out.interrupted = true;
      return out;
    }
    const Claim claim = store.claim_point(out.sweep, index);
    switch (claim.status) {
      case ClaimStatus::Finished:  // finished since the points were read
        ++out.skipped;
        report(nullptr);
        break;
      case ClaimStatus::Taken:
        held.push_back({index, claim.holder});
        break;
      case ClaimStatus::Claimed:
        if (!measure(index)) return out;
        break;
    }
  }

  // Wait for the held points: each is finished by its holder, or measured here once the holder has
  // ended (killed, crashed) and its claim can be taken over.
  while (!held.empty()) {
    if (cancelled()) {
      out.interrupted = true;
      return out;
    }
    std::map<int64_t, PointRecord> now;
    for (auto& p : store.points(out.sweep)) now[p.index] = p;
    std::vector<Held> still;
    for (const Held& h : held) {
      auto it = now.find(h.index);
      if (it != now.end() && finished(it->second.status)) {
        ++out.by_other;
        report(&it->second);
        continue;
      }
      if (owner_alive(h.holder) || cancelled()) {
        still.push_back(h);
        continue;
      }
      const Claim claim = store.claim_point(out.sweep, h.index);
      switch (claim.status) {
        case ClaimStatus::Finished:  // its holder finished it after all, just before it ended
          still.push_back(h);        // reported on the next look, with its record
          break;
        case ClaimStatus::Taken:  // a third process took it over first
          still.push_back({h.index, claim.holder});
          break;
        case ClaimStatus::Claimed:
          if (!measure(h.index)) return out;
          break;
      }
    }
    held = std::move(still);
    if (!held.empty()) std::this_thread::sleep_for(kPollInterval);
  }

  // Rounds 2..repeat: every point that measured ok, once more per round, in the same order.
  for (int64_t round = 2; round <= spec.repeat; ++round) {
    const std::vector<RunRecord> runs = store.runs();
    std::map<int64_t, PointRecord> points;
    for (auto& p : store.points(out.sweep)) points[p.index] = p;
    for (int64_t index : mine) {
      if (cancelled()) {
        out.interrupted = true;
        return out;
      }
      auto it = points.find(index);
      if (it == points.end() || it->second.status != PointStatus::Ok) {
        report(nullptr);
        continue;
      }
      PointRecord& point = it->second;
      const std::string prefix = spec.name + " point " + std::to_string(index) + " (sweep " +
                                 std::to_string(out.sweep.value) + ", repeat ";
      std::vector<RunId> rounds{point.run};
      for (const RunRecord& r : runs) {
        if (r.status == RunStatus::Ok && r.label.rfind(prefix, 0) == 0) rounds.push_back(r.id);
      }
      if (static_cast<int64_t>(rounds.size()) >= round) {  // measured in an earlier invocation
        report(nullptr);
        continue;
      }
      PointRun run;
      run.sweep = out.sweep;
      run.index = index;
      run.config = point.config;
      run.label = prefix + std::to_string(round) + " of " + std::to_string(spec.repeat) + ")";
      const RunRecord result = measurer.measure(run, store, cancel);
      if (result.status == RunStatus::Interrupted && cancelled()) {
        out.interrupted = true;
        return out;
      }
      ++out.repeated;
      if (result.status == RunStatus::Ok) {
        rounds.push_back(result.id);
        point.summary = combined_summary(store, rounds);
        store.put_point(point);
      }
      report(&point);
    }
  }
  return out;
}

RefineOutcome refine_finalists(PointMeasurer& measurer, const SweepSpec& spec, Store& store,
                               SweepId sweep, const Constraint& constraint, int64_t steps,
                               const std::atomic<bool>* cancel) {
  RefineOutcome out;
  out.steps = steps;
  if (steps <= 0) return out;
  const Recommendation rec = recommend(store.points(sweep), constraint);
  if (!rec.chosen || rec.ties.empty()) return out;
  std::vector<PointRecord> ties = rec.ties;
  const double chosen_ms = rec.chosen->summary.step_ms_median;
  std::stable_sort(ties.begin(), ties.end(), [&](const PointRecord& a, const PointRecord& b) {
    return std::abs(a.summary.step_ms_median - chosen_ms) <
           std::abs(b.summary.step_ms_median - chosen_ms);
  });
  std::vector<PointRecord> finalists{*rec.chosen};
  for (const auto& t : ties) {
    if (finalists.size() >= kMaxFinalists) break;
    finalists.push_back(t);
  }
  // The baseline too, first: each finalist's slowdown is judged against it, and a baseline left
  // with fewer steps (a wider interval, or a single noisy figure) would let noise decide it.
  if (rec.baseline && std::none_of(finalists.begin(), finalists.end(), [&](const PointRecord& f) {
        return f.index == rec.baseline->index;
      })) {
    finalists.insert(finalists.begin(), *rec.baseline);
  }
  // A measurer that sets the steps measures each finalist again with more of them; one that cannot
  // adds a run, and the point pools the steps of all its runs (its first, --repeat's rounds and
  // this one), as --repeat does.
  const bool more_steps = measurer.sets_steps();
  const std::vector<RunRecord> runs = more_steps ? std::vector<RunRecord>{} : store.runs();
  for (PointRecord& point : finalists) {
    if (cancel != nullptr && cancel->load()) {
      out.interrupted = true;
      break;
    }
    const std::string name = spec.name + " point " + std::to_string(point.index);
    const std::string again = name + " (sweep " + std::to_string(sweep.value) + ", re-measured)";
    std::vector<RunId> pooled{point.run};
    if (more_steps) {
      if (const auto run = store.run(point.run); run && run->workload.steps >= steps) continue;
    } else {
      const std::string rounds = name + " (sweep " + std::to_string(sweep.value) + ", repeat ";
      bool done = false;
      for (const RunRecord& r : runs) {
        if (r.status != RunStatus::Ok) continue;
        done = done || r.label == again;
        if (r.label.rfind(rounds, 0) == 0) pooled.push_back(r.id);
      }
      if (done) continue;
    }
    PointRun run;
    run.sweep = sweep;
    run.index = point.index;
    run.config = point.config;
    run.label = more_steps ? name + " (re-measured)" : again;
    run.steps = more_steps ? steps : 0;
    const RunRecord result = measurer.measure(run, store, cancel);
    if (result.status == RunStatus::Interrupted && cancel != nullptr && cancel->load()) {
      out.interrupted = true;
      break;
    }
    if (result.status != RunStatus::Ok) continue;
    point.run = result.id;
    if (more_steps) {
      point.summary = result.summary;
    } else {
      pooled.push_back(result.id);
      point.summary = combined_summary(store, pooled);
    }
    store.put_point(point);
    out.remeasured.push_back(point.index);
  }
  return out;
}

RefineOutcome refine_finalists(WorkloadInstance& workload, const SweepSpec& spec, Store& store,
                               SweepId sweep, const Constraint& constraint, int64_t steps,
                               const std::atomic<bool>* cancel) {
  WorkloadMeasurer measurer(workload, spec);
  return refine_finalists(measurer, spec, store, sweep, constraint, steps, cancel);
}

int64_t merge_stores(Store& dst, Store& src) {
  int64_t copied = 0;
  for (const auto& sweep : src.sweeps()) {
    const SweepId target = dst.create_sweep(sweep);  // dst's sweep with this key, or a new one
    {
      std::set<int64_t> predicted;
      for (const auto& p : dst.predictions(target)) predicted.insert(p.index);
      std::vector<PointPrediction> missing;
      for (auto p : src.predictions(sweep.id)) {
        if (predicted.contains(p.index)) continue;
        p.sweep = target;
        missing.push_back(std::move(p));
      }
      if (!missing.empty()) dst.put_predictions(missing);
    }
    std::map<int64_t, PointRecord> have;
    for (auto& p : dst.points(target)) have[p.index] = p;
    for (auto point : src.points(sweep.id)) {
      auto it = have.find(point.index);
      if (it != have.end() && finished(it->second.status)) continue;
      if (!finished(point.status)) continue;
      // The point's run with its rows and its job's other ranks (merge.cpp).
      if (point.run.valid()) point.run = detail::copy_job(dst, src, point.run);
      point.sweep = target;
      dst.put_point(point);
      ++copied;
    }
  }
  return copied;
}

}  // namespace offtune::profiler
