// What the engine offloads and how tensors come back: parameters and buffers never, small tensors
// kept, duplicates once, views/strides/offsets/broadcasts restored exactly, every dtype, every
// mode.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "offtune/device_model.hpp"
#include "offtune/host_sim.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

std::shared_ptr<RecordingObserver> observe(ActivationOffloader& off) {
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  return obs;
}

int64_t count_reason(RecordingObserver& obs, KeepReason r) {
  int64_t n = 0;
  for (auto& p : obs.packs) n += p.reason == r;
  return n;
}

TEST(Semantics, ParametersAndTheirViewsAreNeverOffloaded) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  auto w = torch::randn({32, 32}, torch::requires_grad());
  auto a = torch::randn({16, 32}, torch::requires_grad());
  expect_identical_step([&] { return a.mul(2).matmul(w.t()).sum(); }, {a, w}, off);
  EXPECT_GE(count_reason(*obs, KeepReason::Parameter), 1);  // w.t() is a view of a parameter
  EXPECT_EQ(obs->count(PackDecision::Offloaded), 1);        // only a*2
  EXPECT_EQ(off.stats().offloaded_bytes, 16 * 32 * 4);
}

// Semantics::Trl replays the reference's window rule: every saved tensor takes the next id, kept
// ones included, and an offload with id T releases the held activations with ids <= T - window,
// whether or not their copies finished. The test replays that rule beside the engine, pack by pack,
// on a forward that mixes offloaded (1 KiB) and kept (16 B) saves, with copies so slow that none
// finishes (offtune's own rule would release nothing early here either, but counts differently).
TEST(Semantics, TrlWindowReplaysTheReferenceRuleStepByStep) {
  for (const int64_t window : {1, 2, 3, 5}) {
    OffloadOptions o = host_sim_options(/*min_offload_size=*/512, window);
    o.semantics = Semantics::Trl;
    o.prefetch = 2;                      // ignored under trl
    o.debug_copy_delay_ns = 20'000'000;  // no copy finishes before the next op
    ActivationOffloader off(o);
    // 1 = offloaded save (sin of a 1 KiB tensor), 0 = kept save (sin of a 16 B tensor).
    const std::vector<int> pattern{1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1};
    auto big = torch::randn({256}, torch::requires_grad());
    auto small = torch::randn({4}, torch::requires_grad());
    std::vector<int64_t> reference;  // ids the reference holds, oldest first
    int64_t id = 0;
    at::Tensor loss = big.sum() * 0;
    {
      auto scope = off.scope();
      at::Tensor b = big.mul(1), s = small.mul(1);  // activations, not leaves; mul saves nothing
      for (size_t i = 0; i < pattern.size(); ++i) {
        ++id;
        if (pattern[i] == 1) {
          b = b.sin();  // saves b: 1 KiB
          while (!reference.empty() && reference.front() <= id - window) {
            reference.erase(reference.begin());
          }
          reference.push_back(id);
        } else {
          s = s.sin();  // saves s: 16 B, kept, but it takes an id
        }
        ASSERT_EQ(off.stats().packed, id) << "each step saves exactly one tensor";
        EXPECT_EQ(off.resident().fwd_stash_count, static_cast<int64_t>(reference.size()))
            << "window " << window << ", after save " << id;
      }
      loss = b.sum() + s.sum();
    }
    loss.backward();
    EXPECT_EQ(off.stats().prefetched, 0) << "the reference does not prefetch";
    off.synchronize();
  }
}

// Under trl a view of a parameter is offloaded (the reference checks isinstance(Parameter), which a
// view is not) and, in single-stream mode, a tensor saved twice is copied twice; gradients stay
// identical.
TEST(Semantics, TrlOffloadsParameterViewsAndCopiesEachSaveOnItsOwn) {
  OffloadOptions o = host_sim_options(/*min_offload_size=*/0);
  o.semantics = Semantics::Trl;
  o.use_streams = false;  // with streams the reference keeps the second save (test above)
  ActivationOffloader off(o);
  auto obs = observe(off);
  auto w = torch::randn({32, 32}, torch::requires_grad());
  auto a = torch::randn({16, 32}, torch::requires_grad());
  expect_identical_step(
      [&] {
        auto h = a.mul(2);
        return h.matmul(w.t()).sum() + (h * h).sum();  // w.t(): a view; h * h saves h twice
      },
      {a, w}, off);
  EXPECT_EQ(count_reason(*obs, KeepReason::Parameter), 0);
  EXPECT_EQ(off.stats().deduplicated, 0);
  EXPECT_EQ(obs->count(PackDecision::Offloaded), off.stats().packed - off.stats().kept);
}

