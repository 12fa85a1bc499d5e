// Where a run or sweep measures: the backend (cuda, or host-sim with its link model and device
// capacity) and the intra-op threads, prepared once per process, and the environment a run
// records. Shared by every front end.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

#include "offtune/device_model.hpp"

#include "offtune/offloader.hpp"
#include "offtune/profiler/backend_request.hpp"
#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

// A device model by profile name (device_model_names(), "h100", "a100") or from a JSON file:
//   {"base": "h100-sxm", "memory_gbps": 3000, "kernel_overhead_ns": 3000}
// "base" (optional) names the profile the other fields change; without it every figure of
// offtune/device_model.hpp's DeviceModel is required but the efficiencies and the per-kernel cost.
// Fields: title, fp32_tflops, bf16_tflops, memory_gbps, memory_bytes, kernel_overhead_ns,
// matmul_efficiency, attention_efficiency, memory_efficiency, source. Throws std::invalid_argument
// (one line naming the file and the field) for an unknown name, an unreadable file or a bad field.
DeviceModel load_device_model(const std::string& name_or_file);

// Resolves the backend (auto picks cuda when a GPU is visible), prepares host-sim (installs its
// allocator, sets the capacity) and the intra-op threads, fills `env` (versions, device, git
// revision, host) and returns the engine's base options and the device the workload runs on.
// Throws std::invalid_argument (one line) when a device capacity or a device model is given for
// cuda. Process-wide:
// the host-sim allocator and thread count are global, so call it once per process or with the same
// request.
struct PreparedBackend {
  OffloadOptions base;
  c10::Device device{c10::kCPU};
};
PreparedBackend prepare_backend(const BackendRequest& request, Environment& env);

// The environment a run records (versions, device, git revision, host) on a resolved backend, as
// prepare_backend fills it: for a front end whose process set the backend up itself (a Python
// training loop, live_run.hpp). `device_model` may be null; `link_name` is a Link's name
// (offtune/knobs.hpp: "pcie4", "12:15"), what the record says the copies went over.
void fill_environment(Environment& env, BackendKind backend, const DeviceModel* device_model,
                      const std::string& link_name);

}  // namespace offtune::profiler
