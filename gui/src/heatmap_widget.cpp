// The sweep view's heatmap (heatmap_widget.hpp): one metric over a grid of two knobs.
#include "offtune/gui/heatmap_widget.hpp"

#include <QFontMetrics>
#include <QLinearGradient>
#include <QPainter>
#include <QStringList>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "chart_kit.hpp"
#include "offtune/gui/predicted.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;
using namespace detail;  // the chart kit

// ---------------------------------------------------------------------------------------------
// HeatmapWidget

// Top to bottom: the header (the baseline entry and what the marks mean, wrapped onto as many lines
// as the width needs), the grid with its row labels on the left and column labels and axis title
// below, then the colour scale as a horizontal bar under the grid. Nothing sits beside the grid but
// its row labels, so that the cells get the pane's width.
struct HeatmapWidget::Layout {
  QRect header;    // the lines above the grid
  QRect baseline;  // the baseline entry in it; empty without a baseline
  std::vector<LegendItem> legend;
  std::vector<PlacedItem> legend_at;
  QRect grid;     // the cells; empty when nothing fits
  QRect caption;  // what the colours stand for, above the bar
  QRect bar;      // the colour scale; empty without values
  int row_labels_right = 0;
  int line_height = 0;
};

HeatmapWidget::HeatmapWidget(QWidget* parent) : SweepChart(parent) {}

QRect HeatmapWidget::tooltipRect(int64_t point_index) const { return cellRect(point_index); }

void HeatmapWidget::setShownPoints(std::optional<std::vector<int64_t>> indices) {
  if (indices) {
    shown_.emplace(indices->begin(), indices->end());
  } else {
    shown_.reset();
  }
  rebuild();
  update();
}

void HeatmapWidget::setSharedRange(std::optional<std::pair<double, double>> range) {
  shared_range_ = range;
  updateRange();
  update();
}

std::optional<std::pair<double, double>> HeatmapWidget::valueRange() const {
  if (!has_range_) return std::nullopt;
  return std::make_pair(range_min_, range_max_);
}

void HeatmapWidget::setMetric(SweepMetric metric) {
  if (repaintOnChange(metric_, metric)) updateRange();
}

void HeatmapWidget::setHighlighted(int64_t point_index) {
  repaintOnChange(highlighted_, point_index);
}

const pf::PointRecord& HeatmapWidget::record(const Placement& pl) const {
  return pl.held ? data_->points[pl.pos] : unmeasured_[pl.pos];
}

const pf::PointRecord* HeatmapWidget::point(int64_t point_index) const {
  if (const auto* p = SweepChart::point(point_index)) return p;
  for (const auto& u : unmeasured_) {
    if (u.index == point_index) return &u;
  }
  return nullptr;
}

std::vector<int64_t> HeatmapWidget::unmeasuredPoints() const {
  std::vector<int64_t> out;
  for (const auto& u : unmeasured_) out.push_back(u.index);
  return out;
}

void HeatmapWidget::setAxes(HeatmapAxis rows, HeatmapAxis columns) {
  if (rows == columns || (rows == row_axis_ && columns == col_axis_)) return;
  row_axis_ = rows;
  col_axis_ = columns;
  rebuild();
  update();
}

QStringList HeatmapWidget::rowLabels() const {
  QStringList out;
  for (const auto& t : row_ticks_) out << t.text;
  return out;
}
QStringList HeatmapWidget::columnLabels() const {
  QStringList out;
  for (const auto& t : col_ticks_) out << t.text;
  return out;
}
std::vector<int64_t> HeatmapWidget::stashSizes() const {
  std::vector<int64_t> out;
  for (const auto& t : col_ticks_) {
    if (t.number >= 0) out.push_back(t.number);
  }
  return out;
}
std::vector<int64_t> HeatmapWidget::offloadSizes() const {
  std::vector<int64_t> out;
  for (const auto& t : row_ticks_) {
    if (t.number >= 0) out.push_back(t.number);
  }
  return out;
}

