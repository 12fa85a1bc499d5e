// What a run held at its peak (issue 43 item 2): at the moment device memory peaked, the saved
// tensors alive, which of them were on the device and why (kept, by reason; being copied out;
// reloaded for backward), which offloading had moved to the host, and how far reserved memory lay
// above allocated. From the run's pack, copy and unpack events and its occupancy samples; the Run
// tab's summary shows it. Saved tensors are what the offloader saw (its pack hooks): a run that
// did not offload recorded none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "offtune/gui/data.hpp"

namespace offtune::gui {

struct PeakTensor {
  int64_t tensor = -1;
  int64_t bytes = 0;
  std::string state;  // "kept: below-threshold", "copying out", "reloaded", "on host", ...
};

struct PeakBreakdown {
  bool known = false;           // the run's samples gave its device memory over time
  int64_t time_ns = 0;          // when allocated memory peaked (the first sample at the peak)
  int64_t allocated = 0;        // allocated device bytes then
  int64_t reserved = -1;        // reserved then (-1: not recorded)
  bool saved_recorded = false;  // the run recorded pack events (it offloaded)
  // Saved tensors alive then: on the device, by what kept them there, and on the host.
  std::map<std::string, std::pair<int64_t, int64_t>> on_device;  // state -> (tensors, bytes)
  int64_t on_host_count = 0;
  int64_t on_host_bytes = 0;
  std::vector<PeakTensor> largest_on_device;  // by size, at most 5
  int64_t device_count() const;
  int64_t device_bytes() const;
};

PeakBreakdown peak_breakdown(const RunData& run);

}  // namespace offtune::gui
