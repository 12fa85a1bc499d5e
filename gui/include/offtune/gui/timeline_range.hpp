// A stretch of a run's timeline, measured (issue 43 item 5): shift+drag on the Run tab's timeline
// selects one, and the view says what happened in it. Pure functions over a TimelineIndex, so that
// the figures are tested apart from the widget.
#pragma once

#include <QString>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "offtune/gui/timeline.hpp"

namespace offtune::gui {

// What a stretch [begin_ns, end_ns) of a run held. Busy times are unions (ns covered by at least
// one event of the lanes named), clipped to the stretch. Bytes of a copy that crosses an end of the
// stretch count in proportion to the part of it inside (a copy moves its bytes at an even rate).
struct TimelineRangeStats {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t compute_ns = 0;      // every compute lane (all streams)
  int64_t wait_ns = 0;         // the waits lane: compute held up for a copy (exposed copy time)
  int64_t d2h_ns = 0;          // the copy D2H lane
  int64_t h2d_ns = 0;          // the copy H2D lane
  int64_t copy_ns = 0;         // either copy lane
  int64_t copy_hidden_ns = 0;  // either copy lane while a compute lane ran: copy time hidden
  double d2h_bytes = 0.0;
  double h2d_bytes = 0.0;
  int64_t d2h_copies = 0;  // copies with any part inside
  int64_t h2d_copies = 0;

  int64_t span_ns() const { return end_ns - begin_ns; }
  // GB/s (1e9 bytes per second) while the lane was busy; 0 when it was not.
  double d2h_gbps() const;
  double h2d_gbps() const;
};

// The figures of [begin_ns, end_ns) (swapped when given the wrong way round).
TimelineRangeStats timeline_range_stats(const TimelineIndex& index, int64_t begin_ns,
                                        int64_t end_ns);

// One paragraph for the view: "1.204 ms selected: compute busy 0.893 ms (74.2 %), exposed wait
// 0.310 ms (25.7 %); D2H 12.00 MiB in 4 copies at 21.4 GB/s (89 % of the link's 24.0 GB/s); H2D
// none; copy time hidden by compute 74.0 %". `link_gbps`: the run's modelled link for pinned
// copies (0: unknown, a real GPU's link; not compared).
QString describe_range(const TimelineRangeStats& stats, double link_gbps);

// One tensor followed through the run (issue 43 item 5): each event of the timeline that carries
// its id (TensorEvent, timeline.hpp), by start: its pack, its copies out and back, the waits on
// it, its unpack.
std::vector<TensorEvent> tensor_events(const TimelineIndex& index, int64_t tensor);
// "tensor 17, 4.00 MiB: pack +1.200 ms → copy D2H +1.210 ms – +1.260 ms → copy H2D (prefetched)
// +5.100 ms – +5.160 ms → unpack +5.300 ms", times from the run's start; empty for no event.
QString describe_tensor(const TimelineIndex& index, int64_t tensor);

}  // namespace offtune::gui
