// Seeded property test: random small graphs x random engine configs give bit-identical losses and
// gradients with and without offloading, leave the engine at rest, and break no stream-order rule
// (host-sim's checker), with copies held back at random so that races have room to happen.
//
// 200 cases by default (CI). OFFTUNE_PROPERTY_CASES=N runs N; OFFTUNE_PROPERTY_SEED=S starts at S.
// A failure prints the case's seed and config so it replays alone (OFFTUNE_PROPERTY_CASES=1 and
// OFFTUNE_PROPERTY_SEED=<seed>).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <sstream>

#include "test_support.hpp"

namespace offtune::test {
namespace {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoll(v, nullptr, 10) : fallback;
}

struct Graph {
  int64_t dim = 16;
  at::ScalarType dtype = at::kFloat;
  std::vector<at::Tensor> params;
  at::Tensor input;
  std::vector<int> ops;

  at::Tensor forward() const {
    at::Tensor h = input;
    at::Tensor skip;
    size_t next_param = 0;
    for (int op : ops) {
      switch (op) {
        case 0:
          h = h.matmul(params[next_param++ % params.size()]);
          break;
        case 1:
          h = h.sin();
          break;
        case 2:
          h = h.tanh();
          break;
        case 3:
          h = h * h.sigmoid();
          break;
        case 4:
          h = h.mul(1.0);
          h.relu_();
          break;  // in place on a fresh activation
        case 5:
          h = (h.t() * 1.5).t();
          break;  // non-contiguous result saved downstream
        case 6:
          h = h * h.narrow(1, 0, 1).expand_as(h);
          break;  // stride-0 broadcast saved by mul
        case 7:
          h = torch::layer_norm(h, {dim});
          break;
        case 8:
          h = torch::softmax(h, 1);
          break;
        case 9:
          h = h.clamp(-3, 3).exp();
          break;
        case 10:
          h = torch::cat({h.narrow(1, 0, dim / 2).sin(), h.narrow(1, dim / 2, dim - dim / 2).cos()},
                         1);
          break;  // offset views
        case 11:
          h = h.pow(2) * 0.5;
          break;
        case 12:
          h = torch::gelu(h);
          break;
        case 13:
          if (skip.defined()) h = h + skip.tanh();
          skip = h;
          break;
        case 14:
          h = h.slice(0, 0, h.size(0), 2).repeat({2, 1}).narrow(0, 0, h.size(0));
          break;
        default:
          break;
      }
    }
    return h.to(at::kFloat).pow(2).mean();
  }
};

Graph make_graph(std::mt19937_64& rng) {
  Graph g;
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  g.dim = 2 * pick(4, 24);
  g.dtype = pick(0, 4) == 0 ? at::kBFloat16 : at::kFloat;
  const auto n_params = pick(1, 3);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(rng());
  for (int64_t i = 0; i < n_params; ++i) {
    auto p = at::randn({g.dim, g.dim}, gen, torch::TensorOptions().dtype(at::kFloat)) /
             std::sqrt(static_cast<double>(g.dim));
    g.params.push_back(p.to(g.dtype).detach().requires_grad_(true));
  }
  g.input = at::randn({pick(2, 32), g.dim}, gen, torch::TensorOptions()).to(g.dtype);
  g.ops.push_back(0);  // the loss always depends on a parameter
  const auto n_ops = pick(3, 14);
  for (int64_t i = 0; i < n_ops; ++i) g.ops.push_back(static_cast<int>(pick(0, 14)));
  return g;
}

OffloadOptions make_options(std::mt19937_64& rng, std::string& desc) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.poison_freed = true;
  o.reuse_freed = true;
  o.check_streams = true;
  o.verify = true;  // every copy checked at unpack against pack's checksum: a wrong one is an error
  const int64_t thresholds[] = {0, 64, 1024, 4096};
  o.min_offload_size = thresholds[pick(0, 3)];
  o.max_fwd_stash_size = pick(1, 8);
  o.max_fwd_stash_bytes = pick(0, 3) == 0 ? pick(1, 64) * 1024 : 0;
  o.use_streams = pick(0, 3) != 0;
  o.use_pin_memory = pick(0, 1) == 1;
  o.prefetch = pick(0, 3);
  if (pick(0, 9) == 0) o.link = LinkModel{4.0, 0.0, 20'000};
  // Copies held back so that a missing wait or an early free has room to bite.
  const int64_t delays[] = {0, 0, 20'000, 200'000};
  o.debug_copy_delay_ns = delays[pick(0, 3)];
  std::ostringstream s;
  s << "min_offload_size=" << o.min_offload_size << " window=" << o.max_fwd_stash_size
    << " window_bytes=" << o.max_fwd_stash_bytes << " streams=" << o.use_streams
    << " pinned=" << o.use_pin_memory << " prefetch=" << o.prefetch << " link=" << o.link.enabled()
    << " delay_ns=" << o.debug_copy_delay_ns;
  desc = s.str();
  return o;
}

TEST(Property, RandomGraphsRandomConfigsIdenticalGradients) {
  const int64_t cases = env_int("OFFTUNE_PROPERTY_CASES", 200);
  const int64_t first_seed = env_int("OFFTUNE_PROPERTY_SEED", 1000);
  int64_t offloaded_cases = 0, verified_cases = 0;
  for (int64_t c = 0; c < cases; ++c) {
    const auto seed = static_cast<uint64_t>(first_seed + c);
    std::mt19937_64 rng(seed);
    Graph g = make_graph(rng);
    std::string desc;
    ActivationOffloader off(make_options(rng, desc));
    std::ostringstream ops;
    for (int op : g.ops) ops << op << ' ';
    SCOPED_TRACE("seed=" + std::to_string(seed) + " dim=" + std::to_string(g.dim) + " dtype=" +
                 std::string(c10::toString(g.dtype)) + " ops=[" + ops.str() + "] " + desc);
    expect_identical_step([&] { return g.forward(); }, g.params, off);
    offloaded_cases += off.stats().offloaded > 0;
    verified_cases += off.stats().verified > 0;
    if (HasFailure()) break;  // one reproducible failure is enough
  }
  // The generator must actually exercise offloading, not pass vacuously.
  EXPECT_GT(offloaded_cases, cases / 2);
  EXPECT_GT(verified_cases, cases / 2) << "verify checked no copy";
}

}  // namespace
}  // namespace offtune::test
