// The sweep view's Pareto chart: a memory figure against step time for the measured points (and
// a predict-first sweep's predictions), with the recommender's front, its choice and the
// constraint it chose under.
#pragma once

#include <QColor>
#include <QLineF>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "offtune/gui/sweep_chart.hpp"
#include "offtune/profiler/recommend.hpp"

namespace offtune::gui {

class ParetoWidget : public SweepChart {
  Q_OBJECT

 public:
  explicit ParetoWidget(QWidget* parent = nullptr);

  // The front, the chosen point and the constraint to draw. May come from an older snapshot than
  // setData's: front and choice are drawn from their own figures.
  void setRecommendation(const profiler::Recommendation& rec);
  // The memory figure on the horizontal axis (one of kMemoryMetrics; peak allocated by default).
  // The budget's line is drawn where the axis is the figure it was checked against (the host
  // budget on host memory held); on another axis a note says where the budget is. Predictions
  // (of peak allocated) are plotted on the peak-allocated axis only.
  void setMemoryMetric(SweepMetric metric);
  SweepMetric memoryMetric() const { return x_metric_; }

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
  // What the plot says when it has no point to plot: "No measured points yet", or, where points
  // ended without a figure, "No point measured ok: 3 failed, 2 out of memory".
  QString emptyText() const;

  // The axes at the current size: their range (bytes, ms) and where each tick label is drawn. A
  // range is never narrower than kMinRelativeSpan of its largest value (peaks a few KiB apart do
  // not fill the plot with the noise of an allocator), and ticks are spaced so that labels never
  // overlap.
  static constexpr double kMinRelativeSpan = 0.05;
  std::pair<double, double> axisRange(Qt::Orientation o) const;
  std::vector<QRectF> tickLabelRects(Qt::Orientation o) const;
  // The constraint's line and its label as drawn (the label clear of the line); empty without a
  // constraint on the axes.
  struct ConstraintMark {
    QLineF line;
    QRectF label;
  };
  std::optional<ConstraintMark> constraintMark() const;
  // Every label drawn on the plot at the current size ("baseline", "recommended", the
  // constraint's), where its text is drawn. Labels are placed so that none overlaps a marker (a
  // point, a prediction, the rings), a line (the front, the constraint, a whisker) or another
  // label, as long as the plot has room for that.
  struct PlotLabel {
    QString text;
    QRectF rect;
  };
  std::vector<PlotLabel> plotLabels() const;

  // A predict-first sweep's predictions (SweepData::predictions) are plotted too, as hollow
  // markers, with a thin line from each prediction to its point's measurement. Where the
  // prediction of a point is plotted, or (-1, -1).
  QPointF predictedPositionOf(int64_t point_index) const;
  // How many predictions are plotted.
  int predictedCount() const { return static_cast<int>(predicted_.size()); }
  // The legend's entries at the current size, in order ("Pareto front", "predicted", ...).
  QStringList legendLabels() const;
  // How each entry is drawn, in the same order ("filled circle #466eaa", "outlined triangle
  // #5f5f5f", ...): two entries that look alike have the same text.
  QStringList legendGlyphs() const;

  // The tooltip over the legend entry with this text: its whole text (an entry may be drawn cut
  // short to its column); empty when no entry has it.
  QString legendTooltip(const QString& label) const;

  // A sweep of several variants (sweep_variants): each variant's points have their own marker
  // shape (0 circle, 1 triangle, 2 diamond, 3 cross, 4 inverted triangle, 5 x, 6 star, 7 right
  // triangle, 8 hourglass, 9 left triangle, then again), and the legend names them. -1 for the
  // baseline, a point of a sweep of one variant, or a point not plotted.
  int markerShape(int64_t point_index) const;

 protected:
  void paintEvent(QPaintEvent* e) override;
  QRect tooltipRect(int64_t point_index) const override;
  QString placeTooltip(QPoint pos, QRect* rect) const override;
  // A measured point, or a grid point only predicted (as a pending record).
  const profiler::PointRecord* point(int64_t point_index) const override;

 private:
  struct Frame;
  void rebuild() override;
  QPointF predictedIn(const Frame& f, int64_t point_index) const;
  void paintPredictions(QPainter& p, const Frame& f) const;
  Frame frame() const;
  std::vector<QRectF> tickLabelRectsIn(const Frame& f, Qt::Orientation o) const;
  std::optional<ConstraintMark> constraintMarkIn(const Frame& f) const;
  QPointF positionIn(const Frame& f, int64_t point_index) const;
  struct PlacedLabel {
    QString text;
    QRectF rect;
    QColor color;
  };
  // The point labels (baseline, recommended), placed clear of every mark.
  std::vector<PlacedLabel> pointLabelsIn(const Frame& f) const;
  struct Obstacles {
    std::vector<QRectF> boxes;
    std::vector<QLineF> lines;
  };
  Obstacles obstaclesIn(const Frame& f) const;
  // The constraint's line on the plot and its label's text; nullopt off the axes or without one.
  std::optional<QLineF> constraintLineIn(const Frame& f, QString* text) const;
  void paintAxes(QPainter& p, const Frame& f) const;
  void paintConstraint(QPainter& p, const Frame& f) const;
  void paintPoints(QPainter& p, const Frame& f) const;
  double baselineMs() const;                        // 0 when unknown
  double xOf(const profiler::RunSummary& s) const;  // the point's figure on the axis, in bytes
  // The budget on the axis's figure, if the constraint has one; its label ("device budget 8 GiB");
  // and the note for a budget on another figure ("budget 8 GiB on peak device total (not this
  // axis)", empty when none).
  std::optional<int64_t> budgetOnAxis() const;
  QString budgetName() const;
  QString budgetElsewhere() const;

  profiler::Recommendation rec_;
  bool has_rec_ = false;
  std::vector<size_t> plotted_;    // positions in data_->points of the ok points
  std::vector<size_t> predicted_;  // positions in data_->predictions of those plotted
  std::vector<profiler::PointRecord> predicted_only_;  // grid points only predicted, by index
  std::vector<std::string> variants_;                  // sweep_variants, when there are several
  std::map<int64_t, int> shape_of_;  // point index -> its variant's position in variants_
  double x_lo_ = 0.0, x_hi_ = 0.0, y_lo_ = 0.0, y_hi_ = 0.0;  // data range, unpadded
  SweepMetric x_metric_ = SweepMetric::PeakAllocated;
};

}  // namespace offtune::gui
