// The samples' workload registry: the built-in models (Llama and GPT presets, the MLP) and
// TorchScript files with a described input, each bound as an offtune::WorkloadInstance that a
// driver (the profiler's runner, a benchmark, a test) steps. Front ends name models by the strings
// listed here.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/workload.hpp"

namespace offtune::samples {

// The one input a TorchScript model takes, as `NAME:TYPE[DIM,...][:vocab=V]`:
//   - NAME: an identifier, for the reader (the input is passed positionally).
//   - TYPE: int64 (token ids, drawn uniformly from [0, V); `:vocab=V` is required; exactly two
//     dims, batch then sequence; the model returns logits [B, T, >= V] and the loss is the
//     next-token cross entropy), or float32 | bfloat16 | float16 (dense input ~ N(0, 1); the model
//     returns any tensor and the loss is its mean square in float32).
//   - DIM: B (--batch), T (--seq), or a positive integer.
// Examples: "tokens:int64[B,T]:vocab=512", "x:float32[B,256]". Inputs depend on the seed and the
// step only, as the built-in batches do.
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

// The built-in model names: the Llama presets ("tiny", "small", "1b"), the GPT presets
// ("gpt-tiny", "gpt-small") and "mlp", in that order.
std::vector<std::string> builtin_model_names();
// A TorchScript file's name: ends in .pt or .pth, or contains a '/'.
bool is_torchscript_path(std::string_view model);
// What a front end should tell a user who offloads `model`'s activations (one line, no "warning:"
// prefix): for a TorchScript file, that its output head cannot be left out; empty otherwise. Say
// it once per command, and only when the command offloads and is not quiet.
std::string_view head_warning(std::string_view model);

// What to build: a model by name and the batches it trains on.
struct WorkloadSpec {
  std::string model = "tiny";  // a builtin_model_names() entry or a TorchScript path
  int64_t batch = 4;
  int64_t seq = 128;
  c10::ScalarType dtype = c10::kFloat;  // parameters and activations (fp32, bf16, fp16)
  uint64_t seed = 0;                    // of the model's initial weights and of the batches
  bool optimizer = false;               // an SGD step after each backward
  // Built-in decoders only: LoRA adapters of this rank on every projection, the base frozen
  // (lora.hpp); 0 = none. What makes layer offloading (set_layer_offload) worth it.
  int64_t lora_rank = 0;
  std::string input_spec{kDefaultInputSpec};  // a TorchScript model's input
  // TorchScript models only: the module path of the container whose children are the blocks that
  // checkpointing (set_checkpoint) runs as regions, e.g. "model.layers" or "transformer.h"; empty
  // = found in the model (samples::find_blocks in torchscript_checkpoint.hpp: the container with
  // the most children of one type). A model whose blocks are not found runs, but refuses any
  // checkpoint policy but none.
  std::string blocks;
};

// Builds the workload on `device`. Throws std::invalid_argument (one line) naming the valid models
// on an unknown name, when a TorchScript file cannot be loaded, on a bad input_spec, on a
// non-default input_spec or a blocks path for a built-in model, on a seq beyond a built-in model's
// maximum, and on a blocks path that a TorchScript model does not have or whose blocks cannot be
// checkpointed (TorchScriptBlocks' refusals).
std::unique_ptr<WorkloadInstance> make_workload(const WorkloadSpec& spec, c10::Device device);

}  // namespace offtune::samples
