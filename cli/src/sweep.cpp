// `offtune sweep`: measure min_offload_size x max_fwd_stash_size, resumable, shardable.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/execute.hpp"

namespace offtune::cli {
namespace {

namespace pf = offtune::profiler;
using json = nlohmann::json;

class SweepCommand final : public Command {
 public:
  explicit SweepCommand(CLI::App& parent) {
    app_ = parent.add_subcommand("sweep", "sweep min_offload_size x max_fwd_stash_size");
    add_common_flags(*app_, common_, /*db_required=*/true);
    add_workload_flags(*app_, request_.workload, request_.backend);
    app_->add_option("--min-offload-size", request_.min_offload_sizes,
                     "list or range: 1KiB,1MiB or 1KiB:64MiB:x4")
        ->capture_default_str();
    app_->add_option("--max-fwd-stash-size", request_.max_fwd_stash_sizes,
                     "list or range: 1,4 or 1:8")
        ->capture_default_str();
    add_engine_flags(*app_, request_.engine);
    app_->add_option("--shard", request_.shard, "run only shard i of n (1-based), e.g. 2/4")
        ->capture_default_str();
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
    app_->add_option("--fail-if", fail_if_,
                     "exit 4 if the recommended point crosses: peak>SIZE, slowdown>F, step-ms>MS");
  }

  int run() override {
    const auto thresholds = parse_thresholds(fail_if_, /*allow_slowdown=*/true);
    request_.db = common_.db;
    require_valid(request_);
    // Built before the store is created: a refused model leaves no file behind.
    auto prepared = requests::prepare(request_);
    auto store = open_store(common_, /*write=*/true);
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
    if (common_.json) {
      json pts = json::array();
      for (const auto& p : points) pts.push_back(pf::to_json(p));
      std::cout << json{{"sweep", outcome.sweep.value},
                        {"ran", outcome.ran},
                        {"skipped", outcome.skipped},
                        {"ok", outcome.ok},
                        {"failed", outcome.failed},
                        {"oom", outcome.oom},
                        {"interrupted", outcome.interrupted},
                        {"by_other", outcome.by_other},
                        {"refined", refined.remeasured},
                        {"refine_steps", refined.steps},
                        {"points", pts},
                        {"db", common_.db}}
                       .dump(2)
                << "\n";
    } else if (!common_.quiet) {
      std::cout << "sweep " << outcome.sweep.value << ": ran " << outcome.ran << ", skipped "
                << outcome.skipped << " (already measured), ok " << outcome.ok << ", failed "
                << outcome.failed << ", out of memory " << outcome.oom;
      if (outcome.by_other > 0) {
        std::cout << ", measured by another offtune process " << outcome.by_other;
      }
      std::cout << "\n";
      if (!refined.remeasured.empty()) {
        std::cout << "re-measured with " << refined.steps
                  << " steps, because the recommendation could not tell them apart: point"
                  << (refined.remeasured.size() == 1 ? " " : "s ")
                  << join_indices(refined.remeasured) << "\n";
      }
      print_points(points);
    }
    if (outcome.interrupted) {
      std::cerr << "interrupted: run the same command again to resume\n";
      return kInterrupted;
    }
    const auto rec = pf::recommend(points, {});
    if (!common_.quiet && !common_.json) print_recommendation(rec);
    if (!thresholds.empty()) {
      if (rec.chosen && rec.baseline) {
        const auto crossed = check_thresholds(thresholds, rec.chosen->summary,
                                              pf::slowdown(*rec.chosen, *rec.baseline));
        for (const auto& m : crossed) std::cerr << "fail-if: " << m << "\n";
        if (!crossed.empty()) return kThreshold;
      }
    }
    return kOk;
  }

 private:
  void print_recommendation(const pf::Recommendation& rec) const {
    if (rec.chosen && rec.chosen->config.offload) {
      std::cout << "recommended: min_offload_size "
                << pf::format_size(rec.chosen->config.min_offload_size) << ", max_fwd_stash_size "
                << rec.chosen->config.max_fwd_stash_size;
      if (rec.chosen->config.semantics != "offtune") {
        std::cout << " (" << rec.chosen->config.semantics << " semantics)";
      }
      std::cout << "\n  why: " << rec.rationale << "\n";
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
      std::cout << "recommended: no offloading\n  why: " << rec.rationale << "\n";
    } else {
      std::cout << "no recommendation: " << rec.rationale << "\n";
    }
    std::cout << "  noise: " << rec.noise.describe() << "\n";
    std::cout << "details: offtune recommend --db " << common_.db << "\n";
    std::cout << "store: " << common_.db << "\n";
  }

  Common common_;
  requests::SweepRequest request_;
  std::vector<std::string> fail_if_;
};

}  // namespace

std::unique_ptr<Command> add_sweep_command(CLI::App& app) {
  return std::make_unique<SweepCommand>(app);
}

}  // namespace offtune::cli
