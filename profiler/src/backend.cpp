// prepare_backend(): the backend a run or sweep measures on, shared by every front end.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "offtune/host_sim.hpp"
#include "offtune/profiler/backend.hpp"

#include "offtune/profiler/units.hpp"
#include "offtune/version.hpp"

#ifndef OFFTUNE_GIT_REVISION
#define OFFTUNE_GIT_REVISION "unknown"
#endif

namespace offtune::profiler {

LinkModel parse_link(const std::string& s) {
  if (s == "none") return {};
  if (s == "pcie4") return LinkModel::pcie4();
  if (const auto colon = s.find(':'); colon != std::string::npos) {
    // The units' parsers, so that "inf", "nan", spaces and the like mean the same as everywhere
    // else: not a value. A latency of 0 is valid; a bandwidth must be positive and finite, and a
    // latency beyond a second is a typo.
    const std::string gbps_text = s.substr(0, colon), us_text = s.substr(colon + 1);
    try {
      const double gbps = parse_positive_number(gbps_text);
      const double us = us_text == "0" ? 0.0 : parse_positive_number(us_text);
      if (gbps <= 1e6 && us <= 1e6) return LinkModel{gbps, 0.0, static_cast<int64_t>(us * 1000)};
    } catch (const ParseError&) {
    }
  }
  throw std::invalid_argument("bad link '" + s + "' (valid: none, pcie4, GBPS:LATENCY_US)");
}

PreparedBackend prepare_backend(const BackendRequest& r, Environment& env) {
  PreparedBackend out;
  out.base.backend = r.backend;
  out.base.link = r.link;
  if (out.base.backend == BackendKind::Auto) {
    out.base.backend = torch::cuda::is_available() ? BackendKind::Cuda : BackendKind::HostSim;
  }
  const bool on_host_sim = out.base.backend == BackendKind::HostSim;
  if (on_host_sim) {
    host_sim::install();
    // Set every time, unlimited included: a process that runs several sweeps (the GUI) must not
    // keep an earlier sweep's capacity.
    host_sim::set_capacity(r.device_capacity);
  } else if (r.device_capacity != 0) {
    throw std::invalid_argument("--device-capacity applies to host-sim only");
  }
  if (const int64_t t = host_sim::default_threads(r.threads, on_host_sim); t > 0) {
    at::set_num_threads(static_cast<int>(t));
  }
  out.device = on_host_sim ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0);
  env.offtune_version = std::string(kVersion);
  env.torch_version = TORCH_VERSION;
  env.backend = std::string(to_string(out.base.backend));
  env.device = on_host_sim ? "host-sim (link " + r.link_name + ")" : "cuda:0";
  env.git_revision = OFFTUNE_GIT_REVISION;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) env.host = host;
  return out;
}

}  // namespace offtune::profiler
