// The predict section of offtune-bench: the what-if predictor's error against measured points and
// its speed. For each model, one step is recorded and the default grid is predicted, then every
// point is measured on host-sim with the same device model; the table gives the worst and the mean
// error of step time, peak memory and hidden-copy share, and the time recording and predicting
// took. A 48-point grid (8 sizes x 3 windows x 2 prefetch depths) is predicted on the largest
// trace, to time the predictor on a grid of that size.
#include <ATen/Parallel.h>
#include <c10/core/Device.h>

#include <cmath>
#include <cstdlib>
#include <memory>

#include "offtune/device_model.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/samples/registry.hpp"
#include "profiler_bench.hpp"

namespace offtune::bench {

namespace pf = offtune::profiler;

PredictWorkload predict_workload(const std::string& model, int64_t batch, int64_t seq,
                                 int64_t steps) {
  samples::WorkloadSpec spec;
  spec.model = model;
  spec.batch = batch;
  spec.seq = seq;
  PredictWorkload w{samples::make_workload(spec, c10::Device(c10::kCPU)), {}};
  w.spec.model = model;
  w.spec.batch = batch;
  w.spec.seq = seq;
  w.spec.dtype = "fp32";
  w.spec.steps = steps;
  w.spec.warmup = 1;
  return w;
}

pf::RunOutcome measure_point(PredictWorkload& w, const pf::EngineConfig& config,
                             const OffloadOptions& base) {
  pf::RunSpec run;
  run.workload = w.spec;
  run.config = config;
  run.base = base;
  run.env.backend = "host-sim";
  run.record_timeline = false;
  auto store = pf::make_memory_store();
  return pf::run_measured(*w.instance, run, *store);
}

PredictResult bench_predict(const PredictArgs& args) {
  host_sim::install();
  const DeviceModel model = device_model_named(args.device_model);
  host_sim::set_device_model(&model);
  struct Reset {
    ~Reset() { host_sim::set_device_model(nullptr); }
  } reset;
  PredictResult result;
  result.device_model = model.title;
  result.link = "pcie4";
  const LinkModel link = LinkModel::pcie4();
  OffloadOptions base;
  base.backend = BackendKind::HostSim;
  base.link = link;
  pf::Grid grid;
  grid.axes["min_offload_size"] = sweep_axis("min_offload_size", args.sizes);
  grid.axes["max_fwd_stash_size"] = sweep_axis("max_fwd_stash_size", args.windows);
  grid.base.link = parse_link(result.link);
  const auto configs = pf::expand_grid(grid);
  pf::Trace last;
  for (const std::string& name : args.models) {
    PredictRow row;
    row.model = name;
    row.batch = args.batch;
    row.seq = args.seq;
    // One step: every modelled step is the same.
    PredictWorkload pw = predict_workload(name, args.batch, args.seq, 1);
    pf::Trace trace = pf::record_trace(*pw.instance, pw.spec, base, Semantics::Offtune);
    row.record_ms = trace.record_ms;
    const auto start = Clock::now();
    std::vector<pf::Prediction> predicted;
    for (const auto& c : configs) predicted.push_back(pf::predict(trace, c, link));
    row.predict_ms = ms_since(start);
    double sum_step = 0, sum_peak = 0;
    const auto measure_start = Clock::now();
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto out = measure_point(pw, configs[i], base);
      if (out.record.status != pf::RunStatus::Ok) {
        ++row.failed;
        continue;
      }
      const auto& m = out.record.summary;
      const double step_err =
          100.0 * std::abs(predicted[i].step_ms() - m.step_ms_median) / m.step_ms_median;
      const double peak_err =
          100.0 * std::abs(static_cast<double>(predicted[i].peak_allocated - m.peak_allocated)) /
          static_cast<double>(m.peak_allocated);
      row.max_step_err_pct = std::max(row.max_step_err_pct, step_err);
      row.max_peak_err_pct = std::max(row.max_peak_err_pct, peak_err);
      if (m.offloaded_bytes > 0) {
        row.max_hidden_err_pts = std::max(
            row.max_hidden_err_pts, std::abs(predicted[i].hidden_copy_pct - m.hidden_copy_pct));
      }
      sum_step += step_err;
      sum_peak += peak_err;
      ++row.points;
    }
    row.measure_s = seconds_since(measure_start);
    row.mean_step_err_pct = row.points > 0 ? sum_step / static_cast<double>(row.points) : kNaN;
    row.mean_peak_err_pct = row.points > 0 ? sum_peak / static_cast<double>(row.points) : kNaN;
    result.rows.push_back(row);
    if (trace.events.size() > last.events.size()) {
      last = std::move(trace);
      result.grid48_model = name;
    }
  }
  // 48 points: 8 sizes x 3 windows x 2 prefetch depths, the baseline aside.
  pf::Grid big;
  big.axes["min_offload_size"] = sweep_axis("min_offload_size", "1KiB:16MiB:x4");  // 8 sizes
  big.set_numbers("max_fwd_stash_size", {1, 2, 5}).set_numbers("prefetch", {0, 2});
  std::vector<pf::EngineConfig> big_configs;
  for (const auto& c : pf::expand_grid(big)) {
    if (c.offload) big_configs.push_back(c);
  }
  result.grid48_points = static_cast<int64_t>(big_configs.size());
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    const auto start = Clock::now();
    for (const auto& c : big_configs) (void)pf::predict(last, c, link);
    runs.push_back(ms_since(start));
  }
  result.grid48_ms_median = median(runs);
  result.grid48_ms_max = *std::max_element(runs.begin(), runs.end());
  return result;
}

