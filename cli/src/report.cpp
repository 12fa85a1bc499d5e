// `offtune report`: list a store's sweeps and runs, or one sweep's points. A distributed job (the
// runs of its ranks, profiler/job.hpp) is one row: the slowest rank's step time and the highest
// peak; --ranks lists each rank's figures under it.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <vector>

#include "cli.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/job.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::cli {
namespace {

class ReportCommand final : public StoreCommand {
 public:
  explicit ReportCommand(CLI::App& parent)
      : StoreCommand(parent, "report", "list sweeps and runs, or a sweep's points",
                     StoreUse::Reads) {
    app_->add_option("--sweep", sweep_id_, "show this sweep's points (ids start at 1)");
    app_->add_flag("--ranks", ranks_,
                   "list each rank of a distributed job (torchrun) under its row; by default a "
                   "job is one row: its slowest rank's step time and its highest peak");
  }

  int run() override {
    const int64_t id = sweep_id_.empty() ? -1 : requests::parse_id("--sweep", sweep_id_);
    auto store = open_store(common_, /*write=*/false);
    if (id >= 0) {
      auto sweep = store->sweep(pf::SweepId(id));
      if (!sweep) throw UsageError("no sweep " + std::to_string(id) + " in " + common_.db);
      if (common_.json) {
        json pts = json::array();
        for (const auto& p : store->points(sweep->id)) pts.push_back(pf::to_json(p));
        std::cout << json{{"sweep", sweep_json(*sweep, pts.size())}, {"points", pts}}.dump(2)
                  << "\n";
        return kOk;
      }
      if (!common_.quiet) print_points(store->points(sweep->id));
      return kOk;
    }
    const auto sweeps = store->sweeps();
    const auto all_runs = store->runs();
    // Each job's runs, rank 0's first; the other ranks' runs are shown under their job's row.
    std::map<int64_t, std::vector<pf::RunRecord>> jobs;
    std::vector<pf::RunRecord> runs;
    for (const auto& r : all_runs) {
      if (!r.job_run) {
        runs.push_back(r);
        jobs[r.id.value].insert(jobs[r.id.value].begin(), r);
      } else {
        jobs[r.job_run->value].push_back(r);
      }
    }
    // A rank whose rank 0 is not in this store (not merged yet) is a row of its own.
    for (const auto& r : all_runs) {
      if (r.job_run && jobs[r.job_run->value].front().id != *r.job_run) {
        runs.push_back(r);
        jobs[r.id.value] = {r};
      }
    }
    const auto job_of = [&](const pf::RunRecord& r) {
      auto& ranks = jobs[r.id.value];
      std::stable_sort(
          ranks.begin() + 1, ranks.end(),
          [](const pf::RunRecord& a, const pf::RunRecord& b) { return a.rank < b.rank; });
      return pf::job_summary(ranks);
    };
    if (common_.json) {
      json js = json::array(), jr = json::array();
      for (const auto& s : sweeps) js.push_back(sweep_json(s, store->points(s.id).size()));
      for (const auto& r : runs) {
        json row{{"id", r.id.value}, {"status", pf::to_string(r.status)},
                 {"label", r.label}, {"summary", pf::to_json(r.summary)},
                 {"rank", r.rank},   {"world_size", r.world_size}};
        if (r.world_size > 1) row["job"] = job_json(job_of(r), ranks_);
        jr.push_back(std::move(row));
      }
      std::cout << json{{"sweeps", js}, {"runs", jr}}.dump(2) << "\n";
      return kOk;
    }
    if (common_.quiet) return kOk;  // the store was read: its exit status is the answer
    std::cout << sweeps.size() << " sweep(s), " << all_runs.size() << " run(s) in " << common_.db
              << "\n";
    for (const auto& s : sweeps) {
      std::cout << "sweep " << s.id.value << " '" << s.name << "': " << workload_text(s)
                << identity_notes(s) << ", " << store->points(s.id).size() << " points\n";
    }
    for (const auto& r : runs) {
      if (r.world_size <= 1) {
        print_row("run", r.id.value, r.status, r.summary.step_ms_median, r.summary.peak_allocated,
                  r.label);
        continue;
      }
      const pf::JobSummary job = job_of(r);
      print_row("run", r.id.value, job.status, job.step_ms_median, job.peak_allocated,
                r.label + " (job of " + std::to_string(job.world_size) + " ranks, " +
                    std::to_string(job.ranks.size()) + " recorded: slowest rank's step, " +
                    "highest peak)");
      if (!ranks_) continue;
      for (const auto& k : job.ranks) {
        print_row("  rank " + std::to_string(k.rank) + " run", k.run.value, k.status,
                  k.step_ms_median, k.peak_allocated, "");
      }
    }
    return kOk;
  }

 private:
  static json sweep_json(const pf::SweepRecord& s, size_t points) {
    json out{{"id", s.id.value}, {"name", s.name}, {"model", s.workload.model}, {"points", points}};
    if (const std::string script = pf::sweep_script(s); !script.empty()) out["script"] = script;
    return out;
  }

  // "gpt-small b4 s512 bf16"; a script sweep's workload is its command (the script chooses the
  // model, batch and shapes, which the sweep does not know): "script 'python train.py'".
  static std::string workload_text(const pf::SweepRecord& s) {
    if (const std::string script = pf::sweep_script(s); !script.empty())
      return "script '" + script + "'";
    const pf::Workload& w = s.workload;
    std::string out = w.model;
    if (w.batch > 0) out += " b" + std::to_string(w.batch);
    if (w.seq > 0) out += " s" + std::to_string(w.seq);
    if (!w.dtype.empty()) out += " " + w.dtype;
    return out;
  }

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

  // A run that did not finish has no figures: "-", not zeros that read as measured.
  static void print_row(const std::string& what, int64_t id, pf::RunStatus status, double ms_median,
                        int64_t peak, const std::string& label) {
    const bool ok = status == pf::RunStatus::Ok;
    char ms[32] = "-";
    if (ok) std::snprintf(ms, sizeof ms, "%.2f", ms_median);
    std::printf("%s %lld %-11s %10s ms  peak %-10s %s\n", what.c_str(), static_cast<long long>(id),
                pf::to_string(status), ms, ok ? pf::format_size(peak).c_str() : "-", label.c_str());
  }

  static json job_json(const pf::JobSummary& job, bool ranks) {
    json out{{"status", pf::to_string(job.status)},  {"world_size", job.world_size},
             {"ranks_recorded", job.ranks.size()},   {"step_ms_median", job.step_ms_median},
             {"peak_allocated", job.peak_allocated}, {"peak_reserved", job.peak_reserved}};
    if (ranks) {
      json list = json::array();
      for (const auto& k : job.ranks) {
        list.push_back({{"rank", k.rank},
                        {"run", k.run.value},
                        {"status", pf::to_string(k.status)},
                        {"step_ms_median", k.step_ms_median},
                        {"peak_allocated", k.peak_allocated},
                        {"peak_reserved", k.peak_reserved}});
      }
      out["ranks"] = std::move(list);
    }
    return out;
  }

  std::string sweep_id_;
  bool ranks_ = false;
};

}  // namespace

std::unique_ptr<Command> add_report_command(CLI::App& app) {
  return std::make_unique<ReportCommand>(app);
}

}  // namespace offtune::cli
