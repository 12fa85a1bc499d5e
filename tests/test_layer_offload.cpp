// Layer offloading of frozen weights (offtune/layer_offload.hpp): bit-identical loss and LoRA
// gradients to the same model without it, alone and with activation offloading and checkpointing,
// retain_graph included; frozen weights only ever copied to the device; the prefetch order in
// forward and in a checkpointed backward; the peak it lowers, measured on host-sim; the parameters
// given back on destruction; a cuda variant (skipped without a GPU).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <sstream>

#include "offtune/host_sim.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

using ::testing::HasSubstr;

// A residual block with frozen base weights and trainable LoRA adapters on its first projection:
// x + w2(gelu(w1(x * scale) + b1(a1(x * scale)))). `x * scale` saves the frozen parameter itself
// (not a view), which the layer offloader must leave in place while the graph holds it.
struct Block {
  at::Tensor scale, w1, w2;  // frozen
  at::Tensor a1, b1;         // trainable

  at::Tensor operator()(const at::Tensor& x) const {
    const at::Tensor h = x * scale;
    at::Tensor u = torch::linear(h, w1) + torch::linear(torch::linear(h, a1), b1);
    return x + torch::linear(torch::gelu(u), w2);
  }
  std::vector<at::Tensor> frozen() const { return {scale, w1, w2}; }
};

struct Net {
  std::vector<Block> blocks;
  std::vector<at::Tensor> trainable;
  int64_t frozen_block_bytes = 0;

  Net(int64_t n, int64_t dim, int64_t hidden, int64_t rank, c10::Device device = c10::kCPU,
      uint64_t seed = 11) {
    torch::manual_seed(seed);
    const auto o = at::TensorOptions().device(device);
    for (int64_t i = 0; i < n; ++i) {
      Block b;
      b.scale = (1.0 + 0.1 * torch::randn({dim})).to(device);
      b.w1 = (torch::randn({hidden, dim}) * 0.1).to(device);
      b.w2 = (torch::randn({dim, hidden}) * 0.1).to(device);
      // B nonzero so that both adapters get gradients in the first step.
      b.a1 = (torch::randn({rank, dim}) * 0.1).to(device).requires_grad_();
      b.b1 = (torch::randn({hidden, rank}) * 0.1).to(device).requires_grad_();
      (void)o;
      trainable.push_back(b.a1);
      trainable.push_back(b.b1);
      blocks.push_back(b);
    }
    frozen_block_bytes = (dim + 2 * hidden * dim) * 4;
  }

  // The forward, with `layers` (when given) entering each block inside the function a checkpoint
  // reruns, so that the recompute enters it again in backward.
  at::Tensor forward(at::Tensor x, const CheckpointPolicy& policy, LayerOffloader* layers) const {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const auto index = static_cast<int64_t>(i);
      auto fn = [b = blocks[i], layers, index](const at::Tensor& in) {
        std::optional<LayerOffloader::Resident> resident;
        if (layers) resident.emplace(layers->block(index));
        return b(in);
      };
      x = policy.applies(index) ? checkpoint(fn, x) : fn(x);
    }
    return x;
  }

  std::unique_ptr<LayerOffloader> offload(ActivationOffloader* shared, int64_t depth) const {
    LayerOffloadOptions o;
    o.depth = depth;
    o.backend = BackendKind::HostSim;
    o.poison_freed = o.reuse_freed = true;
    auto layers =
        shared ? std::make_unique<LayerOffloader>(*shared, o) : std::make_unique<LayerOffloader>(o);
    for (const Block& b : blocks) layers->add_block(b.frozen());
    return layers;
  }
};

std::vector<at::Tensor> run(const Net& net, const at::Tensor& input, const CheckpointPolicy& policy,
                            ActivationOffloader* off, LayerOffloader* layers) {
  return step([&] { return net.forward(input, policy, layers).pow(2).mean(); }, net.trainable, off);
}

void expect_identical(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(a[i], b[i])) << (i == 0 ? "loss" : "gradient " + std::to_string(i));
  }
}

struct Variant {
  const char* name;
  CheckpointPolicy policy;
  bool activations;  // with an activation offloader (sharing its link)
  int64_t depth;
};