void HeatmapWidget::rebuild() {
  row_ticks_.clear();
  col_ticks_.clear();
  placements_.clear();
  variant_shape_.clear();
  not_applicable_.clear();
  unmeasured_.clear();
  baseline_ = nullptr;
  baseline_held_ = false;
  has_baseline_ = false;
  decimals_ = {};
  exact_ = false;
  if (data_) {
    const auto& pts = data_->points;
    decimals_ = metric_decimals(*data_);
    exact_ = exact_times(*data_);
    // The grid's points the store does not hold yet: shown (outlined and hatched) so that a
    // cancelled sweep does not look complete.
    std::vector<bool> held(data_->grid.size(), false);
    for (const auto& p : pts) {
      if (p.index >= 0 && static_cast<size_t>(p.index) < held.size()) {
        held[static_cast<size_t>(p.index)] = true;
      }
    }
    for (size_t i = 0; i < held.size(); ++i) {
      if (held[i]) continue;
      pf::PointRecord u;
      u.sweep = data_->sweep.id;
      u.index = static_cast<int64_t>(i);
      u.config = data_->grid[i];
      u.status = pf::PointStatus::Pending;
      unmeasured_.push_back(u);
    }
    if (const auto* base = baseline_point(*data_)) {
      baseline_ = base;
      baseline_held_ = true;
    } else {
      for (const auto& u : unmeasured_) {
        if (is_baseline(u.config)) baseline_ = &u;
      }
    }
    has_baseline_ = baseline_ != nullptr;
    const auto hidden = [&](const pf::PointRecord& p) {
      return p.config.offload && shown_ && !shown_->contains(p.index);
    };
    // A value's place on its axis: a threshold's number, or a variant value's first position in
    // the grid (the order the sweep was given its list in).
    std::map<std::pair<HeatmapAxis, std::string>, double> first_seen;
    const auto rank = [&](HeatmapAxis a, const pf::EngineConfig& c) {
      if (const int64_t n = axis_number(c, a); n >= 0) return static_cast<double>(n);
      const auto [it, inserted] =
          first_seen.try_emplace({a, axis_text(c, a)}, static_cast<double>(first_seen.size()));
      return it->second;
    };
    for (const auto& c : data_->grid) {
      (void)rank(row_axis_, c);
      (void)rank(col_axis_, c);
    }
    const auto tick = [&](HeatmapAxis a, const pf::EngineConfig& c) {
      return Tick{rank(a, c), axis_number(c, a), qs(axis_text(c, a))};
    };
    const auto add_axes = [&](const pf::PointRecord& p) {
      if (!p.config.offload || hidden(p)) return;
      row_ticks_.push_back(tick(row_axis_, p.config));
      col_ticks_.push_back(tick(col_axis_, p.config));
    };
    for (const auto& p : pts) add_axes(p);
    for (const auto& u : unmeasured_) add_axes(u);
    for (auto* v : {&row_ticks_, &col_ticks_}) {
      std::sort(v->begin(), v->end(), [](const Tick& a, const Tick& b) { return a.key < b.key; });
      v->erase(std::unique(v->begin(), v->end(),
                           [](const Tick& a, const Tick& b) { return a.key == b.key; }),
               v->end());
    }
    const auto position = [](const std::vector<Tick>& ticks, double key) {
      return static_cast<int>(std::lower_bound(ticks.begin(), ticks.end(), key,
                                               [](const Tick& t, double k) { return t.key < k; }) -
                              ticks.begin());
    };
    // Points sharing a config (a grid over other knobs too, or a repeated measurement) split
    // their cell side by side in index order, so that each stays visible and clickable.
    std::map<std::pair<int, int>, std::vector<Placement>> cells;
    const auto place = [&](const pf::PointRecord& p, size_t pos, bool is_held) {
      const auto& c = p.config;
      if (!c.offload || hidden(p)) return;
      Placement pl;
      pl.index = p.index;
      pl.pos = pos;
      pl.held = is_held;
      pl.col = position(col_ticks_, rank(col_axis_, c));
      pl.row = position(row_ticks_, rank(row_axis_, c));
      cells[{pl.row, pl.col}].push_back(pl);
    };
    for (size_t i = 0; i < pts.size(); ++i) place(pts[i], i, true);
    for (size_t i = 0; i < unmeasured_.size(); ++i) place(unmeasured_[i], i, false);
    // Checkpoint none x offload boundaries: nothing checkpointed, so no boundary to offload
    // (expand_grid skips the pair). Its empty cell is marked so, unlike a gap of a sparse grid.
    const HeatmapAxis checkpoint = heatmap_axis("checkpoint");
    const HeatmapAxis offload_set = heatmap_axis("offload_set");
    const bool ckpt_rows = row_axis_ == checkpoint;
    if ((ckpt_rows && col_axis_ == offload_set) ||
        (row_axis_ == offload_set && col_axis_ == checkpoint)) {
      for (int r = 0; r < static_cast<int>(row_ticks_.size()); ++r) {
        for (int c = 0; c < static_cast<int>(col_ticks_.size()); ++c) {
          const QString& ckpt = ckpt_rows ? row_ticks_[r].text : col_ticks_[c].text;
          const QString& set = ckpt_rows ? col_ticks_[c].text : row_ticks_[r].text;
          if (ckpt == QLatin1String("none") && set == QLatin1String("boundaries") &&
              !cells.contains({r, c})) {
            not_applicable_.emplace_back(r, c);
          }
        }
      }
    }
    for (auto& [rc, members] : cells) {
      std::sort(members.begin(), members.end(),
                [](const Placement& a, const Placement& b) { return a.index < b.index; });
      for (size_t k = 0; k < members.size(); ++k) {
        Placement pl = members[k];
        pl.slot = static_cast<int>(k);
        pl.slots = static_cast<int>(members.size());
        placements_.push_back(pl);
      }
    }
    // On the grid's pair (the Pareto chart's variants), each slice of a split cell carries its
    // variant's marker shape, the Pareto chart's for the same points: before, 3 to 9 slices of a
    // cell had no sign of which variant each was.
    const bool split = std::any_of(placements_.begin(), placements_.end(),
                                   [](const Placement& pl) { return pl.slots > 1; });
    if (split && row_axis_ == default_row_axis() && col_axis_ == default_column_axis()) {
      variant_shape_ = variant_shapes(*data_);
    }
  }
  updateRange();
}

