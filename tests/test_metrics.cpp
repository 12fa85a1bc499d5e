// Profiler metrics on hand-made timelines whose answers can be worked out on paper.
#include "offtune/profiler/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <source_location>
#include <type_traits>
#include <vector>

namespace offtune::profiler {
namespace {

OccupancySample occ(int64_t t, int64_t fwd_count, int64_t fwd_bytes, int64_t bwd_count = 0,
                    int64_t bwd_bytes = 0) {
  OccupancySample s;
  s.time_ns = t;
  s.fwd_count = fwd_count;
  s.fwd_bytes = fwd_bytes;
  s.bwd_count = bwd_count;
  s.bwd_bytes = bwd_bytes;
  return s;
}

using Intervals = std::vector<Interval>;

// What a test expects of a result: only the fields it names are checked, each against the field of
// the same name. A failure names the field and the test's line. An expected zero is checked
// exactly (an empty result must be exactly zero), any other double to within 4 ulps.
template <class V>
void expect_field(const char* field, V actual, const std::optional<V>& expected) {
  if (!expected) return;
  if constexpr (std::is_floating_point_v<V>) {
    if (*expected == 0.0) {
      EXPECT_EQ(actual, *expected) << field;
    } else {
      EXPECT_DOUBLE_EQ(actual, *expected) << field;
    }
  } else {
    EXPECT_EQ(actual, *expected) << field;
  }
}

struct ExpectedOverlap {
  std::optional<int64_t> copy_ns, compute_ns, hidden_ns, exposed_ns;
  std::optional<double> hidden_pct;
  std::optional<int64_t> d2h_copy_ns, d2h_hidden_ns, d2h_exposed_ns;
  std::optional<double> d2h_hidden_pct;
  std::optional<int64_t> h2d_copy_ns, h2d_hidden_ns, h2d_exposed_ns;
  std::optional<double> h2d_hidden_pct;
  std::optional<int64_t> pageable_copies, copies;
};

void expect_overlap(const OverlapMetrics& m, const ExpectedOverlap& e,
                    std::source_location where = std::source_location::current()) {
  const ::testing::ScopedTrace trace(where.file_name(), static_cast<int>(where.line()), "");
  expect_field("copy_ns", m.copy_ns, e.copy_ns);
  expect_field("compute_ns", m.compute_ns, e.compute_ns);
  expect_field("hidden_ns", m.hidden_ns, e.hidden_ns);
  expect_field("exposed_ns", m.exposed_ns, e.exposed_ns);
  expect_field("hidden_pct", m.hidden_pct, e.hidden_pct);
  expect_field("d2h_copy_ns", m.d2h_copy_ns, e.d2h_copy_ns);
  expect_field("d2h_hidden_ns", m.d2h_hidden_ns, e.d2h_hidden_ns);
  expect_field("d2h_exposed_ns", m.d2h_exposed_ns, e.d2h_exposed_ns);
  expect_field("d2h_hidden_pct", m.d2h_hidden_pct, e.d2h_hidden_pct);
  expect_field("h2d_copy_ns", m.h2d_copy_ns, e.h2d_copy_ns);
  expect_field("h2d_hidden_ns", m.h2d_hidden_ns, e.h2d_hidden_ns);
  expect_field("h2d_exposed_ns", m.h2d_exposed_ns, e.h2d_exposed_ns);
  expect_field("h2d_hidden_pct", m.h2d_hidden_pct, e.h2d_hidden_pct);
  expect_field("pageable_copies", m.pageable_copies, e.pageable_copies);
  expect_field("copies", m.copies, e.copies);
}

struct ExpectedOccupancy {
  std::optional<int64_t> max_fwd_count, max_fwd_bytes, max_bwd_count, max_bwd_bytes;
  std::optional<double> mean_fwd_bytes, mean_bwd_bytes;
};

void expect_occupancy(const OccupancyStats& s, const ExpectedOccupancy& e,
                      std::source_location where = std::source_location::current()) {
  const ::testing::ScopedTrace trace(where.file_name(), static_cast<int>(where.line()), "");
  expect_field("max_fwd_count", s.max_fwd_count, e.max_fwd_count);
  expect_field("max_fwd_bytes", s.max_fwd_bytes, e.max_fwd_bytes);
  expect_field("max_bwd_count", s.max_bwd_count, e.max_bwd_count);
  expect_field("max_bwd_bytes", s.max_bwd_bytes, e.max_bwd_bytes);
  expect_field("mean_fwd_bytes", s.mean_fwd_bytes, e.mean_fwd_bytes);
  expect_field("mean_bwd_bytes", s.mean_bwd_bytes, e.mean_bwd_bytes);
}

struct ExpectedSteps {
  std::optional<double> median_ms, min_ms, max_ms, mean_ms, stddev_ms;
  std::optional<size_t> n;
  std::optional<double> ci_low_ms, ci_high_ms, ci_level;
};

void expect_steps(const StepStats& s, const ExpectedSteps& e,
                  std::source_location where = std::source_location::current()) {
  const ::testing::ScopedTrace trace(where.file_name(), static_cast<int>(where.line()), "");
  expect_field("median_ms", s.median_ms, e.median_ms);
  expect_field("min_ms", s.min_ms, e.min_ms);
  expect_field("max_ms", s.max_ms, e.max_ms);
  expect_field("mean_ms", s.mean_ms, e.mean_ms);
  expect_field("stddev_ms", s.stddev_ms, e.stddev_ms);
  expect_field("n", s.n, e.n);
  expect_field("ci_low_ms", s.ci_low_ms, e.ci_low_ms);
  expect_field("ci_high_ms", s.ci_high_ms, e.ci_high_ms);
  expect_field("ci_level", s.ci_level, e.ci_level);
}

// --- intervals -----------------------------------------------------------------------------------

TEST(MergeIntervals, CoalescesOverlapping) {
  EXPECT_EQ(merge_intervals({{0, 10}, {5, 15}}), (Intervals{{0, 15}}));
}

TEST(MergeIntervals, CoalescesAdjacent) {
  EXPECT_EQ(merge_intervals({{0, 5}, {5, 9}}), (Intervals{{0, 9}}));
}

TEST(MergeIntervals, AbsorbsNested) {
  EXPECT_EQ(merge_intervals({{0, 100}, {10, 20}, {30, 40}}), (Intervals{{0, 100}}));
}

TEST(MergeIntervals, KeepsDisjointApartAndSorts) {
  EXPECT_EQ(merge_intervals({{20, 30}, {0, 10}, {11, 12}}),
            (Intervals{{0, 10}, {11, 12}, {20, 30}}));
}

TEST(MergeIntervals, DropsEmptyAndInverted) {
  EXPECT_EQ(merge_intervals({{5, 5}, {9, 3}}), Intervals{});
  EXPECT_EQ(merge_intervals({{5, 5}, {1, 2}, {9, 3}}), (Intervals{{1, 2}}));
  // An empty interval between two others must not bridge them.
  EXPECT_EQ(merge_intervals({{0, 4}, {4, 4}, {6, 8}}), (Intervals{{0, 4}, {6, 8}}));
  EXPECT_EQ(merge_intervals({}), Intervals{});
}

TEST(MergeIntervals, ChainOfOverlapsBecomesOne) {
  EXPECT_EQ(merge_intervals({{0, 3}, {2, 6}, {5, 9}, {20, 21}, {8, 10}}),
            (Intervals{{0, 10}, {20, 21}}));
}

TEST(Intervals, TotalLength) {
  EXPECT_EQ(total_length({}), 0);
  EXPECT_EQ(total_length({{0, 10}, {20, 25}}), 15);
}

TEST(Intervals, IntersectionLength) {
  EXPECT_EQ(intersection_length({{0, 10}, {20, 30}}, {{5, 25}}), 10);
  EXPECT_EQ(intersection_length({{5, 25}}, {{0, 10}, {20, 30}}), 10);
  EXPECT_EQ(intersection_length({{0, 10}}, {{10, 20}}), 0);  // touching shares no time
  EXPECT_EQ(intersection_length({{0, 10}}, {}), 0);
  EXPECT_EQ(intersection_length({}, {{0, 10}}), 0);
  // Equal ends, then more on both sides.
  EXPECT_EQ(intersection_length({{0, 10}, {12, 20}}, {{5, 10}, {15, 30}}), 5 + 5);
  EXPECT_EQ(intersection_length({{0, 100}}, {{10, 20}, {30, 40}, {90, 200}}), 10 + 10 + 10);
}

// --- overlap -------------------------------------------------------------------------------------

TEST(ComputeOverlap, NoEventsIsAllZero) {
  const OverlapMetrics m = compute_overlap({});
  expect_overlap(m, {.copy_ns = 0,
                     .compute_ns = 0,
                     .hidden_ns = 0,
                     .exposed_ns = 0,
                     .hidden_pct = 0.0,
                     .copies = 0});
}

TEST(ComputeOverlap, NoCopyGivesZeroPercent) {
  const OverlapMetrics m = compute_overlap({event_span(EventKind::Compute, 0, 100)});
  expect_overlap(m, {.copy_ns = 0,
                     .compute_ns = 100,
                     .hidden_pct = 0.0,
                     .d2h_hidden_pct = 0.0,
                     .h2d_hidden_pct = 0.0});
}

TEST(ComputeOverlap, CopyFullyHidden) {
  const OverlapMetrics m = compute_overlap(
      {event_span(EventKind::Compute, 0, 100), event_span(EventKind::CopyD2H, 10, 30)});
  expect_overlap(m, {.copy_ns = 20,
                     .compute_ns = 100,
                     .hidden_ns = 20,
                     .exposed_ns = 0,
                     .hidden_pct = 100.0,
                     .copies = 1});
}

TEST(ComputeOverlap, CopyFullyExposed) {
  const OverlapMetrics m = compute_overlap(
      {event_span(EventKind::Compute, 0, 10), event_span(EventKind::CopyH2D, 20, 50)});
  expect_overlap(
      m,
      {.copy_ns = 30, .hidden_ns = 0, .exposed_ns = 30, .hidden_pct = 0.0, .h2d_exposed_ns = 30});
}

TEST(ComputeOverlap, CopyPartlyHidden) {
  const OverlapMetrics m = compute_overlap(
      {event_span(EventKind::Compute, 0, 100), event_span(EventKind::CopyD2H, 90, 130)});
  expect_overlap(m, {.copy_ns = 40, .hidden_ns = 10, .exposed_ns = 30, .hidden_pct = 25.0});
}

TEST(ComputeOverlap, ComputeOnSeveralStreamsIsUnioned) {
  TimelineEvent a = event_span(EventKind::Compute, 0, 50);
  TimelineEvent b = event_span(EventKind::Compute, 25, 75);
  b.stream = 7;
  const OverlapMetrics m = compute_overlap({a, b, event_span(EventKind::CopyD2H, 60, 80)});
  expect_overlap(m, {.compute_ns = 75, .hidden_ns = 15, .exposed_ns = 5});
}

TEST(ComputeOverlap, SplitsDirections) {
  const OverlapMetrics m = compute_overlap({
      event_span(EventKind::Compute, 0, 100), event_span(EventKind::Compute, 200, 300),
      event_span(EventKind::CopyD2H, 50, 150),   // 50 of 100 hidden
      event_span(EventKind::CopyH2D, 190, 290),  // 90 of 100 hidden
  });
  expect_overlap(m, {.copy_ns = 200,
                     .hidden_ns = 140,
                     .exposed_ns = 60,
                     .hidden_pct = 70.0,
                     .d2h_copy_ns = 100,
                     .d2h_hidden_ns = 50,
                     .d2h_exposed_ns = 50,
                     .d2h_hidden_pct = 50.0,
                     .h2d_copy_ns = 100,
                     .h2d_hidden_ns = 90,
                     .h2d_exposed_ns = 10,
                     .h2d_hidden_pct = 90.0,
                     .copies = 2});
}

TEST(ComputeOverlap, ConcurrentCopiesCountOnceInTheTotal) {
  const OverlapMetrics m = compute_overlap({
      event_span(EventKind::Compute, 0, 40), event_span(EventKind::CopyD2H, 0, 50),
      event_span(EventKind::CopyH2D, 25, 75),
      event_span(EventKind::CopyD2H, 10, 20),  // inside the first D2H
  });
  expect_overlap(m, {.copy_ns = 75,
                     .hidden_ns = 40,
                     .exposed_ns = 35,
                     .d2h_copy_ns = 50,
                     .d2h_hidden_ns = 40,
                     .h2d_copy_ns = 50,
                     .h2d_hidden_ns = 15,
                     .copies = 3});
}

TEST(ComputeOverlap, CountsPageableCopiesOnly) {
  const OverlapMetrics m = compute_overlap({
      event_span(EventKind::Compute, 0, 100, {.pinned = false}),  // not a copy: never counted
      event_span(EventKind::CopyD2H, 0, 10, {.pinned = false}),
      event_span(EventKind::CopyD2H, 10, 20),
      event_span(EventKind::CopyH2D, 30, 40, {.pinned = false}),
      event_span(EventKind::CopyH2D, 50, 50, {.pinned = false}),  // an instant still is a copy
  });
  expect_overlap(m, {.copy_ns = 30, .pageable_copies = 3, .copies = 4});
}

TEST(ComputeOverlap, ClipsToWindow) {
  const std::vector<TimelineEvent> events = {
      event_span(EventKind::Compute, 0, 100),
      event_span(EventKind::CopyD2H, 80, 120, {.pinned = false}),
      event_span(EventKind::CopyH2D, 150, 160, {.pinned = false}),  // outside the window
      event_span(EventKind::CopyH2D, 110, 110),  // instant at the window's end: out
  };
  const OverlapMetrics m = compute_overlap(events, Interval{90, 110});
  expect_overlap(m, {.copy_ns = 20,
                     .compute_ns = 10,
                     .hidden_ns = 10,
                     .exposed_ns = 10,
                     .hidden_pct = 50.0,
                     .h2d_copy_ns = 0,
                     .pageable_copies = 1,
                     .copies = 1});

  // Without the window the same timeline reads differently.
  const OverlapMetrics all = compute_overlap(events);
  expect_overlap(all, {.copy_ns = 50, .hidden_ns = 20, .pageable_copies = 2, .copies = 3});
}

TEST(ComputeOverlap, EmptyWindowSeesNothing) {
  const OverlapMetrics m = compute_overlap(
      {event_span(EventKind::Compute, 0, 100), event_span(EventKind::CopyD2H, 0, 100)},
      Interval{50, 50});
  expect_overlap(m, {.copy_ns = 0, .compute_ns = 0, .copies = 0});
}

TEST(ComputeOverlap, FallsBackToForwardAndBackwardWithoutComputeEvents) {
  const OverlapMetrics m = compute_overlap({
      event_span(EventKind::Step, 0, 100),  // a step span is not compute
      event_span(EventKind::Forward, 0, 50),
      event_span(EventKind::Backward, 60, 100),
      event_span(EventKind::CopyD2H, 40, 70),
  });
  expect_overlap(m, {.copy_ns = 30, .compute_ns = 90, .hidden_ns = 20, .exposed_ns = 10});
}

TEST(ComputeOverlap, ForwardAndBackwardIgnoredWhenComputeEventsExist) {
  const OverlapMetrics m = compute_overlap({
      event_span(EventKind::Forward, 0, 100),
      event_span(EventKind::Compute, 0, 10),
      event_span(EventKind::CopyD2H, 20, 30),
  });
  expect_overlap(m, {.compute_ns = 10, .hidden_ns = 0, .exposed_ns = 10});
}

// --- occupancy -----------------------------------------------------------------------------------

TEST(OccupancyStats, EmptyIsZero) {
  const OccupancyStats s = occupancy_stats({});
  expect_occupancy(s, {.max_fwd_bytes = 0, .mean_fwd_bytes = 0.0, .mean_bwd_bytes = 0.0});
}

TEST(OccupancyStats, TimeWeightedMeanWithoutWindow) {
  // 100 B for 10 ns, 300 B for 30 ns; the last sample holds for no time.
  const OccupancyStats s = occupancy_stats({occ(0, 1, 100), occ(10, 3, 300), occ(40, 0, 0)});
  expect_occupancy(s, {.max_fwd_count = 3,
                       .max_fwd_bytes = 300,
                       .mean_fwd_bytes = (100.0 * 10 + 300.0 * 30) / 40});  // 250
}

TEST(OccupancyStats, LastSampleHoldsToWindowEnd) {
  const OccupancyStats s =
      occupancy_stats({occ(0, 1, 100), occ(10, 3, 300), occ(40, 0, 0)}, Interval{0, 60});
  expect_occupancy(
      s, {.max_fwd_bytes = 300, .mean_fwd_bytes = (100.0 * 10 + 300.0 * 30 + 0.0 * 20) / 60});
}

TEST(OccupancyStats, WindowClipsHoldTimes) {
  // [5,10) at 100 B and [10,20) at 300 B; the sample at 40 is outside.
  const OccupancyStats s =
      occupancy_stats({occ(0, 1, 100), occ(10, 3, 300), occ(40, 9, 900)}, Interval{5, 20});
  expect_occupancy(
      s,
      {.max_fwd_count = 3, .max_fwd_bytes = 300, .mean_fwd_bytes = (100.0 * 5 + 300.0 * 10) / 15});
}

TEST(OccupancyStats, SampleBeforeWindowCarriesIn) {
  const OccupancyStats s =
      occupancy_stats({occ(0, 1, 100), occ(10, 3, 300), occ(40, 9, 900)}, Interval{20, 30});
  expect_occupancy(s, {.max_fwd_count = 3, .max_fwd_bytes = 300, .mean_fwd_bytes = 300.0});
}

TEST(OccupancyStats, TimeBeforeFirstSampleDoesNotCount) {
  const OccupancyStats s = occupancy_stats({occ(10, 1, 100), occ(20, 0, 0)}, Interval{0, 30});
  // Covered: [10,20) at 100 and [20,30) at 0.
  EXPECT_DOUBLE_EQ(s.mean_fwd_bytes, 50.0);
}

TEST(OccupancyStats, MomentaryPeakCountsForMaxNotMean) {
  // At t=10 the stash reaches 5 tensors and drops to 2 at the same instant.
  const OccupancyStats s =
      occupancy_stats({occ(0, 1, 10), occ(10, 5, 50), occ(10, 2, 20), occ(30, 0, 0)});
  expect_occupancy(
      s, {.max_fwd_count = 5, .max_fwd_bytes = 50, .mean_fwd_bytes = (10.0 * 10 + 20.0 * 20) / 30});
}

TEST(OccupancyStats, BackwardTrackedSeparately) {
  const OccupancyStats s = occupancy_stats(
      {occ(0, 2, 200, 0, 0), occ(10, 0, 0, 1, 64), occ(20, 0, 0, 3, 192)}, Interval{0, 40});
  expect_occupancy(s, {.max_fwd_bytes = 200,
                       .max_bwd_count = 3,
                       .max_bwd_bytes = 192,
                       .mean_fwd_bytes = 200.0 * 10 / 40,
                       .mean_bwd_bytes = (64.0 * 10 + 192.0 * 20) / 40});
}

TEST(OccupancyStats, UnsortedInputIsSorted) {
  const OccupancyStats s = occupancy_stats({occ(10, 3, 300), occ(40, 0, 0), occ(0, 1, 100)});
  EXPECT_DOUBLE_EQ(s.mean_fwd_bytes, 250.0);
}

TEST(OccupancyStats, SingleSampleWithoutWindowFallsBackToItsValue) {
  const OccupancyStats s = occupancy_stats({occ(5, 2, 4096)});
  expect_occupancy(s, {.max_fwd_count = 2, .mean_fwd_bytes = 4096.0});
}

// --- step statistics -----------------------------------------------------------------------------

TEST(StepStats, EmptyIsAllZero) {
  const StepStats s = step_stats({});
  expect_steps(
      s,
      {.median_ms = 0.0, .min_ms = 0.0, .max_ms = 0.0, .mean_ms = 0.0, .stddev_ms = 0.0, .n = 0u});
}

TEST(StepStats, SingleStepHasNoSpread) {
  const StepStats s = step_stats({12.5});
  expect_steps(s, {.median_ms = 12.5, .min_ms = 12.5, .max_ms = 12.5, .stddev_ms = 0.0, .n = 1u});
}

TEST(StepStats, OddCount) {
  const StepStats s = step_stats({3.0, 1.0, 2.0});
  expect_steps(s, {.median_ms = 2.0,
                   .min_ms = 1.0,
                   .max_ms = 3.0,
                   .mean_ms = 2.0,
                   .stddev_ms = 1.0,  // sample stddev: sqrt((1 + 0 + 1) / 2)
                   .n = 3u});
}

// The median's interval from order statistics, against coverages computed by hand:
// coverage of [x(j), x(n+1-j)] = 1 - 2 P(B <= j-1), B ~ Binomial(n, 1/2).
TEST(StepStats, MedianIntervalFromOrderStatistics) {
  // 5 steps: only min..max, 1 - 2/32 = 93.75%.
  StepStats s = step_stats({5.0, 1.0, 4.0, 2.0, 3.0});
  expect_steps(s, {.ci_low_ms = 1.0, .ci_high_ms = 5.0, .ci_level = 0.9375});
  // 10 steps: [x(2), x(9)], 1 - 2 * 11/1024 = 97.85%; [x(3), x(8)] would be 89.06% < 95%.
  std::vector<double> ten;
  for (int i = 10; i >= 1; --i) ten.push_back(i);
  s = step_stats(ten);
  expect_steps(s, {.ci_low_ms = 2.0, .ci_high_ms = 9.0});
  EXPECT_NEAR(s.ci_level, 1.0 - 2.0 * 11.0 / 1024.0, 1e-12);
  // 20 steps: [x(6), x(15)], 1 - 2 * 21700/1048576 = 95.86%.
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(100.0 + i);
  s = step_stats(twenty);
  expect_steps(s, {.ci_low_ms = 106.0, .ci_high_ms = 115.0});
  EXPECT_NEAR(s.ci_level, 1.0 - 2.0 * 21700.0 / 1048576.0, 1e-12);
  // 1 step: a point, with no coverage at all; 2 steps: min..max, 50%.
  s = step_stats({7.0});
  expect_steps(s, {.ci_low_ms = 7.0, .ci_high_ms = 7.0, .ci_level = 0.0});
  EXPECT_DOUBLE_EQ(step_stats({7.0, 9.0}).ci_level, 0.5);
}

TEST(StepStats, EvenCountTakesMeanOfMiddleTwo) {
  const StepStats s = step_stats({10.0, 1.0, 3.0, 2.0});
  expect_steps(s, {.median_ms = 2.5,
                   .min_ms = 1.0,
                   .max_ms = 10.0,
                   .mean_ms = 4.0,
                   .stddev_ms = std::sqrt(50.0 / 3.0),  // deviations -3, -2, -1, 6: (9+4+1+36) / 3
                   .n = 4u});
}

TEST(StepStats, LargeCloseValuesKeepTheirSpread) {
  const StepStats s = step_stats({1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0});
  EXPECT_DOUBLE_EQ(s.median_ms, 1e9 + 2.0);
  EXPECT_NEAR(s.stddev_ms, 1.0, 1e-6);
}

}  // namespace
}  // namespace offtune::profiler