TEST(LayerOffload, LossAndTrainableGradientsAreBitIdentical) {
  Net net(4, 32, 64, 4);
  const at::Tensor input = torch::randn({16, 32});
  OffloadOptions ao = host_sim_options(0, 2);
  for (const Variant& v :
       {Variant{"alone", CheckpointPolicy::none(), false, 1},
        Variant{"alone depth 2", CheckpointPolicy::none(), false, 2},
        Variant{"+ activations", CheckpointPolicy::none(), true, 1},
        Variant{"+ checkpoint all", CheckpointPolicy::all(), false, 1},
        Variant{"+ checkpoint all depth 3", CheckpointPolicy::all(), false, 3},
        Variant{"+ checkpoint every:2", CheckpointPolicy::every_k(2), false, 1},
        Variant{"+ checkpoint all + activations", CheckpointPolicy::all(), true, 1},
        Variant{"+ boundaries offloaded", CheckpointPolicy::all(), true, 2},
        // The disk tier: activations (or the boundaries) in the arena file, weights from host.
        Variant{"+ activations on disk", CheckpointPolicy::none(), true, 1},
        Variant{"+ checkpoint all + boundaries on disk", CheckpointPolicy::all(), true, 1},
        // What `offtune run --layer-offload on:1` without activation offloading runs under: an
        // offloader that moves no activation, whose hooks see the saved frozen weights.
        Variant{"+ weights-only offloader", CheckpointPolicy::none(), true, 1}}) {
    SCOPED_TRACE(v.name);
    const std::string name = v.name;
    std::optional<ActivationOffloader> off;
    if (v.activations) {
      OffloadOptions o = ao;
      if (name.find("boundaries") != std::string::npos) o.offload = OffloadSet::Boundaries;
      if (name.find("disk") != std::string::npos) {
        o.tier = Tier::Disk;
        o.disk_min_gbps = 0.0;  // no bandwidth measurement (the disk tier's tests have their own)
      }
      if (name == "+ weights-only offloader") {
        o.min_offload_size = std::numeric_limits<int64_t>::max();
      }
      off.emplace(o);
    }
    ActivationOffloader* a = off ? &*off : nullptr;
    const auto reference = run(net, input, v.policy, a, nullptr);
    {
      auto layers = net.offload(a, v.depth);
      for (int s = 0; s < 2; ++s)
        expect_identical(run(net, input, v.policy, a, layers.get()), reference);
      EXPECT_GT(layers->stats().loads, 0);
    }
    if (name == "+ weights-only offloader") {
      EXPECT_EQ(off->stats().offloaded_bytes, 0);
    }
    expect_no_stream_races();
  }
}

TEST(LayerOffload, RetainGraphTwoBackwards) {
  Net net(3, 16, 32, 2);
  const at::Tensor input = torch::randn({8, 16});
  for (const auto& policy : {CheckpointPolicy::none(), CheckpointPolicy::all()}) {
    SCOPED_TRACE(to_string(policy));
    auto twice = [&](LayerOffloader* layers) {
      const at::Tensor loss = net.forward(input, policy, layers).pow(2).mean();
      loss.backward({}, /*retain_graph=*/true);
      loss.backward();
      std::vector<at::Tensor> out{loss.detach()};
      for (auto& g : take_grads(net.trainable)) out.push_back(g);
      return out;
    };
    const auto reference = twice(nullptr);
    auto layers = net.offload(nullptr, 1);
    expect_identical(twice(layers.get()), reference);
  }
}

TEST(LayerOffload, GradientAccumulationOverTwoGraphs) {
  Net net(3, 16, 32, 2);
  const at::Tensor a = torch::randn({8, 16}), b = torch::randn({8, 16});
  for (const auto& policy : {CheckpointPolicy::none(), CheckpointPolicy::every_k(2)}) {
    SCOPED_TRACE(to_string(policy));
    auto accumulate = [&](LayerOffloader* layers) {
      const at::Tensor la = net.forward(a, policy, layers).pow(2).mean();
      const at::Tensor lb = net.forward(b, policy, layers).pow(2).mean();
      lb.backward();
      la.backward();
      return take_grads(net.trainable);
    };
    const auto reference = accumulate(nullptr);
    auto layers = net.offload(nullptr, 1);
    expect_identical(accumulate(layers.get()), reference);
  }
}