void HeatmapWidget::updateRange() {
  has_range_ = false;
  if (!data_) return;
  if (shared_range_) {
    std::tie(range_min_, range_max_) = *shared_range_;
    has_range_ = std::isfinite(range_min_) && std::isfinite(range_max_);
    return;
  }
  for (const auto& pl : placements_) {
    if (!pl.held) continue;
    const auto v = metric_value(*data_, data_->points[pl.pos], metric_);
    if (!v || !std::isfinite(*v)) continue;
    range_min_ = has_range_ ? std::min(range_min_, *v) : *v;
    range_max_ = has_range_ ? std::max(range_max_, *v) : *v;
    has_range_ = true;
  }
}

QString HeatmapWidget::legendText(double value) const {
  return qs(format_metric(metric_, value, decimals_.of(metric_)));
}

// Slowdown is a ratio to the baseline: its scale diverges from 1.0x (as fast as the baseline,
// near-white) towards red (slower) and blue (faster), symmetric, so that the colour says which
// side of the baseline a point is on. The other metrics run from worse (dark) to better (light).
QColor HeatmapWidget::valueColor(double v) const {
  if (metric_ == SweepMetric::Slowdown) {
    // On a log scale, so that 2x slower and 2x faster are equally far from white, and no value
    // maps to a slowdown of zero or less.
    const auto [worst, best] = scaleEnds();
    const double half = std::max({std::log(worst), -std::log(best), 1e-9});
    return diverging_color(0.5 - std::log(std::max(v, 1e-9)) / (2.0 * half));
  }
  const double span = range_max_ - range_min_;
  double t = span > 0 ? (v - range_min_) / span : 0.5;
  if (lower_is_better(metric_) && span > 0) t = 1.0 - t;
  return sequential_color(t);
}

std::pair<double, double> HeatmapWidget::scaleEnds() const {
  const bool lower_better = lower_is_better(metric_);
  if (metric_ != SweepMetric::Slowdown) {
    return lower_better ? std::pair{range_max_, range_min_} : std::pair{range_min_, range_max_};
  }
  // The baseline's 1.00x is always on the scale: the points are read against it.
  return {std::max(range_max_, 1.0), std::max(std::min(range_min_, 1.0), 1e-9)};
}

std::pair<QString, QString> HeatmapWidget::scaleLabels() const {
  if (!has_range_) return {};
  const auto [worst, best] = scaleEnds();
  return {legendText(worst), legendText(best)};
}

QRect HeatmapWidget::gridCellRect(const Layout& l, int row, int col) const {
  Placement pl;
  pl.row = row;
  pl.col = col;
  return placementRect(l, pl);
}

std::vector<HeatmapWidget::NotApplicableCell> HeatmapWidget::notApplicableIn(
    const Layout& l) const {
  std::vector<NotApplicableCell> out;
  for (const auto& [r, c] : not_applicable_) {
    out.push_back(
        {r, c, gridCellRect(l, r, c),
         QStringLiteral("<b>not applicable</b>: checkpoint none x offload boundaries<br>"
                        "offload boundaries offloads only the inputs of checkpointed blocks; "
                        "checkpoint none checkpoints no block, so there is nothing to offload "
                        "and the sweep has no such point")});
  }
  return out;
}

std::vector<HeatmapWidget::NotApplicableCell> HeatmapWidget::notApplicableCells() const {
  if (!data_) return {};
  return notApplicableIn(layout());
}

QString HeatmapWidget::placeTooltip(QPoint pos, QRect* rect) const {
  if (!data_) return {};
  // A legend entry: its whole text (one may be drawn cut short to the widget's width).
  const Layout l = layout();
  if (QString text = legend_text_at(l.legend, l.legend_at, pos, rect); !text.isEmpty()) {
    return text;
  }
  for (const auto& cell : notApplicableIn(l)) {
    if (!cell.rect.contains(pos)) continue;
    if (rect != nullptr) *rect = cell.rect;
    return cell.reason;
  }
  return {};
}

