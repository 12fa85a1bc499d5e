// `offtune sweep`: measure min_offload_size x max_fwd_stash_size, resumable, shardable, on a
// built-in model in this process or on the user's own training script (--script), a fresh process
// per point (profiler/script_point.hpp; docs/script-sweeps.md).
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <limits>

#include "cli.hpp"
#include "offtune/cli/command_line.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/script_point.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/execute.hpp"

namespace offtune::cli {
namespace {

class SweepCommand final : public StoreCommand {
 public:
  explicit SweepCommand(CLI::App& parent)
      : StoreCommand(
            parent, "sweep",
            "sweep min_offload_size x max_fwd_stash_size on a built-in model, or on your own "
            "training script (--script; docs/script-sweeps.md)",
            StoreUse::Writes) {
    add_workload_flags(*app_, request_.workload, request_.backend);
    add_knob_flags(*app_, request_.knobs, /*sweep=*/true);
    app_->add_option("--shard", request_.shard,
                     "run only shard i of n (1-based), e.g. 2/4; auto: from the scheduler "
                     "(SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT of a Slurm job array, or "
                     "JOB_COMPLETION_INDEX with OFFTUNE_SHARD_COUNT of a Kubernetes Indexed Job)")
        ->capture_default_str();
    app_->add_option("--script", request_.script,
                     "sweep your own training script: each point runs /bin/sh -c CMD once, in a "
                     "fresh process, its settings in OFFTUNE_POINT and where to record in "
                     "OFFTUNE_RECORD (the offtune Python package reads them); the baseline runs "
                     "it with offloading off. The sweep's identity includes CMD and a hash of the "
                     "script file. Not with --model, --batch, --seq, --dtype, --seed, --steps, "
                     "--optimizer, --input-spec, --lora-rank, --blocks, --checkpoint, "
                     "--layer-offload, --offload boundaries, --device-capacity");
    app_->add_option("--timeout-per-point", request_.timeout_per_point,
                     "with --script: seconds a point may run; then its process group gets SIGTERM, "
                     "and SIGKILL 10 s later, and the point is recorded as failed");
    app_->add_option("--name", request_.name, "a name for the sweep")->capture_default_str();
    app_->add_option("--max-points", request_.max_points,
                     "refuse a grid of more points than this (up to " +
                         std::to_string(requests::kMaxMaxPoints) + ")")
        ->capture_default_str();
    app_->add_option("--refine-steps", request_.refine_steps,
                     "when the recommended point is tied with others within noise, measure those "
                     "finalists again with this many steps (0: never; never with --device-model, "
                     "whose times are exact)")
        ->capture_default_str();
    app_->add_option("--repeat", request_.repeat,
                     "measure each point this many times, in rounds over the whole grid (so that "
                     "drift falls on every point alike); a point's step time covers all its runs")
        ->capture_default_str();
    app_->add_flag("--predict-first", request_.predict_first,
                   "predict every point from one recorded step, then measure only the points "
                   "that matter: the predicted front and its grid neighbours (needs "
                   "--device-model; run again without it to measure the rest)");
    app_->add_flag("--memory-history", request_.memory_history,
                   "record each point's allocator history over its measured steps, for `export "
                   "--format memory-snapshot --run N` (host-sim; not with --script)");
    app_->add_option(
        "--fail-if", fail_if_,
        "exit 4 if the recommended point crosses: peak>SIZE (allocated), reserved>SIZE, "
        "slowdown>F, step-ms>MS "
        "(also when there is no recommended point to check)");
  }