struct WeightObserver : RecordingObserver {
  std::mutex m;
  std::vector<int64_t> weight_issues;  // block ids in issue order
  std::vector<bool> weight_prefetch;
  int64_t weight_waits = 0;
  void on_copy_issued(const CopyEvent& e) override {
    RecordingObserver::on_copy_issued(e);
    if (!e.weights) return;
    std::lock_guard<std::mutex> lock(m);
    weight_issues.push_back(e.id.value);
    weight_prefetch.push_back(e.prefetch);
  }
  void on_wait(const WaitEvent& e) override {
    RecordingObserver::on_wait(e);
    if (e.kind == WaitKind::Weights) ++weight_waits;
  }
};

TEST(LayerOffload, FrozenWeightsOnlyGoToTheDeviceAndShareTheActivationLink) {
  for (const auto& policy : {CheckpointPolicy::none(), CheckpointPolicy::all()}) {
    SCOPED_TRACE(to_string(policy));
    Net net(4, 32, 64, 4);
    const at::Tensor input = torch::randn({16, 32});
    ActivationOffloader off(host_sim_options(0, 2));
    // As make_offloader_for does for a model's parameters: the weights are not activations.
    for (const Block& b : net.blocks) {
      for (const at::Tensor& t : b.frozen()) off.never_offload(t);
    }
    auto obs = std::make_shared<WeightObserver>();
    off.set_observer(obs);
    run(net, input, policy, &off, nullptr);
    const OffloadStats before = off.stats();
    const size_t activation_copies = obs->issued.size();
    auto layers = net.offload(&off, 1);
    const auto registered = layers->stats();
    run(net, input, policy, &off, layers.get());
    layers->synchronize();
    const OffloadStats after = off.stats();
    // The activations moved as without layer offloading: the frozen weights' device copies (which
    // linear saves as weight.t()) were not offloaded as activations.
    EXPECT_EQ(after.offloaded_bytes - before.offloaded_bytes, before.offloaded_bytes);
    EXPECT_EQ(after.offloaded - before.offloaded, before.offloaded);
    int64_t weight_d2h = 0, weight_h2d = 0, weight_bytes = 0;
    for (const CopyEvent& e : obs->issued) {
      if (!e.weights) continue;
      (e.direction == CopyDirection::HostToDevice ? weight_h2d : weight_d2h) += 1;
      weight_bytes += e.bytes;
    }
    EXPECT_EQ(weight_d2h, 0);
    const auto s = layers->stats();
    EXPECT_EQ(s.device_to_host, 0);
    EXPECT_EQ(weight_h2d, s.loads - registered.loads);
    EXPECT_EQ(weight_bytes, s.loaded_bytes - registered.loaded_bytes);
    // The scales are saved by x * scale as themselves (block 0's is not: its input needs no grad).
    // Under the offloader's scope the saved tensor is a reference to the weight's copy, had again
    // in backward; a checkpoint's recompute keeps the tensor itself, which keeps the scale.
    const int64_t kept = policy.enabled() ? 3 : 0;
    EXPECT_EQ(s.kept_on_device, kept);
    EXPECT_EQ(s.frozen_bytes, 4 * net.frozen_block_bytes - kept * 32 * 4);
    // The activation copies are still there, apart from the weights'.
    EXPECT_GT(obs->issued.size() - static_cast<size_t>(weight_h2d), activation_copies);
    std::lock_guard<std::mutex> lock(obs->mutex);
    size_t weight_completed = 0;
    for (const CopyEvent& e : obs->completed) weight_completed += e.weights ? 1 : 0;
    EXPECT_EQ(weight_completed, static_cast<size_t>(weight_h2d));
  }
}

TEST(LayerOffload, PrefetchesAheadInForwardAndInBackwardOrderForTheRecompute) {
  Net net(5, 16, 32, 2);
  const at::Tensor input = torch::randn({8, 16});
  LayerOffloadOptions o;
  o.backend = BackendKind::HostSim;
  LayerOffloader layers(o);
  auto obs = std::make_shared<WeightObserver>();
  layers.set_observer(obs);
  for (const Block& b : net.blocks) layers.add_block(b.frozen());
  run(net, input, CheckpointPolicy::all(), nullptr, &layers);
  // Forward: block 0 on demand, then each block prefetches the next; the last one stays for the
  // backward, whose recompute enters 4, 3, ..., 0 and prefetches 3, 2, 1, 0 ahead of it; block 0
  // stays resident for the next forward.
  EXPECT_THAT(obs->weight_issues, ::testing::ElementsAre(0, 1, 2, 3, 4, 3, 2, 1, 0));
  EXPECT_FALSE(obs->weight_prefetch.front());
  EXPECT_EQ(layers.stats().demand_loads, 1);
  EXPECT_EQ(layers.stats().prefetched, 8);
  EXPECT_LE(layers.resident_blocks(), 2);
  // The next step finds block 0 resident and prefetched block 1 already.
  obs->weight_issues.clear();
  run(net, input, CheckpointPolicy::all(), nullptr, &layers);
  EXPECT_THAT(obs->weight_issues, ::testing::ElementsAre(1, 2, 3, 4, 3, 2, 1, 0));
  EXPECT_EQ(layers.stats().demand_loads, 1);
}

