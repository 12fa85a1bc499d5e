// A plain MLP (Linear -> GELU, `layers` times, then a `head` Linear) as a torch::nn module: the
// smallest model with an output head that make_offloader_for() finds, for tests and quick
// benchmarks where a transformer would only add noise.
//
// As in the Llama sample, each submodule call runs under an offtune::ModuleRegion, and
// initialisation is deterministic per seed (a private float32 generator, then a cast to the
// config's dtype).
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "offtune/checkpoint.hpp"
#include "offtune/samples/layer_hooks.hpp"

namespace offtune::samples {

struct MlpConfig {
  int64_t in = 64;       // input features
  int64_t hidden = 256;  // width of every hidden layer
  int64_t layers = 2;    // hidden Linear+GELU layers; 0 leaves only the head (in -> out)
  int64_t out = 10;      // head output features
  c10::ScalarType dtype = c10::kFloat;  // kFloat, kBFloat16 or kHalf

  // Throws std::invalid_argument (one line) naming the first bad field.
  void validate() const;
};

class MlpImpl : public torch::nn::Module {
 public:
  // Validates the config and builds the model on the CPU in config.dtype; same config and seed give
  // bit-identical parameters.
  explicit MlpImpl(const MlpConfig& config, uint64_t seed = 0);

  // x: [..., in] in config.dtype. Returns [..., out].
  at::Tensor forward(const at::Tensor& x);

  const MlpConfig& config() const { return config_; }
  // Callbacks around each hidden layer (Linear and its GELU) (layer_hooks.hpp); none by default.
  // The first layer's input is the data, which needs no gradient: it gets no backward range.
  void set_layer_hooks(LayerHooks hooks) { layer_hooks_ = std::move(hooks); }
  const LayerHooks& layer_hooks() const { return layer_hooks_; }
  // Which blocks run as checkpointed regions (offtune/checkpoint.hpp); none by default.
  void set_checkpoint(const CheckpointPolicy& policy) { checkpoint_ = policy; }
  const CheckpointPolicy& checkpoint_policy() const { return checkpoint_; }

  torch::nn::ModuleList layers{nullptr};  // of Linear
  torch::nn::Linear head{nullptr};

 private:
  MlpConfig config_;
  std::vector<torch::nn::Linear> layer_list_;  // typed handles on `layers`
  LayerHooks layer_hooks_;
  CheckpointPolicy checkpoint_;
};
TORCH_MODULE(Mlp);

}  // namespace offtune::samples
