#include "offtune/gui/timeline_range.hpp"

#include <QStringList>
#include <algorithm>
#include <utility>
#include <vector>

namespace offtune::gui {
namespace {

using Spans = std::vector<std::pair<int64_t, int64_t>>;  // disjoint, sorted

// The events of `set` inside [b, e), clipped, appended to `out` (not merged). Events are sorted by
// start and last at most max_duration_ns, so the first one that can reach b is found by search.
void clip(const TimelineIntervals& set, int64_t b, int64_t e, Spans* out) {
  const auto from = std::lower_bound(set.start.begin(), set.start.end(), b - set.max_duration_ns);
  for (auto i = static_cast<size_t>(from - set.start.begin()); i < set.size(); ++i) {
    if (set.start[i] >= e) break;
    const int64_t lo = std::max(set.start[i], b), hi = std::min(set.end[i], e);
    if (hi > lo) out->emplace_back(lo, hi);
  }
}

// Sorted and merged: the union.
Spans merged(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Spans out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

int64_t length(const Spans& spans) {
  int64_t n = 0;
  for (const auto& [lo, hi] : spans) n += hi - lo;
  return n;
}

// The time two unions share.
int64_t shared(const Spans& a, const Spans& b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n += hi - lo;
    (a[i].second < b[j].second ? i : j)++;
  }
  return n;
}

// The bytes of the copies of `set` inside [b, e): each in proportion to its part inside; an
// instantaneous copy counts whole when it falls inside.
double bytes_in(const TimelineIntervals& set, int64_t b, int64_t e, int64_t* copies) {
  double bytes = 0.0;
  const auto from = std::lower_bound(set.start.begin(), set.start.end(), b - set.max_duration_ns);
  for (auto i = static_cast<size_t>(from - set.start.begin()); i < set.size(); ++i) {
    const int64_t s = set.start[i], t = set.end[i];
    if (s >= e) break;
    if (t <= s) {
      if (s >= b) {
        bytes += static_cast<double>(set.info[i].bytes);
        ++*copies;
      }
      continue;
    }
    const int64_t lo = std::max(s, b), hi = std::min(t, e);
    if (hi <= lo) continue;
    bytes += static_cast<double>(set.info[i].bytes) * static_cast<double>(hi - lo) /
             static_cast<double>(t - s);
    ++*copies;
  }
  return bytes;
}

QString percent_of(int64_t part, int64_t whole) {
  return whole > 0 ? QString::number(100.0 * static_cast<double>(part) / static_cast<double>(whole),
                                     'f', 1) +
                         QStringLiteral(" %")
                   : QStringLiteral("n/a");
}

}  // namespace

double TimelineRangeStats::d2h_gbps() const {
  return d2h_ns > 0 ? d2h_bytes / static_cast<double>(d2h_ns) : 0.0;  // bytes per ns = GB/s
}

double TimelineRangeStats::h2d_gbps() const {
  return h2d_ns > 0 ? h2d_bytes / static_cast<double>(h2d_ns) : 0.0;
}

TimelineRangeStats timeline_range_stats(const TimelineIndex& index, int64_t begin_ns,
                                        int64_t end_ns) {
  if (end_ns < begin_ns) std::swap(begin_ns, end_ns);
  TimelineRangeStats s;
  s.begin_ns = begin_ns;
  s.end_ns = end_ns;
  Spans compute, waits, d2h, h2d;
  for (const auto& lane : index.lanes) {
    switch (lane.kind) {
      case LaneKind::Compute:
        clip(lane.spans, begin_ns, end_ns, &compute);
        break;
      case LaneKind::Waits:
        clip(lane.spans, begin_ns, end_ns, &waits);
        break;
      case LaneKind::CopyD2H:
        clip(lane.spans, begin_ns, end_ns, &d2h);
        s.d2h_bytes += bytes_in(lane.spans, begin_ns, end_ns, &s.d2h_copies);
        break;
      case LaneKind::CopyH2D:
        clip(lane.spans, begin_ns, end_ns, &h2d);
        s.h2d_bytes += bytes_in(lane.spans, begin_ns, end_ns, &s.h2d_copies);
        break;
      default:
        break;
    }
  }
  const Spans compute_u = merged(std::move(compute));
  const Spans d2h_u = merged(d2h), h2d_u = merged(h2d);
  Spans copies = d2h;
  copies.insert(copies.end(), h2d.begin(), h2d.end());
  const Spans copy_u = merged(std::move(copies));
  s.compute_ns = length(compute_u);
  s.wait_ns = length(merged(std::move(waits)));
  s.d2h_ns = length(d2h_u);
  s.h2d_ns = length(h2d_u);
  s.copy_ns = length(copy_u);
  s.copy_hidden_ns = shared(copy_u, compute_u);
  return s;
}

QString describe_range(const TimelineRangeStats& s, double link_gbps) {
  const int64_t span = s.span_ns();
  QString text =
      QStringLiteral("%1 selected: compute busy %2 (%3), exposed wait %4 (%5)")
          .arg(format_duration_ns(static_cast<double>(span)),
               format_duration_ns(static_cast<double>(s.compute_ns)),
               percent_of(s.compute_ns, span), format_duration_ns(static_cast<double>(s.wait_ns)),
               percent_of(s.wait_ns, span));
  const auto direction = [&](const char* name, double bytes, int64_t copies, double gbps) {
    if (copies == 0) return QStringLiteral("; %1 none").arg(QLatin1String(name));
    QString d = QStringLiteral("; %1 %2 in %3 %4 at %5 GB/s")
                    .arg(QLatin1String(name), format_bytes(bytes))
                    .arg(copies)
                    .arg(copies == 1 ? QStringLiteral("copy") : QStringLiteral("copies"))
                    .arg(gbps, 0, 'f', 1);
    if (link_gbps > 0) {
      d += QStringLiteral(" (%1 % of the link's %2 GB/s)")
               .arg(100.0 * gbps / link_gbps, 0, 'f', 0)
               .arg(link_gbps, 0, 'f', 1);
    }
    return d;
  };
  text += direction("D2H", s.d2h_bytes, s.d2h_copies, s.d2h_gbps());
  text += direction("H2D", s.h2d_bytes, s.h2d_copies, s.h2d_gbps());
  if (s.copy_ns > 0) {
    text += QStringLiteral("; copy time hidden by compute %1")
                .arg(percent_of(s.copy_hidden_ns, s.copy_ns));
  }
  return text;
}

std::vector<TensorEvent> tensor_events(const TimelineIndex& index, int64_t tensor) {
  std::vector<TensorEvent> out;
  if (tensor < 0) return out;
  for (size_t l = 0; l < index.lanes.size(); ++l) {
    const TimelineLane& lane = index.lanes[l];
    const TimelineIntervals& spans = lane.spans;
    for (size_t i = 0; i < spans.size(); ++i) {
      const TimelineEventInfo& info = spans.info[i];
      if (info.tensor != tensor) continue;
      out.push_back({info.kind, spans.start[i], spans.end[i], info.bytes, l,
                     (info.flags & kFlagPrefetch) != 0});
    }
    for (const TimelineInstants* set : {&lane.packs, &lane.unpacks}) {
      for (size_t i = 0; i < set->size(); ++i) {
        const TimelineEventInfo& info = set->info[i];
        if (info.tensor != tensor) continue;
        out.push_back({info.kind, set->time[i], set->time[i], info.bytes, l, false});
      }
    }
  }
  // By start; at one instant in a tensor's life order: packed, copied out, waited on, copied back,
  // unpacked (a host-sim pack and its copy share a timestamp).
  const auto rank = [](profiler::EventKind k) {
    switch (k) {
      case profiler::EventKind::Pack:
        return 0;
      case profiler::EventKind::CopyD2H:
        return 1;
      case profiler::EventKind::DiskWrite:
        return 2;
      case profiler::EventKind::Wait:
        return 3;
      case profiler::EventKind::DiskRead:
        return 4;
      case profiler::EventKind::CopyH2D:
        return 5;
      case profiler::EventKind::Unpack:
        return 6;
      default:
        return 7;
    }
  };
  std::stable_sort(out.begin(), out.end(), [&](const TensorEvent& a, const TensorEvent& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : rank(a.kind) < rank(b.kind);
  });
  return out;
}

QString describe_tensor(const TimelineIndex& index, int64_t tensor) {
  const auto events = tensor_events(index, tensor);
  if (events.empty()) return {};
  int64_t bytes = 0;
  for (const auto& e : events) bytes = std::max(bytes, e.bytes);
  const auto at = [&](int64_t t) {
    return QStringLiteral("+") + format_duration_ns(static_cast<double>(t - index.begin_ns));
  };
  QStringList steps;
  for (const auto& e : events) {
    // The kind as the timeline's legend names it ("copy D2H", "unpack", ...).
    QString what = QString::fromLatin1(profiler::to_string(e.kind));
    for (const auto& entry : timeline_legend()) {
      if (entry.swatch == TimelineLegendEntry::Swatch::Fill && entry.kind == e.kind) {
        what = entry.label;
      }
    }
    if (e.prefetch) what += QStringLiteral(" (prefetched)");
    steps << (e.end_ns > e.start_ns
                  ? QStringLiteral("%1 %2 \u2013 %3").arg(what, at(e.start_ns), at(e.end_ns))
                  : QStringLiteral("%1 %2").arg(what, at(e.start_ns)));
  }
  return QStringLiteral("tensor %1, %2: %3")
      .arg(tensor)
      .arg(format_bytes(static_cast<double>(bytes)))
      .arg(steps.join(QStringLiteral(" \u2192 ")));
}

}  // namespace offtune::gui
