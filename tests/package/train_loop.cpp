// docs/engine.md's training loop ("Use it in a C++ training loop"), compiled against the installed
// package: a small model trained a few steps under an offload scope on host-sim, whose gradients
// must equal those of the same steps without offloading. Exit 0 when they do.
#include <torch/torch.h>

#include <cstdio>
#include <offtune/model_support.hpp>
#include <offtune/version.hpp>
#include <vector>

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(64, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 256));
    head = register_module("head", torch::nn::Linear(256, 8));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return head(torch::gelu(fc2(torch::gelu(fc1(x)))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, head{nullptr};
};
TORCH_MODULE(Net);

// Trains `steps` steps from the same seed and returns the gradients of the last one.
std::vector<torch::Tensor> train(bool offload, int steps) {
  torch::manual_seed(0);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  offtune::OffloadOptions opts;
  opts.backend = offtune::BackendKind::HostSim;  // no GPU needed
  opts.min_offload_size = 1024;
  opts.max_fwd_stash_size = 2;
  auto setup = offtune::make_offloader_for(*model, opts);
  std::vector<torch::Tensor> grads;
  for (int step = 0; step < steps; ++step) {
    const auto x = torch::randn({32, 64});
    const auto y = torch::randn({32, 8});
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      std::optional<offtune::OffloadScope> scope;
      if (offload) scope.emplace(setup.offloader->scope());
      loss = torch::mse_loss(model->forward(x), y);
    }
    loss.backward();
    optimizer.step();
  }
  for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
  const auto stats = setup.offloader->stats();
  std::printf("offload=%d: offloaded %lld tensor(s)\n", offload ? 1 : 0,
              static_cast<long long>(stats.offloaded));
  if (offload && stats.offloaded == 0) grads.clear();  // nothing moved: not the loop we test
  return grads;
}

}  // namespace

int main() {
  std::printf("offtune %s\n", offtune::kVersion.data());
  const auto with = train(true, 3);
  const auto without = train(false, 3);
  if (with.empty() || with.size() != without.size()) {
    std::fprintf(stderr, "FAIL: nothing was offloaded, or the models differ\n");
    return 1;
  }
  for (size_t i = 0; i < with.size(); ++i) {
    if (!torch::equal(with[i], without[i])) {
      std::fprintf(stderr, "FAIL: gradient %zu differs with offloading\n", i);
      return 1;
    }
  }
  std::printf("gradients identical with and without offloading\n");
  return 0;
}
