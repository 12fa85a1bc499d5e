// Workloads for the front ends (CLI and GUI): the samples' models behind
// profiler::WorkloadInstance, TorchScript files with a described input, and the backend a run or
// sweep measures on.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/offloader.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/runner.hpp"

namespace offtune::cli {

// The one input a TorchScript model takes, as `NAME:TYPE[DIM,...][:vocab=V]`:
//   - NAME: an identifier, for the reader (the input is passed positionally).
//   - TYPE: int64 (token ids, drawn uniformly from [0, V); `:vocab=V` is required; exactly two
//     dims, batch then sequence; the model returns logits [B, T, >= V] and the loss is the
//     next-token cross entropy), or float32 | bfloat16 | float16 (dense input ~ N(0, 1); the model
//     returns any tensor and the loss is its mean square in float32).
//   - DIM: B (--batch), T (--seq), or a positive integer.
// Examples: "tokens:int64[B,T]:vocab=512", "x:float32[B,256]". Inputs depend on --seed and the step
// only, as the built-in batches do.
inline constexpr std::string_view kDefaultInputSpec = "tokens:int64[B,T]:vocab=512";

struct InputSpec {
  std::string name;
  c10::ScalarType dtype = c10::kLong;  // kLong: token ids; a floating type: dense input
  std::vector<std::string> dims;       // "B", "T" or a positive integer
  int64_t vocab = 0;                   // token ids only

  bool tokens() const { return dtype == c10::kLong; }
  // The input's shape with B and T replaced by batch and seq.
  std::vector<int64_t> shape(int64_t batch, int64_t seq) const;
};

// Throws std::invalid_argument (one line, quoting the spec) when it does not follow the grammar.
InputSpec parse_input_spec(std::string_view spec);

// Model names: the Llama presets ("tiny", "small", "1b"), the GPT presets ("gpt-tiny",
// "gpt-small"), "mlp", or the path of a TorchScript file (ending in .pt or .pth, or containing a
// '/'), whose input `input_spec` describes. Throws std::invalid_argument (one line) naming the
// valid models on an unknown name, when a TorchScript file cannot be loaded, on a bad input_spec,
// and on a non-default input_spec for a built-in model.
std::unique_ptr<profiler::WorkloadInstance> make_builtin_workload(
    const profiler::Workload& w, c10::Device device,
    std::string_view input_spec = kDefaultInputSpec);

// Where a run or sweep measures: the --backend, --link, --device-capacity and --threads flags.
struct BackendRequest {
  std::string backend = "auto";  // auto (cuda when a GPU is visible), cuda, host-sim
  std::string link = "pcie4";    // host-sim link model: none, pcie4, GBPS:LATENCY_US
  std::string device_capacity;   // host-sim device memory size ("2GiB"); empty: unlimited
  int64_t threads = -1;  // intra-op threads; -1: cores-1 on host-sim, torch's default on cuda
};

// "none" | "pcie4" | "GBPS:LATENCY_US". Throws std::invalid_argument naming the valid forms.
LinkModel parse_link(const std::string& s);

// Resolves the backend (auto picks cuda when a GPU is visible), prepares host-sim (installs its
// allocator, sets the capacity) and the intra-op threads, fills `env` (versions, device, git
// revision, host) and returns the engine's base options and the device the workload runs on.
// Throws std::invalid_argument (one line) on a bad backend, link or capacity. Process-wide: the
// host-sim allocator and thread count are global, so call it once per process or with the same
// request.
struct PreparedBackend {
  OffloadOptions base;
  c10::Device device{c10::kCPU};
};
PreparedBackend prepare_backend(const BackendRequest& request, profiler::Environment& env);

}  // namespace offtune::cli
