// The backend a run or sweep asks for, parsed: what prepare_backend() (backend.hpp) takes. A header
// of its own, without libtorch, so that the request layer's typed requests carry it to every front
// end (the dashboard included) without a copy of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "offtune/device_model.hpp"
#include "offtune/knobs.hpp"
#include "offtune/options.hpp"

namespace offtune::profiler {

// Where a run or sweep measures (the --backend, --link, --device-model, --device-capacity and
// --threads flags), parsed.
struct BackendRequest {
  BackendKind backend = BackendKind::Auto;   // Auto: cuda when a GPU is visible, else host-sim
  Link link = offtune::parse_link("pcie4");  // host-sim's link model, and its name for the record
  // host-sim times steps as this GPU would (host_sim::set_device_model); none: as this CPU does.
  std::optional<DeviceModel> device_model;
  int64_t device_capacity = 0;  // host-sim device memory in bytes; 0: unlimited
  int64_t threads = -1;  // intra-op threads; -1: cores-1 on host-sim, torch's default on cuda
};

}  // namespace offtune::profiler
