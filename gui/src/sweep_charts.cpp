#include "offtune/gui/sweep_charts.hpp"

#include <QEvent>
#include <QFontMetrics>
#include <QHelpEvent>
#include <QLinearGradient>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QStringList>
#include <QToolTip>
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString status_label(pf::PointStatus s) {
  switch (s) {
    case pf::PointStatus::Pending:
      return QStringLiteral("pending");
    case pf::PointStatus::Ok:
      return QStringLiteral("ok");
    case pf::PointStatus::Failed:
      return QStringLiteral("failed");
    case pf::PointStatus::OutOfMemory:
      return QStringLiteral("out of memory");
  }
  return QStringLiteral("?");
}

const pf::PointRecord* find_point(const SweepData* data, int64_t index) {
  if (data == nullptr || index < 0) return nullptr;
  // Points are stored by index and usually dense from 0, so try the direct slot first.
  const auto& pts = data->points;
  if (static_cast<uint64_t>(index) < pts.size() && pts[static_cast<size_t>(index)].index == index) {
    return &pts[static_cast<size_t>(index)];
  }
  for (const auto& p : pts) {
    if (p.index == index) return &p;
  }
  return nullptr;
}

// Samples of a viridis-like map (dark purple, blue, teal, green, yellow): lightness rises
// monotonically and evenly, so equal steps in value read as equal steps in colour, also in grey
// and for the common colour-vision deficiencies.
constexpr std::array<std::array<int, 3>, 9> kColorStops = {{
    {68, 1, 84},
    {72, 40, 120},
    {62, 73, 137},
    {49, 104, 142},
    {38, 130, 142},
    {31, 158, 137},
    {53, 183, 121},
    {110, 206, 88},
    {253, 231, 37},
}};

// Text on a cell: dark on the light end of the map, light on the dark end.
QColor text_color_on(const QColor& background) {
  const double luma =
      0.299 * background.red() + 0.587 * background.green() + 0.114 * background.blue();
  return luma > 140 ? QColor(20, 20, 20) : QColor(250, 250, 250);
}

// Marks distinct from every colour of the map.
const QColor kFailedFill(205, 205, 205);
const QColor kFailedHatch(125, 125, 125);
const QColor kOomFill(255, 226, 226);
const QColor kOomHatch(200, 30, 30);
const QColor kFrontColor(230, 120, 20);
const QColor kPointColor(70, 110, 170);
const QColor kBaselineColor(45, 45, 45);
const QColor kChosenColor(20, 150, 60);
const QColor kOverLimitShade(220, 40, 40, 40);
const QColor kLimitLine(190, 30, 30);
const QColor kHighlightOutline(0, 0, 0);

// A step of 1, 2 or 5 times a power of ten near `raw`: tick labels stay short and round.
double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0;
  return nice * mag;
}

struct Axis {
  double lo = 0.0;
  double hi = 1.0;
  std::vector<double> ticks;
};

// Pads the data range (a degenerate one around its value), then widens it to whole ticks, so that
// no point sits on the frame and the ends carry labels.
Axis nice_axis(double lo, double hi, bool non_negative) {
  const double span = hi - lo;
  const double pad = span > 0 ? span * 0.06 : (lo != 0.0 ? std::abs(lo) * 0.1 : 1.0);
  Axis a;
  a.lo = lo - pad;
  a.hi = hi + pad;
  if (non_negative && lo >= 0 && a.lo < 0) a.lo = 0;
  const double step = nice_step((a.hi - a.lo) / 5.0);
  a.lo = std::floor(a.lo / step) * step;
  a.hi = std::ceil(a.hi / step) * step;
  // Counted from an integer so that rounding does not accumulate or drop the last tick.
  const auto first = static_cast<int64_t>(std::llround(a.lo / step));
  const auto last = static_cast<int64_t>(std::llround(a.hi / step));
  for (int64_t k = first; k <= last && a.ticks.size() < 50; ++k) {
    a.ticks.push_back(static_cast<double>(k) * step);
  }
  return a;
}

QString tick_label(double v) {
  if (std::abs(v) < 1e-12) v = 0.0;  // no "-0" or "1e-17" from rounding
  return QString::number(v, 'g', 6);
}

// Fills `r` with a colour under a hatch, the mark of a point that has no value to colour by.
void fill_hatched(QPainter& p, const QRect& r, const QColor& fill, const QColor& hatch,
                  Qt::BrushStyle style) {
  p.fillRect(r, fill);
  p.fillRect(r, QBrush(hatch, style));
}

void draw_outline(QPainter& p, const QRect& r, const QColor& color, int width,
                  Qt::PenStyle style = Qt::SolidLine) {
  QPen pen(color, width, style);
  pen.setJoinStyle(Qt::MiterJoin);
  p.setPen(pen);
  p.setBrush(Qt::NoBrush);
  // A stroke is centred on the path: inset by half its width so that all of it lies inside the
  // cell and none over the neighbour.
  const double half = width / 2.0;
  p.drawRect(QRectF(r).adjusted(half, half, -half, -half));
}

}  // namespace

QColor sequential_color(double t) {
  if (!(t >= 0.0)) t = 0.0;  // NaN too
  t = std::min(t, 1.0);
  const double x = t * static_cast<double>(kColorStops.size() - 1);
  const auto i = std::min(static_cast<size_t>(x), kColorStops.size() - 2);
  const double f = x - static_cast<double>(i);
  const auto mix = [&](int c) {
    return static_cast<int>(std::lround(kColorStops[i][static_cast<size_t>(c)] * (1.0 - f) +
                                        kColorStops[i + 1][static_cast<size_t>(c)] * f));
  };
  return QColor(mix(0), mix(1), mix(2));
}

