// Gradient checkpointing (offtune/checkpoint.hpp): bit-identical loss and gradients to the same
// model without it, alone and with offloading (all saved tensors, or the boundaries only, on one
// stream or a side stream); dropout recomputed under the forward's RNG and autocast state;
// nested regions, no-offload regions inside one; retain_graph, gradient accumulation, partial
// backwards and exceptions; the recompute checked against the forward; and the peak device memory
// it is for, measured on host-sim.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include <optional>

#include "offtune/host_sim.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

using ::testing::HasSubstr;

// A residual MLP block with dropout: x + fc2(dropout(gelu(fc1(x)))).
struct Block {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  double dropout = 0.0;

  Block(int64_t dim, int64_t hidden, double p) : fc1(dim, hidden), fc2(hidden, dim), dropout(p) {}
  at::Tensor operator()(const at::Tensor& x) const {
    at::Tensor h = torch::gelu(torch::linear(x, fc1->weight, fc1->bias));
    h = torch::dropout(h, dropout, /*train=*/true);
    return x + torch::linear(h, fc2->weight, fc2->bias);
  }
};

struct Net {
  std::vector<Block> blocks;
  std::vector<at::Tensor> params;

  Net(int64_t n, int64_t dim, int64_t hidden, double p, uint64_t seed = 7) {
    torch::manual_seed(seed);
    for (int64_t i = 0; i < n; ++i) {
      blocks.emplace_back(dim, hidden, p);
      for (auto& t : blocks.back().fc1->parameters()) params.push_back(t);
      for (auto& t : blocks.back().fc2->parameters()) params.push_back(t);
    }
  }
  // The forward under `policy`; blocks are captured by value (their modules are shared handles).
  at::Tensor forward(at::Tensor x, const CheckpointPolicy& policy,
                     const CheckpointOptions& options = {}) const {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const Block& b = blocks[i];
      if (policy.applies(static_cast<int64_t>(i))) {
        x = checkpoint([b](const at::Tensor& in) { return b(in); }, x, options);
      } else {
        x = b(x);
      }
    }
    return x;
  }
};

// Loss and gradients of one step: the RNG seeded the same way before each, so dropout draws the
// same masks in every variant.
std::vector<at::Tensor> run_step(const Net& net, const at::Tensor& input,
                                 const CheckpointPolicy& policy, ActivationOffloader* off) {
  torch::manual_seed(1234);
  return step([&] { return net.forward(input, policy).pow(2).mean(); }, net.params, off);
}

void expect_identical(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << (i == 0 ? "loss" : "gradient " + std::to_string(i));
  }
}