  int run() override {
    const auto thresholds = parse_thresholds(fail_if_, /*allow_slowdown=*/true);
    request_.db = common_.db;
    request_.flags_given.clear();
    for (const CLI::Option* opt : app_->get_options()) {
      if (opt->count() > 0 && !opt->get_lnames().empty()) {
        request_.flags_given.push_back("--" + opt->get_lnames().front());
      }
    }
    // Built before the store is created: a refused model leaves no file behind.
    auto prepared = requests::prepare(requests::require_valid(request_));
    if (prepared.script) prepared.script->pass_stderr = !common_.quiet && !common_.json;
    if (!common_.quiet) {
      for (const auto& w : prepared.warnings) std::cerr << "warning: " << w << "\n";
    }
    auto store = open_store(common_, /*write=*/true);
    if (!common_.quiet) {
      if (const auto note = requests::script_identity_note(prepared, *store); !note.empty()) {
        std::cerr << note << "\n";
      }
    }
    const bool progress = show_progress(common_);
    pf::RefineOutcome refined;
    const auto outcome = requests::execute(
        prepared, *store,
        [&](const pf::SweepProgress& p) {
          if (!progress) return;
          std::cerr << "\r[sweep] " << p.done << "/" << p.total << " points" << std::flush;
          if (p.done == p.total) std::cerr << "\n";
        },
        &g_cancel, &refined);
    const auto points = store->points(outcome.sweep);
    const auto& predictions = prepared.predictions;
    if (common_.json) {
      json pts = json::array();
      for (const auto& p : points) {
        json j = pf::to_json(p);
        if (predictions && p.index < static_cast<int64_t>(predictions->points.size())) {
          const auto& q = predictions->points[static_cast<size_t>(p.index)];
          j["predicted"] = {{"step_ms", q.step_ms()},
                            {"peak_allocated", q.peak_allocated},
                            {"hidden_copy_pct", q.hidden_copy_pct}};
        }
        pts.push_back(std::move(j));
      }
      std::cout << json{{"sweep", outcome.sweep.value},
                        {"ran", outcome.ran},
                        {"skipped", outcome.skipped},
                        {"ok", outcome.ok},
                        {"failed", outcome.failed},
                        {"oom", outcome.oom},
                        {"interrupted", outcome.interrupted},
                        {"repeated", outcome.repeated},
                        {"by_other", outcome.by_other},
                        {"refined", refined.remeasured},
                        {"refine_steps", refined.steps},
                        {"points", pts},
                        {"predict_first", predictions ? prediction_json(*predictions) : json()},
                        {"db", common_.db}}
                       .dump(2)
                << "\n";
    } else if (common_.quiet) {
      // One line per shard even so: a scheduler's task log then says what the task measured and
      // whether it resumed (skipped: measured before), and nothing else.
      if (prepared.spec.shard.count > 1) {
        std::cout << "shard " << prepared.spec.shard.index << "/" << prepared.spec.shard.count
                  << ": " << requests::sweep_summary(outcome, request_.repeat) << "\n";
      }
    } else {
      // The name is not part of a sweep's identity: the same sweep under another name resumes it.
      if (const auto found = store->sweep(outcome.sweep); found && found->name != request_.name) {
        std::cout << "note: this is sweep " << outcome.sweep.value << " '" << found->name
                  << "' (the same workload, grid and backend), resumed; --name '" << request_.name
                  << "' does not make another one\n";
      }
      std::cout << requests::sweep_summary(outcome, request_.repeat) << "\n";
      if (!refined.remeasured.empty()) {
        std::cout << "re-measured with " << refined.steps
                  << " steps, because the recommendation could not tell them apart: point"
                  << (refined.remeasured.size() == 1 ? " " : "s ")
                  << join_indices(refined.remeasured) << "\n";
      }
      print_points(points);
      if (predictions) print_predictions(*predictions, points);
    }
    if (outcome.interrupted) {
      std::cerr << "interrupted: run the same command again to resume\n";
      return kInterrupted;
    }
    const auto rec = pf::recommend(points, {});
    if (!common_.quiet && !common_.json) print_recommendation(rec, points);
    // Nothing to compare against, or nothing measured: the sweep failed, whatever its points say.
    if (const std::string why = failure(points); !why.empty()) {
      std::cerr << "error: " << why << "\n";
      return kFailed;
    }
    if (!thresholds.empty()) {
      // The gate checks the recommended point: without one, it fails (nothing was checked).
      if (!rec.chosen) {
        std::cerr << "fail-if: no recommended point to check (" << rec.rationale << ")"
                  << no_baseline_hint(points) << "\n";
        return kThreshold;
      }
      const auto crossed =
          check_thresholds(thresholds, rec.chosen->summary,
                           rec.baseline ? pf::slowdown(*rec.chosen, *rec.baseline)
                                        : std::numeric_limits<double>::quiet_NaN());
      for (const auto& m : crossed) std::cerr << "fail-if: " << m << "\n";
      if (!crossed.empty()) return kThreshold;
    }
    return kOk;
  }

 private:
  static json prediction_json(const requests::SweepPredictions& p) {
    json all = json::array();
    for (size_t i = 0; i < p.points.size(); ++i) {
      const auto& q = p.points[i];
      all.push_back({{"index", i},
                     {"step_ms", q.step_ms()},
                     {"peak_allocated", q.peak_allocated},
                     {"hidden_copy_pct", q.hidden_copy_pct}});
    }
    return {{"measured", p.chosen},
            {"source", p.source},
            {"record_ms", p.record_ms},
            {"predict_ms", p.predict_ms},
            {"predicted", all}};
  }

