// Low-rank adapters (LoRA) for the built-in models' projections, and what layer offloading needs
// from a model: with lora_rank > 0 every base parameter is frozen (requires_grad = false) and only
// the adapters train, which is the fine-tune where frozen weights are worth offloading
// (offtune/layer_offload.hpp).
//
// An adapter adds scale * b(a(x)) to its projection's output: a is [rank, in], b is [out, rank] and
// starts at zero, so that the model with adapters computes what the base model does until b moves.
// Adapters are drawn after the base weights, from a generator of their own, so that the base
// weights are the same with and without them.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace offtune {
class LayerOffloader;
}

namespace offtune::samples {

class LoraImpl : public torch::nn::Module {
 public:
  LoraImpl(int64_t in, int64_t out, int64_t rank, double alpha, c10::ScalarType dtype);
  // scale * b(a(x)), to add to the base projection's output.
  at::Tensor forward(const at::Tensor& x);

  at::Tensor a, b;
  double scale;
};

// An adapter for `in` -> `out`, registered on `parent` as `name`, or nullptr when rank is 0.
std::shared_ptr<LoraImpl> make_lora(torch::nn::Module& parent, const std::string& name, int64_t in,
                                    int64_t out, int64_t rank, double alpha, c10::ScalarType dtype);
// y + adapter(x), or y without one.
at::Tensor with_lora(const at::Tensor& y, const std::shared_ptr<LoraImpl>& adapter,
                     const at::Tensor& x);

// Draws every adapter's a ~ N(0, 1 / rank) from a generator seeded from `seed` (b stays zero) and
// freezes every other parameter of `model`. Called by the models once their base weights exist.
void init_lora_and_freeze_base(torch::nn::Module& model, uint64_t seed);

// The parameters of `module` that do not require grad, in registration order: what a model hands
// LayerOffloader::add_block for each block.
std::vector<at::Tensor> frozen_parameters(torch::nn::Module& module);

}  // namespace offtune::samples
