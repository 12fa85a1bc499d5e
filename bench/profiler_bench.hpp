// The profiler sections of offtune-bench: how fast the store takes timeline rows, how fast a large
// run exports to the trace formats, and how long the default `offtune sweep` takes on host-sim.
// They measure; they assert nothing about speed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "offtune/knobs.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/workload.hpp"

namespace offtune::bench {

// A fresh directory under `base` (the system's temporary directory when empty), removed with
// everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& base);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct ProfilerArgs {
  int64_t events = 1'000'000;     // timeline events inserted (store) and exported (export)
  int64_t batch_events = 10'000;  // rows per add_* call, one transaction each
  std::string sweep_sizes = "1KiB:16MiB:x16";  // the default sweep of scripts/run.sh
  std::string sweep_windows = "1,2,5";
  int64_t sweep_steps = 5;
  int64_t sweep_warmup = 1;
  int64_t sweep_threads = 0;  // intra-op threads for the sweep; 0 keeps the current setting
};

// Throws std::invalid_argument (one line, naming the flag) for a sweep grid that does not parse or
// a value out of its knob's range (a window below 1).
void validate(const ProfilerArgs& args);

// A sweep's axis of knob `key` from text, read as `offtune sweep` reads it (profiler/knob_text.hpp:
// lists, ranges, "64KiB", each value in the knob's range). Throws std::invalid_argument (one line)
// naming `flag`, or the knob's own flag when `flag` is empty.
std::vector<KnobValue> sweep_axis(std::string_view key, std::string_view text,
                                  std::string_view flag = {});

// ---- store -------------------------------------------------------------------------------------

struct InsertRow {
  std::string store;  // "sqlite" | "memory"
  std::string table;  // "events" | "steps" | "occupancy"
  int64_t rows = 0;
  int64_t batch = 0;
  double insert_s = 0.0;       // sum of the add_* calls
  double batch_ms_p50 = kNaN;  // one add_* call (one transaction)
  double batch_ms_max = kNaN;
  double close_s = 0.0;     // destroying the store (SQLite: the final WAL checkpoint)
  int64_t file_bytes = -1;  // database file after close (sqlite), -1 for memory
};

struct StoreResult {
  std::vector<InsertRow> rows;
};

// The SQLite events database the store section fills is kept in `dir` (events.db) for the export
// section.
StoreResult bench_store(const ProfilerArgs& args, const std::filesystem::path& dir);
void print_store(const StoreResult& r);
json store_json(const StoreResult& r);

// ---- export ------------------------------------------------------------------------------------

struct ExportRow {
  std::string what;
  int64_t events = 0;
  double seconds = 0.0;
  int64_t bytes = -1;  // written, -1 when nothing is
};

struct ExportResult {
  bool prepared = false;  // events.db was filled here (the store section did not run)
  double prepare_s = 0.0;
  int64_t db_bytes = 0;
  std::vector<ExportRow> rows;
};

// Exports the run of `dir`/events.db (filling it first when the store section has not).
ExportResult bench_export(const ProfilerArgs& args, const std::filesystem::path& dir);
void print_export(const ExportResult& r);
json export_json(const ExportResult& r);

// ---- sweep -------------------------------------------------------------------------------------

struct SweepPointRow {
  int64_t index = 0;
  std::string config;
  std::string status;
  double step_ms = kNaN;
  int64_t peak_bytes = 0;
  double wall_s = 0.0;  // since the previous point finished (or the sweep began)
  std::string error;
};

struct SweepResult {
  std::string model;
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t steps = 0;
  int64_t warmup = 0;
  std::string sizes;
  std::string windows;
  int64_t threads = 0;
  int64_t points = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t oom = 0;
  double setup_s = 0.0;  // model build, before the first point
  double total_s = 0.0;  // run_sweep
  int64_t store_bytes = 0;
  int64_t store_events = 0;
  std::vector<SweepPointRow> rows;
};

SweepResult bench_sweep(const ProfilerArgs& args, const std::filesystem::path& dir);
void print_sweep(const SweepResult& r);
json sweep_json(const SweepResult& r);

// ---- predict -----------------------------------------------------------------------------------

