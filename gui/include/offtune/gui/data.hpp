// The dashboard's data: immutable snapshots of what the store holds, built by workers off the GUI
// thread and handed to views and models as shared pointers to const. A view never reads the store
// itself; it asks for a snapshot and swaps it in when the job that built it is still the newest.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/knobs.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/records.hpp"

namespace offtune::gui {

// One sweep and its points (by index; point 0 is the no-offload baseline). `points` are those the
// store holds: finished ones and the one being measured (pending); a cancelled or sharded sweep has
// fewer than its grid. `grid` is every point the sweep was asked for, by index (read from
// sweep.grid; empty when that cannot be read), so that the views can count and show what is left.
// `predictions` are a predict-first sweep's figures of its grid points, by index, measured or not
// (predicted.hpp); empty for any other sweep.
struct SweepData {
  profiler::SweepRecord sweep;
  std::vector<profiler::PointRecord> points;
  std::vector<profiler::EngineConfig> grid;
  std::vector<profiler::PointPrediction> predictions;
};

// The configs of a sweep's grid by point index, from its stored JSON (SweepRecord::grid, written
// by profiler::grid_json), expanded by profiler::expand_grid as the sweep ran them; empty when the
// text is not such a grid.
std::vector<profiler::EngineConfig> grid_configs(const std::string& grid_json);
// A snapshot with its grid filled in.
SweepData make_sweep_data(profiler::SweepRecord sweep, std::vector<profiler::PointRecord> points,
                          std::vector<profiler::PointPrediction> predictions = {});

// The one count of a sweep's progress that the tree, the sweep heading and the form all show:
// points of the grid finished (ok, failed or out of memory) out of the grid's points.
struct SweepCounts {
  int64_t total = 0;     // points of the grid (the points held, when the grid is unknown)
  int64_t measured = 0;  // finished: ok + failed + oom
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t oom = 0;
  int64_t pending = 0;  // held by the store but not finished (being measured, or left by a crash)
  int64_t unmeasured() const { return total - measured; }
};
SweepCounts sweep_counts(const SweepData& sweep);
// "10/61 measured" (the tree), the same count for every front end.
std::string describe_counts(const SweepCounts& c);

// What the heatmap's rows and columns can be: a knob a sweep takes as an axis (Knob::nest > 0), a
// row of knob_table() (so two axes are the same knob when they are equal).
using HeatmapAxis = const Knob*;
// Every axis, in the order the dashboard lists them (the axis combos, a variant's words, a grid's
// text): the grid's pair (Knob::always_axis: the heatmap's rows and columns by default), then the
// engine variants (Knob::variant) in the table's order, as describe_variant names them, then the
// other axes as the grid nests them, outer first (semantics, prefetch, link, streams, pinned
// memory, byte window).
const std::vector<HeatmapAxis>& heatmap_axis_order();
// The axis of a knob by its key ("checkpoint"); throws std::invalid_argument for a key that is not
// a sweep axis.
HeatmapAxis heatmap_axis(std::string_view key);
// The heatmap's rows and columns by default: the grid's pair, min_offload_size x
// max_fwd_stash_size.
HeatmapAxis default_row_axis();
HeatmapAxis default_column_axis();
// Its name: the knob's key, as the grid and the store name it ("min_offload_size", "offload_set").
std::string axis_name(HeatmapAxis axis);
// A knob's value as a label: a size in binary units ("64 KiB"), else its plain text ("2",
// "every:2", "on:1", "trl", "on"); "-" for an empty one (a link not recorded).
std::string value_text(const Knob& knob, const KnobValue& value);
// A config's value on the axis, as a label (value_text).
std::string axis_text(const profiler::EngineConfig& config, HeatmapAxis axis);
// A config's numeric value on a threshold axis (the grid's pair: the size, the window), or -1 on
// the others.
int64_t axis_number(const profiler::EngineConfig& config, HeatmapAxis axis);
// The axes the heatmap can be drawn over: the two thresholds, and each other axis whose value
// differs among the sweep's offload points, in heatmap_axis_order().
std::vector<HeatmapAxis> heatmap_axes(const SweepData& sweep);

// A sweep's variants: the settings of its offload points other than the heatmap's two axes (each
// axis knob in heatmap_axis_order(), in its words: Knob::words), as labels naming only what
// differs among them ("trl semantics", "prefetch 2, link pcie5"), in grid order. Empty when every
// point shares them (one variant: nothing to choose).
std::vector<std::string> sweep_variants(const SweepData& sweep,
                                        HeatmapAxis rows = default_row_axis(),
                                        HeatmapAxis cols = default_column_axis());
// Each point's variant label (as sweep_variants names it) by point index, over the sweep's grid
// (its points when the grid is unknown): empty for the baseline and in a sweep of one variant.
std::map<int64_t, std::string> variants_by_index(const SweepData& sweep,
                                                 HeatmapAxis rows = default_row_axis(),
                                                 HeatmapAxis cols = default_column_axis());

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

// The figures a sweep can be coloured or plotted by. Each memory figure says what it is, as the
// recommender names them (profiler::MemoryFigure, describe_memory): the peak of the bytes of live
// tensors (allocated), of what the caching allocator holds (reserved: what torch runs out of), of
// the device total (reserved plus the CUDA context and libraries outside the allocator), and the
// host memory the run held (profiler::host_held: the process's peak where measured, else
// offtune's pinned pool or its host copies at their peak).
enum class SweepMetric {
  StepTime,
  Slowdown,
  PeakAllocated,
  PeakReserved,
  PeakTotal,
  HostHeld,
  HiddenCopy
};
inline constexpr SweepMetric kSweepMetrics[] = {
    SweepMetric::StepTime,     SweepMetric::Slowdown,  SweepMetric::PeakAllocated,
    SweepMetric::PeakReserved, SweepMetric::PeakTotal, SweepMetric::HostHeld,
    SweepMetric::HiddenCopy};
// The memory figures, in the order the dashboard offers them as the Pareto chart's axis.
inline constexpr SweepMetric kMemoryMetrics[] = {SweepMetric::PeakTotal, SweepMetric::PeakReserved,
                                                 SweepMetric::PeakAllocated, SweepMetric::HostHeld};
bool is_memory_metric(SweepMetric m);
// The metric of the device figure a budget is checked against.
SweepMetric memory_metric(profiler::MemoryFigure figure);
// The device figure of a metric; empty for HostHeld and the metrics that are not memory.
std::optional<profiler::MemoryFigure> memory_figure(SweepMetric m);

// "step time (ms)", "slowdown vs baseline", "peak allocated", "peak reserved", "peak device
// total", "host memory held", "hidden copy %".
const char* metric_label(SweepMetric m);
// True when a smaller value is better (all but hidden copy %).
bool lower_is_better(SweepMetric m);
// The point's value of the metric; empty unless the point is ok (and, for slowdown, the sweep's
// baseline is ok too; for host memory held, it was recorded: a store older than the figure has 0).
std::optional<double> metric_value(const SweepData& sweep, const profiler::PointRecord& point,
                                   SweepMetric m);
// The point's value of a memory metric in bytes, ok or not (0 when not recorded): the figure a
// table or tooltip shows beside the others.
int64_t memory_bytes(const profiler::RunSummary& s, SweepMetric m);
// The value as shown in a cell or tooltip: "12.3 ms", "1.07x", "48.0 MiB", "83.1 %". With
// min_decimals, at least that many decimals (metric_decimals picks them per sweep).
std::string format_metric(SweepMetric m, double value, int min_decimals = 0);
// The value without its unit ("12.3", "1.07", "48.0", "83.1"): a heatmap cell too small for the
// whole text; the unit is in the legend. For memory the unit is the value's own (MiB here).
std::string format_metric_number(SweepMetric m, double value, int min_decimals = 0);

// The fewest decimals (within each metric's cap) with which the sweep's distinct values of each
// metric print distinctly: 7,466,248 and 7,486,728 bytes read "7.12 MiB" and "7.14 MiB", not both
// "7.1 MiB". Values that still print alike differ by less than the cap shows (see tooltips for
// exact bytes).
struct MetricDecimals {
  int step = 0, slowdown = 0, peak = 0, reserved = 0, total = 0, host = 0, hidden = 0;
  int of(SweepMetric m) const;
  int& of(SweepMetric m);
  friend bool operator==(const MetricDecimals&, const MetricDecimals&) = default;
};
MetricDecimals metric_decimals(const SweepData& sweep);

// Exact bytes with thousands separators: "46,285,832 bytes".
std::string format_bytes_exact(int64_t bytes);

// The spread of a point's step time. Kinds: a confidence interval of the median (level > 0), an
// exact time (a device model timed every step alike: zero width), min..max of the steps (recorded
// before intervals were), or nothing known.
enum class SpreadKind { None, Interval, Exact, MinMax };
struct StepSpread {
  SpreadKind kind = SpreadKind::None;
  double low = 0.0, high = 0.0, level = 0.0;
  // Half the width relative to the median, e.g. 0.031 for +-3.1 %; 0 when exact or unknown.
  double relative = 0.0;
};
StepSpread step_spread(const profiler::RunSummary& s);
// "190.4-202.4 ms (95 % CI)", "exact (modelled)", "188.1-210.0 ms (min-max)", or "".
std::string describe_spread(const profiler::RunSummary& s, int min_decimals = 0);
// Whether every ok point's step time is exact (a device model timed the sweep): then points "as
// good as the recommended one" are exact ties, not equal within noise.
bool exact_times(const SweepData& sweep);
// "+-3.1 %" for a cell's second line; "" when exact or unknown.
std::string short_spread(const profiler::RunSummary& s);
// The sweep's baseline point (no offloading, no checkpointing: plain training), if it has one.
const profiler::PointRecord* baseline_point(const SweepData& sweep);
// Whether any point (or grid point) of the sweep is an engine variant (checkpointing, offloaded
// boundaries, a disk tier, layer offloading) or the sweep varies another knob of its offload
// points (semantics, prefetch, ...): then tables show a variant column.
bool has_variants(const SweepData& sweep);
// What the Variant column says of each point (by index, over the grid and the points held): the
// engine variant in words (profiler::describe_variant), then each other knob the sweep varies
// among its offload points ("trl semantics", "prefetch 2"), so that rows with the same thresholds
// are told apart.
std::map<int64_t, std::string> variant_texts(const SweepData& sweep);

}  // namespace offtune::gui
