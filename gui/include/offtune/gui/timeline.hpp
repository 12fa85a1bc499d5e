// The run view's timeline: a shared time axis, an index of one run's timeline events built off the
// GUI thread, and the widget that paints it. The index keeps, per lane, the events sorted by start
// plus a level-of-detail pyramid (intervals closer than a gap threshold merged, the threshold at
// least doubling per level), so that a frame costs about one binary search per drawn pixel run,
// not one step per event: a million events pan and zoom as fluidly as a thousand. The same
// painting code runs in the widget and, for tests and the benchmark, into any QPainter. Code:
// timeline_index.cpp (the index), timeline_paint.cpp (painting), timeline_widget.cpp (widgets).
//
// Lanes share the height they are given (between kTimelineMinLaneHeight and kTimelineMaxLaneHeight
// each), so that the splitter between the timeline and the charts sizes them. Every kind of event
// has a colour of its own, distinct from the other kinds' and from the run charts' series under
// colour-blind simulation too; the widget draws a legend beneath the lanes. A wait is linked to the
// copy it waited on (same tensor; the latest such copy started before the wait ended: D2H for a
// forward-window wait, H2D for a reload), and the link is drawn as an arrow from the copy's end to
// the wait's end when few enough of them are in view.
#pragma once

#include <QColor>
#include <QObject>
#include <QPixmap>
#include <QPointer>
#include <QRect>
#include <QString>
#include <QWidget>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "offtune/gui/data.hpp"
#include "offtune/profiler/records.hpp"

class QFontMetrics;
class QPainter;

namespace offtune::gui {

// Left gutter (lane labels, y labels) and right margin of every time-based widget, in px: the
// timeline and the run charts use the same ones so that one time falls on the same x in both.
inline constexpr int kTimeGutter = 100;
inline constexpr int kTimeRightMargin = 12;

// The plot's columns inside a widget's rectangle: `area` minus the gutter and the right margin
// (full height).
QRect time_plot_rect(const QRect& area);

// The time span of a run's records: every event, step and occupancy sample ({0, 0} when none).
// The timeline's ruler and the charts' tooltips show times relative to its start.
std::pair<int64_t, int64_t> run_time_bounds(const RunData& run);

// "850 ns", "12.40 µs", "3.250 ms", "1.204 s".
QString format_duration_ns(double ns);
// profiler::format_size(bytes, decimals) as a QString: "512 B", "4.00 KiB", "1.50 MiB".
QString format_bytes(double bytes, int decimals = 2);

// The visible time range shared by the timeline and the charts of one run, in ns on the run's
// clock. The view always lies inside the bounds and spans at least kMinSpanNs (or the whole bounds
// when they are shorter): below a microsecond over a few hundred pixels a pixel would be less
// than a nanosecond, finer than any recorded timestamp.
class TimeAxis : public QObject {
  Q_OBJECT

 public:
  static constexpr int64_t kMinSpanNs = 1000;

  explicit TimeAxis(QObject* parent = nullptr);

  // The full data range (end < begin is swapped; an empty range becomes 1 ns). Resets the view to
  // it.
  void setBounds(int64_t begin, int64_t end);
  int64_t boundsBegin() const { return bounds_begin_; }
  int64_t boundsEnd() const { return bounds_end_; }
  std::pair<int64_t, int64_t> bounds() const { return {bounds_begin_, bounds_end_}; }

  // Clamped: the span to [min span, bounds span], then shifted inside the bounds.
  void setView(int64_t begin, int64_t end);
  int64_t viewBegin() const { return view_begin_; }
  int64_t viewEnd() const { return view_end_; }
  int64_t viewSpan() const { return view_end_ - view_begin_; }
  int64_t minSpan() const;

  // factor > 1 zooms in; the time at `anchor_fraction` of the view (0 = left, 1 = right) stays
  // where it is unless the clamping to the bounds has to move it.
  void zoomAt(double anchor_fraction, double factor);
  // Moves the view by a fraction of its span (> 0: later), stopping at the bounds.
  void panBy(double fraction_of_view);
  void resetView();

  // x in [0, width] of a time in the view, and back (x relative to the plot's left edge).
  double toX(int64_t t, double width) const;
  int64_t toTime(double x, double width) const;

 Q_SIGNALS:
  void viewChanged();

