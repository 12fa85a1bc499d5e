#include "offtune/profiler/wait_flows.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace offtune::profiler {

std::vector<WaitFlow> match_waits_to_copies(std::vector<CopySpan> copies,
                                            const std::vector<WaitSpan>& waits) {
  std::vector<WaitFlow> out;
  const auto key = [](const CopySpan& c) { return std::tie(c.tensor, c.kind, c.start_ns); };
  const auto before = [&key](const CopySpan& a, const CopySpan& b) { return key(a) < key(b); };
  std::sort(copies.begin(), copies.end(), before);
  // The last copy of `tensor` of `kind` that started before `end`.
  const auto latest = [&](int64_t tensor, EventKind kind, int64_t end) -> const CopySpan* {
    const auto it =
        std::lower_bound(copies.begin(), copies.end(), CopySpan{tensor, kind, end, 0}, before);
    if (it == copies.begin()) return nullptr;
    const CopySpan& c = *(it - 1);
    return c.tensor == tensor && c.kind == kind ? &c : nullptr;
  };
  for (const WaitSpan& w : waits) {
    if (w.tensor < 0) continue;
    const CopySpan* copy = nullptr;
    if (w.kind == "forward-window") {
      copy = latest(w.tensor, EventKind::CopyD2H, w.end_ns);
    } else if (w.kind == "reload") {
      copy = latest(w.tensor, EventKind::CopyH2D, w.end_ns);
    } else if (w.kind == "spill") {
      copy = latest(w.tensor, EventKind::DiskWrite, w.end_ns);
    } else if (w.kind == "disk-read") {
      copy = latest(w.tensor, EventKind::DiskRead, w.end_ns);
    } else if (w.kind != "drain") {
      const CopySpan* d2h = latest(w.tensor, EventKind::CopyD2H, w.end_ns);
      const CopySpan* h2d = latest(w.tensor, EventKind::CopyH2D, w.end_ns);
      copy = !h2d || (d2h && d2h->start_ns > h2d->start_ns) ? d2h : h2d;
    }
    if (copy) out.push_back({copy->ref, w.ref});
  }
  return out;
}

std::vector<WaitFlow> wait_flows(const std::vector<TimelineEvent>& events) {
  std::vector<CopySpan> copies;
  std::vector<WaitSpan> waits;
  for (size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& e = events[i];
    if (e.tensor < 0) continue;
    if (e.kind == EventKind::CopyD2H || e.kind == EventKind::CopyH2D || is_disk(e.kind)) {
      copies.push_back({e.tensor, e.kind, e.start_ns, i});
    } else if (e.kind == EventKind::Wait) {
      waits.push_back({e.tensor, e.name, std::max(e.start_ns, e.end_ns), i});
    }
  }
  if (waits.empty()) return {};
  return match_waits_to_copies(std::move(copies), waits);
}

}  // namespace offtune::profiler
