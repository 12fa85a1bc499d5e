// `offtune export`: timelines for Perfetto (Chrome trace) and Nsight (its SQLite layout), a
// sweep's points as CSV, or a run's memory history as a snapshot for PyTorch's memory visualiser.
#include <iostream>

#include "cli.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::cli {
namespace {

class ExportCommand final : public StoreCommand {
 public:
  explicit ExportCommand(CLI::App& parent)
      : StoreCommand(parent, "export", "export timelines, sweep points or memory snapshots",
                     StoreUse::Reads) {
    app_->add_option("--format", format_,
                     "chrome (Perfetto), nsys-sqlite, csv, memory-snapshot (PyTorch's memory_viz; "
                     "one run recorded with --memory-history)")
        ->required();
    output_opt_ = app_->add_option(
        "-o,--output", output_,
        "output file, written atomically; an existing one is replaced only when it "
        "is empty or an earlier offtune export; - for standard output. A FIFO or "
        "character device is written as a stream; anything else is refused. A "
        "chrome trace named *.gz is written gzipped. Default: named after what it "
        "holds, in the current directory (offtune-run3-sweep2-point5.json, "
        "offtune-runs1-9.sqlite, offtune-sweep2-points.csv)");
    app_->add_option("--run", run_ids_,
                     "runs to export, ids from 1 (default: all; memory-snapshot: the latest)");
    app_->add_option("--sweep", sweep_id_, "sweep for csv (default: the latest)");
  }

  int run() override {
    if (output_opt_->count() > 0 && output_.empty()) throw UsageError("-o/--output is empty");
    if (format_ != "chrome" && format_ != "nsys-sqlite" && format_ != "csv" &&
        format_ != "memory-snapshot") {
      throw UsageError("unknown --format '" + format_ +
                       "' (valid: chrome, nsys-sqlite, csv, memory-snapshot)");
    }
    std::vector<pf::RunId> runs;
    for (const auto& id : run_ids_) runs.emplace_back(requests::parse_id("--run", id));
    const int64_t sweep_id = sweep_id_.empty() ? -1 : requests::parse_id("--sweep", sweep_id_);
    auto store = open_store(common_, /*write=*/false);
    if (runs.empty()) {
      for (const auto& r : store->runs()) runs.push_back(r.id);
    } else if (format_ != "csv") {
      // An id that is not in the store is bad input, as report --sweep's (exit 2).
      for (const pf::RunId id : runs) {
        if (!store->run(id)) {
          throw UsageError("no run " + std::to_string(id.value) + " in " + common_.db);
        }
      }
    }
    if (format_ == "memory-snapshot") {
      // One run: the latest when none is given (a snapshot is of one process's device).
      if (runs.size() > 1 && !run_ids_.empty()) {
        throw UsageError("--format memory-snapshot takes one --run");
      }
      if (runs.empty()) throw UsageError("no run to export in " + common_.db);
      const pf::RunId run = run_ids_.empty() ? runs.back() : runs.front();
      if (store->memory_blocks(run).empty()) {
        throw UsageError("run " + std::to_string(run.value) +
                         " has no memory history: record one with `offtune run --memory-history` "
                         "(host-sim)");
      }
      if (output_.empty()) output_ = pf::default_trace_name(*store, {run}, ".pickle");
      pf::export_memory_snapshot(*store, run, output_);
    } else if (format_ == "chrome" || format_ == "nsys-sqlite") {
      if (runs.empty()) throw UsageError("no run to export in " + common_.db);
      if (output_.empty()) {
        output_ = pf::default_trace_name(*store, runs, format_ == "chrome" ? ".json" : ".sqlite");
      }
      if (format_ == "chrome") {
        pf::export_chrome_trace(*store, runs, output_);
      } else {
        pf::export_nsys_sqlite(*store, runs, output_);
      }
    } else {
      auto sweep = pick_sweep(*store, sweep_id);
      if (!sweep) {
        throw UsageError(sweep_id >= 0
                             ? "no sweep " + std::to_string(sweep_id) + " in " + common_.db
                             : "no sweep to export in " + common_.db);
      }
      if (output_.empty()) output_ = pf::default_points_name(sweep->id);
      pf::export_points_csv(*store, sweep->id, output_);
    }
    // Standard output carries the export itself.
    if (!common_.quiet && output_ != "-") std::cout << "wrote " << output_ << "\n";
    return kOk;
  }

 private:
  std::string format_, output_;
  CLI::Option* output_opt_ = nullptr;
  std::vector<std::string> run_ids_;
  std::string sweep_id_;
};

}  // namespace

std::unique_ptr<Command> add_export_command(CLI::App& app) {
  return std::make_unique<ExportCommand>(app);
}

}  // namespace offtune::cli