 private:
  int64_t bounds_begin_ = 0;
  int64_t bounds_end_ = 1;
  int64_t view_begin_ = 0;
  int64_t view_end_ = 1;
};

// What an event was, for tooltips and colours (the index does not keep the RunData).
struct TimelineEventInfo {
  int64_t bytes = 0;
  int64_t tensor = -1;
  int64_t stream = 0;
  uint32_t name = 0;  // into TimelineIndex::names; 0 = ""
  profiler::EventKind kind = profiler::EventKind::Compute;
  uint8_t flags = 0;  // TimelineFlag bits
};

enum TimelineFlag : uint8_t {
  kFlagPageable = 1,  // a copy from/to pageable host memory (slow, synchronous)
  kFlagPrefetch = 2,  // a reload issued ahead of use
  kFlagForward = 4,   // phases: a forward pass (else backward)
};

// One level of detail: disjoint blocks sorted by start (so ends are sorted too), each the union of
// events whose gaps were at most threshold_ns. Per-block figures are prefix sums over blocks, so
// that any run of blocks sums in O(1): entry i is the total of blocks [0, i), size() + 1 entries.
// The flag counts are empty when no event of the set has the flag.
struct TimelineLevel {
  int64_t threshold_ns = 0;
  std::vector<int64_t> start;
  std::vector<int64_t> end;
  std::vector<int64_t> cum_count;
  std::vector<int64_t> cum_bytes;
  std::vector<int64_t> cum_busy;  // ns covered by at least one event
  std::vector<uint32_t> cum_pageable;
  std::vector<uint32_t> cum_prefetch;
  std::vector<uint32_t> cum_forward;

  size_t size() const { return start.size(); }
  int64_t count(size_t first, size_t last) const { return cum_count[last] - cum_count[first]; }
  int64_t bytes(size_t first, size_t last) const { return cum_bytes[last] - cum_bytes[first]; }
  int64_t busy(size_t first, size_t last) const { return cum_busy[last] - cum_busy[first]; }
  static int64_t flagged(const std::vector<uint32_t>& cum, size_t first, size_t last) {
    return cum.empty() ? 0 : int64_t{cum[last]} - int64_t{cum[first]};
  }
};

// Intervals of one (sub)lane: the events sorted by start (they may overlap), and the pyramid.
// levels[0] merges only overlapping or touching events; each next level merges gaps up to a
// threshold at least twice the previous one, chosen so that a level has at most about half the
// blocks of the one below; the last level has few blocks. Empty sets have no levels.
struct TimelineIntervals {
  std::vector<int64_t> start;
  std::vector<int64_t> end;
  std::vector<TimelineEventInfo> info;
  int64_t max_duration_ns = 0;     // bounds the backwards search for events still running
  std::vector<uint32_t> pageable;  // events with kFlagPageable, by start: marked at every zoom
  std::vector<TimelineLevel> levels;

  size_t size() const { return start.size(); }
};

// Instants sorted by time, with prefix sums of bytes.
struct TimelineInstants {
  std::vector<int64_t> time;
  std::vector<TimelineEventInfo> info;
  std::vector<int64_t> cum_bytes;  // size() + 1

  size_t size() const { return time.size(); }
};

enum class LaneKind { Phases, Compute, CopyD2H, CopyH2D, Waits, PackUnpack, Disk };

struct TimelineLane {
  LaneKind kind = LaneKind::Compute;
  std::string label;         // "phases", "compute", "compute s7", "copy D2H", ...
  int64_t stream = -1;       // compute lanes split by stream: the stream; else -1
  TimelineIntervals spans;   // phases: forward/backward; else the lane's events
  TimelineIntervals steps;   // phases only: the steps, drawn behind forward/backward
  TimelineInstants packs;    // pack / unpack only
  TimelineInstants unpacks;  // pack / unpack only
};

// Kinds are counted per value of EventKind: the last one ends the list.
inline constexpr size_t kEventKindCount = static_cast<size_t>(profiler::EventKind::Recompute) + 1;

// A wait and the copy it waited on: an arrow from the copy's end (in its lane) to the wait's end.
struct TimelineFlow {
  int64_t from_ns = 0;     // the copy's end
  int64_t to_ns = 0;       // the wait's end
  uint32_t from_lane = 0;  // the copy's lane (copy D2H or copy H2D)
  uint32_t copy = 0;       // index of the copy in that lane's spans
  uint32_t wait = 0;       // index of the wait in the waits lane's spans
};

// One run's timeline, ready to paint; immutable once built. Lanes top to bottom: phases,
// compute (one per stream when several compute streams appear, up to kMaxComputeLanes), copy D2H,
// copy H2D, waits, pack / unpack. Every lane is present even when empty, so rows never jump; a run
// of the disk tier (tier disk or auto) has one more at the bottom, disk, for its writes and reads.
struct TimelineIndex {
  static constexpr size_t kMaxComputeLanes = 8;

