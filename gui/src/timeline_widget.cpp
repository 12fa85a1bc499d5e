// The timeline's widgets (timeline.hpp): the time axis shared by the run view's plots, the plot
// that pans and zooms it, and the timeline widget with its legend.
#include "offtune/gui/timeline.hpp"

#include <QEvent>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "offtune/gui/timeline_range.hpp"
#include "offtune/profiler/units.hpp"
#include "timeline_detail.hpp"
namespace offtune::gui {

using detail::to_ns;

// ---- TimeAxis ---------------------------------------------------------------------------------

TimeAxis::TimeAxis(QObject* parent) : QObject(parent) {}

void TimeAxis::setBounds(int64_t begin, int64_t end) {
  if (end < begin) std::swap(begin, end);
  if (end == begin) end = begin + 1;
  bounds_begin_ = begin;
  bounds_end_ = end;
  view_begin_ = begin;
  view_end_ = end;
  // Always: a new run may have the same range as the last one, and its views must repaint.
  Q_EMIT viewChanged();
}

int64_t TimeAxis::minSpan() const { return std::min(kMinSpanNs, bounds_end_ - bounds_begin_); }

void TimeAxis::setView(int64_t begin, int64_t end) {
  if (end < begin) std::swap(begin, end);
  const int64_t span = std::clamp(end - begin, minSpan(), bounds_end_ - bounds_begin_);
  begin = std::clamp(begin, bounds_begin_, bounds_end_ - span);
  end = begin + span;
  if (begin == view_begin_ && end == view_end_) return;
  view_begin_ = begin;
  view_end_ = end;
  Q_EMIT viewChanged();
}

void TimeAxis::zoomAt(double anchor_fraction, double factor) {
  if (!(factor > 0.0) || !std::isfinite(factor)) return;
  const double f = std::clamp(anchor_fraction, 0.0, 1.0);
  const double span = static_cast<double>(viewSpan());
  const double new_span = std::clamp(span / factor, static_cast<double>(minSpan()),
                                     static_cast<double>(bounds_end_ - bounds_begin_));
  // Offsets relative to the current begin, in integers: the run's clock can be far from zero.
  const int64_t begin = view_begin_ + to_ns(f * span - f * new_span);
  setView(begin, begin + to_ns(new_span));
}

void TimeAxis::panBy(double fraction_of_view) {
  const int64_t shift = to_ns(fraction_of_view * static_cast<double>(viewSpan()));
  setView(view_begin_ + shift, view_end_ + shift);
}

void TimeAxis::resetView() { setView(bounds_begin_, bounds_end_); }

double TimeAxis::toX(int64_t t, double width) const {
  return static_cast<double>(t - view_begin_) * width / static_cast<double>(viewSpan());
}

int64_t TimeAxis::toTime(double x, double width) const {
  if (!(width > 0.0)) return view_begin_;
  return view_begin_ + to_ns(x * static_cast<double>(viewSpan()) / width);
}

// ---- TimePlotWidget ---------------------------------------------------------------------------

TimePlotWidget::TimePlotWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);  // every paint fills the whole rect
}

void TimePlotWidget::setAxis(TimeAxis* axis) {
  if (axis_ == axis) return;
  disconnect(axis_connection_);
  axis_ = axis;
  if (axis) {
    axis_connection_ = connect(axis, &TimeAxis::viewChanged, this, [this] { update(); });
  }
  update();
}

bool TimePlotWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = toolTipAt(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
      e->ignore();
    } else {
      QToolTip::showText(help->globalPos(), text, this);
    }
    return true;
  }
  return QWidget::event(e);
}

void TimePlotWidget::wheelEvent(QWheelEvent* e) {
  if (!axis_) return QWidget::wheelEvent(e);
  const QPoint delta = e->angleDelta();
  const QRect plot = plotRect();
  // One notch (120) zooms by 1.25; horizontal wheels and Shift+wheel pan a tenth per notch.
  const bool pan = delta.x() != 0 || (e->modifiers() & Qt::ShiftModifier);
  if (pan) {
    const int d = delta.x() != 0 ? delta.x() : delta.y();
    axis_->panBy(-0.1 * d / 120.0);
  } else if (delta.y() != 0) {
    const double anchor = (e->position().x() - plot.left()) / plot.width();
    axis_->zoomAt(anchor, std::pow(1.25, delta.y() / 120.0));
  }
  e->accept();
}

void TimePlotWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton && axis_) {
    dragging_ = true;
    drag_x_ = e->position().x();
    drag_begin_ = axis_->viewBegin();
    drag_end_ = axis_->viewEnd();
    setCursor(Qt::ClosedHandCursor);
    e->accept();
    return;
  }
  QWidget::mousePressEvent(e);
}

