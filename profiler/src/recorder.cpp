#include "offtune/profiler/recorder.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace offtune::profiler {

Recorder::Recorder(bool host_sim_compute) : host_sim_compute_(host_sim_compute) {}

void Recorder::on_pack(const PackEvent& e) {
  TimelineEvent ev;
  ev.kind = EventKind::Pack;
  ev.start_ns = ev.end_ns = e.time_ns;
  ev.bytes = e.bytes;
  ev.tensor = e.id.value;
  ev.name = e.decision == PackDecision::Kept ? std::string(to_string(e.reason))
                                             : std::string(to_string(e.decision));
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(ev));
}

void Recorder::on_copy_issued(const CopyEvent&) {
  // Intervals are built from completions, which carry their issue time.
}

void Recorder::on_copy_completed(const CopyEvent& e) {
  if (is_disk(e.direction)) {
    record_disk(e);
    return;
  }
  TimelineEvent ev;
  ev.kind = e.direction == CopyDirection::DeviceToHost ? EventKind::CopyD2H : EventKind::CopyH2D;
  ev.stream = e.on_side_stream ? 1 : 0;
  ev.bytes = e.bytes;
  // A block's frozen weights (layer offloading) share the copy stream; named apart, and with no
  // tensor id (their id is a block index, which must not link to an activation's waits).
  ev.tensor = e.weights ? -1 : e.id.value;
  ev.pinned = e.pinned;
  ev.prefetch = e.prefetch;
  ev.name = e.weights    ? std::string(kWeightCopyName) + (e.prefetch ? " prefetch" : "")
            : e.prefetch ? "prefetch"
                         : std::string(to_string(e.direction));
  std::lock_guard<std::mutex> lock(mutex_);
  // One copy thread runs copies in issue order: a copy starts when it was issued or when the one
  // before it finished, whichever is later.
  const int64_t issued = e.issued_ns > 0 ? e.issued_ns : e.time_ns;
  ev.start_ns = e.on_side_stream ? std::max(issued, copy_stream_free_at_) : issued;
  ev.start_ns = std::min(ev.start_ns, e.time_ns);
  ev.end_ns = e.time_ns;
  if (e.on_side_stream) copy_stream_free_at_ = std::max(copy_stream_free_at_, e.time_ns);
  events_.push_back(std::move(ev));
}

// Disk transfers run on the disk tier's threads, one per direction, in issue order: a transfer
// starts when it was issued or when the one before it in its direction finished.
void Recorder::record_disk(const CopyEvent& e) {
  const bool write = e.direction == CopyDirection::HostToDisk;
  TimelineEvent ev;
  ev.kind = write ? EventKind::DiskWrite : EventKind::DiskRead;
  ev.stream = kDiskStream;
  ev.bytes = e.bytes;
  ev.tensor = e.id.value;
  ev.pinned = e.pinned;
  ev.prefetch = e.prefetch;
  ev.name = e.prefetch ? "read-ahead" : std::string(to_string(e.direction));
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t& free_at = write ? disk_write_free_at_ : disk_read_free_at_;
  const int64_t issued = e.issued_ns > 0 ? e.issued_ns : e.time_ns;
  ev.start_ns = std::min(std::max(issued, free_at), e.time_ns);
  ev.end_ns = e.time_ns;
  free_at = std::max(free_at, e.time_ns);
  events_.push_back(std::move(ev));
}

void Recorder::on_unpack(const UnpackEvent& e) {
  TimelineEvent ev;
  ev.kind = EventKind::Unpack;
  ev.start_ns = ev.end_ns = e.time_ns;
  ev.bytes = e.bytes;
  ev.tensor = e.id.value;
  ev.name = to_string(e.source);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(ev));
}

void Recorder::on_wait(const WaitEvent& e) {
  TimelineEvent ev;
  ev.kind = EventKind::Wait;
  ev.start_ns = e.begin_ns;
  ev.end_ns = std::max(e.begin_ns, e.end_ns);
  ev.tensor = e.kind == WaitKind::Weights ? -1 : e.id.value;
  ev.name = to_string(e.kind);
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(ev));
}

void Recorder::on_recompute(const RecomputeEvent& e) {
  TimelineEvent ev;
  ev.kind = EventKind::Recompute;
  ev.start_ns = e.begin_ns;
  ev.end_ns = std::max(e.begin_ns, e.end_ns);
  ev.bytes = e.bytes;
  ev.tensor = e.tensors;
  ev.name = "recompute";
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(ev));
}

void Recorder::on_stash(const StashEvent& e) {
  const MemorySample device = device_probe_ ? device_probe_() : MemorySample{};
  std::lock_guard<std::mutex> lock(mutex_);
  if (device_probe_) last_device_ = device;
  occupancy_.push_back({RunId{}, e.time_ns, e.fwd_count, e.fwd_bytes, e.bwd_count, e.bwd_bytes,
                        last_device_.allocated, last_device_.reserved, e.host_bytes,
                        e.host_pool_bytes});
}