// A save holds its storage key while it is in TRL's window. One that leaves the window otherwise
// than by the window moving on (its graph freed with it, synchronize(), unpacked in a backward
// inside the forward) gives its key up as well: the next tensor at the recycled address is a new
// activation and is offloaded, not kept as the old one's duplicate. Before: the key stayed, and
// that tensor was kept on the device as SharedInWindow.
TEST(Semantics, TrlASaveThatLeavesTheWindowByAnyWayGivesItsKeyUp) {
  for (const std::string route : {"destroyed", "synchronize", "unpacked"}) {
    SCOPED_TRACE(route);
    OffloadOptions o = host_sim_options(/*min_offload_size=*/0, /*window=*/5);
    o.semantics = Semantics::Trl;
    ASSERT_TRUE(o.use_streams);
    ActivationOffloader off(o);
    auto obs = observe(off);
    auto x = torch::randn({64, 64}, torch::requires_grad());
    OffloadScope scope = off.scope();
    const void* first = nullptr;
    {
      auto a = x.mul(2);
      first = a.data_ptr();
      auto y = a.sin();  // saves a: offloaded, in the window, its key held
      if (route == "synchronize") off.synchronize();
      if (route == "unpacked") torch::autograd::grad({y.sum()}, {x});
      // Its copy done before its graph goes: the block is not held for the copy stream.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto b = x.mul(3);  // the same size: host-sim's cache hands it a's block
    ASSERT_EQ(b.data_ptr(), first) << "the test needs the block recycled";
    auto z = b.cos();  // saves b
    EXPECT_EQ(count_reason(*obs, KeepReason::SharedInWindow), 0);
    EXPECT_EQ(obs->count(PackDecision::Offloaded), 2);
    z.sum().backward();
    off.synchronize();
  }
}

// The reference (TRL) with streams keeps a saved tensor on the device when its address and dtype
// (storage address + storage offset in elements, its key) are those of a tensor offloaded and still
// in the forward window, or of one kept that way earlier in the same forward: a kept duplicate
// takes the key over, and nothing gives it back before backward. Single-stream mode has no such
// rule.
TEST(Semantics, TrlWithStreamsKeepsATensorAtTheAddressOfOneInTheWindow) {
  for (const bool streams : {true, false}) {
    OffloadOptions o = host_sim_options(/*min_offload_size=*/0, /*window=*/2);
    o.semantics = Semantics::Trl;
    o.use_streams = streams;
    ActivationOffloader off(o);
    auto a = torch::randn({16, 32}, torch::requires_grad());
    auto b = torch::randn({16, 32}, torch::requires_grad());
    expect_identical_step(
        [&] {
          auto h = a.mul(2);                // mul by a number saves nothing
          auto p = (h * h).sum();           // 1: h offloaded; 2: h again, kept (takes the key)
          auto q = b.mul(3).sin().sum();    // 3: releases id 1, but the key is id 2's now
          auto r = b.mul(5).sin().sum();    // 4
          auto s = h.cos().sum();           // 5: h, kept: id 2 still holds its key
          auto g = b.mul(7);                //
          auto t1 = g.sin().sum();          // 6: g offloaded
          auto t2 = b.mul(9).sin().sum();   // 7
          auto t3 = b.mul(11).sin().sum();  // 8: releases ids <= 6, g's key with it
          auto t4 = g.cos().sum();          // 9: g offloaded again
          return p + q + r + s + t1 + t2 + t3 + t4;
        },
        {a, b}, off);
    EXPECT_EQ(off.stats().packed, 9);
    EXPECT_EQ(off.stats().offloaded, streams ? 7 : 9) << (streams ? "streams" : "single stream");
    EXPECT_EQ(off.stats().kept, streams ? 2 : 0) << (streams ? "streams" : "single stream");
  }
}

TEST(Semantics, RegisteredBuffersAreNeverOffloaded) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  auto scale = torch::randn({64, 64});  // a buffer: no grad, but not an activation
  off.never_offload(scale);
  auto a = torch::randn({64, 64}, torch::requires_grad());
  expect_identical_step([&] { return a.sin().mul(scale).sum(); }, {a}, off);
  EXPECT_EQ(count_reason(*obs, KeepReason::RegisteredStorage), 1);
}

