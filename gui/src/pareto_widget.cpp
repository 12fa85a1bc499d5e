// The sweep view's Pareto chart (pareto_widget.hpp): peak memory against step time, with the
// recommender's front, its choice and the constraint; labels placed clear of every mark.
#include "offtune/gui/pareto_widget.hpp"

#include <QFontMetrics>
#include <QPainter>
#include <QPainterPath>
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

QRect ParetoWidget::tooltipRect(int64_t point_index) const {
  const QPoint at = positionOf(point_index).toPoint();
  return {at - QPoint(8, 8), QSize(17, 17)};
}

void ParetoWidget::setRecommendation(const pf::Recommendation& rec) {
  rec_ = rec;
  has_rec_ = true;
  update();
}

int ParetoWidget::markerShape(int64_t point_index) const {
  auto it = shape_of_.find(point_index);
  return it == shape_of_.end() ? -1 : it->second % kMarkerShapes;
}

void ParetoWidget::rebuild() {
  plotted_.clear();
  predicted_.clear();
  predicted_only_.clear();
  variants_.clear();
  shape_of_.clear();
  if (!data_) return;
  variants_ = sweep_variants(*data_);
  shape_of_ = variant_shapes(*data_);
  const auto& pts = data_->points;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].status != pf::PointStatus::Ok) continue;
    const auto& s = pts[i].summary;
    if (!std::isfinite(s.step_ms_median)) continue;
    const double x = xOf(s);
    if (!metric_value(*data_, pts[i], x_metric_)) continue;  // a figure the store did not record
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
  // They predict peak allocated only: on another axis they have no place.
  const auto& pred = data_->predictions;
  for (size_t i = 0; i < pred.size() && x_metric_ == SweepMetric::PeakAllocated; ++i) {
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

void ParetoWidget::setMemoryMetric(SweepMetric metric) {
  if (!is_memory_metric(metric) || metric == x_metric_) return;
  x_metric_ = metric;
  rebuild();
  update();
}

double ParetoWidget::xOf(const pf::RunSummary& s) const {
  return static_cast<double>(memory_bytes(s, x_metric_));
}

std::optional<int64_t> ParetoWidget::budgetOnAxis() const {
  if (!has_rec_) return std::nullopt;
  const pf::Constraint& c = rec_.constraint;
  if (x_metric_ == SweepMetric::HostHeld) return c.host_budget;
  if (c.memory_budget && memory_metric(c.memory) == x_metric_) return c.memory_budget;
  return std::nullopt;
}

QString ParetoWidget::budgetName() const {
  const auto limit = budgetOnAxis();
  if (!limit) return {};
  return QStringLiteral("%1 budget %2")
      .arg(x_metric_ == SweepMetric::HostHeld ? QStringLiteral("host") : QStringLiteral("device"))
      .arg(qs(pf::format_size(*limit)));
}

QString ParetoWidget::budgetElsewhere() const {
  const pf::Constraint& c = rec_.constraint;
  QStringList parts;
  if (c.memory_budget && memory_metric(c.memory) != x_metric_) {
    parts << QStringLiteral("budget %1 on %2")
                 .arg(qs(pf::format_size(*c.memory_budget)))
                 .arg(QString::fromLatin1(metric_label(memory_metric(c.memory))));
  }
  if (c.host_budget && x_metric_ != SweepMetric::HostHeld) {
    parts << QStringLiteral("host budget %1").arg(qs(pf::format_size(*c.host_budget)));
  }
  if (parts.isEmpty()) return {};
  return parts.join(QStringLiteral(", ")) + QStringLiteral(" (not this axis)");
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

QString ParetoWidget::emptyText() const {
  // Points that ended without a figure are not "yet" to come (before: "No measured points yet"
  // for a sweep whose every point failed).
  if (data_ && std::any_of(data_->points.begin(), data_->points.end(), [](const auto& p) {
        return p.status == pf::PointStatus::Failed || p.status == pf::PointStatus::OutOfMemory;
      })) {
    return QStringLiteral("No point measured ok: %1").arg(caption());
  }
  return QStringLiteral("No measured points yet");
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
  // Predictions are of peak allocated: on another axis they have no place.
  if (x_metric_ != SweepMetric::PeakAllocated && !data_->predictions.empty()) {
    parts << QStringLiteral("%1 predicted (of peak allocated only)").arg(data_->predictions.size());
  }
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
  int legend_bottom = f.caption.bottom() + 1;
  if (!f.legend.empty()) {
    f.legend_at = flow_legend(fm, QPoint(r.left(), f.caption.bottom() + 1), r.left(), r.right(),
                              lh + 2, f.legend, &legend_bottom);
  }
  // Variants by marker shape (the colours say front or not): outlined in a neutral colour, so
  // that no variant's entry looks like the "other points" or "Pareto front" dots. In columns
  // under the marks' entries, within about a fifth of the chart's height: before, one line each,
  // nine variants took half the chart. An entry cut short names itself in its tooltip.
  if (variants_.size() > 1) {
    std::vector<LegendItem> keys;
    for (size_t k = 0; k < variants_.size(); ++k) {
      keys.push_back({shape_sample(static_cast<int>(k)), QString::fromStdString(variants_[k]),
                      kVariantKeyColor});
    }
    const int max_lines = std::max(2, r.height() / 5 / (lh + 2));
    const auto placed = column_legend(fm, legend_bottom, r.left(), r.right(), lh + 2, keys,
                                      max_lines, &legend_bottom);
    f.legend.insert(f.legend.end(), keys.begin(), keys.end());
    f.legend_at.insert(f.legend_at.end(), placed.begin(), placed.end());
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
      return f.map(xOf(p.summary), p.summary.step_ms_median);
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
      default:
        if (const int shape = sample_shape(item.sample); shape >= 0) {
          glyph = QStringLiteral("outlined ") + QLatin1String(kShapeNames[shape]);
        } else {
          glyph = QStringLiteral("sample %1").arg(static_cast<int>(item.sample));
        }
        break;
    }
    out << glyph + QLatin1Char(' ') + item.color.name();
  }
  return out;
}

QString ParetoWidget::legendTooltip(const QString& label) const {
  const Frame f = frame();
  for (size_t i = 0; i < f.legend.size() && i < f.legend_at.size(); ++i) {
    if (f.legend[i].text == label) return placeTooltip(f.legend_at[i].text.center(), nullptr);
  }
  return {};
}

QString ParetoWidget::placeTooltip(QPoint pos, QRect* rect) const {
  // A legend entry: its whole text (an entry may be cut short to its column).
  const Frame f = frame();
  return legend_text_at(f.legend, f.legend_at, pos, rect);
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
    const QPointF at = f.map(xOf(p.summary), p.summary.step_ms_median);
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
               plotted_.empty() ? emptyText() : QStringLiteral("Too small to plot"));
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
  p.drawText(
      QRectF(plot.left(), plot.bottom() + 3 + lh + 2, plot.width(), lh),
      Qt::AlignHCenter | Qt::AlignTop,
      QStringLiteral("%1 (%2)").arg(QString::fromLatin1(metric_label(x_metric_)), f.x_unit_name));
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
  if (const auto limit = budgetOnAxis()) {
    const auto budget = static_cast<double>(*limit);
    const double px = f.map(budget, f.y.lo).x();
    if (px < plot.left() || px > plot.right()) return std::nullopt;
    if (text != nullptr) *text = budgetName();
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
    return f.map(xOf(q.summary), q.summary.step_ms_median);
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
      const auto x = xOf(pt.summary);
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
    if (const auto limit = budgetOnAxis()) {
      const double px = f.map(static_cast<double>(*limit), f.y.lo).x();
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
    return f.map(xOf(q.summary), q.summary.step_ms_median);
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
  if (const auto limit = budgetOnAxis()) {
    const auto budget = static_cast<double>(*limit);
    const double px = f.map(budget, f.y.lo).x();
    const QString name = budgetName();
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
  if (!budgetOnAxis() && has_rec_) {
    // A budget judged on another figure than the axis: no line here, but say where it is.
    if (const QString elsewhere = budgetElsewhere(); !elsewhere.isEmpty()) {
      off_axis_note = elsewhere;
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
    const QPointF to = f.map(xOf(pt.summary), pt.summary.step_ms_median);
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
    return f.map(xOf(q.summary), q.summary.step_ms_median);
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
    const auto x = xOf(pt.summary);
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