TEST(Checkpoint, GradientsAreBitIdenticalForEveryPolicyWithDropout) {
  Net net(4, 32, 64, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({16, 32});
  const auto reference = run_step(net, input, CheckpointPolicy::none(), nullptr);
  for (const auto& policy : {CheckpointPolicy::all(), CheckpointPolicy::every_k(2)}) {
    SCOPED_TRACE(to_string(policy));
    expect_identical(run_step(net, input, policy, nullptr), reference);
  }
}

TEST(Checkpoint, DropoutWithoutTheForwardsRngStateGivesOtherGradients) {
  // The RNG state is what makes the recompute draw the forward's mask: without it (and with the
  // RNG moved on since the forward), the gradients differ. Shows the restore is not a no-op.
  Net net(2, 32, 64, /*dropout=*/0.5);
  const at::Tensor input = torch::randn({16, 32});
  const auto reference = run_step(net, input, CheckpointPolicy::none(), nullptr);
  CheckpointOptions no_rng;
  no_rng.preserve_rng_state = false;
  torch::manual_seed(1234);
  at::Tensor x = input;
  for (const Block& b : net.blocks) {
    x = checkpoint([b](const at::Tensor& in) { return b(in); }, x, no_rng);
  }
  const at::Tensor loss = x.pow(2).mean();
  (void)torch::rand({1});  // the RNG moves on before backward
  loss.backward();
  const auto grads = take_grads(net.params);
  EXPECT_TRUE(bitwise_equal(loss.detach(), reference[0]));  // the forward is the same
  EXPECT_FALSE(bitwise_equal(grads[0], reference[1]));      // the recompute is not
}

TEST(Checkpoint, RecomputeLeavesTheCallersRngStreamAlone) {
  Net net(2, 16, 32, /*dropout=*/0.5);
  const at::Tensor input = torch::randn({8, 16});
  auto after_step = [&](const CheckpointPolicy& policy) {
    run_step(net, input, policy, nullptr);
    return torch::rand({4});  // the next draw after the step
  };
  EXPECT_TRUE(
      bitwise_equal(after_step(CheckpointPolicy::all()), after_step(CheckpointPolicy::none())));
}

TEST(Checkpoint, RetainGraphRecomputesForEachBackward) {
  Net net(3, 16, 32, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({8, 16});
  auto twice = [&](const CheckpointPolicy& policy) {
    torch::manual_seed(99);
    const at::Tensor loss = net.forward(input, policy).pow(2).mean();
    loss.backward({}, /*retain_graph=*/true);
    loss.backward();
    return take_grads(net.params);
  };
  expect_identical(twice(CheckpointPolicy::all()), twice(CheckpointPolicy::none()));
}

TEST(Checkpoint, GradientAccumulationOverSeveralForwards) {
  Net net(3, 16, 32, /*dropout=*/0.25);
  const at::Tensor a = torch::randn({8, 16}), b = torch::randn({8, 16});
  auto accumulate = [&](const CheckpointPolicy& policy) {
    torch::manual_seed(5);
    const at::Tensor la = net.forward(a, policy).pow(2).mean();
    const at::Tensor lb = net.forward(b, policy).pow(2).mean();  // two graphs alive at once
    lb.backward();
    la.backward();
    return take_grads(net.params);
  };
  expect_identical(accumulate(CheckpointPolicy::every_k(2)), accumulate(CheckpointPolicy::none()));
}

TEST(Checkpoint, InputGradientFlowsThroughTheRegion) {
  Net net(2, 16, 32, 0.0);
  auto input_grad = [&](const CheckpointPolicy& policy) {
    torch::manual_seed(3);
    at::Tensor x = torch::randn({4, 16}).requires_grad_(true);
    net.forward(x * 2, policy).sum().backward();
    take_grads(net.params);
    return x.grad().clone();
  };
  EXPECT_TRUE(
      bitwise_equal(input_grad(CheckpointPolicy::all()), input_grad(CheckpointPolicy::none())));
}

TEST(Checkpoint, SeveralInputsAndOutputsAndAnUndefinedOne) {
  auto w = torch::randn({8, 8}, torch::requires_grad());
  const at::Tensor a0 = torch::randn({4, 8}), b0 = torch::randn({4, 8});
  auto body = [w](const std::vector<at::Tensor>& in) {
    EXPECT_FALSE(in[2].defined());
    at::Tensor h = in[0].matmul(w).tanh();
    return std::vector<at::Tensor>{h * in[1].sigmoid(), h.sin()};
  };
  auto grads = [&](bool ckpt) {
    at::Tensor a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    std::vector<at::Tensor> in{a * 1, b * 1, at::Tensor()};
    auto out = ckpt ? checkpoint(body, in) : body(in);
    (out[0].sum() + out[1].pow(2).sum()).backward();
    std::vector<at::Tensor> g{a.grad().clone(), b.grad().clone(), w.grad().clone()};
    w.mutable_grad().reset();
    return g;
  };
  expect_identical(grads(true), grads(false));
}

// Double backward (create_graph) through a checkpointed region: the recomputed saved tensors are
// wired to the forward's graph as autograd wires any unpacked saved tensor.
TEST(Checkpoint, SecondOrderGradientsMatch) {
  auto w = torch::randn({8, 8}, torch::requires_grad());
  const at::Tensor x0 = torch::randn({4, 8});
  auto grad_of_grad = [&](bool ckpt) {
    at::Tensor x = x0.clone().requires_grad_(true);
    auto body = [w](const at::Tensor& in) { return in.matmul(w).tanh().pow(2); };
    const at::Tensor y = (ckpt ? checkpoint(body, x) : body(x)).sum();
    const auto gx = torch::autograd::grad({y}, {x}, {}, /*retain_graph=*/true,
                                          /*create_graph=*/true)[0];
    const auto g2 = torch::autograd::grad({gx.pow(2).sum()}, {x, w});
    return std::vector<at::Tensor>{gx.detach(), g2[0], g2[1]};
  };
  expect_identical(grad_of_grad(true), grad_of_grad(false));
}

TEST(Checkpoint, NoGradModeIsAPlainCall) {
  Net net(2, 16, 32, 0.0);
  at::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({4, 16});
  EXPECT_TRUE(bitwise_equal(net.forward(x, CheckpointPolicy::all()),
                            net.forward(x, CheckpointPolicy::none())));
}

TEST(Checkpoint, AnExceptionInTheForwardLeavesNoFrameBehind) {
  ActivationOffloader off(host_sim_options(0));
  Net net(2, 16, 32, 0.0);
  const at::Tensor input = torch::randn({8, 16});
  {
    auto scope = off.scope();
    EXPECT_THROW(checkpoint(
                     [](const at::Tensor& x) -> at::Tensor {
                       (void)x.sin();
                       throw std::runtime_error("boom");
                     },
                     input * 1),
                 std::runtime_error);
    EXPECT_TRUE(offloading_active()) << "the region's frame was not popped";
  }
  EXPECT_FALSE(offloading_active());
  expect_identical(run_step(net, input, CheckpointPolicy::all(), &off),
                   run_step(net, input, CheckpointPolicy::none(), nullptr));
}

TEST(Checkpoint, AnExceptionInTheRecomputeFailsThatBackwardOnlyAndTheNextStepWorks) {
  ActivationOffloader off(host_sim_options(0));
  auto w = torch::randn({16, 16}, torch::requires_grad());
  int calls = 0;
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = checkpoint(
               [w, &calls](const at::Tensor& x) {
                 if (++calls == 2) throw std::runtime_error("recompute failed");
                 return x.matmul(w).tanh();
               },
               torch::randn({8, 16}) * 1)
               .sum();
  }
  try {
    loss.backward();
    ADD_FAILURE() << "backward did not fail";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("recompute failed"));
  }
  loss = at::Tensor();
  w.mutable_grad().reset();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
  EXPECT_FALSE(offloading_active());
  Net net(2, 16, 32, 0.25);
  const at::Tensor input = torch::randn({8, 16});
  expect_identical(run_step(net, input, CheckpointPolicy::all(), &off),
                   run_step(net, input, CheckpointPolicy::none(), nullptr));
}

