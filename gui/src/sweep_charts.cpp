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
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "offtune/gui/predicted.hpp"
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
const QColor kVariantKeyColor(95, 95, 95);  // a variant's legend entry: its shape, outlined
const QColor kChosenColor(20, 150, 60);
const QColor kOverLimitShade(220, 40, 40, 40);
const QColor kLimitLine(190, 30, 30);
const QColor kHighlightOutline(0, 0, 0);
const QColor kTieColor(20, 150, 60);  // the recommended point's colour on the Pareto chart
const QColor kUnmeasuredFill(246, 246, 246);
const QColor kUnmeasuredHatch(200, 200, 200);
// A cell no point can have: cross-hatched, unlike a point not measured yet (diagonal).
const QColor kNotApplicableFill(250, 250, 250);
const QColor kNotApplicableHatch(185, 185, 185);
// A prediction's hollow marker and the line to its measurement: apart from the measured points'
// blue, the front's orange and the recommendation's green.
const QColor kPredictedColor(130, 70, 170);

// RdBu-like: dark red (slower), near-white (as fast as the baseline), dark blue (faster).
constexpr std::array<std::array<int, 3>, 5> kDivergingStops = {{
    {150, 30, 45},
    {220, 110, 85},
    {246, 246, 244},
    {95, 160, 200},
    {25, 75, 135},
}};

template <size_t N>
QColor interpolate(const std::array<std::array<int, 3>, N>& stops, double t) {
  if (!(t >= 0.0)) t = 0.0;  // NaN too
  t = std::min(t, 1.0);
  const double x = t * static_cast<double>(N - 1);
  const auto i = std::min(static_cast<size_t>(x), N - 2);
  const double f = x - static_cast<double>(i);
  const auto mix = [&](int c) {
    return static_cast<int>(std::lround(stops[i][static_cast<size_t>(c)] * (1.0 - f) +
                                        stops[i + 1][static_cast<size_t>(c)] * f));
  };
  return QColor(mix(0), mix(1), mix(2));
}

// The small samples of a chart's legend, each drawn as the chart draws the mark it explains.
enum class Sample {
  Box,         // the heatmap's recommended outline
  DashedBox,   // a tie's dashed outline
  HatchedBox,  // a grid point not measured
  CrossedBox,  // a cell no point can have (not applicable)
  Dot,         // a plotted point (colour)
  Square,      // the baseline
  Ring,        // the recommended point's ring
  DashedRing,  // a tie's ring
  Whisker,     // an interval
  Hollow,      // a predicted point (hollow ring)
  Link,        // the line from a prediction to its measurement
  Shape0,      // a variant's marker (ParetoWidget::markerShape): circle, triangle, diamond, cross
  Shape1,
  Shape2,
  Shape3,
};

// A variant's marker at `c` with `radius` (shape modulo ParetoWidget::kShapes; circle for < 0).
void draw_marker(QPainter& p, const QPointF& c, double radius, int shape) {
  switch (shape < 0 ? 0 : shape % 4) {
    case 0:
      p.drawEllipse(c, radius, radius);
      break;
    case 1: {
      const double r = radius * 1.25;
      const QPointF tri[3] = {{c.x(), c.y() - r},
                              {c.x() + r * 0.87, c.y() + r * 0.5},
                              {c.x() - r * 0.87, c.y() + r * 0.5}};
      p.drawPolygon(tri, 3);
      break;
    }
    case 2: {
      const double r = radius * 1.2;
      const QPointF dia[4] = {
          {c.x(), c.y() - r}, {c.x() + r, c.y()}, {c.x(), c.y() + r}, {c.x() - r, c.y()}};
      p.drawPolygon(dia, 4);
      break;
    }
    default: {  // a cross, thick enough to read as a marker
      const double r = radius, w = radius * 0.45;
      QPainterPath plus;
      plus.addRect(QRectF(c.x() - r, c.y() - w, 2 * r, 2 * w));
      plus.addRect(QRectF(c.x() - w, c.y() - r, 2 * w, 2 * r));
      plus.setFillRule(Qt::WindingFill);
      p.drawPath(plus.simplified());
      break;
    }
  }
}

struct LegendItem {
  Sample sample;
  QString text;
  QColor color;
};

// Legend items placed left to right from `origin`, wrapping at `right`; each item is a 16 px
// sample and its text. Returns the rects (sample, text) and, in *bottom, the last line's bottom.
struct PlacedItem {
  QRect sample;
  QRect text;
};
std::vector<PlacedItem> flow_legend(const QFontMetrics& fm, QPoint origin, int left, int right,
                                    int line_height, const std::vector<LegendItem>& items,
                                    int* bottom) {
  std::vector<PlacedItem> out;
  int x = origin.x(), y = origin.y();
  for (const auto& item : items) {
    const int w = 16 + 4 + fm.horizontalAdvance(item.text) + 2;
    if (x + w > right && x > left) {
      x = left;
      y += line_height;
    }
    PlacedItem pl;
    pl.sample = QRect(x, y + (line_height - 12) / 2, 16, 12);
    pl.text = QRect(x + 20, y, std::min(w - 20, right - x - 20), line_height);
    out.push_back(pl);
    x += w + 12;
  }
  *bottom = y + line_height;
  return out;
}

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

