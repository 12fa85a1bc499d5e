#include "offtune/gui/data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <variant>

#include "offtune/profiler/knob_text.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

const char* metric_label(SweepMetric m) {
  switch (m) {
    case SweepMetric::StepTime:
      return "step time (ms)";
    case SweepMetric::Slowdown:
      return "slowdown vs baseline";
    case SweepMetric::PeakAllocated:
      return "peak allocated";
    case SweepMetric::PeakReserved:
      return "peak reserved";
    case SweepMetric::PeakTotal:
      return "peak device total";
    case SweepMetric::HostHeld:
      return "host memory held";
    case SweepMetric::HiddenCopy:
      return "hidden copy %";
  }
  return "?";
}

bool lower_is_better(SweepMetric m) { return m != SweepMetric::HiddenCopy; }

bool is_memory_metric(SweepMetric m) {
  return std::find(std::begin(kMemoryMetrics), std::end(kMemoryMetrics), m) !=
         std::end(kMemoryMetrics);
}

SweepMetric memory_metric(pf::MemoryFigure figure) {
  switch (figure) {
    case pf::MemoryFigure::Allocated:
      return SweepMetric::PeakAllocated;
    case pf::MemoryFigure::Reserved:
      return SweepMetric::PeakReserved;
    case pf::MemoryFigure::Total:
      return SweepMetric::PeakTotal;
  }
  return SweepMetric::PeakTotal;
}

std::optional<pf::MemoryFigure> memory_figure(SweepMetric m) {
  switch (m) {
    case SweepMetric::PeakAllocated:
      return pf::MemoryFigure::Allocated;
    case SweepMetric::PeakReserved:
      return pf::MemoryFigure::Reserved;
    case SweepMetric::PeakTotal:
      return pf::MemoryFigure::Total;
    default:
      return std::nullopt;
  }
}

int64_t memory_bytes(const pf::RunSummary& s, SweepMetric m) {
  if (m == SweepMetric::HostHeld) return pf::host_held(s);
  const auto figure = memory_figure(m);
  return figure ? pf::device_peak(s, *figure) : 0;
}

const pf::PointRecord* baseline_point(const SweepData& sweep) {
  for (const auto& p : sweep.points) {
    if (is_baseline(p.config)) return &p;
  }
  return nullptr;
}

bool has_variants(const SweepData& sweep) {
  const auto variant = [](const pf::EngineConfig& c) { return !pf::describe_variant(c).empty(); };
  return std::any_of(sweep.points.begin(), sweep.points.end(),
                     [&](const pf::PointRecord& p) { return variant(p.config); }) ||
         std::any_of(sweep.grid.begin(), sweep.grid.end(), variant) ||
         !sweep_variants(sweep).empty();
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
    case SweepMetric::PeakAllocated:
      return static_cast<double>(point.summary.peak_allocated);
    case SweepMetric::PeakReserved:
    case SweepMetric::PeakTotal:
    case SweepMetric::HostHeld:
      // 0: not recorded (reserved is at least allocated wherever it was), not "none held".
      if (point.summary.peak_reserved <= 0 && m != SweepMetric::HostHeld) return std::nullopt;
      if (const int64_t held = memory_bytes(point.summary, m); held > 0) {
        return static_cast<double>(held);
      }
      return std::nullopt;
    case SweepMetric::HiddenCopy:
      // A point that copies nothing (the baseline, or thresholds that keep every tensor): "0 %
      // hidden" would read as the worst overlap, not as n/a.
      if (!pf::copied_anything(point.config, point.summary)) {
        return std::nullopt;
      }
      return point.summary.hidden_copy_pct;
  }
  return std::nullopt;
}

namespace {

// Each metric's own decimals for a value, before a sweep asks for more.
int base_decimals(SweepMetric m, double value) {
  switch (m) {
    case SweepMetric::StepTime:
      return std::abs(value) < 10 ? 2 : 1;
    case SweepMetric::Slowdown:
      return 2;
    default:
      return 1;
  }
}

// Decimals beyond which more digits say nothing: a microsecond of step time, a kibibyte of a
// mebibyte-sized peak, 0.001x, 0.01 %.
int max_decimals(SweepMetric m) {
  switch (m) {
    case SweepMetric::HiddenCopy:
      return 2;
    default:
      return 3;
  }
}

int decimals_for(SweepMetric m, double value, int min_decimals) {
  return std::max(base_decimals(m, value), std::min(min_decimals, max_decimals(m)));
}

}  // namespace

