// State across steps: the engine returns to rest after every pattern a training loop produces —
// many steps, gradient accumulation, forward-only passes, retain_graph, exceptions, dropped graphs.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace offtune::test {
namespace {

using Net = SmallNet;

void expect_resting(ActivationOffloader& off) {
  off.synchronize();
  const auto r = off.resident();
  EXPECT_TRUE(r.resting()) << "tracked=" << r.tracked << " host=" << r.host_bytes
                           << " fwd=" << r.fwd_stash_count << " bwd=" << r.bwd_stash_count
                           << " pending=" << r.pending_host_frees
                           << " pool_in_use=" << r.host_pool_in_use_bytes;
}

TEST(State, ManyStepsReturnToRestAndReuseThePool) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(1);
  Net net;
  auto x = torch::randn({16, 32});
  int64_t reserved_after_first = -1;
  for (int i = 0; i < 20; ++i) {
    expect_identical_step([&] { return net.forward(x); }, net.params(), off);
    expect_resting(off);
    const auto reserved = off.resident().host_pool_reserved_bytes;
    if (i == 0) reserved_after_first = reserved;
    EXPECT_EQ(reserved, reserved_after_first) << "pool grew at step " << i;
  }
  off.release_cached_memory();
  EXPECT_EQ(off.resident().host_pool_reserved_bytes, 0);
}

TEST(State, GradientAccumulationSeveralForwardsOneBackward) {
  ActivationOffloader off(host_sim_options(0, 1));
  torch::manual_seed(2);
  Net net;
  auto x1 = torch::randn({16, 32}), x2 = torch::randn({16, 32}), x3 = torch::randn({16, 32});
  auto forward = [&](bool offload) {
    at::Tensor total;
    for (auto* x : {&x1, &x2, &x3}) {
      std::optional<OffloadScope> scope;
      if (offload) scope.emplace(off.scope());
      auto l = net.forward(*x);
      total = total.defined() ? total + l : l;
    }
    return total;
  };
  expect_identical_step([&] { return forward(false); }, net.params(), off);  // warm
  auto ref = step([&] { return forward(false); }, net.params(), nullptr);
  auto got = step([&] { return forward(true); }, net.params(), nullptr);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << i;
  EXPECT_GT(off.stats().offloaded, 0);
  expect_resting(off);
}

TEST(State, GradientAccumulationBackwardPerMicroBatch) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(3);
  Net net;
  auto x1 = torch::randn({16, 32}), x2 = torch::randn({16, 32});
  auto run = [&](ActivationOffloader* o) {
    for (auto* x : {&x1, &x2}) {
      at::Tensor l;
      {
        std::optional<OffloadScope> scope;
        if (o) scope.emplace(o->scope());
        l = net.forward(*x);
      }
      l.backward();  // accumulates into .grad
    }
    return take_grads(net.params());
  };
  auto ref = run(nullptr);
  auto got = run(&off);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << i;
  expect_resting(off);
}

TEST(State, ForwardOnlyPassInTrainingModeBetweenSteps) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(4);
  Net net;
  auto x = torch::randn({16, 32});
  expect_identical_step([&] { return net.forward(x); }, net.params(), off);
  {
    auto scope = off.scope();
    auto eval_loss = net.forward(x);  // graph built, never backwarded: an evaluation in train mode
    EXPECT_GT(off.resident().tracked, 0);
  }
  expect_resting(off);  // the graph died with eval_loss
  expect_identical_step([&] { return net.forward(x); }, net.params(), off);
}

TEST(State, KeptOutputsSavedByTheirOwnNodeDoNotLeakTheGraph) {
  // exp, tanh, sigmoid save their outputs; relu_ on a view saves one whose grad_fn is CopySlices.
  // Kept tensors that would close a cycle through their node must not be held as they are.
  ActivationOffloader off(host_sim_options(/*min_offload_size=*/int64_t{1} << 40));
  auto x = torch::randn({16, 32}, torch::requires_grad());
  {
    auto scope = off.scope();
    auto h = x.mul(1).exp().tanh().sigmoid().mul(1);
    h.narrow(0, 0, 4).relu_();
    auto y = h.sin().sum();
    EXPECT_GT(off.resident().tracked, 0);
  }  // the graph is dropped without backward: every saved tensor must go with it
  EXPECT_EQ(off.resident().tracked, 0);
  expect_identical_step(
      [&] {
        auto h = x.mul(1).exp().tanh().sigmoid().mul(1);
        h.narrow(0, 0, 4).relu_();
        return h.sin().sum();
      },
      {x}, off);
  EXPECT_EQ(off.resident().tracked, 0);
}