// Widens a range narrower than `min_relative` of its largest magnitude around its centre, pads it
// (a degenerate one around its value), then widens it to whole ticks, so that no point sits on the
// frame and the ends carry labels. `intervals` is about how many ticks apart the ends may be.
Axis nice_axis(double lo, double hi, bool non_negative, double min_relative = 0.0,
               int intervals = 5) {
  const double min_span = min_relative * std::max(std::abs(lo), std::abs(hi));
  if (hi - lo < min_span) {
    const double mid = (lo + hi) / 2.0;
    lo = mid - min_span / 2.0;
    hi = mid + min_span / 2.0;
    if (non_negative && lo < 0) {
      hi -= lo;
      lo = 0;
    }
  }
  const double span = hi - lo;
  const double pad = span > 0 ? span * 0.06 : (lo != 0.0 ? std::abs(lo) * 0.1 : 1.0);
  Axis a;
  a.lo = lo - pad;
  a.hi = hi + pad;
  if (non_negative && lo >= 0 && a.lo < 0) a.lo = 0;
  const double step = nice_step((a.hi - a.lo) / std::max(1, intervals));
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
  return QString::number(v, 'g', 8);
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

void paint_sample(QPainter& p, const QRect& r, const LegendItem& item) {
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  const QPointF c = QRectF(r).center();
  switch (item.sample) {
    case Sample::Box:
      draw_outline(p, r, item.color, 3);
      break;
    case Sample::DashedBox:
      draw_outline(p, r, item.color, 2, Qt::DashLine);
      break;
    case Sample::HatchedBox:
      fill_hatched(p, r, kUnmeasuredFill, kUnmeasuredHatch, Qt::FDiagPattern);
      draw_outline(p, r, QColor(150, 150, 150), 1, Qt::DashLine);
      break;
    case Sample::CrossedBox:
      fill_hatched(p, r, kNotApplicableFill, kNotApplicableHatch, Qt::CrossPattern);
      draw_outline(p, r, kNotApplicableHatch, 1);
      break;
    case Sample::Dot:
      p.setPen(Qt::NoPen);
      p.setBrush(item.color);
      p.drawEllipse(c, 4.0, 4.0);
      break;
    case Sample::Square:
      p.setPen(Qt::NoPen);
      p.setBrush(item.color);
      p.drawRect(QRectF(c.x() - 4.5, c.y() - 4.5, 9, 9));
      break;
    case Sample::Ring:
      p.setPen(QPen(item.color, 2.5));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(c, 5.5, 5.5);
      break;
    case Sample::DashedRing:
      p.setPen(QPen(item.color, 1.5, Qt::DashLine));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(c, 5.5, 5.5);
      break;
    case Sample::Shape0:
    case Sample::Shape1:
    case Sample::Shape2:
    case Sample::Shape3:
      // Outlined: a variant's entry keys a shape, not a colour (filled, it read as "other points").
      p.setPen(QPen(item.color, 1.5));
      p.setBrush(Qt::NoBrush);
      draw_marker(p, c, 4.0, static_cast<int>(item.sample) - static_cast<int>(Sample::Shape0));
      break;
    case Sample::Hollow:
      p.setPen(QPen(item.color, 1.5));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(c, 4.5, 4.5);
      break;
    case Sample::Link:
      p.setPen(QPen(item.color, 1.0));
      p.drawLine(QPointF(r.left() + 1, r.bottom() - 1), QPointF(r.right() - 1, r.top() + 1));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(QPointF(r.left() + 3, r.bottom() - 3), 2.5, 2.5);
      p.setPen(Qt::NoPen);
      p.setBrush(kPointColor);
      p.drawEllipse(QPointF(r.right() - 3, r.top() + 3), 2.5, 2.5);
      break;
    case Sample::Whisker:
      p.setPen(QPen(item.color, 1.2));
      p.drawLine(QPointF(c.x(), r.top()), QPointF(c.x(), r.bottom()));
      p.drawLine(QPointF(c.x() - 3, r.top()), QPointF(c.x() + 3, r.top()));
      p.drawLine(QPointF(c.x() - 3, r.bottom()), QPointF(c.x() + 3, r.bottom()));
      p.setPen(Qt::NoPen);
      p.setBrush(item.color);
      p.drawEllipse(c, 3.0, 3.0);
      break;
  }
  p.restore();
}

void paint_legend(QPainter& p, const QFontMetrics& fm, const std::vector<LegendItem>& items,
                  const std::vector<PlacedItem>& placed, const QColor& text) {
  for (size_t i = 0; i < items.size() && i < placed.size(); ++i) {
    paint_sample(p, placed[i].sample, items[i]);
    p.setPen(text);
    p.drawText(placed[i].text, Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(items[i].text, Qt::ElideRight, placed[i].text.width()));
  }
}

}  // namespace

QColor sequential_color(double t) { return interpolate(kColorStops, t); }

QColor diverging_color(double t) { return interpolate(kDivergingStops, t); }

QString point_tooltip(const SweepData& sweep, const pf::PointRecord& point, bool held) {
  QStringList lines;
  const pf::PointPrediction* predicted = find_prediction(sweep, point.index);
  const QString status = held || point.status != pf::PointStatus::Pending
                             ? status_label(point.status)
                         : predicted != nullptr ? QStringLiteral("predicted, not measured")
                                                : QStringLiteral("not measured");
  QString head = QStringLiteral("<b>Point %1</b> \u2014 %2").arg(point.index).arg(status);
  const auto& c = point.config;
  const std::string variant = pf::describe_variant(c);
  if (pf::is_baseline(c)) {
    head += QStringLiteral(" (baseline, no offload)");
  } else if (!c.offload) {
    head += QStringLiteral(" (%1, no offload)").arg(qs(variant));
  }
  lines << head;
  if (c.offload && !variant.empty()) lines << qs(variant);
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
    const MetricDecimals dec = metric_decimals(sweep);
    const auto figure = [&](SweepMetric m, const QString& label, const QString& missing) {
      const auto v = metric_value(sweep, point, m);
      return v ? QStringLiteral("%1 %2").arg(label, qs(format_metric(m, *v, dec.of(m))))
               : QStringLiteral("%1 n/a (%2)").arg(label, missing);
    };
    QString step =
        QStringLiteral("step time %1 (median)")
            .arg(qs(format_metric(SweepMetric::StepTime, point.summary.step_ms_median, dec.step)));
    if (const std::string spread = describe_spread(point.summary, dec.step); !spread.empty()) {
      step += QStringLiteral(", %1").arg(qs(spread));
    }
    lines << step;
    lines << figure(SweepMetric::Slowdown, QStringLiteral("slowdown"),
                    QStringLiteral("no measured baseline"));
    lines << QStringLiteral("peak device memory %1 (%2)")
                 .arg(
                     qs(format_metric(SweepMetric::PeakMemory,
                                      static_cast<double>(point.summary.peak_allocated), dec.peak)))
                 .arg(qs(format_bytes_exact(point.summary.peak_allocated)));
    lines << figure(SweepMetric::HiddenCopy, QStringLiteral("hidden copy"),
                    QStringLiteral("no copies"));
  } else if (point.status == pf::PointStatus::Pending) {
    lines << (held ? QStringLiteral("not measured yet: being measured, or left by a sweep that "
                                    "ended before finishing it")
              : predicted != nullptr
                  ? QStringLiteral("not measured: a predict-first sweep measures only the points "
                                   "that matter; run it again without predicting to measure it")
                  : QStringLiteral("not measured yet: the sweep has not reached it (cancelled, "
                                   "still running, or another shard's)"));
  }
  if (predicted != nullptr) {
    const MetricDecimals dec = metric_decimals(sweep);
    QString figures =
        QStringLiteral("<i>predicted</i>: step time %1, peak %2 (%3)")
            .arg(qs(format_metric(SweepMetric::StepTime, predicted->step_ms(), dec.step)))
            .arg(qs(format_metric(SweepMetric::PeakMemory,
                                  static_cast<double>(predicted->peak_allocated), dec.peak)))
            .arg(qs(format_bytes_exact(predicted->peak_allocated)));
    if (predicted->offloaded_bytes > 0) {
      figures += QStringLiteral(", hidden copy %1")
                     .arg(qs(format_metric(SweepMetric::HiddenCopy, predicted->hidden_copy_pct)));
    }
    lines << figures;
    if (const auto err = prediction_error(*predicted, point)) {
      lines << QStringLiteral("prediction error: step time %1, peak %2")
                   .arg(qs(format_error_pct(err->step_pct)))
                   .arg(qs(format_error_pct(err->peak_pct)));
    }
  }
  if (!point.error.empty()) {
    lines << QStringLiteral("error: %1").arg(qs(point.error).toHtmlEscaped());
  }
  // <qt> forces rich text: an error quoting "<...>" must not switch the tooltip's format.
  return QStringLiteral("<qt>") + lines.join(QStringLiteral("<br/>")) + QStringLiteral("</qt>");
}

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

