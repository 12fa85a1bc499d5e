// `offtune`: run a workload under the offload engine and record it, sweep min_offload_size x
// max_fwd_stash_size, recommend settings, report, export timelines, merge sharded stores. Headless
// and CI-friendly: progress on a terminal only, --quiet, --json, documented exit codes.
//
// Exit status:
//   0  success
//   1  the work failed (a run failed or ran out of memory; an export could not be written)
//   2  bad command line or input (unknown flag, bad size or grid, unknown model)
//   3  the store cannot be used (not an offtune store, corrupt, newer schema, disk full, locked)
//   4  a --fail-if threshold was crossed
//   5  recommend found no point satisfying the constraint
//   130 interrupted (SIGINT); a sweep resumes where it stopped when run again
#include <c10/util/Exception.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "offtune/cli/workloads.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/samples/workload.hpp"
#include "offtune/version.hpp"

namespace offtune::cli {
namespace {

namespace pf = offtune::profiler;
using json = nlohmann::json;

enum Exit { kOk = 0, kFailed = 1, kUsage = 2, kStore = 3, kThreshold = 4, kNoChoice = 5 };
constexpr int kInterrupted = 130;

std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) {
  if (g_cancel.exchange(true)) std::_Exit(kInterrupted);  // second Ctrl-C: stop now
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Common {
  std::string db;
  bool quiet = false;
  bool json = false;
};

struct WorkloadArgs {
  std::string model = "tiny";
  int64_t batch = 4;
  int64_t seq = 128;
  std::string dtype = "fp32";
  uint64_t seed = 0;
  int64_t steps = 3;
  int64_t warmup = 1;
  bool optimizer = false;
  std::string backend = "auto";
  std::string link = "pcie4";
  std::string device_capacity;
  int64_t threads = -1;
  std::string collector = "auto";
  std::string input_spec{kDefaultInputSpec};  // a TorchScript model's input (workloads.hpp)
};

struct EngineArgs {
  std::string min_offload_size = "1KiB";
  std::string max_fwd_stash_size = "5";
  std::string max_fwd_stash_bytes = "0";
  int64_t prefetch = 1;
  bool no_streams = false;
  bool no_pin = false;
  bool no_offload = false;
};

void add_workload_flags(CLI::App& app, WorkloadArgs& w) {
  app.add_option(
         "--model", w.model,
         "tiny, small, 1b (Llama-like), gpt-tiny, gpt-small, mlp, or a TorchScript file (.pt)")
      ->capture_default_str();
  app.add_option("--batch", w.batch, "sequences per batch")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--seq", w.seq, "tokens per sequence")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--dtype", w.dtype, "fp32, bf16 or fp16")->capture_default_str();
  app.add_option("--seed", w.seed, "seed of the model and the batches")->capture_default_str();
  app.add_option("--steps", w.steps, "measured steps per run")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  app.add_option("--warmup", w.warmup, "unmeasured steps before them")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}))
      ->capture_default_str();
  app.add_flag("--optimizer", w.optimizer, "include an SGD optimizer step in each step");
  app.add_option("--backend", w.backend, "auto, cuda or host-sim")->capture_default_str();
  app.add_option("--link", w.link,
                 "host-sim link model: none, pcie4, or GBPS:LATENCY_US (e.g. 12:15)")
      ->capture_default_str();
  app.add_option("--device-capacity", w.device_capacity,
                 "host-sim device memory size, e.g. 2GiB (allocations beyond it are out of "
                 "memory); default unlimited");
  app.add_option("--threads", w.threads, "intra-op threads (default: cores-1 on host-sim)");
  app.add_option("--collector", w.collector,
                 "cuda device activity: auto (CUPTI if available), cupti, nvtx-only (under nsys)")
      ->check(CLI::IsMember({"auto", "cupti", "nvtx-only"}))
      ->capture_default_str();
  app.add_option("--input-spec", w.input_spec,
                 "input of a --model PATH.pt TorchScript model: NAME:int64[B,T]:vocab=V (token "
                 "ids) or NAME:float32[B,F] (dense)")
      ->capture_default_str();
}