QString point_tooltip(const SweepData& sweep, const pf::PointRecord& point) {
  QStringList lines;
  QString head =
      QStringLiteral("<b>Point %1</b> \u2014 %2").arg(point.index).arg(status_label(point.status));
  if (!point.config.offload) head += QStringLiteral(" (baseline, no offload)");
  lines << head;
  const auto& c = point.config;
  if (c.offload) {
    lines << QStringLiteral("min_offload_size %1 \u00b7 max_fwd_stash_size %2")
                 .arg(qs(pf::format_size(c.min_offload_size)))
                 .arg(c.max_fwd_stash_size);
    QStringList knobs;
    if (c.semantics != "offtune") knobs << QStringLiteral("%1 semantics").arg(qs(c.semantics));
    knobs << QStringLiteral("prefetch %1").arg(c.prefetch);
    if (c.max_fwd_stash_bytes > 0) {
      knobs << QStringLiteral("max_fwd_stash_bytes %1")
                   .arg(qs(pf::format_size(c.max_fwd_stash_bytes)));
    }
    if (!c.use_streams) knobs << QStringLiteral("no copy streams");
    if (!c.use_pin_memory) knobs << QStringLiteral("pageable host memory");
    lines << knobs.join(QStringLiteral(" \u00b7 ")).toHtmlEscaped();
  }
  if (point.run.valid()) lines << QStringLiteral("run %1").arg(point.run.value);
  if (point.status == pf::PointStatus::Ok) {
    const auto figure = [&](SweepMetric m, const QString& label, const QString& missing) {
      const auto v = metric_value(sweep, point, m);
      return v ? QStringLiteral("%1 %2").arg(label, qs(format_metric(m, *v)))
               : QStringLiteral("%1 n/a (%2)").arg(label, missing);
    };
    lines << QStringLiteral("step time %1 (median)")
                 .arg(qs(format_metric(SweepMetric::StepTime, point.summary.step_ms_median)));
    lines << figure(SweepMetric::Slowdown, QStringLiteral("slowdown"),
                    QStringLiteral("no measured baseline"));
    lines << QStringLiteral("peak device memory %1")
                 .arg(qs(format_metric(SweepMetric::PeakMemory,
                                       static_cast<double>(point.summary.peak_allocated))));
    lines << figure(SweepMetric::HiddenCopy, QStringLiteral("hidden copy"),
                    QStringLiteral("no copies"));
  } else if (point.status == pf::PointStatus::Pending) {
    lines << QStringLiteral("not measured yet");
  }
  if (!point.error.empty()) {
    lines << QStringLiteral("error: %1").arg(qs(point.error).toHtmlEscaped());
  }
  // <qt> forces rich text: an error quoting "<...>" must not switch the tooltip's format.
  return QStringLiteral("<qt>") + lines.join(QStringLiteral("<br/>")) + QStringLiteral("</qt>");
}

struct HeatmapWidget::Layout {
  QRect header;    // the line above the grid
  QRect baseline;  // the baseline entry in it; empty without a baseline
  QRect grid;      // the cells; empty when nothing fits
  QRect bar;       // the colour legend; empty without values
  int row_labels_right = 0;
  int line_height = 0;
};

// ---------------------------------------------------------------------------------------------
// SweepChart

SweepChart::SweepChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
}

void SweepChart::setSelected(int64_t point_index) {
  if (point_index == selected_) return;
  selected_ = point_index;
  update();
}

const pf::PointRecord* SweepChart::point(int64_t point_index) const {
  return find_point(data_.get(), point_index);
}

void SweepChart::setHovered(int64_t point_index) {
  if (point_index == hovered_) return;
  hovered_ = point_index;
  const auto* pt = point(point_index);
  if (pt != nullptr && pt->run.valid()) {
    setCursor(Qt::PointingHandCursor);
  } else {
    unsetCursor();
  }
  update();
  Q_EMIT pointHovered(point_index);
}

bool SweepChart::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    const auto* he = static_cast<QHelpEvent*>(e);
    const int64_t index = pointAt(he->pos());
    if (const auto* pt = point(index)) {
      QToolTip::showText(he->globalPos(), point_tooltip(*data_, *pt), this, tooltipRect(index));
    } else {
      QToolTip::hideText();
      e->ignore();
    }
    return true;
  }
  return QWidget::event(e);
}

void SweepChart::mouseMoveEvent(QMouseEvent* e) {
  setHovered(pointAt(e->position().toPoint()));
  QWidget::mouseMoveEvent(e);
}

void SweepChart::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) pressed_ = pointAt(e->position().toPoint());
  QWidget::mousePressEvent(e);
}

void SweepChart::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) {
    // A click is a press and a release on the same point: dragging off a point cancels it.
    const int64_t index = pointAt(e->position().toPoint());
    const auto* pt = point(index);
    if (index == pressed_ && pt != nullptr && pt->run.valid()) Q_EMIT pointActivated(index);
    pressed_ = -1;
  }
  QWidget::mouseReleaseEvent(e);
}

bool SweepChart::paintBackground(QPainter& p) const {
  const QPalette& pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  p.setPen(pal.color(QPalette::Text));
  if (data_) return true;
  p.drawText(rect(), Qt::AlignCenter, QStringLiteral("No sweep"));
  return false;
}