void SweepChart::setTies(std::vector<int64_t> ties) {
  if (ties == ties_) return;
  ties_ = std::move(ties);
  update();
}

bool SweepChart::isTie(int64_t point_index) const {
  return std::find(ties_.begin(), ties_.end(), point_index) != ties_.end();
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
      const bool held = find_point(data_.get(), index) != nullptr;
      QToolTip::showText(he->globalPos(), point_tooltip(*data_, *pt, held), this,
                         tooltipRect(index));
    } else if (QRect at; !placeTooltip(he->pos(), &at).isEmpty()) {
      QToolTip::showText(he->globalPos(), placeTooltip(he->pos(), &at), this, at);
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

QSize HeatmapWidget::sizeHint() const { return {520, 400}; }
QSize HeatmapWidget::minimumSizeHint() const { return {240, 180}; }

void HeatmapWidget::setData(SweepDataPtr data) {
  data_ = std::move(data);
  rebuild();
  update();
}

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
        if (pf::is_baseline(u.config)) baseline_ = &u;
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
    const bool ckpt_rows = row_axis_ == HeatmapAxis::Checkpoint;
    if ((ckpt_rows && col_axis_ == HeatmapAxis::OffloadSet) ||
        (row_axis_ == HeatmapAxis::OffloadSet && col_axis_ == HeatmapAxis::Checkpoint)) {
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
  if (!data_ || not_applicable_.empty()) return {};
  for (const auto& cell : notApplicableCells()) {
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
    l.legend.push_back({Sample::Box, QStringLiteral("recommended"), kHighlightOutline});
  }
  bool any_tie = false;
  for (const auto& pl : placements_) any_tie = any_tie || isTie(pl.index);
  if (any_tie) {
    l.legend.push_back(
        {Sample::DashedBox,
         exact_ ? QStringLiteral("tied (exact)") : QStringLiteral("as good within noise"),
         kHighlightOutline});
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
             Qt::AlignHCenter | Qt::AlignTop, QString::fromLatin1(axis_name(col_axis_)));
  p.save();
  p.translate(6 + lh / 2.0, g.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-g.height() / 2.0 - 100, -lh / 2.0, g.height() + 200.0, lh), Qt::AlignCenter,
             QString::fromLatin1(axis_name(row_axis_)));
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

// ---------------------------------------------------------------------------------------------
// ParetoWidget

struct ParetoWidget::Frame {
  QRectF plot;  // empty when nothing is plotted
  QRect caption;
  std::vector<LegendItem> legend;
  std::vector<PlacedItem> legend_at;
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

QSize ParetoWidget::sizeHint() const { return {520, 400}; }
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

int ParetoWidget::markerShape(int64_t point_index) const {
  auto it = shape_of_.find(point_index);
  return it == shape_of_.end() ? -1 : it->second % kShapes;
}

void ParetoWidget::rebuild() {
  plotted_.clear();
  predicted_.clear();
  predicted_only_.clear();
  variants_.clear();
  shape_of_.clear();
  if (!data_) return;
  variants_ = sweep_variants(*data_);
  if (variants_.size() > 1) {
    for (const auto& [index, label] : variants_by_index(*data_)) {
      auto it = std::find(variants_.begin(), variants_.end(), label);
      if (it != variants_.end()) shape_of_[index] = static_cast<int>(it - variants_.begin());
    }
  }
  const auto& pts = data_->points;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].status != pf::PointStatus::Ok) continue;
    const auto& s = pts[i].summary;
    if (!std::isfinite(s.step_ms_median)) continue;
    const auto x = static_cast<double>(s.peak_allocated);
    // The step time's interval is drawn as a whisker: keep it on the axes.
    const StepSpread sp = step_spread(s);
    const bool whisker = sp.kind == SpreadKind::Interval || sp.kind == SpreadKind::MinMax;
    const double lo = whisker ? std::min(sp.low, s.step_ms_median) : s.step_ms_median;
    const double hi = whisker ? std::max(sp.high, s.step_ms_median) : s.step_ms_median;
    x_lo_ = plotted_.empty() ? x : std::min(x_lo_, x);
    x_hi_ = plotted_.empty() ? x : std::max(x_hi_, x);
    y_lo_ = plotted_.empty() ? lo : std::min(y_lo_, lo);
    y_hi_ = plotted_.empty() ? hi : std::max(y_hi_, hi);
    plotted_.push_back(i);
  }
  // Predictions share the axes: a point measured far from its prediction stays in view, and so do
  // the points only predicted.
  const auto& pred = data_->predictions;
  for (size_t i = 0; i < pred.size(); ++i) {
    const double x = static_cast<double>(pred[i].peak_allocated);
    const double y = pred[i].step_ms();
    if (!(y > 0) || !std::isfinite(y) || pred[i].peak_allocated < 0) continue;
    const bool first = plotted_.empty() && predicted_.empty();
    x_lo_ = first ? x : std::min(x_lo_, x);
    x_hi_ = first ? x : std::max(x_hi_, x);
    y_lo_ = first ? y : std::min(y_lo_, y);
    y_hi_ = first ? y : std::max(y_hi_, y);
    predicted_.push_back(i);
  }
  predicted_only_ = predicted_only_points(*data_);
}