QString HeatmapWidget::baselineText() const {
  if (!has_baseline_) return {};
  const auto& base = *baseline_;
  QString value;
  if (!baseline_held_) {
    value = QStringLiteral("not measured");
  } else if (const auto v = metric_value(*data_, base, metric_)) {
    value = legendText(*v);
  } else if (base.status == pf::PointStatus::Ok) {
    value = QStringLiteral("n/a");
  } else {
    value = status_label(base.status);
  }
  return QStringLiteral("baseline: %1").arg(value);
}

QFont HeatmapWidget::labelFont() const {
  QFont f = font();
  if (f.pointSizeF() > 0 && f.pointSizeF() < kMinLabelPointSize)
    f.setPointSizeF(kMinLabelPointSize);
  return f;
}

HeatmapWidget::Layout HeatmapWidget::layout() const {
  Layout l;
  const QFontMetrics fm(font());
  const int lh = fm.height();
  l.line_height = lh;
  const QRect r = rect().adjusted(6, 6, -6, -6);
  int x = r.left();
  if (has_baseline_) {
    l.baseline = QRect(r.left(), r.top(),
                       std::min(fm.horizontalAdvance(baselineText()) + 16, r.width()), lh + 8);
    x = l.baseline.right() + 12;
  }
  // What the marks mean: only those on show.
  if (highlighted_ >= 0 && point(highlighted_) != nullptr) {
    // A recommended point off the grid (checkpointing or layer offloading alone, a variant not on
    // show) has no cell: the legend says which it is and where (before: "recommended" with no
    // cell outlined).
    const bool on_grid =
        (has_baseline_ && baseline_->index == highlighted_) ||
        std::any_of(placements_.begin(), placements_.end(),
                    [this](const Placement& pl) { return pl.index == highlighted_; });
    l.legend.push_back(
        {Sample::Box, on_grid ? QStringLiteral("recommended") : offGridText(), kHighlightOutline});
  }
  bool any_tie = false;
  for (const auto& pl : placements_) any_tie = any_tie || isTie(pl.index);
  if (any_tie) {
    l.legend.push_back(
        {Sample::DashedBox,
         exact_ ? QStringLiteral("tied (exact)") : QStringLiteral("as good within noise"),
         kHighlightOutline});
  }
  if (!variant_shape_.empty()) {
    l.legend.push_back({Sample::Shape0,
                        QStringLiteral("split cell: a variant per slice, by its "
                                       "Pareto marker"),
                        kVariantKeyColor});
  }
  if (!not_applicable_.empty()) {
    l.legend.push_back({Sample::CrossedBox, QStringLiteral("not applicable"), QColor()});
  }
  if (!unmeasured_.empty()) {
    l.legend.push_back({Sample::HatchedBox,
                        QStringLiteral("not measured (%1)").arg(unmeasured_.size()), QColor()});
  }
  int header_bottom = r.top() + lh + 8;
  if (!l.legend.empty()) {
    l.legend_at = flow_legend(fm, QPoint(x, r.top() + 4), r.left(), r.right(), lh + 2, l.legend,
                              &header_bottom);
    header_bottom = std::max(header_bottom + 4, r.top() + lh + 8);
  }
  l.header = QRect(QPoint(r.left(), r.top()), QPoint(r.right(), header_bottom - 1));
  if (placements_.empty()) return l;

  int row_label_w = 0;
  for (const auto& t : row_ticks_)
    row_label_w = std::max(row_label_w, fm.horizontalAdvance(t.text));
  // Below the grid: column labels, the axis title, the caption of the colours and the bar (its
  // room is kept before any value is in, so that the grid does not jump while a sweep fills in).
  const int below = (lh + 3) + (lh + 2) + 6 + lh + 14 + 2;
  const int top = l.header.bottom() + 1 + 6;
  const int left = r.left() + lh + 6 + row_label_w + 6;
  const int right = r.right() - 4;
  const int bottom = r.bottom() - below;
  QRect grid(QPoint(left, top), QPoint(right, bottom));
  if (grid.width() < 8 || grid.height() < 8) return l;

  // A few cells should not each fill a quarter of the screen: cap their size and centre the grid.
  const int ncols = static_cast<int>(col_ticks_.size());
  const int nrows = static_cast<int>(row_ticks_.size());
  const int max_w = 240 * ncols;
  const int max_h = 140 * nrows;
  if (grid.width() > max_w) {
    grid.moveLeft(grid.left() + (grid.width() - max_w) / 2);
    grid.setWidth(max_w);
  }
  if (grid.height() > max_h) {
    grid.moveTop(grid.top() + (grid.height() - max_h) / 2);
    grid.setHeight(max_h);
  }
  l.grid = grid;
  l.row_labels_right = grid.left() - 6;
  const int scale_top = grid.bottom() + 1 + (lh + 3) + (lh + 2) + 6;
  l.caption = QRect(r.left(), scale_top, r.width(), lh);
  if (has_range_) {
    const auto [worst, best] = scaleLabels();
    const int lw = std::max(fm.horizontalAdvance(worst), fm.horizontalAdvance(best)) + 8;
    const int bar_w = std::min(grid.width(), std::max(60, r.width() - 2 * lw));
    const int bar_left = std::max(r.left() + lw, grid.center().x() - bar_w / 2);
    l.bar = QRect(bar_left, scale_top + lh + 2, std::min(bar_w, r.right() - lw - bar_left), 12);
  }
  return l;
}

