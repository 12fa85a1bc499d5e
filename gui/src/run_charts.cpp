#include "offtune/gui/run_charts.hpp"

#include <QFontMetrics>
#include <QPainter>
#include <QPolygonF>
#include <QStringList>
#include <QVector>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "offtune/profiler/units.hpp"
#include "timeline_detail.hpp"

namespace offtune::gui {

// ---- MinMaxPyramid ----------------------------------------------------------------------------

namespace detail {

void MinMaxPyramid::build(const std::vector<int64_t>& values) {
  min_.clear();
  max_.clear();
  const std::vector<int64_t>* lo = &values;
  const std::vector<int64_t>* hi = &values;
  while (lo->size() > 1) {
    const size_t n = (lo->size() + kFanout - 1) / kFanout;
    std::vector<int64_t> mins(n, std::numeric_limits<int64_t>::max());
    std::vector<int64_t> maxs(n, std::numeric_limits<int64_t>::min());
    for (size_t i = 0; i < lo->size(); ++i) {
      mins[i / kFanout] = std::min(mins[i / kFanout], (*lo)[i]);
      maxs[i / kFanout] = std::max(maxs[i / kFanout], (*hi)[i]);
    }
    min_.push_back(std::move(mins));
    max_.push_back(std::move(maxs));
    lo = &min_.back();
    hi = &max_.back();
  }
}

std::pair<int64_t, int64_t> MinMaxPyramid::query(const std::vector<int64_t>& values, size_t first,
                                                 size_t last) const {
  int64_t mn = std::numeric_limits<int64_t>::max();
  int64_t mx = std::numeric_limits<int64_t>::min();
  const int64_t* lo = values.data();
  const int64_t* hi = values.data();
  size_t level = 0;  // the next level up
  // Take the ragged ends at each level, then climb with the aligned middle.
  while (first < last) {
    while (first < last && first % kFanout != 0) {
      mn = std::min(mn, lo[first]);
      mx = std::max(mx, hi[first]);
      ++first;
    }
    while (first < last && last % kFanout != 0) {
      --last;
      mn = std::min(mn, lo[last]);
      mx = std::max(mx, hi[last]);
    }
    if (first >= last) break;
    if (level >= min_.size()) {
      for (; first < last; ++first) {
        mn = std::min(mn, lo[first]);
        mx = std::max(mx, hi[first]);
      }
      break;
    }
    first /= kFanout;
    last /= kFanout;
    lo = min_[level].data();
    hi = max_[level].data();
    ++level;
  }
  return {mn, mx};
}

}  // namespace detail

// ---- drawing helpers --------------------------------------------------------------------------

namespace {

// The timeline's palette (timeline_detail.hpp).
using detail::kBackground;
using detail::kGrid;
using detail::kGutterBackground;
using detail::kText;
const QColor kPeak(0xb0, 0x20, 0x20);

// Plot margins inside the chart's rect: room for the top y label and the legend.
constexpr int kTopMargin = 16;
constexpr int kBottomMargin = 4;

QRect chart_plot_rect(const QRect& area) {
  const QRect columns = time_plot_rect(area);
  return QRect(columns.left(), area.top() + kTopMargin, columns.width(),
               std::max(1, area.height() - kTopMargin - kBottomMargin));
}

struct ByteTicks {
  double step = 1.0;
  profiler::SizeUnit unit;
};

// A 1-2-5 step (in the largest binary unit not above the maximum) giving at most `max_ticks`.
ByteTicks byte_ticks(double max_bytes, int max_ticks) {
  ByteTicks t;
  t.unit = profiler::size_unit(max_bytes);
  const double raw = std::max(max_bytes / t.unit.bytes / std::max(1, max_ticks), 1e-9);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  double m = 10.0;
  for (double c : {1.0, 2.0, 5.0}) {
    if (raw <= c * decade * (1.0 + 1e-9)) {
      m = c;
      break;
    }
  }
  t.step = m * decade * t.unit.bytes;
  return t;
}

double y_of(double value, const QRect& plot, double y_max) {
  return plot.bottom() + 1.0 - value / y_max * plot.height();
}

}  // namespace

// ---- RunChart ---------------------------------------------------------------------------------

RunChart::RunChart(Mode mode, QWidget* parent) : TimePlotWidget(parent), mode_(mode) {}

void RunChart::setRun(RunDataPtr run) {
  run_ = std::move(run);
  series_.clear();
  origin_ = 0;
  y_max_ = 0;
  peaks_.clear();
  if (run_) {
    origin_ = run_time_bounds(*run_).first;
    const auto& samples = run_->occupancy;
    // Samples come by time; sorting a permutation costs nothing when they do and keeps the step
    // lines right when they do not.
    std::vector<uint32_t> order(samples.size());
    std::iota(order.begin(), order.end(), 0u);
    if (!std::is_sorted(samples.begin(), samples.end(),
                        [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; })) {
      std::stable_sort(order.begin(), order.end(), [&samples](uint32_t a, uint32_t b) {
        return samples[a].time_ns < samples[b].time_ns;
      });
    }
    const auto add = [this, &samples, &order](QString label, QColor colour, auto value_of,
                                              bool skip_negative) {
      detail::ChartSeries s;
      s.label = std::move(label);
      s.colour = colour;
      s.time.reserve(samples.size());
      s.value.reserve(samples.size());
      for (uint32_t i : order) {
        const int64_t v = value_of(samples[i]);
        if (skip_negative && v < 0) continue;
        s.time.push_back(samples[i].time_ns);
        s.value.push_back(v);
        s.sample.push_back(i);
        y_max_ = std::max(y_max_, v);
      }
      if (s.time.empty()) return;
      s.pyramid.build(s.value);
      series_.push_back(std::move(s));
    };
    // A dashed line at a run's peak, beside the curve of its series only (alone it would say
    // nothing over time), in its colour.
    const auto peak_of = [this](const QString& series, QString label, int64_t bytes) {
      for (const auto& s : series_) {
        if (s.label != series || bytes <= 0) continue;
        peaks_.push_back({std::move(label), s.colour, bytes});
        y_max_ = std::max(y_max_, bytes);
        return;
      }
    };
    if (mode_ == Occupancy) {
      add(
          QStringLiteral("forward stash"), QColor(0x4c, 0x78, 0xa8),
          [](const profiler::OccupancySample& o) { return o.fwd_bytes; }, false);
      add(
          QStringLiteral("backward stash"), QColor(0xf5, 0x85, 0x18),
          [](const profiler::OccupancySample& o) { return o.bwd_bytes; }, false);
    } else if (mode_ == DeviceMemory) {
      // Reserved first, so that allocated is drawn over it: the gap between them is what the
      // caching allocator holds beyond live tensors.
      // Colours apart from every timeline kind's (timeline_kind_colour), also for colour-blind
      // eyes (test_gui_timeline checks it): allocated purple, reserved Tol's pink.
      const QColor reserved(0xff, 0xaa, 0xbb), allocated(0x7b, 0x4f, 0xa0);
      add(
          QStringLiteral("device reserved"), reserved,
          [](const profiler::OccupancySample& o) { return o.reserved_bytes; }, true);
      add(
          QStringLiteral("device allocated"), allocated,
          [](const profiler::OccupancySample& o) { return o.device_bytes; }, true);
      peak_of(QStringLiteral("device allocated"), QStringLiteral("peak allocated"),
              run_->run.summary.peak_allocated);
      peak_of(QStringLiteral("device reserved"), QStringLiteral("peak reserved"),
              run_->run.summary.peak_reserved);
    } else {
      // Tol's pear and a blue, apart from the timeline's kinds as above.
      const QColor pool(0xbb, 0xcc, 0x33), copies(0x66, 0x77, 0xdd);
      add(
          QStringLiteral("pinned pool"), pool,
          [](const profiler::OccupancySample& o) { return o.host_pool_bytes; }, true);
      add(
          QStringLiteral("host copies"), copies,
          [](const profiler::OccupancySample& o) { return o.host_bytes; }, true);
      peak_of(QStringLiteral("pinned pool"), QStringLiteral("pinned pool at most"),
              run_->run.summary.pinned_bytes);
    }
  }
  update();
}

bool RunChart::hasData() const { return !series_.empty(); }

QSize RunChart::sizeHint() const { return QSize(800, 130); }
QSize RunChart::minimumSizeHint() const { return QSize(kTimeGutter + 100, 60); }

void RunChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  if (!axis()) {
    p.fillRect(rect(), kBackground);
    p.setPen(kText);
    p.drawText(rect(), Qt::AlignCenter, QStringLiteral("no time axis"));
    last_stats_ = RenderStats{};
    return;
  }
  paintChart(p, rect(), axis()->viewBegin(), axis()->viewEnd(), &last_stats_);
}

