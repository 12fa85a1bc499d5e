#include "offtune/samples/lora.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <string>

namespace offtune::samples {

LoraImpl::LoraImpl(int64_t in, int64_t out, int64_t rank, double alpha, c10::ScalarType dtype)
    : scale(alpha / static_cast<double>(rank)) {
  const auto o = at::TensorOptions().dtype(dtype);
  a = register_parameter("a", at::zeros({rank, in}, o));
  b = register_parameter("b", at::zeros({out, rank}, o));
}

at::Tensor LoraImpl::forward(const at::Tensor& x) {
  return at::linear(at::linear(x, a), b) * scale;
}

std::shared_ptr<LoraImpl> make_lora(torch::nn::Module& parent, const std::string& name, int64_t in,
                                    int64_t out, int64_t rank, double alpha,
                                    c10::ScalarType dtype) {
  if (rank <= 0) return nullptr;
  return parent.register_module(name, std::make_shared<LoraImpl>(in, out, rank, alpha, dtype));
}

at::Tensor with_lora(const at::Tensor& y, const std::shared_ptr<LoraImpl>& adapter,
                     const at::Tensor& x) {
  return adapter ? y + adapter->forward(x) : y;
}

void init_lora_and_freeze_base(torch::nn::Module& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  // Its own stream, so that the base weights do not depend on whether adapters exist.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x10ba10ba10ba10baULL);
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto* lora = dynamic_cast<LoraImpl*>(item.value().get());
    if (lora == nullptr) continue;
    at::Tensor values = at::empty(lora->a.sizes(), at::TensorOptions().dtype(c10::kFloat));
    values.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(lora->a.size(0))), gen);
    lora->a.set_data(values.to(lora->a.scalar_type()));
  }
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const bool adapter = name.ends_with("_lora.a") || name.ends_with("_lora.b");
    if (!adapter) item.value().set_requires_grad(false);
  }
}

std::vector<at::Tensor> frozen_parameters(torch::nn::Module& module) {
  std::vector<at::Tensor> out;
  for (const auto& p : module.parameters()) {
    if (!p.requires_grad()) out.push_back(p);
  }
  return out;
}

}  // namespace offtune::samples
