// Painting the timeline (timeline.hpp) into any QPainter: the colours of the kinds and their
// legend, the lanes at the level of detail a frame needs, the ruler, and the tooltips.
#include "offtune/gui/timeline.hpp"

#include <QFontMetrics>
#include <QPainter>
#include <QStringList>
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

#include "offtune/profiler/units.hpp"
#include "timeline_detail.hpp"
namespace offtune::gui {

using detail::to_ns;

namespace {

using profiler::EventKind;

QColor mix(const QColor& a, const QColor& b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  const auto lerp = [t](int x, int y) { return static_cast<int>(std::lround(x + (y - x) * t)); };
  return QColor(lerp(a.red(), b.red()), lerp(a.green(), b.green()), lerp(a.blue(), b.blue()));
}

// ---- colours ------------------------------------------------------------------------------------

using detail::kBackground;
using detail::kGrid;
using detail::kGutterBackground;
using detail::kText;

// A merged run's tint: the lane's colour by how busy its blocks keep the run (0..1). sqrt: a run
// 5 % busy stays visible, yet clearly lighter than a saturated one.
QColor merged_tint(const QColor& colour, double density) {
  return mix(kBackground, colour, 0.25 + 0.75 * std::sqrt(std::clamp(density, 0.0, 1.0)));
}
const QColor kRulerBackground(0xfa, 0xfa, 0xfa);
const QColor kSeparator(0xd6, 0xd6, 0xd6);
// Markings over events: black, which no kind uses, and told apart by shape (a solid band along
// the top, a hatched band along the bottom, an arrow).
const QColor kPrefetch(0x00, 0x00, 0x00);
const QColor kPageable(0x00, 0x00, 0x00);
const QColor kArrow(0x1a, 0x1a, 0x1a);
const QColor kSwatchBar(0xd8, 0xd8, 0xd8);  // the bar the legend draws a marking on

QColor kind_colour(EventKind k) { return timeline_kind_colour(k); }

// A pageable copy's band: black diagonal hatching on white, legible over any kind's colour. Below
// a few pixels wide no stripe would show: solid black, in one fill instead of two (zoomed out,
// these are most of the marks).
int fill_pageable(QPainter& p, const QRect& r) {
  if (r.width() < 4) {
    p.fillRect(r, kPageable);
    return 1;
  }
  p.fillRect(r, Qt::white);
  p.fillRect(r, QBrush(kPageable, Qt::BDiagPattern));
  return 2;
}

// The band heights in a bar of height h: thin at the natural lane height, growing with taller
// lanes so that they stay visible in proportion.
int prefetch_band(int h) { return std::max(3, h / 7); }
int pageable_band(int h) { return std::max(5, h / 4); }

}  // namespace

// ---- public helpers ---------------------------------------------------------------------------

QRect time_plot_rect(const QRect& area) {
  return QRect(area.left() + kTimeGutter, area.top(),
               std::max(1, area.width() - kTimeGutter - kTimeRightMargin), area.height());
}

QString format_duration_ns(double ns) {
  const double a = std::abs(ns);
  if (a < 1e3) return QStringLiteral("%1 ns").arg(ns, 0, 'f', 0);
  if (a < 1e6) return QStringLiteral("%1 \u00b5s").arg(ns / 1e3, 0, 'f', 2);
  if (a < 1e9) return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', 3);
  return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', 3);
}

QString format_bytes(double bytes, int decimals) {
  return QString::fromStdString(profiler::format_size(bytes, decimals));
}

// ---- colours and legend -----------------------------------------------------------------------

QColor timeline_kind_colour(EventKind k) {
  // Okabe-Ito and Paul Tol's colour-blind-safe sets, picked so that the smallest CIE76 difference
  // between any two kinds, and between a kind and the run charts' forward stash (#4c78a8), backward
  // stash (#f58518) and device memory (#7b4fa0), is as large as it gets: at least 24 for normal
  // vision and 13 under simulated deuteranopia, protanopia and tritanopia (test_gui_timeline checks
  // it). Black is left to the markings (prefetch, pageable, arrows).
  switch (k) {
    case EventKind::Step:
      return QColor(0xe0, 0xe0, 0xe0);  // light grey, behind forward / backward
    case EventKind::Forward:
      return QColor(0x66, 0xcc, 0xee);  // cyan
    case EventKind::Backward:
      return QColor(0xdd, 0xcc, 0x77);  // sand
    case EventKind::Compute:
      return QColor(0x99, 0x99, 0x99);  // grey: the bulk of the picture, the quietest colour
    case EventKind::CopyD2H:
      return QColor(0x33, 0x22, 0x88);  // indigo
    case EventKind::CopyH2D:
      return QColor(0x22, 0x88, 0x33);  // green
    case EventKind::Pack:
      return QColor(0x9c, 0x75, 0x5f);  // brown
    case EventKind::Unpack:
      return QColor(0xaa, 0x33, 0x77);  // wine
    case EventKind::Wait:
      return QColor(0xcc, 0x33, 0x11);  // red: time lost
    case EventKind::DiskWrite:
      return QColor(0x99, 0x99, 0x33);  // olive (Tol), on the disk lane only
    case EventKind::DiskRead:
      return QColor(0x44, 0xaa, 0x99);  // teal (Tol)
    case EventKind::Recompute:
      return QColor(0xee, 0x77, 0x33);  // orange: time spent again (checkpointing)
  }
  return QColor(0x80, 0x80, 0x80);
}

const std::vector<TimelineLegendEntry>& timeline_legend() {
  static const std::vector<TimelineLegendEntry> entries = [] {
    std::vector<TimelineLegendEntry> out;
    const auto kind = [&out](const char* label, EventKind k) {
      TimelineLegendEntry e;
      e.label = QString::fromUtf8(label);
      e.colour = timeline_kind_colour(k);
      e.kind = k;
      out.push_back(e);
    };
    const auto marking = [&out](const char* label, TimelineLegendEntry::Swatch swatch,
                                const QColor& colour) {
      TimelineLegendEntry e;
      e.label = QString::fromUtf8(label);
      e.colour = colour;
      e.swatch = swatch;
      out.push_back(e);
    };
    kind("step", EventKind::Step);
    kind("forward", EventKind::Forward);
    kind("backward", EventKind::Backward);
    kind("compute", EventKind::Compute);
    kind("copy D2H", EventKind::CopyD2H);
    kind("copy H2D", EventKind::CopyH2D);
    kind("wait", EventKind::Wait);
    kind("recompute", EventKind::Recompute);
    kind("pack", EventKind::Pack);
    kind("unpack", EventKind::Unpack);
    kind("disk write", EventKind::DiskWrite);
    kind("disk read", EventKind::DiskRead);
    marking("prefetched", TimelineLegendEntry::Swatch::Prefetch, kPrefetch);
    marking("pageable", TimelineLegendEntry::Swatch::Pageable, kPageable);
    marking("waited on", TimelineLegendEntry::Swatch::Arrow, kArrow);
    // Zoomed out, blocks closer than a pixel are drawn as one; a lighter tint is a run they fill
    // only in part (issue 43: the tint was unexplained).
    marking("merged (lighter: less busy)", TimelineLegendEntry::Swatch::Merged,
            timeline_kind_colour(EventKind::Compute));
    return out;
  }();
  return entries;
}

namespace {

constexpr int kLegendSwatchWidth = 18;
constexpr int kLegendSwatchGap = 5;
constexpr int kLegendEntryGap = 14;
constexpr int kLegendPadding = 4;

int legend_entry_width(const QFontMetrics& fm, const TimelineLegendEntry& e) {
  return kLegendSwatchWidth + kLegendSwatchGap + fm.horizontalAdvance(e.label);
}

// Lays the entries out left to right from the gutter's edge, wrapping; calls place(entry, rect)
// for each and returns the height used.
template <typename Place>
int layout_legend(const QFontMetrics& fm, const QRect& area, Place&& place) {
  const int row_height = fm.height() + 4;
  const int left = area.left() + kTimeGutter;
  const int right = std::max(left + 1, area.right() - kTimeRightMargin);
  int x = left;
  int y = area.top() + kLegendPadding;
  for (const auto& e : timeline_legend()) {
    const int w = legend_entry_width(fm, e);
    if (x > left && x + w > right) {
      x = left;
      y += row_height;
    }
    place(e, QRect(x, y, w, row_height));
    x += w + kLegendEntryGap;
  }
  return y + row_height + kLegendPadding - area.top();
}

void paint_swatch(QPainter& p, const TimelineLegendEntry& e, const QRect& r) {
  switch (e.swatch) {
    case TimelineLegendEntry::Swatch::Fill:
      p.fillRect(r, e.colour);
      break;
    case TimelineLegendEntry::Swatch::Prefetch:
      p.fillRect(r, kSwatchBar);
      p.fillRect(QRect(r.left(), r.top(), r.width(), prefetch_band(r.height())), e.colour);
      break;
    case TimelineLegendEntry::Swatch::Pageable: {
      p.fillRect(r, kSwatchBar);
      const int h = pageable_band(r.height());
      fill_pageable(p, QRect(r.left(), r.bottom() - h + 1, r.width(), h));
      break;
    }
    case TimelineLegendEntry::Swatch::Merged: {
      // Three runs of falling density, tinted as the lanes tint them.
      const int w = r.width() / 3;
      for (int k = 0; k < 3; ++k) {
        const double density = k == 0 ? 1.0 : k == 1 ? 0.3 : 0.05;
        const int x = r.left() + k * w;
        p.fillRect(QRect(x, r.top(), k == 2 ? r.right() - x + 1 : w, r.height()),
                   merged_tint(e.colour, density));
      }
      break;
    }
    case TimelineLegendEntry::Swatch::Arrow: {
      const int y = r.center().y();
      p.save();
      p.setRenderHint(QPainter::Antialiasing, true);
      p.setPen(QPen(e.colour, 1.2));
      p.drawLine(QPointF(r.left(), y + 0.5), QPointF(r.right() - 4, y + 0.5));
      p.setPen(Qt::NoPen);
      p.setBrush(e.colour);
      const QPointF head[] = {QPointF(r.right() + 1, y + 0.5), QPointF(r.right() - 5, y - 3.0),
                              QPointF(r.right() - 5, y + 4.0)};
      p.drawPolygon(head, 3);
      p.restore();
      break;
    }
  }
}

}  // namespace

int timeline_legend_height(const QFontMetrics& fm, int width) {
  return layout_legend(fm, QRect(0, 0, width, 1), [](const auto&, const QRect&) {});
}

void render_timeline_legend(QPainter& painter, const QRect& area) {
  painter.save();
  painter.setClipRect(area, Qt::IntersectClip);
  painter.fillRect(area, kBackground);
  painter.fillRect(QRect(area.left(), area.top(), kTimeGutter, area.height()), kGutterBackground);
  const QFontMetrics fm(painter.font());
  painter.setPen(kText);
  painter.drawText(
      QRect(area.left() + 6, area.top() + kLegendPadding, kTimeGutter - 10, fm.height() + 4),
      Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("legend"));
  layout_legend(fm, area, [&](const TimelineLegendEntry& e, const QRect& r) {
    const int h = std::min(12, r.height() - 2);
    paint_swatch(painter, e, QRect(r.left(), r.center().y() - h / 2, kLegendSwatchWidth, h));
    painter.setPen(kText);
    painter.drawText(r.adjusted(kLegendSwatchWidth + kLegendSwatchGap, 0, 0, 0),
                     Qt::AlignLeft | Qt::AlignVCenter, e.label);
  });
  painter.restore();
}

// ---- painting ---------------------------------------------------------------------------------

int timeline_height(const TimelineIndex* index) {
  const size_t lanes = index ? index->lanes.size() : 6;
  return kTimelineRulerHeight + static_cast<int>(lanes) * kTimelineLaneHeight + 1;
}

int timeline_lane_height(const QRect& area, size_t lane_count) {
  if (lane_count == 0) return kTimelineLaneHeight;
  const int available = area.height() - kTimelineRulerHeight - 1;
  return std::clamp(available / static_cast<int>(lane_count), kTimelineMinLaneHeight,
                    kTimelineMaxLaneHeight);
}

QRect timeline_lane_rect(const QRect& area, const TimelineIndex& index, size_t lane) {
  const int h = timeline_lane_height(area, index.lanes.size());
  return QRect(area.left(), area.top() + kTimelineRulerHeight + static_cast<int>(lane) * h,
               area.width(), h);
}

namespace {

// The mapping of one frame, shared by painting and hit testing so that both agree on pixels.
struct View {
  QRect plot;
  int64_t begin = 0;
  int64_t end = 1;
  double ns_per_px = 1.0;

