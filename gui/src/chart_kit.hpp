// The sweep charts' kit (private to offtune_gui): what the heatmap (heatmap_widget.cpp) and the
// Pareto chart (pareto_widget.cpp) draw alike. Their colours, the variant marker shapes, the
// legend (entries flowed onto lines, each sample drawn as its chart draws the mark it explains),
// round axes and tick labels, hatched and outlined cells. The colour maps themselves are public
// (sequential_color, diverging_color in offtune/gui/sweep_chart.hpp).
#pragma once

#include <QColor>
#include <QFontMetrics>
#include <QPainter>
#include <QPoint>
#include <QPointF>
#include <QRect>
#include <QString>
#include <map>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/profiler/records.hpp"
#include "text_util.hpp"

namespace offtune::gui::detail {

// A point's status as the charts write it: "ok", "failed", "out of memory", "pending".
QString status_label(profiler::PointStatus s);

// Text on a cell: dark on the light end of the map, light on the dark end.
QColor text_color_on(const QColor& background);

// Marks distinct from every colour of the maps.
inline const QColor kFailedFill(205, 205, 205);
inline const QColor kFailedHatch(125, 125, 125);
inline const QColor kOomFill(255, 226, 226);
inline const QColor kOomHatch(200, 30, 30);
inline const QColor kFrontColor(230, 120, 20);
inline const QColor kPointColor(70, 110, 170);
inline const QColor kBaselineColor(45, 45, 45);
inline const QColor kVariantKeyColor(95, 95, 95);  // a variant's legend entry: its shape, outlined
inline const QColor kChosenColor(20, 150, 60);     // the recommended point and its ties
inline const QColor kOverLimitShade(220, 40, 40, 40);
inline const QColor kLimitLine(190, 30, 30);
inline const QColor kHighlightOutline(0, 0, 0);
inline const QColor kUnmeasuredFill(246, 246, 246);
inline const QColor kUnmeasuredHatch(200, 200, 200);
// A cell no point can have: cross-hatched, unlike a point not measured yet (diagonal).
inline const QColor kNotApplicableFill(250, 250, 250);
inline const QColor kNotApplicableHatch(185, 185, 185);
// A prediction's hollow marker and the line to its measurement: apart from the measured points'
// blue, the front's orange and the recommendation's green.
inline const QColor kPredictedColor(130, 70, 170);

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
  Shape0,      // a variant's marker (ParetoWidget::markerShape), Shape0 + shape: kShapeNames
  Shape1,
  Shape2,
  Shape3,
  Shape4,
  Shape5,
  Shape6,
  Shape7,
  Shape8,
  Shape9,
};

// The variants' marker shapes, in the order variants take them. Ten: a sweep of three knobs'
// variants (checkpoint x offload set x link) has nine; before, four shapes repeated.
inline constexpr int kMarkerShapes = 10;
inline constexpr const char* kShapeNames[kMarkerShapes] = {
    "circle", "triangle", "diamond",        "cross",     "inverted triangle",
    "x",      "star",     "right triangle", "hourglass", "left triangle"};
// The legend sample of a shape, and back (-1: not a shape).
inline Sample shape_sample(int shape) {
  return static_cast<Sample>(static_cast<int>(Sample::Shape0) + shape % kMarkerShapes);
}
inline int sample_shape(Sample s) {
  const int k = static_cast<int>(s) - static_cast<int>(Sample::Shape0);
  return k >= 0 && k < kMarkerShapes ? k : -1;
}

// For a sweep of several variants (sweep_variants), each point's variant by its place in that
// list: the marker shape it is drawn with, the same in the Pareto chart and the heatmap's split
// cells. Empty for a sweep of one variant.
std::map<int64_t, int> variant_shapes(const SweepData& sweep);

// A variant's marker at `c` with `radius` (shape modulo kMarkerShapes; circle for < 0).
void draw_marker(QPainter& p, const QPointF& c, double radius, int shape);

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
                                    int* bottom);
// Items in columns from `top` between `left` and `right`: one column while the items take at most
// `max_lines` lines, else as many (up to 3) as keep them within it, or 3; each entry's text gets
// its column's width (paint_legend elides what is longer). *bottom: the last line's bottom.
std::vector<PlacedItem> column_legend(const QFontMetrics& fm, int top, int left, int right,
                                      int line_height, const std::vector<LegendItem>& items,
                                      int max_lines, int* bottom);
// The whole text of the legend entry at `pos` (an entry may be drawn cut short), and in *rect
// (when not null) where the entry is; empty when no entry is there.
QString legend_text_at(const std::vector<LegendItem>& items, const std::vector<PlacedItem>& placed,
                       QPoint pos, QRect* rect);
// Each item's sample and its text (elided in the middle to its rect: a variant's first and last
// words stay) where flow_legend or column_legend placed it.
void paint_legend(QPainter& p, const QFontMetrics& fm, const std::vector<LegendItem>& items,
                  const std::vector<PlacedItem>& placed, const QColor& text);

// A step of 1, 2 or 5 times a power of ten near `raw`: tick labels stay short and round.
double nice_step(double raw);

struct Axis {
  double lo = 0.0;
  double hi = 1.0;
  std::vector<double> ticks;
};

// Widens a range narrower than `min_relative` of its largest magnitude around its centre, pads it
// (a degenerate one around its value), then widens it to whole ticks, so that no point sits on the
// frame and the ends carry labels. `intervals` is about how many ticks apart the ends may be.
Axis nice_axis(double lo, double hi, bool non_negative, double min_relative = 0.0,
               int intervals = 5);

// A tick's value, shortest form, never "-0" or "1e-17" from rounding.
QString tick_label(double v);

// Fills `r` with a colour under a hatch, the mark of a point that has no value to colour by.
void fill_hatched(QPainter& p, const QRect& r, const QColor& fill, const QColor& hatch,
                  Qt::BrushStyle style);

// An outline of `width` drawn wholly inside `r` (none of it over a neighbouring cell).
void draw_outline(QPainter& p, const QRect& r, const QColor& color, int width,
                  Qt::PenStyle style = Qt::SolidLine);

}  // namespace offtune::gui::detail