QRect HeatmapWidget::placementRect(const Layout& l, const Placement& p) const {
  const int ncols = static_cast<int>(col_ticks_.size());
  const int nrows = static_cast<int>(row_ticks_.size());
  if (l.grid.isEmpty() || ncols == 0 || nrows == 0) return {};
  const QRect& g = l.grid;
  const int x0 = g.left() + p.col * g.width() / ncols;
  const int x1 = g.left() + (p.col + 1) * g.width() / ncols;
  // Rows ascend upwards, as on a plot's y axis.
  const int from_top = nrows - 1 - p.row;
  const int y0 = g.top() + from_top * g.height() / nrows;
  const int y1 = g.top() + (from_top + 1) * g.height() / nrows;
  const int sx0 = x0 + p.slot * (x1 - x0) / p.slots;
  const int sx1 = x0 + (p.slot + 1) * (x1 - x0) / p.slots;
  return QRect(QPoint(sx0, y0), QPoint(sx1 - 1, y1 - 1));
}

QStringList HeatmapWidget::legendLabels() const {
  QStringList out;
  for (const auto& item : layout().legend) out << item.text;
  return out;
}

QString HeatmapWidget::offGridText() const {
  const pf::PointRecord* p = point(highlighted_);
  if (p == nullptr) return {};
  const std::string variant = pf::describe_variant(p->config);
  QString what = QString::fromStdString(variant.empty() ? "a variant not on show" : variant);
  if (!p->config.offload) what += QStringLiteral(", no offload");
  return QStringLiteral("recommended #%1, off the grid: %2").arg(p->index).arg(what);
}

QRectF HeatmapWidget::sliceMarkRect(const Placement& pl, const CellLabel& label) const {
  const auto it = variant_shape_.find(pl.index);
  if (it == variant_shape_.end() || pl.slots < 2) return {};
  const QRect& cell = label.cell;
  // A marker of radius 2.5 to 3.5 as the slice allows (its star's points reach 1.35 of it),
  // inside the slice, at its top, clear of the cell's text.
  const QRectF inner = QRectF(cell).adjusted(1.5, 2, -1.5, -2);
  const double side = std::min(2 * 3.5 * 1.35, inner.width());
  if (side < 2 * 2.5 * 1.35) return {};
  const QRectF mark(QRectF(cell).center().x() - side / 2, cell.top() + 4, side, side);
  if (!inner.contains(mark)) return {};
  if (!label.text.isEmpty() && mark.intersects(QRectF(label.rect))) return {};
  return mark;
}

int HeatmapWidget::sliceShape(int64_t point_index) const {
  if (!data_) return -1;
  const Layout l = layout();
  const int form = uniformForm(l);
  for (const auto& pl : placements_) {
    if (pl.index != point_index) continue;
    if (sliceMarkRect(pl, labelFor(l, pl, form)).isEmpty()) return -1;
    return variant_shape_.at(pl.index) % kMarkerShapes;
  }
  return -1;
}

QRect HeatmapWidget::cellRect(int64_t point_index) const {
  if (!data_ || point_index < 0) return {};
  const Layout l = layout();
  if (has_baseline_ && baseline_->index == point_index) return l.baseline;
  for (const auto& pl : placements_) {
    if (pl.index == point_index) return placementRect(l, pl);
  }
  return {};
}

int64_t HeatmapWidget::pointAt(QPoint pos) const {
  if (!data_) return -1;
  const Layout l = layout();
  if (has_baseline_ && l.baseline.contains(pos)) return baseline_->index;
  if (!l.grid.contains(pos)) return -1;
  for (const auto& pl : placements_) {
    if (placementRect(l, pl).contains(pos)) return pl.index;
  }
  return -1;
}

