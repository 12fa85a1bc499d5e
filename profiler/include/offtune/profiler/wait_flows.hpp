// Which copy a wait waited on: the one rule that the Chrome trace's flow arrows
// (export_chrome.cpp) and the dashboard's timeline arrows draw, so that both link the same wait
// to the same copy.
//
// Rule: a wait on a tensor waited on the latest copy of that tensor that started before the wait
// ended, of the kind its wait kind names: an offload (D2H) for "forward-window", a reload (H2D) for
// "reload", a disk write for "spill", a disk read for "disk-read", the later-started of the D2H and
// H2D for any other kind (or none). A "drain" waits for every copy and is linked to none, and so is
// a wait on no tensor (tensor < 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

struct CopySpan {
  int64_t tensor = -1;
  EventKind kind = EventKind::CopyD2H;  // CopyD2H, CopyH2D, DiskWrite or DiskRead
  int64_t start_ns = 0;
  size_t ref = 0;  // the caller's handle on the copy (an index into its own list)
};

struct WaitSpan {
  int64_t tensor = -1;
  std::string_view kind;  // the wait's kind, as an event names it ("reload", "spill", ...)
  int64_t end_ns = 0;
  size_t ref = 0;  // the caller's handle on the wait
};

// A wait and the copy it waited on, as the callers' refs.
struct WaitFlow {
  size_t copy = 0;
  size_t wait = 0;
};

// Every wait of `waits` that waited on one of `copies`, in the order of `waits`.
std::vector<WaitFlow> match_waits_to_copies(std::vector<CopySpan> copies,
                                            const std::vector<WaitSpan>& waits);

// The same over a run's events: refs are indices into `events`.
std::vector<WaitFlow> wait_flows(const std::vector<TimelineEvent>& events);

}  // namespace offtune::profiler