void TimePlotWidget::mouseMoveEvent(QMouseEvent* e) {
  if (dragging_ && axis_) {
    // From the view at the press, not incrementally: rounding does not accumulate over a drag.
    const double dx = e->position().x() - drag_x_;
    const double span = static_cast<double>(drag_end_ - drag_begin_);
    const int64_t shift = to_ns(-dx * span / plotRect().width());
    axis_->setView(drag_begin_ + shift, drag_end_ + shift);
    e->accept();
    return;
  }
  QWidget::mouseMoveEvent(e);
}

void TimePlotWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton && dragging_) {
    dragging_ = false;
    unsetCursor();
    e->accept();
    return;
  }
  QWidget::mouseReleaseEvent(e);
}

void TimePlotWidget::mouseDoubleClickEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton && axis_) {
    axis_->resetView();
    e->accept();
    return;
  }
  QWidget::mouseDoubleClickEvent(e);
}

void TimePlotWidget::keyPressEvent(QKeyEvent* e) {
  if (!axis_) return QWidget::keyPressEvent(e);
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
    case Qt::Key_Up:
      axis_->zoomAt(0.5, 1.5);
      break;
    case Qt::Key_Minus:
    case Qt::Key_Down:
      axis_->zoomAt(0.5, 1.0 / 1.5);
      break;
    case Qt::Key_Left:
      axis_->panBy(-0.1);
      break;
    case Qt::Key_Right:
      axis_->panBy(0.1);
      break;
    case Qt::Key_Home:
      axis_->resetView();
      break;
    default:
      return QWidget::keyPressEvent(e);
  }
  e->accept();
}

// ---- TimelineWidget ---------------------------------------------------------------------------

TimelineWidget::TimelineWidget(QWidget* parent) : TimePlotWidget(parent) {}

void TimelineWidget::setIndex(std::shared_ptr<const TimelineIndex> index) {
  index_ = std::move(index);
  setSelection(std::nullopt);  // a stretch of another run
  setFollowedTensor(-1);
  updateGeometry();
  update();
}

void TimelineWidget::changeEvent(QEvent* e) {
  if (e->type() == QEvent::FontChange) {
    legend_cache_ = QPixmap();
    updateGeometry();
  }
  TimePlotWidget::changeEvent(e);
}

int TimelineWidget::legendHeight() const {
  return timeline_legend_height(fontMetrics(), std::max(width(), kTimeGutter + 100));
}

QRect TimelineWidget::lanesRect() const {
  return QRect(0, 0, width(), std::max(0, height() - legendHeight()));
}

QRect TimelineWidget::legendRect() const {
  const int h = std::min(height(), legendHeight());
  return QRect(0, height() - h, width(), h);
}

QRect TimelineWidget::laneRect(size_t lane) const {
  if (!index_) return {};
  return timeline_lane_rect(lanesRect(), *index_, lane);
}

// Natural: lanes half again as tall as the minimum readable height, so that the run view gives the
// lanes about half its height and the charts the rest. Minimum: every lane at its minimum height.
QSize TimelineWidget::sizeHint() const {
  const int lanes = index_ ? static_cast<int>(index_->lanes.size()) : 6;
  return QSize(800, kTimelineRulerHeight + lanes * (3 * kTimelineLaneHeight / 2) + 1 +
                        timeline_legend_height(fontMetrics(), 800));
}
QSize TimelineWidget::minimumSizeHint() const {
  const int lanes = index_ ? static_cast<int>(index_->lanes.size()) : 6;
  return QSize(kTimeGutter + 100,
               kTimelineRulerHeight + lanes * kTimelineMinLaneHeight + 1 + legendHeight());
}

QString TimelineWidget::toolTipAt(const QPoint& pos) const {
  if (!index_ || !axis()) return {};
  return timeline_tooltip(*index_, lanesRect(), axis()->viewBegin(), axis()->viewEnd(), pos);
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (!index_ || !axis()) {
    p.fillRect(rect(), palette().window());
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(rect(), Qt::AlignCenter,
               index_ ? QStringLiteral("no time axis") : QStringLiteral("no run"));
    last_stats_ = RenderStats{};
    last_stats_.primitives = 1;
    return;
  }
  render_timeline(p, lanesRect(), *index_, axis()->viewBegin(), axis()->viewEnd(), &last_stats_);
  if (followed_ >= 0) paintFollowed(p);
  if (selection_) {
    // The selected stretch: a translucent band with solid edges, over the lanes.
    const QRect plot = time_plot_rect(lanesRect());
    const double x0 = plot.left() + axis()->toX(selection_->first, plot.width());
    const double x1 = plot.left() + axis()->toX(selection_->second, plot.width());
    const double lo = std::clamp(std::min(x0, x1), double(plot.left()), double(plot.right() + 1));
    const double hi = std::clamp(std::max(x0, x1), double(plot.left()), double(plot.right() + 1));
    const QRectF band(lo, plot.top(), std::max(1.0, hi - lo), plot.height());
    p.fillRect(band, QColor(40, 90, 200, 45));
    p.setPen(QPen(QColor(40, 90, 200), 1));
    p.drawLine(QPointF(lo, plot.top()), QPointF(lo, plot.bottom()));
    p.drawLine(QPointF(hi, plot.top()), QPointF(hi, plot.bottom()));
  }
  const QRect legend = legendRect();
  if (legend.isEmpty()) return;
  const qreal ratio = devicePixelRatioF();
  const QSize pixels = legend.size() * ratio;
  if (legend_cache_.size() != pixels) {
    legend_cache_ = QPixmap(pixels);
    legend_cache_.setDevicePixelRatio(ratio);
    QPainter lp(&legend_cache_);
    lp.setFont(font());
    render_timeline_legend(lp, QRect(QPoint(0, 0), legend.size()));
  }
  p.drawPixmap(legend.topLeft(), legend_cache_);
}