TEST(Semantics, ThresholdKeepsSmallTensors) {
  OffloadOptions o = host_sim_options(/*min_offload_size=*/4096);
  ActivationOffloader off(o);
  auto obs = observe(off);
  auto small = torch::randn({8, 8}, torch::requires_grad());    // 256 bytes
  auto large = torch::randn({64, 64}, torch::requires_grad());  // 16 KiB
  expect_identical_step(
      [&] {
        auto a = small.mul(1).sin().sum();  // mul(1): an activation, not the leaf itself
        return a + large.mul(1).sin().sum();
      },
      {small, large}, off);
  EXPECT_EQ(count_reason(*obs, KeepReason::BelowThreshold), 1);
  EXPECT_EQ(obs->count(PackDecision::Offloaded), 1);
  EXPECT_EQ(off.stats().offloaded_bytes, 64 * 64 * 4);
}

TEST(Semantics, OneStorageSavedTwiceMovesOnce) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  auto x = torch::randn({128, 64}, torch::requires_grad());
  expect_identical_step(
      [&] {
        auto h = x.mul(3);
        auto a = (h * h).sum();  // one statement each: + does not order its operands
        auto b = h.sin().sum();
        auto c = h.narrow(1, 8, 16).cos().sum();
        return a + b + c;
      },
      {x}, off);
  // h saved by mul (twice), sin and the narrow view's cos: one copy, three shares.
  EXPECT_EQ(obs->count(PackDecision::Offloaded), 1);
  EXPECT_EQ(obs->count(PackDecision::Deduplicated), 3);
  EXPECT_EQ(off.stats().offloaded_bytes, 128 * 64 * 4);
}

TEST(Semantics, InPlaceWriteBetweenSavesIsNotDeduplicated) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  expect_identical_step(
      [&] {
        auto h = x.mul(2);
        auto r = h.relu_();    // saves its output: h at version 1
        return r.exp().sum();  // exp saves its output, a new storage
      },
      {x}, off);
  EXPECT_EQ(obs->count(PackDecision::Deduplicated), 0);
}

TEST(Semantics, ViewsStridesOffsetsAndBroadcastsRestoredExactly) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  auto x = torch::randn({32, 48}, torch::requires_grad());
  auto v = torch::randn({48}, torch::requires_grad());
  expect_identical_step(
      [&] {
        auto h = x.mul(1.5);
        auto t = h.t().sin();                       // transposed view saved by sin
        auto s = h.narrow(1, 5, 20).tanh();         // offset view (tanh saves output)
        auto strided = h.slice(0, 1, 32, 3).exp();  // step-3 rows, offset 1 row
        auto b = v.mul(2).expand({32, 48});         // stride-0 broadcast
        auto m = (h * b).sum();                     // mul saves h and b
        return t.sum() + s.sum() + strided.sum() + m;
      },
      {x, v}, off);
  // The broadcast moved only its storage: 48 floats, not 32*48.
  bool saw_broadcast = false;
  for (auto& p : obs->packs) saw_broadcast |= p.bytes == 48 * 4;
  EXPECT_TRUE(saw_broadcast);
  for (auto& p : obs->packs) EXPECT_LE(p.bytes, 32 * 48 * 4);
}

class Geometry : public ::testing::TestWithParam<int64_t> {};