  View(const QRect& area, int64_t view_begin, int64_t view_end)
      : plot(time_plot_rect(area)), begin(view_begin), end(std::max(view_end, view_begin + 1)) {
    ns_per_px = static_cast<double>(end - begin) / plot.width();
  }
  double x_of(int64_t t) const { return plot.left() + static_cast<double>(t - begin) / ns_per_px; }
  // The pixel column holding t, clamped a little outside the plot (no int overflow far away).
  int column(int64_t t) const {
    const double x = std::clamp(std::floor(x_of(t)), plot.left() - 2.0, plot.right() + 2.0);
    return static_cast<int>(x);
  }
  int column_end(int64_t t) const {  // first column wholly after t
    const double x = std::clamp(std::ceil(x_of(t)), plot.left() - 2.0, plot.right() + 2.0);
    return static_cast<int>(x);
  }
  // The first time that falls in column c or later.
  int64_t time_at_column(int c) const {
    return begin + to_ns(std::ceil((c - plot.left()) * ns_per_px));
  }
  int64_t time_at_x(double x) const { return begin + to_ns((x - plot.left()) * ns_per_px); }
};

// Where a lane's bars go: the plot's columns of its row, less a margin that grows with the row.
QRect lane_band(const View& v, const QRect& row) {
  const int margin = std::max(2, row.height() / 10);
  return QRect(v.plot.left(), row.top() + margin, v.plot.width(), row.height() - 2 * margin);
}

// Zoomed in this far (at most about one event per column in view) a set is drawn event by event.
int detail_budget(const View& v) { return std::max(64, v.plot.width()); }

struct VisibleEvents {
  size_t first = 0;
  size_t last = 0;
};

// Events that may intersect [from, to]: sorted by start, so those starting after `to` are out and
// those starting before `from - max duration` have ended.
VisibleEvents candidates(const TimelineIntervals& set, int64_t from, int64_t to) {
  const auto b = set.start.begin();
  const auto first = std::lower_bound(b, set.start.end(), from - set.max_duration_ns);
  const auto last = std::upper_bound(first, set.start.end(), to);
  return {static_cast<size_t>(first - b), static_cast<size_t>(last - b)};
}

bool draw_in_detail(const TimelineIntervals& set, const View& v) {
  const VisibleEvents c = candidates(set, v.begin, v.end);
  return c.last - c.first <= static_cast<size_t>(detail_budget(v));
}

// The coarsest level that merges no gap wider than a pixel: what it hides, no one could see.
const TimelineLevel& pick_level(const TimelineIntervals& set, const View& v) {
  size_t k = 0;
  while (k + 1 < set.levels.size() &&
         static_cast<double>(set.levels[k + 1].threshold_ns) <= v.ns_per_px) {
    ++k;
  }
  return set.levels[k];
}

QColor set_colour(const TimelineLane& lane, const TimelineIntervals& set) {
  if (&set == &lane.steps) return kind_colour(EventKind::Step);
  switch (lane.kind) {
    case LaneKind::Phases:
      return kind_colour(EventKind::Forward);
    case LaneKind::Compute:
      return kind_colour(EventKind::Compute);
    case LaneKind::CopyD2H:
      return kind_colour(EventKind::CopyD2H);
    case LaneKind::CopyH2D:
      return kind_colour(EventKind::CopyH2D);
    case LaneKind::Waits:
      return kind_colour(EventKind::Wait);
    case LaneKind::PackUnpack:
      return kind_colour(EventKind::Pack);
    case LaneKind::Disk:
      return kind_colour(EventKind::DiskWrite);
  }
  return kind_colour(EventKind::Compute);
}

class Painter {
 public:
  Painter(QPainter& p, const TimelineIndex& index, const View& v)
      : p_(p), index_(index), v_(v), fm_(p.font()) {}

