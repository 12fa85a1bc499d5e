#include "offtune/samples/decoder.hpp"

#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "decoder_parts.hpp"
#include "offtune/layer_offload.hpp"
#include "offtune/offloader.hpp"
#include "offtune/samples/lora.hpp"

namespace offtune::samples {

// ---- DecoderBase -------------------------------------------------------------------------------

void DecoderBase::set_layer_offload(std::shared_ptr<LayerOffloader> offloader) {
  const size_t blocks = blocks_ ? blocks_->size() : 0;
  if (offloader && offloader->blocks() == 0) {
    for (size_t i = 0; i < blocks; ++i) offloader->add_block(frozen_parameters(*blocks_->ptr(i)));
  } else if (offloader && offloader->blocks() != static_cast<int64_t>(blocks)) {
    throw std::invalid_argument(model_ + "::set_layer_offload: the layer offloader holds " +
                                std::to_string(offloader->blocks()) + " blocks, the model has " +
                                std::to_string(blocks));
  }
  layer_offload_ = std::move(offloader);
}

void DecoderBase::check_tokens(const at::Tensor& tokens, int64_t max_seq_len) const {
  if (tokens.dim() != 2 || tokens.scalar_type() != c10::kLong) {
    throw std::invalid_argument(model_ + "::forward: tokens must be int64 [batch, seq], got " +
                                std::string(c10::toString(tokens.scalar_type())) + " with " +
                                std::to_string(tokens.dim()) + " dims");
  }
  const int64_t t = tokens.size(1);
  if (t > max_seq_len) {
    throw std::invalid_argument(model_ + "::forward: sequence length " + std::to_string(t) +
                                " exceeds max_seq_len " + std::to_string(max_seq_len));
  }
}

at::Tensor DecoderBase::run_blocks(at::Tensor x, const BlockForward& forward) const {
  const auto n = static_cast<int64_t>(blocks_ ? blocks_->size() : 0);
  detail::LayerTrace trace(layer_hooks_, n);
  for (int64_t index = 0; index < n; ++index) {
    std::shared_ptr<torch::nn::Module> block = blocks_->ptr(static_cast<size_t>(index));
    ModuleRegion region(block.get());
    const auto traced = trace.block(index, x);
    // Captured by value: a checkpointed region reruns in backward, after this frame is gone. The
    // layer offloader is entered inside, so that the recompute brings the block's weights back.
    auto run = [block, layers = layer_offload_, index, forward](const at::Tensor& in) {
      std::optional<LayerOffloader::Resident> resident;
      if (layers) resident.emplace(layers->block(index));
      return forward(*block, in);
    };
    x = checkpoint_.applies(index) ? checkpoint(run, x) : run(x);
  }
  trace.finish(x);
  return x;
}

// ---- the decoders' shared parts ----------------------------------------------------------------

namespace detail {

double residual_std(int64_t n_layers) {
  const auto depth = static_cast<double>(std::max<int64_t>(n_layers, 1));
  return kInitStd / std::sqrt(2.0 * depth);
}

void init_parameters(torch::nn::Module& module, at::Generator& gen, double residual_std,
                     c10::ScalarType dtype, std::initializer_list<std::string_view> residual) {
  torch::NoGradGuard no_grad;
  const auto f32 = at::TensorOptions().dtype(c10::kFloat);
  for (auto& item : module.named_parameters()) {
    at::Tensor& param = item.value();
    const std::string& name = item.key();
    if (name.find("_lora.") != std::string::npos) continue;  // lora.cpp draws adapters
    at::Tensor values;
    if (name.ends_with("bias")) {
      values = at::zeros(param.sizes(), f32);
    } else if (param.dim() == 1) {
      values = at::ones(param.sizes(), f32);
    } else {
      const bool scaled = std::any_of(residual.begin(), residual.end(),
                                      [&](std::string_view r) { return name.ends_with(r); });
      values = at::empty(param.sizes(), f32);
      values.normal_(0.0, scaled ? residual_std : kInitStd, gen);
    }
    // set_data keeps the parameter's identity (the module's registry and member share it).
    param.set_data(values.to(dtype));
  }
}

void unknown_preset(std::string_view decoder, std::string_view name,
                    const std::vector<std::string_view>& valid) {
  std::string names;
  for (std::string_view n : valid) {
    names += names.empty() ? "" : ", ";
    names += n;
  }
  throw std::invalid_argument("unknown " + std::string(decoder) + " preset '" + std::string(name) +
                              "' (valid: " + names + ")");
}

}  // namespace detail

}  // namespace offtune::samples
