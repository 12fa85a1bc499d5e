// What the sweep view's two charts (heatmap_widget.hpp, pareto_widget.hpp) share: a point's
// tooltip, the colour maps, and the SweepChart base. Every point index here is PointRecord::index
// (the grid position), never a vector position.
#pragma once

#include <QColor>
#include <QPoint>
#include <QRect>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/profiler/records.hpp"

class QPainter;

namespace offtune::gui {

// Rich text with the point's figures: index, status, config, run, step time (median) with its
// interval, slowdown, peak device memory (and its exact bytes), hidden copy %, and the error of a
// failed point. `held`: the store holds the point (false: a grid point the sweep has not reached).
QString point_tooltip(const SweepData& sweep, const profiler::PointRecord& point, bool held = true);

// A perceptually ordered sequential colour map, from dark purple (t = 0) to light yellow (t = 1);
// t is clamped to [0, 1]. The heatmap puts the best value at 1.
QColor sequential_color(double t);
// A diverging map for a ratio around a neutral value (slowdown around 1.0x): dark red (t = 0,
// worse), near-white at t = 0.5 (no change), dark blue (t = 1, better); t is clamped to [0, 1].
QColor diverging_color(double t);

// What the two charts share: the snapshot, the point hovered, selected and pressed, and the mouse.
// Hovering reports the point under the mouse, a click (press and release on one point) asks for
// the run of a point that has one, and a tooltip shows the point's figures.
class SweepChart : public QWidget {
  Q_OBJECT

 public:
  // A new snapshot (null for none). The hover and the marks survive when their points still exist,
  // so that a sweep filling in live does not flicker.
  void setData(SweepDataPtr data);
  const SweepDataPtr& data() const { return data_; }
  // The point drawn at `pos`, or -1.
  virtual int64_t pointAt(QPoint pos) const = 0;
  // Points equal to the recommended one within noise (Recommendation::ties), marked as such.
  void setTies(std::vector<int64_t> ties);
  const std::vector<int64_t>& ties() const { return ties_; }
  bool isTie(int64_t point_index) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 public Q_SLOTS:
  // The point to mark as selected (e.g. hovered in the other chart), -1 for none.
  void setSelected(int64_t point_index);

 Q_SIGNALS:
  void pointHovered(qint64 point_index);    // -1 when the mouse leaves every point
  void pointActivated(qint64 point_index);  // a click on a point that has a run

 protected:
  explicit SweepChart(QWidget* parent);
  // What a chart derives from its snapshot (setData), computed once per snapshot.
  virtual void rebuild() = 0;
  // Where the tooltip of a point may stay up.
  virtual QRect tooltipRect(int64_t point_index) const = 0;
  // The tooltip of a place that is not a point (empty: none), and where it may stay up.
  virtual QString placeTooltip(QPoint /*pos*/, QRect* /*rect*/) const { return {}; }
  // The record of a point shown: the sweep's, or (the heatmap) a grid point not measured yet.
  virtual const profiler::PointRecord* point(int64_t point_index) const;
  void setHovered(int64_t point_index);
  // Sets `member` to `value` and schedules a repaint; false (and nothing done) when it was already.
  template <typename T>
  bool repaintOnChange(T& member, T value) {
    if (member == value) return false;
    member = std::move(value);
    update();
    return true;
  }
  // Clears the widget to the palette's base with the text pen set; false (after saying so) when
  // there is no sweep to paint.
  bool paintBackground(QPainter& p) const;

  bool event(QEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void leaveEvent(QEvent* e) override;

  SweepDataPtr data_;
  std::vector<int64_t> ties_;
  int64_t selected_ = -1;
  int64_t hovered_ = -1;
  int64_t pressed_ = -1;
};

}  // namespace offtune::gui