pf::Workload to_workload(const WorkloadArgs& a) {
  pf::Workload w;
  w.model = a.model;
  w.batch = a.batch;
  w.seq = a.seq;
  w.dtype = a.dtype;
  w.seed = a.seed;
  w.steps = a.steps;
  w.warmup = a.warmup;
  w.optimizer = a.optimizer;
  samples::parse_dtype(a.dtype);  // validates
  return w;
}

// The backend of a run or sweep (workloads.hpp); bad values are usage errors.
OffloadOptions prepare_backend(const WorkloadArgs& a, pf::Environment& env, c10::Device& device) {
  auto prepared = cli::prepare_backend({a.backend, a.link, a.device_capacity, a.threads}, env);
  device = prepared.device;
  return prepared.base;
}

pf::EngineConfig to_config(const EngineArgs& e) {
  pf::EngineConfig c;
  c.offload = !e.no_offload;
  c.min_offload_size = pf::parse_size(e.min_offload_size);
  c.max_fwd_stash_size = pf::parse_int_list(e.max_fwd_stash_size).at(0);
  c.max_fwd_stash_bytes = pf::parse_size(e.max_fwd_stash_bytes);
  c.prefetch = e.prefetch;
  c.use_streams = !e.no_streams;
  c.use_pin_memory = !e.no_pin;
  return c;
}

bool show_progress(const Common& c) { return !c.quiet && isatty(STDERR_FILENO); }

// --fail-if METRIC>VALUE: peak>SIZE, step-ms>X, slowdown>F.
struct Threshold {
  std::string metric;
  double value = 0;
};
std::vector<Threshold> parse_thresholds(const std::vector<std::string>& specs) {
  std::vector<Threshold> out;
  for (const auto& s : specs) {
    const auto gt = s.find('>');
    if (gt == std::string::npos) {
      throw UsageError("bad --fail-if '" + s + "' (form: peak>SIZE, step-ms>MS or slowdown>F)");
    }
    Threshold t;
    t.metric = s.substr(0, gt);
    const std::string v = s.substr(gt + 1);
    try {
      if (t.metric == "peak") {
        t.value = static_cast<double>(pf::parse_size(v));
      } else if (t.metric == "step-ms" || t.metric == "slowdown") {
        t.value = std::stod(v);
      } else {
        throw UsageError("unknown --fail-if metric '" + t.metric +
                         "' (valid: peak, step-ms, slowdown)");
      }
    } catch (const std::invalid_argument&) {
      throw UsageError("bad --fail-if value in '" + s + "'");
    }
    out.push_back(t);
  }
  return out;
}

// Returns the crossed thresholds as messages.
std::vector<std::string> check_thresholds(const std::vector<Threshold>& ts, const pf::RunSummary& s,
                                          double slowdown) {
  std::vector<std::string> crossed;
  for (const auto& t : ts) {
    double actual = 0;
    if (t.metric == "peak") actual = static_cast<double>(s.peak_allocated);
    if (t.metric == "step-ms") actual = s.step_ms_median;
    if (t.metric == "slowdown") actual = slowdown;
    if (actual > t.value) {
      std::ostringstream m;
      m << t.metric << " " << actual << " > " << t.value;
      crossed.push_back(m.str());
    }
  }
  return crossed;
}

std::unique_ptr<pf::Store> open_store(const Common& c, bool write) {
  if (c.db.empty()) throw UsageError("--db is required");
  return write ? pf::open_sqlite_store(c.db) : pf::open_sqlite_store_readonly(c.db);
}

