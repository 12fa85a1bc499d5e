// The predict-cpu section of offtune-bench (profiler_bench.hpp): the what-if predictor on this
// CPU's clock, against the same points measured on it.
#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/profiler/metrics.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/samples/registry.hpp"
#include "profiler_bench.hpp"

namespace offtune::bench {

namespace pf = offtune::profiler;

namespace {

std::string describe(const pf::EngineConfig& c) {
  std::string s = c.checkpoint.enabled() ? "ckpt " + to_string(c.checkpoint) : "";
  if (!c.offload) return s.empty() ? "baseline" : s;
  if (!s.empty()) s += " ";
  return s + pf::format_size(c.min_offload_size) + " w" + std::to_string(c.max_fwd_stash_size) +
         " p" + std::to_string(c.prefetch);
}

}  // namespace

PredictCpuResult bench_predict_cpu(const PredictCpuArgs& args) {
  host_sim::install();
  host_sim::set_device_model(nullptr);  // this CPU's clock
  PredictCpuResult result;
  result.link = args.link;
  pf::Grid grid;
  grid.set_numbers("min_offload_size", args.sizes)
      .set_numbers("max_fwd_stash_size", args.windows)
      .set_numbers("prefetch", args.prefetch)
      .set_names("checkpoint", args.checkpoint);
  grid.base.link = parse_link(args.link);
  const auto configs = pf::expand_grid(grid);
  const size_t n = configs.size();
  std::vector<LinkModel> links;
  for (const auto& c : configs) links.push_back(c.link.model);
  OffloadOptions base;
  base.backend = BackendKind::HostSim;
  base.link = grid.base.link.model;
  for (const std::string& name : args.models) {
    PredictWorkload pw = predict_workload(name, args.batch, args.seq, args.steps);
    std::vector<std::vector<pf::Prediction>> predicted_rounds(n);
    std::vector<std::vector<double>> measured_ms(n);
    std::vector<PredictCpuPoint> rows(n);
    for (int64_t round = 0; round < args.rounds; ++round) {
      auto start = Clock::now();
      const auto predicted = pf::predict_grid(*pw.instance, pw.spec, base, configs, links);
      result.record_s += seconds_since(start);
      if (round == 0) result.sources.push_back(name + ": " + predicted.source);
      for (size_t i = 0; i < n; ++i) predicted_rounds[i].push_back(predicted.points[i]);
      start = Clock::now();
      for (size_t k = 0; k < n; ++k) {
        const size_t i = round % 2 == 0 ? k : n - 1 - k;
        PredictCpuPoint& row = rows[i];
        const auto out = measure_point(pw, configs[i], base);
        if (out.record.status != pf::RunStatus::Ok) {
          row.error = out.record.error;
          continue;
        }
        for (const auto& step : out.steps) {
          measured_ms[i].push_back(static_cast<double>(step.end_ns - step.begin_ns) / 1e6);
        }
        row.measured_peak = std::max(row.measured_peak, out.record.summary.peak_allocated);
        row.measured_offloaded = out.record.summary.offloaded_bytes;
      }
      result.measure_s += seconds_since(start);
    }
    for (size_t i = 0; i < n; ++i) {
      PredictCpuPoint& row = rows[i];
      row.model = name;
      row.config = describe(configs[i]);
      // The round of median predicted time stands for the point (its bound and waits with it).
      auto rounds = predicted_rounds[i];
      std::sort(rounds.begin(), rounds.end(), [](const pf::Prediction& a, const pf::Prediction& b) {
        return a.step_ns < b.step_ns;
      });
      const pf::Prediction& mid = rounds[rounds.size() / 2];
      row.predicted_ms = mid.step_ms();
      row.predicted_spread_pct =
          100.0 * (rounds.back().step_ms() - rounds.front().step_ms()) / row.predicted_ms;
      row.bound_ms = mid.bound_ms();
      row.stalled_ms = static_cast<double>(mid.stalled_ns) / 1e6;
      row.window_waits = mid.window_waits;
      row.predicted_peak = mid.peak_allocated;
      row.predicted_offloaded = mid.offloaded_bytes;
      if (measured_ms[i].empty()) {
        result.points.push_back(row);
        continue;
      }
      const pf::StepStats m = pf::step_stats(measured_ms[i]);
      row.measured_ms = m.median_ms;
      row.ci_low_ms = m.ci_low_ms;
      row.ci_high_ms = m.ci_high_ms;
      row.ci_level = m.ci_level;
      row.step_err_pct = 100.0 * (row.predicted_ms - row.measured_ms) / row.measured_ms;
      const bool in_interval =
          m.ci_level > 0 && row.predicted_ms >= m.ci_low_ms && row.predicted_ms <= m.ci_high_ms;
      row.inside = in_interval || std::abs(row.step_err_pct) <= 10.0;
      result.points.push_back(row);
    }
  }
  return result;
}

void print_predict_cpu(const PredictCpuResult& r) {
  fmt::print(
      "what-if predictor on this CPU's clock (host-sim, no device model, link {}): predicted vs "
      "measured, every point\n",
      r.link);
  for (const auto& s : r.sources) fmt::print("  recorded: {}\n", s);
  fmt::print(
      "{:<10} {:<22} {:>9} {:>6} {:>9} {:>6} {:>8} {:>9} {:>20} {:>7} {:>4} {:>10} {:>10} "
      "{:>8}\n",
      "model", "point", "predicted", "spread", "bound", "gap", "stall ms", "measured",
      "interval (level)", "err", "ok", "pred peak", "meas peak", "peak err");
  int64_t ok = 0, measured = 0, peak_exact = 0, near_bound = 0, offloading = 0;
  double gap_max = 0.0;
  for (const auto& p : r.points) {
    if (!p.error.empty()) {
      fmt::print("{:<10} {:<22} failed: {}\n", p.model, p.config, p.error);
      continue;
    }
    ++measured;
    ok += p.inside ? 1 : 0;
    peak_exact += p.predicted_peak == p.measured_peak ? 1 : 0;
    const double gap = 100.0 * (p.predicted_ms - p.bound_ms) / p.bound_ms;
    if (p.predicted_offloaded > 0) {
      ++offloading;
      near_bound += gap <= 5.0 ? 1 : 0;
      gap_max = std::max(gap_max, gap);
    }
    const double peak_err = p.measured_peak > 0
                                ? 100.0 * static_cast<double>(p.predicted_peak - p.measured_peak) /
                                      static_cast<double>(p.measured_peak)
                                : kNaN;
    fmt::print(
        "{:<10} {:<22} {:>9} {:>5}% {:>9} {:>5}% {:>8} {:>9} {:>20} {:>6}% {:>4} {:>10} {:>10} "
        "{:>7}%\n",
        p.model, p.config, fixed(p.predicted_ms, 1), fixed(p.predicted_spread_pct, 0),
        fixed(p.bound_ms, 1), fixed(gap, 1), fixed(p.stalled_ms, 1), fixed(p.measured_ms, 1),
        fmt::format("{}..{} ({:.0f}%)", fixed(p.ci_low_ms, 1), fixed(p.ci_high_ms, 1),
                    100.0 * p.ci_level),
        fixed(p.step_err_pct, 1), p.inside ? "yes" : "no", pf::format_size(p.predicted_peak),
        pf::format_size(p.measured_peak), fixed(peak_err, 2));
  }
  fmt::print(
      "step time in the measured interval or within 10%: {} of {} points ({}%; target 90%); "
      "peak allocated exact: {} of {} (target: all)\n",
      ok, measured, fixed(measured > 0 ? 100.0 * static_cast<double>(ok) / measured : kNaN, 0),
      peak_exact, measured);
  fmt::print(
      "the schedule against the physical bound (gap: predicted over bound; stall: the compute's "
      "waits for copies, the why of a gap): {} of {} offloading points within 5%, the widest "
      "{}%\n",
      near_bound, offloading, fixed(gap_max, 1));
  fmt::print("recording {} s, measuring {} s\n\n", fixed(r.record_s, 1), fixed(r.measure_s, 1));
}

json predict_cpu_json(const PredictCpuResult& r) {
  json points = json::array();
  for (const auto& p : r.points) {
    points.push_back({{"model", p.model},
                      {"point", p.config},
                      {"predicted_ms", number_or_null(p.predicted_ms)},
                      {"predicted_spread_pct", number_or_null(p.predicted_spread_pct)},
                      {"bound_ms", number_or_null(p.bound_ms)},
                      {"stalled_ms", number_or_null(p.stalled_ms)},
                      {"window_waits", p.window_waits},
                      {"measured_ms", number_or_null(p.measured_ms)},
                      {"ci_low_ms", number_or_null(p.ci_low_ms)},
                      {"ci_high_ms", number_or_null(p.ci_high_ms)},
                      {"ci_level", p.ci_level},
                      {"step_err_pct", number_or_null(p.step_err_pct)},
                      {"inside", p.inside},
                      {"predicted_peak", p.predicted_peak},
                      {"measured_peak", p.measured_peak},
                      {"predicted_offloaded", p.predicted_offloaded},
                      {"measured_offloaded", p.measured_offloaded},
                      {"error", p.error}});
  }
  return {{"link", r.link},
          {"sources", r.sources},
          {"points", points},
          {"record_s", r.record_s},
          {"measure_s", r.measure_s}};
}

}  // namespace offtune::bench
