#include "offtune/gui/predicted.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace offtune::gui {

namespace pf = offtune::profiler;

const pf::PointPrediction* find_prediction(const SweepData& sweep, int64_t index) {
  const auto& all = sweep.predictions;
  // By index, usually every grid point from 0: try the direct slot first.
  if (index >= 0 && static_cast<uint64_t>(index) < all.size() &&
      all[static_cast<size_t>(index)].index == index) {
    return &all[static_cast<size_t>(index)];
  }
  const auto it = std::find_if(all.begin(), all.end(),
                               [&](const pf::PointPrediction& p) { return p.index == index; });
  return it == all.end() ? nullptr : &*it;
}

std::optional<PredictionError> prediction_error(const pf::PointPrediction& predicted,
                                                const pf::PointRecord& measured) {
  const auto& s = measured.summary;
  if (measured.status != pf::PointStatus::Ok || !(s.step_ms_median > 0) || s.peak_allocated <= 0) {
    return std::nullopt;
  }
  PredictionError e;
  e.step_pct = 100.0 * (predicted.step_ms() - s.step_ms_median) / s.step_ms_median;
  e.peak_pct = 100.0 * static_cast<double>(predicted.peak_allocated - s.peak_allocated) /
               static_cast<double>(s.peak_allocated);
  return e;
}

std::string format_error_pct(double pct) {
  const int decimals = std::abs(pct) < 1.0 ? 2 : 1;
  const double shown = std::round(pct * std::pow(10.0, decimals)) / std::pow(10.0, decimals);
  if (shown == 0.0) return "0 %";  // no "+0.00 %" or "-0.00 %" for an exact prediction
  return fmt::format("{:+.{}f} %", shown, decimals);
}

std::string describe_prediction_error(const PredictionError& e) {
  // A device model's predictions usually match to the nanosecond and the byte.
  if (std::abs(e.step_pct) < 1e-6 && e.peak_pct == 0.0) return "exact";
  return "step " + format_error_pct(e.step_pct) + ", peak " + format_error_pct(e.peak_pct);
}

std::vector<pf::PointRecord> predicted_only_points(const SweepData& sweep) {
  std::vector<pf::PointRecord> out;
  for (const auto& q : sweep.predictions) {
    const bool held = std::any_of(sweep.points.begin(), sweep.points.end(),
                                  [&](const pf::PointRecord& p) { return p.index == q.index; });
    if (held) continue;
    pf::PointRecord p;
    p.sweep = sweep.sweep.id;
    p.index = q.index;
    p.status = pf::PointStatus::Pending;
    if (q.index >= 0 && static_cast<uint64_t>(q.index) < sweep.grid.size()) {
      p.config = sweep.grid[static_cast<size_t>(q.index)];
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace offtune::gui
