// The sweep view's two charts, painted by hand with QPainter. HeatmapWidget colours one metric over
// the grid of min_offload_size (rows, ascending upwards) x max_fwd_stash_size (columns, ascending
// rightwards), with failed, out-of-memory and pending points marked instead of coloured and the
// no-offload baseline shown apart. ParetoWidget plots peak device memory against step time for the
// measured points, with the recommender's front, its choice and the constraint it chose under.
// Both show the same tooltip for a point, report the point under the mouse and ask for its run on a
// click. Every point index here is PointRecord::index (the grid position), never a vector position.
#pragma once

#include <QColor>
#include <QPointF>
#include <QRect>
#include <QRectF>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/profiler/recommend.hpp"

class QPainter;

namespace offtune::gui {

// Rich text with the point's figures: index, status, config, run, step time (median), slowdown,
// peak device memory, hidden copy %, and the error of a failed point.
QString point_tooltip(const SweepData& sweep, const profiler::PointRecord& point);

// A perceptually ordered sequential colour map, from dark purple (t = 0) to light yellow (t = 1);
// t is clamped to [0, 1]. The heatmap puts the best value at 1.
QColor sequential_color(double t);

// What the two charts share: the snapshot, the point hovered, selected and pressed, and the mouse.
// Hovering reports the point under the mouse, a click (press and release on one point) asks for
// the run of a point that has one, and a tooltip shows the point's figures.
class SweepChart : public QWidget {
  Q_OBJECT

 public:
  const SweepDataPtr& data() const { return data_; }
  // The point drawn at `pos`, or -1.
  virtual int64_t pointAt(QPoint pos) const = 0;

 public Q_SLOTS:
  // The point to mark as selected (e.g. hovered in the other chart), -1 for none.
  void setSelected(int64_t point_index);

 Q_SIGNALS:
  void pointHovered(qint64 point_index);    // -1 when the mouse leaves every point
  void pointActivated(qint64 point_index);  // a click on a point that has a run

 protected:
  explicit SweepChart(QWidget* parent);
  // Where the tooltip of a point may stay up.
  virtual QRect tooltipRect(int64_t point_index) const = 0;
  const profiler::PointRecord* point(int64_t point_index) const;
  void setHovered(int64_t point_index);
  // Clears the widget to the palette's base with the text pen set; false (after saying so) when
  // there is no sweep to paint.
  bool paintBackground(QPainter& p) const;

  bool event(QEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void leaveEvent(QEvent* e) override;

  SweepDataPtr data_;
  int64_t selected_ = -1;
  int64_t hovered_ = -1;
  int64_t pressed_ = -1;
};

class HeatmapWidget : public SweepChart {
  Q_OBJECT

 public:
  explicit HeatmapWidget(QWidget* parent = nullptr);

  // A new snapshot (null for none). The hover and the marks survive when their points still exist,
  // so that a sweep filling in live does not flicker.
  void setData(SweepDataPtr data);
  void setMetric(SweepMetric metric);
  // Not metric(): that would hide QWidget::metric(PaintDeviceMetric).
  SweepMetric sweepMetric() const { return metric_; }

  // The grid's axes: distinct values among the offload points, ascending.
  const std::vector<int64_t>& stashSizes() const { return stash_sizes_; }  // columns
  const std::vector<int64_t>& offloadSizes() const { return min_sizes_; }  // rows

  // The point drawn at `pos` (a cell, or the baseline entry), or -1.
  int64_t pointAt(QPoint pos) const override;
  // Where the point is drawn at the current size: its cell (a slice of it when several points share
  // a config), or the baseline entry; an empty rect for a point that is not shown.
  QRect cellRect(int64_t point_index) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 public Q_SLOTS:
  // The point to outline strongly (the recommended one), -1 for none.
  void setHighlighted(int64_t point_index);

 protected:
  void paintEvent(QPaintEvent* e) override;
  QRect tooltipRect(int64_t point_index) const override;

 private:
  struct Layout;
  // Where a point sits in the grid; slot/slots split a cell among points with the same config.
  struct Placement {
    int64_t index = -1;
    size_t pos = 0;  // in data_->points
    int row = 0;
    int col = 0;
    int slot = 0;
    int slots = 1;
  };

  void rebuild();
  void updateRange();
  Layout layout() const;
  QRect placementRect(const Layout& l, const Placement& p) const;
  QString baselineText() const;
  QString legendText(double value) const;
  void paintHeader(QPainter& p, const Layout& l) const;
  void paintAxes(QPainter& p, const Layout& l) const;
  void paintCells(QPainter& p, const Layout& l) const;
  void paintLegend(QPainter& p, const Layout& l) const;

  SweepMetric metric_ = SweepMetric::StepTime;
  std::vector<int64_t> stash_sizes_;
  std::vector<int64_t> min_sizes_;
  std::vector<Placement> placements_;
  size_t baseline_pos_ = 0;
  bool has_baseline_ = false;
  bool has_range_ = false;
  double range_min_ = 0.0;
  double range_max_ = 0.0;
  int64_t highlighted_ = -1;
};

class ParetoWidget : public SweepChart {
  Q_OBJECT

 public:
  explicit ParetoWidget(QWidget* parent = nullptr);

  void setData(SweepDataPtr data);
  // The front, the chosen point and the constraint to draw. May come from an older snapshot than
  // setData's: front and choice are drawn from their own figures.
  void setRecommendation(const profiler::Recommendation& rec);

  // The nearest plotted point within ~8 px of `pos`, or -1.
  int64_t pointAt(QPoint pos) const override;
  // Where the point is plotted at the current size, or (-1, -1) when it is not plotted (not ok,
  // unknown, or no room to plot).
  QPointF positionOf(int64_t point_index) const;
  // The plotting area and the mapping into it, at the current size (empty / (-1, -1) without
  // plotted points).
  QRectF plotArea() const;
  QPointF mapToPlot(double peak_bytes, double step_ms) const;
  // What is not plotted, as the caption above the plot counts it: "2 failed, 1 out of memory"
  // (empty when nothing is left out).
  QString caption() const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* e) override;
  QRect tooltipRect(int64_t point_index) const override;

 private:
  struct Frame;
  void rebuild();
  Frame frame() const;
  QPointF positionIn(const Frame& f, int64_t point_index) const;
  void paintAxes(QPainter& p, const Frame& f) const;
  void paintConstraint(QPainter& p, const Frame& f) const;
  void paintPoints(QPainter& p, const Frame& f) const;
  double baselineMs() const;  // 0 when unknown

  profiler::Recommendation rec_;
  bool has_rec_ = false;
  std::vector<size_t> plotted_;  // positions in data_->points of the ok points
  double x_lo_ = 0.0, x_hi_ = 0.0, y_lo_ = 0.0, y_hi_ = 0.0;  // data range, unpadded
};

}  // namespace offtune::gui