int cmd_run(const Common& c, const WorkloadArgs& wa, const EngineArgs& ea,
            const std::vector<std::string>& fail_if) {
  const auto thresholds = parse_thresholds(fail_if);
  pf::RunSpec spec;
  spec.workload = to_workload(wa);
  spec.config = to_config(ea);
  c10::Device device(c10::kCPU);
  spec.base = prepare_backend(wa, spec.env, device);
  spec.config.link = wa.link;
  spec.collector = wa.collector;
  auto store = open_store(c, /*write=*/true);
  auto workload = make_builtin_workload(spec.workload, device, wa.input_spec);
  if (show_progress(c)) std::cerr << "running " << spec.workload.model << "...\n";
  const auto out = pf::run_measured(*workload, spec, *store);
  const auto& r = out.record;
  if (!c.quiet && !c.json) std::cerr << "collector: " << out.collector_status << "\n";
  if (c.json) {
    std::cout << json{{"run", r.id.value},
                      {"status", pf::to_string(r.status)},
                      {"error", r.error},
                      {"config", pf::to_json(r.config)},
                      {"summary", pf::to_json(r.summary)},
                      {"db", c.db}}
                     .dump(2)
              << "\n";
  } else if (!c.quiet) {
    std::cout << "run " << r.id.value << ": " << pf::to_string(r.status);
    if (!r.error.empty()) std::cout << " (" << r.error << ")";
    std::cout << std::fixed << std::setprecision(2) << "\n  step " << r.summary.step_ms_median
              << " ms (median of " << spec.workload.steps << "), peak device "
              << pf::format_size(r.summary.peak_allocated) << ", offloaded "
              << pf::format_size(r.summary.offloaded_bytes) << "/step, hidden copy "
              << std::setprecision(1) << r.summary.hidden_copy_pct << "%\n  store: " << c.db
              << "\n";
  }
  if (r.status != pf::RunStatus::Ok) return kFailed;
  const auto crossed = check_thresholds(thresholds, r.summary, 0.0);
  for (const auto& m : crossed) std::cerr << "fail-if: " << m << "\n";
  return crossed.empty() ? kOk : kThreshold;
}

std::optional<pf::SweepRecord> pick_sweep(pf::Store& store, int64_t id) {
  if (id >= 0) return store.sweep(pf::SweepId(id));
  auto all = store.sweeps();
  if (all.empty()) return std::nullopt;
  return all.back();
}

void print_points(const std::vector<pf::PointRecord>& points) {
  std::printf("%5s %-8s %-8s %14s %10s %12s %14s %10s\n", "index", "status", "offload",
              "min_offload", "window", "step ms", "peak device", "hidden %");
  for (const auto& p : points) {
    std::printf("%5lld %-8s %-8s %14s %10lld %12.2f %14s %10.1f%s%s\n",
                static_cast<long long>(p.index), pf::to_string(p.status),
                p.config.offload ? "yes" : "no",
                p.config.offload ? pf::format_size(p.config.min_offload_size).c_str() : "-",
                static_cast<long long>(p.config.offload ? p.config.max_fwd_stash_size : 0),
                p.summary.step_ms_median, pf::format_size(p.summary.peak_allocated).c_str(),
                p.summary.hidden_copy_pct, p.error.empty() ? "" : "  ", p.error.c_str());
  }
}

