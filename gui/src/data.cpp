#include "offtune/gui/data.hpp"

#include <fmt/format.h>

#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

const char* metric_label(SweepMetric m) {
  switch (m) {
    case SweepMetric::StepTime:
      return "step time (ms)";
    case SweepMetric::Slowdown:
      return "slowdown vs baseline";
    case SweepMetric::PeakMemory:
      return "peak device memory";
    case SweepMetric::HiddenCopy:
      return "hidden copy %";
  }
  return "?";
}

bool lower_is_better(SweepMetric m) { return m != SweepMetric::HiddenCopy; }

const pf::PointRecord* baseline_point(const SweepData& sweep) {
  for (const auto& p : sweep.points) {
    if (!p.config.offload) return &p;
  }
  return nullptr;
}

std::optional<double> metric_value(const SweepData& sweep, const pf::PointRecord& point,
                                   SweepMetric m) {
  if (point.status != pf::PointStatus::Ok) return std::nullopt;
  switch (m) {
    case SweepMetric::StepTime:
      return point.summary.step_ms_median;
    case SweepMetric::Slowdown: {
      const auto* base = baseline_point(sweep);
      if (base == nullptr || base->status != pf::PointStatus::Ok ||
          base->summary.step_ms_median <= 0) {
        return std::nullopt;
      }
      return pf::slowdown(point, *base);
    }
    case SweepMetric::PeakMemory:
      return static_cast<double>(point.summary.peak_allocated);
    case SweepMetric::HiddenCopy:
      // A point that copies nothing (the baseline, or thresholds that keep every tensor): "0 %
      // hidden" would read as the worst overlap, not as n/a.
      if (!point.config.offload ||
          (point.summary.offloaded_bytes == 0 && point.summary.reloaded_bytes == 0)) {
        return std::nullopt;
      }
      return point.summary.hidden_copy_pct;
  }
  return std::nullopt;
}

std::string format_metric(SweepMetric m, double value) {
  switch (m) {
    case SweepMetric::StepTime:
      return fmt::format("{:.{}f} ms", value, value < 10 ? 2 : 1);
    case SweepMetric::Slowdown:
      return fmt::format("{:.2f}x", value);
    case SweepMetric::PeakMemory:
      return pf::format_size(value, 1);
    case SweepMetric::HiddenCopy:
      return fmt::format("{:.1f} %", value);
  }
  return {};
}

}  // namespace offtune::gui
