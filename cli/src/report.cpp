// `offtune report`: list a store's sweeps and runs, or one sweep's points.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::cli {
namespace {

namespace pf = offtune::profiler;
using json = nlohmann::json;

class ReportCommand final : public Command {
 public:
  explicit ReportCommand(CLI::App& parent) {
    app_ = parent.add_subcommand("report", "list sweeps and runs, or a sweep's points");
    add_common_flags(*app_, common_, /*db_required=*/true);
    app_->add_option("--sweep", sweep_id_, "show this sweep's points (ids start at 1)");
  }

  int run() override {
    const int64_t id = sweep_id_.empty() ? -1 : requests::parse_id("--sweep", sweep_id_);
    auto store = open_store(common_, /*write=*/false);
    if (id >= 0) {
      auto sweep = store->sweep(pf::SweepId(id));
      if (!sweep) throw UsageError("no sweep " + std::to_string(id) + " in " + common_.db);
      print_points(store->points(sweep->id));
      return kOk;
    }
    const auto sweeps = store->sweeps();
    const auto runs = store->runs();
    if (common_.json) {
      json js = json::array(), jr = json::array();
      for (const auto& s : sweeps) {
        js.push_back({{"id", s.id.value},
                      {"name", s.name},
                      {"model", s.workload.model},
                      {"points", store->points(s.id).size()}});
      }
      for (const auto& r : runs) {
        jr.push_back({{"id", r.id.value},
                      {"status", pf::to_string(r.status)},
                      {"label", r.label},
                      {"summary", pf::to_json(r.summary)}});
      }
      std::cout << json{{"sweeps", js}, {"runs", jr}}.dump(2) << "\n";
      return kOk;
    }
    std::cout << sweeps.size() << " sweep(s), " << runs.size() << " run(s) in " << common_.db
              << "\n";
    for (const auto& s : sweeps) {
      std::cout << "sweep " << s.id.value << " '" << s.name << "': " << s.workload.model << " b"
                << s.workload.batch << " s" << s.workload.seq << ", " << store->points(s.id).size()
                << " points\n";
    }
    for (const auto& r : runs) {
      std::printf("run %lld %-11s %10.2f ms  peak %-10s %s\n", static_cast<long long>(r.id.value),
                  pf::to_string(r.status), r.summary.step_ms_median,
                  pf::format_size(r.summary.peak_allocated).c_str(), r.label.c_str());
    }
    return kOk;
  }

 private:
  Common common_;
  std::string sweep_id_;
};

}  // namespace

std::unique_ptr<Command> add_report_command(CLI::App& app) {
  return std::make_unique<ReportCommand>(app);
}

}  // namespace offtune::cli