// The text of a cell: the first form that fits inside the cell (less kLabelInset each side) in
// the label font: the value with its unit, the number alone, the number with the metric's usual
// digits; a second line with the step time's spread where there is room for it. Values start at
// form `min_form`, so that all cells can show the same form (uniformForm).
HeatmapWidget::CellLabel HeatmapWidget::labelFor(const Layout& l, const Placement& pl, int min_form,
                                                 int* form_used) const {
  CellLabel out;
  out.cell = placementRect(l, pl).adjusted(1, 1, -1, -1);
  out.font = labelFont();
  if (out.cell.isEmpty()) return out;
  const auto& pt = record(pl);
  QStringList forms;
  QString second;
  int first = 0;
  switch (pt.status) {
    case pf::PointStatus::Ok:
      if (const auto v = metric_value(*data_, pt, metric_); v && has_range_ && std::isfinite(*v)) {
        const int d = decimals_.of(metric_);
        forms << legendText(*v) << qs(format_metric_number(metric_, *v, d))
              << qs(format_metric_number(metric_, *v, 0));
        first = std::clamp(min_form, 0, static_cast<int>(forms.size()) - 1);
        if (metric_ == SweepMetric::StepTime || metric_ == SweepMetric::Slowdown) {
          second = qs(short_spread(pt.summary));
        }
      } else {
        forms << QStringLiteral("n/a");
      }
      break;
    case pf::PointStatus::Failed:
      forms << QStringLiteral("failed") << QStringLiteral("fail");
      break;
    case pf::PointStatus::OutOfMemory:
      forms << QStringLiteral("OOM");
      break;
    case pf::PointStatus::Pending:
      if (pl.held) forms << QStringLiteral("pending") << QStringLiteral("\u2026");
      break;
  }
  const QRect inner = out.cell.adjusted(kLabelInset, kLabelInset, -kLabelInset, -kLabelInset);
  if (inner.width() <= 0 || inner.height() <= 0) return out;
  const QFontMetrics fm(out.font);
  for (int i = first; i < static_cast<int>(forms.size()); ++i) {
    const QString& f = forms[i];
    if (fm.horizontalAdvance(f) > inner.width() || fm.height() > inner.height()) continue;
    if (form_used != nullptr) *form_used = i;
    out.text = f;
    if (!second.isEmpty() && fm.horizontalAdvance(second) <= inner.width() &&
        2 * fm.height() <= inner.height()) {
      out.text += QLatin1Char('\n') + second;
    }
    out.rect = fm.boundingRect(inner, Qt::AlignCenter, out.text);
    break;
  }
  return out;
}

// The form every value cell can use: cells differ by a pixel or two, and "1.87" beside
// "1.87 ms" reads as two kinds of figure. Cells too small for any form do not count.
int HeatmapWidget::uniformForm(const Layout& l) const {
  int form = 0;
  for (const auto& pl : placements_) {
    if (!pl.held || data_->points[pl.pos].status != pf::PointStatus::Ok) continue;
    int used = -1;
    labelFor(l, pl, 0, &used);
    form = std::max(form, used);
  }
  return form;
}

HeatmapWidget::CellLabel HeatmapWidget::cellLabel(int64_t point_index) const {
  if (!data_) return {};
  const Layout l = layout();
  for (const auto& pl : placements_) {
    if (pl.index == point_index) return labelFor(l, pl, uniformForm(l));
  }
  return {};
}

void HeatmapWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (!paintBackground(p)) return;
  const QPalette& pal = palette();
  const Layout l = layout();
  paintHeader(p, l);
  if (placements_.empty() || l.grid.isEmpty()) {
    p.setPen(pal.color(QPalette::Text));
    p.drawText(rect().adjusted(0, l.header.bottom() + 1, 0, 0), Qt::AlignCenter,
               placements_.empty() ? QStringLiteral("No offload points in this sweep")
                                   : QStringLiteral("Too small to draw the grid"));
    return;
  }
  paintAxes(p, l);
  paintCells(p, l);
  paintLegend(p, l);
}

// The baseline entry and what the marks mean.
void HeatmapWidget::paintHeader(QPainter& p, const Layout& l) const {
  const QPalette& pal = palette();
  const QFontMetrics fm(font());
  if (has_baseline_) {
    const auto& base = *baseline_;
    if (baseline_held_) {
      p.fillRect(l.baseline, pal.color(QPalette::AlternateBase));
    } else {
      fill_hatched(p, l.baseline, kUnmeasuredFill, kUnmeasuredHatch, Qt::FDiagPattern);
    }
    draw_outline(p, l.baseline, pal.color(QPalette::Mid), 1);
    if (base.index == highlighted_) draw_outline(p, l.baseline, kHighlightOutline, 3);
    if (isTie(base.index)) draw_outline(p, l.baseline, kHighlightOutline, 2, Qt::DashLine);
    if (base.index == selected_) draw_outline(p, l.baseline, pal.color(QPalette::Highlight), 3);
    if (base.index == hovered_) draw_outline(p, l.baseline, pal.color(QPalette::Text), 1);
    p.setPen(pal.color(QPalette::Text));
    p.drawText(l.baseline, Qt::AlignCenter,
               fm.elidedText(baselineText(), Qt::ElideRight, l.baseline.width() - 8));
  }
  paint_legend(p, fm, l.legend, l.legend_at, pal.color(QPalette::Text));
}

