// What the sweep charts share (sweep_chart.hpp): a point's tooltip, and the SweepChart base
// (the snapshot, hover, selection, clicks).
#include "offtune/gui/sweep_chart.hpp"

#include <QEvent>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
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

#include "chart_kit.hpp"
#include "offtune/gui/predicted.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::gui {

namespace pf = offtune::profiler;

using namespace detail;  // the chart kit

namespace {

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

}  // namespace

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
  if (is_baseline(c)) {
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
    // The other knobs a user sets, in words, where they differ from their defaults (the grid's
    // pair is the line above, the engine variants the one before it).
    static const pf::EngineConfig defaults;
    QStringList knobs;
    for (const Knob& k : knob_table()) {
      if (k.flag.empty() || k.always_axis || k.variant || k.get(c) == k.get(defaults)) continue;
      knobs << qs(k.words(c));
    }
    if (!knobs.isEmpty()) lines << knobs.join(QStringLiteral(" \u00b7 ")).toHtmlEscaped();
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
    // Every memory figure, each named as what it is: the device's, then the host's.
    const auto& s = point.summary;
    const auto bytes = [&](SweepMetric m) {
      return qs(format_metric(m, static_cast<double>(memory_bytes(s, m)), dec.of(m)));
    };
    lines << QStringLiteral("peak allocated %1 (%2)")
                 .arg(bytes(SweepMetric::PeakAllocated))
                 .arg(qs(format_bytes_exact(s.peak_allocated)));
    if (s.peak_reserved > 0) {  // 0: not recorded
      QString device = QStringLiteral("peak reserved %1").arg(bytes(SweepMetric::PeakReserved));
      if (s.device_outside > 0) {
        device += QStringLiteral(" \u00b7 device total %1").arg(bytes(SweepMetric::PeakTotal));
      }
      lines << device;
    }
    QString host = QStringLiteral("host: pinned pool %1, copies at peak %2")
                       .arg(qs(pf::format_size(s.pinned_bytes)))
                       .arg(qs(pf::format_size(s.host_bytes_peak)));
    if (s.host_rss_peak > 0) {
      host += QStringLiteral(", process peak %1").arg(qs(pf::format_size(s.host_rss_peak)));
    }
    lines << host;
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
            .arg(qs(format_metric(SweepMetric::PeakAllocated,
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

QSize SweepChart::sizeHint() const { return {520, 400}; }
QSize SweepChart::minimumSizeHint() const { return {240, 180}; }

void SweepChart::setData(SweepDataPtr data) {
  data_ = std::move(data);
  rebuild();
  update();
}

void SweepChart::setSelected(int64_t point_index) { repaintOnChange(selected_, point_index); }

const pf::PointRecord* SweepChart::point(int64_t point_index) const {
  return find_point(data_.get(), point_index);
}

void SweepChart::setTies(std::vector<int64_t> ties) { repaintOnChange(ties_, std::move(ties)); }

bool SweepChart::isTie(int64_t point_index) const {
  return std::find(ties_.begin(), ties_.end(), point_index) != ties_.end();
}

void SweepChart::setHovered(int64_t point_index) {
  if (!repaintOnChange(hovered_, point_index)) return;
  const auto* pt = point(point_index);
  if (pt != nullptr && pt->run.valid()) {
    setCursor(Qt::PointingHandCursor);
  } else {
    unsetCursor();
  }
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

}  // namespace offtune::gui
