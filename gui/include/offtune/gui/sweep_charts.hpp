// The sweep view's two charts, painted by hand with QPainter. HeatmapWidget colours one metric over
// the grid of min_offload_size (rows, ascending upwards) x max_fwd_stash_size (columns, ascending
// rightwards), with failed, out-of-memory and pending points marked instead of coloured and the
// no-offload baseline shown apart. ParetoWidget plots peak device memory against step time for the
// measured points, with the recommender's front, its choice and the constraint it chose under.
// Both show the same tooltip for a point, report the point under the mouse and ask for its run on a
// click. Every point index here is PointRecord::index (the grid position), never a vector position.
// Code: sweep_charts.cpp (what both share), heatmap_widget.cpp, pareto_widget.cpp, and their
// drawing kit (colours, marker shapes, legend, axes) in chart_kit.hpp.
#pragma once

#include <QColor>
#include <QFont>
#include <QLineF>
#include <QPointF>
#include <QRect>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/profiler/recommend.hpp"

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

class HeatmapWidget : public SweepChart {
  Q_OBJECT

 public:
  explicit HeatmapWidget(QWidget* parent = nullptr);

  void setMetric(SweepMetric metric);
  // Shows only these offload points (a variant of a sweep with other knobs than the two axes:
  // each cell then holds one point), or every point (nullopt: points sharing a cell split it).
  // The baseline is always shown.
  void setShownPoints(std::optional<std::vector<int64_t>> indices);
  // The colour scale's ends, shared by several heatmaps side by side (small multiples: one colour
  // means one value in all of them), or nullopt for the range of the points shown.
  void setSharedRange(std::optional<std::pair<double, double>> range);
  // The colour scale's ends as drawn (nullopt: no value to colour).
  std::optional<std::pair<double, double>> valueRange() const;
  // The colour scale's end labels as drawn: worst (left) and best (right). Real values of the
  // sweep: the range of the points shown; for slowdown the range with the baseline's 1.00x in it
  // (the scale is logarithmic around 1.0x, so a slowdown is never shown as zero or negative).
  std::pair<QString, QString> scaleLabels() const;
  // Not metric(): that would hide QWidget::metric(PaintDeviceMetric).
  SweepMetric sweepMetric() const { return metric_; }
  // Which knobs the rows and the columns are (heatmap_axes() lists those of a sweep): by default
  // min_offload_size (rows) x max_fwd_stash_size (columns). The other knobs are the variant
  // (setShownPoints shows one). The same axis twice is refused (the call is ignored).
  void setAxes(HeatmapAxis rows, HeatmapAxis columns);
  HeatmapAxis rowAxis() const { return row_axis_; }
  HeatmapAxis columnAxis() const { return col_axis_; }

  // The grid's axes: distinct values among the offload points, ascending (sizes and windows by
  // value, the variant axes in the order the sweep's grid has them), as labels.
  QStringList rowLabels() const;
  QStringList columnLabels() const;
  // The same as numbers, on the threshold axes (empty on the others).
  std::vector<int64_t> stashSizes() const;    // columns
  std::vector<int64_t> offloadSizes() const;  // rows

  // The point drawn at `pos` (a cell, or the baseline entry), or -1.
  int64_t pointAt(QPoint pos) const override;
  // Where the point is drawn at the current size: its cell (a slice of it when several points share
  // a config), or the baseline entry; an empty rect for a point that is not shown.
  QRect cellRect(int64_t point_index) const;

  // Cell text never shrinks below this (the widget's font, at least this big): a cell too small
  // for the value with its unit shows the number alone, then with fewer digits, then nothing
  // (the tooltip has it all).
  static constexpr double kMinLabelPointSize = 8.0;
  // Text keeps this far inside its cell: clear of the recommended point's outline (3 px and a 1 px
  // inner line) and of the other marks, whichever cell they land on.
  static constexpr int kLabelInset = 5;
  // The text drawn in a point's cell as painted at the current size: its lines (a value, and the
  // step time's spread when there is room), font and bounding rect; empty text when none fits.
  struct CellLabel {
    QString text;  // lines joined by '\n'
    QFont font;
    QRect rect;  // where the text's ink may go
    QRect cell;
  };
  CellLabel cellLabel(int64_t point_index) const;
  // Cells of the grid that no point of the sweep can have: checkpoint none x offload boundaries
  // (nothing is checkpointed, so no boundary to offload; the sweep skips the pair). Hatched,
  // labelled "n/a", with a tooltip saying why. By row and column (rowLabels(), columnLabels()).
  struct NotApplicableCell {
    int row = 0;
    int col = 0;
    QRect rect;      // at the current size
    QString reason;  // the tooltip: "not applicable: ..."
  };
  std::vector<NotApplicableCell> notApplicableCells() const;