TEST(LayerOffload, ParametersAreOnTheirHostCopyOutsideTheirBlockAndComeBackOnDestruction) {
  host_sim::install();  // the parameters count from the start
  Net net(2, 16, 32, 2);
  const at::Tensor w1 = net.blocks[1].w1.clone();
  const int64_t before = host_sim::counters().allocated;
  at::Tensor outside;  // a view taken outside the block: moves to the device with the weight
  {
    auto layers = net.offload(nullptr, 1);
    EXPECT_EQ(net.blocks[1].w1.sizes(), w1.sizes());  // shape kept
    // The frozen weights left device memory (their host copies are not counted there).
    EXPECT_EQ(host_sim::counters().allocated, before - 2 * net.frozen_block_bytes);
    EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1));
    outside = net.blocks[1].w1.view({-1});
    layers->enter(1);
    EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1));
    layers->exit(1);
    layers->release();
    EXPECT_EQ(layers->resident_blocks(), 0);
  }
  EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1));
  EXPECT_TRUE(bitwise_equal(outside, w1.view({-1})));
  EXPECT_EQ(host_sim::counters().allocated, before);
}

TEST(LayerOffload, RefusesWhatItCannotOffload) {
  Net net(1, 16, 32, 2);
  LayerOffloadOptions o;
  o.backend = BackendKind::HostSim;
  {
    LayerOffloader layers(o);
    EXPECT_THROW(layers.add_block({net.blocks[0].a1}), std::invalid_argument);      // trainable
    EXPECT_THROW(layers.add_block({net.blocks[0].w1.t()}), std::invalid_argument);  // strided
    layers.add_block({net.blocks[0].w1});
    EXPECT_THROW(layers.add_block({net.blocks[0].w1}), std::invalid_argument);  // twice
    EXPECT_THROW(layers.enter(3), std::out_of_range);
    EXPECT_THROW(layers.exit(0), std::logic_error);
  }
  o.depth = 0;
  try {
    LayerOffloader bad(o);
    ADD_FAILURE() << "depth 0 accepted";
  } catch (const OptionsError& e) {
    EXPECT_THAT(e.what(), HasSubstr("depth must be >= 1"));
  }
}

// Peak device memory (everything allocated: parameters included) over a step after one warm-up step
// (gradients exist), on host-sim.
int64_t step_peak(const Net& net, const at::Tensor& input, const CheckpointPolicy& policy,
                  ActivationOffloader& off, LayerOffloader* layers, bool scope = false) {
  auto one = [&] {
    at::Tensor loss;
    {
      std::optional<OffloadScope> s;
      if (scope) s.emplace(off.scope());
      loss = net.forward(input, policy, layers).pow(2).mean();
    }
    loss.backward();
    loss = at::Tensor();
    off.synchronize();
    for (auto& p : net.trainable) p.mutable_grad().zero_();
  };
  one();
  off.reset_peak_device_memory();
  one();
  return off.device_memory().peak_allocated;
}