std::string format_metric(SweepMetric m, double value, int min_decimals) {
  const int d = decimals_for(m, value, min_decimals);
  switch (m) {
    case SweepMetric::StepTime:
      return fmt::format("{:.{}f} ms", value, d);
    case SweepMetric::Slowdown:
      return fmt::format("{:.{}f}x", value, d);
    case SweepMetric::HiddenCopy:
      return fmt::format("{:.{}f} %", value, d);
    default:  // memory
      return pf::format_size(value, d);
  }
}

std::string format_metric_number(SweepMetric m, double value, int min_decimals) {
  if (is_memory_metric(m)) {
    std::string s = format_metric(m, value, min_decimals);
    return s.substr(0, s.find(' '));
  }
  return fmt::format("{:.{}f}", value, decimals_for(m, value, min_decimals));
}

namespace {

// A metric's field of MetricDecimals, const or not.
template <typename Decimals>
auto& decimals_field(Decimals& d, SweepMetric m) {
  switch (m) {
    case SweepMetric::StepTime:
      return d.step;
    case SweepMetric::Slowdown:
      return d.slowdown;
    case SweepMetric::PeakAllocated:
      return d.peak;
    case SweepMetric::PeakReserved:
      return d.reserved;
    case SweepMetric::PeakTotal:
      return d.total;
    case SweepMetric::HostHeld:
      return d.host;
    case SweepMetric::HiddenCopy:
      break;
  }
  return d.hidden;
}

}  // namespace

int MetricDecimals::of(SweepMetric m) const { return decimals_field(*this, m); }
int& MetricDecimals::of(SweepMetric m) { return decimals_field(*this, m); }

MetricDecimals metric_decimals(const SweepData& sweep) {
  MetricDecimals out;
  for (SweepMetric m : kSweepMetrics) {
    std::vector<double> values;
    for (const auto& p : sweep.points) {
      if (const auto v = metric_value(sweep, p, m); v && std::isfinite(*v)) values.push_back(*v);
    }
    std::sort(values.begin(), values.end());
    // Values a rounding error apart (1.87 computed two ways) are one value, not a reason for
    // more digits.
    values.erase(std::unique(values.begin(), values.end(),
                             [](double a, double b) {
                               return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
                             }),
                 values.end());
    int d = 0;
    for (; d < max_decimals(m); ++d) {
      bool distinct = true;
      for (size_t i = 1; i < values.size() && distinct; ++i) {
        distinct = format_metric(m, values[i - 1], d) != format_metric(m, values[i], d);
      }
      if (distinct) break;
    }
    out.of(m) = d;
  }
  return out;
}

std::string format_bytes_exact(int64_t bytes) {
  std::string digits = std::to_string(bytes < 0 ? -bytes : bytes);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return (bytes < 0 ? "-" : "") + digits + " bytes";
}

StepSpread step_spread(const pf::RunSummary& s) {
  StepSpread out;
  const pf::StepInterval ci = pf::step_interval(s);
  out.low = ci.low;
  out.high = ci.high;
  out.level = ci.level;
  if (ci.level > 0 && ci.low == ci.high) {
    // Every step took the same time: a device model timed it (as the CLI's report says).
    out.kind = SpreadKind::Exact;
  } else if (ci.level > 0) {
    out.kind = SpreadKind::Interval;
  } else if (ci.low < ci.high) {
    out.kind = SpreadKind::MinMax;
  }
  if ((out.kind == SpreadKind::Interval || out.kind == SpreadKind::MinMax) &&
      s.step_ms_median > 0) {
    out.relative = (out.high - out.low) / 2.0 / s.step_ms_median;
  }
  return out;
}

std::string describe_spread(const pf::RunSummary& s, int min_decimals) {
  const StepSpread sp = step_spread(s);
  const auto ms = [&](double v) {
    return fmt::format("{:.{}f}", v, decimals_for(SweepMetric::StepTime, v, min_decimals));
  };
  switch (sp.kind) {
    case SpreadKind::Exact:
      return "exact (modelled)";
    case SpreadKind::Interval:
      return fmt::format("{}\u2013{} ms ({:.0f} % CI)", ms(sp.low), ms(sp.high), sp.level * 100);
    case SpreadKind::MinMax:
      return fmt::format("{}\u2013{} ms (min\u2013max)", ms(sp.low), ms(sp.high));
    case SpreadKind::None:
      break;
  }
  return {};
}

bool exact_times(const SweepData& sweep) {
  bool any = false;
  for (const auto& p : sweep.points) {
    if (p.status != pf::PointStatus::Ok) continue;
    if (step_spread(p.summary).kind != SpreadKind::Exact) return false;
    any = true;
  }
  return any;
}