struct PredictArgs {
  std::vector<std::string> models = {"tiny", "small", "gpt-small", "mlp"};
  int64_t batch = 4;  // the CLI's defaults
  int64_t seq = 128;
  std::string sizes = "1KiB:64MiB:x8";  // the CLI's default grid
  std::string windows = "1,2,5";
  std::string device_model = "h100-sxm";
};

struct PredictRow {
  std::string model;
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t points = 0;  // measured and compared
  int64_t failed = 0;
  double record_ms = 0.0;
  double predict_ms = 0.0;  // the whole grid
  double max_step_err_pct = 0.0;
  double mean_step_err_pct = kNaN;
  double max_peak_err_pct = 0.0;
  double mean_peak_err_pct = kNaN;
  double max_hidden_err_pts = 0.0;
  double measure_s = 0.0;
};

struct PredictResult {
  std::string device_model;
  std::string link;
  std::vector<PredictRow> rows;
  int64_t grid48_points = 0;
  std::string grid48_model;
  double grid48_ms_median = kNaN;
  double grid48_ms_max = kNaN;
};

// A built-in model on the CPU for the predict sections: its instance and its workload record (fp32,
// one warm-up step).
struct PredictWorkload {
  std::unique_ptr<WorkloadInstance> instance;
  profiler::Workload spec;
};
PredictWorkload predict_workload(const std::string& model, int64_t batch, int64_t seq,
                                 int64_t steps);
// One point of it measured on host-sim, as a sweep measures it (no timeline).
profiler::RunOutcome measure_point(PredictWorkload& w, const profiler::EngineConfig& config,
                                   const OffloadOptions& base);

PredictResult bench_predict(const PredictArgs& args);
void print_predict(const PredictResult& r);
json predict_json(const PredictResult& r);

// ---- predict-cpu -------------------------------------------------------------------------------
// The predictor checked against what it cannot share rules with: this CPU's measured time. Each
// model's steps are recorded on this CPU's clock (no device model), its grid predicted, then every
// point measured; per point, the prediction against the measured median and its interval, the
// peaks, and the physical bound. This machine's speed drifts over minutes, so recording and
// measuring go in interleaved rounds: each round records and predicts the grid and measures every
// point (alternate rounds in reverse order); a point's prediction is the median of its rounds', its
// measurement the median and interval of all its steps.

struct PredictCpuArgs {
  std::vector<std::string> models = {"small", "gpt-small"};
  int64_t batch = 4;  // the CLI's defaults
  int64_t seq = 128;
  std::vector<int64_t> sizes = {64 << 10, 1 << 20};
  std::vector<int64_t> windows = {1, 4};
  std::vector<int64_t> prefetch = {0, 1};
  std::vector<std::string> checkpoint = {"none", "all"};
  std::string link = "pcie4";
  int64_t rounds = 3;
  int64_t steps = 3;  // measured per point and round, after one warm-up
};

struct PredictCpuPoint {
  std::string model;
  std::string config;  // the point in words
  double predicted_ms = kNaN;
  double predicted_spread_pct = kNaN;  // (max - min) / median of the rounds' predictions
  double bound_ms = kNaN;
  double stalled_ms = kNaN;  // the compute's predicted waits for copies
  int64_t window_waits = 0;
  double measured_ms = kNaN;  // median
  double ci_low_ms = kNaN, ci_high_ms = kNaN;
  double ci_level = 0.0;
  double step_err_pct = kNaN;  // predicted against the measured median
  bool inside = false;         // in the measured interval, or within 10%
  int64_t predicted_peak = 0, measured_peak = 0;
  int64_t predicted_offloaded = 0, measured_offloaded = 0;
  std::string error;  // a point that failed to run
};

struct PredictCpuResult {
  std::string link;
  std::vector<std::string> sources;  // per model
  std::vector<PredictCpuPoint> points;
  double record_s = 0.0, measure_s = 0.0;
};

PredictCpuResult bench_predict_cpu(const PredictCpuArgs& args);
void print_predict_cpu(const PredictCpuResult& r);
json predict_cpu_json(const PredictCpuResult& r);

}  // namespace offtune::bench