TEST(Checkpoint, ARecomputeThatSavesOtherTensorsIsAnError) {
  auto w = torch::randn({8, 8}, torch::requires_grad());
  int calls = 0;
  const at::Tensor loss = checkpoint(
                              [w, &calls](const at::Tensor& x) {
                                at::Tensor h = x.matmul(w);
                                if (++calls == 2)
                                  h = h.sin();  // the recompute saves one tensor more
                                return h.tanh();
                              },
                              torch::randn({4, 8}))
                              .sum();
  try {
    loss.backward();
    ADD_FAILURE() << "backward did not fail";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), HasSubstr("the recompute saved"));
  }
}

TEST(Checkpoint, AnInputModifiedInPlaceAfterTheForwardIsAutogradsError) {
  for (const bool offload : {false, true}) {
    SCOPED_TRACE(offload ? "boundary offloaded" : "boundary kept");
    ActivationOffloader off(host_sim_options(0));
    auto w = torch::randn({8, 8}, torch::requires_grad());
    at::Tensor h = torch::randn({4, 8}).requires_grad_(true) * 2;
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (offload) scope.emplace(off.scope());
      loss = checkpoint([w](const at::Tensor& x) { return x.matmul(w).tanh(); }, h).sum();
    }
    {
      at::NoGradGuard no_grad;
      h.add_(1);  // the region would recompute from the changed input
    }
    try {
      loss.backward();
      ADD_FAILURE() << "backward did not fail";
    } catch (const c10::Error& e) {
      EXPECT_THAT(e.what_without_backtrace(), HasSubstr("modified by an inplace operation"));
    }
  }
}

