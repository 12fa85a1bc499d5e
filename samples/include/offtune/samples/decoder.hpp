// What the two sample decoders (gpt.hpp, llama.hpp) share: a stack of blocks run in order, each
// under its ModuleRegion, as a checkpointed region where the policy says so, and with its frozen
// weights brought in by the layer offloader when one is set; the callbacks around each block
// (layer_hooks.hpp). A decoder derives from DecoderBase, hands it its blocks' ModuleList
// (set_blocks) and runs them with run_blocks(); what differs between the decoders (their blocks,
// embeddings, norms) stays in their own files.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "offtune/checkpoint.hpp"
#include "offtune/samples/layer_hooks.hpp"

namespace offtune {
class LayerOffloader;
}  // namespace offtune

namespace offtune::samples {

class DecoderBase : public torch::nn::Module {
 public:
  // Callbacks around each decoder block's forward and backward (layer_hooks.hpp); none by default.
  void set_layer_hooks(LayerHooks hooks) { layer_hooks_ = std::move(hooks); }
  const LayerHooks& layer_hooks() const { return layer_hooks_; }
  // Which blocks run as checkpointed regions (offtune/checkpoint.hpp); none by default.
  void set_checkpoint(const CheckpointPolicy& policy) { checkpoint_ = policy; }
  const CheckpointPolicy& checkpoint_policy() const { return checkpoint_; }
  // Layer offloading (offtune/layer_offload.hpp): registers each block's frozen parameters with
  // `offloader` (if it has no blocks yet) and enters each block through it, in forward and in its
  // checkpoint recompute. nullptr turns it off; destroying the offloader then gives the weights
  // back to the device. Throws std::invalid_argument when `offloader` holds other blocks.
  void set_layer_offload(std::shared_ptr<LayerOffloader> offloader);
  const std::shared_ptr<LayerOffloader>& layer_offload() const { return layer_offload_; }

 protected:
  // `model` names the decoder in error messages ("Gpt", "Llama").
  explicit DecoderBase(std::string model) : model_(std::move(model)) {}

  // The blocks, in the order they run: the derived model's registered ModuleList (this keeps a
  // handle, it registers nothing).
  void set_blocks(torch::nn::ModuleList blocks) { blocks_ = std::move(blocks); }
  // Throws std::invalid_argument (one line) unless `tokens` is int64 [batch, seq] with seq <=
  // max_seq_len.
  void check_tokens(const at::Tensor& tokens, int64_t max_seq_len) const;
  // One block's forward on the previous block's output. Copied into a checkpointed region, which
  // reruns it in backward: it must own (capture by value) whatever it uses besides the block.
  using BlockForward = std::function<at::Tensor(torch::nn::Module& block, const at::Tensor& x)>;
  // x through every block in turn (hooks, regions, checkpointing and layer offloading as set).
  at::Tensor run_blocks(at::Tensor x, const BlockForward& forward) const;

 private:
  std::string model_;
  torch::nn::ModuleList blocks_{nullptr};
  LayerHooks layer_hooks_;
  CheckpointPolicy checkpoint_;
  std::shared_ptr<LayerOffloader> layer_offload_;
};

}  // namespace offtune::samples