TEST(State, RetainGraphTwoBackwards) {
  OffloadOptions o = host_sim_options();
  ActivationOffloader off(o);
  torch::manual_seed(5);
  Net net;
  auto x = torch::randn({16, 32});
  auto run = [&](ActivationOffloader* o2) {
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (o2) scope.emplace(o2->scope());
      loss = net.forward(x);
    }
    loss.backward({}, /*retain_graph=*/true);
    if (o2) {
      const auto r = o2->resident();
      EXPECT_GT(r.tracked, 0);          // the graph is retained, so are its host copies
      EXPECT_EQ(r.bwd_stash_count, 0);  // but no device buffer outlives the backward
    }
    loss.backward();  // unpack runs a second time
    return take_grads(net.params());
  };
  auto ref = run(nullptr);
  auto got = run(&off);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << i;
  expect_resting(off);
}

TEST(State, ExceptionMidForward) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(6);
  Net net;
  auto x = torch::randn({16, 32});
  try {
    auto scope = off.scope();
    auto h = torch::tanh(x.matmul(net.w1)).sin();
    EXPECT_GT(off.resident().tracked, 0);
    throw std::runtime_error("data loader failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(offloading_active());
  expect_resting(off);
  expect_identical_step([&] { return net.forward(x); }, net.params(), off);
}

TEST(State, ExceptionMidBackward) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(7);
  Net net;
  auto x = torch::randn({16, 32});
  {
    at::Tensor loss;
    {
      auto scope = off.scope();
      auto h = torch::tanh(x.matmul(net.w1));
      h.register_hook([](at::Tensor) -> at::Tensor { throw std::runtime_error("boom"); });
      loss = torch::sigmoid(h.matmul(net.w2)).sin().sum();
    }
    EXPECT_ANY_THROW(loss.backward());
  }
  for (auto& p : net.params()) p.mutable_grad().reset();
  expect_resting(off);
  expect_identical_step([&] { return net.forward(x); }, net.params(), off);
}

TEST(State, GraphDroppedWithoutBackwardWhileCopiesInFlight) {
  OffloadOptions o = host_sim_options(0, 8);
  o.link = LinkModel{0.5, 0.0, 2'000'000};  // copies take ms: still running when the graph dies
  ActivationOffloader off(o);
  torch::manual_seed(8);
  Net net;
  auto x = torch::randn({16, 32});
  {
    auto scope = off.scope();
    auto loss = net.forward(x);
  }
  expect_resting(off);
  expect_identical_step([&] { return net.forward(x); }, net.params(), off);
}

TEST(State, PartialBackwardWithAutogradGrad) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(9);
  Net net;
  auto x = torch::randn({16, 32});
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = net.forward(x);
  }
  auto ref_loss = net.forward(x);
  auto ref = torch::autograd::grad({ref_loss}, {net.w3});
  auto got = torch::autograd::grad({loss}, {net.w3});
  EXPECT_TRUE(bitwise_equal(ref[0], got[0]));
  loss = at::Tensor();
  expect_resting(off);
}

TEST(State, OffloaderDestroyedBeforeItsGraph) {
  torch::manual_seed(10);
  Net net;
  auto x = torch::randn({16, 32});
  auto ref = net.forward(x);
  ref.backward();
  auto ref_grad = net.w1.grad().clone();
  net.w1.mutable_grad().reset();
  net.w2.mutable_grad().reset();
  net.w3.mutable_grad().reset();
  at::Tensor loss;
  {
    ActivationOffloader off(host_sim_options());
    auto scope = off.scope();
    loss = net.forward(x);
  }
  loss.backward();  // saved tensors keep the engine state alive
  EXPECT_TRUE(bitwise_equal(ref_grad, net.w1.grad()));
}

TEST(State, ConcurrentThreadsWithTheirOwnScopes) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(11);
  Net net;
  auto x = torch::randn({16, 32});
  auto ref_loss = net.forward(x);
  auto ref = torch::autograd::grad({ref_loss}, {net.w1})[0];
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        at::Tensor loss;
        {
          auto scope = off.scope();
          loss = net.forward(x);
        }
        auto g = torch::autograd::grad({loss}, {net.w1})[0];
        if (!bitwise_equal(g, ref)) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  expect_resting(off);
}

}  // namespace
}  // namespace offtune::test