int cmd_sweep(const Common& c, const WorkloadArgs& wa, const EngineArgs& ea,
              const std::string& sizes, const std::string& windows, const std::string& shard,
              const std::string& name, const std::vector<std::string>& fail_if) {
  const auto thresholds = parse_thresholds(fail_if);
  pf::SweepSpec spec;
  spec.name = name;
  spec.workload = to_workload(wa);
  spec.grid.min_offload_sizes = pf::parse_size_list(sizes);
  spec.grid.max_fwd_stash_sizes = pf::parse_int_list(windows);
  for (int64_t w : spec.grid.max_fwd_stash_sizes) {
    if (w < 1) throw UsageError("--max-fwd-stash-size values must be at least 1");
  }
  spec.grid.base = to_config(ea);
  spec.grid.base.link = wa.link;
  spec.shard = pf::parse_shard(shard);
  spec.collector = wa.collector;
  if (wa.input_spec != kDefaultInputSpec) spec.model_input = wa.input_spec;
  c10::Device device(c10::kCPU);
  spec.base = prepare_backend(wa, spec.env, device);
  auto store = open_store(c, /*write=*/true);
  auto workload = make_builtin_workload(spec.workload, device, wa.input_spec);
  const bool progress = show_progress(c);
  const auto outcome = pf::run_sweep(
      *workload, spec, *store,
      [&](const pf::SweepProgress& p) {
        if (!progress) return;
        std::cerr << "\r[sweep] " << p.done << "/" << p.total << " points" << std::flush;
        if (p.done == p.total) std::cerr << "\n";
      },
      &g_cancel);
  const auto points = store->points(outcome.sweep);
  if (c.json) {
    json pts = json::array();
    for (const auto& p : points) {
      pts.push_back({{"index", p.index},
                     {"status", pf::to_string(p.status)},
                     {"config", pf::to_json(p.config)},
                     {"summary", pf::to_json(p.summary)},
                     {"error", p.error}});
    }
    std::cout << json{{"sweep", outcome.sweep.value},
                      {"ran", outcome.ran},
                      {"skipped", outcome.skipped},
                      {"ok", outcome.ok},
                      {"failed", outcome.failed},
                      {"oom", outcome.oom},
                      {"interrupted", outcome.interrupted},
                      {"points", pts},
                      {"db", c.db}}
                     .dump(2)
              << "\n";
  } else if (!c.quiet) {
    std::cout << "sweep " << outcome.sweep.value << ": ran " << outcome.ran << ", skipped "
              << outcome.skipped << " (already measured), ok " << outcome.ok << ", failed "
              << outcome.failed << ", out of memory " << outcome.oom << "\n";
    print_points(points);
  }
  if (outcome.interrupted) {
    std::cerr << "interrupted: run the same command again to resume\n";
    return kInterrupted;
  }
  if (!c.quiet && !c.json) {
    const auto rec = pf::recommend(points, {});
    if (rec.chosen && rec.chosen->config.offload) {
      std::cout << "recommended: min_offload_size "
                << pf::format_size(rec.chosen->config.min_offload_size) << ", max_fwd_stash_size "
                << rec.chosen->config.max_fwd_stash_size << " (" << rec.rationale << ")\n";
    } else if (rec.chosen) {
      std::cout << "recommended: no offloading (" << rec.rationale << ")\n";
    } else {
      std::cout << "no recommendation: " << rec.rationale << "\n";
    }
    std::cout << "details: offtune recommend --db " << c.db << "\n";
    std::cout << "store: " << c.db << "\n";
  }
  if (!thresholds.empty()) {
    const auto rec = pf::recommend(points, {});
    if (rec.chosen && rec.baseline) {
      const auto crossed = check_thresholds(thresholds, rec.chosen->summary,
                                            pf::slowdown(*rec.chosen, *rec.baseline));
      for (const auto& m : crossed) std::cerr << "fail-if: " << m << "\n";
      if (!crossed.empty()) return kThreshold;
    }
  }
  return kOk;
}

