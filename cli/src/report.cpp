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
    add_common_flags(*app_, common_, /*db_required=*/true, /*writes=*/false);
    app_->add_option("--sweep", sweep_id_, "show this sweep's points (ids start at 1)");
  }

  int run() override {
    const int64_t id = sweep_id_.empty() ? -1 : requests::parse_id("--sweep", sweep_id_);
    auto store = open_store(common_, /*write=*/false);
    if (id >= 0) {
      auto sweep = store->sweep(pf::SweepId(id));
      if (!sweep) throw UsageError("no sweep " + std::to_string(id) + " in " + common_.db);
      if (!common_.quiet) print_points(store->points(sweep->id));
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
    if (common_.quiet) return kOk;  // the store was read: its exit status is the answer
    std::cout << sweeps.size() << " sweep(s), " << runs.size() << " run(s) in " << common_.db
              << "\n";
    for (const auto& s : sweeps) {
      std::cout << "sweep " << s.id.value << " '" << s.name << "': " << s.workload.model << " b"
                << s.workload.batch << " s" << s.workload.seq << " " << s.workload.dtype
                << identity_notes(s) << ", " << store->points(s.id).size() << " points\n";
    }
    for (const auto& r : runs) {
      // A run that did not finish has no figures: "-", not zeros that read as measured.
      const bool ok = r.status == pf::RunStatus::Ok;
      char ms[32] = "-";
      if (ok) std::snprintf(ms, sizeof ms, "%.2f", r.summary.step_ms_median);
      std::printf("run %lld %-11s %10s ms  peak %-10s %s\n", static_cast<long long>(r.id.value),
                  pf::to_string(r.status), ms,
                  ok ? pf::format_size(r.summary.peak_allocated).c_str() : "-", r.label.c_str());
    }
    return kOk;
  }

 private:
  // What else tells two sweeps of one workload apart, from the sweep's key (the backend, and the
  // device model and capacity when set): ", host-sim modelling NVIDIA H100 ..., capacity 2 GiB".
  static std::string identity_notes(const pf::SweepRecord& s) {
    const json key = json::parse(s.key, nullptr, /*allow_exceptions=*/false);
    if (!key.is_object()) return "";
    std::string out;
    if (const auto b = key.find("backend"); b != key.end() && b->is_string()) {
      out += ", " + b->get<std::string>();
    }
    if (const auto dm = key.find("device_model"); dm != key.end() && dm->is_object()) {
      if (const auto t = dm->find("title"); t != dm->end() && t->is_string()) {
        out += " modelling " + t->get<std::string>();
      }
    }
    if (const auto c = key.find("device_capacity"); c != key.end() && c->is_number_integer()) {
      out += ", capacity " + pf::format_size(c->get<int64_t>());
    }
    return out;
  }

  Common common_;
  std::string sweep_id_;
};

}  // namespace

std::unique_ptr<Command> add_report_command(CLI::App& app) {
  return std::make_unique<ReportCommand>(app);
}

}  // namespace offtune::cli