void print_predict(const PredictResult& r) {
  fmt::print(
      "what-if predictor (host-sim modelling {}, link {}): predicted vs measured, every point "
      "of the grid\n",
      r.device_model, r.link);
  fmt::print("{:<10} {:>6} {:>5} {:>6} {:>10} {:>11} {:>12} {:>12} {:>12} {:>12} {:>13} {:>10}\n",
             "model", "batch", "seq", "points", "record ms", "predict ms", "step err max",
             "step err avg", "peak err max", "peak err avg", "hidden err max", "measure s");
  for (const auto& row : r.rows) {
    fmt::print(
        "{:<10} {:>6} {:>5} {:>6} {:>10} {:>11} {:>11}% {:>11}% {:>11}% {:>11}% {:>10} pts "
        "{:>10}\n",
        row.model, row.batch, row.seq, row.points, fixed(row.record_ms, 0),
        fixed(row.predict_ms, 2), fixed(row.max_step_err_pct, 3), fixed(row.mean_step_err_pct, 3),
        fixed(row.max_peak_err_pct, 3), fixed(row.mean_peak_err_pct, 3),
        fixed(row.max_hidden_err_pts, 2), fixed(row.measure_s, 1));
  }
  fmt::print("targets: step time within 10%, peak within 5% on every point\n");
  fmt::print(
      "a {}-point grid predicted from {}'s trace: {} ms median of 5 (max {} ms); target "
      "under 1 s\n\n",
      r.grid48_points, r.grid48_model, fixed(r.grid48_ms_median, 2), fixed(r.grid48_ms_max, 2));
}

json predict_json(const PredictResult& r) {
  json rows = json::array();
  for (const auto& row : r.rows) {
    rows.push_back({{"model", row.model},
                    {"batch", row.batch},
                    {"seq", row.seq},
                    {"points", row.points},
                    {"failed", row.failed},
                    {"record_ms", row.record_ms},
                    {"predict_ms", row.predict_ms},
                    {"step_err_max_pct", number_or_null(row.max_step_err_pct)},
                    {"step_err_mean_pct", number_or_null(row.mean_step_err_pct)},
                    {"peak_err_max_pct", number_or_null(row.max_peak_err_pct)},
                    {"peak_err_mean_pct", number_or_null(row.mean_peak_err_pct)},
                    {"hidden_err_max_points", number_or_null(row.max_hidden_err_pts)},
                    {"measure_s", row.measure_s}});
  }
  return {{"device_model", r.device_model},
          {"link", r.link},
          {"rows", rows},
          {"grid48",
           {{"points", r.grid48_points},
            {"model", r.grid48_model},
            {"ms_median", r.grid48_ms_median},
            {"ms_max", r.grid48_ms_max}}}};
}

}  // namespace offtune::bench