// Axis titles and value labels; on a dense grid only every k-th label, so that none overlap.
void HeatmapWidget::paintAxes(QPainter& p, const Layout& l) const {
  const QFontMetrics fm(font());
  const int lh = l.line_height;
  const int ncols = static_cast<int>(col_ticks_.size());
  const int nrows = static_cast<int>(row_ticks_.size());
  const QRect& g = l.grid;
  p.setPen(palette().color(QPalette::Text));
  int col_label_w = 0;
  for (const auto& t : col_ticks_)
    col_label_w = std::max(col_label_w, fm.horizontalAdvance(t.text));
  const int col_w = std::max(1, g.width() / ncols);
  const int col_every = std::max(1, (col_label_w + 8 + col_w - 1) / col_w);
  for (int c = 0; c < ncols; c += col_every) {
    const int x0 = g.left() + c * g.width() / ncols;
    const int x1 = g.left() + (c + 1) * g.width() / ncols;
    p.drawText(QRect(x0 - col_w, g.bottom() + 3, (x1 - x0) + 2 * col_w, lh),
               Qt::AlignHCenter | Qt::AlignTop, col_ticks_[static_cast<size_t>(c)].text);
  }
  const int row_h = std::max(1, g.height() / nrows);
  const int row_every = std::max(1, (lh + row_h - 1) / row_h);
  for (int r = 0; r < nrows; r += row_every) {
    const int from_top = nrows - 1 - r;
    const int y0 = g.top() + from_top * g.height() / nrows;
    const int y1 = g.top() + (from_top + 1) * g.height() / nrows;
    p.drawText(QRect(0, y0, l.row_labels_right, y1 - y0), Qt::AlignRight | Qt::AlignVCenter,
               row_ticks_[static_cast<size_t>(r)].text);
  }
  p.drawText(QRect(g.left(), g.bottom() + 3 + lh + 2, g.width(), lh),
             Qt::AlignHCenter | Qt::AlignTop, QString::fromStdString(axis_name(col_axis_)));
  p.save();
  p.translate(6 + lh / 2.0, g.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-g.height() / 2.0 - 100, -lh / 2.0, g.height() + 200.0, lh), Qt::AlignCenter,
             QString::fromStdString(axis_name(row_axis_)));
  p.restore();
}

