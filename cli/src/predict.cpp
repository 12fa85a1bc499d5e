// `offtune predict`: every point of a grid (min_offload_size x max_fwd_stash_size x prefetch x
// link, semantics, checkpointing and what is offloaded) predicted from recorded steps, without
// running them
// (profiler/predict.hpp).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/script_point.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/execute.hpp"

namespace offtune::cli {
namespace {

struct Point {
  pf::EngineConfig config;
  LinkModel link;
  pf::Prediction predicted;
  bool front = false;
  bool over_capacity = false;  // predicted peak beyond --device-capacity
};

[[noreturn]] void refuse(const std::string& field, const std::string& message) {
  throw requests::RequestError(std::vector<requests::FieldError>{{field, message}});
}

class PredictCommand final : public Command {
 public:
  explicit PredictCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(
        "predict",
        "predict step time, peak memory and hidden copies of every point of a grid from a "
        "recorded step (host-sim: on a --device-model's clock, or on this CPU's), without running "
        "them");
    app_->add_flag("--quiet,-q", quiet_, "no text output");
    app_->add_flag("--json", json_, "print the result as JSON");
    add_workload_flags(*app_, request_.workload, request_.backend);
    // Steps are recorded (after --warmup) and nothing is measured on a GPU: no --steps, no
    // --collector. The knobs' axes as a sweep takes them; of the engine variants, checkpointing
    // and what is offloaded are recorded and replayed, the others (the tier, layer offloading,
    // verify, the allocator's segments) are not flags here.
    app_->remove_option(app_->get_option("--steps"));
    app_->remove_option(app_->get_option("--collector"));
    add_knob_flags(*app_, request_.knobs, /*sweep=*/true);
    for (const Knob& k : knob_table()) {
      if (k.variant && !k.flag.empty() && k.key != "checkpoint" && k.key != "offload_set") {
        app_->remove_option(app_->get_option(std::string(k.flag)));
      }
    }
    app_->add_option("--script", request_.script,
                     "predict your own training script: runs /bin/sh -c CMD once per semantics "
                     "on host-sim, where offtune's Python package records its steps (the drop-in's "
                     "or a scope's entries mark them; the script must run --warmup + 2 or more), "
                     "then replays them for every point. Not with the workload flags, "
                     "--checkpoint or --offload boundaries (the script does its own)");
    app_->add_option("--timeout-per-point", request_.timeout_per_point,
                     "with --script: seconds the script may run; then its process group gets "
                     "SIGTERM, and SIGKILL 10 s later");
    app_->add_option("--max-points", request_.max_points,
                     "refuse a grid of more points than this (up to " +
                         std::to_string(requests::kMaxMaxPoints) + ")")
        ->capture_default_str();
  }