TEST_P(Geometry, UnpackedGeometryMatchesTheSavedTensor) {
  // Checked directly on the engine's output through a custom function that inspects its saved
  // input: offloaded (threshold 0) and kept on the device (rebuilt from its storage) alike.
  ActivationOffloader off(host_sim_options(/*min_offload_size=*/GetParam()));
  auto x = torch::randn({16, 40}, torch::requires_grad());
  struct Capture : torch::autograd::Function<Capture> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor in) {
      ctx->save_for_backward({in});
      return in.sum();
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad) {
      auto saved = ctx->get_saved_variables()[0];
      // Encode geometry in the gradient: d0 = stride(0), d1 = stride(1), value = first element.
      auto g = torch::zeros(saved.sizes(), saved.options());
      g.select(0, 0).select(0, 0).fill_(static_cast<double>(saved.stride(0)));
      g.select(0, 0).select(0, 1).fill_(static_cast<double>(saved.stride(1)));
      g.select(0, 1).copy_(saved.select(0, 1));
      return {g * grad[0]};
    }
  };
  auto run = [&](ActivationOffloader* o) {
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (o) scope.emplace(o->scope());
      auto h = x.mul(2).t().narrow(0, 3, 30);  // non-contiguous, offset
      loss = Capture::apply(h);
    }
    loss.backward();
    auto g = x.grad().clone();
    x.mutable_grad().reset();
    return g;
  };
  EXPECT_TRUE(bitwise_equal(run(nullptr), run(&off)));
}

INSTANTIATE_TEST_SUITE_P(OffloadedAndKept, Geometry,
                         ::testing::Values(int64_t{0}, int64_t{1} << 40));

TEST(Semantics, KeptTensorsOfEveryKindComeBackIntact) {
  // Kept tensors that are not ordinary dense ones (a lazily conjugated view, an integer tensor, a
  // zero-size one) come back as autograd saved them.
  ActivationOffloader off(host_sim_options(/*min_offload_size=*/int64_t{1} << 40));
  auto z =
      torch::randn({8, 8}, torch::TensorOptions().dtype(at::kComplexFloat).requires_grad(true));
  auto x = torch::randn({8, 8}, torch::requires_grad());
  expect_identical_step(
      [&] {
        auto c = z.mul(2).conj();  // conj bit set: saved as it is
        at::Tensor r = torch::view_as_real(c.mul(c)).sum();
        at::Tensor idx =
            x.detach().argsort(/*stable=*/false, 1);  // integer tensor, saved by gather
        return r + x.mul(3).gather(1, idx).sin().sum();
      },
      {z, x}, off);
  EXPECT_GT(off.stats().kept, 0);
  EXPECT_EQ(off.stats().offloaded, 0);
}

class ModeGrid : public ::testing::TestWithParam<std::tuple<int64_t, bool, bool, int64_t>> {};

TEST_P(ModeGrid, MlpGradientsIdentical) {
  const auto [window, streams, pinned, threshold] = GetParam();
  OffloadOptions o = host_sim_options(threshold, window);
  o.use_streams = streams;
  o.use_pin_memory = pinned;
  ActivationOffloader off(o);
  torch::manual_seed(7);
  auto w1 = torch::randn({64, 128}, torch::requires_grad());
  auto w2 = torch::randn({128, 128}, torch::requires_grad());
  auto w3 = torch::randn({128, 10}, torch::requires_grad());
  auto x = torch::randn({32, 64});
  expect_identical_step(
      [&] {
        auto h = torch::gelu(x.matmul(w1));
        h = torch::layer_norm(torch::relu(h.matmul(w2)), {128});
        return torch::log_softmax(h.matmul(w3), 1).mean();
      },
      {w1, w2, w3}, off);
  EXPECT_GT(off.stats().packed, 0);
}

INSTANTIATE_TEST_SUITE_P(Configs, ModeGrid,
                         ::testing::Combine(::testing::Range(int64_t{1}, int64_t{9}),
                                            ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(int64_t{0}, int64_t{16384})));

class Dtypes : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(Dtypes, GradientsIdentical) {
  ActivationOffloader off(host_sim_options());
  torch::manual_seed(3);
  const auto opts = torch::TensorOptions().dtype(GetParam()).requires_grad(true);
  auto w1 = torch::randn({32, 64}, opts);
  auto w2 = torch::randn({64, 8}, opts);
  auto x = torch::randn({16, 32}, torch::TensorOptions().dtype(GetParam()));
  expect_identical_step(
      [&] { return torch::silu(x.matmul(w1)).matmul(w2).to(at::kFloat).pow(2).mean(); }, {w1, w2},
      off);
  EXPECT_GT(off.stats().offloaded, 0);
}

