// `offtune recommend`: pick settings from a sweep under a constraint, with the snippets to use
// them.
#include <iostream>

#include "cli.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::cli {
namespace {

class RecommendCommand final : public StoreCommand {
 public:
  explicit RecommendCommand(CLI::App& parent)
      : StoreCommand(parent, "recommend", "pick settings from a sweep", StoreUse::Reads) {
    app_->add_option("--sweep", sweep_id_, "sweep id, from 1 (default: the latest)");
    auto* budget =
        app_->add_option("--memory-budget", budget_,
                         "fastest point whose peak device memory fits, e.g. 8GiB: peak reserved "
                         "plus the memory outside the allocator (the device total, what a GPU "
                         "runs out of) unless --budget-on says otherwise");
    app_->add_option("--max-slowdown", max_slowdown_,
                     "lowest-memory point within this step-time factor (default " +
                         pf::default_max_slowdown_text() + ")")
        ->excludes(budget);
    app_->add_option("--budget-on", budget_on_,
                     "the peak a memory budget and the front are judged on: total (default: "
                     "peak reserved plus the CUDA context and libraries), reserved (the bytes "
                     "the caching allocator holds) or allocated (the bytes of live tensors)");
    app_->add_option("--host-budget", host_budget_,
                     "only points whose host memory fits, e.g. 64GiB, per process: its resident "
                     "peak where measured (cuda), else offtune's pinned pool or its host copies "
                     "at their peak; with either constraint");
    app_->add_option("--memory-tolerance", memory_tolerance_,
                     "peaks that differ by at most this percentage are equal (default 1%; 0: "
                     "exact)");
  }

