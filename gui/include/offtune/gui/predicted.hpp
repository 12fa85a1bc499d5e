// Predicted points beside measured ones: a predict-first sweep stores the what-if predictor's
// figures of every grid point (profiler::PointPrediction), measured or not. The sweep view's chart
// and table show them next to the measurements, with how far off each prediction was.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/profiler/records.hpp"

namespace offtune::gui {

// The sweep's prediction of the point at `index`, or null (not a predict-first sweep, or a point it
// did not predict).
const profiler::PointPrediction* find_prediction(const SweepData& sweep, int64_t index);

// How far a prediction was from its measurement, in % of the measurement: (predicted - measured) /
// measured, so +2 % is a prediction 2 % too high.
struct PredictionError {
  double step_pct = 0.0;
  double peak_pct = 0.0;
};
// Only for a point measured ok with figures above zero to compare with.
std::optional<PredictionError> prediction_error(const profiler::PointPrediction& predicted,
                                                const profiler::PointRecord& measured);
// "+1.2 %", "-0.35 %", "0 %": two decimals below 1 %, where the predictor usually is.
std::string format_error_pct(double pct);
// "step +1.2 %, peak -0.35 %", or "exact" when both match (a device model's usually do).
std::string describe_prediction_error(const PredictionError& e);

// The grid points the sweep predicted but the store holds no point of (a predict-first sweep
// measures only the points that matter), as pending records with their grid configs, by index.
std::vector<profiler::PointRecord> predicted_only_points(const SweepData& sweep);

}  // namespace offtune::gui