void RunChart::paintChart(QPainter& painter, const QRect& area, int64_t view_begin,
                          int64_t view_end, RenderStats* out) const {
  RenderStats stats;
  painter.save();
  painter.setClipRect(area, Qt::IntersectClip);
  painter.setRenderHint(QPainter::Antialiasing, false);
  painter.fillRect(area, kBackground);
  painter.fillRect(QRect(area.left(), area.top(), kTimeGutter, area.height()), kGutterBackground);
  const QRect plot = chart_plot_rect(area);
  const QFontMetrics fm(painter.font());
  stats.primitives += 2;

  if (!hasData()) {
    painter.setPen(kText);
    QString text = QStringLiteral("no run");
    if (run_) {
      text = mode_ == Occupancy      ? QStringLiteral("no occupancy samples in this run")
             : mode_ == DeviceMemory ? QStringLiteral("no device-memory samples in this run")
                                     : QStringLiteral(
                                           "no host-memory samples in this run (recorded before "
                                           "offtune kept them, or nothing offloaded)");
    }
    painter.drawText(plot, Qt::AlignCenter, text);
    painter.restore();
    if (out) *out = stats;
    return;
  }

  view_end = std::max(view_end, view_begin + 1);
  // 8% headroom so that the maximum does not sit on the frame.
  const double y_max = std::max(1.0, static_cast<double>(y_max_) * 1.08);
  const ByteTicks ticks = byte_ticks(y_max, std::max(1, plot.height() / 22));
  painter.setPen(kText);
  for (double v = 0.0; v <= y_max; v += ticks.step) {
    const int y = static_cast<int>(std::lround(y_of(v, plot, y_max)));
    painter.setPen(kGrid);
    painter.drawLine(plot.left(), y, plot.right(), y);
    painter.setPen(kText);
    const QString label =
        QStringLiteral("%1 %2")
            .arg(QString::number(v / ticks.unit.bytes, 'g', 4))
            .arg(QString::fromUtf8(v == 0.0 ? std::string_view("B") : ticks.unit.name));
    painter.drawText(QRect(area.left(), y - fm.height() / 2, kTimeGutter - 6, fm.height()),
                     Qt::AlignRight | Qt::AlignVCenter, label);
    ++stats.primitives;
  }

  painter.save();
  painter.setClipRect(QRect(plot.left(), area.top(), plot.width(), area.height()),
                      Qt::IntersectClip);
  for (const auto& s : series_) drawSeries(painter, s, plot, view_begin, view_end, y_max, stats);
  // The peaks' labels on their lines, the first at the right end and the second at the left, so
  // that peaks a few pixels apart do not write over each other; each above its line, or below it
  // where above would run into the legend's row at the top.
  for (size_t k = 0; k < peaks_.size(); ++k) {
    const auto& peak = peaks_[k];
    const int y = static_cast<int>(std::lround(y_of(static_cast<double>(peak.bytes), plot, y_max)));
    painter.setPen(QPen(kPeak, 1, Qt::DashLine));
    painter.drawLine(plot.left(), y, plot.right(), y);
    ++stats.primitives;
    int top = y - fm.height() - 1;
    if (top < area.top() + kTopMargin) top = y + 1;
    painter.setPen(kPeak);
    const QString label =
        QStringLiteral("%1 %2").arg(peak.label, format_bytes(static_cast<double>(peak.bytes)));
    painter.drawText(QRect(plot.left() + 4, top, plot.width() - 8, fm.height()),
                     (k % 2 == 0 ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignBottom, label);
  }
  painter.restore();

  // Legend, top left of the plot.
  int x = plot.left() + 4;
  for (const auto& s : series_) {
    painter.fillRect(QRect(x, area.top() + 4, 10, 8), s.colour);
    painter.setPen(kText);
    const int w = fm.horizontalAdvance(s.label);
    painter.drawText(QRect(x + 14, area.top(), w + 4, kTopMargin), Qt::AlignLeft | Qt::AlignVCenter,
                     s.label);
    x += 14 + w + 14;
    ++stats.primitives;
  }
  painter.restore();
  if (out) *out = stats;
}

void RunChart::drawSeries(QPainter& painter, const detail::ChartSeries& s, const QRect& plot,
                          int64_t view_begin, int64_t view_end, double y_max,
                          RenderStats& stats) const {
  const auto& t = s.time;
  const size_t n = t.size();
  const double ns_per_px = static_cast<double>(view_end - view_begin) / plot.width();
  const auto x_of = [&](int64_t time) {
    const double x = plot.left() + static_cast<double>(time - view_begin) / ns_per_px;
    return std::clamp(x, plot.left() - 2.0, plot.right() + 2.0);
  };
  // The sample holding at the view's start (or the first one), and those up to its end.
  size_t first = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), view_begin) - t.begin());
  first = first > 0 ? first - 1 : 0;
  const size_t last =
      static_cast<size_t>(std::upper_bound(t.begin(), t.end(), view_end) - t.begin());
  if (first >= last) return;
  // The line stops at the last sample, or runs to the right edge when more follow off screen.
  const double x_stop = last < n ? plot.right() + 1.0 : x_of(t[n - 1]);
  const double base = plot.bottom() + 1.0;
  QColor fill = s.colour;
  fill.setAlpha(70);
  QPolygonF area;
  const double x_start = std::max(x_of(t[first]), static_cast<double>(plot.left()));

  if (last - first <= static_cast<size_t>(plot.width())) {
    // Few enough: the exact step line.
    QPolygonF line;
    line.reserve(static_cast<qsizetype>(2 * (last - first) + 2));
    line << QPointF(x_start, y_of(static_cast<double>(s.value[first]), plot, y_max));
    for (size_t i = first + 1; i < last; ++i) {
      const double x = x_of(t[i]);
      line << QPointF(x, y_of(static_cast<double>(s.value[i - 1]), plot, y_max))
           << QPointF(x, y_of(static_cast<double>(s.value[i]), plot, y_max));
      ++stats.visited;
    }
    line << QPointF(std::max(x_stop, line.back().x()), line.back().y());
    area = line;
    area << QPointF(area.back().x(), base) << QPointF(x_start, base);
    painter.setPen(Qt::NoPen);
    painter.setBrush(fill);
    painter.drawPolygon(area);
    painter.setPen(QPen(s.colour, 1));
    painter.setBrush(Qt::NoBrush);
    painter.drawPolyline(line);
    stats.primitives += 2;
    ++stats.detail_sets;
    return;
  }

  // Many per pixel: per column, the min and max of the samples holding in it; the area follows
  // the max so that a one-sample spike is never lost.
  ++stats.merged_sets;
  const int c0 = static_cast<int>(std::floor(x_start));
  const int c1 = std::min(plot.right(), static_cast<int>(std::ceil(x_stop)) - 1);
  QVector<QLineF> ranges;
  ranges.reserve(c1 - c0 + 1);
  area.reserve(2 * (c1 - c0 + 1) + 2);
  size_t lo = first;
  for (int c = c0; c <= c1; ++c) {
    const int64_t t1 =
        view_begin + static_cast<int64_t>(std::ceil((c + 1 - plot.left()) * ns_per_px));
    // Samples holding in [column start, t1): the one holding at its start and those after.
    const size_t hi = std::max(
        lo + 1, static_cast<size_t>(
                    std::lower_bound(t.begin() + static_cast<std::ptrdiff_t>(lo), t.end(), t1) -
                    t.begin()));
    const auto [mn, mx] = s.pyramid.query(s.value, lo, std::min(hi, n));
    const double y_hi = y_of(static_cast<double>(mx), plot, y_max);
    const double y_lo = y_of(static_cast<double>(mn), plot, y_max);
    area << QPointF(c, y_hi) << QPointF(c + 1, y_hi);
    ranges << QLineF(c + 0.5, y_hi, c + 0.5, std::max(y_hi, y_lo));
    ++stats.visited;
    lo = std::min(n - 1, hi - 1);  // the last sample of this column holds at the next one's start
  }
  if (area.isEmpty()) return;
  area << QPointF(area.back().x(), base) << QPointF(area.front().x(), base);
  painter.setPen(Qt::NoPen);
  painter.setBrush(fill);
  painter.drawPolygon(area);
  painter.setPen(QPen(s.colour, 1));
  painter.setBrush(Qt::NoBrush);
  painter.drawLines(ranges);
  stats.primitives += 1 + static_cast<int>(ranges.size());
}

