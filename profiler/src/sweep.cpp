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

std::vector<KnobValue> Grid::values(const Knob& knob) const {
  if (const auto it = axes.find(knob.key); it != axes.end()) return it->second;
  return {knob.get(base)};
}

namespace {

// Values as the knob holds them: checked and canonical (every:1 is all), as the request layer's.
std::vector<KnobValue> canonical(std::string_view key, const std::vector<KnobValue>& values) {
  const Knob& k = knob(key);
  std::vector<KnobValue> out;
  for (const KnobValue& v : values) {
    Knobs scratch;
    k.set(scratch, v);
    out.push_back(k.get(scratch));
  }
  return out;
}

}  // namespace

Grid& Grid::set_numbers(std::string_view key, const std::vector<int64_t>& numbers) {
  axes[std::string(key)] = canonical(key, std::vector<KnobValue>(numbers.begin(), numbers.end()));
  return *this;
}

Grid& Grid::set_names(std::string_view key, const std::vector<std::string>& names) {
  axes[std::string(key)] = canonical(key, std::vector<KnobValue>(names.begin(), names.end()));
  return *this;
}

Grid& Grid::set_switches(std::string_view key, const std::vector<bool>& switches) {
  std::vector<KnobValue> values;
  for (const bool on : switches) values.emplace_back(on);
  axes[std::string(key)] = canonical(key, values);
  return *this;
}

std::vector<int64_t> Grid::numbers(std::string_view key) const {
  std::vector<int64_t> out;
  for (const KnobValue& v : values(key)) out.push_back(std::get<int64_t>(v));
  return out;
}

namespace {

// One axis of a grid: a knob and the values the points take of it.
struct Axis {
  const Knob* knob;
  std::vector<KnobValue> values;
};

std::vector<Axis> axes_of(const Grid& grid, bool (*keep)(const Knob&)) {
  std::vector<Axis> out;
  for (const Knob* k : axis_knobs()) {
    if (keep(*k)) out.push_back({k, grid.values(*k)});
  }
  return out;
}

// Calls visit(config) for every combination of the axes' values set on `config`, the last axis
// fastest (an odometer), in the axes' order; none when an axis has no value.
template <typename Visit>
void cross(const std::vector<Axis>& axes, EngineConfig config, Visit visit) {
  if (std::any_of(axes.begin(), axes.end(), [](const Axis& a) { return a.values.empty(); })) {
    return;
  }
  std::vector<size_t> at(axes.size(), 0);
  for (;;) {
    for (size_t k = 0; k < axes.size(); ++k) axes[k].knob->set(config, axes[k].values[at[k]]);
    visit(config);
    size_t k = axes.size();
    while (k > 0 && ++at[k - 1] == axes[k - 1].values.size()) at[--k] = 0;
    if (k == 0) return;
  }
}

// Offloading only the boundaries of a model that checkpoints nothing offloads nothing: no point.
bool meaningful(const EngineConfig& c) {
  return c.offload_set != OffloadSet::Boundaries || c.checkpoint.enabled();
}

// Calls point(config) for each point of the grid in expand_grid's order.
template <typename Point>
void for_each_point(const Grid& grid, Point point) {
  EngineConfig baseline = grid.base;
  baseline.offload = false;
  baseline.checkpoint = CheckpointPolicy::none();
  baseline.layer_offload = 0;
  point(baseline);
  // Each variant that applies without offloading (checkpointing, layer offloading) alone.
  cross(axes_of(grid, [](const Knob& k) { return !k.offload_only; }), baseline,
        [&](const EngineConfig& c) {
          if (!is_baseline(c)) point(c);
        });
  EngineConfig offload = grid.base;
  offload.offload = true;
  cross(axes_of(grid, [](const Knob&) { return true; }), offload, [&](const EngineConfig& c) {
    if (meaningful(c)) point(c);
  });
}

}  // namespace

std::vector<EngineConfig> expand_grid(const Grid& grid) {
  std::vector<EngineConfig> out;
  for_each_point(grid, [&](const EngineConfig& c) { out.push_back(c); });
  return out;
}

int64_t grid_size(const Grid& grid) {
  // The names' axes are short lists (no ranges): their combinations are counted one by one, and
  // the numbers' and switches' axes, which may be long, multiply.
  int64_t alone = 0, combos = 0, product = 1;
  cross(axes_of(grid, [](const Knob& k) { return !k.offload_only; }), grid.base,
        [&](EngineConfig c) {
          c.offload = false;
          alone += !is_baseline(c);
        });
  cross(axes_of(grid, [](const Knob& k) { return k.kind == KnobKind::Choice; }), grid.base,
        [&](const EngineConfig& c) { combos += meaningful(c); });
  for (const Axis& a : axes_of(grid, [](const Knob& k) { return k.kind != KnobKind::Choice; })) {
    product *= static_cast<int64_t>(a.values.size());
  }
  return 1 + alone + combos * product;
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
  nlohmann::json j{{"base", to_json(grid.base)}};
  const auto list = [](const std::vector<KnobValue>& values) {
    nlohmann::json out = nlohmann::json::array();
    for (const KnobValue& v : values) std::visit([&](const auto& x) { out.push_back(x); }, v);
    return out;
  };
  for (const auto& [key, values] : grid.axes) j[key] = list(values);
  // The grid's pair is in every grid's JSON (parse_grid_json requires it): base's value where a
  // grid made in code has no axis of it.
  for (const Knob* k : axis_knobs()) {
    if (k->always_axis && !j.contains(k->key)) j[std::string(k->key)] = list(grid.values(*k));
  }
  return j.dump();
}

