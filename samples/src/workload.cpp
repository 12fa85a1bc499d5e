#include "offtune/samples/workload.hpp"

#include "offtune/offloader.hpp"

#include <algorithm>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <torch/nn/module.h>

#include <stdexcept>
#include <string>

namespace offtune::samples {

Batch make_token_batch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed,
                       c10::Device device) {
  if (batch <= 0 || seq <= 0 || vocab <= 0) {
    throw std::invalid_argument("make_token_batch: batch, seq and vocab must be > 0, got " +
                                std::to_string(batch) + ", " + std::to_string(seq) + ", " +
                                std::to_string(vocab));
  }
  // Drawn on the CPU whatever the device: CUDA generators give other streams of numbers, and the
  // batch must not depend on where the model runs.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor all = at::randint(vocab, {batch, seq + 1}, gen, at::TensorOptions(c10::kLong));
  Batch out;
  out.tokens = all.narrow(1, 0, seq).contiguous().to(device);
  out.targets = all.narrow(1, 1, seq).contiguous().to(device);
  return out;
}

at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& targets) {
  const int64_t vocab = logits.size(-1);
  return at::cross_entropy_loss(logits.reshape({-1, vocab}).to(c10::kFloat), targets.reshape({-1}));
}

c10::ScalarType parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "float32" || name == "float") return c10::kFloat;
  if (name == "bf16" || name == "bfloat16") return c10::kBFloat16;
  if (name == "fp16" || name == "float16" || name == "half") return c10::kHalf;
  throw std::invalid_argument("unknown dtype '" + std::string(name) +
                              "' (valid: fp32, bf16, fp16)");
}

std::string_view dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat:
      return "fp32";
    case c10::kBFloat16:
      return "bf16";
    case c10::kHalf:
      return "fp16";
    default:
      return c10::toString(dtype);
  }
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const at::Tensor& param : module.parameters()) {
    n += param.numel();
  }
  return n;
}

at::Tensor lm_forward_backward(const std::function<at::Tensor(const at::Tensor&)>& forward,
                               const Batch& batch, ActivationOffloader* offloader) {
  at::Tensor loss;
  {
    at::Tensor logits;
    if (offloader != nullptr) {
      auto scope = offloader->scope();
      logits = forward(batch.tokens);
    } else {
      logits = forward(batch.tokens);
    }
    loss = lm_loss(logits, batch.targets);
  }
  loss.backward();
  return loss.detach();
}

}  // namespace offtune::samples