  // Predicted next to measured for every point measured, with the error of each.
  static void print_predictions(const requests::SweepPredictions& p,
                                const std::vector<pf::PointRecord>& points) {
    std::printf(
        "predicted first: %zu points from recorded steps (%s; recording %.0f ms, "
        "predicting %.1f ms); measured the %zu that matter (the predicted front and its "
        "neighbours)\n",
        p.points.size(), p.source.c_str(), p.record_ms, p.predict_ms, p.chosen.size());
    std::printf("%5s %12s %12s %8s %14s %14s %8s\n", "index", "predicted ms", "measured ms",
                "error %", "predicted peak", "measured peak", "error %");
    for (const auto& m : points) {
      if (m.status != pf::PointStatus::Ok || m.index >= static_cast<int64_t>(p.points.size())) {
        continue;
      }
      const auto& q = p.points[static_cast<size_t>(m.index)];
      const double ms = m.summary.step_ms_median;
      const auto peak = static_cast<double>(m.summary.peak_allocated);
      std::printf("%5lld %12.3f %12.3f %8.2f %14lld %14lld %8.2f\n",
                  static_cast<long long>(m.index), q.step_ms(), ms,
                  ms > 0 ? 100.0 * (q.step_ms() - ms) / ms : 0.0,
                  static_cast<long long>(q.peak_allocated),
                  static_cast<long long>(m.summary.peak_allocated),
                  peak > 0 ? 100.0 * (static_cast<double>(q.peak_allocated) - peak) / peak : 0.0);
    }
  }

  // Why the sweep failed as a whole: its baseline failed (not out of memory, which is a result),
  // or every point it finished failed; empty otherwise. The first error says why.
  static std::string failure(const std::vector<pf::PointRecord>& points) {
    const pf::PointRecord* first_failed = nullptr;
    bool any_finished = false, any_not_failed = false;
    for (const auto& p : points) {
      if (p.status == pf::PointStatus::Pending) continue;
      any_finished = true;
      if (p.status != pf::PointStatus::Failed) {
        any_not_failed = true;
        continue;
      }
      if (!first_failed) first_failed = &p;
      if (is_baseline(p.config))
        return "the baseline failed, so no point can be judged: " + p.error;
    }
    if (!any_finished || any_not_failed) return "";
    return "every point failed: " + first_failed->error;
  }

  // When the baseline ran out of memory, where a recommendation can still be had.
  std::string no_baseline_hint(const std::vector<pf::PointRecord>& points) const {
    for (const auto& p : points) {
      if (!p.config.offload && p.status == pf::PointStatus::OutOfMemory) {
        return "; the baseline ran out of memory: offtune recommend --db " + common_.db +
               " --memory-budget SIZE picks the fastest point that fits SIZE";
      }
    }
    return "";
  }

  void print_recommendation(const pf::Recommendation& rec,
                            const std::vector<pf::PointRecord>& points) const {
    if (rec.chosen && rec.chosen->config.offload) {
      std::cout << "recommended: min_offload_size "
                << pf::format_size(rec.chosen->config.min_offload_size) << ", max_fwd_stash_size "
                << rec.chosen->config.max_fwd_stash_size;
      if (rec.chosen->config.semantics != Semantics::Offtune) {
        std::cout << " (" << to_string(rec.chosen->config.semantics) << " semantics)";
      }
      // Its variant as the points table names it (with the knobs the sweep varies).
      const auto texts = variant_texts(points);
      for (size_t i = 0; i < points.size(); ++i) {
        if (points[i].index == rec.chosen->index && !texts[i].empty())
          std::cout << ", " << texts[i];
      }
      std::cout << "\n  why: " << rec.rationale << "\n";
      std::cout << "  memory: " << pf::describe_memory(rec.chosen->summary) << "\n";
      const auto line = [](const char* tool, const std::optional<pf::PointRecord>& p) {
        std::cout << "  " << tool << ": ";
        if (!p) {
          std::cout << "no point under its semantics satisfies the constraint\n";
        } else if (!p->config.offload) {
          std::cout << "no offloading\n";
        } else {
          std::cout << "point " << p->index << ", min_offload_size "
                    << pf::format_size(p->config.min_offload_size) << ", max_fwd_stash_size "
                    << p->config.max_fwd_stash_size << "\n";
        }
      };
      if (rec.mixed_semantics) {
        line("C++ (offtune semantics)", rec.offtune_choice);
        line("TRL and Axolotl (trl semantics)", rec.trl_choice);
      }
    } else if (rec.chosen) {
      const std::string v = pf::describe_variant(rec.chosen->config);
      std::cout << "recommended: no offloading" << (v.empty() ? "" : ", " + v)
                << "\n  why: " << rec.rationale << "\n";
      std::cout << "  memory: " << pf::describe_memory(rec.chosen->summary) << "\n";
    } else {
      std::cout << "no recommendation: " << rec.rationale << no_baseline_hint(points) << "\n";
    }
    std::cout << "  noise: " << rec.noise.describe() << "\n";
    std::cout << "details: offtune recommend --db " << common_.db << "\n";
    std::cout << "store: " << common_.db << "\n";
  }

  requests::SweepRequest request_;
  std::vector<std::string> fail_if_;
};

}  // namespace

void kill_running_script() noexcept {
  if (const int group = pf::running_script_group(); group > 0) ::kill(-group, SIGKILL);
}

std::unique_ptr<Command> add_sweep_command(CLI::App& app) {
  return std::make_unique<SweepCommand>(app);
}

}  // namespace offtune::cli