QString RunChart::toolTipAt(const QPoint& pos) const {
  if (!axis() || !hasData()) return {};
  const QRect plot = chart_plot_rect(rect());
  if (pos.x() < plot.left() || pos.x() > plot.right()) return {};
  const double ns_per_px = static_cast<double>(axis()->viewSpan()) / plot.width();
  const int64_t t = axis()->viewBegin() +
                    static_cast<int64_t>(std::llround((pos.x() + 0.5 - plot.left()) * ns_per_px));
  const int64_t t_end = t + static_cast<int64_t>(std::ceil(ns_per_px));
  QStringList lines;
  lines << QStringLiteral("+%1").arg(format_duration_ns(static_cast<double>(t - origin_)));
  bool any = false;
  int64_t allocated = -1, reserved = -1;  // DeviceMemory: the two figures at the pointer
  for (const auto& s : series_) {
    const auto it = std::upper_bound(s.time.begin(), s.time.end(), t);
    if (it == s.time.begin()) continue;
    const size_t i = static_cast<size_t>(it - s.time.begin()) - 1;
    any = true;
    const auto& sample = run_->occupancy[s.sample[i]];
    QString line;
    if (mode_ == Occupancy) {
      const bool fwd = &s == &series_.front();
      line = QStringLiteral("%1: %2 tensors, %3")
                 .arg(s.label)
                 .arg(fwd ? sample.fwd_count : sample.bwd_count)
                 .arg(format_bytes(static_cast<double>(s.value[i])));
    } else {
      line =
          QStringLiteral("%1: %2").arg(s.label).arg(format_bytes(static_cast<double>(s.value[i])));
      if (s.label == QStringLiteral("device allocated")) allocated = s.value[i];
      if (s.label == QStringLiteral("device reserved")) reserved = s.value[i];
    }
    // Zoomed out, one pixel may hide a spike: say what the column's maximum is.
    const size_t next =
        static_cast<size_t>(std::lower_bound(s.time.begin(), s.time.end(), t_end) - s.time.begin());
    if (next > i + 1) {
      const auto [mn, mx] = s.pyramid.query(s.value, i, next);
      line += QStringLiteral(" (max %1 in this pixel, %2 samples)")
                  .arg(format_bytes(static_cast<double>(mx)))
                  .arg(next - i);
      static_cast<void>(mn);
    }
    lines << line;
  }
  if (!any) return {};
  if (allocated >= 0 && reserved > allocated) {
    lines << QStringLiteral(
                 "reserved beyond live tensors: %1 (blocks the allocator keeps cached, "
                 "split, or held for another stream)")
                 .arg(format_bytes(static_cast<double>(reserved - allocated)));
  }
  for (const auto& peak : peaks_) {
    lines << QStringLiteral("%1: %2").arg(peak.label,
                                          format_bytes(static_cast<double>(peak.bytes)));
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace offtune::gui
