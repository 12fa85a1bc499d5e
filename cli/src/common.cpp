// Flags, thresholds and tables shared by the commands.
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "cli.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::cli {

namespace pf = offtune::profiler;

std::atomic<bool> g_cancel{false};

void add_common_flags(CLI::App& sub, Common& c, bool db_required) {
  auto* opt = sub.add_option("--db", c.db, "SQLite store (created if absent)");
  if (db_required) opt->required();
  sub.add_flag("--quiet,-q", c.quiet, "no progress or text output");
  sub.add_flag("--json", c.json, "print the result as JSON");
}

bool show_progress(const Common& c) { return !c.quiet && isatty(STDERR_FILENO); }

std::unique_ptr<pf::Store> open_store(const Common& c, bool write) {
  if (c.db.empty()) throw UsageError("--db is required");
  return write ? pf::open_sqlite_store(c.db) : pf::open_sqlite_store_readonly(c.db);
}

void add_workload_flags(CLI::App& app, requests::WorkloadFields& w, requests::BackendFields& b) {
  app.add_option(
         "--model", w.model,
         "tiny, small, 1b (Llama-like), gpt-tiny, gpt-small, mlp, or a TorchScript file (.pt)")
      ->capture_default_str();
  app.add_option("--batch", w.batch, "sequences per batch")->capture_default_str();
  app.add_option("--seq", w.seq, "tokens per sequence")->capture_default_str();
  app.add_option("--dtype", w.dtype, "fp32, bf16 or fp16")->capture_default_str();
  app.add_option("--seed", w.seed, "seed of the model and the batches")->capture_default_str();
  app.add_option("--steps", w.steps, "measured steps per run")->capture_default_str();
  app.add_option("--warmup", w.warmup, "unmeasured steps before them")->capture_default_str();
  app.add_flag("--optimizer", w.optimizer, "include an SGD optimizer step in each step");
  app.add_option("--backend", b.backend, "auto, cuda or host-sim")->capture_default_str();
  app.add_option("--link", b.link,
                 "host-sim link model: none, pcie4, or GBPS:LATENCY_US (e.g. 12:15)")
      ->capture_default_str();
  app.add_option("--device-capacity", b.device_capacity,
                 "host-sim device memory size, e.g. 2GiB (allocations beyond it are out of "
                 "memory); default unlimited");
  app.add_option("--threads", b.threads, "intra-op threads (default: cores-1 on host-sim)");
  app.add_option("--collector", b.collector,
                 "cuda device activity: auto (CUPTI if available), cupti, nvtx-only (under nsys)")
      ->capture_default_str();
  app.add_option("--input-spec", w.input_spec,
                 "input of a --model PATH.pt TorchScript model: NAME:int64[B,T]:vocab=V (token "
                 "ids) or NAME:float32[B,F] (dense)")
      ->capture_default_str();
}

void add_engine_flags(CLI::App& app, requests::EngineFields& e) {
  app.add_option(
         "--prefetch", e.prefetch,
         "backward reloads ahead of use (0.." + std::to_string(requests::kMaxPrefetch) + ")")
      ->capture_default_str();
  app.add_flag("--no-streams", e.no_streams, "single-stream (legacy) mode");
  app.add_flag("--no-pin-memory", e.no_pin_memory, "pageable host memory");
}

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

}  // namespace offtune::cli
