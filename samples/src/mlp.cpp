#include "offtune/samples/mlp.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "offtune/offloader.hpp"

namespace offtune::samples {
namespace {

// PyTorch's default Linear distribution, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias,
// but drawn from `gen` in float32 (then cast) so that the result depends on the seed only.
torch::nn::Linear make_linear(int64_t in, int64_t out, at::Generator& gen, c10::ScalarType dtype) {
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out));
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  for (at::Tensor& param : linear->parameters()) {
    at::Tensor values = at::empty(param.sizes(), at::TensorOptions().dtype(c10::kFloat));
    values.uniform_(-bound, bound, gen);
    param.set_data(values.to(dtype));
  }
  return linear;
}

[[noreturn]] void bad_config(const std::string& what) {
  throw std::invalid_argument("MlpConfig: " + what);
}

}  // namespace

void MlpConfig::validate() const {
  if (in <= 0) bad_config("in must be > 0, got " + std::to_string(in));
  if (hidden <= 0) bad_config("hidden must be > 0, got " + std::to_string(hidden));
  if (layers < 0) bad_config("layers must be >= 0, got " + std::to_string(layers));
  if (out <= 0) bad_config("out must be > 0, got " + std::to_string(out));
  if (dtype != c10::kFloat && dtype != c10::kBFloat16 && dtype != c10::kHalf) {
    bad_config(std::string("dtype must be float32, bfloat16 or float16, got ") +
               c10::toString(dtype));
  }
}

MlpImpl::MlpImpl(const MlpConfig& config, uint64_t seed) : config_(config) {
  config_.validate();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  layers = register_module("layers", torch::nn::ModuleList());
  int64_t width = config_.in;
  for (int64_t i = 0; i < config_.layers; ++i) {
    torch::nn::Linear linear = make_linear(width, config_.hidden, gen, config_.dtype);
    layers->push_back(linear);
    layer_list_.push_back(linear);
    width = config_.hidden;
  }
  head = register_module("head", make_linear(width, config_.out, gen, config_.dtype));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  at::Tensor h = x;
  detail::LayerTrace trace(layer_hooks_, static_cast<int64_t>(layer_list_.size()));
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    torch::nn::Linear& linear = layer_list_[i];
    const auto traced = trace.block(static_cast<int64_t>(i), h);
    auto layer = [l = linear.ptr()](const at::Tensor& in) {
      ModuleRegion region(l.get());
      return at::gelu(l->forward(in));
    };
    // Captured by value: the region reruns in backward, after this frame is gone.
    h = checkpoint_.applies(static_cast<int64_t>(i)) ? checkpoint(layer, h) : layer(h);
  }
  trace.finish(h);
  ModuleRegion region(head.get());
  return head(h);
}

}  // namespace offtune::samples
