// The sweep view's heatmap: one metric coloured over the grid of min_offload_size (rows, ascending
// upwards) x max_fwd_stash_size (columns, ascending rightwards) or two other knobs, with failed,
// out-of-memory and pending points marked instead of coloured and the no-offload baseline shown
// apart.
#pragma once

#include <QFont>
#include <QRect>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "offtune/gui/sweep_chart.hpp"

namespace offtune::gui {

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
  // The marker shape drawn on a point's slice of a split cell at the current size (its variant's,
  // as ParetoWidget::markerShape gives it), or -1: not split, not on the grid's pair of axes, or
  // no room for it.
  int sliceShape(int64_t point_index) const;
  // The legend's entries at the current size, in order ("recommended", "not applicable", ...).
  QStringList legendLabels() const;

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
  HeatmapAxis row_axis_ = default_row_axis();
  HeatmapAxis col_axis_ = default_column_axis();
  std::vector<Tick> row_ticks_;
  std::vector<Tick> col_ticks_;
  std::vector<Placement> placements_;
  std::map<int64_t, int> variant_shape_;  // by point index: its variant's marker, on split cells
  // Where a split slice's marker goes (empty: none, or no room clear of the cell's text).
  QRectF sliceMarkRect(const Placement& pl, const CellLabel& label) const;
  // The legend's words for a recommended point that has no cell here.
  QString offGridText() const;
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

}  // namespace offtune::gui