std::string short_spread(const pf::RunSummary& s) {
  const StepSpread sp = step_spread(s);
  if (sp.relative <= 0) return {};
  return fmt::format("\u00b1{:.{}f} %", sp.relative * 100, sp.relative < 0.1 ? 1 : 0);
}

std::vector<pf::EngineConfig> grid_configs(const std::string& grid_json) {
  try {
    return pf::expand_grid(pf::parse_grid_json(grid_json));
  } catch (const std::exception&) {
    return {};  // not a grid this version can read: counts fall back to the points held
  }
}

SweepData make_sweep_data(pf::SweepRecord sweep, std::vector<pf::PointRecord> points,
                          std::vector<pf::PointPrediction> predictions) {
  SweepData d;
  d.grid = grid_configs(sweep.grid);
  d.sweep = std::move(sweep);
  d.points = std::move(points);
  d.predictions = std::move(predictions);
  return d;
}

SweepCounts sweep_counts(const SweepData& sweep) {
  SweepCounts c;
  int64_t last_index = -1;
  for (const auto& p : sweep.points) {
    c.ok += p.status == pf::PointStatus::Ok;
    c.failed += p.status == pf::PointStatus::Failed;
    c.oom += p.status == pf::PointStatus::OutOfMemory;
    c.pending += p.status == pf::PointStatus::Pending;
    last_index = std::max(last_index, p.index);
  }
  c.measured = c.ok + c.failed + c.oom;
  // A grid that cannot be read, or points beyond it (a store written by a newer grid layout):
  // never claim fewer points than are held.
  c.total = sweep.grid.empty()
                ? static_cast<int64_t>(sweep.points.size())
                : std::max({static_cast<int64_t>(sweep.grid.size()),
                            static_cast<int64_t>(sweep.points.size()), last_index + 1});
  return c;
}

std::string describe_counts(const SweepCounts& c) {
  return fmt::format("{}/{} measured", c.measured, c.total);
}

const std::vector<HeatmapAxis>& heatmap_axis_order() {
  static const std::vector<HeatmapAxis> order = [] {
    std::vector<HeatmapAxis> out;
    const auto table = knob_table();
    for (const Knob& k : table) {
      if (k.always_axis) out.push_back(&k);
    }
    for (const Knob& k : table) {
      if (k.nest > 0 && !k.always_axis && k.variant) out.push_back(&k);
    }
    for (const Knob* k : axis_knobs()) {
      if (!k->always_axis && !k->variant) out.push_back(k);
    }
    return out;
  }();
  return order;
}

HeatmapAxis heatmap_axis(std::string_view key) {
  const Knob& k = knob(key);
  if (k.nest == 0) {
    throw std::invalid_argument("knob '" + std::string(key) + "' is not an axis of a sweep");
  }
  return &k;
}

// The grid's pair leads heatmap_axis_order() in the table's order: the minimum size, then the
// window.
HeatmapAxis default_row_axis() { return heatmap_axis_order().at(0); }
HeatmapAxis default_column_axis() { return heatmap_axis_order().at(1); }

std::string axis_name(HeatmapAxis axis) { return std::string(axis->key); }

std::string value_text(const Knob& knob, const KnobValue& value) {
  if (const auto* n = std::get_if<int64_t>(&value); n != nullptr && knob.kind == KnobKind::Size) {
    return pf::format_size(*n);
  }
  std::string text = plain_text(value, knob.kind);
  return text.empty() ? "-" : text;
}

std::string axis_text(const pf::EngineConfig& c, HeatmapAxis axis) {
  return value_text(*axis, axis->get(c));
}

int64_t axis_number(const pf::EngineConfig& c, HeatmapAxis axis) {
  if (!axis->always_axis) return -1;
  const KnobValue value = axis->get(c);
  const auto* n = std::get_if<int64_t>(&value);
  return n != nullptr ? *n : -1;
}

std::vector<HeatmapAxis> heatmap_axes(const SweepData& sweep) {
  std::vector<HeatmapAxis> out;
  for (HeatmapAxis a : heatmap_axis_order()) {
    if (a->always_axis) {
      out.push_back(a);
      continue;
    }
    std::optional<KnobValue> first;
    bool differs = false;
    const auto see = [&](const pf::EngineConfig& c) {
      if (!c.offload) return;
      KnobValue v = a->get(c);
      if (!first) first = v;
      differs = differs || v != *first;
    };
    for (const auto& c : sweep.grid) see(c);
    for (const auto& p : sweep.points) see(p.config);
    if (differs) out.push_back(a);
  }
  return out;
}