  RenderStats stats;

  void intervals(const TimelineLane& lane, const TimelineIntervals& set, const QRect& row) {
    if (set.size() == 0) return;
    if (draw_in_detail(set, v_)) {
      ++stats.detail_sets;
      detail(set, row, set_colour(lane, set),
             lane.kind == LaneKind::Phases || lane.kind == LaneKind::Disk);
    } else {
      ++stats.merged_sets;
      merged(lane, set, pick_level(set, v_), row, set_colour(lane, set));
    }
  }

  // Arrows from the copies to the waits that waited on them, both ends in view; none when more
  // than the cap end in view (zoomed out they would be a smear) and one per pixel column.
  void arrows(const QRect& area, size_t waits_lane) {
    const auto& flows = index_.flows;
    if (flows.empty()) return;
    const auto by_end = [](const TimelineFlow& f, int64_t t) { return f.to_ns < t; };
    const auto first = std::lower_bound(flows.begin(), flows.end(), v_.begin, by_end);
    const auto last = std::lower_bound(first, flows.end(), v_.end + 1, by_end);
    const int cap = std::min(kTimelineMaxArrows, v_.plot.width() / 4);
    if (last - first > cap) return;
    const QRect waits = lane_band(v_, timeline_lane_rect(area, index_, waits_lane));
    p_.save();
    p_.setRenderHint(QPainter::Antialiasing, true);
    p_.setPen(QPen(kArrow, 1.2));
    p_.setBrush(kArrow);
    int last_column = std::numeric_limits<int>::min();
    for (auto it = first; it != last; ++it) {
      ++stats.visited;
      if (it->from_ns < v_.begin || it->from_ns > v_.end) continue;
      const int column = v_.column(it->to_ns);
      if (column == last_column) continue;
      last_column = column;
      const QRect from = lane_band(v_, timeline_lane_rect(area, index_, it->from_lane));
      const bool down = from.top() < waits.top();
      const QPointF a(v_.x_of(it->from_ns), down ? from.bottom() + 1.0 : from.top());
      const QPointF b(v_.x_of(it->to_ns), down ? waits.top() : waits.bottom() + 1.0);
      arrow(a, b);
      ++stats.arrows;
      stats.primitives += 2;
    }
    p_.restore();
  }