  std::vector<TimelineLane> lanes;
  std::vector<std::string> names;  // interned event names; names[0] = ""
  // Sorted by to_ns. At most one per wait: waits with a tensor id and a matching copy.
  std::vector<TimelineFlow> flows;
  std::array<int64_t, kEventKindCount> kind_counts{};
  int64_t event_count = 0;
  // run_time_bounds() of the run.
  int64_t begin_ns = 0;
  int64_t end_ns = 0;

  bool empty() const { return event_count == 0; }
  int64_t count(profiler::EventKind k) const { return kind_counts[static_cast<size_t>(k)]; }
  const TimelineLane* lane(LaneKind kind) const;  // the first lane of that kind
};

// Pure and thread-safe: runs on a worker thread. Events need not be sorted (they usually are).
// Host-sim's derived compute slices (named "compute" by the recorder: forward or backward time
// minus the waits) are renamed after what they belong to: "compute before wait on tensor N" when a
// wait starts where the slice ends, else "forward compute" or "backward compute" after the phase
// that holds them. Other names (CUDA kernels) are kept.
std::shared_ptr<const TimelineIndex> build_timeline_index(const RunData& run);

// What one frame drew.
struct RenderStats {
  int primitives = 0;   // rects and lines
  int detail_sets = 0;  // interval sets drawn event by event (zoomed in far enough)
  int merged_sets = 0;  // interval sets drawn from a level of detail
  int64_t visited = 0;  // blocks, events and instant buckets looked at
  int arrows = 0;       // wait-to-copy arrows drawn
};

// Height of the ruler and of one lane row, in px: kTimelineLaneHeight is the natural height (what
// timeline_height() gives each lane); painted into a taller or shorter area, lanes share its
// height, each between the min and the max (below the min, the lanes that do not fit are cut).
inline constexpr int kTimelineRulerHeight = 22;
inline constexpr int kTimelineLaneHeight = 24;
inline constexpr int kTimelineMinLaneHeight = 16;
inline constexpr int kTimelineMaxLaneHeight = 72;
// Arrows are drawn only when at most this many waits with a copy end in view (and at most a
// quarter of the plot's width in px; never more than one per pixel column): zoomed out they would
// be a dark smear, and each costs an antialiased line.
inline constexpr int kTimelineMaxArrows = 200;
// The height that shows every lane of `index` at the natural lane height (a default lane set when
// null).
int timeline_height(const TimelineIndex* index);
// The height of one lane when `lane_count` lanes are painted into `area`.
int timeline_lane_height(const QRect& area, size_t lane_count);
// Row of lane `lane` (full width, gutter included) when painting `index` into `area`.
QRect timeline_lane_rect(const QRect& area, const TimelineIndex& index, size_t lane);

// The colour of a kind of event in the lanes and the legend. Pairwise distinct, also from the run
// charts' series, for normal vision and the three common colour-vision deficiencies (Okabe-Ito
// and Paul Tol's colour-blind-safe sets, chosen for the largest smallest difference).
QColor timeline_kind_colour(profiler::EventKind kind);

// One entry of the legend: a kind (its colour as a filled swatch) or a marking drawn over events.
struct TimelineLegendEntry {
  enum class Swatch {
    Fill,      // a kind of event: a rect of its colour
    Prefetch,  // the band along the top of a prefetched reload
    Pageable,  // the hatching of a pageable copy
    Arrow,     // a wait's arrow from the copy it waited on
    Merged,    // blocks too close to draw apart, one rect whose tint says how busy they keep it
  };
  QString label;
  QColor colour;
  Swatch swatch = Swatch::Fill;
  profiler::EventKind kind = profiler::EventKind::Compute;  // Fill only
};
// Every kind, then the markings, in the order the legend shows them.
const std::vector<TimelineLegendEntry>& timeline_legend();
// The height the legend needs over `width` px with the font `fm` (it wraps), and painting it.
int timeline_legend_height(const QFontMetrics& fm, int width);
void render_timeline_legend(QPainter& painter, const QRect& area);

// Paints the ruler, the lane labels and the lanes of [view_begin, view_end) into `area`.
void render_timeline(QPainter& painter, const QRect& area, const TimelineIndex& index,
                     int64_t view_begin, int64_t view_end, RenderStats* out = nullptr);
// The tooltip at `pos` for a frame painted by render_timeline with the same arguments: the event
// under the cursor, or "N events, total ..." where the frame drew merged blocks; empty when none.
QString timeline_tooltip(const TimelineIndex& index, const QRect& area, int64_t view_begin,
                         int64_t view_end, const QPoint& pos);

// The tensor id of the event drawn at `pos` in that frame (an event drawn on its own, not a merged
// block), or -1.
int64_t timeline_tensor_at(const TimelineIndex& index, const QRect& area, int64_t view_begin,
                           int64_t view_end, const QPoint& pos);

// One event of a tensor followed through the run (timeline_range.hpp: tensor_events).
struct TensorEvent {
  profiler::EventKind kind = profiler::EventKind::Pack;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = 0;
  size_t lane = 0;  // into TimelineIndex::lanes
  bool prefetch = false;
};

// Base of the time-based widgets: holds the shared axis (not owned) and turns the mouse and keys
// into zoom and pan on it. Wheel: zoom at the cursor (horizontal wheel or Shift: pan); left drag:
// pan; double-click or Home: the whole run; + / - or Up / Down: zoom at the centre; Left / Right:
// pan.
class TimePlotWidget : public QWidget {
  Q_OBJECT