const pf::PointRecord* ParetoWidget::point(int64_t point_index) const {
  if (const auto* held = SweepChart::point(point_index)) return held;
  for (const auto& p : predicted_only_) {
    if (p.index == point_index) return &p;
  }
  return nullptr;
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
  if (plotted_.empty() && predicted_.empty()) return f;

  // What the marks mean, under the caption.
  bool any_interval = false, any_other = false;
  const std::vector<int64_t> front = [&] {
    std::vector<int64_t> v;
    if (has_rec_) {
      for (const auto& q : rec_.front) v.push_back(q.index);
    }
    return v;
  }();
  const auto* base = baseline_point(*data_);
  for (size_t i : plotted_) {
    const auto& p = data_->points[i];
    const SpreadKind k = step_spread(p.summary).kind;
    any_interval = any_interval || k == SpreadKind::Interval || k == SpreadKind::MinMax;
    any_other =
        any_other || (&p != base && std::find(front.begin(), front.end(), p.index) == front.end());
  }
  if (!front.empty())
    f.legend.push_back({Sample::Dot, QStringLiteral("Pareto front"), kFrontColor});
  if (any_other || front.empty()) {
    f.legend.push_back({Sample::Dot,
                        front.empty() ? QStringLiteral("measured") : QStringLiteral("other points"),
                        kPointColor});
  }
  if (base != nullptr && base->status == pf::PointStatus::Ok) {
    f.legend.push_back({Sample::Square, QStringLiteral("baseline"), kBaselineColor});
  }
  if (has_rec_ && rec_.chosen) {
    f.legend.push_back({Sample::Ring, QStringLiteral("recommended"), kChosenColor});
  }
  if (has_rec_ && !rec_.ties.empty()) {
    f.legend.push_back({Sample::DashedRing,
                        rec_.noise.deterministic ? QStringLiteral("tied (exact)")
                                                 : QStringLiteral("as good within noise"),
                        kChosenColor});
  }
  if (any_interval) {
    f.legend.push_back({Sample::Whisker, QStringLiteral("step-time interval"), kPointColor});
  }
  if (!predicted_.empty()) {
    f.legend.push_back({Sample::Hollow, QStringLiteral("predicted"), kPredictedColor});
    // The line is drawn only where a prediction was off: no entry for it when none was.
    const bool any_pair = std::any_of(plotted_.begin(), plotted_.end(), [&](size_t i) {
      const auto& pt = data_->points[i];
      const auto* q = find_prediction(*data_, pt.index);
      return q != nullptr && (q->peak_allocated != pt.summary.peak_allocated ||
                              std::abs(q->step_ms() - pt.summary.step_ms_median) > 1e-9);
    });
    if (any_pair) {
      f.legend.push_back(
          {Sample::Link, QStringLiteral("prediction \u2192 measured"), kPredictedColor});
    }
  }
  // Variants by marker shape (the colours say front or not): outlined in a neutral colour, so
  // that no variant's entry looks like the "other points" or "Pareto front" dots.
  if (variants_.size() > 1) {
    for (size_t k = 0; k < variants_.size(); ++k) {
      const auto shape =
          static_cast<Sample>(static_cast<int>(Sample::Shape0) + static_cast<int>(k % kShapes));
      f.legend.push_back({shape, QString::fromStdString(variants_[k]), kVariantKeyColor});
    }
  }
  int legend_bottom = f.caption.bottom() + 1;
  if (!f.legend.empty()) {
    f.legend_at = flow_legend(fm, QPoint(r.left(), f.caption.bottom() + 1), r.left(), r.right(),
                              lh + 2, f.legend, &legend_bottom);
  }

  const pf::SizeUnit unit = pf::size_unit(std::max(std::abs(x_lo_), std::abs(x_hi_)));
  f.x_unit = unit.bytes;
  f.x_unit_name = QString::fromUtf8(unit.name);
  // Ticks fall on round numbers of the unit shown, not of bytes.
  const auto x_axis = [&](int intervals) {
    Axis a = nice_axis(x_lo_ / f.x_unit, x_hi_ / f.x_unit, true, kMinRelativeSpan, intervals);
    a.lo *= f.x_unit;
    a.hi *= f.x_unit;
    for (double& t : a.ticks) t *= f.x_unit;
    return a;
  };
  const double top = legend_bottom + lh / 2.0 + 4;
  const double bottom = r.bottom() - 2.0 * (lh + 3);
  // As many y ticks as fit two lines apart, at most 6 intervals.
  const int y_intervals = std::clamp(static_cast<int>((bottom - top) / (2.5 * lh)), 1, 6);
  f.y = nice_axis(y_lo_, y_hi_, true, kMinRelativeSpan, y_intervals);
  int y_label_w = 0;
  for (double t : f.y.ticks) y_label_w = std::max(y_label_w, fm.horizontalAdvance(tick_label(t)));
  const double left = r.left() + lh + 6 + y_label_w + 6;
  const double right = r.right();
  if (right - left < 16 || bottom - top < 16) return f;
  f.plot = QRectF(QPointF(left, top), QPointF(right, bottom));
  // X ticks no closer than their widest label and a gap: fewer intervals until they fit.
  int x_intervals = 5;
  for (int tries = 0; tries < 6; ++tries) {
    f.x = x_axis(x_intervals);
    double widest = 0;
    for (double t : f.x.ticks) {
      widest =
          std::max(widest, static_cast<double>(fm.horizontalAdvance(tick_label(t / f.x_unit))));
    }
    const double spacing = f.x.ticks.size() > 1
                               ? f.plot.width() * (f.x.ticks[1] - f.x.ticks[0]) / (f.x.hi - f.x.lo)
                               : f.plot.width();
    if (spacing >= widest + 12 || x_intervals == 1) break;
    x_intervals =
        std::clamp(static_cast<int>(x_intervals * spacing / (widest + 12)), 1, x_intervals - 1);
  }
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
  // Not measured (ok): where it is predicted, if it is.
  return predictedIn(f, point_index);
}

