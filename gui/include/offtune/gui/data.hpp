// The dashboard's data: immutable snapshots of what the store holds, built by workers off the GUI
// thread and handed to views and models as shared pointers to const. A view never reads the store
// itself; it asks for a snapshot and swaps it in when the job that built it is still the newest.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::gui {

// One sweep and its points (by index; point 0 is the no-offload baseline).
struct SweepData {
  profiler::SweepRecord sweep;
  std::vector<profiler::PointRecord> points;
};

// What the store lists: every sweep with its points, and every run without its per-run data.
struct StoreIndex {
  std::string path;
  std::vector<SweepData> sweeps;          // by id
  std::vector<profiler::RunRecord> runs;  // by id
};

// One run with everything recorded for it.
struct RunData {
  profiler::RunRecord run;
  std::vector<profiler::StepRecord> steps;
  std::vector<profiler::TimelineEvent> events;       // by start_ns
  std::vector<profiler::OccupancySample> occupancy;  // by time_ns
};

using StoreIndexPtr = std::shared_ptr<const StoreIndex>;
using SweepDataPtr = std::shared_ptr<const SweepData>;
using RunDataPtr = std::shared_ptr<const RunData>;

// The figures a sweep can be coloured or plotted by.
enum class SweepMetric { StepTime, Slowdown, PeakMemory, HiddenCopy };
inline constexpr SweepMetric kSweepMetrics[] = {SweepMetric::StepTime, SweepMetric::Slowdown,
                                                SweepMetric::PeakMemory, SweepMetric::HiddenCopy};

// "step time (ms)", "slowdown vs baseline", "peak device memory", "hidden copy %".
const char* metric_label(SweepMetric m);
// True when a smaller value is better (all but hidden copy %).
bool lower_is_better(SweepMetric m);
// The point's value of the metric; empty unless the point is ok (and, for slowdown, the sweep's
// baseline is ok too).
std::optional<double> metric_value(const SweepData& sweep, const profiler::PointRecord& point,
                                   SweepMetric m);
// The value as shown in a cell or tooltip: "12.3 ms", "1.07x", "48.0 MiB", "83.1 %".
std::string format_metric(SweepMetric m, double value);
// The sweep's baseline point (offload = false), if it has one.
const profiler::PointRecord* baseline_point(const SweepData& sweep);

}  // namespace offtune::gui