void SweepChart::leaveEvent(QEvent* e) {
  setHovered(-1);
  QWidget::leaveEvent(e);
}

QRect HeatmapWidget::tooltipRect(int64_t point_index) const { return cellRect(point_index); }

QRect ParetoWidget::tooltipRect(int64_t point_index) const {
  const QPoint at = positionOf(point_index).toPoint();
  return {at - QPoint(8, 8), QSize(17, 17)};
}

// ---------------------------------------------------------------------------------------------
// HeatmapWidget

HeatmapWidget::HeatmapWidget(QWidget* parent) : SweepChart(parent) {}

QSize HeatmapWidget::sizeHint() const { return {520, 340}; }
QSize HeatmapWidget::minimumSizeHint() const { return {240, 180}; }

void HeatmapWidget::setData(SweepDataPtr data) {
  data_ = std::move(data);
  rebuild();
  update();
}

void HeatmapWidget::setMetric(SweepMetric metric) {
  if (metric == metric_) return;
  metric_ = metric;
  updateRange();
  update();
}

void HeatmapWidget::setHighlighted(int64_t point_index) {
  if (point_index == highlighted_) return;
  highlighted_ = point_index;
  update();
}

void HeatmapWidget::rebuild() {
  stash_sizes_.clear();
  min_sizes_.clear();
  placements_.clear();
  has_baseline_ = false;
  if (data_) {
    const auto& pts = data_->points;
    if (const auto* base = baseline_point(*data_)) {
      has_baseline_ = true;
      baseline_pos_ = static_cast<size_t>(base - pts.data());
    }
    for (const auto& p : pts) {
      if (!p.config.offload) continue;
      stash_sizes_.push_back(p.config.max_fwd_stash_size);
      min_sizes_.push_back(p.config.min_offload_size);
    }
    for (auto* v : {&stash_sizes_, &min_sizes_}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    // Points sharing a config (a grid over other knobs too, or a repeated measurement) split
    // their cell side by side in index order, so that each stays visible and clickable.
    std::map<std::pair<int, int>, std::vector<size_t>> cells;
    for (size_t i = 0; i < pts.size(); ++i) {
      const auto& c = pts[i].config;
      if (!c.offload) continue;
      const auto col =
          std::lower_bound(stash_sizes_.begin(), stash_sizes_.end(), c.max_fwd_stash_size) -
          stash_sizes_.begin();
      const auto row = std::lower_bound(min_sizes_.begin(), min_sizes_.end(), c.min_offload_size) -
                       min_sizes_.begin();
      cells[{static_cast<int>(row), static_cast<int>(col)}].push_back(i);
    }
    for (auto& [rc, members] : cells) {
      std::sort(members.begin(), members.end(),
                [&](size_t a, size_t b) { return pts[a].index < pts[b].index; });
      for (size_t k = 0; k < members.size(); ++k) {
        Placement pl;
        pl.index = pts[members[k]].index;
        pl.pos = members[k];
        pl.row = rc.first;
        pl.col = rc.second;
        pl.slot = static_cast<int>(k);
        pl.slots = static_cast<int>(members.size());
        placements_.push_back(pl);
      }
    }
  }
  updateRange();
}

void HeatmapWidget::updateRange() {
  has_range_ = false;
  if (!data_) return;
  for (const auto& pl : placements_) {
    const auto v = metric_value(*data_, data_->points[pl.pos], metric_);
    if (!v || !std::isfinite(*v)) continue;
    range_min_ = has_range_ ? std::min(range_min_, *v) : *v;
    range_max_ = has_range_ ? std::max(range_max_, *v) : *v;
    has_range_ = true;
  }
}

QString HeatmapWidget::legendText(double value) const { return qs(format_metric(metric_, value)); }

QString HeatmapWidget::baselineText() const {
  if (!has_baseline_) return {};
  const auto& base = data_->points[baseline_pos_];
  QString value;
  if (const auto v = metric_value(*data_, base, metric_)) {
    value = qs(format_metric(metric_, *v));
  } else if (base.status == pf::PointStatus::Ok) {
    value = QStringLiteral("n/a");
  } else {
    value = status_label(base.status);
  }
  return QStringLiteral("baseline: %1").arg(value);
}

HeatmapWidget::Layout HeatmapWidget::layout() const {
  Layout l;
  const QFontMetrics fm(font());
  const int lh = fm.height();
  l.line_height = lh;
  const QRect r = rect().adjusted(6, 6, -6, -6);
  l.header = QRect(r.left(), r.top(), r.width(), lh + 8);
  if (has_baseline_) {
    l.baseline = QRect(r.left(), r.top(),
                       std::min(fm.horizontalAdvance(baselineText()) + 16, r.width()), lh + 8);
  }
  if (placements_.empty()) return l;

  int row_label_w = 0;
  for (int64_t v : min_sizes_) {
    row_label_w = std::max(row_label_w, fm.horizontalAdvance(qs(pf::format_size(v))));
  }
  // Room for the legend is kept even before any value is in, and for labels wider than most, so
  // that the grid does not jump while a sweep fills in.
  int legend_label_w = fm.horizontalAdvance(QStringLiteral("000.00 MiB"));
  if (has_range_) {
    legend_label_w = std::max({legend_label_w, fm.horizontalAdvance(legendText(range_min_)),
                               fm.horizontalAdvance(legendText(range_max_))});
  }
  const int legend_w = 14 + 6 + legend_label_w;
  const int top = l.header.bottom() + 1 + lh / 2 + 4;  // room for the legend's top label
  const int left = r.left() + lh + 6 + row_label_w + 6;
  const int right = r.right() - legend_w - 12;
  const int bottom = r.bottom() - 2 * (lh + 4);
  QRect grid(QPoint(left, top), QPoint(right, bottom));
  if (grid.width() < 8 || grid.height() < 8) return l;

  // A few cells should not each fill a quarter of the screen: cap their size and centre the grid.
  const int ncols = static_cast<int>(stash_sizes_.size());
  const int nrows = static_cast<int>(min_sizes_.size());
  const int max_w = 220 * ncols;
  const int max_h = 120 * nrows;
  if (grid.width() > max_w) grid.setWidth(max_w);
  if (grid.height() > max_h) {
    grid.moveTop(grid.top() + (grid.height() - max_h) / 2);
    grid.setHeight(max_h);
  }
  l.grid = grid;
  l.row_labels_right = left - 6;
  if (has_range_) l.bar = QRect(grid.right() + 12, grid.top(), 14, grid.height());
  return l;
}

QRect HeatmapWidget::placementRect(const Layout& l, const Placement& p) const {
  const int ncols = static_cast<int>(stash_sizes_.size());
  const int nrows = static_cast<int>(min_sizes_.size());
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

QRect HeatmapWidget::cellRect(int64_t point_index) const {
  if (!data_ || point_index < 0) return {};
  const Layout l = layout();
  if (has_baseline_ && data_->points[baseline_pos_].index == point_index) return l.baseline;
  for (const auto& pl : placements_) {
    if (pl.index == point_index) return placementRect(l, pl);
  }
  return {};
}

int64_t HeatmapWidget::pointAt(QPoint pos) const {
  if (!data_) return -1;
  const Layout l = layout();
  if (has_baseline_ && l.baseline.contains(pos)) return data_->points[baseline_pos_].index;
  if (!l.grid.contains(pos)) return -1;
  for (const auto& pl : placements_) {
    if (placementRect(l, pl).contains(pos)) return pl.index;
  }
  return -1;
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

// The baseline entry, the mark of the recommended point, and what the colours mean.
void HeatmapWidget::paintHeader(QPainter& p, const Layout& l) const {
  const QPalette& pal = palette();
  const QFontMetrics fm(font());
  int x = l.header.left();
  if (has_baseline_) {
    const auto& base = data_->points[baseline_pos_];
    p.fillRect(l.baseline, pal.color(QPalette::AlternateBase));
    draw_outline(p, l.baseline, pal.color(QPalette::Mid), 1);
    if (base.index == highlighted_) draw_outline(p, l.baseline, kHighlightOutline, 3);
    if (base.index == selected_) draw_outline(p, l.baseline, pal.color(QPalette::Highlight), 3);
    if (base.index == hovered_) draw_outline(p, l.baseline, pal.color(QPalette::Text), 1);
    p.setPen(pal.color(QPalette::Text));
    p.drawText(l.baseline, Qt::AlignCenter, baselineText());
    x = l.baseline.right() + 12;
  }
  if (highlighted_ >= 0 && point(highlighted_) != nullptr) {
    const QString text = QStringLiteral("recommended");
    const QRect sample(x, l.header.center().y() - 6, 18, 12);
    const QRect label(sample.right() + 6, l.header.top(), fm.horizontalAdvance(text) + 2,
                      l.header.height());
    if (label.right() < l.header.right()) {
      draw_outline(p, sample, kHighlightOutline, 3);
      p.setPen(pal.color(QPalette::Text));
      p.drawText(label, Qt::AlignVCenter | Qt::AlignLeft, text);
      x = label.right() + 12;
    }
  }
  if (x < l.header.right() - 20) {
    const QString what =
        QStringLiteral("colour: %1, %2 is better")
            .arg(QString::fromLatin1(metric_label(metric_)),
                 lower_is_better(metric_) ? QStringLiteral("lower") : QStringLiteral("higher"));
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(QRect(x, l.header.top(), l.header.right() - x, l.header.height()),
               Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText(what, Qt::ElideRight, l.header.right() - x));
  }
}

// Axis titles and value labels; on a dense grid only every k-th label, so that none overlap.
void HeatmapWidget::paintAxes(QPainter& p, const Layout& l) const {
  const QFontMetrics fm(font());
  const int lh = l.line_height;
  const int ncols = static_cast<int>(stash_sizes_.size());
  const int nrows = static_cast<int>(min_sizes_.size());
  const QRect& g = l.grid;
  p.setPen(palette().color(QPalette::Text));
  int col_label_w = 0;
  for (int64_t v : stash_sizes_) {
    col_label_w = std::max(col_label_w, fm.horizontalAdvance(QString::number(v)));
  }
  const int col_w = std::max(1, g.width() / ncols);
  const int col_every = std::max(1, (col_label_w + 8 + col_w - 1) / col_w);
  for (int c = 0; c < ncols; c += col_every) {
    const int x0 = g.left() + c * g.width() / ncols;
    const int x1 = g.left() + (c + 1) * g.width() / ncols;
    p.drawText(QRect(x0 - col_w, g.bottom() + 3, (x1 - x0) + 2 * col_w, lh),
               Qt::AlignHCenter | Qt::AlignTop,
               QString::number(stash_sizes_[static_cast<size_t>(c)]));
  }
  const int row_h = std::max(1, g.height() / nrows);
  const int row_every = std::max(1, (lh + row_h - 1) / row_h);
  for (int r = 0; r < nrows; r += row_every) {
    const int from_top = nrows - 1 - r;
    const int y0 = g.top() + from_top * g.height() / nrows;
    const int y1 = g.top() + (from_top + 1) * g.height() / nrows;
    p.drawText(QRect(0, y0, l.row_labels_right, y1 - y0), Qt::AlignRight | Qt::AlignVCenter,
               qs(pf::format_size(min_sizes_[static_cast<size_t>(r)])));
  }
  p.drawText(QRect(g.left(), g.bottom() + 3 + lh + 2, g.width(), lh),
             Qt::AlignHCenter | Qt::AlignTop, QStringLiteral("max_fwd_stash_size"));
  p.save();
  p.translate(6 + lh / 2.0, g.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-g.height() / 2.0 - 100, -lh / 2.0, g.height() + 200.0, lh), Qt::AlignCenter,
             QStringLiteral("min_offload_size"));
  p.restore();
}

void HeatmapWidget::paintCells(QPainter& p, const Layout& l) const {
  const QPalette& pal = palette();
  const QFontMetrics fm(font());
  // Values that do not fit get a second chance in a smaller font before they are left out.
  QFont small_font = font();
  small_font.setPointSizeF(font().pointSizeF() * 0.85);
  const QFontMetrics small_fm(small_font);
  const bool lower_better = lower_is_better(metric_);
  const double span = range_max_ - range_min_;

  // Empty grid positions (a sparse grid) keep the background inside a faint frame.
  p.setPen(QPen(pal.color(QPalette::Midlight), 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(l.grid.adjusted(0, 0, -1, -1));
  for (const auto& pl : placements_) {
    const auto& pt = data_->points[pl.pos];
    const QRect cell = placementRect(l, pl).adjusted(1, 1, -1, -1);
    if (cell.isEmpty()) continue;
    QString text;
    QColor text_color = pal.color(QPalette::Text);
    std::optional<QColor> plate;  // behind the text, so that a hatch does not cross it
    switch (pt.status) {
      case pf::PointStatus::Ok: {
        const auto v = metric_value(*data_, pt, metric_);
        if (v && has_range_ && std::isfinite(*v)) {
          double t = span > 0 ? (*v - range_min_) / span : 0.5;
          if (lower_better && span > 0) t = 1.0 - t;
          const QColor fill = sequential_color(t);
          p.fillRect(cell, fill);
          text = legendText(*v);
          text_color = text_color_on(fill);
        } else {
          p.fillRect(cell, pal.color(QPalette::AlternateBase));
          text = QStringLiteral("n/a");
        }
        break;
      }
      case pf::PointStatus::Failed:
        fill_hatched(p, cell, kFailedFill, kFailedHatch, Qt::BDiagPattern);
        text = QStringLiteral("failed");
        text_color = QColor(40, 40, 40);
        plate = kFailedFill;
        break;
      case pf::PointStatus::OutOfMemory:
        fill_hatched(p, cell, kOomFill, kOomHatch, Qt::DiagCrossPattern);
        text = QStringLiteral("OOM");
        text_color = QColor(150, 0, 0);
        plate = kOomFill;
        break;
      case pf::PointStatus::Pending:
        draw_outline(p, cell, pal.color(QPalette::Mid), 1, Qt::DashLine);
        text = QStringLiteral("pending");
        text_color = pal.color(QPalette::PlaceholderText);
        break;
    }
    const auto fits = [&](const QFontMetrics& m) {
      return m.horizontalAdvance(text) <= cell.width() - 4 && m.height() <= cell.height() - 2;
    };
    const bool normal = fits(fm);
    if (!normal && !fits(small_fm)) continue;
    p.save();
    if (!normal) p.setFont(small_font);
    if (plate) {
      const QFontMetrics& m = normal ? fm : small_fm;
      p.fillRect(
          m.boundingRect(cell, Qt::AlignCenter, text).adjusted(-3, 0, 3, 0).intersected(cell),
          *plate);
    }
    p.setPen(text_color);
    p.drawText(cell, Qt::AlignCenter, text);
    p.restore();
  }
  // Marks last, above every cell.
  for (const auto& pl : placements_) {
    const QRect cell = placementRect(l, pl).adjusted(1, 1, -1, -1);
    if (pl.index == highlighted_) {
      draw_outline(p, cell, kHighlightOutline, 3);
      draw_outline(p, cell.adjusted(3, 3, -3, -3), QColor(255, 255, 255), 1);
    }
    if (pl.index == selected_) draw_outline(p, cell, pal.color(QPalette::Highlight), 3);
    if (pl.index == hovered_ && hovered_ != selected_) {
      draw_outline(p, cell, pal.color(QPalette::Text), 1);
    }
  }
}

// The colour bar: best at the top, as the cells' colours say.
void HeatmapWidget::paintLegend(QPainter& p, const Layout& l) const {
  if (l.bar.isEmpty() || !has_range_) return;
  QLinearGradient grad(l.bar.bottomLeft(), l.bar.topLeft());
  for (size_t i = 0; i < kColorStops.size(); ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(kColorStops.size() - 1);
    grad.setColorAt(t, sequential_color(t));
  }
  p.fillRect(l.bar, grad);
  draw_outline(p, l.bar, palette().color(QPalette::Mid), 1);
  p.setPen(palette().color(QPalette::Text));
  const bool lower_better = lower_is_better(metric_);
  const double best = lower_better ? range_min_ : range_max_;
  const double worst = lower_better ? range_max_ : range_min_;
  const int lh = l.line_height;
  const int tx = l.bar.right() + 6;
  p.drawText(QRect(tx, l.bar.top() - lh / 2, width() - tx, lh), Qt::AlignLeft | Qt::AlignVCenter,
             legendText(best));
  p.drawText(QRect(tx, l.bar.bottom() - lh / 2, width() - tx, lh), Qt::AlignLeft | Qt::AlignVCenter,
             legendText(worst));
}

// ---------------------------------------------------------------------------------------------
// ParetoWidget

struct ParetoWidget::Frame {
  QRectF plot;  // empty when nothing is plotted
  QRect caption;
  Axis x;  // bytes
  Axis y;  // ms
  double x_unit = 1.0;
  QString x_unit_name;
  int line_height = 0;

  QPointF map(double bytes, double ms) const {
    const double fx = x.hi > x.lo ? (bytes - x.lo) / (x.hi - x.lo) : 0.5;
    const double fy = y.hi > y.lo ? (ms - y.lo) / (y.hi - y.lo) : 0.5;
    return {plot.left() + fx * plot.width(), plot.bottom() - fy * plot.height()};
  }
};

ParetoWidget::ParetoWidget(QWidget* parent) : SweepChart(parent) {}

QSize ParetoWidget::sizeHint() const { return {520, 340}; }
QSize ParetoWidget::minimumSizeHint() const { return {240, 180}; }

void ParetoWidget::setData(SweepDataPtr data) {
  data_ = std::move(data);
  rebuild();
  update();
}

void ParetoWidget::setRecommendation(const pf::Recommendation& rec) {
  rec_ = rec;
  has_rec_ = true;
  update();
}

void ParetoWidget::rebuild() {
  plotted_.clear();
  if (!data_) return;
  const auto& pts = data_->points;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].status != pf::PointStatus::Ok) continue;
    const auto& s = pts[i].summary;
    if (!std::isfinite(s.step_ms_median)) continue;
    const auto x = static_cast<double>(s.peak_allocated);
    x_lo_ = plotted_.empty() ? x : std::min(x_lo_, x);
    x_hi_ = plotted_.empty() ? x : std::max(x_hi_, x);
    y_lo_ = plotted_.empty() ? s.step_ms_median : std::min(y_lo_, s.step_ms_median);
    y_hi_ = plotted_.empty() ? s.step_ms_median : std::max(y_hi_, s.step_ms_median);
    plotted_.push_back(i);
  }
}

double ParetoWidget::baselineMs() const {
  if (has_rec_ && rec_.baseline && rec_.baseline->summary.step_ms_median > 0) {
    return rec_.baseline->summary.step_ms_median;
  }
  if (data_) {
    const auto* base = baseline_point(*data_);
    if (base != nullptr && base->status == pf::PointStatus::Ok) return base->summary.step_ms_median;
  }
  return 0.0;
}

QString ParetoWidget::caption() const {
  if (!data_) return {};
  int64_t failed = 0, oom = 0, pending = 0;
  for (const auto& p : data_->points) {
    failed += p.status == pf::PointStatus::Failed;
    oom += p.status == pf::PointStatus::OutOfMemory;
    pending += p.status == pf::PointStatus::Pending;
  }
  QStringList parts;
  if (failed > 0) parts << QStringLiteral("%1 failed").arg(failed);
  if (oom > 0) parts << QStringLiteral("%1 out of memory").arg(oom);
  if (pending > 0) parts << QStringLiteral("%1 pending").arg(pending);
  return parts.join(QStringLiteral(", "));
}

ParetoWidget::Frame ParetoWidget::frame() const {
  Frame f;
  const QFontMetrics fm(font());
  const int lh = fm.height();
  f.line_height = lh;
  const QRect r = rect().adjusted(8, 6, -14, -6);
  f.caption = QRect(r.left(), r.top(), r.width(), lh + 4);
  if (plotted_.empty()) return f;

  const pf::SizeUnit unit = pf::size_unit(std::max(std::abs(x_lo_), std::abs(x_hi_)));
  f.x_unit = unit.bytes;
  f.x_unit_name = QString::fromUtf8(unit.name);
  // Ticks fall on round numbers of the unit shown, not of bytes.
  f.x = nice_axis(x_lo_ / f.x_unit, x_hi_ / f.x_unit, true);
  f.x.lo *= f.x_unit;
  f.x.hi *= f.x_unit;
  for (double& t : f.x.ticks) t *= f.x_unit;
  f.y = nice_axis(y_lo_, y_hi_, true);

  int y_label_w = 0;
  for (double t : f.y.ticks) y_label_w = std::max(y_label_w, fm.horizontalAdvance(tick_label(t)));
  const double left = r.left() + lh + 6 + y_label_w + 6;
  const double top = f.caption.bottom() + 1 + lh / 2.0 + 4;
  const double bottom = r.bottom() - 2.0 * (lh + 3);
  const double right = r.right();
  if (right - left < 16 || bottom - top < 16) return f;
  f.plot = QRectF(QPointF(left, top), QPointF(right, bottom));
  return f;
}

QRectF ParetoWidget::plotArea() const { return frame().plot; }

QPointF ParetoWidget::mapToPlot(double peak_bytes, double step_ms) const {
  const Frame f = frame();
  if (f.plot.isEmpty()) return {-1, -1};
  return f.map(peak_bytes, step_ms);
}

QPointF ParetoWidget::positionOf(int64_t point_index) const {
  return positionIn(frame(), point_index);
}

QPointF ParetoWidget::positionIn(const Frame& f, int64_t point_index) const {
  if (!data_ || f.plot.isEmpty()) return {-1, -1};
  for (size_t i : plotted_) {
    const auto& p = data_->points[i];
    if (p.index == point_index) {
      return f.map(static_cast<double>(p.summary.peak_allocated), p.summary.step_ms_median);
    }
  }
  return {-1, -1};
}

int64_t ParetoWidget::pointAt(QPoint pos) const {
  if (!data_) return -1;
  const Frame f = frame();
  if (f.plot.isEmpty()) return -1;
  constexpr double kReach = 8.0;
  double best = kReach * kReach;
  int64_t found = -1;
  for (size_t i : plotted_) {
    const auto& p = data_->points[i];
    const QPointF at =
        f.map(static_cast<double>(p.summary.peak_allocated), p.summary.step_ms_median);
    const double dx = at.x() - pos.x();
    const double dy = at.y() - pos.y();
    const double d2 = dx * dx + dy * dy;
    if (d2 <= best && (found < 0 || d2 < best || p.index < found)) {
      best = d2;
      found = p.index;
    }
  }
  return found;
}

void ParetoWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (!paintBackground(p)) return;
  const QPalette& pal = palette();
  const Frame f = frame();
  const QString cap = caption();
  p.setPen(pal.color(QPalette::PlaceholderText));
  p.drawText(f.caption, Qt::AlignLeft | Qt::AlignVCenter,
             cap.isEmpty()
                 ? QStringLiteral("%1 measured").arg(plotted_.size())
                 : QStringLiteral("%1 measured; not plotted: %2").arg(plotted_.size()).arg(cap));
  if (f.plot.isEmpty()) {
    p.setPen(pal.color(QPalette::Text));
    p.drawText(rect().adjusted(0, f.caption.bottom() + 1, 0, 0), Qt::AlignCenter,
               plotted_.empty() ? QStringLiteral("No measured points yet")
                                : QStringLiteral("Too small to plot"));
    return;
  }
  p.setRenderHint(QPainter::Antialiasing, true);
  paintAxes(p, f);
  p.save();
  p.setClipRect(f.plot);
  paintConstraint(p, f);
  paintPoints(p, f);
  p.restore();
  p.setRenderHint(QPainter::Antialiasing, false);
  p.setPen(pal.color(QPalette::Mid));
  p.setBrush(Qt::NoBrush);
  p.drawRect(f.plot);
}

