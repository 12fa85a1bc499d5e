#include "offtune/gui/run_peak.hpp"

#include <algorithm>
#include <unordered_map>

namespace offtune::gui {

namespace pf = offtune::profiler;

int64_t PeakBreakdown::device_count() const {
  int64_t n = 0;
  for (const auto& [state, figures] : on_device) n += figures.first;
  return n;
}

int64_t PeakBreakdown::device_bytes() const {
  int64_t n = 0;
  for (const auto& [state, figures] : on_device) n += figures.second;
  return n;
}

PeakBreakdown peak_breakdown(const RunData& run) {
  PeakBreakdown out;
  for (const auto& s : run.occupancy) {
    if (s.device_bytes < 0) continue;
    if (!out.known || s.device_bytes > out.allocated) {
      out.known = true;
      out.time_ns = s.time_ns;
      out.allocated = s.device_bytes;
      out.reserved = s.reserved_bytes;
    }
  }
  if (!out.known) return out;
  const int64_t t = out.time_ns;
  // Per tensor id, its events by time: unpacks, and the copies out and back.
  std::unordered_map<int64_t, std::vector<const pf::TimelineEvent*>> by_tensor;
  for (const auto& e : run.events) {
    if (e.tensor < 0) continue;
    if (e.kind == pf::EventKind::Unpack || e.kind == pf::EventKind::CopyD2H ||
        e.kind == pf::EventKind::CopyH2D || e.kind == pf::EventKind::DiskWrite ||
        e.kind == pf::EventKind::DiskRead) {
      by_tensor[e.tensor].push_back(&e);
    }
  }
  for (auto& [id, events] : by_tensor) {
    std::sort(events.begin(), events.end(),
              [](const auto* a, const auto* b) { return a->start_ns < b->start_ns; });
  }
  std::vector<PeakTensor> device;
  for (const auto& e : run.events) {
    if (e.kind != pf::EventKind::Pack) continue;
    out.saved_recorded = true;
    if (e.start_ns > t) continue;
    // Its events after the pack: the first unpack ends its life; copies before that move it.
    const pf::TimelineEvent* unpack = nullptr;
    const pf::TimelineEvent* out_copy = nullptr;
    const pf::TimelineEvent* back_copy = nullptr;
    if (const auto it = by_tensor.find(e.tensor); it != by_tensor.end()) {
      for (const auto* x : it->second) {
        if (x->start_ns < e.start_ns) continue;
        if (x->kind == pf::EventKind::Unpack) {
          unpack = x;
          break;
        }
        const bool outward =
            x->kind == pf::EventKind::CopyD2H || x->kind == pf::EventKind::DiskWrite;
        if (outward && out_copy == nullptr) out_copy = x;
        if (!outward && back_copy == nullptr) back_copy = x;
      }
    }
    if (unpack != nullptr && unpack->start_ns <= t) continue;  // no longer alive
    std::string state;
    if (e.name == "offloaded") {
      if (out_copy == nullptr || out_copy->end_ns > t) {
        state = "copying out";
      } else if (back_copy != nullptr && back_copy->start_ns <= t) {
        state = "reloaded";
      } else {
        ++out.on_host_count;
        out.on_host_bytes += e.bytes;
        continue;
      }
    } else if (e.name == "deduplicated") {
      continue;  // shares a tensor counted already
    } else {
      state = "kept: " + e.name;
    }
    auto& figures = out.on_device[state];
    ++figures.first;
    figures.second += e.bytes;
    device.push_back({e.tensor, e.bytes, state});
  }
  std::stable_sort(device.begin(), device.end(),
                   [](const PeakTensor& a, const PeakTensor& b) { return a.bytes > b.bytes; });
  if (device.size() > 5) device.resize(5);
  out.largest_on_device = std::move(device);
  return out;
}

}  // namespace offtune::gui