TEST(LayerOffloadMemory, PeakDropsByTheFrozenBytesOfAllBlocksButTheSlots) {
  constexpr int64_t kBlocks = 8, kRows = 64, kDim = 128, kHidden = 512, kRank = 8;
  host_sim::install();  // the parameters count from the start
  Net net(kBlocks, kDim, kHidden, kRank);
  const at::Tensor input = torch::randn({kRows, kDim});
  OffloadOptions o = host_sim_options(0, 1);
  o.poison_freed = o.reuse_freed = o.check_streams = false;  // plain accounting
  ActivationOffloader off(o);
  const int64_t block = net.frozen_block_bytes;
  const int64_t frozen = kBlocks * block;
  const int64_t total_ckpt = step_peak(net, input, CheckpointPolicy::all(), off, nullptr);
  const int64_t total_plain = step_peak(net, input, CheckpointPolicy::none(), off, nullptr);
  const int64_t total_act =
      step_peak(net, input, CheckpointPolicy::none(), off, nullptr, /*scope=*/true);
  for (int64_t depth : {1, 2}) {
    SCOPED_TRACE(depth);
    auto layers = net.offload(&off, depth);
    const int64_t total_ckpt_lo = step_peak(net, input, CheckpointPolicy::all(), off, layers.get());
    const int64_t total_plain_lo =
        step_peak(net, input, CheckpointPolicy::none(), off, layers.get());
    const int64_t total_act_lo =
        step_peak(net, input, CheckpointPolicy::none(), off, layers.get(), /*scope=*/true);
    std::printf(
        "layer offload depth %lld, with activation offloading, no checkpoint: device peak %lld -> "
        "%lld (%+lld)\n",
        static_cast<long long>(depth), static_cast<long long>(total_act),
        static_cast<long long>(total_act_lo), static_cast<long long>(total_act_lo - total_act));
    // With activation offloading and no checkpointing: the weights autograd saves are references
    // to the layer offloader's copies, brought back in backward order, so the same drop.
    EXPECT_LE(total_act_lo, total_act - frozen + (depth + 2) * block);
    std::printf(
        "layer offload depth %lld: frozen %lld bytes (%lld per block, %lld blocks); device peak "
        "checkpoint all %lld -> %lld (%+lld), no checkpoint %lld -> %lld (%+lld); loads %lld\n",
        static_cast<long long>(depth), static_cast<long long>(frozen),
        static_cast<long long>(block), static_cast<long long>(kBlocks),
        static_cast<long long>(total_ckpt), static_cast<long long>(total_ckpt_lo),
        static_cast<long long>(total_ckpt_lo - total_ckpt), static_cast<long long>(total_plain),
        static_cast<long long>(total_plain_lo),
        static_cast<long long>(total_plain_lo - total_plain),
        static_cast<long long>(layers->stats().loads));
    RecordProperty("frozen_bytes", std::to_string(frozen));
    RecordProperty("peak_checkpoint_d" + std::to_string(depth), std::to_string(total_ckpt));
    RecordProperty("peak_checkpoint_layer_d" + std::to_string(depth),
                   std::to_string(total_ckpt_lo));
    // With checkpointing: every block's frozen weights but the slots (depth + 1 resident: measured
    // exactly that, but for the scales kept on the device).
    EXPECT_LE(total_ckpt_lo, total_ckpt - frozen + (depth + 1) * block + block / 8);
    EXPECT_GE(total_ckpt - total_ckpt_lo, frozen - (depth + 1) * block - block / 8);
    // Without: autograd saves every block's weights for backward, so they are all on the device
    // at the end of the forward; no more than that.
    EXPECT_LE(total_plain_lo, total_plain + (depth + 1) * block);
  }
}

// ---- Registered weights outside and inside their blocks: changes kept, access never a crash

// The frozen weights of `net`, block by block, as plain copies (the values a test expects).
std::vector<std::vector<at::Tensor>> frozen_values(const Net& net) {
  std::vector<std::vector<at::Tensor>> out;
  for (const Block& b : net.blocks) {
    std::vector<at::Tensor> v;
    for (const at::Tensor& t : b.frozen()) v.push_back(t.clone());
    out.push_back(std::move(v));
  }
  return out;
}

TEST(LayerOffloadWrites, AChangeInsideItsBlockIsKeptWhenTheBlockIsLeft) {
  Net net(3, 16, 32, 2);
  const at::Tensor w1 = net.blocks[1].w1.clone();
  auto layers = net.offload(nullptr, 1);
  {
    auto resident = layers->block(1);
    net.blocks[1].w1.mul_(2);
  }
  layers->release();  // block 1's device copy goes
  EXPECT_EQ(layers->resident_blocks(), 0);
  EXPECT_EQ(layers->stats().device_to_host, 1);  // the changed weight, written back
  {
    auto resident = layers->block(1);
    EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1 * 2));
  }
  // Left by the schedule (no release): entering 0 and 1 lets block 2 go.
  {
    auto resident = layers->block(2);
    net.blocks[2].w2.add_(1);
  }
  const at::Tensor w2 = net.blocks[2].w2.clone();
  for (int64_t i : {0, 1}) auto resident = layers->block(i);
  EXPECT_TRUE(bitwise_equal(net.blocks[2].w2, w2));
  {
    auto resident = layers->block(2);
    EXPECT_TRUE(bitwise_equal(net.blocks[2].w2, w2));
  }
  // Nothing changed: nothing written back.
  const int64_t written = layers->stats().device_to_host;
  for (int64_t i : {0, 1, 2, 0}) auto resident = layers->block(i);
  layers->release();
  EXPECT_EQ(layers->stats().device_to_host, written);
  layers.reset();
  EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1 * 2));  // given back with the change
}