int cmd_recommend(const Common& c, int64_t sweep_id, const std::string& budget, double slowdown) {
  auto store = open_store(c, /*write=*/false);
  auto sweep = pick_sweep(*store, sweep_id);
  if (!sweep) throw UsageError("no sweep in " + c.db + (sweep_id >= 0 ? " with that id" : ""));
  pf::Constraint constraint;
  if (!budget.empty()) constraint.memory_budget = pf::parse_size(budget);
  if (slowdown > 0) constraint.max_slowdown = slowdown;
  const auto rec = pf::recommend(store->points(sweep->id), constraint);
  if (c.json) {
    json front = json::array();
    for (const auto& p : rec.front) {
      front.push_back({{"index", p.index},
                       {"config", pf::to_json(p.config)},
                       {"summary", pf::to_json(p.summary)}});
    }
    json out{{"sweep", sweep->id.value},
             {"constraint", rec.constraint.describe()},
             {"rationale", rec.rationale},
             {"front", front}};
    if (rec.chosen) {
      out["point"] = rec.chosen->index;
      out["min_offload_size"] = rec.chosen->config.min_offload_size;
      out["max_fwd_stash_size"] = rec.chosen->config.max_fwd_stash_size;
      out["offload"] = rec.chosen->config.offload;
      out["step_ms"] = rec.chosen->summary.step_ms_median;
      out["peak_allocated"] = rec.chosen->summary.peak_allocated;
      if (rec.baseline) out["slowdown"] = pf::slowdown(*rec.chosen, *rec.baseline);
      out["snippets"] = {
          {"cpp", rec.snippets.cpp}, {"trl", rec.snippets.trl}, {"axolotl", rec.snippets.axolotl}};
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "sweep " << sweep->id.value << " (" << sweep->workload.model << "), constraint "
              << rec.constraint.describe() << "\nPareto front (step time vs peak device memory):\n";
    print_points(rec.front);
    std::cout << "\n" << rec.rationale << "\n";
    if (rec.chosen) {
      std::cout << "\n--- C++ ---\n"
                << rec.snippets.cpp << "\n--- TRL ---\n"
                << rec.snippets.trl << "\n--- Axolotl ---\n"
                << rec.snippets.axolotl;
    }
  }
  return rec.chosen ? kOk : kNoChoice;
}

int cmd_report(const Common& c, int64_t sweep_id) {
  auto store = open_store(c, /*write=*/false);
  if (sweep_id >= 0) {
    auto sweep = store->sweep(pf::SweepId(sweep_id));
    if (!sweep) throw UsageError("no sweep " + std::to_string(sweep_id) + " in " + c.db);
    print_points(store->points(sweep->id));
    return kOk;
  }
  const auto sweeps = store->sweeps();
  const auto runs = store->runs();
  if (c.json) {
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
  std::cout << sweeps.size() << " sweep(s), " << runs.size() << " run(s) in " << c.db << "\n";
  for (const auto& s : sweeps) {
    std::cout << "sweep " << s.id.value << " '" << s.name << "': " << s.workload.model << " b"
              << s.workload.batch << " s" << s.workload.seq << ", " << store->points(s.id).size()
              << " points\n";
  }
  for (const auto& r : runs) {
    std::printf("run %lld %-8s %10.2f ms  peak %-10s %s\n", static_cast<long long>(r.id.value),
                pf::to_string(r.status), r.summary.step_ms_median,
                pf::format_size(r.summary.peak_allocated).c_str(), r.label.c_str());
  }
  return kOk;
}

int cmd_export(const Common& c, const std::string& format, const std::string& out,
               std::vector<int64_t> run_ids, int64_t sweep_id) {
  if (out.empty()) throw UsageError("-o/--output is required");
  auto store = open_store(c, /*write=*/false);
  std::vector<pf::RunId> runs;
  for (int64_t id : run_ids) runs.emplace_back(id);
  if (runs.empty()) {
    for (const auto& r : store->runs()) runs.push_back(r.id);
  }
  if (format == "chrome") {
    pf::export_chrome_trace(*store, runs, out);
  } else if (format == "nsys-sqlite") {
    pf::export_nsys_sqlite(*store, runs, out);
  } else if (format == "csv") {
    auto sweep = pick_sweep(*store, sweep_id);
    if (!sweep) throw UsageError("no sweep to export in " + c.db);
    pf::export_points_csv(*store, sweep->id, out);
  } else {
    throw UsageError("unknown --format '" + format + "' (valid: chrome, nsys-sqlite, csv)");
  }
  if (!c.quiet) std::cout << "wrote " << out << "\n";
  return kOk;
}

int cmd_merge(const Common& c, const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw UsageError("merge needs input stores");
  auto dst = open_store(c, /*write=*/true);
  int64_t copied = 0;
  for (const auto& in : inputs) {
    auto src = pf::open_sqlite_store_readonly(in);
    copied += pf::merge_stores(*dst, *src);
  }
  if (!c.quiet) std::cout << "merged " << copied << " point(s) into " << c.db << "\n";
  return kOk;
}

int run_cli(int argc, char** argv) {
  CLI::App app{"offtune: measure and tune activation offloading"};
  app.set_version_flag("--version", "offtune " + std::string(kVersion),
                       "print the version and exit");
  app.require_subcommand(1);
  Common common;
  const auto add_common = [&](CLI::App* sub, bool db_required) {
    auto* opt = sub->add_option("--db", common.db, "SQLite store (created if absent)");
    if (db_required) opt->required();
    sub->add_flag("--quiet,-q", common.quiet, "no progress or text output");
    sub->add_flag("--json", common.json, "print the result as JSON");
  };

  WorkloadArgs wa;
  EngineArgs ea;
  std::vector<std::string> fail_if;

  auto* run = app.add_subcommand("run", "measure one configuration and record it");
  add_common(run, true);
  add_workload_flags(*run, wa);
  run->add_option("--min-offload-size", ea.min_offload_size, "bytes, e.g. 1KiB")
      ->capture_default_str();
  run->add_option("--max-fwd-stash-size", ea.max_fwd_stash_size, "forward window (>= 1)")
      ->capture_default_str();
  run->add_option("--max-fwd-stash-bytes", ea.max_fwd_stash_bytes, "byte bound on it (0: none)")
      ->capture_default_str();
  run->add_option("--prefetch", ea.prefetch, "backward reloads ahead of use")
      ->check(CLI::Range(int64_t{0}, int64_t{64}))
      ->capture_default_str();
  run->add_flag("--no-streams", ea.no_streams, "single-stream (legacy) mode");
  run->add_flag("--no-pin-memory", ea.no_pin, "pageable host memory");
  run->add_flag("--no-offload", ea.no_offload, "measure the baseline without offloading");
  run->add_option("--fail-if", fail_if, "exit 4 if crossed: peak>SIZE, step-ms>MS");

  std::string sizes = "1KiB:64MiB:x8", windows = "1,2,5", shard = "1/1", name = "sweep";
  auto* sweep = app.add_subcommand("sweep", "sweep min_offload_size x max_fwd_stash_size");
  add_common(sweep, true);
  add_workload_flags(*sweep, wa);
  sweep->add_option("--min-offload-size", sizes, "list or range: 1KiB,1MiB or 1KiB:64MiB:x4")
      ->capture_default_str();
  sweep->add_option("--max-fwd-stash-size", windows, "list or range: 1,4 or 1:8")
      ->capture_default_str();
  sweep->add_option("--prefetch", ea.prefetch, "backward reloads ahead of use")
      ->capture_default_str();
  sweep->add_flag("--no-streams", ea.no_streams, "single-stream (legacy) mode");
  sweep->add_flag("--no-pin-memory", ea.no_pin, "pageable host memory");
  sweep->add_option("--shard", shard, "run only shard i of n (1-based), e.g. 2/4")
      ->capture_default_str();
  sweep->add_option("--name", name, "a name for the sweep")->capture_default_str();
  sweep->add_option("--fail-if", fail_if,
                    "exit 4 if the recommended point crosses: peak>SIZE, slowdown>F, step-ms>MS");

  int64_t sweep_id = -1;
  std::string budget;
  double max_slowdown = 0;
  auto* recommend = app.add_subcommand("recommend", "pick settings from a sweep");
  add_common(recommend, true);
  recommend->add_option("--sweep", sweep_id, "sweep id (default: the latest)");
  auto* budget_opt =
      recommend->add_option("--memory-budget", budget, "fastest point whose peak fits, e.g. 8GiB");
  recommend
      ->add_option("--max-slowdown", max_slowdown,
                   "lowest-memory point within this step-time factor (default 1.25)")
      ->excludes(budget_opt)
      ->check(CLI::PositiveNumber);

  auto* report = app.add_subcommand("report", "list sweeps and runs, or a sweep's points");
  add_common(report, true);
  report->add_option("--sweep", sweep_id, "show this sweep's points");

  std::string format, output;
  std::vector<int64_t> run_ids;
  auto* exp = app.add_subcommand("export", "export timelines or sweep points");
  add_common(exp, true);
  exp->add_option("--format", format, "chrome (Perfetto), nsys-sqlite, csv")->required();
  exp->add_option("-o,--output", output, "output file")->required();
  exp->add_option("--run", run_ids, "runs to export (default: all)");
  exp->add_option("--sweep", sweep_id, "sweep for csv (default: the latest)");

  std::vector<std::string> inputs;
  auto* merge = app.add_subcommand("merge", "merge sharded stores into --db");
  add_common(merge, true);
  merge->add_option("inputs", inputs, "stores to merge")->required()->check(CLI::ExistingFile);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  if (run->parsed()) return cmd_run(common, wa, ea, fail_if);
  if (sweep->parsed()) {
    return cmd_sweep(common, wa, ea, sizes, windows, shard, name, fail_if);
  }
  if (recommend->parsed()) return cmd_recommend(common, sweep_id, budget, max_slowdown);
  if (report->parsed()) return cmd_report(common, sweep_id);
  if (exp->parsed()) return cmd_export(common, format, output, run_ids, sweep_id);
  if (merge->parsed()) return cmd_merge(common, inputs);
  return kUsage;
}

}  // namespace
}  // namespace offtune::cli

int main(int argc, char** argv) {
  using namespace offtune::cli;
  std::signal(SIGINT, on_sigint);
  try {
    return run_cli(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\nhint: see offtune --help\n";
    return kUsage;
  } catch (const offtune::profiler::ParseError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUsage;
  } catch (const offtune::profiler::StoreError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kStore;
  } catch (const offtune::OptionsError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUsage;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << e.what_without_backtrace() << "\n";
    return kFailed;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kFailed;
  }
}
