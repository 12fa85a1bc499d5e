// The pieces gpt.cpp and llama.cpp build their decoders from (internal to samples/): the
// initialisation both draw, the checks both configs make, and the sub-layer pattern both blocks
// repeat. Each decoder keeps in its own file only what makes it that decoder.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/offloader.hpp"
#include "offtune/samples/lora.hpp"

namespace offtune::samples::detail {

// The standard deviation of GPT-2's and Llama's initialisation, and the smaller one of the
// projections that write into the residual stream: scaled down by sqrt(2 * layers) so that the
// stream's variance does not grow with depth.
constexpr double kInitStd = 0.02;
double residual_std(int64_t n_layers);

// Every parameter of `module` gets fresh values from `gen`, in registration order (so the draw
// order is fixed): biases zero, vectors (norm weights) one, matrices and embeddings ~ N(0,
// kInitStd), or N(0, residual_std) for the weights whose names end with one of `residual`. LoRA
// adapters are left to lora.cpp. Values are drawn in float32 and then cast, so that the model in
// bf16 is the float32 model rounded.
void init_parameters(torch::nn::Module& module, at::Generator& gen, double residual_std,
                     c10::ScalarType dtype, std::initializer_list<std::string_view> residual);

// A preset name the decoder does not know: std::invalid_argument naming the valid ones.
[[noreturn]] void unknown_preset(std::string_view decoder, std::string_view name,
                                 const std::vector<std::string_view>& valid);

[[noreturn]] inline void bad_config(std::string_view config, const std::string& what) {
  throw std::invalid_argument(std::string(config) + ": " + what);
}

// The checks every decoder config starts with (vocab_size, dim, n_layers, n_heads), in this order.
template <class Config>
void check_shape(std::string_view name, const Config& c) {
  if (c.vocab_size <= 0) {
    bad_config(name, "vocab_size must be > 0, got " + std::to_string(c.vocab_size));
  }
  if (c.dim <= 0) bad_config(name, "dim must be > 0, got " + std::to_string(c.dim));
  if (c.n_layers < 0) bad_config(name, "n_layers must be >= 0, got " + std::to_string(c.n_layers));
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0) {
    bad_config(name, "n_heads (" + std::to_string(c.n_heads) + ") must be > 0 and divide dim (" +
                         std::to_string(c.dim) + ")");
  }
}

// The checks every decoder config ends with (norm_eps, dtype, lora_rank, lora_alpha).
template <class Config>
void check_numerics(std::string_view name, const Config& c) {
  if (!(c.norm_eps > 0.0)) bad_config(name, "norm_eps must be > 0");
  if (c.dtype != c10::kFloat && c.dtype != c10::kBFloat16 && c.dtype != c10::kHalf) {
    bad_config(name, std::string("dtype must be float32, bfloat16 or float16, got ") +
                         c10::toString(c.dtype));
  }
  if (c.lora_rank < 0) {
    bad_config(name, "lora_rank must be >= 0, got " + std::to_string(c.lora_rank));
  }
  if (c.lora_rank > 0 && !(c.lora_alpha > 0.0)) bad_config(name, "lora_alpha must be > 0");
}

// linear(x) plus its adapter's output, under the projection's ModuleRegion.
inline at::Tensor project(torch::nn::Linear& linear, const std::shared_ptr<LoraImpl>& lora,
                          const at::Tensor& x) {
  ModuleRegion region(linear.get());
  return with_lora(linear(x), lora, x);
}

// A pre-norm sub-layer: x + sublayer(norm(x)), the norm under its ModuleRegion and the sub-layer
// (and the residual add) under its own. `call` runs `sublayer` on the normed input.
template <class Norm, class Sublayer, class Call>
at::Tensor pre_norm_residual(const at::Tensor& x, Norm& norm, Sublayer& sublayer, Call call) {
  at::Tensor normed;
  {
    ModuleRegion region(norm.get());
    normed = norm(x);
  }
  ModuleRegion region(sublayer.get());
  return x + call(normed);
}

// module(x) under the module's ModuleRegion.
template <class Module>
at::Tensor in_region(Module& module, const at::Tensor& x) {
  ModuleRegion region(module.get());
  return module(x);
}

}  // namespace offtune::samples::detail