TEST(LayerOffloadAccess, AWeightReadOrWrittenOutsideItsBlockReachesItsHostCopy) {
  Net net(3, 16, 32, 2);
  const auto before = frozen_values(net);
  auto layers = net.offload(nullptr, 1);
  // Read outside any block: a parameter loop (an EMA, a norm), a checkpoint of the model.
  double norms = 0.0;
  for (const Block& b : net.blocks) {
    for (const at::Tensor& t : b.frozen()) norms += t.norm().item<double>();
  }
  double expected = 0.0;
  for (const auto& block : before) {
    for (const at::Tensor& t : block) expected += t.norm().item<double>();
  }
  EXPECT_EQ(norms, expected);
  std::ostringstream saved;
  torch::save(net.blocks[2].frozen(), saved);
  std::vector<at::Tensor> loaded;
  std::istringstream in(saved.str());
  torch::load(loaded, in);
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_TRUE(bitwise_equal(loaded[1], before[2][1]));
  // Written outside its block: the change is there when the block is entered.
  net.blocks[2].w1.mul_(2);
  EXPECT_TRUE(bitwise_equal(net.blocks[2].w1, before[2][1] * 2));
  {
    auto resident = layers->block(2);
    EXPECT_TRUE(bitwise_equal(net.blocks[2].w1, before[2][1] * 2));
  }
  // Block 0 entered prefetches block 1; a write to block 1's weight after that (while block 0
  // runs, or between the two) is not lost to the copy made before it.
  {
    auto resident = layers->block(0);
    EXPECT_EQ(layers->resident_blocks(), 2);
    net.blocks[1].w2.add_(1);
  }
  net.blocks[1].scale.mul_(3);
  {
    auto resident = layers->block(1);
    EXPECT_TRUE(bitwise_equal(net.blocks[1].w2, before[1][2] + 1));
    EXPECT_TRUE(bitwise_equal(net.blocks[1].scale, before[1][0] * 3));
  }
  EXPECT_EQ(layers->stats().refreshed, 2);
  // The last block stays resident when left (the backward begins with it): written there, read
  // back after its device copy went.
  { auto resident = layers->block(2); }
  EXPECT_EQ(layers->resident_blocks(), 1);
  net.blocks[2].w2.sub_(1);
  layers->release();
  EXPECT_TRUE(bitwise_equal(net.blocks[2].w2, before[2][2] - 1));
  // The host copy is not device memory: outside the blocks none is held for the weights.
  EXPECT_EQ(layers->resident_blocks(), 0);
  expect_no_stream_races();
}

TEST(LayerOffloadAccess, StrictWeightsThrowANamedErrorOutsideTheirBlock) {
  Net net(2, 16, 32, 2);
  const at::Tensor w1 = net.blocks[1].w1.clone();
  LayerOffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.strict = true;
  LayerOffloader layers(o);
  layers.add_block(net.blocks[0].frozen());
  layers.add_block(net.blocks[1].frozen(), {"block1.scale", "block1.w1", "block1.w2"});
  try {
    net.blocks[1].w1.mul_(2);
    ADD_FAILURE() << "a write outside the block was accepted";
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("'block1.w1' of block 1"));
    EXPECT_THAT(what, HasSubstr("LayerOffloader::block(1)"));
  }
  EXPECT_THROW((void)net.blocks[0].w2.sum(), c10::Error);
  {
    auto resident = layers.block(1);
    EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1));  // the failed write changed nothing
    net.blocks[1].w1.mul_(2);                          // inside its block: allowed
  }
  layers.release();
  auto resident = layers.block(1);
  EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1 * 2));
}