INSTANTIATE_TEST_SUITE_P(All, Dtypes, ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf));

// Simulated time (ModelledTime) in the window tests below: whether a copy is still running when
// the next tensor is packed then depends on the link model alone, not on this machine's load.
TEST(Semantics, LinkModelWindowMakesForwardWait) {
  const ModelledTime modelled;
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.link = LinkModel{1.0, 0.0, 20'000'000};  // 20 ms per copy: far longer than an op
  ActivationOffloader off(o);
  auto obs = observe(off);
  auto x = torch::randn({64, 256}, torch::requires_grad());
  expect_identical_step([&] { return x.sin().cos().tanh().exp().sum(); }, {x}, off);
  EXPECT_GT(off.stats().window_waits, 0);
  EXPECT_EQ(obs->waits.empty(), false);
}

TEST(Semantics, ByteWindowBoundsInFlightBytes) {
  const ModelledTime modelled;
  OffloadOptions o = host_sim_options(0, /*window=*/100);
  o.max_fwd_stash_bytes = 64 * 256 * 4;  // one tensor's worth
  o.link = LinkModel{1.0, 0.0, 20'000'000};
  ActivationOffloader off(o);
  auto obs = observe(off);
  auto x = torch::randn({64, 256}, torch::requires_grad());
  expect_identical_step([&] { return x.sin().cos().tanh().exp().sum(); }, {x}, off);
  for (auto& s : obs->stashes) EXPECT_LE(s.fwd_bytes, 64 * 256 * 4);
  EXPECT_GT(off.stats().window_waits, 0);
}

TEST(Semantics, BackwardUsesForwardStashWhenCopiesAreStillInFlight) {
  const ModelledTime modelled;
  OffloadOptions o = host_sim_options(0, /*window=*/8);
  o.link = LinkModel{0.5, 0.0, 100'000'000};  // 100 ms per copy: still in flight at backward
  ActivationOffloader off(o);
  auto x = torch::randn({32, 32}, torch::requires_grad());
  expect_identical_step([&] { return x.sin().cos().sum(); }, {x}, off);
  EXPECT_GT(off.stats().from_fwd_stash, 0);
}

TEST(Semantics, PrefetchReloadsAheadOfUse) {
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.prefetch = 2;
  ActivationOffloader off(o);
  auto obs = observe(off);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  expect_identical_step([&] { return sin_chain(x, 6).sum(); }, {x}, off);
  EXPECT_GT(off.stats().prefetched, 0);
  int64_t prefetched_unpacks = 0;
  for (auto& u : obs->unpacks) prefetched_unpacks += u.source == UnpackSource::Prefetched;
  EXPECT_GT(prefetched_unpacks, 0);
}

TEST(Semantics, ObserverEventsAreConsistent) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  expect_identical_step([&] { return x.sin().cos().exp().sum(); }, {x}, off);
  off.synchronize();
  const auto st = off.stats();
  int64_t d2h = 0, h2d = 0, d2h_done = 0;
  for (auto& c : obs->issued) (c.direction == CopyDirection::DeviceToHost ? d2h : h2d)++;
  for (auto& c : obs->completed) d2h_done += c.direction == CopyDirection::DeviceToHost;
  EXPECT_EQ(d2h, st.offloaded);
  EXPECT_EQ(h2d, st.reloaded);
  EXPECT_EQ(d2h_done, st.offloaded);
  EXPECT_EQ(static_cast<int64_t>(obs->packs.size()), st.packed);
  for (auto& c : obs->issued) EXPECT_GT(c.time_ns, 0);
}

TEST(Semantics, NoObserverNoEvents) {
  ActivationOffloader off(host_sim_options());
  auto obs = observe(off);
  off.set_observer(nullptr);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  expect_identical_step([&] { return x.sin().sum(); }, {x}, off);
  EXPECT_TRUE(obs->packs.empty());
}

}  // namespace
}  // namespace offtune::test