// A NoOffloadRegion turns offloading off, not checkpointing: the ops it wraps inside a
// checkpointed function are recomputed like the others, and keep nothing from forward to backward.
TEST(Checkpoint, ANoOffloadRegionInsideTheFunctionKeepsItCheckpointed) {
  host_sim::install();  // device bytes counted
  Net net(3, 32, 128, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({64, 32});
  const auto reference = run_step(net, input, CheckpointPolicy::none(), nullptr);
  auto forward = [&](bool no_offload_inside) {
    at::Tensor x = input;
    for (const Block& b : net.blocks) {
      x = checkpoint(
          [b, no_offload_inside](const at::Tensor& in) {
            std::optional<NoOffloadRegion> region;
            if (no_offload_inside) region.emplace();
            return b(in);
          },
          x);
    }
    return x.pow(2).mean();
  };
  // What a forward keeps until backward: the blocks' inputs only, with or without the region.
  auto kept_by_forward = [&](bool no_offload_inside) {
    torch::manual_seed(1234);
    const int64_t before = host_sim::counters().allocated;
    at::Tensor loss = forward(no_offload_inside);
    const int64_t kept = host_sim::counters().allocated - before;
    loss.backward();
    return std::make_pair(kept, take_grads(net.params));
  };
  const auto [kept_plain, grads_plain] = kept_by_forward(false);
  const auto [kept_region, grads_region] = kept_by_forward(true);
  EXPECT_EQ(kept_region, kept_plain) << "the region's ops kept their saved tensors";
  for (const bool offload : {false, true}) {
    SCOPED_TRACE(offload ? "under an offload scope" : "no offloader");
    ActivationOffloader off(host_sim_options(0));
    torch::manual_seed(1234);
    expect_identical(step([&] { return forward(true); }, net.params, offload ? &off : nullptr),
                     reference);
  }
}

// ---- nested regions ----------------------------------------------------------------------------

// The forward of `net` in regions of `per_region` blocks each, every block of them a region of its
// own when `nested` (else a plain call inside the outer region).
at::Tensor nested_forward(const Net& net, const at::Tensor& input, size_t per_region, bool nested) {
  at::Tensor x = input;
  for (size_t first = 0; first < net.blocks.size(); first += per_region) {
    const std::vector<Block> group(
        net.blocks.begin() + static_cast<std::ptrdiff_t>(first),
        net.blocks.begin() +
            static_cast<std::ptrdiff_t>(std::min(first + per_region, net.blocks.size())));
    x = checkpoint(
        [group, nested](const at::Tensor& in) {  // the blocks by value
          at::Tensor h = in;
          for (const Block& b : group) {
            h = nested ? checkpoint([b](const at::Tensor& y) { return b(y); }, h) : b(h);
          }
          return h;
        },
        x);
  }
  return x.pow(2).mean();
}

TEST(Checkpoint, NestedRegionsGiveBitIdenticalGradients) {
  Net net(4, 32, 64, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({16, 32});
  const auto reference = run_step(net, input, CheckpointPolicy::none(), nullptr);
  for (const bool offload : {false, true}) {
    SCOPED_TRACE(offload ? "under an offload scope" : "no offloader");
    ActivationOffloader off(host_sim_options(0, /*window=*/1));
    for (const bool nested : {false, true}) {
      torch::manual_seed(1234);
      expect_identical(step([&] { return nested_forward(net, input, 2, nested); }, net.params,
                            offload ? &off : nullptr),
                       reference);
    }
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
}

// ---- autocast ----------------------------------------------------------------------------------

// Python's `with torch.autocast(device_type, dtype=...)`: enabled (or disabled) with `dtype` until
// it ends; the cast cache is cleared when the outermost one ends.
class Autocast {
 public:
  Autocast(c10::DeviceType type, at::ScalarType dtype, bool enabled = true)
      : type_(type),
        was_enabled_(at::autocast::is_autocast_enabled(type)),
        was_dtype_(at::autocast::get_autocast_dtype(type)) {
    at::autocast::set_autocast_enabled(type, enabled);
    at::autocast::set_autocast_dtype(type, dtype);
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  c10::DeviceType type_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// The recompute runs under the autocast state of the forward (torch.utils.checkpoint does the
// same), not under the one where backward is called: forward under CPU autocast to bf16 and
// backward outside it, and the other way round. Gradients are plain autograd's under the same
// autocast, checkpointed alone or with offloading, with and without the recompute check.
TEST(CheckpointAutocast, RecomputeRunsUnderTheForwardsAutocastState) {
  Net net(3, 32, 64, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({8, 32});
  auto run = [&](bool autocast_forward, const CheckpointPolicy& policy,
                 const CheckpointOptions& options, ActivationOffloader* off) {
    torch::manual_seed(1234);
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (off != nullptr) scope.emplace(off->scope());
      std::optional<Autocast> autocast;
      if (autocast_forward) autocast.emplace(c10::kCPU, at::kBFloat16);
      loss = net.forward(input, policy, options).to(at::kFloat).pow(2).mean();
    }
    {
      std::optional<Autocast> autocast;
      if (!autocast_forward) autocast.emplace(c10::kCPU, at::kBFloat16);
      loss.backward();
    }
    std::vector<at::Tensor> out{loss.detach()};
    for (auto& g : take_grads(net.params)) out.push_back(std::move(g));
    return out;
  };
  for (const bool autocast_forward : {true, false}) {
    SCOPED_TRACE(autocast_forward ? "forward under autocast" : "backward under autocast");
    const auto reference = run(autocast_forward, CheckpointPolicy::none(), {}, nullptr);
    for (const bool check : {true, false}) {
      for (const bool offload : {false, true}) {
        SCOPED_TRACE(std::string(check ? "checked" : "unchecked") + (offload ? ", offloaded" : ""));
        CheckpointOptions options;
        options.check_recompute = check;
        OffloadOptions o = host_sim_options(0, /*window=*/1);
        ActivationOffloader off(o);
        ActivationOffloader* offloader = offload ? &off : nullptr;
        try {
          expect_identical(run(autocast_forward, CheckpointPolicy::all(), options, offloader),
                           reference);
          expect_identical(run(autocast_forward, CheckpointPolicy::every_k(2), options, offloader),
                           reference);
        } catch (const c10::Error& e) {
          ADD_FAILURE() << e.what_without_backtrace();
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
        // Offloading alone under autocast.
        if (offload) {
          expect_identical(run(autocast_forward, CheckpointPolicy::none(), options, offloader),
                           reference);
        }
        off.synchronize();
        EXPECT_TRUE(off.resident().resting());
      }
    }
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
}

// What the function sees in the recompute is the forward's autocast state on every device type
// (enabled, dtype) and its cast-cache switch; the caller's state is back when backward returns.
TEST(CheckpointAutocast, TheRecomputeSeesTheForwardsStateOnEveryDeviceTypeAndRestoresTheCallers) {
  struct Seen {
    bool cpu = false, cuda = false, xpu = false, cache = false;
    at::ScalarType cpu_dtype = at::kFloat, cuda_dtype = at::kFloat;
  };
  std::vector<Seen> seen;
  auto w = torch::randn({16, 16}, torch::requires_grad());
  auto body = [w, &seen](const at::Tensor& x) {
    seen.push_back({at::autocast::is_autocast_enabled(c10::kCPU),
                    at::autocast::is_autocast_enabled(c10::kCUDA),
                    at::autocast::is_autocast_enabled(c10::kXPU),
                    at::autocast::is_autocast_cache_enabled(),
                    at::autocast::get_autocast_dtype(c10::kCPU),
                    at::autocast::get_autocast_dtype(c10::kCUDA)});
    return x.matmul(w).tanh();
  };
  at::Tensor loss;
  {
    // CUDA's and XPU's autocast are thread-local switches: set here without a GPU.
    Autocast cpu(c10::kCPU, at::kBFloat16);
    Autocast cuda(c10::kCUDA, at::kHalf);
    Autocast xpu(c10::kXPU, at::kBFloat16);
    at::autocast::set_autocast_cache_enabled(false);
    loss = checkpoint(body, torch::randn({4, 16})).to(at::kFloat).sum();
    at::autocast::set_autocast_cache_enabled(true);
  }
  {
    Autocast cpu(c10::kCPU, at::kHalf, /*enabled=*/false);
    loss.backward();
    EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(c10::kCPU), at::kHalf);
    EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCUDA));
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kXPU));
  ASSERT_EQ(seen.size(), 2u);
  for (const Seen& s : seen) {
    EXPECT_TRUE(s.cpu);
    EXPECT_TRUE(s.cuda);
    EXPECT_TRUE(s.xpu);
    EXPECT_FALSE(s.cache);
    EXPECT_EQ(s.cpu_dtype, at::kBFloat16);
    EXPECT_EQ(s.cuda_dtype, at::kHalf);
  }
}

// ---- with offloading -------------------------------------------------------------------------

TEST(CheckpointOffload, EveryVariantGivesBitIdenticalGradients) {
  Net net(4, 32, 64, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({16, 32});
  const auto reference = run_step(net, input, CheckpointPolicy::none(), nullptr);
  for (const auto set : {OffloadSet::All, OffloadSet::Boundaries}) {
    for (const bool streams : {true, false}) {  // false: Axolotl's "legacy"
      for (const auto& policy :
           {CheckpointPolicy::all(), CheckpointPolicy::every_k(2), CheckpointPolicy::none()}) {
        SCOPED_TRACE(std::string(to_string(set)) + (streams ? " streams " : " single-stream ") +
                     to_string(policy));
        OffloadOptions o = host_sim_options(0, /*window=*/1);
        o.offload = set;
        o.use_streams = streams;
        o.debug_copy_delay_ns = 200'000;  // room for a missing wait to show
        ActivationOffloader off(o);
        for (int s = 0; s < 2; ++s) expect_identical(run_step(net, input, policy, &off), reference);
        off.synchronize();
        EXPECT_TRUE(off.resident().resting());
        expect_no_stream_races();
      }
    }
  }
}

// The disk tier under checkpointing: boundaries (or everything) written to the arena file and read
// back ahead of the recompute, bit-identical; auto spills beyond a budget of two boundaries.
TEST(CheckpointOffload, DiskTierGivesBitIdenticalGradients) {
  Net net(4, 32, 64, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({16, 32});
  const auto reference = run_step(net, input, CheckpointPolicy::none(), nullptr);
  for (const auto tier : {Tier::Disk, Tier::Auto}) {
    for (const auto set : {OffloadSet::All, OffloadSet::Boundaries}) {
      SCOPED_TRACE(std::string(to_string(tier)) + " " + std::string(to_string(set)));
      OffloadOptions o = host_sim_options(0, /*window=*/1);
      o.offload = set;
      o.tier = tier;
      o.host_budget_bytes = tier == Tier::Auto ? 2 * 16 * 32 * 4 : 0;
      o.disk_min_gbps = 0.0;  // no bandwidth measurement (the disk tier's tests have their own)
      ActivationOffloader off(o);
      // Written before backward (a write that backward overtakes is dropped: then nothing would
      // be read back, and the counts below would depend on the machine's load).
      for (int s = 0; s < 2; ++s) {
        torch::manual_seed(1234);
        expect_identical(
            step([&] { return net.forward(input, CheckpointPolicy::all()).pow(2).mean(); },
                 net.params, &off, /*sync_before_backward=*/true),
            reference);
      }
      // And racing backward.
      expect_identical(run_step(net, input, CheckpointPolicy::all(), &off), reference);
      EXPECT_GT(off.stats().spilled, 0);
      EXPECT_GT(off.stats().disk_read_bytes, 0);
      off.synchronize();
      EXPECT_TRUE(off.resident().resting());
    }
  }
}

TEST(CheckpointOffload, OnlyTheBoundariesAreOffloadedAndTheRecomputeSavesNothingThere) {
  Net net(4, 32, 64, 0.0);
  const at::Tensor input = torch::randn({16, 32});
  for (const auto set : {OffloadSet::All, OffloadSet::Boundaries}) {
    SCOPED_TRACE(to_string(set));
    OffloadOptions o = host_sim_options(0);
    o.offload = set;
    ActivationOffloader off(o);
    auto obs = std::make_shared<RecordingObserver>();
    off.set_observer(obs);
    run_step(net, input, CheckpointPolicy::all(), &off);
    // Everything the step saved under the scope: the four boundaries, then what the loss saves
    // outside every region (pow's input; mean saves nothing), offloaded only under OffloadSet::All.
    const OffloadStats s = off.stats();
    EXPECT_EQ(s.packed, 5);
    EXPECT_EQ(s.offloaded, set == OffloadSet::All ? 5 : 4);
    EXPECT_EQ(obs->count(PackDecision::Kept), set == OffloadSet::All ? 0 : 1);
    EXPECT_EQ(s.reloaded + s.from_fwd_stash, s.offloaded);
  }
}

TEST(CheckpointOffload, OffloadBoundariesWithoutCheckpointingKeepsEverything) {
  Net net(2, 16, 32, 0.0);
  OffloadOptions o = host_sim_options(0);
  o.offload = OffloadSet::Boundaries;
  ActivationOffloader off(o);
  const at::Tensor input = torch::randn({8, 16});
  expect_identical(run_step(net, input, CheckpointPolicy::none(), &off),
                   run_step(net, input, CheckpointPolicy::none(), nullptr));
  EXPECT_GT(off.stats().packed, 0);
  EXPECT_EQ(off.stats().offloaded, 0);
  EXPECT_EQ(off.stats().kept, off.stats().packed);
}

// The reference suite's case: an offloaded activation whose view is a checkpointed region's input,
// and whose recompute saves views of the reloaded buffer (the checkpoint caches them until their
// node runs). The reload buffer must outlive those views: with freed memory poisoned and reused at
// once, an early free would show as NaNs or another tensor's values.
TEST(CheckpointOffload, ViewsOfAReloadedActivationCachedByTheRecompute) {
  torch::manual_seed(11);
  auto w1 = torch::randn({32, 64}, torch::requires_grad());
  auto w2 = torch::randn({16, 16}, torch::requires_grad());
  const at::Tensor input = torch::randn({8, 32});
  auto forward = [&](bool ckpt) {
    at::Tensor a = input.matmul(w1);   // [8, 64]
    at::Tensor outside = a.sigmoid();  // saves its output, on a's... own storage
    at::Tensor kept_alive = a.cos();   // cos saves a: the same storage as the boundary below
    at::Tensor v = a.view({32, 16});   // the region's input: a view of the activation
    auto body = [w2](const at::Tensor& x) {
      at::Tensor t = x.t();        // a view of the reloaded boundary...
      at::Tensor y = t.matmul(x);  // ...saved by mm (as is x)
      return y.matmul(w2).tanh() + x.narrow(0, 0, 16).sum();
    };
    at::Tensor r = ckpt ? checkpoint(body, v) : body(v);
    return r.sum() + outside.sum() + kept_alive.sum();
  };
  const auto reference = step([&] { return forward(false); }, {w1, w2}, nullptr);
  for (const auto set : {OffloadSet::All, OffloadSet::Boundaries}) {
    for (const int64_t window : {int64_t{1}, int64_t{4}}) {
      SCOPED_TRACE(std::string(to_string(set)) + " window " + std::to_string(window));
      OffloadOptions o = host_sim_options(0, window);
      o.offload = set;
      o.debug_copy_delay_ns = 500'000;
      ActivationOffloader off(o);
      expect_identical(step([&] { return forward(true); }, {w1, w2}, &off), reference);
      off.synchronize();
      EXPECT_TRUE(off.resident().resting());
      expect_no_stream_races();
    }
  }
}

// ---- peak device memory (host-sim's accounting allocator) ------------------------------------

// Peak bytes above what was allocated before the step, over forward and backward. Gradients are
// allocated by a first step and zeroed in place, so that they count in neither.
int64_t step_peak(const std::function<at::Tensor()>& forward, const std::vector<at::Tensor>& params,
                  ActivationOffloader& off, bool offload) {
  auto one = [&] {
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (offload) scope.emplace(off.scope());
      loss = forward();
    }
    loss.backward();
    loss = at::Tensor();
    off.synchronize();
    for (auto& p : params) p.mutable_grad().zero_();
  };
  one();  // gradients exist from here on
  const int64_t before = off.device_memory().allocated;
  off.reset_peak_device_memory();
  one();
  return off.device_memory().peak_allocated - before;
}

int64_t step_peak(const Net& net, const at::Tensor& input, const CheckpointPolicy& policy,
                  ActivationOffloader& off, bool offload) {
  return step_peak([&] { return net.forward(input, policy).pow(2).mean(); }, net.params, off,
                   offload);
}

TEST(CheckpointMemory, PeakIsAboutTheBoundariesPlusOneBlockAndOffloadingLowersIt) {
  constexpr int64_t kBlocks = 8, kRows = 256, kDim = 64, kHidden = 256;
  Net net(kBlocks, kDim, kHidden, 0.0);
  Net one_block(1, kDim, kHidden, 0.0);
  const at::Tensor input = torch::randn({kRows, kDim});
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.poison_freed = o.reuse_freed = false;  // plain accounting
  o.offload = OffloadSet::Boundaries;
  ActivationOffloader off(o);
  const int64_t boundary = kRows * kDim * 4;
  const int64_t block = step_peak(one_block, input, CheckpointPolicy::none(), off, false);
  const int64_t plain = step_peak(net, input, CheckpointPolicy::none(), off, false);
  const int64_t ckpt = step_peak(net, input, CheckpointPolicy::all(), off, false);
  const int64_t every2 = step_peak(net, input, CheckpointPolicy::every_k(2), off, false);
  const int64_t offloaded = step_peak(net, input, CheckpointPolicy::all(), off, true);
  RecordProperty("block_peak", std::to_string(block));
  RecordProperty("plain_peak", std::to_string(plain));
  RecordProperty("checkpoint_all_peak", std::to_string(ckpt));
  RecordProperty("checkpoint_every2_peak", std::to_string(every2));
  RecordProperty("offloaded_boundaries_peak", std::to_string(offloaded));
  std::printf(
      "peaks (bytes): one block %lld, plain %lld, checkpoint all %lld, every:2 %lld, "
      "+ offloaded boundaries %lld; boundary %lld\n",
      static_cast<long long>(block), static_cast<long long>(plain), static_cast<long long>(ckpt),
      static_cast<long long>(every2), static_cast<long long>(offloaded),
      static_cast<long long>(boundary));
  // Without checkpointing every block's saved activations are alive at the end of the forward:
  // its input, fc1's output (gelu's input) and gelu's output (fc2's input).
  EXPECT_GE(plain, kBlocks * (boundary + 2 * kRows * kHidden * 4));
  // With it: the boundaries, and one block's activations recomputed at a time (its transient
  // output and gradient buffers included in `block`).
  EXPECT_LE(ckpt, kBlocks * boundary + block + 2 * boundary);
  EXPECT_LT(ckpt, plain / 2);
  // Every other block: half the blocks keep their activations.
  EXPECT_GT(every2, ckpt);
  EXPECT_LT(every2, plain);
  // Offloaded boundaries: lower again by the boundaries, but those the window and the backward's
  // reload and prefetch hold.
  EXPECT_LE(offloaded, ckpt - (kBlocks - 4) * boundary);
}

// A region inside a region saves its inputs through the outer one (recomputed with it), never on
// the device from forward to backward: the peak of nested regions is at most that of the outer
// regions alone (each of which holds all its blocks' activations at once in backward).
TEST(CheckpointMemory, NestedRegionsPeakNoHigherThanTheOuterOnesAlone) {
  constexpr int64_t kBlocks = 8, kPerRegion = 2, kRows = 256, kDim = 64, kHidden = 64;
  Net net(kBlocks, kDim, kHidden, /*dropout=*/0.25);
  const at::Tensor input = torch::randn({kRows, kDim});
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.poison_freed = o.reuse_freed = false;  // plain accounting
  ActivationOffloader off(o);
  auto peak = [&](bool nested) {
    return step_peak([&] { return nested_forward(net, input, kPerRegion, nested); }, net.params,
                     off, false);
  };
  const int64_t plain = step_peak(net, input, CheckpointPolicy::none(), off, false);
  const int64_t outer = peak(false);
  const int64_t nested = peak(true);
  std::printf("peaks (bytes): plain %lld, outer regions only %lld, nested %lld\n",
              static_cast<long long>(plain), static_cast<long long>(outer),
              static_cast<long long>(nested));
  EXPECT_LT(outer, plain);
  EXPECT_LE(nested, outer);
}

// A backward that does not take every recomputed tensor (autograd::grad to a tensor inside the
// region, a region output the loss does not use, a backward that throws) drops the rest when it
// ends: N such backwards of a retained graph leave the device memory where it was. Each also gives
// plain autograd's gradients.
TEST(CheckpointMemory, PartialBackwardsLeaveNoRecomputedTensorsBehind) {
  host_sim::install();  // device bytes counted
  torch::manual_seed(21);
  auto w1 = torch::randn({64, 64}, torch::requires_grad());
  auto w2 = torch::randn({64, 64}, torch::requires_grad());
  const at::Tensor input = torch::randn({128, 64});
  bool fail = false;
  // Two outputs: h2 on the path through both weights, and a side branch through w1 only.
  auto body = [w1, w2, &fail](const std::vector<at::Tensor>& in) {
    at::Tensor h1 = torch::tanh(in[0].matmul(w1));
    at::Tensor h2 = torch::tanh(h1.matmul(w2));
    if (fail && h2.requires_grad()) {
      h2.register_hook([](const at::Tensor& g) -> at::Tensor {
        throw std::runtime_error("hook failed");
        return g;
      });
    }
    return std::vector<at::Tensor>{h2, torch::sigmoid(h1.matmul(w1))};
  };
  constexpr int kCalls = 4;
  struct Case {
    const char* name;
    std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& out)> backward;
  };
  const std::vector<Case> cases = {
      {"autograd::grad to w2",
       [&](const std::vector<at::Tensor>& out) {
         return torch::autograd::grad({out[0].sum()}, {w2}, {}, /*retain_graph=*/true);
       }},
      {"an output unused",
       [&](const std::vector<at::Tensor>& out) {
         out[0].sum().backward({}, /*retain_graph=*/true);
         return take_grads({w1, w2});
       }},
      {"a backward that throws",
       [&](const std::vector<at::Tensor>& out) {
         try {
           // out[1]'s branch first (the later sum runs first): the region is recomputed before
           // the hook on h2 throws.
           const at::Tensor a = out[0].sum();
           const at::Tensor b = out[1].sum();
           (a + b).backward({}, /*retain_graph=*/true);
           ADD_FAILURE() << "backward did not fail";
         } catch (const std::exception& e) {
           EXPECT_THAT(e.what(), HasSubstr("hook failed"));
         }
         return take_grads({w1, w2});
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fail = std::string(c.name) == "a backward that throws";
    const auto reference = c.backward(body({input * 1}));
    const int64_t before = host_sim::counters().allocated;
    {
      const auto out = checkpoint(body, {input * 1});
      const int64_t after_forward = host_sim::counters().allocated;
      for (int i = 0; i < kCalls; ++i) {
        if (!fail) {
          expect_identical(c.backward(out), reference);
        } else {
          (void)c.backward(out);
        }
        EXPECT_EQ(host_sim::counters().allocated, after_forward) << "after backward " << i + 1;
      }
    }
    EXPECT_EQ(host_sim::counters().allocated, before);
  }
}

TEST(CheckpointPolicyText, ParsesAndPrints) {
  EXPECT_EQ(parse_checkpoint_policy("none"), CheckpointPolicy::none());
  EXPECT_EQ(parse_checkpoint_policy("all"), CheckpointPolicy::all());
  EXPECT_EQ(parse_checkpoint_policy("every:1"), CheckpointPolicy::all());
  EXPECT_EQ(parse_checkpoint_policy("every:3"), CheckpointPolicy::every_k(3));
  EXPECT_EQ(to_string(CheckpointPolicy::every_k(3)), "every:3");
  for (const char* bad : {"", "every:", "every:0", "every:-2", "every:2x", "some"}) {
    try {
      parse_checkpoint_policy(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const OptionsError& e) {
      EXPECT_THAT(e.what(), HasSubstr("valid: none, all, every:K"));
    }
  }
  EXPECT_TRUE(CheckpointPolicy::every_k(3).applies(0));
  EXPECT_FALSE(CheckpointPolicy::every_k(3).applies(1));
  EXPECT_TRUE(CheckpointPolicy::every_k(3).applies(3));
  EXPECT_FALSE(CheckpointPolicy::none().applies(0));
  EXPECT_EQ(parse_offload_set("boundaries"), OffloadSet::Boundaries);
  EXPECT_THROW(parse_offload_set("some"), OptionsError);
}

}  // namespace
}  // namespace offtune::test
