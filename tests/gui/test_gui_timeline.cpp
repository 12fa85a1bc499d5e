// The run view's time-based widgets: the timeline index (lanes, counts, bounds, the level-of-detail
// pyramid), the shared time axis, painting a million events at every zoom, and the run charts.
#include <gtest/gtest.h>

#include <QImage>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QSet>
#include <QSignalSpy>
#include <QTest>
#include <QWheelEvent>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "offtune/gui/run_charts.hpp"
#include "offtune/gui/timeline.hpp"

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
// unpack per reload, a few waits. About `n` events.
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
        if (forward) {
          events.push_back(pf::event_span(EventKind::Pack, t, t, {.bytes = bytes}));
          events.push_back(pf::event_span(EventKind::CopyD2H, t + 100, t + 100 + d / 2,
                                          {.stream = 1, .bytes = bytes}));
          events.back().pinned = (i % 64) != 0;
        } else {
          events.push_back(pf::event_span(EventKind::CopyH2D, t + 100, t + 100 + d / 2,
                                          {.stream = 1, .bytes = bytes}));
          events.back().prefetch = (i % 3) != 0;
          events.push_back(pf::event_span(EventKind::Unpack, t + 200 + d / 2, t + 200 + d / 2,
                                          {.bytes = bytes}));
        }
        events.push_back(i % 16 == 0 ? pf::event_span(EventKind::Wait, t + d, t + d + 200)
                                     : pf::event_span(EventKind::Compute, t + d + 50, t + d + 250));
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
  const auto index = offtune::gui::build_timeline_index(RunData{});
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
  const QRect compute_row = offtune::gui::timeline_lane_rect(image.rect(), 1);
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
  const QRect row = offtune::gui::timeline_lane_rect(image.rect(), 1);
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

  // Pageable copies are outlined in red: some strongly red pixel in the D2H row.
  const QRect row = offtune::gui::timeline_lane_rect(image.rect(), 2);
  bool red = false;
  for (int y = row.top(); y <= row.bottom() && !red; ++y) {
    for (int x = row.left(); x <= row.right() && !red; ++x) {
      const QColor c(image.pixel(x, y));
      red = c.red() > 180 && c.green() < 80 && c.blue() < 80;
    }
  }
  EXPECT_TRUE(red);
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
  const QRect d2h = offtune::gui::timeline_lane_rect(w.rect(), 2);
  const QString tip = w.toolTipAt(QPoint(plot.left() + 110, d2h.center().y()));
  EXPECT_TRUE(tip.contains(QStringLiteral("copy_d2h (pageable)"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("4096"))) << tip.toStdString();
  EXPECT_TRUE(tip.contains(QStringLiteral("duration 40 ns"))) << tip.toStdString();
  // A pack instant (top half of the last lane) with its tensor id and decision.
  const QRect instants = offtune::gui::timeline_lane_rect(w.rect(), 5);
  const QString pack = w.toolTipAt(QPoint(plot.left() + 20, instants.top() + 6));
  EXPECT_TRUE(pack.contains(QStringLiteral("tensor 3"))) << pack.toStdString();
  EXPECT_TRUE(pack.contains(QStringLiteral("offload"))) << pack.toStdString();
  // Nothing in the waits lane there.
  EXPECT_TRUE(w.toolTipAt(QPoint(plot.left() + 300,
                                 offtune::gui::timeline_lane_rect(w.rect(), 4).center().y()))
                  .isEmpty());
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

TEST(RunChart, RandomSamplesAndViewsStayInBounds) {
  std::mt19937_64 rng(9);
  auto run = std::make_shared<RunData>();
  for (int i = 0; i < 5000; ++i) {  // out of order, some without device bytes
    pf::OccupancySample o;
    o.time_ns = static_cast<int64_t>(rng() % 10'000'000);
    o.fwd_bytes = static_cast<int64_t>(rng() % 1'000'000);
    o.bwd_bytes = static_cast<int64_t>(rng() % 1'000'000);
    o.device_bytes = rng() % 3 == 0 ? -1 : static_cast<int64_t>(rng() % 5'000'000);
    run->occupancy.push_back(o);
  }
  for (auto mode : {RunChart::Occupancy, RunChart::DeviceMemory}) {
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
