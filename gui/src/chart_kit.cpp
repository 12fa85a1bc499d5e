// The sweep charts' kit (chart_kit.hpp) and the colour maps.
#include "chart_kit.hpp"

#include <QBrush>
#include <QPainterPath>
#include <QPen>
#include <QPolygonF>
#include <QTransform>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "offtune/gui/sweep_chart.hpp"

namespace offtune::gui {

namespace {

// Samples of a viridis-like map (dark purple, blue, teal, green, yellow): lightness rises
// monotonically and evenly, so equal steps in value read as equal steps in colour, also in grey
// and for the common colour-vision deficiencies.
constexpr std::array<std::array<int, 3>, 9> kColorStops = {{
    {68, 1, 84},
    {72, 40, 120},
    {62, 73, 137},
    {49, 104, 142},
    {38, 130, 142},
    {31, 158, 137},
    {53, 183, 121},
    {110, 206, 88},
    {253, 231, 37},
}};

// RdBu-like: dark red (slower), near-white (as fast as the baseline), dark blue (faster).
constexpr std::array<std::array<int, 3>, 5> kDivergingStops = {{
    {150, 30, 45},
    {220, 110, 85},
    {246, 246, 244},
    {95, 160, 200},
    {25, 75, 135},
}};

template <size_t N>
QColor interpolate(const std::array<std::array<int, 3>, N>& stops, double t) {
  if (!(t >= 0.0)) t = 0.0;  // NaN too
  t = std::min(t, 1.0);
  const double x = t * static_cast<double>(N - 1);
  const auto i = std::min(static_cast<size_t>(x), N - 2);
  const double f = x - static_cast<double>(i);
  const auto mix = [&](int c) {
    return static_cast<int>(std::lround(stops[i][static_cast<size_t>(c)] * (1.0 - f) +
                                        stops[i + 1][static_cast<size_t>(c)] * f));
  };
  return QColor(mix(0), mix(1), mix(2));
}

}  // namespace

QColor sequential_color(double t) { return interpolate(kColorStops, t); }

QColor diverging_color(double t) { return interpolate(kDivergingStops, t); }

namespace detail {

QString status_label(profiler::PointStatus s) {
  switch (s) {
    case profiler::PointStatus::Pending:
      return QStringLiteral("pending");
    case profiler::PointStatus::Ok:
      return QStringLiteral("ok");
    case profiler::PointStatus::Failed:
      return QStringLiteral("failed");
    case profiler::PointStatus::OutOfMemory:
      return QStringLiteral("out of memory");
  }
  return QStringLiteral("?");
}

QColor text_color_on(const QColor& background) {
  const double luma =
      0.299 * background.red() + 0.587 * background.green() + 0.114 * background.blue();
  return luma > 140 ? QColor(20, 20, 20) : QColor(250, 250, 250);
}

std::map<int64_t, int> variant_shapes(const SweepData& sweep) {
  std::map<int64_t, int> out;
  const auto variants = sweep_variants(sweep);
  if (variants.size() < 2) return out;
  for (const auto& [index, text] : variants_by_index(sweep)) {
    const auto it = std::find(variants.begin(), variants.end(), text);
    if (it != variants.end()) out[index] = static_cast<int>(it - variants.begin());
  }
  return out;
}

void draw_marker(QPainter& p, const QPointF& c, double radius, int shape) {
  // A regular polygon of `n` corners, the first at `start` radians (0: right, counter-clockwise
  // upwards), `r` from the centre.
  const auto polygon = [&](int n, double r, double start) {
    QPolygonF poly;
    for (int k = 0; k < n; ++k) {
      const double a = start + 2.0 * std::numbers::pi * k / n;
      poly << QPointF(c.x() + r * std::cos(a), c.y() - r * std::sin(a));
    }
    p.drawPolygon(poly);
  };
  switch (shape < 0 ? 0 : shape % kMarkerShapes) {
    case 0:
      p.drawEllipse(c, radius, radius);
      break;
    case 1:
      polygon(3, radius * 1.25, std::numbers::pi / 2);
      break;
    case 2:
      polygon(4, radius * 1.2, std::numbers::pi / 2);
      break;
    case 3: {  // a cross, thick enough to read as a marker
      const double r = radius, w = radius * 0.45;
      QPainterPath plus;
      plus.addRect(QRectF(c.x() - r, c.y() - w, 2 * r, 2 * w));
      plus.addRect(QRectF(c.x() - w, c.y() - r, 2 * w, 2 * r));
      plus.setFillRule(Qt::WindingFill);
      p.drawPath(plus.simplified());
      break;
    }
    case 4:
      polygon(3, radius * 1.25, -std::numbers::pi / 2);
      break;
    case 5: {  // the cross turned a quarter: an x
      const double r = radius * 1.1, w = radius * 0.32;
      QPainterPath x;
      x.addRect(QRectF(-r, -w, 2 * r, 2 * w));
      x.addRect(QRectF(-w, -r, 2 * w, 2 * r));
      x.setFillRule(Qt::WindingFill);
      QTransform t;
      t.translate(c.x(), c.y());
      t.rotate(45);
      p.drawPath(t.map(x.simplified()));
      break;
    }
    case 6: {  // a five-pointed star
      QPolygonF star;
      for (int k = 0; k < 10; ++k) {
        const double r = k % 2 == 0 ? radius * 1.35 : radius * 0.6;
        const double a = std::numbers::pi / 2 + std::numbers::pi * k / 5;
        star << QPointF(c.x() + r * std::cos(a), c.y() - r * std::sin(a));
      }
      p.drawPolygon(star);
      break;
    }
    case 7:  // pointing right (a hexagon read as a circle at this size)
      polygon(3, radius * 1.25, 0.0);
      break;
    case 8: {  // an hourglass: two triangles tip to tip
      const double r = radius * 1.1;
      const QPointF glass[4] = {{c.x() - r, c.y() - r},
                                {c.x() + r, c.y() - r},
                                {c.x() - r, c.y() + r},
                                {c.x() + r, c.y() + r}};
      p.drawPolygon(glass, 4);
      break;
    }
    default:  // pointing left
      polygon(3, radius * 1.25, std::numbers::pi);
      break;
  }
}

std::vector<PlacedItem> flow_legend(const QFontMetrics& fm, QPoint origin, int left, int right,
                                    int line_height, const std::vector<LegendItem>& items,
                                    int* bottom) {
  std::vector<PlacedItem> out;
  int x = origin.x(), y = origin.y();
  for (const auto& item : items) {
    const int w = 16 + 4 + fm.horizontalAdvance(item.text) + 2;
    if (x + w > right && x > left) {
      x = left;
      y += line_height;
    }
    PlacedItem pl;
    pl.sample = QRect(x, y + (line_height - 12) / 2, 16, 12);
    pl.text = QRect(x + 20, y, std::min(w - 20, right - x - 20), line_height);
    out.push_back(pl);
    x += w + 12;
  }
  *bottom = y + line_height;
  return out;
}

std::vector<PlacedItem> column_legend(const QFontMetrics& fm, int top, int left, int right,
                                      int line_height, const std::vector<LegendItem>& items,
                                      int max_lines, int* bottom) {
  std::vector<PlacedItem> out;
  *bottom = top;
  if (items.empty()) return out;
  const int n_items = static_cast<int>(items.size());
  int columns = 1;
  while (columns < 3 && (n_items + columns - 1) / columns > std::max(1, max_lines)) ++columns;
  constexpr int kGap = 12;
  const int width = std::max(1, right - left);
  const int column_w = std::max(24, (width - (columns - 1) * kGap) / columns);
  const int lines = (n_items + columns - 1) / columns;
  for (int i = 0; i < n_items; ++i) {
    // Down each column, then the next: the order reads as a list.
    const int col = i / lines, line = i % lines;
    const int x = left + col * (column_w + kGap), y = top + line * line_height;
    PlacedItem pl;
    pl.sample = QRect(x, y + (line_height - 12) / 2, 16, 12);
    const int text_w = std::min(column_w - 20, fm.horizontalAdvance(items[i].text) + 2);
    pl.text = QRect(x + 20, y, std::max(1, text_w), line_height);
    out.push_back(pl);
  }
  *bottom = top + lines * line_height;
  return out;
}

QString legend_text_at(const std::vector<LegendItem>& items, const std::vector<PlacedItem>& placed,
                       QPoint pos, QRect* rect) {
  for (size_t i = 0; i < items.size() && i < placed.size(); ++i) {
    const QRect at = placed[i].sample.united(placed[i].text);
    if (!at.contains(pos)) continue;
    if (rect != nullptr) *rect = at;
    return items[i].text;
  }
  return {};
}

double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0;
  return nice * mag;
}

Axis nice_axis(double lo, double hi, bool non_negative, double min_relative, int intervals) {
  const double min_span = min_relative * std::max(std::abs(lo), std::abs(hi));
  if (hi - lo < min_span) {
    const double mid = (lo + hi) / 2.0;
    lo = mid - min_span / 2.0;
    hi = mid + min_span / 2.0;
    if (non_negative && lo < 0) {
      hi -= lo;
      lo = 0;
    }
  }
  const double span = hi - lo;
  const double pad = span > 0 ? span * 0.06 : (lo != 0.0 ? std::abs(lo) * 0.1 : 1.0);
  Axis a;
  a.lo = lo - pad;
  a.hi = hi + pad;
  if (non_negative && lo >= 0 && a.lo < 0) a.lo = 0;
  const double step = nice_step((a.hi - a.lo) / std::max(1, intervals));
  a.lo = std::floor(a.lo / step) * step;
  a.hi = std::ceil(a.hi / step) * step;
  // Counted from an integer so that rounding does not accumulate or drop the last tick.
  const auto first = static_cast<int64_t>(std::llround(a.lo / step));
  const auto last = static_cast<int64_t>(std::llround(a.hi / step));
  for (int64_t k = first; k <= last && a.ticks.size() < 50; ++k) {
    a.ticks.push_back(static_cast<double>(k) * step);
  }
  return a;
}

QString tick_label(double v) {
  if (std::abs(v) < 1e-12) v = 0.0;  // no "-0" or "1e-17" from rounding
  return QString::number(v, 'g', 8);
}

void fill_hatched(QPainter& p, const QRect& r, const QColor& fill, const QColor& hatch,
                  Qt::BrushStyle style) {
  p.fillRect(r, fill);
  p.fillRect(r, QBrush(hatch, style));
}

void draw_outline(QPainter& p, const QRect& r, const QColor& color, int width, Qt::PenStyle style) {
  QPen pen(color, width, style);
  pen.setJoinStyle(Qt::MiterJoin);
  p.setPen(pen);
  p.setBrush(Qt::NoBrush);
  // A stroke is centred on the path: inset by half its width so that all of it lies inside the
  // cell and none over the neighbour.
  const double half = width / 2.0;
  p.drawRect(QRectF(r).adjusted(half, half, -half, -half));
}

namespace {

// A legend entry's sample in `r`.
void paint_sample(QPainter& p, const QRect& r, const LegendItem& item) {
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  const QPointF c = QRectF(r).center();
  const auto outlined = [&p](const QPen& pen) {
    p.setPen(pen);
    p.setBrush(Qt::NoBrush);
  };
  switch (item.sample) {
    case Sample::Box:
      draw_outline(p, r, item.color, 3);
      break;
    case Sample::DashedBox:
      draw_outline(p, r, item.color, 2, Qt::DashLine);
      break;
    case Sample::HatchedBox:
      fill_hatched(p, r, kUnmeasuredFill, kUnmeasuredHatch, Qt::FDiagPattern);
      draw_outline(p, r, QColor(150, 150, 150), 1, Qt::DashLine);
      break;
    case Sample::CrossedBox:
      fill_hatched(p, r, kNotApplicableFill, kNotApplicableHatch, Qt::CrossPattern);
      draw_outline(p, r, kNotApplicableHatch, 1);
      break;
    case Sample::Dot:
      p.setPen(Qt::NoPen);
      p.setBrush(item.color);
      p.drawEllipse(c, 4.0, 4.0);
      break;
    case Sample::Square:
      p.setPen(Qt::NoPen);
      p.setBrush(item.color);
      p.drawRect(QRectF(c.x() - 4.5, c.y() - 4.5, 9, 9));
      break;
    case Sample::Ring:
    case Sample::DashedRing:
      outlined(item.sample == Sample::Ring ? QPen(item.color, 2.5)
                                           : QPen(item.color, 1.5, Qt::DashLine));
      p.drawEllipse(c, 5.5, 5.5);
      break;
    case Sample::Shape0:
    case Sample::Shape1:
    case Sample::Shape2:
    case Sample::Shape3:
    case Sample::Shape4:
    case Sample::Shape5:
    case Sample::Shape6:
    case Sample::Shape7:
    case Sample::Shape8:
    case Sample::Shape9:
      // Outlined: a variant's entry keys a shape, not a colour (filled, it read as "other points").
      outlined(QPen(item.color, 1.5));
      draw_marker(p, c, 4.0, sample_shape(item.sample));
      break;
    case Sample::Hollow:
      outlined(QPen(item.color, 1.5));
      p.drawEllipse(c, 4.5, 4.5);
      break;
    case Sample::Link:
      p.setPen(QPen(item.color, 1.0));
      p.drawLine(QPointF(r.left() + 1, r.bottom() - 1), QPointF(r.right() - 1, r.top() + 1));
      p.setBrush(Qt::NoBrush);
      p.drawEllipse(QPointF(r.left() + 3, r.bottom() - 3), 2.5, 2.5);
      p.setPen(Qt::NoPen);
      p.setBrush(kPointColor);
      p.drawEllipse(QPointF(r.right() - 3, r.top() + 3), 2.5, 2.5);
      break;
    case Sample::Whisker:
      p.setPen(QPen(item.color, 1.2));
      p.drawLine(QPointF(c.x(), r.top()), QPointF(c.x(), r.bottom()));
      p.drawLine(QPointF(c.x() - 3, r.top()), QPointF(c.x() + 3, r.top()));
      p.drawLine(QPointF(c.x() - 3, r.bottom()), QPointF(c.x() + 3, r.bottom()));
      p.setPen(Qt::NoPen);
      p.setBrush(item.color);
      p.drawEllipse(c, 3.0, 3.0);
      break;
  }
  p.restore();
}

}  // namespace

void paint_legend(QPainter& p, const QFontMetrics& fm, const std::vector<LegendItem>& items,
                  const std::vector<PlacedItem>& placed, const QColor& text) {
  for (size_t i = 0; i < items.size() && i < placed.size(); ++i) {
    paint_sample(p, placed[i].sample, items[i]);
    p.setPen(text);
    p.drawText(placed[i].text, Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(items[i].text, Qt::ElideMiddle, placed[i].text.width()));
  }
}

}  // namespace detail

}  // namespace offtune::gui