// Frozen weights changed between steps, inside their blocks and outside (a LoRA merge, a scheduled
// change of a base weight): training goes on as it would without layer offloading, bit for bit.
TEST(LayerOffloadWrites, ChangedFrozenWeightsTrainAsWithoutLayerOffloading) {
  const at::Tensor input = torch::randn({16, 32});
  for (const Variant& v :
       {Variant{"alone", CheckpointPolicy::none(), false, 1},
        Variant{"+ checkpoint all", CheckpointPolicy::all(), false, 1},
        Variant{"+ activations", CheckpointPolicy::none(), true, 2},
        Variant{"+ checkpoint all + activations", CheckpointPolicy::all(), true, 1}}) {
    SCOPED_TRACE(v.name);
    Net plain(4, 32, 64, 4), offloaded(4, 32, 64, 4);
    std::optional<ActivationOffloader> off;
    if (v.activations) off.emplace(host_sim_options(0, 2));
    ActivationOffloader* a = off ? &*off : nullptr;
    auto layers = offloaded.offload(a, v.depth);
    // The same edits on both models; `block` enters the block around an edit when given.
    auto edit = [](Net& net, LayerOffloader* enter, int s) {
      at::NoGradGuard no_grad;
      {
        std::optional<LayerOffloader::Resident> r;
        if (enter) r.emplace(enter->block(1));
        net.blocks[1].w2.mul_(0.5);  // inside its block
      }
      net.blocks[0].w1.add_(0.01 * (s + 1));  // block 0: resident between steps
      net.blocks[3].w1.add_(torch::matmul(net.blocks[3].b1, net.blocks[3].a1));  // LoRA merge
      net.blocks[2].scale.copy_(net.blocks[2].scale * 0.9 + 0.1);                // an EMA
    };
    for (int s = 0; s < 3; ++s) {
      SCOPED_TRACE(s);
      expect_identical(run(offloaded, input, v.policy, a, layers.get()),
                       run(plain, input, v.policy, a, nullptr));
      edit(plain, nullptr, s);
      edit(offloaded, layers.get(), s);
    }
    expect_identical(run(offloaded, input, v.policy, a, layers.get()),
                     run(plain, input, v.policy, a, nullptr));
    EXPECT_GT(layers->stats().device_to_host, 0);
    layers.reset();
    for (size_t i = 0; i < plain.blocks.size(); ++i) {
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_TRUE(bitwise_equal(offloaded.blocks[i].frozen()[k], plain.blocks[i].frozen()[k]))
            << "block " << i << " weight " << k;
      }
    }
    expect_no_stream_races();
  }
}