  int run() override {
    request_.refine_steps = 0;
    if (request_.backend.backend == "cuda") {
      refuse("--backend",
             "offtune predict records a step on host-sim (on a --device-model's clock, or on this "
             "CPU's): on a GPU, measure the points with offtune sweep");
    }
    const auto valid = requests::require_valid(request_);
    auto prepared = requests::prepare(valid);
    // Each point over its own link where the grid has a link axis (the configs name it).
    const bool link_axis = prepared.spec.grid.axes.contains("link");
    std::vector<Point> grid;
    std::vector<std::string> link_names;
    for (const auto& c : pf::expand_grid(prepared.spec.grid)) {
      grid.push_back({c, link_axis ? c.link.model : prepared.spec.base.link, {}, false});
      if (c.offload &&
          std::find(link_names.begin(), link_names.end(), c.link.name) == link_names.end()) {
        link_names.push_back(c.link.name);
      }
    }
    if (link_names.empty()) link_names.push_back(prepared.spec.grid.base.link.name);

    std::vector<pf::EngineConfig> configs;
    std::vector<LinkModel> point_links;
    for (const auto& p : grid) {
      configs.push_back(p.config);
      point_links.push_back(p.link);
    }
    if (prepared.script) prepared.script->pass_stderr = !quiet_ && !json_;
    const auto predicted_grid =
        prepared.script ? pf::predict_script_grid(*prepared.script, configs, point_links, &g_cancel)
                        : pf::predict_grid(*prepared.workload, prepared.spec.workload,
                                           prepared.spec.base, configs, point_links);
    const double record_ms = predicted_grid.record_ms;
    const double predict_ms = predicted_grid.predict_ms;
    const std::vector<pf::Prediction>& predicted = predicted_grid.points;
    for (size_t i = 0; i < grid.size(); ++i) grid[i].predicted = predicted[i];

    // The replay has no capacity: a point whose predicted peak device total (its peak reserved,
    // the step's allocations through the caching allocator's model, plus the device model's
    // context) is beyond --device-capacity would run out of memory, and the recommendation is the
    // fastest point under it.
    const int64_t capacity = request_.backend.device_capacity.empty()
                                 ? 0
                                 : pf::parse_size(request_.backend.device_capacity);
    const int64_t context =
        prepared.spec.device_model ? prepared.spec.device_model->context_bytes : 0;
    std::vector<pf::PointRecord> records;
    for (size_t i = 0; i < grid.size(); ++i) {
      records.push_back(pf::as_point(static_cast<int64_t>(i), grid[i].config, grid[i].predicted));
      records.back().summary.device_outside = context;
      grid[i].over_capacity =
          capacity > 0 && pf::peak_device_total(records.back().summary) > capacity;
    }
    const std::vector<bool> front = pf::predicted_front(predicted);
    for (size_t i = 0; i < grid.size(); ++i) grid[i].front = front[i];
    // With a capacity the question is the fastest point that fits it (a memory budget); without,
    // the recommender's default (the lowest peak within a slowdown of the baseline), on the peak
    // device total as `recommend` judges it.
    pf::Constraint constraint;
    if (capacity > 0) constraint.memory_budget = capacity;
    const auto rec = pf::recommend(records, constraint);
    const double base_ms = grid.front().predicted.step_ms();
    // The model and every link predicted (the run environment names only the first link).
    std::string device = prepared.spec.device_model
                             ? "host-sim modelling " + prepared.spec.device_model->title
                             : std::string("this CPU, host-sim");
    device += link_names.size() == 1 ? " (link " : " (links ";
    for (size_t l = 0; l < link_names.size(); ++l) device += (l ? ", " : "") + link_names[l];
    device += ")";

    if (json_) {
      json pts = json::array();
      for (size_t i = 0; i < grid.size(); ++i) {
        const auto& p = grid[i];
        pts.push_back({{"index", i},
                       {"config", pf::to_json(p.config)},
                       {"step_ms", p.predicted.step_ms()},
                       {"slowdown", base_ms > 0 ? p.predicted.step_ms() / base_ms : 0.0},
                       {"peak_allocated", p.predicted.peak_allocated},
                       {"peak_reserved", p.predicted.peak_reserved},
                       {"hidden_copy_pct", p.predicted.hidden_copy_pct},
                       {"offloaded_bytes", p.predicted.offloaded_bytes},
                       {"reloaded_bytes", p.predicted.reloaded_bytes},
                       {"window_waits", p.predicted.window_waits},
                       {"stalled_ns", p.predicted.stalled_ns},
                       {"compute_ms", static_cast<double>(p.predicted.compute_ns) / 1e6},
                       {"bound_ms", p.predicted.bound_ms()},
                       {"front", p.front},
                       {"over_capacity", p.over_capacity}});
      }
      json out{{"workload", pf::to_json(prepared.spec.workload)},
               {"device", device},
               {"source", predicted_grid.source},
               {"record_ms", record_ms},
               {"predict_ms", predict_ms},
               {"points", pts},
               {"recommended", rec.chosen ? json(rec.chosen->index) : json(nullptr)},
               {"rationale", rec.rationale}};
      std::cout << out.dump(2) << "\n";
      return kOk;
    }
    if (quiet_) return kOk;
    const auto& w = prepared.spec.workload;
    const std::string what = prepared.script ? "your script"
                                             : w.model + " (batch " + std::to_string(w.batch) +
                                                   ", seq " + std::to_string(w.seq) + ")";
    std::printf(
        "predicted %zu points of %s on %s from %zu recorded trace%s: recording %.0f ms, "
        "predicting %.1f ms\n",
        grid.size(), what.c_str(), device.c_str(), predicted_grid.traces,
        predicted_grid.traces == 1 ? "" : "s", record_ms, predict_ms);
    std::printf("  source: %s, replayed\n", predicted_grid.source.c_str());
    const bool rules = std::any_of(grid.begin(), grid.end(), [](const Point& p) {
      return p.config.offload && p.config.semantics != Semantics::Offtune;
    });
    const bool variants = std::any_of(grid.begin(), grid.end(), [](const Point& p) {
      return p.config.checkpoint.enabled() || p.config.offload_set != OffloadSet::All;
    });
    std::printf("%5s %-8s%s%s %12s %7s %9s %-12s %10s %10s %7s %12s %12s %12s %13s\n", "index",
                "offload", rules ? " rules  " : "", variants ? " variant           " : "",
                "min_offload", "window", "prefetch", "link", "step ms", "bound ms", "x base",
                "peak alloc", "bytes", "peak resv", "hidden copy %");
    for (size_t i = 0; i < grid.size(); ++i) {
      const auto& p = grid[i];
      const auto& c = p.config;
      char hidden[16] = "n/a";
      if (p.predicted.copies > 0) {
        std::snprintf(hidden, sizeof hidden, "%.1f", p.predicted.hidden_copy_pct);
      }
      char rule[16] = "";
      if (rules) {
        std::snprintf(rule, sizeof rule, " %-7s",
                      c.offload ? std::string(to_string(c.semantics)).c_str() : "-");
      }
      std::string variant;
      if (variants) {
        variant = "ckpt " + to_string(c.checkpoint);
        if (c.offload && c.offload_set != OffloadSet::All) {
          variant += ", " + std::string(to_string(c.offload_set));
        }
        char cell[32];
        std::snprintf(cell, sizeof cell, " %-18s", variant.c_str());
        variant = cell;
      }
      std::printf("%5zu %-8s%s%s %12s %7s %9s %-12s %10.3f %10.3f %7.2f %12s %12lld %12s %13s%s\n",
                  i, c.offload ? "yes" : "no", rule, variant.c_str(),
                  c.offload ? pf::format_size(c.min_offload_size).c_str() : "-",
                  c.offload ? std::to_string(c.max_fwd_stash_size).c_str() : "-",
                  c.offload ? std::to_string(c.prefetch).c_str() : "-",
                  c.offload ? c.link.name.c_str() : "-", p.predicted.step_ms(),
                  p.predicted.bound_ms(), base_ms > 0 ? p.predicted.step_ms() / base_ms : 0.0,
                  pf::format_size(p.predicted.peak_allocated).c_str(),
                  static_cast<long long>(p.predicted.peak_allocated),
                  pf::format_size(p.predicted.peak_reserved).c_str(), hidden,
                  p.over_capacity ? "  over capacity" : (p.front ? "  front" : ""));
    }
    if (rec.chosen) {
      const auto& c = rec.chosen->config;
      if (c.offload) {
        std::printf(
            "recommended (predicted): point %lld, min_offload_size %s, max_fwd_stash_size "
            "%lld, prefetch %lld, link %s\n",
            static_cast<long long>(rec.chosen->index), pf::format_size(c.min_offload_size).c_str(),
            static_cast<long long>(c.max_fwd_stash_size), static_cast<long long>(c.prefetch),
            c.link.name.c_str());
      } else {
        std::printf("recommended (predicted): no offloading\n");
      }
      std::printf("  why: %s\n", rec.rationale.c_str());
    } else {
      std::printf("no recommendation: %s\n", rec.rationale.c_str());
    }
    if (prepared.spec.device_model) {
      std::printf(
          "  how sure: each figure is the recorded step replayed under the point's rules on the "
          "device model's clock: a measured host-sim run of the point gives the same figures "
          "(offtune-bench --section predict); how close they are to the GPU itself is the "
          "device model's accuracy (docs/device-model.md).");
    } else {
      std::printf(
          "  how sure: each figure is the recorded steps' median replayed under the point's "
          "rules on this CPU's clock: peak allocated is exact, step time as measured in "
          "offtune-bench --section predict-cpu (docs/device-model.md).");
    }
    std::printf(
        " bound ms: no schedule of the point's copies over its link is faster. front: no other "
        "point is predicted both as fast and as small (of equal points, the first). Measure the "
        "front and its neighbours: offtune sweep --predict-first\n");
    return kOk;
  }

 private:
  bool quiet_ = false;
  bool json_ = false;
  requests::SweepRequest request_;
};

}  // namespace

std::unique_ptr<Command> add_predict_command(CLI::App& app) {
  return std::make_unique<PredictCommand>(app);
}

}  // namespace offtune::cli