void HeatmapWidget::paintCells(QPainter& p, const Layout& l) const {
  const QPalette& pal = palette();
  // Empty grid positions (a sparse grid) keep the background inside a faint frame.
  p.setPen(QPen(pal.color(QPalette::Midlight), 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(l.grid.adjusted(0, 0, -1, -1));
  p.save();
  p.setFont(labelFont());
  for (const auto& na : notApplicableIn(l)) {
    const QRect cell = na.rect.adjusted(1, 1, -1, -1);
    if (cell.isEmpty()) continue;
    fill_hatched(p, cell, kNotApplicableFill, kNotApplicableHatch, Qt::CrossPattern);
    draw_outline(p, cell, kNotApplicableHatch, 1);
    const QString text = QStringLiteral("n/a");
    const QFontMetrics fm(p.font());
    if (fm.horizontalAdvance(text) + 2 * kLabelInset > cell.width()) continue;
    QRect plate = fm.boundingRect(cell, Qt::AlignCenter, text).adjusted(-3, 0, 3, 0);
    p.fillRect(plate.intersected(cell), kNotApplicableFill);
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(cell, Qt::AlignCenter, text);
  }
  const int form = uniformForm(l);
  for (const auto& pl : placements_) {
    const auto& pt = record(pl);
    const CellLabel label = labelFor(l, pl, form);
    const QRect& cell = label.cell;
    if (cell.isEmpty()) continue;
    QColor text_color = pal.color(QPalette::Text);
    std::optional<QColor> plate;  // behind the text, so that a hatch does not cross it
    switch (pt.status) {
      case pf::PointStatus::Ok: {
        const auto v = metric_value(*data_, pt, metric_);
        if (v && has_range_ && std::isfinite(*v)) {
          const QColor fill = valueColor(*v);
          p.fillRect(cell, fill);
          text_color = text_color_on(fill);
        } else {
          p.fillRect(cell, pal.color(QPalette::AlternateBase));
        }
        break;
      }
      case pf::PointStatus::Failed:
        fill_hatched(p, cell, kFailedFill, kFailedHatch, Qt::BDiagPattern);
        text_color = QColor(40, 40, 40);
        plate = kFailedFill;
        break;
      case pf::PointStatus::OutOfMemory:
        fill_hatched(p, cell, kOomFill, kOomHatch, Qt::DiagCrossPattern);
        text_color = QColor(150, 0, 0);
        plate = kOomFill;
        break;
      case pf::PointStatus::Pending:
        if (pl.held) {
          // In the store, not finished: being measured now (or left by a crash).
          draw_outline(p, cell, pal.color(QPalette::Mid), 1, Qt::DashLine);
          text_color = pal.color(QPalette::PlaceholderText);
        } else {
          // Not reached: a light hatch under a dashed outline, no text.
          fill_hatched(p, cell, kUnmeasuredFill, kUnmeasuredHatch, Qt::FDiagPattern);
          draw_outline(p, cell, QColor(150, 150, 150), 1, Qt::DashLine);
        }
        break;
    }
    if (const QRectF mark = sliceMarkRect(pl, label); !mark.isEmpty()) {
      p.save();
      p.setRenderHint(QPainter::Antialiasing, true);
      p.setPen(QPen(text_color, 1.3));
      p.setBrush(Qt::NoBrush);
      draw_marker(p, mark.center(), mark.width() / 2 / 1.35, variant_shape_.at(pl.index));
      p.restore();
    }
    if (label.text.isEmpty()) continue;
    if (plate) p.fillRect(label.rect.adjusted(-3, 0, 3, 0).intersected(cell), *plate);
    p.setPen(text_color);
    p.drawText(label.rect, Qt::AlignCenter, label.text);
  }
  p.restore();
  // Marks last, above every cell, each inside the cell's kLabelInset margin.
  for (const auto& pl : placements_) {
    const QRect cell = placementRect(l, pl).adjusted(1, 1, -1, -1);
    if (pl.index == highlighted_) {
      draw_outline(p, cell, kHighlightOutline, 3);
      draw_outline(p, cell.adjusted(3, 3, -3, -3), QColor(255, 255, 255), 1);
    } else if (isTie(pl.index)) {
      draw_outline(p, cell, kHighlightOutline, 2, Qt::DashLine);
      draw_outline(p, cell.adjusted(2, 2, -2, -2), QColor(255, 255, 255), 1, Qt::DashLine);
    }
    if (pl.index == selected_) draw_outline(p, cell, pal.color(QPalette::Highlight), 3);
    if (pl.index == hovered_ && hovered_ != selected_) {
      draw_outline(p, cell, pal.color(QPalette::Text), 1);
    }
  }
}

// The colour scale under the grid: what it stands for, then worst on the left and best on the
// right (for slowdown, the baseline's 1.00x marked where it falls).
void HeatmapWidget::paintLegend(QPainter& p, const Layout& l) const {
  const QPalette& pal = palette();
  const QFontMetrics fm(font());
  QString what =
      QStringLiteral("colour: %1, %2 is better")
          .arg(QString::fromLatin1(metric_label(metric_)),
               lower_is_better(metric_) ? QStringLiteral("lower") : QStringLiteral("higher"));
  if (metric_ == SweepMetric::Slowdown) what += QStringLiteral("; white: 1.00x (the baseline)");
  p.setPen(pal.color(QPalette::PlaceholderText));
  p.drawText(l.caption, Qt::AlignHCenter | Qt::AlignVCenter,
             fm.elidedText(what, Qt::ElideRight, l.caption.width()));
  if (l.bar.isEmpty() || !has_range_) return;
  const auto [worst, best] = scaleEnds();
  const auto [worst_text, best_text] = scaleLabels();
  QLinearGradient grad(l.bar.topLeft(), l.bar.topRight());
  constexpr int kSteps = 16;
  // Slowdown: the bar runs from the worst to the best value on the cells' log scale, each stop
  // the colour of that value; 1.00x marked where it falls.
  const double log_span = std::log(worst) - std::log(best);
  const double neutral_at = log_span > 0 ? std::log(worst) / log_span : 0.5;
  if (metric_ == SweepMetric::Slowdown) {
    for (int i = 0; i <= kSteps; ++i) {
      const double s = i / double(kSteps);
      grad.setColorAt(s, valueColor(std::exp(std::log(worst) - s * log_span)));
    }
  } else {
    for (int i = 0; i <= kSteps; ++i)
      grad.setColorAt(i / double(kSteps), sequential_color(i / double(kSteps)));
  }
  p.fillRect(l.bar, grad);
  draw_outline(p, l.bar, pal.color(QPalette::Mid), 1);
  p.setPen(pal.color(QPalette::Text));
  const int lh = l.line_height;
  p.drawText(QRect(0, l.bar.center().y() - lh / 2, l.bar.left() - 6, lh),
             Qt::AlignRight | Qt::AlignVCenter, worst_text);
  p.drawText(QRect(l.bar.right() + 6, l.bar.center().y() - lh / 2, width() - l.bar.right() - 6, lh),
             Qt::AlignLeft | Qt::AlignVCenter, best_text);
  if (metric_ == SweepMetric::Slowdown) {
    const int x = l.bar.left() + static_cast<int>(std::lround(neutral_at * l.bar.width()));
    p.setPen(QPen(pal.color(QPalette::Text), 1));
    p.drawLine(x, l.bar.top() - 2, x, l.bar.bottom() + 2);
  }
}

}  // namespace offtune::gui