  void instants(const TimelineInstants& set, const QRect& half, const QColor& colour) {
    const auto b = set.time.begin();
    auto it = std::lower_bound(b, set.time.end(), v_.begin);
    const auto last = std::upper_bound(it, set.time.end(), v_.end);
    // One tick per column that holds instants, taller where more of them fall: a thousand packs
    // in a pixel are one rect, found by a binary search rather than walked.
    while (it < last) {
      const int col = v_.column(*it);
      const auto next = std::max(it + 1, std::lower_bound(it, last, v_.time_at_column(col + 1)));
      const double n = static_cast<double>(next - it);
      const double share = std::min(1.0, 0.6 + 0.1 * std::log2(n));
      const int h = std::max(3, static_cast<int>(std::lround(half.height() * share)));
      p_.fillRect(QRect(col, half.bottom() - h + 1, 1, h), colour);
      ++stats.primitives;
      ++stats.visited;
      it = next;
    }
  }

 private:
  // A line from a to b with a filled head at b (pen and brush set by the caller).
  void arrow(const QPointF& a, const QPointF& b) {
    const double dx = b.x() - a.x();
    const double dy = b.y() - a.y();
    const double length = std::hypot(dx, dy);
    if (length < 1.0) return;
    const double ux = dx / length;
    const double uy = dy / length;
    const double head = std::min(7.0, length * 0.6);
    const QPointF base(b.x() - ux * head, b.y() - uy * head);
    p_.drawLine(a, base);
    const QPointF tip[] = {b, QPointF(base.x() - uy * head * 0.45, base.y() + ux * head * 0.45),
                           QPointF(base.x() + uy * head * 0.45, base.y() - ux * head * 0.45)};
    p_.drawPolygon(tip, 3);
  }

  void detail(const TimelineIntervals& set, const QRect& row, const QColor& lane_colour,
              bool colour_by_kind) {
    const VisibleEvents c = candidates(set, v_.begin, v_.end);
    for (size_t k = c.first; k < c.last; ++k) {
      if (set.end[k] < v_.begin) continue;
      ++stats.visited;
      const TimelineEventInfo& info = set.info[k];
      const int x0 = std::max(v_.column(set.start[k]), v_.plot.left());
      int x1 = std::min(v_.column_end(set.end[k]), v_.plot.right() + 1);
      if (x1 <= x0) x1 = x0 + 1;
      // Back-to-back events (copies queue on one stream) keep a one-pixel seam between them: the
      // column before the one holding the end is the last one drawn.
      if (x1 - x0 >= 5) x1 = std::min(x1, v_.column(set.end[k])) - 1;
      const QRect r(x0, row.top(), x1 - x0, row.height());
      const QColor colour = colour_by_kind ? kind_colour(info.kind) : lane_colour;
      p_.fillRect(r, colour);
      ++stats.primitives;
      if (info.flags & kFlagPageable) {
        const int h = std::min(row.height(), pageable_band(row.height()));
        stats.primitives += fill_pageable(p_, QRect(x0, row.bottom() - h + 1, r.width(), h));
      }
      if (info.flags & kFlagPrefetch) {
        p_.fillRect(QRect(x0, row.top(), r.width(), prefetch_band(row.height())), kPrefetch);
        ++stats.primitives;
      }
      if (r.width() >= 40 && info.name != 0) {
        p_.setPen(colour.lightness() > 150 ? kText : Qt::white);
        const QRect text = r.adjusted(3, 0, -3, 0);
        const QString name = QString::fromStdString(index_.names[info.name]);
        p_.drawText(text, Qt::AlignVCenter | Qt::AlignLeft,
                    fm_.elidedText(name, Qt::ElideRight, text.width()));
      }
    }
  }