TEST(LayerOffload, RefusesAWeightThatSharesItsStorage) {
  Net net(2, 16, 32, 2);
  LayerOffloadOptions o;
  o.backend = BackendKind::HostSim;
  LayerOffloader layers(o);
  layers.add_block({net.blocks[0].w1});
  auto refused = [&](std::vector<at::Tensor> frozen, const std::string& why) {
    try {
      layers.add_block(std::move(frozen));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  // The same weight in a second block (a tied weight).
  refused({net.blocks[0].w1}, "already registered in block 0");
  // Another tensor on a registered weight's storage.
  refused({net.blocks[0].w1.view({-1})}, "shares its storage with a weight of block 0");
  // A weight whose storage another tensor uses too (a view of it held elsewhere).
  const at::Tensor alias = net.blocks[1].w2.view({-1});
  refused({net.blocks[1].w2}, "shares its storage with another tensor");
  // A part of a larger storage.
  const at::Tensor whole = torch::randn({2, 16});
  refused({whole[1]}, "part of a larger storage");
  // Twice in one block.
  refused({net.blocks[1].w1, net.blocks[1].w1}, "twice");
  EXPECT_EQ(layers.blocks(), 1);
  // Nothing refused was changed: the block that failed registered nothing.
  EXPECT_EQ(net.blocks[1].w1.storage().nbytes(), static_cast<size_t>(32 * 16 * 4));
  layers.add_block({net.blocks[1].w1});
  EXPECT_EQ(layers.blocks(), 2);
}

TEST(LayerOffload, RefusesAWeightThatBecameTrainable) {
  Net net(2, 16, 32, 2);
  const at::Tensor w1 = net.blocks[1].w1.clone();
  auto layers = net.offload(nullptr, 1);
  net.blocks[1].w1.requires_grad_(true);
  try {
    auto resident = layers->block(1);
    ADD_FAILURE() << "a registered weight that requires grad was loaded";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("parameter 1 of block 1"));
    EXPECT_THAT(e.what(), HasSubstr("requires grad"));
  }
  EXPECT_EQ(layers->resident_blocks(), 0);
  net.blocks[1].w1.requires_grad_(false);
  auto resident = layers->block(1);
  EXPECT_TRUE(bitwise_equal(net.blocks[1].w1, w1));
}

// ---- Out of device memory while loading

// Host-sim's device capacity is process-wide: restore "unlimited" whatever the test does.
struct CapacityGuard {
  explicit CapacityGuard(int64_t bytes) { host_sim::set_capacity(bytes); }
  ~CapacityGuard() { host_sim::set_capacity(0); }
  CapacityGuard(const CapacityGuard&) = delete;
  CapacityGuard& operator=(const CapacityGuard&) = delete;
};

// Three blocks of two 1 MiB weights.
struct MiBBlocks {
  std::vector<std::vector<at::Tensor>> weights, values;
  LayerOffloader layers;
  static LayerOffloadOptions on_host_sim(LayerOffloadOptions o) {
    o.backend = BackendKind::HostSim;
    return o;
  }
  explicit MiBBlocks(const LayerOffloadOptions& o) : layers(on_host_sim(o)) {
    for (int i = 0; i < 3; ++i) {
      std::vector<at::Tensor> w{torch::randn({256, 1024}), torch::randn({256, 1024})};
      values.push_back({w[0].clone(), w[1].clone()});
      weights.push_back(w);
      layers.add_block(w);
    }
    host_sim::empty_cache();
  }
  bool holds(int i) const {
    return bitwise_equal(weights[i][0], values[i][0]) && bitwise_equal(weights[i][1], values[i][1]);
  }
};

TEST(LayerOffloadMemory, ALookAheadThatDoesNotFitIsSkipped) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  MiBBlocks m({});
  std::optional<CapacityGuard> capacity;
  // Block 0 fits, and half of block 1: its look-ahead fails half way.
  capacity.emplace(host_sim::counters().reserved + 3 * kMiB + kMiB / 2);
  bool entered = false;
  try {
    m.layers.enter(0);
    entered = true;
  } catch (const c10::OutOfMemoryError& e) {
    ADD_FAILURE() << "block(0) failed for its look-ahead: " << e.what();
  }
  if (entered) {
    EXPECT_TRUE(m.holds(0));
    EXPECT_EQ(m.layers.resident_blocks(), 1);
    EXPECT_EQ(m.layers.stats().prefetch_skipped, 1);
    m.layers.exit(0);
  }
  capacity.reset();
  capacity.emplace(host_sim::counters().reserved + 4 * kMiB + kMiB / 2);
  for (int i : {1, 2, 0}) {
    auto resident = m.layers.block(i);
    EXPECT_TRUE(m.holds(i)) << "block " << i;
  }
}

TEST(LayerOffloadMemory, ABlockThatDoesNotFitThrowsAndLeavesTheOffloaderUsable) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  MiBBlocks m({});
  std::optional<CapacityGuard> capacity;
  capacity.emplace(host_sim::counters().reserved + kMiB + kMiB / 2);  // half of block 0
  EXPECT_THROW(m.layers.enter(0), c10::OutOfMemoryError);
  EXPECT_EQ(m.layers.resident_blocks(), 0);
  EXPECT_THROW(m.layers.exit(0), std::logic_error);  // it was not entered
  capacity.reset();
  for (int i : {0, 1, 2}) {
    auto resident = m.layers.block(i);
    EXPECT_TRUE(m.holds(i)) << "block " << i;
  }
}

TEST(LayerOffloadCuda, BitIdenticalWithCheckpointAndActivationOffloading) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "No GPU available";
  const c10::Device cuda(c10::kCUDA, 0);
  Net net(4, 64, 128, 4, cuda);
  const at::Tensor input = torch::randn({32, 64}).to(cuda);
  OffloadOptions o;
  o.backend = BackendKind::Cuda;
  o.min_offload_size = 0;
  o.debug_copy_delay_ns = 200'000;
  ActivationOffloader off(o);
  for (const auto& policy : {CheckpointPolicy::none(), CheckpointPolicy::all()}) {
    SCOPED_TRACE(to_string(policy));
    const auto reference = run(net, input, policy, &off, nullptr);
    LayerOffloadOptions lo;
    lo.depth = 1;
    LayerOffloader layers(off, lo);
    for (const Block& b : net.blocks) layers.add_block(b.frozen());
    for (int s = 0; s < 2; ++s) expect_identical(run(net, input, policy, &off, &layers), reference);
    EXPECT_EQ(layers.stats().device_to_host, 0);
  }
}

}  // namespace
}  // namespace offtune::test