  // Grid points the store does not hold (the sweep was cancelled or sharded before them): outlined
  // and hatched, by index.
  std::vector<int64_t> unmeasuredPoints() const;

 public Q_SLOTS:
  // The point to outline strongly (the recommended one), -1 for none.
  void setHighlighted(int64_t point_index);

 protected:
  void paintEvent(QPaintEvent* e) override;
  QRect tooltipRect(int64_t point_index) const override;
  QString placeTooltip(QPoint pos, QRect* rect) const override;
  const profiler::PointRecord* point(int64_t point_index) const override;

 private:
  struct Layout;
  void rebuild() override;
  // The slowdown scale's ends (worst, best): the range with 1.0 in it.
  std::pair<double, double> scaleEnds() const;
  QRect gridCellRect(const Layout& l, int row, int col) const;
  std::vector<NotApplicableCell> notApplicableIn(const Layout& l) const;
  // Where a point sits in the grid; slot/slots split a cell among points with the same config.
  struct Placement {
    int64_t index = -1;
    size_t pos = 0;    // in data_->points, or in unmeasured_ when !held
    bool held = true;  // the store holds the point
    int row = 0;
    int col = 0;
    int slot = 0;
    int slots = 1;
  };
  const profiler::PointRecord& record(const Placement& pl) const;

  void updateRange();
  Layout layout() const;
  QRect placementRect(const Layout& l, const Placement& p) const;
  QString baselineText() const;
  QString legendText(double value) const;
  QColor valueColor(double value) const;
  QFont labelFont() const;
  CellLabel labelFor(const Layout& l, const Placement& pl, int min_form = 0,
                     int* form_used = nullptr) const;
  int uniformForm(const Layout& l) const;
  void paintHeader(QPainter& p, const Layout& l) const;
  void paintAxes(QPainter& p, const Layout& l) const;
  void paintCells(QPainter& p, const Layout& l) const;
  void paintLegend(QPainter& p, const Layout& l) const;

  SweepMetric metric_ = SweepMetric::StepTime;
  MetricDecimals decimals_;
  // One value of an axis: where it sorts, its number (threshold axes; -1 otherwise), its label.
  struct Tick {
    double key = 0.0;
    int64_t number = -1;
    QString text;
  };
  HeatmapAxis row_axis_ = HeatmapAxis::MinOffloadSize;
  HeatmapAxis col_axis_ = HeatmapAxis::MaxFwdStashSize;
  std::vector<Tick> row_ticks_;
  std::vector<Tick> col_ticks_;
  std::vector<Placement> placements_;
  std::vector<std::pair<int, int>> not_applicable_;        // (row, col) of cells no point can have
  std::optional<std::set<int64_t>> shown_;                 // setShownPoints
  std::optional<std::pair<double, double>> shared_range_;  // setSharedRange
  std::vector<profiler::PointRecord> unmeasured_;          // grid points not in data_->points
  const profiler::PointRecord* baseline_ = nullptr;
  bool baseline_held_ = false;
  bool has_baseline_ = false;
  bool exact_ = false;  // exact_times(): ties are exact ties
  bool has_range_ = false;
  double range_min_ = 0.0;
  double range_max_ = 0.0;
  int64_t highlighted_ = -1;
};

class ParetoWidget : public SweepChart {
  Q_OBJECT

 public:
  explicit ParetoWidget(QWidget* parent = nullptr);

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

  // A sweep of several variants (sweep_variants): each variant's points have their own marker
  // shape (0 circle, 1 triangle, 2 diamond, 3 cross, then again), and the legend names them. -1
  // for the baseline, a point of a sweep of one variant, or a point not plotted.
  int markerShape(int64_t point_index) const;
  static constexpr int kShapes = 4;

 protected:
  void paintEvent(QPaintEvent* e) override;
  QRect tooltipRect(int64_t point_index) const override;
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
  double baselineMs() const;  // 0 when unknown

  profiler::Recommendation rec_;
  bool has_rec_ = false;
  std::vector<size_t> plotted_;    // positions in data_->points of the ok points
  std::vector<size_t> predicted_;  // positions in data_->predictions of those plotted
  std::vector<profiler::PointRecord> predicted_only_;  // grid points only predicted, by index
  std::vector<std::string> variants_;                  // sweep_variants, when there are several
  std::map<int64_t, int> shape_of_;  // point index -> its variant's position in variants_
  double x_lo_ = 0.0, x_hi_ = 0.0, y_lo_ = 0.0, y_hi_ = 0.0;  // data range, unpadded
};

}  // namespace offtune::gui
