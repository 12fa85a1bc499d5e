#include "offtune/profiler/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace offtune::profiler {

std::vector<Interval> merge_intervals(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& i) { return i.end <= i.begin; });
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  std::vector<Interval> merged;
  merged.reserve(intervals.size());
  for (const Interval& i : intervals) {
    // `<=` so that touching intervals coalesce: a copy that ends exactly when the next starts
    // leaves no gap, and keeping them apart would only lengthen every later sweep.
    if (!merged.empty() && i.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, i.end);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

int64_t total_length(const std::vector<Interval>& merged) {
  int64_t total = 0;
  for (const Interval& i : merged) total += i.end - i.begin;
  return total;
}

int64_t intersection_length(const std::vector<Interval>& a_merged,
                            const std::vector<Interval>& b_merged) {
  int64_t total = 0;
  size_t ia = 0;
  size_t ib = 0;
  while (ia < a_merged.size() && ib < b_merged.size()) {
    const Interval& a = a_merged[ia];
    const Interval& b = b_merged[ib];
    const int64_t lo = std::max(a.begin, b.begin);
    const int64_t hi = std::min(a.end, b.end);
    if (hi > lo) total += hi - lo;
    // The interval that ends first cannot meet anything further along the other list.
    if (a.end < b.end) {
      ++ia;
    } else {
      ++ib;
    }
  }
  return total;
}

namespace {

bool is_copy(EventKind k) { return k == EventKind::CopyD2H || k == EventKind::CopyH2D; }

// Whether an event counts as inside the window: it shares time with it, or, for an instant (or a
// malformed event with end < start), its start lies in it.
bool inside(const TimelineEvent& e, const std::optional<Interval>& window) {
  if (!window) return true;
  if (window->end <= window->begin) return false;  // an empty window holds no event
  if (e.end_ns > e.start_ns) return e.start_ns < window->end && e.end_ns > window->begin;
  return window->begin <= e.start_ns && e.start_ns < window->end;
}

// Appends the part of [start, end) inside the window (nothing when that part is empty; merging
// drops empty intervals anyway, but there is no point carrying them).
void add_clipped(std::vector<Interval>& out, int64_t start, int64_t end,
                 const std::optional<Interval>& window) {
  if (window) {
    start = std::max(start, window->begin);
    end = std::min(end, window->end);
  }
  if (end > start) out.push_back({start, end});
}

double pct(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

OverlapMetrics compute_overlap(const std::vector<TimelineEvent>& events,
                               std::optional<Interval> window) {
  const bool has_compute = std::any_of(events.begin(), events.end(), [](const TimelineEvent& e) {
    return e.kind == EventKind::Compute;
  });

  std::vector<Interval> compute;
  std::vector<Interval> d2h;
  std::vector<Interval> h2d;
  OverlapMetrics m;
  for (const TimelineEvent& e : events) {
    const bool counts_as_compute =
        has_compute ? e.kind == EventKind::Compute
                    : (e.kind == EventKind::Forward || e.kind == EventKind::Backward);
    if (counts_as_compute) add_clipped(compute, e.start_ns, e.end_ns, window);
    if (!is_copy(e.kind)) continue;
    add_clipped(e.kind == EventKind::CopyD2H ? d2h : h2d, e.start_ns, e.end_ns, window);
    if (inside(e, window)) {
      ++m.copies;
      if (!e.pinned) ++m.pageable_copies;
    }
  }

  std::vector<Interval> all_copy = d2h;
  all_copy.insert(all_copy.end(), h2d.begin(), h2d.end());
  compute = merge_intervals(std::move(compute));
  d2h = merge_intervals(std::move(d2h));
  h2d = merge_intervals(std::move(h2d));
  all_copy = merge_intervals(std::move(all_copy));

  m.compute_ns = total_length(compute);

  m.copy_ns = total_length(all_copy);
  m.hidden_ns = intersection_length(all_copy, compute);
  m.exposed_ns = m.copy_ns - m.hidden_ns;
  m.hidden_pct = pct(m.hidden_ns, m.copy_ns);

  m.d2h_copy_ns = total_length(d2h);
  m.d2h_hidden_ns = intersection_length(d2h, compute);
  m.d2h_exposed_ns = m.d2h_copy_ns - m.d2h_hidden_ns;
  m.d2h_hidden_pct = pct(m.d2h_hidden_ns, m.d2h_copy_ns);

  m.h2d_copy_ns = total_length(h2d);
  m.h2d_hidden_ns = intersection_length(h2d, compute);
  m.h2d_exposed_ns = m.h2d_copy_ns - m.h2d_hidden_ns;
  m.h2d_hidden_pct = pct(m.h2d_hidden_ns, m.h2d_copy_ns);
  return m;
}

OccupancyStats occupancy_stats(const std::vector<OccupancySample>& samples,
                               std::optional<Interval> window) {
  const auto by_time = [](const OccupancySample& a, const OccupancySample& b) {
    return a.time_ns < b.time_ns;
  };
  // Sorting a copy only when needed: recorders emit in time order, so this is normally free.
  std::vector<OccupancySample> sorted;
  const std::vector<OccupancySample>* s = &samples;
  if (!std::is_sorted(samples.begin(), samples.end(), by_time)) {
    sorted = samples;
    std::stable_sort(sorted.begin(), sorted.end(), by_time);
    s = &sorted;
  }

  OccupancyStats st;
  // long double: bytes x nanoseconds overflows int64 within seconds of gigabytes.
  long double fwd_weighted = 0.0L;
  long double bwd_weighted = 0.0L;
  long double covered = 0.0L;
  long double fwd_plain = 0.0L;
  long double bwd_plain = 0.0L;
  int64_t considered = 0;

  for (size_t i = 0; i < s->size(); ++i) {
    const OccupancySample& x = (*s)[i];
    int64_t hold_begin = x.time_ns;
    int64_t hold_end = x.time_ns;
    if (i + 1 < s->size()) {
      hold_end = (*s)[i + 1].time_ns;
    } else if (window) {
      hold_end = std::max(x.time_ns, window->end);
    }
    bool in_effect = true;
    if (window) {
      hold_begin = std::max(hold_begin, window->begin);
      hold_end = std::min(hold_end, window->end);
      // A sample held for no time is still a recorded state: it counts for the maxima when its
      // time lies in the window.
      in_effect = hold_end > hold_begin || (window->begin <= x.time_ns && x.time_ns < window->end);
    }
    if (!in_effect) continue;

    ++considered;
    st.max_fwd_count = std::max(st.max_fwd_count, x.fwd_count);
    st.max_fwd_bytes = std::max(st.max_fwd_bytes, x.fwd_bytes);
    st.max_bwd_count = std::max(st.max_bwd_count, x.bwd_count);
    st.max_bwd_bytes = std::max(st.max_bwd_bytes, x.bwd_bytes);
    fwd_plain += static_cast<long double>(x.fwd_bytes);
    bwd_plain += static_cast<long double>(x.bwd_bytes);
    if (hold_end > hold_begin) {
      const auto d = static_cast<long double>(hold_end - hold_begin);
      covered += d;
      fwd_weighted += d * static_cast<long double>(x.fwd_bytes);
      bwd_weighted += d * static_cast<long double>(x.bwd_bytes);
    }
  }

  if (covered > 0.0L) {
    st.mean_fwd_bytes = static_cast<double>(fwd_weighted / covered);
    st.mean_bwd_bytes = static_cast<double>(bwd_weighted / covered);
  } else if (considered > 0) {
    st.mean_fwd_bytes = static_cast<double>(fwd_plain / static_cast<long double>(considered));
    st.mean_bwd_bytes = static_cast<double>(bwd_plain / static_cast<long double>(considered));
  }
  return st;
}

void set_step_time(RunSummary& summary, const StepStats& stats) {
  summary.step_ms_median = stats.median_ms;
  summary.step_ms_min = stats.min_ms;
  summary.step_ms_max = stats.max_ms;
  summary.step_ms_stddev = stats.stddev_ms;
  summary.step_ms_ci_low = stats.ci_low_ms;
  summary.step_ms_ci_high = stats.ci_high_ms;
  summary.step_ms_ci_level = stats.ci_level;
}

StepStats step_stats(const std::vector<double>& ms) {
  StepStats st;
  st.n = ms.size();
  if (ms.empty()) return st;

  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  st.min_ms = v.front();
  st.max_ms = v.back();
  st.median_ms = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  st.mean_ms = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
  if (n >= 2) {
    // Two passes (mean first) rather than sum of squares: step times are large and close together,
    // where the one-pass formula loses most of its digits.
    double ss = 0.0;
    for (double x : v) ss += (x - st.mean_ms) * (x - st.mean_ms);
    st.stddev_ms = std::sqrt(ss / static_cast<double>(n - 1));
  }
  // P(B <= k) for B ~ Binomial(n, 1/2), summed in doubles from the log of the binomial
  // coefficients (exact enough for any n a run has).
  const auto cdf = [n](size_t k) {
    double total = 0.0;
    for (size_t i = 0; i <= k; ++i) {
      total += std::exp(
          std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
          std::lgamma(static_cast<double>(n - i) + 1) - static_cast<double>(n) * std::log(2.0));
    }
    return total;
  };
  // Rank j (1-based) from the outside in, while the interval still covers kMedianCiLevel.
  size_t j = 1;
  while (j + 1 <= (n + 1) / 2 && 1.0 - 2.0 * cdf(j) >= kMedianCiLevel) ++j;
  st.ci_low_ms = v[j - 1];
  st.ci_high_ms = v[n - j];
  st.ci_level = std::max(0.0, 1.0 - 2.0 * cdf(j - 1));
  return st;
}

}  // namespace offtune::profiler