 public:
  explicit TimePlotWidget(QWidget* parent = nullptr);

  void setAxis(TimeAxis* axis);
  TimeAxis* axis() const { return axis_.data(); }
  QRect plotRect() const { return time_plot_rect(rect()); }
  // What the tooltip shows at `pos` (widget coordinates); empty for none.
  virtual QString toolTipAt(const QPoint& pos) const = 0;

 protected:
  bool event(QEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;

 private:
  QPointer<TimeAxis> axis_;
  QMetaObject::Connection axis_connection_;
  bool dragging_ = false;
  double drag_x_ = 0.0;
  int64_t drag_begin_ = 0;
  int64_t drag_end_ = 0;
};

// The lanes of one run over the shared axis. Call setIndex with the index built for the run and
// set the axis bounds to [index->begin_ns, index->end_ns] yourself (the axis is shared with the
// charts; the widget never changes its bounds).
class TimelineWidget : public TimePlotWidget {
  Q_OBJECT

 public:
  static constexpr int kGutter = kTimeGutter;

  explicit TimelineWidget(QWidget* parent = nullptr);

  void setIndex(std::shared_ptr<const TimelineIndex> index);
  const std::shared_ptr<const TimelineIndex>& index() const { return index_; }
  // Where the lanes (with the ruler) and the legend beneath them are painted.
  QRect lanesRect() const;
  QRect legendRect() const;
  // Row of lane `lane` in widget coordinates (empty without an index).
  QRect laneRect(size_t lane) const;
  // Rects and lines drawn by the last paint.
  int lastFramePrimitives() const { return last_stats_.primitives; }
  const RenderStats& lastFrameStats() const { return last_stats_; }

  QString toolTipAt(const QPoint& pos) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

  // A stretch of the run, [begin, end) in ns on the run's clock: shift+drag selects one (drawn as
  // a band over the lanes), a click without a drag clears it, a new run clears it.
  std::optional<std::pair<int64_t, int64_t>> selection() const { return selection_; }
  void setSelection(std::optional<std::pair<int64_t, int64_t>> range);
  // The tensor followed through its events (pack, copies, waits, unpack), outlined in the lanes:
  // a click on one of its events follows it, a click elsewhere stops; -1 for none.
  int64_t followedTensor() const { return followed_; }
  void setFollowedTensor(int64_t tensor);

 Q_SIGNALS:
  void selectionChanged();
  void followedTensorChanged();

 protected:
  void paintEvent(QPaintEvent* e) override;
  void changeEvent(QEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;

 private:
  int legendHeight() const;
  int64_t timeAtX(double x) const;

  bool selecting_ = false;
  int64_t select_anchor_ = 0;
  QPoint press_at_;
  int64_t followed_ = -1;
  std::vector<TensorEvent> followed_events_;  // found once, when it is followed: painted each frame
  void paintFollowed(QPainter& p) const;
  std::optional<std::pair<int64_t, int64_t>> selection_;

  std::shared_ptr<const TimelineIndex> index_;
  RenderStats last_stats_;
  // The legend never changes with the view: painted once per size and font, then copied.
  QPixmap legend_cache_;
};

}  // namespace offtune::gui
