// prepare_backend(): the backend a run or sweep measures on, shared by every front end.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "offtune/host_sim.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/version.hpp"

#ifndef OFFTUNE_GIT_REVISION
#define OFFTUNE_GIT_REVISION "unknown"
#endif

namespace offtune::profiler {

DeviceModel load_device_model(const std::string& spec) {
  const bool looks_like_file =
      spec.find('/') != std::string::npos || spec.find('.') != std::string::npos;
  if (!looks_like_file) {
    try {
      return device_model_named(spec);
    } catch (const OptionsError& e) {
      throw std::invalid_argument(e.what());
    }
  }
  std::ifstream in(spec);
  if (!in) throw std::invalid_argument("cannot read device model file '" + spec + "'");
  std::stringstream text;
  text << in.rdbuf();
  const std::string where = "device model file '" + spec + "'";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(where + ": not JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw std::invalid_argument(where + ": not a JSON object");
  DeviceModel m;
  m.kernel_overhead_ns = 2'000;
  bool based = false;
  if (j.contains("base")) {
    if (!j["base"].is_string()) throw std::invalid_argument(where + ": base must be a string");
    try {
      m = device_model_named(j["base"].get<std::string>());
    } catch (const OptionsError& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
    based = true;
  }
  m.name = spec;
  auto number = [&](const char* field, double& out, bool required) {
    if (!j.contains(field)) {
      if (required && !based) throw std::invalid_argument(where + ": " + field + " is missing");
      return;
    }
    if (!j[field].is_number())
      throw std::invalid_argument(where + ": " + field + " must be a number");
    out = j[field].get<double>();
  };
  auto integer = [&](const char* field, int64_t& out) {
    if (!j.contains(field)) return;
    if (!j[field].is_number_integer() && !j[field].is_number_unsigned()) {
      throw std::invalid_argument(where + ": " + field + " must be an integer");
    }
    out = j[field].get<int64_t>();
  };
  auto text_field = [&](const char* field, std::string& out) {
    if (!j.contains(field)) return;
    if (!j[field].is_string())
      throw std::invalid_argument(where + ": " + field + " must be a string");
    out = j[field].get<std::string>();
  };
  const std::vector<std::string> known = {"base",
                                          "title",
                                          "fp32_tflops",
                                          "bf16_tflops",
                                          "memory_gbps",
                                          "memory_bytes",
                                          "kernel_overhead_ns",
                                          "context_bytes",
                                          "blas_workspace_bytes",
                                          "matmul_efficiency",
                                          "attention_efficiency",
                                          "memory_efficiency",
                                          "source"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw std::invalid_argument(where + ": unknown field '" + key + "'");
    }
  }
  text_field("title", m.title);
  text_field("source", m.source);
  number("fp32_tflops", m.fp32_tflops, true);
  number("bf16_tflops", m.bf16_tflops, true);
  number("memory_gbps", m.memory_gbps, true);
  integer("memory_bytes", m.memory_bytes);
  integer("kernel_overhead_ns", m.kernel_overhead_ns);
  integer("context_bytes", m.context_bytes);
  integer("blas_workspace_bytes", m.blas_workspace_bytes);
  number("matmul_efficiency", m.matmul_efficiency, false);
  number("attention_efficiency", m.attention_efficiency, false);
  number("memory_efficiency", m.memory_efficiency, false);
  if (m.title.empty()) m.title = spec;
  try {
    m.validate();
  } catch (const OptionsError& e) {
    throw std::invalid_argument(e.what());
  }
  return m;
}

void fill_environment(Environment& env, BackendKind backend, const DeviceModel* device_model,
                      const std::string& link_name) {
  env.offtune_version = std::string(kVersion);
  env.torch_version = TORCH_VERSION;
  env.backend = std::string(to_string(backend));
  if (backend != BackendKind::HostSim) {
    env.device = "cuda:0";
  } else if (device_model != nullptr) {
    env.device = "host-sim modelling " + device_model->title + " (link " + link_name + ")";
  } else {
    env.device = "host-sim (link " + link_name + ")";
  }
  env.git_revision = OFFTUNE_GIT_REVISION;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) env.host = host;
}

PreparedBackend prepare_backend(const BackendRequest& r, Environment& env) {
  PreparedBackend out;
  out.base.backend = r.backend;
  out.base.link = r.link.model;
  if (out.base.backend == BackendKind::Auto) {
    out.base.backend = torch::cuda::is_available() ? BackendKind::Cuda : BackendKind::HostSim;
  }
  const bool on_host_sim = out.base.backend == BackendKind::HostSim;
  if (on_host_sim) {
    host_sim::install();
    // Set every time, unlimited included: a process that runs several sweeps (the GUI) must not
    // keep an earlier sweep's capacity.
    host_sim::set_capacity(r.device_capacity);
    // Set every time too (nullptr turns it off).
    host_sim::set_device_model(r.device_model ? &*r.device_model : nullptr);
  } else if (r.device_capacity != 0) {
    throw std::invalid_argument("--device-capacity applies to host-sim only");
  } else if (r.device_model) {
    throw std::invalid_argument("--device-model applies to host-sim only (cuda measures the GPU)");
  }
  if (const int64_t t = host_sim::default_threads(r.threads, on_host_sim); t > 0) {
    at::set_num_threads(static_cast<int>(t));
  }
  out.device = on_host_sim ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0);
  fill_environment(env, out.base.backend, r.device_model ? &*r.device_model : nullptr, r.link.name);
  return out;
}

}  // namespace offtune::profiler
