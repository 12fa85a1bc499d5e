// offtune refuses to install its autograd engine where another one (Python's, in a process that
// loaded torch from Python) is already the default. Its own executable: the install is once per
// process.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/engine.h>

#include <optional>
#include <string>

#include "offtune/core.hpp"
#include "offtune/external_hooks.hpp"
#include "test_support.hpp"

namespace {

// Stands in for Python's engine: a subclass installed as the default before offtune asks.
struct ForeignEngine : torch::autograd::Engine {
  ~ForeignEngine() override { stop(); }
};

torch::autograd::Engine& foreign() {
  static auto* engine = new ForeignEngine();
  return *engine;
}

TEST(ForeignEngine, OfftuneRefusesClearly) {
  torch::autograd::set_default_engine_stub(&foreign);
  offtune::OffloadOptions o;
  o.backend = offtune::BackendKind::HostSim;
  try {
    offtune::ActivationOffloader off(o);
    FAIL() << "expected EngineError";
  } catch (const offtune::EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("another autograd engine"), std::string::npos) << e.what();
  }
  // The foreign engine stays the default: nothing was replaced.
  EXPECT_EQ(&torch::autograd::Engine::get_default_engine(), &foreign());
}

// ---- the engine under another engine's hooks (the Python path, without Python) ----------------

// Stands in for Python's engine as offtune meets it there: a subclass that answers
// get_default_saved_variable_hooks from a stack of its own (Python's saved_tensors_hooks), here one
// ExternalHooks per thread, and runs backward itself.
thread_local const offtune::ExternalHooks* t_external = nullptr;
struct HookingEngine : torch::autograd::Engine {
  ~HookingEngine() override { stop(); }
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    return t_external != nullptr ? t_external->make() : nullptr;
  }
};
torch::autograd::Engine& hooking() {
  static auto* engine = new HookingEngine();
  return *engine;
}

// The pushed hooks of a `with saved_tensors_hooks(...)` block.
struct ExternalScope {
  offtune::ExternalHooks hooks;
  explicit ExternalScope(const offtune::ActivationOffloader& off) : hooks(off) {
    t_external = &hooks;
  }
  ~ExternalScope() { t_external = nullptr; }
};

using Net = offtune::test::SmallNet;

offtune::OffloadOptions external_options() {
  offtune::OffloadOptions o = offtune::test::host_sim_options(0, 2);
  o.prefetch = 2;
  return o;
}

std::string describe(const offtune::ResidentState& r) {
  return "tracked=" + std::to_string(r.tracked) + " host=" + std::to_string(r.host_bytes) +
         " fwd=" + std::to_string(r.fwd_stash_count) + " bwd=" + std::to_string(r.bwd_stash_count) +
         " pool_in_use=" + std::to_string(r.host_pool_in_use_bytes);
}

TEST(ExternalHooks, GiveBitIdenticalGradientsWithoutOfftunesEngine) {
  torch::autograd::set_default_engine_stub(&hooking);
  offtune::ActivationOffloader off(external_options(), offtune::HookCarrier::External);
  EXPECT_THROW((void)off.scope(), offtune::EngineError);
  torch::manual_seed(1);
  Net net;
  auto x = torch::randn({16, 32});
  auto run = [&](bool offload) {
    at::Tensor loss;
    {
      std::optional<ExternalScope> scope;
      if (offload) scope.emplace(off);
      loss = net.forward(x);
    }
    loss.backward();
    return offtune::test::take_grads(net.params());
  };
  for (int step = 0; step < 3; ++step) {
    auto ref = run(false);
    auto got = run(true);
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_TRUE(offtune::test::bitwise_equal(ref[i], got[i])) << "step " << step << " grad " << i;
    }
  }
  EXPECT_GT(off.stats().offloaded, 0);
  off.synchronize();
  EXPECT_TRUE(off.resident().resting()) << describe(off.resident());
  offtune::test::expect_no_stream_races();
  EXPECT_EQ(&torch::autograd::Engine::get_default_engine(), &hooking());  // nothing installed
}

// The C++ path's engine subclass ends each backward for the offloaders that took part; under
// another engine the first unpack queues that end as one of its final callbacks.
TEST(ExternalHooks, EndOfBackwardGivesBackTheBuffersOfARetainedGraph) {
  torch::autograd::set_default_engine_stub(&hooking);
  offtune::ActivationOffloader off(external_options(), offtune::HookCarrier::External);
  torch::manual_seed(2);
  Net net;
  auto x = torch::randn({16, 32});
  at::Tensor loss;
  {
    ExternalScope scope(off);
    loss = net.forward(x);
  }
  off.synchronize();
  loss.backward({}, /*retain_graph=*/true);
  const auto r = off.resident();
  EXPECT_GT(r.tracked, 0);          // the graph is retained, so are its host copies
  EXPECT_EQ(r.bwd_stash_count, 0);  // but no device buffer outlives the backward
  EXPECT_EQ(r.bwd_stash_bytes, 0) << describe(r);
  loss.backward();
  loss = at::Tensor();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting()) << describe(off.resident());
}

TEST(ExternalHooks, AFailedBackwardReturnsToRestWhenItsGraphIsDropped) {
  torch::autograd::set_default_engine_stub(&hooking);
  offtune::ActivationOffloader off(external_options(), offtune::HookCarrier::External);
  torch::manual_seed(3);
  Net net;
  auto x = torch::randn({16, 32});
  {
    at::Tensor loss;
    {
      ExternalScope scope(off);
      auto h = torch::tanh(x.matmul(net.w1));
      h.register_hook([](at::Tensor) -> at::Tensor { throw std::runtime_error("boom"); });
      loss = torch::sigmoid(h.matmul(net.w2)).sin().sum();
    }
    EXPECT_ANY_THROW(loss.backward());
  }
  for (auto& p : net.params()) p.mutable_grad().reset();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting()) << describe(off.resident());
}

}  // namespace