  // Runs of blocks that meet within a pixel column are one rect; its shade says how busy the run
  // is, so that a sparse cluster does not look like a solid bar.
  void merged(const TimelineLane& lane, const TimelineIntervals& set, const TimelineLevel& level,
              const QRect& row, const QColor& lane_colour) {
    const bool phases = &set == &lane.spans && lane.kind == LaneKind::Phases;
    const auto sb = level.start.begin();
    const auto se = level.start.end();
    size_t i = static_cast<size_t>(std::upper_bound(level.end.begin(), level.end.end(), v_.begin) -
                                   level.end.begin());
    const size_t n = level.size();
    while (i < n && level.start[i] <= v_.end) {
      const size_t first = i;
      const int x0 = std::max(v_.column(level.start[i]), v_.plot.left());
      int64_t run_end = level.end[i];
      size_t last = i + 1;  // exclusive
      for (;;) {
        ++stats.visited;
        const int x1 = std::max(v_.column_end(run_end), x0 + 1);
        // Blocks starting in the run's last column or the next one join it: no gap would show.
        const int64_t limit = v_.time_at_column(x1 + 1);
        const size_t next = static_cast<size_t>(
            std::lower_bound(sb + static_cast<std::ptrdiff_t>(last), se, limit) - sb);
        if (next == last) break;
        last = next;
        run_end = std::max(run_end, level.end[last - 1]);  // ends are sorted at a level
        if (run_end >= v_.end) break;
      }
      const int x1 = std::min(std::max(v_.column_end(run_end), x0 + 1), v_.plot.right() + 1);
      const QRect r(x0, row.top(), std::max(1, x1 - x0), row.height());
      const double span = static_cast<double>(std::max<int64_t>(1, run_end - level.start[first]));
      const double density =
          std::clamp(static_cast<double>(level.busy(first, last)) / span, 0.0, 1.0);
      QColor base = lane_colour;
      if (phases) {
        const double fwd =
            static_cast<double>(TimelineLevel::flagged(level.cum_forward, first, last)) /
            static_cast<double>(std::max<int64_t>(1, level.count(first, last)));
        base = mix(kind_colour(EventKind::Backward), kind_colour(EventKind::Forward), fwd);
      }
      p_.fillRect(r, merged_tint(base, density));
      ++stats.primitives;
      if (const int64_t prefetched = TimelineLevel::flagged(level.cum_prefetch, first, last)) {
        // The strip darkens with the share of prefetched reloads in the run.
        const double share = static_cast<double>(prefetched) /
                             static_cast<double>(std::max<int64_t>(1, level.count(first, last)));
        p_.fillRect(QRect(r.left(), row.top(), r.width(), prefetch_band(row.height())),
                    mix(base, kPrefetch, 0.2 + 0.8 * share));
        ++stats.primitives;
      }
      i = last;
    }
    pageable_marks(set, row);
  }

  // Pageable copies are few and matter (each is a synchronous, slow copy): marked where they are
  // at every zoom rather than smeared over a merged run, one rect per column at most.
  void pageable_marks(const TimelineIntervals& set, const QRect& row) {
    const auto& marks = set.pageable;
    const auto by_start = [&set](uint32_t e, int64_t t) { return set.start[e] < t; };
    auto it =
        std::lower_bound(marks.begin(), marks.end(), v_.begin - set.max_duration_ns, by_start);
    const auto last = std::lower_bound(it, marks.end(), v_.end + 1, by_start);
    while (it < last) {
      if (set.end[*it] < v_.begin) {
        ++it;
        continue;
      }
      const int x0 = std::max(v_.column(set.start[*it]), v_.plot.left());
      int64_t run_end = set.end[*it];
      auto next = it + 1;
      for (;;) {
        ++stats.visited;
        const int x1 = std::max(v_.column_end(run_end), x0 + 1);
        const auto after = std::lower_bound(next, last, v_.time_at_column(x1 + 1), by_start);
        if (after == next) break;
        // The last one skipped ends latest unless copies overlap, and then by less than the
        // pixel they all start in.
        run_end = std::max(run_end, set.end[*(after - 1)]);
        next = after;
      }
      const int x1 = std::min(std::max(v_.column_end(run_end), x0 + 1), v_.plot.right() + 1);
      const int h = std::min(row.height(), pageable_band(row.height()));
      stats.primitives +=
          fill_pageable(p_, QRect(x0, row.bottom() - h + 1, std::max(1, x1 - x0), h));
      it = next;
    }
  }

