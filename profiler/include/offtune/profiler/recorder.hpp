// The recorder: an Observer of the engine that turns its events into a timeline (copies as
// intervals on the copy stream, packs/unpacks as instants, waits as intervals), stash occupancy
// samples, and step/forward/backward spans marked by the runner. On host-sim the copy thread
// reports completion times, so copy intervals are exact; compute is the forward/backward time the
// compute thread did not spend blocked in a wait. On cuda the CUPTI collector supplies copy and
// kernel intervals instead.
//
// Thread-safe: events arrive on the forward thread, autograd threads and the copy thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "offtune/observer.hpp"
#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

// Memory at one moment, as an occupancy sample carries it; -1: not known.
struct MemorySample {
  int64_t allocated = -1;        // device bytes in live tensors
  int64_t reserved = -1;         // device bytes the caching allocator holds
  int64_t host_bytes = -1;       // offtune's host copies alive
  int64_t host_pool_bytes = -1;  // pinned host bytes its pool reserves
};

class Recorder : public Observer {
 public:
  // host_sim_compute: derive compute intervals from forward/backward spans minus waits (host-sim).
  explicit Recorder(bool host_sim_compute = true);

  void on_pack(const PackEvent& e) override;
  void on_copy_issued(const CopyEvent& e) override;
  void on_copy_completed(const CopyEvent& e) override;
  void on_unpack(const UnpackEvent& e) override;
  void on_wait(const WaitEvent& e) override;
  void on_recompute(const RecomputeEvent& e) override;
  void on_stash(const StashEvent& e) override;

  // Phase marks from the runner (steady_clock ns, offtune::detail::now_ns's clock).
  void mark(EventKind kind, int64_t begin_ns, int64_t end_ns, const std::string& name = {});
  // The compute thread was busy over [begin_ns, end_ns] though its phases are not known (a front
  // end that marks only its steps): compute is derived over it as over a forward or backward span.
  // Not a timeline event itself.
  void mark_busy(int64_t begin_ns, int64_t end_ns);
  // Memory now, recorded as a sample of its own (with the stash counts of the sample before it);
  // its device figures are attached to the next stash sample too. Host figures of -1 keep the
  // last ones known.
  void sample_memory(int64_t time_ns, const MemorySample& now);
  // Reads the allocated and reserved device bytes at each stash event (allocated and host
  // figures -1 are left as they are), so that the occupancy samples trace device memory through
  // the step (peaks included), not only at its ends; the host figures come with the stash event.
  // Called on the thread of the event, outside the recorder's lock; must be thread-safe (the
  // backends' counters are). Set it before events arrive.
  void set_device_probe(std::function<MemorySample()> probe);
  // Device bytes at the given times, from the allocator's own events (host-sim's allocation
  // listener): merged into the occupancy samples by time at take(), each with the stash counts of
  // the sample before it, so that the memory curve follows every change, its peak included.
  void add_device_curve(const std::vector<std::pair<int64_t, int64_t>>& points);

  // Everything recorded so far, cleared. Events are sorted by start time; copies appear once
  // completed.
  struct Snapshot {
    std::vector<TimelineEvent> events;
    std::vector<OccupancySample> occupancy;
  };
  Snapshot take();

  // Events between [begin, end) of the current buffer, without clearing (for per-step metrics).
  std::vector<TimelineEvent> events_between(int64_t begin_ns, int64_t end_ns);

 private:
  void derive_compute_locked(std::vector<TimelineEvent>& out) const;
  void record_disk(const CopyEvent& e);

  const bool host_sim_compute_;
  std::mutex mutex_;
  std::vector<TimelineEvent> events_;
  std::vector<OccupancySample> occupancy_;
  int64_t copy_stream_free_at_ = 0;  // host-sim copies run one after another
  int64_t disk_write_free_at_ = 0;   // and so do disk writes, and disk reads
  int64_t disk_read_free_at_ = 0;
  MemorySample last_device_;  // the device figures of the last sample (host ones unused)
  std::function<MemorySample()> device_probe_;
  std::vector<std::pair<int64_t, int64_t>> device_curve_;
  std::vector<std::pair<int64_t, int64_t>> busy_;  // mark_busy's spans, until take()
};

}  // namespace offtune::profiler
