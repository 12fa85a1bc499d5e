// The seam into libtorch's autograd engine: installed, answering saved-tensor hooks, and giving the
// same gradients as plain autograd.
#include <gtest/gtest.h>

#include <optional>

#include "test_support.hpp"

namespace offtune::test {
namespace {

TEST(Seam, HooksSeeSavedTensorsOnlyInsideScope) {
  ActivationOffloader off(host_sim_options());
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  auto w = torch::randn({8, 8}, torch::requires_grad());
  auto x = torch::randn({4, 8});
  auto outside = (x.matmul(w)).sin().sum();  // no scope: nothing packed
  EXPECT_EQ(obs->packs.size(), 0u);
  {
    auto scope = off.scope();
    EXPECT_TRUE(offloading_active());
    auto y = x.matmul(w).sin().sum();
    EXPECT_GT(obs->packs.size(), 0u);
    {
      NoOffloadRegion none;
      EXPECT_FALSE(offloading_active());
      const auto before = obs->packs.size();
      auto z = x.matmul(w).cos().sum();
      EXPECT_EQ(obs->packs.size(), before);
    }
    EXPECT_TRUE(offloading_active());
  }
  EXPECT_FALSE(offloading_active());
}

TEST(Seam, GradientsIdenticalOnSmallGraph) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(0);
  auto w1 = torch::randn({16, 32}, torch::requires_grad());
  auto w2 = torch::randn({32, 4}, torch::requires_grad());
  auto x = torch::randn({8, 16});
  expect_identical_step([&] { return torch::tanh(x.matmul(w1)).matmul(w2).pow(2).mean(); },
                        {w1, w2}, off);
  EXPECT_GT(off.stats().offloaded, 0);
}

TEST(Seam, InnermostScopeWins) {
  ActivationOffloader a(host_sim_options()), b(host_sim_options());
  auto w = torch::randn({8, 8}, torch::requires_grad());
  auto x = torch::randn({4, 8});
  {
    auto sa = a.scope();
    {
      auto sb = b.scope();
      auto y = x.matmul(w).sin().sum();
      y.backward();
    }
  }
  EXPECT_EQ(a.stats().packed, 0);
  EXPECT_GT(b.stats().packed, 0);
}

// Under a floor scope inside an offload scope: gradients bitwise those of plain autograd, and the
// offloader sees nothing.
void expect_floor_keeps_gradients_and_hides_tensors(HookFloor kind) {
  ActivationOffloader off(host_sim_options());
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  torch::manual_seed(0);
  auto w = torch::randn({16, 16}, torch::requires_grad());
  auto x = torch::randn({8, 16});
  const auto loss = [&] { return x.matmul(w).tanh().exp().pow(2).mean(); };
  const at::Tensor reference = torch::autograd::grad({loss()}, {w})[0];
  at::Tensor got;
  {
    auto scope = off.scope();
    HookFloorScope floor(kind);
    EXPECT_FALSE(offloading_active());
    got = torch::autograd::grad({loss()}, {w})[0];
  }
  EXPECT_TRUE(bitwise_equal(reference, got));
  EXPECT_EQ(obs->packs.size(), 0u);
  EXPECT_EQ(off.stats().packed, 0);
}

// The benchmarks' floor: every saved tensor goes through a C++ hook that only keeps it, and no
// offloader sees it, even inside an offload scope.
TEST(Seam, HookFloorScopeHooksEverySavedTensorAndOffloadsNothing) {
  expect_floor_keeps_gradients_and_hides_tensors(HookFloor::NoOp);

  // A hook is there: like any hook that does not check versions, it lets an in-place change of a
  // saved tensor through, where plain autograd (and offtune's own hooks) raise.
  {
    HookFloorScope floor;
    auto v = torch::randn({4}, torch::requires_grad());
    auto h = v.mul(2);
    auto y = h.sin();
    h.add_(1);
    EXPECT_NO_THROW(y.sum().backward());
  }

  // A tensor saved by its own node (exp saves its output) is not kept in a reference cycle: it dies
  // with the graph.
  c10::weak_intrusive_ptr<c10::StorageImpl> weak{c10::intrusive_ptr<c10::StorageImpl>()};
  {
    HookFloorScope floor;
    auto v = torch::randn({1024}, torch::requires_grad());
    auto y = v.exp();
    weak = y.storage().getWeakStorageImpl();
  }
  EXPECT_EQ(weak.use_count(), 0) << "the saved output leaked (node -> hook -> tensor -> node)";
}

// The copy floor moves every saved tensor to host memory and back: gradients are those of plain
// autograd, and backward reads the bytes taken at pack, not the tensor's memory.
TEST(Seam, CopyFloorHookMovesEverySavedTensorOutAndBack) {
  expect_floor_keeps_gradients_and_hides_tensors(HookFloor::Copy);

  // A change of the saved tensor after the save does not reach backward under the copy floor (it
  // reads the copy); under the no-op floor it does (it reads the tensor).
  const auto grad_after_change = [](std::optional<HookFloor> kind) {
    auto v = torch::linspace(-1, 1, 64).requires_grad_();
    at::Tensor y;
    {
      std::optional<HookFloorScope> floor;
      if (kind) floor.emplace(*kind);
      auto h = v.mul(2);
      y = h.sin();  // saves h
      if (kind) h.add_(1);
    }
    return torch::autograd::grad({y.sum()}, {v})[0];
  };
  const at::Tensor unchanged = grad_after_change(std::nullopt);
  EXPECT_TRUE(bitwise_equal(unchanged, grad_after_change(HookFloor::Copy)));
  EXPECT_FALSE(torch::allclose(unchanged, grad_after_change(HookFloor::NoOp)));
}

}  // namespace
}  // namespace offtune::test