void Recorder::set_device_probe(std::function<MemorySample()> probe) {
  device_probe_ = std::move(probe);
}

void Recorder::add_device_curve(const std::vector<std::pair<int64_t, int64_t>>& points) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_curve_.insert(device_curve_.end(), points.begin(), points.end());
}

void Recorder::mark(EventKind kind, int64_t begin_ns, int64_t end_ns, const std::string& name) {
  TimelineEvent ev;
  ev.kind = kind;
  ev.start_ns = begin_ns;
  ev.end_ns = end_ns;
  ev.name = name.empty() ? to_string(kind) : name;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(ev));
}

void Recorder::mark_busy(int64_t begin_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_.emplace_back(begin_ns, std::max(begin_ns, end_ns));
}

void Recorder::sample_memory(int64_t time_ns, const MemorySample& now) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_device_.allocated = now.allocated;
  last_device_.reserved = now.reserved;
  OccupancySample s{};
  if (!occupancy_.empty()) s = occupancy_.back();
  s.time_ns = time_ns;
  s.device_bytes = now.allocated;
  s.reserved_bytes = now.reserved;
  if (now.host_bytes >= 0) s.host_bytes = now.host_bytes;
  if (now.host_pool_bytes >= 0) s.host_pool_bytes = now.host_pool_bytes;
  occupancy_.push_back(s);
}

// Host-sim compute: the compute thread is busy for the whole of forward and backward except while
// it is blocked — in a wait, or running a single-stream copy itself.
void Recorder::derive_compute_locked(std::vector<TimelineEvent>& out) const {
  std::vector<std::pair<int64_t, int64_t>> busy(busy_), blocked;
  for (const auto& e : events_) {
    if (e.kind == EventKind::Forward || e.kind == EventKind::Backward) {
      busy.emplace_back(e.start_ns, e.end_ns);
    } else if (e.kind == EventKind::Wait ||
               ((e.kind == EventKind::CopyD2H || e.kind == EventKind::CopyH2D) && e.stream == 0)) {
      blocked.emplace_back(e.start_ns, e.end_ns);
    }
  }
  std::sort(blocked.begin(), blocked.end());
  for (auto [b, end] : busy) {
    int64_t cursor = b;
    for (auto [wb, we] : blocked) {
      if (we <= cursor || wb >= end) continue;
      if (wb > cursor) {
        TimelineEvent c;
        c.kind = EventKind::Compute;
        c.start_ns = cursor;
        c.end_ns = wb;
        c.name = "compute";
        out.push_back(c);
      }
      cursor = std::max(cursor, we);
    }
    if (cursor < end) {
      TimelineEvent c;
      c.kind = EventKind::Compute;
      c.start_ns = cursor;
      c.end_ns = end;
      c.name = "compute";
      out.push_back(c);
    }
  }
}

Recorder::Snapshot Recorder::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot s;
  if (host_sim_compute_) derive_compute_locked(s.events);
  s.events.insert(s.events.end(), std::make_move_iterator(events_.begin()),
                  std::make_move_iterator(events_.end()));
  s.occupancy = std::move(occupancy_);
  events_.clear();
  occupancy_.clear();
  busy_.clear();
  if (!device_curve_.empty()) {
    const auto early = [](const OccupancySample& a, const OccupancySample& b) {
      return a.time_ns < b.time_ns;
    };
    std::stable_sort(s.occupancy.begin(), s.occupancy.end(), early);
    const size_t stash_samples = s.occupancy.size();
    std::sort(device_curve_.begin(), device_curve_.end());
    size_t before = 0;  // samples of the stash at or before the curve's point
    for (const auto& [time, bytes] : device_curve_) {
      while (before < stash_samples && s.occupancy[before].time_ns <= time) ++before;
      OccupancySample o{};
      if (before > 0) o = s.occupancy[before - 1];
      o.time_ns = time;
      o.device_bytes = bytes;
      s.occupancy.push_back(o);
    }
    device_curve_.clear();
  }
  std::stable_sort(
      s.events.begin(), s.events.end(),
      [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_ns < b.start_ns; });
  std::stable_sort(
      s.occupancy.begin(), s.occupancy.end(),
      [](const OccupancySample& a, const OccupancySample& b) { return a.time_ns < b.time_ns; });
  return s;
}

std::vector<TimelineEvent> Recorder::events_between(int64_t begin_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TimelineEvent> out;
  for (const auto& e : events_) {
    if (e.end_ns >= begin_ns && e.start_ns < end_ns) out.push_back(e);
  }
  if (host_sim_compute_) {
    std::vector<TimelineEvent> compute;
    derive_compute_locked(compute);
    for (auto& c : compute) {
      if (c.end_ns >= begin_ns && c.start_ns < end_ns) out.push_back(c);
    }
  }
  return out;
}

}  // namespace offtune::profiler