void ParetoWidget::paintAxes(QPainter& p, const Frame& f) const {
  const QPalette& pal = palette();
  const QRectF& plot = f.plot;
  const int lh = f.line_height;
  QColor grid_color = pal.color(QPalette::Text);
  grid_color.setAlpha(28);
  for (double t : f.x.ticks) {
    const double px = f.map(t, f.y.lo).x();
    p.setPen(QPen(grid_color, 1));
    p.drawLine(QPointF(px, plot.top()), QPointF(px, plot.bottom()));
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRectF(px - 60, plot.bottom() + 3, 120, lh), Qt::AlignHCenter | Qt::AlignTop,
               tick_label(t / f.x_unit));
  }
  for (double t : f.y.ticks) {
    const double py = f.map(f.x.lo, t).y();
    p.setPen(QPen(grid_color, 1));
    p.drawLine(QPointF(plot.left(), py), QPointF(plot.right(), py));
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRectF(0, py - lh / 2.0, plot.left() - 6, lh), Qt::AlignRight | Qt::AlignVCenter,
               tick_label(t));
  }
  p.setPen(pal.color(QPalette::Text));
  p.drawText(QRectF(plot.left(), plot.bottom() + 3 + lh + 2, plot.width(), lh),
             Qt::AlignHCenter | Qt::AlignTop,
             QStringLiteral("peak device memory (%1)").arg(f.x_unit_name));
  p.save();
  p.translate(8 + lh / 2.0, plot.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-plot.height() / 2.0 - 100, -lh / 2.0, plot.height() + 200, lh),
             Qt::AlignCenter, QStringLiteral("step time (ms)"));
  p.restore();
}