Grid parse_grid_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object()) throw std::invalid_argument("not a sweep grid: not a JSON object");
    Grid g;
    // The knobs every point shares (to_json(EngineConfig)); absent ones keep their defaults.
    if (j.contains("base")) g.base = config_from_json(j["base"], g.base);
    for (const Knob* k : axis_knobs()) {
      // The grid's pair is in every grid ever written; another axis only where the sweep had it.
      if (!j.contains(k->key) && !k->always_axis) continue;
      if (!j.at(k->key).is_array()) {
        throw std::invalid_argument("not a sweep grid: " + std::string(k->key) + " is not a list");
      }
      std::vector<KnobValue>& values = g.axes[std::string(k->key)];
      for (const auto& item : j[k->key]) {
        // Each value as the knob carries it, checked by the knob (a hand-edited grid).
        Knobs scratch;
        if (item.is_boolean()) {
          k->set(scratch, item.get<bool>());
        } else if (item.is_number_integer()) {
          k->set(scratch, item.get<int64_t>());
        } else {
          k->set(scratch, item.get<std::string>());
        }
        values.push_back(k->get(scratch));
      }
    }
    return g;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("not a sweep grid: ") + e.what());
  } catch (const OptionsError& e) {
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
        {"context_bytes", dm->context_bytes},
        {"blas_workspace_bytes", dm->blas_workspace()},
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
  if (spec_.grid.axes.contains("link") && !point.config.link.name.empty()) {
    fill_environment(run.env, run.base.backend, spec_.device_model ? &*spec_.device_model : nullptr,
                     point.config.link.name);
  }
  run.label = point.label;
  run.collector = spec_.collector;
  run.memory_history = spec_.memory_history;
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
  // Interleaved (A/B): the baseline and every finalist are measured once per round, round after
  // round, so that each meets the machine in the same state; measured one after the other, minutes
  // apart, a change of load between them (another job, a clock) passed for a difference between
  // their settings. A measurer that sets the steps gives each round its share of `steps`; one that
  // cannot (a script) runs as it runs. A point's refined figure pools its rounds' steps, and only
  // theirs: its first measurement was made at another time. A round already in the store (a run
  // labelled as the round, ok) is not measured again: a resumed sweep goes on where it stopped.
  const bool more_steps = measurer.sets_steps();
  const int64_t per_round =
      more_steps ? std::max<int64_t>(1, (steps + kRefineRounds - 1) / kRefineRounds) : 0;
  const std::vector<RunRecord> runs = store.runs();
  const auto round_label = [&](const PointRecord& point, int64_t round) {
    return spec.name + " point " + std::to_string(point.index) + " (sweep " +
           std::to_string(sweep.value) + ", re-measured, round " + std::to_string(round) + " of " +
           std::to_string(kRefineRounds) + ")";
  };
  std::map<int64_t, std::vector<RunId>> pooled;  // by point index, in round order
  std::vector<int64_t> measured_now;             // points with a round measured in this call
  for (int64_t round = 1; round <= kRefineRounds && !out.interrupted; ++round) {
    for (const PointRecord& point : finalists) {
      const std::string label = round_label(point, round);
      const auto done = std::find_if(runs.begin(), runs.end(), [&](const RunRecord& r) {
        return r.status == RunStatus::Ok && r.label == label;
      });
      if (done != runs.end()) {
        pooled[point.index].push_back(done->id);
        continue;
      }
      if (cancel != nullptr && cancel->load()) {
        out.interrupted = true;
        break;
      }
      PointRun run;
      run.sweep = sweep;
      run.index = point.index;
      run.config = point.config;
      run.label = label;
      run.steps = per_round;
      const RunRecord result = measurer.measure(run, store, cancel);
      if (result.status == RunStatus::Interrupted && cancel != nullptr && cancel->load()) {
        out.interrupted = true;
        break;
      }
      if (result.status != RunStatus::Ok) continue;  // this round gives nothing for it
      pooled[point.index].push_back(result.id);
      if (std::find(measured_now.begin(), measured_now.end(), point.index) == measured_now.end()) {
        measured_now.push_back(point.index);
      }
    }
  }
  // Each point measured now takes its pooled rounds as its figure (a re-measure that failed in
  // every round keeps the first result).
  for (PointRecord& point : finalists) {
    if (std::find(measured_now.begin(), measured_now.end(), point.index) == measured_now.end()) {
      continue;
    }
    const std::vector<RunId>& rounds = pooled[point.index];
    point.run = rounds.back();
    point.summary = combined_summary(store, rounds);
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
