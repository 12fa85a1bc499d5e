#include "workloads.hpp"

#include <ATen/ops/empty.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <optional>
#include <stdexcept>

#include "offtune/model_support.hpp"
#include "offtune/samples/llama.hpp"
#include "offtune/samples/mlp.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune::cli {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class LlamaWorkload final : public profiler::WorkloadInstance {
 public:
  LlamaWorkload(const profiler::Workload& w, c10::Device device) : w_(w), device_(device) {
    auto config = samples::LlamaConfig::preset(w.model);
    config.dtype = samples::parse_dtype(w.dtype);
    if (w.seq > config.max_seq_len) {
      throw std::invalid_argument("--seq " + std::to_string(w.seq) + " exceeds the max_seq_len " +
                                  std::to_string(config.max_seq_len) + " of model " + w.model);
    }
    model_ = samples::Llama(config, w.seed);
    model_->to(device_);
    vocab_ = config.vocab_size;
    if (w.optimizer) {
      optimizer_.emplace(model_->parameters(), torch::optim::SGDOptions(1e-3));
    }
  }
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    return make_offloader_for(*model_, options, /*warn_if_no_head=*/false).offloader;
  }
  void step(ActivationOffloader* offloader, int64_t index, profiler::StepPhases& phases) override {
    const auto batch = samples::make_token_batch(w_.batch, w_.seq, vocab_,
                                                 w_.seed + static_cast<uint64_t>(index), device_);
    model_->zero_grad();
    phases.forward_begin = now_ns();
    at::Tensor loss;
    {
      at::Tensor logits;
      std::optional<OffloadScope> scope;
      if (offloader) scope.emplace(offloader->scope());
      logits = model_(batch.tokens);
      scope.reset();
      loss = samples::lm_loss(logits, batch.targets);
    }
    phases.forward_end = now_ns();
    loss.backward();
    if (optimizer_) optimizer_->step();
    synchronize();
    phases.backward_end = now_ns();
    phases.loss = loss.item<double>();
  }
  void synchronize() override {
    if (device_.is_cuda()) torch::cuda::synchronize();
  }

 private:
  profiler::Workload w_;
  c10::Device device_;
  samples::Llama model_{nullptr};
  int64_t vocab_ = 0;
  std::optional<torch::optim::SGD> optimizer_;
};

class MlpWorkload final : public profiler::WorkloadInstance {
 public:
  MlpWorkload(const profiler::Workload& w, c10::Device device) : w_(w), device_(device) {
    samples::MlpConfig config;
    config.in = 256;
    config.hidden = 1024;
    config.layers = 4;
    config.out = 16;
    config.dtype = samples::parse_dtype(w.dtype);
    model_ = samples::Mlp(config, w.seed);
    model_->to(device_);
  }
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    return make_offloader_for(*model_, options, /*warn_if_no_head=*/false).offloader;
  }
  void step(ActivationOffloader* offloader, int64_t, profiler::StepPhases& phases) override {
    const auto opts = at::TensorOptions().dtype(samples::parse_dtype(w_.dtype)).device(device_);
    const at::Tensor x = at::empty({w_.batch * std::max<int64_t>(w_.seq, 1), 256}, opts).fill_(0.5);
    model_->zero_grad();
    phases.forward_begin = now_ns();
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (offloader) scope.emplace(offloader->scope());
      loss = model_(x).to(at::kFloat).pow(2).mean();
    }
    phases.forward_end = now_ns();
    loss.backward();
    synchronize();
    phases.backward_end = now_ns();
    phases.loss = loss.item<double>();
  }
  void synchronize() override {
    if (device_.is_cuda()) torch::cuda::synchronize();
  }

 private:
  profiler::Workload w_;
  c10::Device device_;
  samples::Mlp model_{nullptr};
};

}  // namespace

std::unique_ptr<profiler::WorkloadInstance> make_builtin_workload(const profiler::Workload& w,
                                                                  c10::Device device) {
  if (w.model == "mlp") return std::make_unique<MlpWorkload>(w, device);
  for (auto name : samples::LlamaConfig::preset_names()) {
    if (w.model == name) return std::make_unique<LlamaWorkload>(w, device);
  }
  std::string valid = "mlp";
  for (auto name : samples::LlamaConfig::preset_names()) valid += ", " + std::string(name);
  throw std::invalid_argument("unknown model '" + w.model + "' (valid: " + valid + ")");
}

}  // namespace offtune::cli