  int run() override {
    // Every value is checked before the store is opened.
    const int64_t id = sweep_id_.empty() ? -1 : requests::parse_id("--sweep", sweep_id_);
    pf::Constraint constraint;
    if (!budget_.empty()) {
      constraint.memory_budget = requests::parse_memory_budget("--memory-budget", budget_);
    }
    if (!budget_on_.empty()) {
      constraint.memory = requests::parse_memory_figure("--budget-on", budget_on_);
    }
    if (!host_budget_.empty()) {
      constraint.host_budget = requests::parse_memory_budget("--host-budget", host_budget_);
    }
    if (!max_slowdown_.empty()) {
      constraint.max_slowdown = requests::parse_positive("--max-slowdown", max_slowdown_);
    }
    if (!memory_tolerance_.empty()) {
      constraint.memory_tolerance =
          requests::parse_tolerance_percent("--memory-tolerance", memory_tolerance_);
    }
    auto store = open_store(common_, /*write=*/false);
    auto sweep = pick_sweep(*store, id);
    if (!sweep) throw UsageError("no sweep in " + common_.db + (id >= 0 ? " with that id" : ""));
    const auto rec = pf::recommend(store->points(sweep->id), constraint);
    if (common_.json) {
      json front = json::array();
      for (const auto& p : rec.front) front.push_back(pf::to_json(p));
      json ties = json::array();
      for (const auto& p : rec.ties) ties.push_back(p.index);
      json noise = nullptr;
      if (rec.noise.points > 0) {
        noise = {{"points", rec.noise.points},
                 {"min_ratio", rec.noise.min_ratio},
                 {"max_ratio", rec.noise.max_ratio}};
      }
      json out{{"sweep", sweep->id.value},
               {"constraint", rec.constraint.describe()},
               {"memory_figure", pf::to_string(rec.constraint.memory)},
               {"memory_tolerance", rec.constraint.memory_tolerance},
               {"rationale", rec.rationale},
               {"front", front},
               {"ties", ties},
               {"within_noise", !rec.ties.empty() && !rec.noise.deterministic},
               {"deterministic", rec.noise.deterministic},
               {"noise", noise}};
      if (rec.chosen) {
        out["point"] = rec.chosen->index;
        out["min_offload_size"] = rec.chosen->config.min_offload_size;
        out["max_fwd_stash_size"] = rec.chosen->config.max_fwd_stash_size;
        out["offload"] = rec.chosen->config.offload;
        out["semantics"] = rec.chosen->config.semantics;
        // The engine variant ("" for plain offloading) and every setting of the chosen point.
        out["variant"] = pf::describe_variant(rec.chosen->config);
        out["config"] = pf::to_json(rec.chosen->config);
        out["step_ms"] = rec.chosen->summary.step_ms_median;
        const pf::StepInterval ci = pf::step_interval(rec.chosen->summary);
        out["step_ms_ci"] = {ci.low, ci.high};
        out["step_ms_ci_level"] = ci.level > 0 ? json(ci.level) : json();
        // Every memory figure of the chosen point, named as in the store and docs/metrics.md.
        const pf::RunSummary& s = rec.chosen->summary;
        out["peak_allocated"] = s.peak_allocated;
        out["peak_reserved"] = s.peak_reserved;
        out["device_outside"] = s.device_outside;
        out["peak_device_total"] = pf::peak_device_total(s);
        out["pinned_bytes"] = s.pinned_bytes;
        out["host_bytes_peak"] = s.host_bytes_peak;
        out["host_rss_peak"] = s.host_rss_peak > 0 ? json(s.host_rss_peak) : json();
        out["budget_on"] = pf::to_string(rec.constraint.memory);
        if (rec.baseline) out["slowdown"] = pf::slowdown(*rec.chosen, *rec.baseline);
        out["snippets"] = {{"cpp", rec.snippets.cpp},
                           {"trl", rec.snippets.trl},
                           {"axolotl", rec.snippets.axolotl}};
        if (rec.mixed_semantics) {
          // Which point each snippet came from (semantics as an axis: each tool's own rules).
          const auto index = [](const std::optional<pf::PointRecord>& p) -> json {
            return p ? json(p->index) : json(nullptr);
          };
          out["snippet_points"] = {{"cpp", index(rec.offtune_choice)},
                                   {"trl", index(rec.trl_choice)},
                                   {"axolotl", index(rec.trl_choice)}};
        }
      }
      std::cout << out.dump(2) << "\n";
    } else if (!common_.quiet) {  // --quiet: the exit status alone (5: no point satisfies it)
      std::cout << "sweep " << sweep->id.value << " (" << sweep->workload.model << "), constraint "
                << rec.constraint.describe() << "\nPareto front (step time vs peak "
                << pf::to_string(rec.constraint.memory) << " device memory):\n";
      print_points(rec.front);
      std::cout << "\n" << rec.rationale << "\n";
      if (rec.chosen) std::cout << "Memory: " << pf::describe_memory(rec.chosen->summary) << ".\n";
      if (!rec.ties.empty()) {
        std::vector<int64_t> indices;
        for (const auto& p : rec.ties) indices.push_back(p.index);
        const char* tied = rec.noise.deterministic ? "Tied" : "Tied within noise";
        std::cout << tied << (indices.size() == 1 ? ": point " : ": points ")
                  << join_indices(indices) << "\n";
      }
      std::cout << "Noise: " << rec.noise.describe() << ".\n";
      if (rec.chosen) {
        std::cout << "\n--- C++ ---\n"
                  << rec.snippets.cpp << "\n--- TRL ---\n"
                  << rec.snippets.trl << "\n--- Axolotl ---\n"
                  << rec.snippets.axolotl;
      }
    }
    return rec.chosen ? kOk : kNoChoice;
  }

 private:
  std::string sweep_id_;
  std::string budget_;
  std::string budget_on_;
  std::string host_budget_;
  std::string max_slowdown_;
  std::string memory_tolerance_;
};

}  // namespace

std::unique_ptr<Command> add_recommend_command(CLI::App& app) {
  return std::make_unique<RecommendCommand>(app);
}

}  // namespace offtune::cli
