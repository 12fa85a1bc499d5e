// `offtune export`: timelines for Perfetto (Chrome trace) and Nsight (its SQLite layout), or a
// sweep's points as CSV.
#include <iostream>

#include "cli.hpp"
#include "offtune/profiler/export.hpp"

namespace offtune::cli {
namespace {

namespace pf = offtune::profiler;

class ExportCommand final : public Command {
 public:
  explicit ExportCommand(CLI::App& parent) {
    app_ = parent.add_subcommand("export", "export timelines or sweep points");
    add_common_flags(*app_, common_, /*db_required=*/true);
    app_->add_option("--format", format_, "chrome (Perfetto), nsys-sqlite, csv")->required();
    app_->add_option("-o,--output", output_, "output file")->required();
    app_->add_option("--run", run_ids_, "runs to export (default: all)");
    app_->add_option("--sweep", sweep_id_, "sweep for csv (default: the latest)");
  }

  int run() override {
    if (output_.empty()) throw UsageError("-o/--output is required");
    auto store = open_store(common_, /*write=*/false);
    std::vector<pf::RunId> runs;
    for (int64_t id : run_ids_) runs.emplace_back(id);
    if (runs.empty()) {
      for (const auto& r : store->runs()) runs.push_back(r.id);
    }
    if (format_ == "chrome") {
      pf::export_chrome_trace(*store, runs, output_);
    } else if (format_ == "nsys-sqlite") {
      pf::export_nsys_sqlite(*store, runs, output_);
    } else if (format_ == "csv") {
      auto sweep = pick_sweep(*store, sweep_id_);
      if (!sweep) throw UsageError("no sweep to export in " + common_.db);
      pf::export_points_csv(*store, sweep->id, output_);
    } else {
      throw UsageError("unknown --format '" + format_ + "' (valid: chrome, nsys-sqlite, csv)");
    }
    if (!common_.quiet) std::cout << "wrote " << output_ << "\n";
    return kOk;
  }

 private:
  Common common_;
  std::string format_, output_;
  std::vector<int64_t> run_ids_;
  int64_t sweep_id_ = -1;
};

}  // namespace

std::unique_ptr<Command> add_export_command(CLI::App& app) {
  return std::make_unique<ExportCommand>(app);
}

}  // namespace offtune::cli
