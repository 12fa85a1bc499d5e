// `offtune run`: measure one configuration and record it.
#include <c10/util/Exception.h>

#include <iomanip>
#include <iostream>

#include "cli.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/execute.hpp"

namespace offtune::cli {
namespace {

class RunCommand final : public StoreCommand {
 public:
  explicit RunCommand(CLI::App& parent)
      : StoreCommand(parent, "run", "measure one configuration and record it", StoreUse::Writes) {
    add_workload_flags(*app_, request_.workload, request_.backend);
    add_knob_flags(*app_, request_.knobs, /*sweep=*/false);
    app_->add_flag("--no-offload", request_.no_offload, "measure the baseline without offloading");
    app_->add_flag("--memory-history", request_.memory_history,
                   "record the allocator's history over the measured steps, for `export "
                   "--format memory-snapshot` (host-sim)");
    app_->add_option("--fail-if", fail_if_,
                     "exit 4 if crossed: peak>SIZE (allocated), reserved>SIZE, step-ms>MS");
  }

  int run() override {
    const auto thresholds = parse_thresholds(fail_if_, /*allow_slowdown=*/false);
    request_.db = common_.db;
    // The model is built (a TorchScript file loaded) before the store is created, so that a
    // refused model leaves no file behind.
    auto run = requests::prepare(requests::require_valid(request_));
    if (!common_.quiet) {
      for (const auto& w : run.warnings) std::cerr << "warning: " << w << "\n";
    }
    auto store = open_store(common_, /*write=*/true);
    if (show_progress(common_)) std::cerr << "running " << run.spec.workload.model << "...\n";
    const auto out = requests::execute(run, *store);
    const auto& r = out.record;
    if (!common_.quiet && !common_.json) std::cerr << "collector: " << out.collector_status << "\n";
    if (common_.json) {
      std::cout << json{{"run", r.id.value},
                        {"status", pf::to_string(r.status)},
                        {"error", r.error},
                        {"config", pf::to_json(r.config)},
                        {"summary", pf::to_json(r.summary)},
                        {"db", common_.db}}
                       .dump(2)
                << "\n";
    } else if (!common_.quiet) {
      std::cout << "run " << r.id.value << ": " << pf::to_string(r.status);
      if (!r.error.empty()) std::cout << " (" << r.error << ")";
      // A run that did not finish has no figures to show (they would read as measured zeros).
      if (r.status == pf::RunStatus::Ok) {
        std::cout << std::fixed << std::setprecision(2) << "\n  step " << r.summary.step_ms_median;
        if (const DeviceModel* dm = host_sim::device_model()) {
          std::cout << " ms (modelled for " << dm->title << ")";
        } else {
          std::cout << " ms (median of " << run.spec.workload.steps << ")";
        }
        std::cout << ", " << pf::describe_memory(r.summary) << ", offloaded "
                  << pf::format_size(r.summary.offloaded_bytes) << "/step, hidden copy ";
        // A run that copied nothing has no overlap to speak of: n/a, not 0 % (the worst).
        if (pf::copied_anything(r.config, r.summary)) {
          std::cout << std::setprecision(1) << r.summary.hidden_copy_pct << "%";
        } else {
          std::cout << "n/a";
        }
      }
      std::cout << "\n  store: " << common_.db << "\n";
    }
    if (r.status != pf::RunStatus::Ok) return kFailed;
    const auto crossed = check_thresholds(thresholds, r.summary, 0.0);
    for (const auto& m : crossed) std::cerr << "fail-if: " << m << "\n";
    return crossed.empty() ? kOk : kThreshold;
  }

 private:
  requests::RunRequest request_;
  std::vector<std::string> fail_if_;
};

}  // namespace

std::unique_ptr<Command> add_run_command(CLI::App& app) {
  return std::make_unique<RunCommand>(app);
}

}  // namespace offtune::cli