int64_t TimelineWidget::timeAtX(double x) const {
  const QRect plot = time_plot_rect(lanesRect());
  const double clamped = std::clamp(x - plot.left(), 0.0, static_cast<double>(plot.width()));
  return axis()->toTime(clamped, plot.width());
}

void TimelineWidget::setSelection(std::optional<std::pair<int64_t, int64_t>> range) {
  if (range && range->second < range->first) std::swap(range->first, range->second);
  if (range == selection_) return;
  selection_ = range;
  update();
  Q_EMIT selectionChanged();
}

void TimelineWidget::setFollowedTensor(int64_t tensor) {
  if (tensor < 0) tensor = -1;
  if (tensor == followed_) return;
  followed_ = tensor;
  followed_events_ = index_ ? tensor_events(*index_, tensor) : std::vector<TensorEvent>{};
  update();
  Q_EMIT followedTensorChanged();
}

void TimelineWidget::paintFollowed(QPainter& p) const {
  // Each of the tensor's events in view outlined in its lane; instants as a tick across the lane.
  const QRect area = lanesRect();
  const QRect plot = time_plot_rect(area);
  p.save();
  p.setClipRect(plot);
  p.setPen(QPen(QColor(0, 0, 0), 2));
  p.setBrush(Qt::NoBrush);
  for (const TensorEvent& ev : followed_events_) {
    if (ev.end_ns < axis()->viewBegin() || ev.start_ns > axis()->viewEnd()) continue;
    const QRect row = timeline_lane_rect(area, *index_, ev.lane);
    const double x0 = plot.left() + axis()->toX(ev.start_ns, plot.width());
    const double x1 = plot.left() + axis()->toX(ev.end_ns, plot.width());
    if (ev.end_ns > ev.start_ns) {
      p.drawRect(QRectF(x0 - 1, row.top() + 1, std::max(3.0, x1 - x0 + 2), row.height() - 3));
    } else {
      p.drawLine(QPointF(x0, row.top() + 1), QPointF(x0, row.bottom() - 1));
    }
  }
  p.restore();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  press_at_ = e->position().toPoint();
  if (e->button() == Qt::LeftButton && index_ && axis() && (e->modifiers() & Qt::ShiftModifier)) {
    selecting_ = true;
    select_anchor_ = timeAtX(e->position().x());
    setSelection(std::pair{select_anchor_, select_anchor_});
    e->accept();
    return;
  }
  // A plain click (or the start of a pan) clears a selection.
  if (e->button() == Qt::LeftButton) setSelection(std::nullopt);
  TimePlotWidget::mousePressEvent(e);
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  if (selecting_) {
    setSelection(std::pair{select_anchor_, timeAtX(e->position().x())});
    e->accept();
    return;
  }
  TimePlotWidget::mouseMoveEvent(e);
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (selecting_ && e->button() == Qt::LeftButton) {
    selecting_ = false;
    const auto range = std::pair{select_anchor_, timeAtX(e->position().x())};
    // A shift+click without a drag selects nothing.
    setSelection(range.first == range.second ? std::nullopt
                                             : std::optional<std::pair<int64_t, int64_t>>(range));
    e->accept();
    return;
  }
  // A click (no drag): follow the tensor of the event under it, or stop following.
  if (e->button() == Qt::LeftButton && index_ && axis() &&
      (e->position().toPoint() - press_at_).manhattanLength() <= 3) {
    setFollowedTensor(timeline_tensor_at(*index_, lanesRect(), axis()->viewBegin(),
                                         axis()->viewEnd(), e->position().toPoint()));
  }
  TimePlotWidget::mouseReleaseEvent(e);
}

}  // namespace offtune::gui
