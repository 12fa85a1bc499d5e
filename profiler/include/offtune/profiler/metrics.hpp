// The numbers the profiler reports, computed from recorded timelines: how much copy time was hidden
// under compute (overall and per direction), how full the offload stashes were over time, and the
// spread of step times. Plain C++ over the structs of records.hpp, so the store, the exporters, the
// sweep runner and the front ends all compute them the same way. docs/metrics.md gives the
// formulas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

// A half-open span of time [begin, end) in nanoseconds. Empty when end <= begin.
struct Interval {
  int64_t begin = 0;
  int64_t end = 0;
  friend bool operator==(const Interval&, const Interval&) = default;
};

// The union of `intervals` as disjoint, non-adjacent, non-empty intervals in ascending order.
// Overlapping and touching intervals ([0,5) and [5,9)) coalesce; empty ones are dropped.
std::vector<Interval> merge_intervals(std::vector<Interval> intervals);

// Sum of the lengths of intervals already merged by merge_intervals.
int64_t total_length(const std::vector<Interval>& merged);

// Length of the intersection of two unions, both already merged by merge_intervals. Linear in the
// number of intervals.
int64_t intersection_length(const std::vector<Interval>& a_merged,
                            const std::vector<Interval>& b_merged);

// Copy/compute overlap over one timeline. All durations are nanoseconds of union-merged time, so
// two copies running at once count once. Percentages are 0..100, and 0 when there is no copy time.
struct OverlapMetrics {
  int64_t copy_ns = 0;     // |D2H ∪ H2D|
  int64_t compute_ns = 0;  // |compute|
  int64_t hidden_ns = 0;   // |copy ∩ compute|
  int64_t exposed_ns = 0;  // copy_ns - hidden_ns
  double hidden_pct = 0.0;

  int64_t d2h_copy_ns = 0;
  int64_t d2h_hidden_ns = 0;
  int64_t d2h_exposed_ns = 0;
  double d2h_hidden_pct = 0.0;

  int64_t h2d_copy_ns = 0;
  int64_t h2d_hidden_ns = 0;
  int64_t h2d_exposed_ns = 0;
  double h2d_hidden_pct = 0.0;

  int64_t pageable_copies = 0;  // copy events with pinned == false
  int64_t copies = 0;           // copy events (D2H and H2D)
};

// Overlap metrics of `events`. Compute time is the union of Compute events on any stream; a
// timeline that has no Compute event at all (a recorder that only marks passes) uses its Forward
// and Backward spans instead. Copy time is the union of CopyD2H and CopyH2D events. With `window`,
// every interval is clipped to it first, and only copy events that lie at least partly inside it
// (instants: whose time is inside it) are counted in `copies` and `pageable_copies`.
OverlapMetrics compute_overlap(const std::vector<TimelineEvent>& events,
                               std::optional<Interval> window = {});

// Offload stash occupancy over time (forward: copies held for backward; backward: reloaded
// tensors waiting for use).
struct OccupancyStats {
  int64_t max_fwd_count = 0;
  int64_t max_fwd_bytes = 0;
  int64_t max_bwd_count = 0;
  int64_t max_bwd_bytes = 0;
  double mean_fwd_bytes = 0.0;  // time-weighted
  double mean_bwd_bytes = 0.0;  // time-weighted
};

// Statistics of the step function that `samples` describe: each sample's values hold from its
// time until the next sample's; the last one holds until window->end if a window is given, and
// for no time otherwise. Time before the first sample is unknown and does not count. Samples
// should be sorted by time (unsorted input is sorted, stably, first).
//
// Maxima are over every sample in effect at some moment of the window (all samples without one),
// including samples that a later one at the same time replaces, since a recorded peak did happen.
// Means are time-weighted over the covered time; when no time is covered (a single sample and no
// window) they fall back to the plain mean of the samples considered.
OccupancyStats occupancy_stats(const std::vector<OccupancySample>& samples,
                               std::optional<Interval> window = {});

// Summary of step times in milliseconds.
struct StepStats {
  double median_ms = 0.0;  // mean of the middle two for an even count
  double min_ms = 0.0;
  double max_ms = 0.0;
  double mean_ms = 0.0;
  double stddev_ms = 0.0;  // sample standard deviation (n - 1), 0 for fewer than two steps
  size_t n = 0;
  // A distribution-free confidence interval for the median: the narrowest pair of order
  // statistics x(j), x(n+1-j) whose coverage, 1 - 2 P(B < j) for B ~ Binomial(n, 1/2), is at least
  // kMedianCiLevel. With too few steps for that (n < 6), the widest one, min..max, and its own
  // coverage (93.75% for 5 steps, 87.5% for 4, 75% for 3, 50% for 2, 0 for 1).
  double ci_low_ms = 0.0;
  double ci_high_ms = 0.0;
  double ci_level = 0.0;  // the interval's coverage, 0..1
};

constexpr double kMedianCiLevel = 0.95;

// Step statistics of `ms`; all zeros when `ms` is empty.
StepStats step_stats(const std::vector<double>& ms);
// A run's (or a point's) step-time figures from those stats: median, min, max, spread, interval.
void set_step_time(RunSummary& summary, const StepStats& stats);

}  // namespace offtune::profiler