// What lies beyond the limit is shaded, so that the allowed region reads as the clear one. A limit
// outside the axes is not pulled into range (that would squash the points): the plot is then all
// clear or all shaded, and a note says where the limit is.
void ParetoWidget::paintConstraint(QPainter& p, const Frame& f) const {
  if (!has_rec_) return;
  const QRectF& plot = f.plot;
  const int lh = f.line_height;
  const QPen limit_pen(kLimitLine, 1.5, Qt::DashLine);
  QString off_axis_note;
  if (rec_.constraint.memory_budget) {
    const auto budget = static_cast<double>(*rec_.constraint.memory_budget);
    const double px = f.map(budget, f.y.lo).x();
    const QString name =
        QStringLiteral("budget %1").arg(qs(pf::format_size(*rec_.constraint.memory_budget)));
    if (px < plot.right()) {
      const QRectF over(QPointF(std::max(px, plot.left()), plot.top()), plot.bottomRight());
      p.fillRect(over, kOverLimitShade);
      p.setPen(kLimitLine);
      p.drawText(over.adjusted(4, 2, -2, -2), Qt::AlignTop | Qt::AlignLeft,
                 QStringLiteral("over budget"));
    }
    if (px >= plot.left() && px <= plot.right()) {
      p.setPen(limit_pen);
      p.drawLine(QPointF(px, plot.top()), QPointF(px, plot.bottom()));
      p.setPen(kLimitLine);
      p.drawText(QRectF(px - 4 - 200, plot.bottom() - lh - 2, 200, lh),
                 Qt::AlignRight | Qt::AlignVCenter, name);
    } else {
      off_axis_note = name + (px > plot.right() ? QStringLiteral(" (right of the axis)")
                                                : QStringLiteral(" (left of the axis)"));
    }
  }
  if (rec_.constraint.max_slowdown) {
    const double base = baselineMs();
    const double factor = *rec_.constraint.max_slowdown;
    const QString name = QStringLiteral("slowdown %1x").arg(factor);
    if (base > 0) {
      const double limit = base * factor;
      const QString limit_text =
          QStringLiteral("%1 = %2").arg(name, qs(format_metric(SweepMetric::StepTime, limit)));
      const double py = f.map(f.x.lo, limit).y();
      if (py > plot.top()) {
        const QRectF over(plot.topLeft(), QPointF(plot.right(), std::min(py, plot.bottom())));
        p.fillRect(over, kOverLimitShade);
        p.setPen(kLimitLine);
        p.drawText(over.adjusted(4, 2, -4, -2), Qt::AlignTop | Qt::AlignRight,
                   QStringLiteral("slower than %1").arg(name));
      }
      if (py >= plot.top() && py <= plot.bottom()) {
        p.setPen(limit_pen);
        p.drawLine(QPointF(plot.left(), py), QPointF(plot.right(), py));
        p.setPen(kLimitLine);
        p.drawText(QRectF(plot.left() + 4, py + 2, plot.width() - 8, lh),
                   Qt::AlignLeft | Qt::AlignTop, limit_text);
      } else {
        off_axis_note = limit_text + (py < plot.top() ? QStringLiteral(" (above the axis)")
                                                      : QStringLiteral(" (below the axis)"));
      }
    } else {
      off_axis_note = name + QStringLiteral(" (no measured baseline)");
    }
  }
  if (!off_axis_note.isEmpty()) {
    p.setPen(kLimitLine);
    p.drawText(plot.adjusted(4, 2, -4, -2), Qt::AlignTop | Qt::AlignRight, off_axis_note);
  }
}