QPointF ParetoWidget::predictedPositionOf(int64_t point_index) const {
  return predictedIn(frame(), point_index);
}

QPointF ParetoWidget::predictedIn(const Frame& f, int64_t point_index) const {
  if (!data_ || f.plot.isEmpty()) return {-1, -1};
  for (size_t i : predicted_) {
    const auto& q = data_->predictions[i];
    if (q.index == point_index) return f.map(static_cast<double>(q.peak_allocated), q.step_ms());
  }
  return {-1, -1};
}

QStringList ParetoWidget::legendLabels() const {
  QStringList out;
  for (const auto& item : frame().legend) out << item.text;
  return out;
}

QStringList ParetoWidget::legendGlyphs() const {
  QStringList out;
  for (const auto& item : frame().legend) {
    QString glyph;
    switch (item.sample) {
      case Sample::Dot:
        glyph = QStringLiteral("filled circle");
        break;
      case Sample::Shape0:
      case Sample::Shape1:
      case Sample::Shape2:
      case Sample::Shape3: {
        static const char* const kNames[] = {"circle", "triangle", "diamond", "cross"};
        glyph =
            QStringLiteral("outlined ") +
            QLatin1String(kNames[static_cast<int>(item.sample) - static_cast<int>(Sample::Shape0)]);
        break;
      }
      default:
        glyph = QStringLiteral("sample %1").arg(static_cast<int>(item.sample));
        break;
    }
    out << glyph + QLatin1Char(' ') + item.color.name();
  }
  return out;
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
  // Then the predictions: one on top of a measured point leaves the point to it.
  for (size_t i : predicted_) {
    const auto& q = data_->predictions[i];
    const QPointF at = f.map(static_cast<double>(q.peak_allocated), q.step_ms());
    const double dx = at.x() - pos.x();
    const double dy = at.y() - pos.y();
    const double d2 = dx * dx + dy * dy;
    if (found < 0 ? d2 <= best : d2 < best) {
      best = d2;
      found = q.index;
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
  QString head = QStringLiteral("%1 measured").arg(plotted_.size());
  if (!predicted_.empty()) head += QStringLiteral(", %1 predicted").arg(predicted_.size());
  if (!cap.isEmpty()) head += QStringLiteral("; not plotted: %1").arg(cap);
  if (has_rec_ && rec_.noise.deterministic) {
    head += QStringLiteral("; step times exact (modelled)");
  } else if (has_rec_ && rec_.noise.points > 0) {
    head += QStringLiteral("; noise %1x\u2013%2x of the baseline")
                .arg(rec_.noise.min_ratio, 0, 'f', 2)
                .arg(rec_.noise.max_ratio, 0, 'f', 2);
  }
  p.drawText(f.caption, Qt::AlignLeft | Qt::AlignVCenter,
             QFontMetrics(font()).elidedText(head, Qt::ElideRight, f.caption.width()));
  paint_legend(p, QFontMetrics(font()), f.legend, f.legend_at, pal.color(QPalette::Text));
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
  paintPredictions(p, f);
  paintPoints(p, f);
  p.restore();
  p.setRenderHint(QPainter::Antialiasing, false);
  p.setPen(pal.color(QPalette::Mid));
  p.setBrush(Qt::NoBrush);
  p.drawRect(f.plot);
}

std::vector<QRectF> ParetoWidget::tickLabelRectsIn(const Frame& f, Qt::Orientation o) const {
  std::vector<QRectF> out;
  if (f.plot.isEmpty()) return out;
  const QFontMetrics fm(font());
  const int lh = f.line_height;
  if (o == Qt::Horizontal) {
    for (double t : f.x.ticks) {
      const double px = f.map(t, f.y.lo).x();
      const double w = fm.horizontalAdvance(tick_label(t / f.x_unit));
      out.emplace_back(px - w / 2.0, f.plot.bottom() + 3, w, lh);
    }
  } else {
    for (double t : f.y.ticks) {
      const double py = f.map(f.x.lo, t).y();
      const double w = fm.horizontalAdvance(tick_label(t));
      out.emplace_back(f.plot.left() - 6 - w, py - lh / 2.0, w, lh);
    }
  }
  return out;
}

std::vector<QRectF> ParetoWidget::tickLabelRects(Qt::Orientation o) const {
  return tickLabelRectsIn(frame(), o);
}

std::pair<double, double> ParetoWidget::axisRange(Qt::Orientation o) const {
  const Frame f = frame();
  if (f.plot.isEmpty()) return {0.0, 0.0};
  return o == Qt::Horizontal ? std::pair{f.x.lo, f.x.hi} : std::pair{f.y.lo, f.y.hi};
}

void ParetoWidget::paintAxes(QPainter& p, const Frame& f) const {
  const QPalette& pal = palette();
  const QRectF& plot = f.plot;
  const int lh = f.line_height;
  QColor grid_color = pal.color(QPalette::Text);
  grid_color.setAlpha(28);
  const auto x_labels = tickLabelRectsIn(f, Qt::Horizontal);
  for (size_t i = 0; i < f.x.ticks.size(); ++i) {
    const double t = f.x.ticks[i];
    const double px = f.map(t, f.y.lo).x();
    p.setPen(QPen(grid_color, 1));
    p.drawLine(QPointF(px, plot.top()), QPointF(px, plot.bottom()));
    p.setPen(pal.color(QPalette::Text));
    p.drawText(x_labels[i].adjusted(-2, 0, 2, 0), Qt::AlignHCenter | Qt::AlignTop,
               tick_label(t / f.x_unit));
  }
  const auto y_labels = tickLabelRectsIn(f, Qt::Vertical);
  for (size_t i = 0; i < f.y.ticks.size(); ++i) {
    const double t = f.y.ticks[i];
    const double py = f.map(f.x.lo, t).y();
    p.setPen(QPen(grid_color, 1));
    p.drawLine(QPointF(plot.left(), py), QPointF(plot.right(), py));
    p.setPen(pal.color(QPalette::Text));
    p.drawText(y_labels[i].adjusted(-2, 0, 0, 0), Qt::AlignRight | Qt::AlignVCenter, tick_label(t));
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

std::optional<QLineF> ParetoWidget::constraintLineIn(const Frame& f, QString* text) const {
  if (!has_rec_ || f.plot.isEmpty()) return std::nullopt;
  const QRectF& plot = f.plot;
  if (rec_.constraint.memory_budget) {
    const auto budget = static_cast<double>(*rec_.constraint.memory_budget);
    const double px = f.map(budget, f.y.lo).x();
    if (px < plot.left() || px > plot.right()) return std::nullopt;
    if (text != nullptr) {
      *text = QStringLiteral("budget %1").arg(qs(pf::format_size(*rec_.constraint.memory_budget)));
    }
    return QLineF(px, plot.top(), px, plot.bottom());
  }
  if (rec_.constraint.max_slowdown) {
    const double base = baselineMs();
    if (!(base > 0)) return std::nullopt;
    const double limit = base * *rec_.constraint.max_slowdown;
    const double py = f.map(f.x.lo, limit).y();
    if (py < plot.top() || py > plot.bottom()) return std::nullopt;
    if (text != nullptr) {
      *text = QStringLiteral("slowdown %1x = %2")
                  .arg(*rec_.constraint.max_slowdown)
                  .arg(qs(format_metric(SweepMetric::StepTime, limit)));
    }
    return QLineF(plot.left(), py, plot.right(), py);
  }
  return std::nullopt;
}

// What a label must not cover: every marker (points, predictions, the rings), every line (the
// front's steps, whiskers, prediction links, the constraint) and the shaded region's caption.
ParetoWidget::Obstacles ParetoWidget::obstaclesIn(const Frame& f) const {
  Obstacles o;
  if (!data_ || f.plot.isEmpty()) return o;
  const QFontMetrics fm(font());
  const int lh = f.line_height;
  const QRectF& plot = f.plot;
  const auto at_of = [&](const pf::PointRecord& q) {
    return f.map(static_cast<double>(q.summary.peak_allocated), q.summary.step_ms_median);
  };
  const auto box = [&](const QPointF& c, double r) {
    o.boxes.emplace_back(c.x() - r, c.y() - r, 2 * r, 2 * r);
  };
  for (size_t i : plotted_) {
    const auto& pt = data_->points[i];
    const QPointF at = at_of(pt);
    box(at, 7.0);  // the marker as hovered (radius 6) with its pen
    const StepSpread sp = step_spread(pt.summary);
    if (sp.kind == SpreadKind::Interval || sp.kind == SpreadKind::MinMax) {
      const auto x = static_cast<double>(pt.summary.peak_allocated);
      o.lines.emplace_back(f.map(x, sp.low), f.map(x, sp.high));
    }
    const QPointF predicted = predictedIn(f, pt.index);
    if (predicted.x() >= 0) o.lines.emplace_back(predicted, at);
  }
  for (size_t i : predicted_) {
    const auto& q = data_->predictions[i];
    box(f.map(static_cast<double>(q.peak_allocated), q.step_ms()), 7.0);
  }
  if (has_rec_) {
    for (const auto& tie : rec_.ties) box(at_of(tie), 9.0);
    if (rec_.chosen) box(at_of(*rec_.chosen), 12.0);  // the ring: radius 10, a 3 px pen
    std::vector<QPointF> front;
    for (const auto& q : rec_.front) front.push_back(at_of(q));
    std::sort(front.begin(), front.end(), [](const QPointF& a, const QPointF& b) {
      return a.x() != b.x() ? a.x() < b.x() : a.y() > b.y();
    });
    for (size_t i = 1; i < front.size(); ++i) {
      const QPointF corner(front[i].x(), front[i - 1].y());
      o.lines.emplace_back(front[i - 1], corner);
      o.lines.emplace_back(corner, front[i]);
    }
    if (const auto line = constraintLineIn(f, nullptr)) o.lines.push_back(*line);
    // The shaded region's caption (paintConstraint), at its top corner.
    if (rec_.constraint.memory_budget) {
      const double px = f.map(static_cast<double>(*rec_.constraint.memory_budget), f.y.lo).x();
      if (px < plot.right()) {
        const double w = fm.horizontalAdvance(QStringLiteral("over budget"));
        o.boxes.emplace_back(std::max(px, plot.left()) + 4, plot.top() + 2, w, lh);
      }
    } else if (rec_.constraint.max_slowdown && baselineMs() > 0) {
      const double py = f.map(f.x.lo, baselineMs() * *rec_.constraint.max_slowdown).y();
      if (py > plot.top()) {
        const double w = fm.horizontalAdvance(
            QStringLiteral("slower than slowdown %1x").arg(*rec_.constraint.max_slowdown));
        o.boxes.emplace_back(plot.right() - 4 - w, plot.top() + 2, w, lh);
      }
    }
  }
  return o;
}

namespace {

bool rect_crosses(const QRectF& r, const QLineF& line) {
  if (r.contains(line.p1()) || r.contains(line.p2())) return true;
  const QLineF edges[] = {{r.topLeft(), r.topRight()},
                          {r.topRight(), r.bottomRight()},
                          {r.bottomRight(), r.bottomLeft()},
                          {r.bottomLeft(), r.topLeft()}};
  return std::any_of(std::begin(edges), std::end(edges), [&](const QLineF& e) {
    return line.intersects(e, nullptr) == QLineF::BoundedIntersection;
  });
}

// The first candidate inside the plot that is clear of everything (a pixel of margin), else the
// one that covers least: a line crossed weighs more than any overlap of boxes.
QRectF pick_clear(const std::vector<QRectF>& candidates, const QRectF& plot,
                  const std::vector<QRectF>& boxes, const std::vector<QLineF>& lines) {
  QRectF best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const QRectF& c : candidates) {
    if (!plot.contains(c)) continue;
    const QRectF padded = c.adjusted(-1, -1, 1, 1);
    double cost = 0;
    for (const QRectF& b : boxes) {
      const QRectF i = b.intersected(padded);
      if (!i.isEmpty()) cost += 100 + i.width() * i.height();
    }
    for (const QLineF& l : lines) cost += rect_crosses(padded, l) ? 1e5 : 0;
    if (cost < best_cost) {
      best = c;
      best_cost = cost;
    }
    if (cost == 0) break;
  }
  if (best_cost < std::numeric_limits<double>::infinity()) return best;
  // Nothing fits inside the plot (a tiny widget): the first candidate, moved in as far as it can.
  QRectF r = candidates.front();
  r.moveLeft(std::max(plot.left(), std::min(r.left(), plot.right() - r.width())));
  r.moveTop(std::max(plot.top(), std::min(r.top(), plot.bottom() - r.height())));
  return r;
}

// Rects of `size` around a mark at `at` of radius `r`, in 16 directions (beside it first, then
// the diagonals, above and below), at growing distances: each rect extends away from the mark.
std::vector<QRectF> around(const QPointF& at, double r, const QSizeF& size) {
  std::vector<QRectF> out;
  const double w = size.width(), h = size.height();
  constexpr double kPi = 3.14159265358979323846;
  constexpr int kOrder[] = {0, 8, 2, 6, 14, 10, 4, 12, 1, 7, 15, 9, 3, 5, 13, 11};
  for (const double d : {r + 3, r + 10, r + 20, r + 34, r + 52, r + 76, r + 104, r + 140}) {
    for (const int k : kOrder) {
      const double a = k * kPi / 8, cx = std::cos(a), sy = -std::sin(a);
      const QPointF p = at + QPointF(d * cx, d * sy);
      const double x = cx > 0.3 ? p.x() : (cx < -0.3 ? p.x() - w : p.x() - w / 2);
      const double y = sy > 0.3 ? p.y() : (sy < -0.3 ? p.y() - h : p.y() - h / 2);
      out.emplace_back(x, y, w, h);
    }
  }
  return out;
}

}  // namespace

// The limit's line and its label: the label beside the line, never across it, and clear of every
// mark (the point labels are placed clear of it after).
std::optional<ParetoWidget::ConstraintMark> ParetoWidget::constraintMarkIn(const Frame& f) const {
  QString text;
  const auto line = constraintLineIn(f, &text);
  if (!line) return std::nullopt;
  const QRectF& plot = f.plot;
  const QFontMetrics fm(font());
  const int lh = f.line_height;
  const double w = fm.horizontalAdvance(text) + 6;
  const Obstacles o = obstaclesIn(f);
  std::vector<QRectF> candidates;
  if (line->dx() == 0) {  // a budget: left of the line first, from the bottom up
    const double px = line->x1();
    for (double y = plot.bottom() - lh - 4; y >= plot.top(); y -= lh / 2.0) {
      candidates.emplace_back(px - 5 - w, y, w, lh);
      candidates.emplace_back(px + 5, y, w, lh);
    }
  } else {  // a slowdown: above the line first, from the left
    const double py = line->y1();
    for (double x = plot.left() + 4; x + w <= plot.right() - 4; x += 12) {
      candidates.emplace_back(x, py - 3 - lh, w, lh);
      candidates.emplace_back(x, py + 3, w, lh);
    }
  }
  if (candidates.empty()) candidates.emplace_back(plot.left(), line->y1(), w, lh);
  return ConstraintMark{*line, pick_clear(candidates, plot, o.boxes, o.lines)};
}

std::vector<ParetoWidget::PlacedLabel> ParetoWidget::pointLabelsIn(const Frame& f) const {
  std::vector<PlacedLabel> out;
  if (!data_ || f.plot.isEmpty()) return out;
  const QFontMetrics fm(font());
  const int lh = f.line_height;
  const auto at_of = [&](const pf::PointRecord& q) {
    return f.map(static_cast<double>(q.summary.peak_allocated), q.summary.step_ms_median);
  };
  // The constraint's label first (it has least choice: beside its line), then the recommended
  // point's, then the baseline's, each clear of every mark, line and label placed before it.
  Obstacles o = obstaclesIn(f);
  if (const auto mark = constraintMarkIn(f)) o.boxes.push_back(mark->label);
  const auto place = [&](const QPointF& at, double radius, const QString& text,
                         const QColor& color) {
    const QSizeF size(fm.horizontalAdvance(text) + 4, lh);
    const QRectF r = pick_clear(around(at, radius, size), f.plot, o.boxes, o.lines);
    o.boxes.push_back(r);
    out.push_back({text, r, color});
  };
  if (has_rec_ && rec_.chosen) {
    place(at_of(*rec_.chosen), 12.0, QStringLiteral("recommended"), kChosenColor);
  }
  if (const auto* base = baseline_point(*data_)) {
    for (size_t i : plotted_) {
      if (&data_->points[i] == base) {
        place(at_of(*base), 7.0, QStringLiteral("baseline"), kBaselineColor);
      }
    }
  }
  return out;
}

std::vector<ParetoWidget::PlotLabel> ParetoWidget::plotLabels() const {
  const Frame f = frame();
  std::vector<PlotLabel> out;
  for (const auto& l : pointLabelsIn(f)) out.push_back({l.text, l.rect});
  if (const auto mark = constraintMarkIn(f)) {
    out.push_back({QStringLiteral("constraint"), mark->label});
  }
  return out;
}

std::optional<ParetoWidget::ConstraintMark> ParetoWidget::constraintMark() const {
  return constraintMarkIn(frame());
}

// What lies beyond the limit is shaded, so that the allowed region reads as the clear one. A limit
// outside the axes is not pulled into range (that would squash the points): the plot is then all
// clear or all shaded, and a note says where the limit is.
void ParetoWidget::paintConstraint(QPainter& p, const Frame& f) const {
  if (!has_rec_) return;
  const QRectF& plot = f.plot;
  const QPen limit_pen(kLimitLine, 1.5, Qt::DashLine);
  const auto mark = constraintMarkIn(f);
  QString off_axis_note;
  QString label_text;
  if (rec_.constraint.memory_budget) {
    const auto budget = static_cast<double>(*rec_.constraint.memory_budget);
    const double px = f.map(budget, f.y.lo).x();
    const QString name =
        QStringLiteral("budget %1").arg(qs(pf::format_size(*rec_.constraint.memory_budget)));
    label_text = name;
    if (px < plot.right()) {
      const QRectF over(QPointF(std::max(px, plot.left()), plot.top()), plot.bottomRight());
      p.fillRect(over, kOverLimitShade);
      p.setPen(kLimitLine);
      p.drawText(over.adjusted(4, 2, -2, -2), Qt::AlignTop | Qt::AlignLeft,
                 QStringLiteral("over budget"));
    }
    if (!mark) {
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
      label_text =
          QStringLiteral("%1 = %2").arg(name, qs(format_metric(SweepMetric::StepTime, limit)));
      const double py = f.map(f.x.lo, limit).y();
      if (py > plot.top()) {
        const QRectF over(plot.topLeft(), QPointF(plot.right(), std::min(py, plot.bottom())));
        p.fillRect(over, kOverLimitShade);
        p.setPen(kLimitLine);
        p.drawText(over.adjusted(4, 2, -4, -2), Qt::AlignTop | Qt::AlignRight,
                   QStringLiteral("slower than %1").arg(name));
      }
      if (!mark) {
        off_axis_note = label_text + (py < plot.top() ? QStringLiteral(" (above the axis)")
                                                      : QStringLiteral(" (below the axis)"));
      }
    } else {
      off_axis_note = name + QStringLiteral(" (no measured baseline)");
    }
  }
  if (mark) {
    p.setPen(limit_pen);
    p.drawLine(mark->line);
    // A plate under the label: grid lines and points pass under it, not through it.
    QColor plate = palette().color(QPalette::Base);
    plate.setAlpha(215);
    p.fillRect(mark->label, plate);
    p.setPen(kLimitLine);
    p.drawText(mark->label, Qt::AlignCenter, label_text);
  }
  if (!off_axis_note.isEmpty()) {
    p.setPen(kLimitLine);
    p.drawText(plot.adjusted(4, 2, -4, -2), Qt::AlignTop | Qt::AlignRight, off_axis_note);
  }
}

// Under the measured points: each prediction as a hollow marker (its variant's shape), and a thin
// line from it to its point's measurement where that is far enough off to be seen. An exact
// prediction is a ring around its measured point.
void ParetoWidget::paintPredictions(QPainter& p, const Frame& f) const {
  if (predicted_.empty()) return;
  constexpr double kRadius = 6.0;
  QColor line = kPredictedColor;
  line.setAlpha(170);
  for (size_t i : plotted_) {
    const auto& pt = data_->points[i];
    const QPointF to =
        f.map(static_cast<double>(pt.summary.peak_allocated), pt.summary.step_ms_median);
    const QPointF from = predictedIn(f, pt.index);
    if (from.x() < 0) continue;
    const QPointF d = to - from;
    if (std::hypot(d.x(), d.y()) <= kRadius) continue;
    p.setPen(QPen(line, 1.0));
    p.drawLine(from, to);
  }
  for (size_t i : predicted_) {
    const auto& q = data_->predictions[i];
    const QPointF at = f.map(static_cast<double>(q.peak_allocated), q.step_ms());
    const double radius = q.index == hovered_ ? kRadius + 1.5 : kRadius;
    p.setPen(QPen(kPredictedColor, 1.5));
    p.setBrush(Qt::NoBrush);
    draw_marker(p, at, radius, markerShape(q.index));
  }
}

void ParetoWidget::paintPoints(QPainter& p, const Frame& f) const {
  const QPalette& pal = palette();
  const QFontMetrics fm(font());
  const auto at_of = [&](const pf::PointRecord& q) {
    return f.map(static_cast<double>(q.summary.peak_allocated), q.summary.step_ms_median);
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
  // The spread first, under every mark: the median's interval as a whisker.
  for (size_t i : plotted_) {
    const auto& pt = data_->points[i];
    const StepSpread sp = step_spread(pt.summary);
    if (sp.kind != SpreadKind::Interval && sp.kind != SpreadKind::MinMax) continue;
    const auto x = static_cast<double>(pt.summary.peak_allocated);
    const QPointF lo = f.map(x, sp.low), hi = f.map(x, sp.high);
    QColor c = std::find(on_front.begin(), on_front.end(), pt.index) != on_front.end()
                   ? kFrontColor
                   : (&pt == base ? kBaselineColor : kPointColor);
    c.setAlpha(150);
    p.setPen(QPen(c, 1.2));
    p.drawLine(lo, hi);
    p.drawLine(lo - QPointF(3, 0), lo + QPointF(3, 0));
    p.drawLine(hi - QPointF(3, 0), hi + QPointF(3, 0));
  }
  for (size_t i : plotted_) {
    const auto& pt = data_->points[i];
    const QPointF at = at_of(pt);
    const double radius = pt.index == hovered_ ? 6.0 : 4.0;
    p.setPen(QPen(pal.color(QPalette::Base), 1));
    if (&pt == base) {
      p.setBrush(kBaselineColor);
      p.drawRect(QRectF(at.x() - radius - 1, at.y() - radius - 1, 2 * radius + 2, 2 * radius + 2));
      continue;
    }
    const bool front_point =
        std::find(on_front.begin(), on_front.end(), pt.index) != on_front.end();
    p.setBrush(front_point ? kFrontColor : kPointColor);
    draw_marker(p, at, radius, markerShape(pt.index));
  }
  if (has_rec_) {
    for (const auto& tie : rec_.ties) {
      p.setPen(QPen(kChosenColor, 1.5, Qt::DashLine));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(at_of(tie), 8.0, 8.0);
    }
  }
  if (has_rec_ && rec_.chosen) {
    const QPointF at = at_of(*rec_.chosen);
    p.setPen(QPen(kChosenColor, 3));
    p.setBrush(Qt::NoBrush);
    p.drawEllipse(at, 10.0, 10.0);
  }
  for (const auto& l : pointLabelsIn(f)) {
    p.setPen(l.color);
    p.drawText(l.rect, Qt::AlignLeft | Qt::AlignVCenter, l.text);
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
