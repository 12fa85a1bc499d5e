// Built-in workloads bound for the runner: the samples' models behind profiler::WorkloadInstance.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "offtune/profiler/runner.hpp"

namespace offtune::cli {

// Model names: the Llama presets ("tiny", "small", "1b") and "mlp". Throws std::invalid_argument
// naming the valid ones.
std::unique_ptr<profiler::WorkloadInstance> make_builtin_workload(const profiler::Workload& w,
                                                                  c10::Device device);

}  // namespace offtune::cli
