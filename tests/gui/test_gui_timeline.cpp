// The run view's time-based widgets: the timeline index (lanes, counts, bounds, the level-of-detail
// pyramid), the shared time axis, painting a million events at every zoom, and the run charts.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFontMetrics>
#include <QImage>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QSet>
#include <QSignalSpy>
#include <QSplitter>
#include <QTabWidget>
#include <QTest>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "offtune/gui/main_window.hpp"
#include "offtune/gui/models.hpp"
#include "offtune/gui/run_charts.hpp"
#include "offtune/gui/run_peak.hpp"
#include "offtune/gui/run_view.hpp"
#include "offtune/gui/timeline.hpp"
#include "offtune/gui/timeline_range.hpp"

namespace {

namespace pf = offtune::profiler;
using offtune::gui::LaneKind;
using offtune::gui::RenderStats;
using offtune::gui::RunChart;
using offtune::gui::RunData;
using offtune::gui::TimeAxis;
using offtune::gui::TimelineIndex;
using offtune::gui::TimelineIntervals;
using offtune::gui::TimelineLevel;
using offtune::gui::TimelineWidget;
using pf::EventKind;

// A small run with every kind of event, in time order.
RunData small_run() {
  RunData run;
  auto& e = run.events;
  e.push_back(pf::event_span(EventKind::Step, 0, 1000));
  e.push_back(pf::event_span(EventKind::Forward, 0, 400));
  e.push_back(pf::event_span(EventKind::Compute, 10, 50));
  e.push_back(pf::event_span(EventKind::CopyD2H, 20, 80, {.stream = 1, .bytes = 1000}));
  e.push_back(pf::event_span(EventKind::Pack, 20, 20, {.bytes = 1000}));
  e.back().tensor = 3;
  e.back().name = "offload";
  e.push_back(pf::event_span(EventKind::Compute, 60, 100));
  e.back().name = "gemm";
  e.push_back(pf::event_span(EventKind::CopyD2H, 90, 130, {.stream = 1, .bytes = 4096}));
  e.back().pinned = false;
  e.push_back(pf::event_span(EventKind::Pack, 90, 90, {.bytes = 4096}));
  e.push_back(pf::event_span(EventKind::Compute, 110, 150));
  e.back().name = "gemm";
  e.push_back(pf::event_span(EventKind::CopyD2H, 140, 200, {.stream = 1, .bytes = 1000}));
  e.push_back(pf::event_span(EventKind::Pack, 140, 140, {.bytes = 1000}));
  e.push_back(pf::event_span(EventKind::Backward, 500, 1000));
  e.push_back(pf::event_span(EventKind::Compute, 510, 550));
  e.push_back(pf::event_span(EventKind::Compute, 560, 900));
  e.push_back(pf::event_span(EventKind::Wait, 580, 600));
  e.push_back(pf::event_span(EventKind::CopyH2D, 600, 650, {.stream = 1, .bytes = 4096}));
  e.back().prefetch = true;
  e.push_back(pf::event_span(EventKind::Unpack, 650, 650, {.bytes = 4096}));
  e.push_back(pf::event_span(EventKind::CopyH2D, 700, 750, {.stream = 1, .bytes = 1000}));
  e.push_back(pf::event_span(EventKind::Unpack, 750, 750, {.bytes = 1000}));
  pf::OccupancySample o;
  o.time_ns = 1200;
  run.occupancy.push_back(o);
  return run;
}

// A run shaped like a real one: steps of forward then backward, back-to-back kernels with small
// gaps, offload copies during forward and reloads during backward, a pack per offload and an
// unpack per reload, a few waits, each on the tensor of the copy just issued (forward-window in
// forward, reload in backward). About `n` events.
std::shared_ptr<RunData> synthetic_run(int64_t n, uint32_t seed = 7) {
  auto run = std::make_shared<RunData>();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> kernel(2'000, 40'000);
  std::uniform_int_distribution<int64_t> gap(300, 3'000);
  const int64_t steps = 8;
  const int64_t per_step = std::max<int64_t>(8, n / steps);
  auto& events = run->events;
  events.reserve(static_cast<size_t>(n + 64));
  int64_t t = 1'000'000;
  for (int64_t s = 0; s < steps; ++s) {
    const size_t step_at = events.size();
    events.push_back(pf::event_span(EventKind::Step, t, t));
    for (int phase = 0; phase < 2; ++phase) {
      const bool forward = phase == 0;
      const size_t phase_at = events.size();
      events.push_back(pf::event_span(forward ? EventKind::Forward : EventKind::Backward, t, t));
      for (int64_t i = 0; i < per_step / 2 - 2; i += 4) {
        const int64_t d = kernel(rng);
        events.push_back(pf::event_span(EventKind::Compute, t, t + d));
        events.back().name = i % 8 == 0 ? "gemm" : "layernorm";
        const int64_t bytes = 1 << 20;
        const int64_t tensor = s * per_step + i;
        if (forward) {
          events.push_back(pf::event_span(EventKind::Pack, t, t, {.bytes = bytes}));
          events.push_back(pf::event_span(EventKind::CopyD2H, t + 100, t + 100 + d / 2,
                                          {.stream = 1, .bytes = bytes, .tensor = tensor}));
          events.back().pinned = (i % 64) != 0;
        } else {
          events.push_back(pf::event_span(EventKind::CopyH2D, t + 100, t + 100 + d / 2,
                                          {.stream = 1, .bytes = bytes, .tensor = tensor}));
          events.back().prefetch = (i % 3) != 0;
          events.push_back(pf::event_span(EventKind::Unpack, t + 200 + d / 2, t + 200 + d / 2,
                                          {.bytes = bytes}));
        }
        if (i % 16 == 0) {
          events.push_back(pf::event_span(EventKind::Wait, t + d, t + d + 200, {.tensor = tensor}));
          events.back().name = forward ? "forward-window" : "reload";
        } else {
          events.push_back(pf::event_span(EventKind::Compute, t + d + 50, t + d + 250));
        }
        t += d + 300 + gap(rng);
      }
      events[phase_at].end_ns = t;
      t += 5'000;
    }
    events[step_at].end_ns = t;
    t += 50'000;
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  return run;
}

const offtune::gui::TimelineLane& lane(const TimelineIndex& index, LaneKind kind) {
  const auto* l = index.lane(kind);
  EXPECT_NE(l, nullptr);
  return *l;
}

// Blocks of sorted intervals whose gaps are at most `threshold`, merged (the reference model).
std::vector<std::pair<int64_t, int64_t>> merged(const std::vector<int64_t>& start,
                                                const std::vector<int64_t>& end,
                                                int64_t threshold) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < start.size(); ++i) {
    if (!out.empty() && start[i] - out.back().second <= threshold) {
      out.back().second = std::max(out.back().second, end[i]);
    } else {
      out.emplace_back(start[i], end[i]);
    }
  }
  return out;
}

int non_background_pixels(const QImage& image, const QRect& r) {
  int count = 0;
  for (int y = r.top(); y <= r.bottom(); ++y) {
    for (int x = r.left(); x <= r.right(); ++x) {
      if (QColor(image.pixel(x, y)).lightness() < 225) ++count;
    }
  }
  return count;
}

QSet<QRgb> colours(const QImage& image, const QRect& r) {
  QSet<QRgb> out;
  for (int y = r.top(); y <= r.bottom(); ++y) {
    for (int x = r.left(); x <= r.right(); ++x) out.insert(image.pixel(x, y));
  }
  return out;
}

QImage paint(const TimelineIndex& index, int width, int64_t begin, int64_t end,
             RenderStats* stats) {
  QImage image(width, offtune::gui::timeline_height(&index), QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::black);
  QPainter p(&image);
  offtune::gui::render_timeline(p, image.rect(), index, begin, end, stats);
  p.end();
  return image;
}

// ---- index --------------------------------------------------------------------------------------

TEST(TimelineIndex, PutsEventsInTheirLanesWithCountsAndBounds) {
  const RunData run = small_run();
  const auto index = offtune::gui::build_timeline_index(run);
  ASSERT_EQ(index->lanes.size(), 6u);
  const char* labels[] = {"phases", "compute", "copy D2H", "copy H2D", "waits", "pack / unpack"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(index->lanes[i].label, labels[i]);

  EXPECT_EQ(index->event_count, 19);
  EXPECT_EQ(index->count(EventKind::Compute), 5);
  EXPECT_EQ(index->count(EventKind::Pack), 3);
  EXPECT_EQ(index->count(EventKind::Unpack), 2);
  EXPECT_EQ(index->begin_ns, 0);
  EXPECT_EQ(index->end_ns, 1200);  // the occupancy sample is later than every event

  const auto& phases = lane(*index, LaneKind::Phases);
  EXPECT_EQ(phases.steps.size(), 1u);
  EXPECT_EQ(phases.spans.size(), 2u);
  EXPECT_TRUE(phases.spans.info[0].flags & offtune::gui::kFlagForward);
  EXPECT_FALSE(phases.spans.info[1].flags & offtune::gui::kFlagForward);
  EXPECT_EQ(lane(*index, LaneKind::Compute).spans.size(), 5u);
  EXPECT_EQ(lane(*index, LaneKind::Waits).spans.size(), 1u);

  const auto& d2h = lane(*index, LaneKind::CopyD2H).spans;
  ASSERT_EQ(d2h.size(), 3u);
  EXPECT_EQ(d2h.start[1], 90);
  EXPECT_EQ(d2h.end[1], 130);
  EXPECT_EQ(d2h.info[1].bytes, 4096);
  EXPECT_TRUE(d2h.info[1].flags & offtune::gui::kFlagPageable);
  EXPECT_FALSE(d2h.info[0].flags & offtune::gui::kFlagPageable);
  EXPECT_EQ(d2h.max_duration_ns, 60);
  const auto& h2d = lane(*index, LaneKind::CopyH2D).spans;
  ASSERT_EQ(h2d.size(), 2u);
  EXPECT_TRUE(h2d.info[0].flags & offtune::gui::kFlagPrefetch);
  EXPECT_FALSE(h2d.info[1].flags & offtune::gui::kFlagPrefetch);

  const auto& instants = lane(*index, LaneKind::PackUnpack);
  ASSERT_EQ(instants.packs.size(), 3u);
  ASSERT_EQ(instants.unpacks.size(), 2u);
  EXPECT_EQ(instants.packs.time[1], 90);
  EXPECT_EQ(instants.packs.cum_bytes.back(), 6096);
  EXPECT_EQ(instants.packs.info[0].tensor, 3);
  EXPECT_EQ(index->names[instants.packs.info[0].name], "offload");

  // Interned: both "gemm" kernels share one name.
  const auto& compute = lane(*index, LaneKind::Compute).spans;
  EXPECT_EQ(compute.info[1].name, compute.info[2].name);
  EXPECT_EQ(index->names[compute.info[1].name], "gemm");
  EXPECT_EQ(compute.info[0].name, 0u);
}

TEST(TimelineIndex, SortsOutOfOrderEventsAndSplitsComputeStreams) {
  RunData run;
  run.events.push_back(pf::event_span(EventKind::Compute, 300, 400, {.stream = 13}));
  run.events.push_back(pf::event_span(EventKind::Compute, 100, 200, {.stream = 7}));
  run.events.push_back(pf::event_span(EventKind::Compute, 50, 60, {.stream = 13}));
  run.events.push_back(pf::event_span(EventKind::CopyD2H, 70, 90, {.stream = 20}));
  const auto index = offtune::gui::build_timeline_index(run);
  ASSERT_EQ(index->lanes.size(), 7u);
  EXPECT_EQ(index->lanes[1].label, "compute s7");
  EXPECT_EQ(index->lanes[2].label, "compute s13");
  EXPECT_EQ(index->lanes[2].stream, 13);
  ASSERT_EQ(index->lanes[2].spans.size(), 2u);
  EXPECT_EQ(index->lanes[2].spans.start[0], 50);
  EXPECT_EQ(index->lanes[2].spans.start[1], 300);
  EXPECT_EQ(index->lanes[1].spans.size(), 1u);
  EXPECT_EQ(index->lanes[3].spans.size(), 1u);  // copies go by kind, whatever their stream
  EXPECT_EQ(index->begin_ns, 50);
  EXPECT_EQ(index->end_ns, 400);
}

TEST(TimelineIndex, EmptyRunHasEveryLaneAndNoBounds) {
  // A named run, not RunData{}: GCC 12 at -O3 takes the temporary's settings (Knobs) for maybe
  // uninitialized, a false alarm that warnings-as-errors would fail on.
  const RunData empty;
  const auto index = offtune::gui::build_timeline_index(empty);
  EXPECT_TRUE(index->empty());
  EXPECT_EQ(index->lanes.size(), 6u);
  EXPECT_EQ(index->begin_ns, 0);
  EXPECT_EQ(index->end_ns, 0);
  for (const auto& l : index->lanes) EXPECT_TRUE(l.spans.levels.empty());
  QImage image = paint(*index, 400, 0, 1, nullptr);  // paints without crashing
  EXPECT_FALSE(image.isNull());
}

TEST(TimelineIndex, LevelsCoverTheUnionPlusOnlyGapsUpToTheirThreshold) {
  // Intervals at several scales of gap, some overlapping, some touching.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> scale(0, 5);
  std::uniform_int_distribution<int64_t> unit(0, 1000);
  RunData run;
  int64_t t = 0;
  int64_t bytes = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int64_t duration = 1 + unit(rng) * 3;
    int64_t gap = unit(rng);
    for (int s = scale(rng); s > 0; --s) gap *= 7;
    if (i % 13 == 0) gap = -duration / 2;  // overlap the previous interval
    if (i % 17 == 0) gap = 0;              // touch it
    t = std::max<int64_t>(0, t + gap);
    run.events.push_back(pf::event_span(EventKind::Compute, t, t + duration, {.bytes = i}));
    bytes += i;
    t += duration;
  }
  std::stable_sort(run.events.begin(), run.events.end(),
                   [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  const auto index = offtune::gui::build_timeline_index(run);
  const TimelineIntervals& set = lane(*index, LaneKind::Compute).spans;
  ASSERT_EQ(set.size(), static_cast<size_t>(n));
  ASSERT_GE(set.levels.size(), 5u);
  EXPECT_EQ(set.levels[0].threshold_ns, 0);
  EXPECT_LE(set.levels.back().size(), 32u);

  const auto base_union = merged(set.start, set.end, 0);
  int64_t union_ns = 0;
  for (const auto& [s, e] : base_union) union_ns += e - s;

  for (size_t k = 0; k < set.levels.size(); ++k) {
    SCOPED_TRACE(k);
    const TimelineLevel& level = set.levels[k];
    if (k > 0) {
      EXPECT_GE(level.threshold_ns, 2 * set.levels[k - 1].threshold_ns);
      EXPECT_LE(level.size(), set.levels[k - 1].size() / 2 + 1);
    }
    // Exactly the union with every gap up to the threshold closed: no more, no less.
    const auto expected = merged(set.start, set.end, level.threshold_ns);
    ASSERT_EQ(level.size(), expected.size());
    for (size_t i = 0; i < level.size(); ++i) {
      ASSERT_EQ(level.start[i], expected[i].first) << i;
      ASSERT_EQ(level.end[i], expected[i].second) << i;
      if (i > 0) {
        ASSERT_GT(level.start[i] - level.end[i - 1], level.threshold_ns);
      }
    }
    // Nothing lost or counted twice.
    EXPECT_EQ(level.count(0, level.size()), n);
    EXPECT_EQ(level.bytes(0, level.size()), bytes);
    EXPECT_EQ(level.busy(0, level.size()), union_ns);
  }
}

// ---- axis ---------------------------------------------------------------------------------------

TEST(TimeAxis, ZoomKeepsTheAnchorAndClampsToTheBounds) {
  TimeAxis axis;
  QSignalSpy spy(&axis, &TimeAxis::viewChanged);
  axis.setBounds(1'000'000'000'000, 1'000'010'000'000);  // 10 ms, far from zero
  EXPECT_EQ(spy.count(), 1);
  EXPECT_EQ(axis.viewBegin(), axis.boundsBegin());
  EXPECT_EQ(axis.viewEnd(), axis.boundsEnd());

  const double w = 1000.0;
  const int64_t anchor = axis.toTime(250.0, w);
  axis.zoomAt(0.25, 4.0);
  EXPECT_EQ(spy.count(), 2);
  EXPECT_NEAR(static_cast<double>(axis.viewSpan()), 2'500'000.0, 1.0);
  EXPECT_NEAR(static_cast<double>(axis.toTime(250.0, w)), static_cast<double>(anchor), 2.0);
  EXPECT_NEAR(axis.toX(anchor, w), 250.0, 0.01);

  // Zooming in as far as it goes stops at the minimum span, still around the anchor.
  const int64_t anchor2 = axis.toTime(700.0, w);
  for (int i = 0; i < 50; ++i) axis.zoomAt(0.7, 3.0);
  EXPECT_EQ(axis.viewSpan(), TimeAxis::kMinSpanNs);
  // Each step rounds to whole ns; a few steps' worth of drift is all there is.
  EXPECT_NEAR(static_cast<double>(axis.toTime(700.0, w)), static_cast<double>(anchor2), 10.0);

  // Zooming out stops at the bounds.
  axis.zoomAt(0.1, 1e-9);
  EXPECT_EQ(axis.viewBegin(), axis.boundsBegin());
  EXPECT_EQ(axis.viewEnd(), axis.boundsEnd());

  // Near an edge the view shifts to stay inside, rather than leaving the bounds.
  axis.setView(axis.boundsBegin() + 100, axis.boundsBegin() + 1'000'100);
  axis.zoomAt(0.0, 0.5);
  EXPECT_EQ(axis.viewBegin(), axis.boundsBegin() + 100);
  EXPECT_EQ(axis.viewSpan(), 2'000'000);
  axis.zoomAt(1.0, 0.25);
  EXPECT_GE(axis.viewBegin(), axis.boundsBegin());
  EXPECT_LE(axis.viewEnd(), axis.boundsEnd());
  EXPECT_EQ(axis.viewSpan(), 8'000'000);
}

TEST(TimeAxis, PanMovesAndClampsAndSignalsOnlyOnChange) {
  TimeAxis axis;
  axis.setBounds(0, 1'000'000);
  axis.setView(100'000, 200'000);
  QSignalSpy spy(&axis, &TimeAxis::viewChanged);
  axis.panBy(0.5);
  EXPECT_EQ(axis.viewBegin(), 150'000);
  EXPECT_EQ(axis.viewEnd(), 250'000);
  EXPECT_EQ(spy.count(), 1);
  axis.panBy(100.0);
  EXPECT_EQ(axis.viewEnd(), 1'000'000);
  EXPECT_EQ(axis.viewSpan(), 100'000);
  EXPECT_EQ(spy.count(), 2);
  axis.panBy(1.0);  // already at the end: nothing changes, nothing is signalled
  EXPECT_EQ(spy.count(), 2);
  axis.panBy(-100.0);
  EXPECT_EQ(axis.viewBegin(), 0);
  axis.setView(0, 100'000);
  EXPECT_EQ(spy.count(), 3);
  axis.setView(500, 600);  // shorter than the minimum span
  EXPECT_EQ(axis.viewSpan(), TimeAxis::kMinSpanNs);
  axis.setView(-5, 5'000'000);
  EXPECT_EQ(axis.viewBegin(), 0);
  EXPECT_EQ(axis.viewEnd(), 1'000'000);
  axis.setView(10, 2000);
  axis.resetView();
  EXPECT_EQ(axis.viewSpan(), 1'000'000);

  // Bounds shorter than the minimum span: the view is the bounds.
  axis.setBounds(50, 60);
  axis.zoomAt(0.5, 10.0);
  EXPECT_EQ(axis.viewBegin(), 50);
  EXPECT_EQ(axis.viewEnd(), 60);
  axis.setBounds(7, 7);
  EXPECT_EQ(axis.viewSpan(), 1);
}

// ---- painting -----------------------------------------------------------------------------------

class MillionEvents : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    run_ = synthetic_run(1'000'000);
    index_ = offtune::gui::build_timeline_index(*run_);
  }
  static void TearDownTestSuite() {
    index_.reset();
    run_.reset();
  }
  static std::shared_ptr<RunData> run_;
  static std::shared_ptr<const TimelineIndex> index_;
};
std::shared_ptr<RunData> MillionEvents::run_;
std::shared_ptr<const TimelineIndex> MillionEvents::index_;

TEST_F(MillionEvents, ZoomedOutDrawsFewPrimitivesAndAFullPicture) {
  ASSERT_GE(index_->event_count, 900'000);
  RenderStats stats;
  const QImage image = paint(*index_, 1200, index_->begin_ns, index_->end_ns, &stats);
  EXPECT_LT(stats.primitives, 20'000);
  EXPECT_GT(stats.primitives, 100);
  EXPECT_GT(stats.merged_sets, 0);
  EXPECT_LT(stats.visited, 50'000);

  // Kernels fill almost all of each step: the compute row is mostly ink.
  const QRect plot = offtune::gui::time_plot_rect(image.rect());
  const QRect compute_row = offtune::gui::timeline_lane_rect(image.rect(), *index_, 1);
  const int y = compute_row.center().y();
  int inked = 0;
  for (int x = plot.left(); x <= plot.right(); ++x) {
    if (QColor(image.pixel(x, y)).lightness() < 225) ++inked;
  }
  EXPECT_GT(inked, plot.width() * 2 / 3);
  // Every lane contributes colour: phases, compute, copies, pageable marks, waits, packs.
  EXPECT_GE(colours(image, plot).size(), 8);
  EXPECT_GT(non_background_pixels(image, plot), plot.width() * 40);
  EXPECT_TRUE(offtune::gui::timeline_tooltip(*index_, image.rect(), index_->begin_ns,
                                             index_->end_ns,
                                             QPoint(plot.left() + 300, compute_row.center().y()))
                  .contains(QStringLiteral("events, total")));
}

TEST_F(MillionEvents, ZoomedInDrawsTheEventsThemselves) {
  const auto& compute = lane(*index_, LaneKind::Compute).spans;
  const size_t k = compute.size() / 2;
  const int64_t begin = compute.start[k] - 1000;
  const int64_t end = compute.end[k + 6] + 1000;
  RenderStats stats;
  const QImage image = paint(*index_, 1200, begin, end, &stats);
  EXPECT_GT(stats.detail_sets, 0);
  EXPECT_EQ(stats.merged_sets, 0);
  EXPECT_LT(stats.primitives, 500);

  const QRect plot = offtune::gui::time_plot_rect(image.rect());
  const QRect row = offtune::gui::timeline_lane_rect(image.rect(), *index_, 1);
  const double px_per_ns = plot.width() / static_cast<double>(end - begin);
  const auto x_of = [&](int64_t t) {
    return plot.left() + static_cast<int>((t - begin) * px_per_ns);
  };
  int drawn = 0;
  for (size_t i = k; i <= k + 6; ++i) {
    // Inside each kernel: its colour; in the gap before the next one (when it is wide enough to
    // see): the background.
    const int inside = x_of((compute.start[i] + compute.end[i]) / 2);
    EXPECT_LT(QColor(image.pixel(inside, row.center().y())).lightness(), 200) << i;
    const int64_t gap_from = compute.end[i];
    const int64_t gap_to = compute.start[i + 1];
    if ((gap_to - gap_from) * px_per_ns >= 4.0) {
      const int x = x_of((gap_from + gap_to) / 2);
      EXPECT_GT(QColor(image.pixel(x, row.center().y())).lightness(), 220) << i;
      ++drawn;
    }
  }
  EXPECT_GT(drawn, 2);

  size_t named = k;
  while (compute.info[named].name == 0) ++named;
  const int x = x_of((compute.start[named] + compute.end[named]) / 2);
  const QString tip = offtune::gui::timeline_tooltip(*index_, image.rect(), begin, end,
                                                     QPoint(x, row.center().y()));
  EXPECT_TRUE(tip.startsWith(QStringLiteral("compute"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("duration"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("name "))) << tip.toStdString();
}

TEST_F(MillionEvents, EveryZoomStaysWithinAPixelBudget) {
  int64_t span = index_->end_ns - index_->begin_ns;
  int64_t begin = index_->begin_ns;
  for (int zoom = 0; zoom < 12; ++zoom) {
    SCOPED_TRACE(zoom);
    RenderStats stats;
    paint(*index_, 800, begin, begin + span, &stats);
    // Rects per lane are bounded by the columns, whatever the number of events in view.
    EXPECT_LT(stats.primitives, 8 * 800);
    begin += span / 3;
    span /= 4;
  }
}

TEST(TimelineRender, RandomRunsViewsAndTooltipsStayInBounds) {
  // Odd input on purpose: end before start, zero-length spans, equal starts, a far-away clock,
  // overlapping copies on several streams, more compute streams than get lanes.
  std::mt19937_64 rng(5);
  RunData run;
  const int64_t base = int64_t{1} << 60;
  const EventKind kinds[] = {EventKind::Step,    EventKind::Forward, EventKind::Backward,
                             EventKind::Compute, EventKind::CopyD2H, EventKind::CopyH2D,
                             EventKind::Pack,    EventKind::Unpack,  EventKind::Wait};
  for (int i = 0; i < 6000; ++i) {
    const int64_t start = base + static_cast<int64_t>(rng() % 50'000'000);
    const int64_t length = static_cast<int64_t>(rng() % 200'000) - 20'000;
    auto e = pf::event_span(kinds[rng() % 9], start, start + length,
                            {.stream = static_cast<int64_t>(rng() % 12),
                             .bytes = static_cast<int64_t>(rng() % 100'000)});
    e.pinned = rng() % 5 != 0;
    e.prefetch = rng() % 2 == 0;
    if (i % 7 == 0) e.name = "n" + std::to_string(rng() % 20);
    run.events.push_back(e);
  }
  const auto index = offtune::gui::build_timeline_index(run);
  EXPECT_EQ(index->lanes.size(), 6u);  // 12 compute streams: one compute lane
  const int64_t span = index->end_ns - index->begin_ns;
  QImage image(300, offtune::gui::timeline_height(index.get()),
               QImage::Format_ARGB32_Premultiplied);
  for (int i = 0; i < 300; ++i) {
    const int64_t view = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
    const int64_t begin =
        index->begin_ns - span / 10 + static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
    RenderStats stats;
    {
      QPainter p(&image);
      offtune::gui::render_timeline(p, image.rect(), *index, begin, begin + view, &stats);
    }
    EXPECT_LT(stats.primitives, 8 * 300);
    for (int k = 0; k < 10; ++k) {
      const QPoint at(static_cast<int>(rng() % 320) - 10, static_cast<int>(rng() % 200) - 10);
      offtune::gui::timeline_tooltip(*index, image.rect(), begin, begin + view, at);
    }
  }
}

// ---- widgets ------------------------------------------------------------------------------------

QImage grab(QWidget& w) {
  QImage image(w.size(), QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::black);
  w.render(&image);
  return image;
}

TEST(TimelineWidget, PaintsWithoutDataAndWithIt) {
  TimelineWidget w;
  w.resize(800, 240);
  grab(w);  // neither axis nor index
  TimeAxis axis;
  w.setAxis(&axis);
  grab(w);  // no index
  const auto index = offtune::gui::build_timeline_index(small_run());
  w.setIndex(index);
  axis.setBounds(index->begin_ns, index->end_ns);
  const QImage image = grab(w);
  EXPECT_GT(w.lastFramePrimitives(), 10);
  EXPECT_GT(non_background_pixels(image, offtune::gui::time_plot_rect(image.rect())), 500);
  EXPECT_EQ(TimelineWidget::kGutter, offtune::gui::kTimeGutter);

  // Pageable copies carry a hatched band (black stripes on white) along their bottom: both black
  // and white pixels in the bottom half of the D2H row's plot, and none in its top half.
  const QRect row = w.laneRect(2).intersected(w.plotRect());
  const QRect bottom(row.left(), row.center().y() + 1, row.width(),
                     row.bottom() - row.center().y());
  const QRect top(row.left(), row.top(), row.width(), row.center().y() - row.top());
  const QSet<QRgb> below = colours(image, bottom);
  EXPECT_TRUE(below.contains(qRgb(0, 0, 0)));
  EXPECT_TRUE(below.contains(qRgb(255, 255, 255)));
  EXPECT_FALSE(colours(image, top).contains(qRgb(0, 0, 0)));
}

TEST(TimelineWidget, WheelDragKeysAndDoubleClickDriveTheAxis) {
  TimelineWidget w;
  w.resize(1000 + offtune::gui::kTimeGutter + offtune::gui::kTimeRightMargin, 240);
  TimeAxis axis;
  w.setAxis(&axis);
  w.setIndex(offtune::gui::build_timeline_index(small_run()));
  axis.setBounds(0, 1'000'000'000);
  QSignalSpy spy(&axis, &TimeAxis::viewChanged);

  const QRect plot = w.plotRect();
  ASSERT_EQ(plot.width(), 1000);
  const QPointF at(plot.left() + 250.0, 100.0);
  const int64_t anchor = axis.toTime(250.0, plot.width());
  QWheelEvent wheel(at, w.mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                    Qt::NoScrollPhase, false);
  QCoreApplication::sendEvent(&w, &wheel);
  EXPECT_EQ(spy.count(), 1);
  EXPECT_EQ(axis.viewSpan(), 800'000'000);
  EXPECT_NEAR(static_cast<double>(axis.toTime(250.0, plot.width())), static_cast<double>(anchor),
              2.0);

  // Dragging left by 100 px shows later times: 100 px' worth.
  const int64_t begin = axis.viewBegin();
  const QPointF from(plot.left() + 500.0, 100.0);
  const QPointF to(plot.left() + 400.0, 100.0);
  QMouseEvent press(QEvent::MouseButtonPress, from, w.mapToGlobal(from), Qt::LeftButton,
                    Qt::LeftButton, Qt::NoModifier);
  QMouseEvent move(QEvent::MouseMove, to, w.mapToGlobal(to), Qt::NoButton, Qt::LeftButton,
                   Qt::NoModifier);
  QMouseEvent release(QEvent::MouseButtonRelease, to, w.mapToGlobal(to), Qt::LeftButton,
                      Qt::NoButton, Qt::NoModifier);
  QCoreApplication::sendEvent(&w, &press);
  QCoreApplication::sendEvent(&w, &move);
  QCoreApplication::sendEvent(&w, &release);
  EXPECT_EQ(axis.viewBegin(), begin + 80'000'000);
  EXPECT_EQ(axis.viewSpan(), 800'000'000);

  QTest::keyClick(&w, Qt::Key_Plus);
  EXPECT_NEAR(static_cast<double>(axis.viewSpan()), 800'000'000 / 1.5, 2.0);
  const int64_t before = axis.viewBegin();
  QTest::keyClick(&w, Qt::Key_Right);
  EXPECT_GT(axis.viewBegin(), before);
  QTest::keyClick(&w, Qt::Key_Home);
  EXPECT_EQ(axis.viewSpan(), 1'000'000'000);

  axis.zoomAt(0.5, 10.0);
  QMouseEvent dbl(QEvent::MouseButtonDblClick, from, w.mapToGlobal(from), Qt::LeftButton,
                  Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(&w, &dbl);
  EXPECT_EQ(axis.viewSpan(), 1'000'000'000);
}

TEST(TimelineWidget, TooltipDescribesTheEventUnderTheCursor) {
  TimelineWidget w;
  w.resize(1000 + offtune::gui::kTimeGutter + offtune::gui::kTimeRightMargin, 240);
  TimeAxis axis;
  w.setAxis(&axis);
  const auto index = offtune::gui::build_timeline_index(small_run());
  w.setIndex(index);
  axis.setBounds(0, 1000);
  const QRect plot = w.plotRect();
  // The pageable D2H copy [90, 130) at 1 ns per px.
  const QRect d2h = w.laneRect(2);
  const QString tip = w.toolTipAt(QPoint(plot.left() + 110, d2h.center().y()));
  EXPECT_TRUE(tip.contains(QStringLiteral("copy_d2h (pageable)"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("4096"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("duration 40 ns"))) << tip.toStdString();
  // A pack instant (top half of the last lane) with its tensor id and decision.
  const QRect instants = w.laneRect(5);
  const QString pack = w.toolTipAt(QPoint(plot.left() + 20, instants.top() + 6));
  EXPECT_TRUE(pack.contains(QStringLiteral("tensor 3"))) << pack.toStdString();
  EXPECT_TRUE(pack.contains(QStringLiteral("offload"))) << pack.toStdString();
  // Nothing in the waits lane there.
  EXPECT_TRUE(w.toolTipAt(QPoint(plot.left() + 300, w.laneRect(4).center().y())).isEmpty());
}

// ---- charts -------------------------------------------------------------------------------------

std::shared_ptr<RunData> occupancy_run(int samples, bool device) {
  auto run = std::make_shared<RunData>();
  for (int i = 0; i < samples; ++i) {
    pf::OccupancySample o;
    o.time_ns = 1000 + int64_t{i} * 1000;
    o.fwd_count = i % 50;
    o.fwd_bytes = (i % 50) * (int64_t{1} << 20);
    o.bwd_count = (i + 25) % 50;
    o.bwd_bytes = ((i + 25) % 50) * (int64_t{1} << 19);
    o.device_bytes = device ? (int64_t{1} << 30) + (i % 97) * (int64_t{1} << 22) : -1;
    run->occupancy.push_back(o);
  }
  run->run.summary.peak_allocated = int64_t{3} << 29;
  return run;
}

TEST(MinMaxPyramid, AnswersEveryRangeLikeAScan) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> values(5000);
  for (auto& v : values) v = static_cast<int64_t>(rng() % 100000) - 50000;
  offtune::gui::detail::MinMaxPyramid pyramid;
  pyramid.build(values);
  for (int q = 0; q < 2000; ++q) {
    size_t a = rng() % values.size();
    size_t b = rng() % values.size();
    if (a > b) std::swap(a, b);
    ++b;
    const auto [mn, mx] = pyramid.query(values, a, b);
    EXPECT_EQ(mn, *std::min_element(values.begin() + a, values.begin() + b));
    EXPECT_EQ(mx, *std::max_element(values.begin() + a, values.begin() + b));
  }
}

TEST(RunChart, OccupancyPaintsStepLinesAndDecimatesManySamples) {
  RunChart chart(RunChart::Occupancy);
  chart.resize(800, 150);
  grab(chart);  // no axis, no run
  TimeAxis axis;
  chart.setAxis(&axis);
  grab(chart);  // no run
  EXPECT_FALSE(chart.hasData());

  chart.setRun(occupancy_run(40, false));
  axis.setBounds(0, 42'000);
  const QImage image = grab(chart);
  EXPECT_TRUE(chart.hasData());
  EXPECT_GT(non_background_pixels(image, offtune::gui::time_plot_rect(image.rect())), 2000);
  const QString tip = chart.toolTipAt(QPoint(chart.plotRect().left() + 400, 80));
  EXPECT_TRUE(tip.contains(QStringLiteral("forward stash"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("tensors"))) << tip.toStdString();

  // 200k samples over 800 px: per-column min/max, not every sample.
  chart.setRun(occupancy_run(200'000, false));
  axis.setBounds(0, 201'000'000);
  RenderStats stats;
  QImage big(800, 150, QImage::Format_ARGB32_Premultiplied);
  QPainter p(&big);
  chart.paintChart(p, big.rect(), axis.viewBegin(), axis.viewEnd(), &stats);
  p.end();
  EXPECT_EQ(stats.merged_sets, 2);
  EXPECT_LT(stats.primitives, 2 * 800 + 50);
  EXPECT_GT(non_background_pixels(big, offtune::gui::time_plot_rect(big.rect())), 20000);
  // The occupancy cycles 0..49 MiB every 50 samples: every column spans nearly the whole range.
  EXPECT_TRUE(chart.toolTipAt(QPoint(chart.plotRect().left() + 100, 80))
                  .contains(QStringLiteral("in this pixel")));
}

TEST(RunChart, DeviceMemoryDrawsThePeakOrSaysThereIsNothing) {
  RunChart chart(RunChart::DeviceMemory);
  chart.resize(800, 150);
  TimeAxis axis;
  chart.setAxis(&axis);
  chart.setRun(occupancy_run(30, false));  // every device_bytes is -1
  axis.setBounds(0, 31'000);
  grab(chart);
  EXPECT_FALSE(chart.hasData());
  EXPECT_TRUE(chart.toolTipAt(QPoint(400, 80)).isEmpty());

  chart.setRun(occupancy_run(300, true));
  axis.setBounds(0, 301'000);
  const QImage image = grab(chart);
  EXPECT_TRUE(chart.hasData());
  EXPECT_GT(chart.lastFramePrimitives(), 3);
  EXPECT_GT(non_background_pixels(image, offtune::gui::time_plot_rect(image.rect())), 2000);
  // The dashed peak line: a row of dark red dashes across the plot.
  int best = 0;
  const QRect plot = chart.plotRect();
  for (int y = 0; y < image.height(); ++y) {
    int reds = 0;
    for (int x = plot.left(); x <= plot.right(); ++x) {
      const QColor c(image.pixel(x, y));
      if (c.red() > 150 && c.green() < 60 && c.blue() < 60) ++reds;
    }
    best = std::max(best, reds);
  }
  EXPECT_GT(best, plot.width() / 3);
  EXPECT_TRUE(chart.toolTipAt(QPoint(plot.left() + 300, 80)).contains(QStringLiteral("peak")));
}

// Reserved behind allocated, with both peaks and what lies between them at the pointer; the host
// side (pinned pool behind host copies) in a chart of its own; a run recorded before the store
// kept these figures (-1) has no such curves, and says so.
TEST(RunChart, ReservedBesideAllocatedAndTheHostSideOverTime) {
  auto run = occupancy_run(40, true);
  constexpr int64_t kMiB = int64_t{1} << 20;
  for (auto& o : run->occupancy) {
    o.reserved_bytes = o.device_bytes + 64 * kMiB;
    o.host_bytes = o.fwd_bytes / 2;
    o.host_pool_bytes = 96 * kMiB;
  }
  run->run.summary.peak_reserved = run->run.summary.peak_allocated + 64 * kMiB;
  run->run.summary.pinned_bytes = 96 * kMiB;
  TimeAxis axis;
  RunChart device(RunChart::DeviceMemory);
  device.resize(800, 150);
  device.setAxis(&axis);
  device.setRun(run);
  axis.setBounds(0, 42'000);
  grab(device);
  const QString tip = device.toolTipAt(QPoint(device.plotRect().left() + 400, 80));
  for (const char* part : {"device reserved", "device allocated",
                           "reserved beyond live tensors: 64", "peak allocated", "peak reserved"}) {
    EXPECT_TRUE(tip.contains(QString::fromUtf8(part))) << part << " not in " << tip.toStdString();
  }
  RunChart host(RunChart::HostMemory);
  host.resize(800, 150);
  host.setAxis(&axis);
  host.setRun(run);
  const QImage image = grab(host);
  EXPECT_TRUE(host.hasData());
  EXPECT_GT(non_background_pixels(image, offtune::gui::time_plot_rect(image.rect())), 2000);
  const QString host_tip = host.toolTipAt(QPoint(host.plotRect().left() + 400, 80));
  for (const char* part : {"pinned pool: 96", "host copies", "pinned pool at most: 96"}) {
    EXPECT_TRUE(host_tip.contains(QString::fromUtf8(part)))
        << part << " not in " << host_tip.toStdString();
  }
  // Recorded before schema 11: allocated alone, no host chart.
  const auto old = occupancy_run(40, true);
  device.setRun(old);
  EXPECT_FALSE(device.toolTipAt(QPoint(device.plotRect().left() + 400, 80))
                   .contains(QStringLiteral("reserved")));
  host.setRun(old);
  EXPECT_FALSE(host.hasData());
}

TEST(RunChart, RandomSamplesAndViewsStayInBounds) {
  std::mt19937_64 rng(9);
  auto run = std::make_shared<RunData>();
  for (int i = 0; i < 5000; ++i) {  // out of order, some without device bytes
    pf::OccupancySample o;
    o.time_ns = static_cast<int64_t>(rng() % 10'000'000);
    o.fwd_bytes = static_cast<int64_t>(rng() % 1'000'000);
    o.bwd_bytes = static_cast<int64_t>(rng() % 1'000'000);
    o.device_bytes = rng() % 3 == 0 ? -1 : static_cast<int64_t>(rng() % 5'000'000);
    o.reserved_bytes = o.device_bytes < 0 ? -1 : o.device_bytes + static_cast<int64_t>(rng() % 9);
    o.host_bytes = rng() % 4 == 0 ? -1 : static_cast<int64_t>(rng() % 2'000'000);
    o.host_pool_bytes = o.host_bytes < 0 ? -1 : o.host_bytes + 2'000'000;
    run->occupancy.push_back(o);
  }
  for (auto mode : {RunChart::Occupancy, RunChart::DeviceMemory, RunChart::HostMemory}) {
    RunChart chart(mode);
    chart.resize(400, 120);
    TimeAxis axis;
    chart.setAxis(&axis);
    chart.setRun(run);
    axis.setBounds(0, 10'000'000);
    QImage image(400, 120, QImage::Format_ARGB32_Premultiplied);
    for (int i = 0; i < 200; ++i) {
      const int64_t begin = static_cast<int64_t>(rng() % 12'000'000) - 1'000'000;
      const int64_t view = 1 + static_cast<int64_t>(rng() % 10'000'000);
      RenderStats stats;
      {
        QPainter p(&image);
        chart.paintChart(p, image.rect(), begin, begin + view, &stats);
      }
      EXPECT_LT(stats.primitives, 2 * 400 + 50);
      axis.setView(begin, begin + view);
      chart.toolTipAt(QPoint(static_cast<int>(rng() % 420) - 10, 60));
    }
  }
}

TEST(RunChart, SharesTheTimelinesXForTheSameTime) {
  // The same time maps to the same column in a chart and in the timeline of the same width.
  RunChart chart(RunChart::Occupancy);
  TimelineWidget timeline;
  chart.resize(900, 120);
  timeline.resize(900, 240);
  EXPECT_EQ(chart.plotRect().left(), timeline.plotRect().left());
  EXPECT_EQ(chart.plotRect().width(), timeline.plotRect().width());
}

TEST(RunChart, WheelOnTheChartZoomsTheSharedAxis) {
  RunChart chart(RunChart::Occupancy);
  chart.resize(800, 150);
  TimeAxis axis;
  chart.setAxis(&axis);
  chart.setRun(occupancy_run(100, false));
  axis.setBounds(0, 101'000);
  const QPointF at(chart.plotRect().center());
  QWheelEvent wheel(at, chart.mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton,
                    Qt::NoModifier, Qt::NoScrollPhase, false);
  QCoreApplication::sendEvent(&chart, &wheel);
  EXPECT_NEAR(static_cast<double>(axis.viewSpan()), 101'000 / 1.5625, 2.0);
}

}  // namespace

// ---- colours, legend, layout, compute names, arrows ---------------------------------------------

// CIE L*a*b* of an sRGB colour (D65), and the same colour as seen with a colour-vision deficiency
// (Machado, Oliveira and Fernandes 2009, severity 1, applied in linear RGB).
struct Lab {
  double l, a, b;
};
enum class Vision { Normal, Deuteranopia, Protanopia, Tritanopia };

double linear(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
double gamma(double c) {
  c = std::clamp(c, 0.0, 1.0);
  return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1 / 2.4) - 0.055;
}

Lab lab(const QColor& colour, Vision vision) {
  double rgb[3] = {linear(colour.redF()), linear(colour.greenF()), linear(colour.blueF())};
  static const double kMachado[3][3][3] = {
      {{0.367322, 0.860646, -0.227968},
       {0.280085, 0.672501, 0.047413},
       {-0.011820, 0.042940, 0.968881}},  // deuteranopia
      {{0.152286, 1.052583, -0.204868},
       {0.114503, 0.786281, 0.099216},
       {-0.003882, -0.048116, 1.051998}},  // protanopia
      {{1.255528, -0.076749, -0.178779},
       {-0.078411, 0.930809, 0.147602},
       {0.004733, 0.691367, 0.303900}},  // tritanopia
  };
  if (vision != Vision::Normal) {
    const auto& m = kMachado[static_cast<int>(vision) - 1];
    double out[3];
    for (int i = 0; i < 3; ++i) {
      out[i] = gamma(m[i][0] * rgb[0] + m[i][1] * rgb[1] + m[i][2] * rgb[2]);
    }
    for (int i = 0; i < 3; ++i) rgb[i] = linear(out[i]);
  }
  const double x = (0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2]) / 0.95047;
  const double y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
  const double z = (0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2]) / 1.08883;
  const auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116.0; };
  return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}

double delta_e(const QColor& a, const QColor& b, Vision vision) {
  const Lab p = lab(a, vision);
  const Lab q = lab(b, vision);
  return std::sqrt((p.l - q.l) * (p.l - q.l) + (p.a - q.a) * (p.a - q.a) +
                   (p.b - q.b) * (p.b - q.b));
}

// The series colours of a run chart, read off its legend swatches (10 x 8 rects of one saturated
// colour at the top of the plot).
std::vector<QColor> chart_series_colours(RunChart::Mode mode) {
  RunChart chart(mode);
  auto data = occupancy_run(50, true);
  for (auto& o : data->occupancy) {  // every figure known: every series drawn
    o.reserved_bytes = o.device_bytes + (int64_t{1} << 26);
    o.host_bytes = o.fwd_bytes;
    o.host_pool_bytes = o.fwd_bytes + (int64_t{1} << 26);
  }
  chart.setRun(data);
  QImage image(900, 200, QImage::Format_ARGB32_Premultiplied);
  {
    QPainter p(&image);
    chart.paintChart(p, image.rect(), 0, 60'000);
  }
  std::vector<QColor> out;
  const int y = 8;
  for (int x = 0; x < image.width();) {
    const QColor c(image.pixel(x, y));
    int run = 1;
    while (x + run < image.width() && image.pixel(x + run, y) == image.pixel(x, y)) ++run;
    if (run == 10 && c.hsvSaturation() > 60) out.push_back(c);
    x += run;
  }
  return out;
}

// One event of each kind, laid out so that at 1 ns per pixel each has columns of its own.
RunData every_kind_run() {
  RunData run;
  auto& e = run.events;
  e.push_back(pf::event_span(EventKind::Step, 0, 1000));
  e.push_back(pf::event_span(EventKind::Forward, 0, 400));
  e.push_back(pf::event_span(EventKind::Compute, 10, 90));
  e.back().name = "gemm";
  e.push_back(pf::event_span(EventKind::CopyD2H, 100, 200, {.stream = 1, .bytes = 4096}));
  e.push_back(pf::event_span(EventKind::Pack, 300, 300, {.bytes = 4096}));
  e.push_back(pf::event_span(EventKind::Unpack, 350, 350, {.bytes = 4096}));
  e.push_back(pf::event_span(EventKind::Backward, 500, 1000));
  e.push_back(pf::event_span(EventKind::CopyH2D, 600, 700, {.stream = 1, .bytes = 4096}));
  e.push_back(pf::event_span(EventKind::Wait, 800, 900));
  return run;
}

TEST(TimelineColours, KindsAndChartSeriesAreDistinctAlsoUnderColourBlindness) {
  // The colours as painted: sampled from the lanes at 1 ns per pixel.
  const auto index = offtune::gui::build_timeline_index(every_kind_run());
  const QImage image = paint(
      *index, 1000 + offtune::gui::kTimeGutter + offtune::gui::kTimeRightMargin, 0, 1000, nullptr);
  const QRect plot = offtune::gui::time_plot_rect(image.rect());
  const auto row = [&](size_t lane) {
    return offtune::gui::timeline_lane_rect(image.rect(), *index, lane);
  };
  const auto at = [&](int64_t t, int y) { return QColor(image.pixel(plot.left() + int(t), y)); };
  const QRect pu = row(5);
  const int band_top = pu.top() + 2;  // the lanes' margin at the natural height
  const int half = (pu.height() - 4) / 2;
  const std::vector<std::pair<const char*, QColor>> kinds = {
      {"step", at(450, row(0).top() + 3)},           // between forward and backward
      {"forward", at(200, row(0).center().y())},     //
      {"backward", at(700, row(0).center().y())},    //
      {"compute", at(50, row(1).top() + 3)},         // above the kernel's name
      {"copy D2H", at(150, row(2).center().y())},    //
      {"copy H2D", at(650, row(3).center().y())},    //
      {"wait", at(850, row(4).center().y())},        //
      {"pack", at(300, band_top + half - 1)},        // the foot of the tick, top half
      {"unpack", at(350, band_top + 2 * half - 1)},  // bottom half
  };
  std::vector<std::pair<std::string, QColor>> all(kinds.begin(), kinds.end());
  const auto occupancy = chart_series_colours(RunChart::Occupancy);
  const auto memory = chart_series_colours(RunChart::DeviceMemory);
  const auto host = chart_series_colours(RunChart::HostMemory);
  ASSERT_EQ(occupancy.size(), 2u);
  ASSERT_EQ(memory.size(), 2u);
  ASSERT_EQ(host.size(), 2u);
  all.emplace_back("forward stash", occupancy[0]);
  all.emplace_back("backward stash", occupancy[1]);
  all.emplace_back("device reserved", memory[0]);
  all.emplace_back("device allocated", memory[1]);
  all.emplace_back("pinned pool", host[0]);
  all.emplace_back("host copies", host[1]);

  // The lanes paint the colours the legend shows.
  for (const auto& [label, colour] : kinds) {
    const auto& legend = offtune::gui::timeline_legend();
    const auto it = std::find_if(legend.begin(), legend.end(),
                                 [&](const auto& e) { return e.label == QLatin1String(label); });
    ASSERT_NE(it, legend.end()) << label;
    EXPECT_EQ(it->colour.rgb(), colour.rgb()) << label;
  }

  // Pairwise: clearly apart for normal vision, and apart under each deficiency. The charts' own
  // pairs are not the timeline's to choose (the forward stash and device memory, blue and purple,
  // come close for deuteranopes), so only pairs with a timeline kind count.
  const std::pair<Vision, double> limits[] = {{Vision::Normal, 20.0},
                                              {Vision::Deuteranopia, 10.0},
                                              {Vision::Protanopia, 10.0},
                                              {Vision::Tritanopia, 10.0}};
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (i >= kinds.size() && j >= kinds.size()) continue;
      for (const auto& [vision, limit] : limits) {
        EXPECT_GE(delta_e(all[i].second, all[j].second, vision), limit)
            << all[i].first << " vs " << all[j].first << " (vision " << static_cast<int>(vision)
            << ")";
      }
    }
  }
}

TEST(TimelineLegend, ListsEveryKindAndMarkingAndIsPaintedBeneathTheLanes) {
  using Entry = offtune::gui::TimelineLegendEntry;
  const auto& legend = offtune::gui::timeline_legend();
  QSet<QString> labels;
  QSet<QRgb> colours_seen;
  int kinds = 0;
  std::set<Entry::Swatch> markings;
  for (const auto& e : legend) {
    EXPECT_FALSE(e.label.isEmpty());
    labels.insert(e.label);
    if (e.swatch == Entry::Swatch::Fill) {
      ++kinds;
      EXPECT_EQ(e.colour, offtune::gui::timeline_kind_colour(e.kind)) << e.label.toStdString();
      colours_seen.insert(e.colour.rgb());
    } else {
      markings.insert(e.swatch);
    }
  }
  EXPECT_EQ(labels.size(), static_cast<qsizetype>(legend.size()));  // no label twice
  EXPECT_EQ(kinds, static_cast<int>(offtune::gui::kEventKindCount));
  EXPECT_EQ(colours_seen.size(), kinds);  // no colour twice
  // Merged: the lighter tint of blocks drawn as one (issue 43 defect 17: it was unexplained).
  EXPECT_EQ(markings, (std::set<Entry::Swatch>{Entry::Swatch::Prefetch, Entry::Swatch::Pageable,
                                               Entry::Swatch::Arrow, Entry::Swatch::Merged}));

  // It wraps: a narrow timeline gives it more rows.
  const QFontMetrics fm(QApplication::font());
  EXPECT_GT(offtune::gui::timeline_legend_height(fm, 400),
            offtune::gui::timeline_legend_height(fm, 2000));

  TimelineWidget w;
  w.resize(700, 320);
  TimeAxis axis;
  w.setAxis(&axis);
  const auto index = offtune::gui::build_timeline_index(small_run());
  w.setIndex(index);
  axis.setBounds(index->begin_ns, index->end_ns);
  const QImage image = grab(w);
  const QRect legend_rect = w.legendRect();
  ASSERT_FALSE(legend_rect.isEmpty());
  EXPECT_EQ(legend_rect.bottom(), w.rect().bottom());
  EXPECT_LT(w.laneRect(index->lanes.size() - 1).bottom(), legend_rect.top());
  // Every kind's swatch is in the legend's pixels.
  const QSet<QRgb> painted = colours(image, legend_rect);
  for (const auto& e : legend) {
    if (e.swatch == Entry::Swatch::Fill) {
      EXPECT_TRUE(painted.contains(e.colour.rgb())) << e.label.toStdString();
    }
  }
  EXPECT_TRUE(painted.contains(qRgb(0, 0, 0)));  // the markings
  // Painting again reuses the legend (cached) and gives the same pixels.
  EXPECT_EQ(grab(w).copy(legend_rect), image.copy(legend_rect));
}

class RunViewLayout : public ::testing::TestWithParam<QSize> {};

TEST_P(RunViewLayout, LanesGetAFairShareAndFollowTheSplitter) {
  offtune::gui::MainWindow window;
  window.resize(GetParam());
  auto run = std::make_shared<RunData>(small_run());
  run->occupancy.push_back(run->occupancy.back());
  offtune::gui::RunView* view = window.runView();
  view->setRunData(run, offtune::gui::build_timeline_index(*run));
  window.tabs()->setCurrentWidget(view);
  window.show();
  QApplication::processEvents();

  TimelineWidget* timeline = view->timeline();
  QSplitter* split = view->chartsSplitter();
  ASSERT_NE(split, nullptr);
  ASSERT_EQ(split->indexOf(timeline), 0);
  const auto& index = *timeline->index();
  // The lanes, then the occupancy, device memory and host memory charts.
  ASSERT_EQ(split->count(), 4);
  const auto sizes = split->sizes();
  const int total = std::accumulate(sizes.begin(), sizes.end(), 0);
  const auto lane_height = [&] { return timeline->laneRect(0).height(); };
  // By default about half the height goes to the lanes, and every lane and the legend show.
  EXPECT_GE(timeline->height(), total * 2 / 5) << timeline->height() << " of " << total;
  EXPECT_LE(timeline->height(), total * 2 / 3) << timeline->height() << " of " << total;
  EXPECT_GT(lane_height(), offtune::gui::kTimelineLaneHeight);
  EXPECT_LT(timeline->laneRect(index.lanes.size() - 1).bottom(), timeline->legendRect().top());
  EXPECT_EQ(timeline->legendRect().bottom(), timeline->height() - 1);

  // setSizes moves the boundary, and the lanes follow it.
  const int before = lane_height();
  split->setSizes({total - 240, 80, 80, 80});
  QApplication::processEvents();
  EXPECT_GT(timeline->height(), total - 240 - 4);
  EXPECT_GT(lane_height(), before);

  // So does dragging the handle beneath the timeline: 150 px up.
  split->setSizes({total * 3 / 5, total / 7, total / 7, total - total * 3 / 5 - 2 * (total / 7)});
  QApplication::processEvents();
  const int height_before_drag = timeline->height();
  const int lanes_before_drag = lane_height();
  QSplitterHandle* handle = split->handle(1);
  const QPoint from = handle->rect().center();
  const QPoint to = from - QPoint(0, 150);
  QMouseEvent press(QEvent::MouseButtonPress, from, handle->mapToGlobal(from), Qt::LeftButton,
                    Qt::LeftButton, Qt::NoModifier);
  QMouseEvent move(QEvent::MouseMove, to, handle->mapToGlobal(to), Qt::NoButton, Qt::LeftButton,
                   Qt::NoModifier);
  QMouseEvent release(QEvent::MouseButtonRelease, to, handle->mapToGlobal(to), Qt::LeftButton,
                      Qt::NoButton, Qt::NoModifier);
  QCoreApplication::sendEvent(handle, &press);
  QCoreApplication::sendEvent(handle, &move);
  QCoreApplication::sendEvent(handle, &release);
  QApplication::processEvents();
  EXPECT_NEAR(timeline->height(), height_before_drag - 150, 2);
  EXPECT_LT(lane_height(), lanes_before_drag);
  EXPECT_GE(lane_height(), offtune::gui::kTimelineMinLaneHeight);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RunViewLayout,
                         ::testing::Values(QSize(1280, 800), QSize(1920, 1080)),
                         [](const auto& param_info) {
                           return std::to_string(param_info.param.width()) + "x" +
                                  std::to_string(param_info.param.height());
                         });

// Host-sim's shape: compute is forward / backward minus the waits, every slice named "compute".
RunData host_sim_run() {
  RunData run;
  auto& e = run.events;
  const auto compute = [&e](int64_t from, int64_t to, const char* name = "compute") {
    e.push_back(pf::event_span(EventKind::Compute, from, to));
    e.back().name = name;
  };
  const auto wait = [&e](int64_t from, int64_t to, int64_t tensor, const char* kind) {
    e.push_back(pf::event_span(EventKind::Wait, from, to, {.tensor = tensor}));
    e.back().name = kind;
  };
  const auto copy = [&e](EventKind kind, int64_t from, int64_t to, int64_t tensor) {
    e.push_back(pf::event_span(kind, from, to, {.stream = 1, .bytes = 4096, .tensor = tensor}));
  };
  e.push_back(pf::event_span(EventKind::Step, 0, 4000));
  e.push_back(pf::event_span(EventKind::Forward, 0, 2000));
  compute(0, 1000);                         // 0: ends at the forward-window wait on 5
  copy(EventKind::CopyD2H, 100, 600, 5);    // an older offload of 5
  copy(EventKind::CopyD2H, 200, 300, 6);    // the only copy of 6
  copy(EventKind::CopyD2H, 700, 1200, 5);   // <- the forward-window wait's
  wait(1000, 1300, 5, "forward-window");    //
  compute(1300, 2000);                      // 1: runs to the end of forward
  copy(EventKind::CopyD2H, 1400, 1500, 5);  // starts after that wait ended: not it
  e.push_back(pf::event_span(EventKind::Backward, 2000, 4000));
  compute(2000, 2500);                      // 2: ends at the reload wait on 5
  copy(EventKind::CopyH2D, 2100, 2600, 5);  // <- the reload wait's
  wait(2500, 2700, 5, "reload");            //
  compute(2700, 2800);                      // 3: ends at a reload wait on 6 (never reloaded)
  wait(2800, 2900, 6, "reload");            //
  compute(2900, 3000);                      // 4: ends at the drain
  wait(3000, 3100, -1, "drain");            //
  compute(3100, 3200);                      // 5: ends at a wait of no known kind on 6
  wait(3200, 3300, 6, "");                  //
  compute(3300, 4000);                      // 6: runs to the end of backward
  compute(3400, 3500, "gemm_kernel");       // a real kernel name: kept
  std::stable_sort(e.begin(), e.end(),
                   [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  return run;
}

// The tooltip `x` ns into the view [begin, end], drawn one pixel a nanosecond, on lane `lane`.
QString tooltip_at(const TimelineIndex& index, int64_t begin, int64_t end, int64_t x, size_t lane) {
  const QRect area(
      0, 0,
      static_cast<int>(end - begin) + offtune::gui::kTimeGutter + offtune::gui::kTimeRightMargin,
      offtune::gui::timeline_height(&index));
  const QRect plot = offtune::gui::time_plot_rect(area);
  return offtune::gui::timeline_tooltip(
      index, area, begin, end,
      QPoint(plot.left() + static_cast<int>(x),
             offtune::gui::timeline_lane_rect(area, index, lane).center().y()));
}

TEST(TimelineIndex, NamesHostSimComputeAfterItsPhaseOrTheWaitThatEndsIt) {
  const auto index = offtune::gui::build_timeline_index(host_sim_run());
  const auto& compute = lane(*index, LaneKind::Compute).spans;
  std::vector<std::string> names;
  for (size_t i = 0; i < compute.size(); ++i) names.push_back(index->names[compute.info[i].name]);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "compute before wait on tensor 5", "forward compute",
                       "compute before wait on tensor 5", "compute before wait on tensor 6",
                       "compute before drain wait", "compute before wait on tensor 6",
                       "backward compute", "gemm_kernel"}));
  // Interned: both slices before a wait on 5 share one name.
  EXPECT_EQ(compute.info[0].name, compute.info[2].name);

  // The tooltip says it, zoomed in on the forward slice after the wait.
  const QString tip = tooltip_at(*index, 1000, 2000, 600, 1);
  EXPECT_TRUE(tip.contains(QStringLiteral("name forward compute"))) << tip.toStdString();
}

TEST(TimelineIndex, LinksEachWaitToTheCopyItWaitedOn) {
  const auto index = offtune::gui::build_timeline_index(host_sim_run());
  const auto* d2h = index->lane(LaneKind::CopyD2H);
  const auto* h2d = index->lane(LaneKind::CopyH2D);
  const auto& waits = lane(*index, LaneKind::Waits).spans;
  ASSERT_EQ(index->flows.size(), 3u);
  std::vector<std::tuple<const offtune::gui::TimelineLane*, int64_t, int64_t>> links;
  for (const auto& f : index->flows) {
    const auto& from = index->lanes[f.from_lane];
    EXPECT_EQ(f.from_ns, from.spans.end[f.copy]);
    EXPECT_EQ(f.to_ns, waits.end[f.wait]);
    EXPECT_EQ(from.spans.info[f.copy].tensor, waits.info[f.wait].tensor);
    links.emplace_back(&from, from.spans.start[f.copy], waits.start[f.wait]);
  }
  // Sorted by the wait's end; the latest copy that started before each wait ended, in the
  // direction its kind waits on; none for the drain nor the reload of 6, never reloaded.
  using L = std::tuple<const offtune::gui::TimelineLane*, int64_t, int64_t>;
  EXPECT_EQ(links, (std::vector<L>{{d2h, 700, 1000}, {h2d, 2100, 2500}, {d2h, 200, 3200}}));

  // A wait's tooltip names the copy.
  const QString tip = tooltip_at(*index, 0, 4000, 1100, 4);
  EXPECT_TRUE(tip.contains(QStringLiteral("waited on copy D2H +700 ns \u2013 +1.20 \u00b5s")))
      << tip.toStdString();
}

TEST(TimelineRender, DrawsAnArrowFromEachCopyToTheWaitOnIt) {
  const auto index = offtune::gui::build_timeline_index(host_sim_run());
  const int width = 4000 + offtune::gui::kTimeGutter + offtune::gui::kTimeRightMargin;
  RenderStats stats;
  const QImage image = paint(*index, width, 0, 4000, &stats);
  EXPECT_EQ(stats.arrows, 3);
  // The arrow into the forward-window wait ends at the wait's end (1300), at the top of the waits
  // lane's bars: dark pixels there, coming down through the H2D lane above it.
  const QRect plot = offtune::gui::time_plot_rect(image.rect());
  const QRect waits = offtune::gui::timeline_lane_rect(image.rect(), *index, 4);
  const QRect h2d = offtune::gui::timeline_lane_rect(image.rect(), *index, 3);
  const auto dark_near = [&](int x, int y) {
    for (int dx = -2; dx <= 2; ++dx) {
      if (QColor(image.pixel(x + dx, y)).lightness() < 80) return true;
    }
    return false;
  };
  EXPECT_TRUE(dark_near(plot.left() + 1300, waits.top() + 1));
  EXPECT_TRUE(dark_near(plot.left() + 1250, h2d.center().y()));
  EXPECT_FALSE(dark_near(plot.left() + 1800, h2d.center().y()));  // no arrow there

  // Only both ends in view: [1250, 4000] cuts off the ends of the D2H copies (1200 and 300).
  paint(*index, width, 1250, 4000, &stats);
  EXPECT_EQ(stats.arrows, 1);
}

TEST_F(MillionEvents, ArrowsOnlyWhereFewWaitsAreInView) {
  ASSERT_GT(index_->flows.size(), 10'000u);
  RenderStats stats;
  paint(*index_, 1200, index_->begin_ns, index_->end_ns, &stats);
  EXPECT_EQ(stats.arrows, 0);  // thousands in view: none, and not one looked at
  EXPECT_LT(stats.visited, 50'000);

  // Zoomed in to about 40 waits: each drawn, at most one per column.
  const auto& flows = index_->flows;
  const size_t k = flows.size() / 2;
  paint(*index_, 1200, flows[k].to_ns - 1, flows[k + 40].to_ns, &stats);
  EXPECT_GT(stats.arrows, 30);
  EXPECT_LE(stats.arrows, offtune::gui::kTimelineMaxArrows);
}

// ---- a stretch of the timeline, measured (issue 43 item 5) -------------------------------------

namespace range_tests {
using namespace offtune::gui;
using offtune::profiler::EventKind;
namespace pf = offtune::profiler;

// Compute [0,100) and [150,300), a wait [100,150), a D2H copy [50,200) of 1500 B, an H2D copy
// [250,350) of 1000 B. Over [0,300): compute 250 ns, wait 50 ns, D2H 150 ns and all its bytes
// (10 GB/s), H2D its first half (500 B in 50 ns), copies 200 ns of which compute hid 150 ns.
TEST(TimelineRange, AStretchsFiguresAreUnionsClippedToItAndBytesInProportion) {
  RunData run;
  auto& e = run.events;
  e.push_back(pf::event_span(EventKind::Compute, 0, 100));
  e.push_back(pf::event_span(EventKind::Compute, 150, 300));
  e.push_back(pf::event_span(EventKind::Compute, 160, 200, {.stream = 9}));  // another stream
  e.push_back(pf::event_span(EventKind::Wait, 100, 150));
  e.push_back(pf::event_span(EventKind::CopyD2H, 50, 200, {.stream = 1, .bytes = 1500}));
  e.push_back(pf::event_span(EventKind::CopyH2D, 250, 350, {.stream = 1, .bytes = 1000}));
  const auto index = build_timeline_index(run);
  const TimelineRangeStats s = timeline_range_stats(*index, 300, 0);  // either way round
  EXPECT_EQ(s.span_ns(), 300);
  EXPECT_EQ(s.compute_ns, 250);
  EXPECT_EQ(s.wait_ns, 50);
  EXPECT_EQ(s.d2h_ns, 150);
  EXPECT_DOUBLE_EQ(s.d2h_bytes, 1500.0);
  EXPECT_EQ(s.d2h_copies, 1);
  EXPECT_DOUBLE_EQ(s.d2h_gbps(), 10.0);
  EXPECT_EQ(s.h2d_ns, 50);
  EXPECT_DOUBLE_EQ(s.h2d_bytes, 500.0);
  EXPECT_DOUBLE_EQ(s.h2d_gbps(), 10.0);
  EXPECT_EQ(s.copy_ns, 200);
  EXPECT_EQ(s.copy_hidden_ns, 150);
  const QString text = describe_range(s, 20.0);
  for (const char* part :
       {"compute busy", "exposed wait 50 ns (16.7 %)", "in 1 copy at 10.0 GB/s",
        "(50 % of the link's 20.0 GB/s)", "copy time hidden by compute 75.0 %"}) {
    EXPECT_TRUE(text.contains(QLatin1String(part))) << part << " in " << text.toStdString();
  }
  // A stretch with nothing in it.
  const TimelineRangeStats none = timeline_range_stats(*index, 400, 500);
  EXPECT_EQ(none.compute_ns + none.wait_ns + none.copy_ns, 0);
  EXPECT_TRUE(describe_range(none, 0.0).contains(QLatin1String("D2H none")));
}

// Shift+drag on the Run tab's timeline selects a stretch; the view says what it held; a click
// clears it.
TEST(TimelineRange, ShiftDragSelectsAStretchAndTheRunViewMeasuresIt) {
  auto run = std::make_shared<RunData>(small_run());
  RunView view;
  view.resize(1000, 700);
  view.setRunData(run, build_timeline_index(*run));
  view.show();
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
  TimelineWidget* timeline = view.timeline();
  auto* stats = view.findChild<QLabel*>(QStringLiteral("rangeStats"));
  ASSERT_NE(stats, nullptr);
  EXPECT_FALSE(stats->isVisible());
  const QRect plot = time_plot_rect(timeline->lanesRect());
  const int y = timeline->laneRect(1).center().y();
  const QPoint from(plot.left() + plot.width() / 10, y), to(plot.left() + plot.width() / 2, y);
  const int64_t span_before = view.axis()->viewSpan();
  QTest::mousePress(timeline, Qt::LeftButton, Qt::ShiftModifier, from);
  QTest::mouseMove(timeline, to);
  QTest::mouseRelease(timeline, Qt::LeftButton, Qt::ShiftModifier, to);
  ASSERT_TRUE(timeline->selection());
  EXPECT_LT(timeline->selection()->first, timeline->selection()->second);
  EXPECT_EQ(view.axis()->viewSpan(), span_before) << "a selection does not pan or zoom";
  EXPECT_TRUE(stats->isVisible());
  EXPECT_TRUE(stats->text().contains(QLatin1String("selected: compute busy")))
      << stats->text().toStdString();
  QTest::mouseClick(timeline, Qt::LeftButton, Qt::NoModifier, from);
  EXPECT_FALSE(timeline->selection());
  EXPECT_FALSE(stats->isVisible());
}

// Issue 43 item 5: one tensor followed from its pack through both copies to its unpack. A click
// on one of its events follows it (outlined; the view tells its story), a click elsewhere stops.
TEST(TimelineTensor, AClickFollowsATensorFromPackThroughBothCopiesToUnpack) {
  auto run = std::make_shared<RunData>();
  auto& e = run->events;
  const auto of = [&](int64_t tensor) { e.back().tensor = tensor; };
  e.push_back(pf::event_span(EventKind::Step, 0, 1000));
  e.push_back(pf::event_span(EventKind::Compute, 0, 1000));
  // The copy first in the list, at the pack's instant (as host-sim records them): the story still
  // starts with the pack.
  e.push_back(pf::event_span(EventKind::CopyD2H, 100, 400, {.stream = 1, .bytes = 4096}));
  of(5);
  e.push_back(pf::event_span(EventKind::Pack, 100, 100, {.bytes = 4096}));
  of(5);
  e.push_back(pf::event_span(EventKind::CopyD2H, 420, 500, {.stream = 1, .bytes = 512}));
  of(6);
  e.push_back(pf::event_span(EventKind::CopyH2D, 600, 640, {.stream = 1, .bytes = 4096}));
  of(5);
  e.back().prefetch = true;
  e.push_back(pf::event_span(EventKind::Unpack, 660, 660, {.bytes = 4096}));
  of(5);
  const auto index = build_timeline_index(*run);
  const auto events = tensor_events(*index, 5);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, EventKind::Pack);
  EXPECT_EQ(events[1].kind, EventKind::CopyD2H);
  EXPECT_EQ(events[2].kind, EventKind::CopyH2D);
  EXPECT_EQ(events[3].kind, EventKind::Unpack);
  const QString story = describe_tensor(*index, 5);
  EXPECT_TRUE(story.startsWith(QStringLiteral("tensor 5, 4.00 KiB: pack +100 ns \u2192 copy D2H")))
      << story.toStdString();
  EXPECT_TRUE(story.contains(QStringLiteral("copy H2D (prefetched)"))) << story.toStdString();
  EXPECT_TRUE(story.endsWith(QStringLiteral("unpack +660 ns"))) << story.toStdString();
  EXPECT_TRUE(describe_tensor(*index, 99).isEmpty());

  RunView view;
  view.resize(1000, 700);
  view.setRunData(run, index);
  view.show();
  for (int i = 0; i < 5; ++i) QApplication::processEvents();
  TimelineWidget* timeline = view.timeline();
  auto* label = view.findChild<QLabel*>(QStringLiteral("tensorStory"));
  ASSERT_NE(label, nullptr);
  size_t d2h = 0;
  while (d2h < index->lanes.size() && index->lanes[d2h].kind != LaneKind::CopyD2H) ++d2h;
  ASSERT_LT(d2h, index->lanes.size());
  const QRect plot = time_plot_rect(timeline->lanesRect());
  const int x = plot.left() + static_cast<int>(view.axis()->toX(250, plot.width()));
  const QPoint on_copy(x, timeline->laneRect(d2h).center().y());
  QTest::mouseClick(timeline, Qt::LeftButton, Qt::NoModifier, on_copy);
  EXPECT_EQ(timeline->followedTensor(), 5);
  EXPECT_TRUE(label->isVisible());
  EXPECT_EQ(label->text(), story);
  const int elsewhere = plot.left() + static_cast<int>(view.axis()->toX(800, plot.width()));
  QTest::mouseClick(timeline, Qt::LeftButton, Qt::NoModifier,
                    QPoint(elsewhere, timeline->laneRect(d2h).center().y()));
  EXPECT_EQ(timeline->followedTensor(), -1);
  EXPECT_FALSE(label->isVisible());
}

// Issue 43 item 2: what was live at the peak and why. Allocated peaks at 500 ns (reserved 12 KiB
// above it). Tensor 1 (1 KiB, kept: below the threshold) is alive; tensor 2 (4 KiB) was offloaded
// and is on the host; tensor 3 (8 KiB) is being copied out, still on the device; tensor 4 is packed
// after the peak and tensor 5 unpacked before it: neither counts.
TEST(RunPeak, TheSavedTensorsAliveAtThePeakByWhereAndWhy) {
  RunData run;
  auto& e = run.events;
  const auto pack = [&](int64_t id, int64_t t, int64_t bytes, const char* decision) {
    e.push_back(pf::event_span(EventKind::Pack, t, t, {.bytes = bytes}));
    e.back().tensor = id;
    e.back().name = decision;
  };
  const auto event = [&](EventKind k, int64_t id, int64_t from, int64_t to, int64_t bytes) {
    e.push_back(pf::event_span(k, from, to, {.stream = 1, .bytes = bytes}));
    e.back().tensor = id;
  };
  pack(1, 100, 1024, "below-threshold");
  event(EventKind::Unpack, 1, 900, 900, 1024);
  pack(2, 110, 4096, "offloaded");
  event(EventKind::CopyD2H, 2, 110, 200, 4096);
  event(EventKind::CopyH2D, 2, 800, 850, 4096);
  event(EventKind::Unpack, 2, 860, 860, 4096);
  pack(3, 450, 8192, "offloaded");
  event(EventKind::CopyD2H, 3, 450, 600, 8192);
  pack(4, 600, 2048, "below-threshold");
  pack(5, 100, 512, "parameter");
  event(EventKind::Unpack, 5, 400, 400, 512);
  for (const auto& [t, allocated] : {std::pair{0, 1000}, std::pair{500, 50000}, {700, 20000}}) {
    pf::OccupancySample o;
    o.time_ns = t;
    o.device_bytes = allocated;
    o.reserved_bytes = allocated + 12 * 1024;
    run.occupancy.push_back(o);
  }
  const PeakBreakdown peak = peak_breakdown(run);
  ASSERT_TRUE(peak.known);
  EXPECT_EQ(peak.time_ns, 500);
  EXPECT_EQ(peak.allocated, 50000);
  EXPECT_EQ(peak.device_count(), 2);
  EXPECT_EQ(peak.device_bytes(), 1024 + 8192);
  EXPECT_EQ(peak.on_device.at("kept: below-threshold"), (std::pair<int64_t, int64_t>{1, 1024}));
  EXPECT_EQ(peak.on_device.at("copying out"), (std::pair<int64_t, int64_t>{1, 8192}));
  EXPECT_EQ(peak.on_host_count, 1);
  EXPECT_EQ(peak.on_host_bytes, 4096);
  ASSERT_EQ(peak.largest_on_device.size(), 2u);
  EXPECT_EQ(peak.largest_on_device[0].tensor, 3);

  // The Run tab's summary says it, each figure named.
  RunSummaryModel model;
  model.setRun(std::make_shared<const RunData>(run));
  QStringList rows;
  for (int r = 0; r < model.rowCount(); ++r) {
    rows << model.data(model.index(r, 0)).toString() + QStringLiteral(": ") +
                model.data(model.index(r, 1)).toString();
  }
  const QString all = rows.join(QLatin1Char('\n'));
  for (const char* part :
       {"at the peak: +500 ns: allocated 48.83 KiB, reserved 60.83 KiB (12 KiB beyond live",
        "saved on the device at the peak: 2 tensors, 9 KiB (copying out: 1, 8 KiB; kept: "
        "below-threshold: 1, 1 KiB)",
        "offloaded at the peak: 1 tensor, 4 KiB on the host",
        "allocated beyond them: 39.83 KiB: weights not saved",
        "largest saved on the device: #3 8 KiB (copying out), #1 1 KiB (kept: below-threshold)"}) {
    EXPECT_TRUE(all.contains(QLatin1String(part))) << part << "\nin\n" << all.toStdString();
  }
}

}  // namespace range_tests
