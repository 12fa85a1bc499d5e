// Helper of test_disk_tier's crash test: offloads a forward pass to the disk tier in argv[1], says
// "ready <spilled> <disk bytes>" on stdout once its copies are on disk, and then waits, graph
// alive, for the SIGKILL the test sends it. A process of its own (not a fork of the test) so that
// libtorch's threads start as in any program.
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "offtune/core.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  offtune::OffloadOptions options;
  options.backend = offtune::BackendKind::HostSim;
  options.min_offload_size = 0;
  options.tier = offtune::Tier::Disk;
  options.disk_dir = argv[1];
  options.disk_min_gbps = 0.0;
  offtune::ActivationOffloader offloader(options);
  torch::manual_seed(0);
  auto w = torch::randn({128, 128}, torch::requires_grad());
  at::Tensor loss;
  {
    auto scope = offloader.scope();
    auto h = torch::randn({64, 128});
    for (int i = 0; i < 8; ++i) h = torch::tanh(torch::mm(h, w));
    loss = h.sum();
  }
  offloader.synchronize();  // every copy written: the arena holds the step's activations
  const auto stats = offloader.stats();
  const auto resident = offloader.resident();
  std::printf("ready %lld %lld\n", static_cast<long long>(stats.spilled),
              static_cast<long long>(resident.disk_bytes));
  std::fflush(stdout);
  for (;;) pause();  // mid-step: backward never comes
}