namespace {

// The settings that make a variant, in words, one per axis of heatmap_axis_order().
std::vector<std::string> variant_fields(const pf::EngineConfig& c) {
  std::vector<std::string> out;
  for (HeatmapAxis a : heatmap_axis_order()) out.push_back(a->words(c));
  return out;
}

size_t axis_position(HeatmapAxis axis) {
  const auto& order = heatmap_axis_order();
  return static_cast<size_t>(std::find(order.begin(), order.end(), axis) - order.begin());
}

// Which fields differ among the sweep's offload configs, leaving out the heatmap's axes.
std::vector<bool> differing_fields(const std::vector<pf::EngineConfig>& configs, HeatmapAxis rows,
                                   HeatmapAxis cols) {
  std::vector<std::vector<std::string>> seen;
  for (const auto& c : configs) {
    if (c.offload) seen.push_back(variant_fields(c));
  }
  std::vector<bool> differs(heatmap_axis_order().size(), false);
  for (const auto& f : seen) {
    for (size_t k = 0; k < f.size(); ++k) differs[k] = differs[k] || f[k] != seen.front()[k];
  }
  for (HeatmapAxis a : {rows, cols}) {
    if (const size_t k = axis_position(a); k < differs.size()) differs[k] = false;
  }
  return differs;
}

std::string label(const pf::EngineConfig& c, const std::vector<bool>& differs) {
  const auto& order = heatmap_axis_order();
  std::string out;
  for (size_t k = 0; k < order.size() && k < differs.size(); ++k) {
    if (!differs[k]) continue;
    if (!out.empty()) out += ", ";
    out += pf::varied_words(*order[k], c);
  }
  return out;
}

// The configs of a sweep by index: its grid's, and those of points beyond it (or of every point
// without a grid).
std::vector<std::pair<int64_t, const pf::EngineConfig*>> configs_by_index(const SweepData& sweep) {
  std::vector<std::pair<int64_t, const pf::EngineConfig*>> configs;
  for (size_t i = 0; i < sweep.grid.size(); ++i) {
    configs.emplace_back(static_cast<int64_t>(i), &sweep.grid[i]);
  }
  for (const auto& p : sweep.points) {
    if (p.index < 0 || static_cast<size_t>(p.index) >= sweep.grid.size()) {
      configs.emplace_back(p.index, &p.config);
    }
  }
  return configs;
}

}  // namespace

std::map<int64_t, std::string> variant_texts(const SweepData& sweep) {
  // The grid's configs, but a point held says its own (what was measured).
  std::map<int64_t, const pf::EngineConfig*> configs;
  for (const auto& [index, c] : configs_by_index(sweep)) configs[index] = c;
  for (const auto& p : sweep.points) configs[p.index] = &p.config;
  std::vector<pf::EngineConfig> all;
  for (const auto& [index, c] : configs) all.push_back(*c);
  // The knobs describe_variant does not name (not engine variants, nor the grid's pair) where they
  // differ.
  auto differs = differing_fields(all, default_row_axis(), default_column_axis());
  const auto& order = heatmap_axis_order();
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k]->variant) differs[k] = false;
  }
  std::map<int64_t, std::string> out;
  for (const auto& [index, c] : configs) {
    std::string text = pf::describe_variant(*c);
    const std::string extra = c->offload ? label(*c, differs) : std::string();
    if (!extra.empty()) text += (text.empty() ? "" : ", ") + extra;
    out[index] = text;
  }
  return out;
}

std::map<int64_t, std::string> variants_by_index(const SweepData& sweep, HeatmapAxis rows,
                                                 HeatmapAxis cols) {
  std::vector<std::pair<int64_t, const pf::EngineConfig*>> configs;
  if (!sweep.grid.empty()) {
    for (size_t i = 0; i < sweep.grid.size(); ++i) {
      configs.emplace_back(static_cast<int64_t>(i), &sweep.grid[i]);
    }
  }
  for (const auto& p : sweep.points) {  // points beyond the grid (or no grid): their own configs
    if (p.index < 0 || static_cast<size_t>(p.index) >= sweep.grid.size()) {
      configs.emplace_back(p.index, &p.config);
    }
  }
  std::vector<pf::EngineConfig> all;
  for (const auto& [index, c] : configs) all.push_back(*c);
  const auto differs = differing_fields(all, rows, cols);
  std::map<int64_t, std::string> out;
  for (const auto& [index, c] : configs) out[index] = c->offload ? label(*c, differs) : "";
  return out;
}

std::vector<std::string> sweep_variants(const SweepData& sweep, HeatmapAxis rows,
                                        HeatmapAxis cols) {
  std::vector<std::string> out;
  for (const auto& [index, l] : variants_by_index(sweep, rows, cols)) {
    if (!l.empty() && std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  }
  return out;
}

}  // namespace offtune::gui