  QPainter& p_;
  const TimelineIndex& index_;
  const View& v_;
  QFontMetrics fm_;
};

struct RulerStep {
  int64_t step = 1;
  int64_t unit = 1;  // of the labels
  int decimals = 0;  // of the labels
};

// A 1-2-5 step with at least `min_px` between ticks. Labels are in the step's unit, or in a
// coarser one with the decimals the step needs when the largest label would have five digits
// ("12.002 s", not "12002 ms"); one unit for the whole ruler, so that labels never change form
// halfway along it.
RulerStep ruler_step(double ns_per_px, double min_px, int64_t largest_label) {
  const double want = std::max(1.0, ns_per_px * min_px);
  RulerStep r;
  int64_t decade = 1;
  for (;;) {
    bool found = false;
    for (int64_t m : {1, 2, 5}) {
      if (static_cast<double>(m * decade) >= want) {
        r.step = m * decade;
        found = true;
        break;
      }
    }
    if (found || decade > int64_t{1} << 58) break;
    decade *= 10;
  }
  for (int64_t unit : {int64_t{1'000}, int64_t{1'000'000}, int64_t{1'000'000'000}}) {
    if (r.step >= unit) r.unit = unit;
  }
  while (r.unit < 1'000'000'000 && std::llabs(largest_label) / r.unit >= 10'000) {
    r.unit *= 1000;
    r.decimals += 3;
  }
  return r;
}

QString tick_label(int64_t rel, const RulerStep& r) {
  const char* name = r.unit >= 1'000'000'000 ? "s"
                     : r.unit >= 1'000'000   ? "ms"
                     : r.unit >= 1'000       ? "\u00b5s"
                                             : "ns";
  return QStringLiteral("%1 %2")
      .arg(static_cast<double>(rel) / static_cast<double>(r.unit), 0, 'f', r.decimals)
      .arg(QString::fromUtf8(name));
}

}  // namespace

void render_timeline(QPainter& painter, const QRect& area, const TimelineIndex& index,
                     int64_t view_begin, int64_t view_end, RenderStats* out) {
  const View v(area, view_begin, view_end);
  Painter paint(painter, index, v);
  painter.save();
  painter.setClipRect(area, Qt::IntersectClip);  // lanes that do not fit are cut, not spilled
  painter.setRenderHint(QPainter::Antialiasing, false);
  painter.fillRect(area, kBackground);

  // Ruler ticks and the grid through the lanes beneath them.
  const QRect ruler(v.plot.left(), area.top(), v.plot.width(), kTimelineRulerHeight);
  painter.fillRect(QRect(area.left(), area.top(), area.width(), kTimelineRulerHeight),
                   kRulerBackground);
  const int lanes_bottom =
      std::min(area.bottom(), timeline_lane_rect(area, index, index.lanes.size()).top());
  const int64_t origin = index.begin_ns;
  const int64_t rel0 = v.begin - origin;
  const RulerStep step =
      ruler_step(v.ns_per_px, 90.0, std::max(std::llabs(rel0), std::llabs(v.end - origin)));
  // First multiple of the step at or after the view's start (floor division for negatives).
  int64_t tick = (rel0 / step.step) * step.step;
  if (tick < rel0) tick += step.step;
  const QFontMetrics fm(painter.font());
  for (; origin + tick <= v.end; tick += step.step) {
    const int x = v.column(origin + tick);
    painter.setPen(kGrid);
    painter.drawLine(x, ruler.bottom() + 1, x, lanes_bottom);
    painter.setPen(kSeparator);
    painter.drawLine(x, ruler.bottom() - 5, x, ruler.bottom());
    paint.stats.primitives += 2;
    const QString label = tick_label(tick, step);
    if (x + 3 + fm.horizontalAdvance(label) > v.plot.right()) continue;  // cut by the margin
    painter.setPen(kText);
    painter.drawText(QRect(x + 3, ruler.top(), 120, ruler.height() - 4),
                     Qt::AlignLeft | Qt::AlignVCenter, label);
  }
  painter.setPen(kSeparator);
  painter.drawLine(area.left(), ruler.bottom(), area.right(), ruler.bottom());
  ++paint.stats.primitives;

  for (size_t l = 0; l < index.lanes.size(); ++l) {
    const TimelineLane& lane = index.lanes[l];
    const QRect row = timeline_lane_rect(area, index, l);
    if (row.top() > area.bottom()) break;
    const QRect band = lane_band(v, row);
    switch (lane.kind) {
      case LaneKind::Phases: {
        // Forward and backward inside the step, which shows above and below them.
        const int inset = std::max(4, band.height() / 6);
        paint.intervals(lane, lane.steps, band);
        paint.intervals(lane, lane.spans, band.adjusted(0, inset, 0, -inset));
        break;
      }
      case LaneKind::PackUnpack: {
        const int half = band.height() / 2;
        paint.instants(lane.packs, QRect(band.left(), band.top(), band.width(), half),
                       kind_colour(EventKind::Pack));
        paint.instants(lane.unpacks,
                       QRect(band.left(), band.top() + half, band.width(), band.height() - half),
                       kind_colour(EventKind::Unpack));
        break;
      }
      default:
        paint.intervals(lane, lane.spans, band);
        break;
    }
    painter.setPen(kSeparator);
    painter.drawLine(area.left(), row.bottom(), area.right(), row.bottom());
    ++paint.stats.primitives;
  }

  if (const TimelineLane* waits = index.lane(LaneKind::Waits)) {
    paint.arrows(area, static_cast<size_t>(waits - index.lanes.data()));
  }

  // The gutter last, over anything a clamped rect left at the plot's edge.
  painter.fillRect(QRect(area.left(), area.top(), kTimeGutter, area.height()), kGutterBackground);
  painter.fillRect(
      QRect(v.plot.right() + 1, area.top(), area.right() - v.plot.right(), area.height()),
      kBackground);
  painter.setPen(kText);
  for (size_t l = 0; l < index.lanes.size(); ++l) {
    const QRect row = timeline_lane_rect(area, index, l);
    if (row.top() > area.bottom()) break;
    painter.drawText(row.adjusted(6, 0, -(row.width() - kTimeGutter) - 4, 0),
                     Qt::AlignLeft | Qt::AlignVCenter,
                     fm.elidedText(QString::fromStdString(index.lanes[l].label), Qt::ElideRight,
                                   kTimeGutter - 10));
  }
  paint.stats.primitives += 2;
  painter.restore();
  if (out) *out = paint.stats;
}

// ---- tooltips ---------------------------------------------------------------------------------

namespace {

QString describe_event(const TimelineIndex& index, int64_t start, int64_t end,
                       const TimelineEventInfo& info, bool instant) {
  QStringList lines;
  QString head = QString::fromUtf8(profiler::to_string(info.kind));
  if (info.flags & kFlagPageable) head += QStringLiteral(" (pageable)");
  if (info.flags & kFlagPrefetch) head += QStringLiteral(" (prefetch)");
  lines << head;
  lines << QStringLiteral("start +%1")
               .arg(format_duration_ns(static_cast<double>(start - index.begin_ns)));
  if (!instant)
    lines
        << QStringLiteral("duration %1").arg(format_duration_ns(static_cast<double>(end - start)));
  if (info.bytes > 0) {
    lines << QStringLiteral("bytes %1 (%2)")
                 .arg(format_bytes(static_cast<double>(info.bytes)))
                 .arg(info.bytes);
  }
  if (info.tensor >= 0) lines << QStringLiteral("tensor %1").arg(info.tensor);
  if (info.name != 0 && info.name < index.names.size()) {
    lines << QStringLiteral("name %1").arg(QString::fromStdString(index.names[info.name]));
  }
  lines << QStringLiteral("stream %1").arg(info.stream);
  if (info.kind == EventKind::Wait) {
    // The copy it waited on, when known: the flow ending at this wait.
    const TimelineLane* waits = index.lane(LaneKind::Waits);
    const auto by_end = [](const TimelineFlow& f, int64_t t) { return f.to_ns < t; };
    for (auto it = std::lower_bound(index.flows.begin(), index.flows.end(), end, by_end);
         waits && it != index.flows.end() && it->to_ns == end; ++it) {
      if (waits->spans.start[it->wait] != start) continue;
      const TimelineIntervals& copies = index.lanes[it->from_lane].spans;
      lines << QStringLiteral("waited on %1 +%2 \u2013 +%3")
                   .arg(QString::fromStdString(index.lanes[it->from_lane].label))
                   .arg(format_duration_ns(
                       static_cast<double>(copies.start[it->copy] - index.begin_ns)))
                   .arg(format_duration_ns(static_cast<double>(it->from_ns - index.begin_ns)));
      break;
    }
  }
  return lines.join(QLatin1Char('\n'));
}

QString describe_blocks(const TimelineIndex& index, const TimelineLevel& level, size_t first,
                        size_t last) {
  QStringList lines;
  const int64_t count = level.count(first, last);
  lines << QStringLiteral("%1 events, total %2")
               .arg(count)
               .arg(format_bytes(static_cast<double>(level.bytes(first, last))));
  const int64_t from = level.start[first];
  const int64_t to = level.end[last - 1];
  lines << QStringLiteral("+%1 \u2013 +%2")
               .arg(format_duration_ns(static_cast<double>(from - index.begin_ns)))
               .arg(format_duration_ns(static_cast<double>(to - index.begin_ns)));
  const double busy = 100.0 * static_cast<double>(level.busy(first, last)) /
                      static_cast<double>(std::max<int64_t>(1, to - from));
  lines << QStringLiteral("busy %1 %").arg(busy, 0, 'f', 1);
  if (const int64_t p = TimelineLevel::flagged(level.cum_pageable, first, last)) {
    lines << QStringLiteral("%1 pageable").arg(p);
  }
  if (const int64_t p = TimelineLevel::flagged(level.cum_prefetch, first, last)) {
    lines << QStringLiteral("%1 prefetch").arg(p);
  }
  return lines.join(QLatin1Char('\n'));
}

// The event of `set` (drawn event by event) at t, within two pixels: under the cursor beats near
// it; among those, the shortest (the innermost). set.size() for none.
size_t event_at(const TimelineIntervals& set, const View& v, int64_t t) {
  const int64_t tol = std::max<int64_t>(1, to_ns(2.0 * v.ns_per_px));
  const VisibleEvents c = candidates(set, t - tol, t + tol);
  size_t best = set.size();
  int64_t best_score = std::numeric_limits<int64_t>::max();
  for (size_t k = c.first; k < c.last; ++k) {
    if (set.end[k] < t - tol) continue;
    const int64_t distance =
        t < set.start[k] ? set.start[k] - t : std::max<int64_t>(0, t - set.end[k]);
    const int64_t score = distance > 0 ? (int64_t{1} << 62) + distance : set.end[k] - set.start[k];
    if (score < best_score) {
      best_score = score;
      best = k;
    }
  }
  return best;
}

QString intervals_tooltip(const TimelineIndex& index, const TimelineIntervals& set, const View& v,
                          int64_t t) {
  if (set.size() == 0) return {};
  const int64_t tol = std::max<int64_t>(1, to_ns(2.0 * v.ns_per_px));
  if (draw_in_detail(set, v)) {
    const size_t best = event_at(set, v, t);
    if (best == set.size()) return {};
    return describe_event(index, set.start[best], set.end[best], set.info[best], false);
  }
  const TimelineLevel& level = pick_level(set, v);
  const size_t first = static_cast<size_t>(
      std::lower_bound(level.end.begin(), level.end.end(), t - tol) - level.end.begin());
  const size_t last = static_cast<size_t>(
      std::upper_bound(level.start.begin(), level.start.end(), t + tol) - level.start.begin());
  if (first >= last) return {};
  if (level.count(first, last) == 1) {
    // One event: its block is exactly it.
    const auto it = std::lower_bound(set.start.begin(), set.start.end(), level.start[first]);
    const size_t k = static_cast<size_t>(it - set.start.begin());
    if (k < set.size()) return describe_event(index, set.start[k], set.end[k], set.info[k], false);
  }
  return describe_blocks(index, level, first, last);
}

QString instants_tooltip(const TimelineIndex& index, const TimelineInstants& set, const View& v,
                         int64_t t, const char* what) {
  const int64_t tol = std::max<int64_t>(1, to_ns(3.0 * v.ns_per_px));
  const auto b = set.time.begin();
  const size_t first = static_cast<size_t>(std::lower_bound(b, set.time.end(), t - tol) - b);
  const size_t last = static_cast<size_t>(std::upper_bound(b, set.time.end(), t + tol) - b);
  if (first >= last) return {};
  if (last - first == 1)
    return describe_event(index, set.time[first], set.time[first], set.info[first], true);
  return QStringLiteral("%1 %2, total %3\n+%4 \u2013 +%5")
      .arg(last - first)
      .arg(QString::fromUtf8(what))
      .arg(format_bytes(static_cast<double>(set.cum_bytes[last] - set.cum_bytes[first])))
      .arg(format_duration_ns(static_cast<double>(set.time[first] - index.begin_ns)))
      .arg(format_duration_ns(static_cast<double>(set.time[last - 1] - index.begin_ns)));
}

// The tensor of the one event drawn at t (within a few pixels) in `set`, when it is drawn event by
// event and has one; else -1.
int64_t interval_tensor_at(const TimelineIntervals& set, const View& v, int64_t t) {
  if (set.size() == 0 || !draw_in_detail(set, v)) return -1;
  const size_t k = event_at(set, v, t);
  return k == set.size() ? -1 : set.info[k].tensor;
}

int64_t instant_tensor_at(const TimelineInstants& set, const View& v, int64_t t) {
  const int64_t tol = std::max<int64_t>(1, to_ns(3.0 * v.ns_per_px));
  const auto b = set.time.begin();
  const size_t first = static_cast<size_t>(std::lower_bound(b, set.time.end(), t - tol) - b);
  const size_t last = static_cast<size_t>(std::upper_bound(b, set.time.end(), t + tol) - b);
  return last - first == 1 ? set.info[first].tensor : -1;
}

}  // namespace

int64_t timeline_tensor_at(const TimelineIndex& index, const QRect& area, int64_t view_begin,
                           int64_t view_end, const QPoint& pos) {
  const View v(area, view_begin, view_end);
  if (!area.contains(pos) || pos.y() < area.top() + kTimelineRulerHeight) return -1;
  if (pos.x() < v.plot.left() || pos.x() > v.plot.right()) return -1;
  const int lane_height = timeline_lane_height(area, index.lanes.size());
  const int row_index = (pos.y() - area.top() - kTimelineRulerHeight) / lane_height;
  if (row_index < 0 || static_cast<size_t>(row_index) >= index.lanes.size()) return -1;
  const TimelineLane& lane = index.lanes[static_cast<size_t>(row_index)];
  const int64_t t = v.time_at_x(pos.x() + 0.5);
  switch (lane.kind) {
    case LaneKind::Phases:
      return -1;
    case LaneKind::PackUnpack: {
      const int64_t packed = instant_tensor_at(lane.packs, v, t);
      return packed >= 0 ? packed : instant_tensor_at(lane.unpacks, v, t);
    }
    default:
      return interval_tensor_at(lane.spans, v, t);
  }
}

QString timeline_tooltip(const TimelineIndex& index, const QRect& area, int64_t view_begin,
                         int64_t view_end, const QPoint& pos) {
  const View v(area, view_begin, view_end);
  if (!area.contains(pos)) return {};
  const int64_t t = v.time_at_x(pos.x() + 0.5);
  if (pos.y() < area.top() + kTimelineRulerHeight) {
    if (pos.x() < v.plot.left()) return {};
    return QStringLiteral("+%1").arg(format_duration_ns(static_cast<double>(t - index.begin_ns)));
  }
  const int lane_height = timeline_lane_height(area, index.lanes.size());
  const int row_index = (pos.y() - area.top() - kTimelineRulerHeight) / lane_height;
  if (row_index < 0 || static_cast<size_t>(row_index) >= index.lanes.size()) return {};
  const TimelineLane& lane = index.lanes[static_cast<size_t>(row_index)];
  const QRect row = timeline_lane_rect(area, index, static_cast<size_t>(row_index));
  if (pos.x() < v.plot.left()) {
    const size_t n =
        lane.spans.size() + lane.steps.size() + lane.packs.size() + lane.unpacks.size();
    return QStringLiteral("%1: %2 events").arg(QString::fromStdString(lane.label)).arg(n);
  }
  if (pos.x() > v.plot.right()) return {};
  switch (lane.kind) {
    case LaneKind::Phases: {
      QString s = intervals_tooltip(index, lane.spans, v, t);
      return s.isEmpty() ? intervals_tooltip(index, lane.steps, v, t) : s;
    }
    case LaneKind::PackUnpack: {
      const bool top = pos.y() < row.top() + row.height() / 2;
      QString s = top ? instants_tooltip(index, lane.packs, v, t, "packs")
                      : instants_tooltip(index, lane.unpacks, v, t, "unpacks");
      if (s.isEmpty()) {
        s = top ? instants_tooltip(index, lane.unpacks, v, t, "unpacks")
                : instants_tooltip(index, lane.packs, v, t, "packs");
      }
      return s;
    }
    default:
      return intervals_tooltip(index, lane.spans, v, t);
  }
}

}  // namespace offtune::gui