void ParetoWidget::paintPoints(QPainter& p, const Frame& f) const {
  const QPalette& pal = palette();
  const QFontMetrics fm(font());
  const QRectF& plot = f.plot;
  const int lh = f.line_height;
  const auto at_of = [&](const pf::PointRecord& q) {
    return f.map(static_cast<double>(q.summary.peak_allocated), q.summary.step_ms_median);
  };
  // A label beside a mark, on its left where the right would run off the plot.
  const auto label = [&](const QPointF& at, double gap, const QString& text, const QColor& color,
                         double dy) {
    const double w = fm.horizontalAdvance(text) + 4;
    const double lx = at.x() + gap + w <= plot.right() ? at.x() + gap : at.x() - gap - w;
    // Not std::clamp: on a plot shorter than a line its bounds cross.
    const double ly = std::max(plot.top(), std::min(at.y() + dy, plot.bottom() - lh));
    p.setPen(color);
    p.drawText(QRectF(lx, ly, w, lh), Qt::AlignLeft | Qt::AlignVCenter, text);
  };

  // The front as the boundary of what it dominates: from each point across to the next one's
  // memory, then down to its time.
  std::vector<int64_t> on_front;
  if (has_rec_ && !rec_.front.empty()) {
    std::vector<QPointF> front;
    for (const auto& q : rec_.front) {
      front.push_back(at_of(q));
      on_front.push_back(q.index);
    }
    std::sort(front.begin(), front.end(), [](const QPointF& a, const QPointF& b) {
      return a.x() != b.x() ? a.x() < b.x() : a.y() > b.y();
    });
    QPainterPath path(front.front());
    for (size_t i = 1; i < front.size(); ++i) {
      path.lineTo(front[i].x(), front[i - 1].y());
      path.lineTo(front[i]);
    }
    p.setPen(QPen(kFrontColor, 2));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
  }

  const auto* base = baseline_point(*data_);
  for (size_t i : plotted_) {
    const auto& pt = data_->points[i];
    const QPointF at = at_of(pt);
    const double radius = pt.index == hovered_ ? 6.0 : 4.0;
    p.setPen(QPen(pal.color(QPalette::Base), 1));
    if (&pt == base) {
      p.setBrush(kBaselineColor);
      p.drawRect(QRectF(at.x() - radius - 1, at.y() - radius - 1, 2 * radius + 2, 2 * radius + 2));
      label(at, radius + 4, QStringLiteral("baseline"), kBaselineColor, -lh / 2.0);
      continue;
    }
    const bool front_point =
        std::find(on_front.begin(), on_front.end(), pt.index) != on_front.end();
    p.setBrush(front_point ? kFrontColor : kPointColor);
    p.drawEllipse(at, radius, radius);
  }
  if (has_rec_ && rec_.chosen) {
    const QPointF at = at_of(*rec_.chosen);
    p.setPen(QPen(kChosenColor, 3));
    p.setBrush(Qt::NoBrush);
    p.drawEllipse(at, 10.0, 10.0);
    label(at, 13, QStringLiteral("recommended"), kChosenColor, -12.0 - lh);
  }
  for (int64_t mark : {selected_, hovered_}) {
    if (mark < 0) continue;
    const QPointF at = positionIn(f, mark);
    if (at.x() < 0) continue;
    p.setPen(
        QPen(mark == hovered_ ? pal.color(QPalette::Text) : pal.color(QPalette::Highlight), 2));
    p.setBrush(Qt::NoBrush);
    p.drawEllipse(at, 7.0, 7.0);
  }
}

}  // namespace offtune::gui
