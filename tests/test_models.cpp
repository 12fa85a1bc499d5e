// The built-in models under the engine: bit-identical training steps over a grid of configs, the
// factory's head exclusion and parameter registration, and device-memory accounting on host-sim.
#include <gtest/gtest.h>

#include "offtune/model_support.hpp"
#include "offtune/samples/llama.hpp"
#include "offtune/samples/mlp.hpp"
#include "offtune/samples/workload.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

using samples::Llama;
using samples::LlamaConfig;

LlamaConfig test_config(at::ScalarType dtype = at::kFloat) {
  LlamaConfig c = LlamaConfig::preset("tiny");
  c.dtype = dtype;
  return c;
}

std::vector<at::Tensor> step_model(Llama& model, const samples::Batch& batch,
                                   ActivationOffloader* off) {
  std::vector<at::Tensor> out{samples::forward_backward(model, batch, off).clone()};
  for (auto& g : take_grads(model->parameters())) out.push_back(g);
  return out;
}

void expect_same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "tensor " << i;
}

class DecoderGrid
    : public ::testing::TestWithParam<std::tuple<at::ScalarType, int64_t, bool, int64_t>> {};

TEST_P(DecoderGrid, TrainingStepsBitIdentical) {
  const auto [dtype, window, streams, threshold] = GetParam();
  Llama model(test_config(dtype), /*seed=*/1);
  OffloadOptions o = host_sim_options(threshold, window);
  o.use_streams = streams;
  auto setup = make_offloader_for(*model, o);
  const auto batch = samples::make_token_batch(2, 32, model->config().vocab_size, 5, at::kCPU);
  for (int s = 0; s < 2; ++s) {
    auto ref = step_model(model, batch, nullptr);
    auto got = step_model(model, batch, setup.offloader.get());
    expect_same(ref, got);
    setup.offloader->synchronize();
    EXPECT_TRUE(setup.offloader->resident().resting());
  }
  EXPECT_GT(setup.offloader->stats().offloaded, 0);
}

INSTANTIATE_TEST_SUITE_P(Configs, DecoderGrid,
                         ::testing::Values(std::make_tuple(at::kFloat, 1, true, 0),
                                           std::make_tuple(at::kFloat, 5, true, 1024),
                                           std::make_tuple(at::kFloat, 8, false, 1024),
                                           std::make_tuple(at::kFloat, 3, true, 32768),
                                           std::make_tuple(at::kBFloat16, 2, true, 1024),
                                           std::make_tuple(at::kHalf, 4, true, 0),
                                           std::make_tuple(at::kHalf, 1, false, 0)));

TEST(Models, MlpBitIdentical) {
  samples::Mlp model(samples::MlpConfig{}, 3);
  auto setup = make_offloader_for(*model, host_sim_options());
  EXPECT_EQ(setup.excluded, std::vector<std::string>{"head"});
  auto x = torch::randn({16, model->config().in});
  auto params = model->parameters();
  expect_identical_step([&] { return model->forward(x).pow(2).mean(); }, params, *setup.offloader);
}

TEST(Models, FactoryExcludesTheHeadAndRegistersParameters) {
  Llama model(test_config(), 2);
  auto obs = std::make_shared<RecordingObserver>();
  auto setup = make_offloader_for(*model, host_sim_options());
  setup.offloader->set_observer(obs);
  EXPECT_TRUE(setup.head_found);
  EXPECT_EQ(setup.excluded, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(find_output_head(*model), "lm_head");
  // Frozen parameters (no grad; the LoRA case) still never move: their storages are registered.
  // The embedding keeps its grad so that activations require grad and linears save their weights.
  for (auto& p : model->parameters()) p.requires_grad_(false);
  model->tok_embeddings->weight.requires_grad_(true);
  const auto batch = samples::make_token_batch(2, 16, model->config().vocab_size, 1, at::kCPU);
  {
    auto scope = setup.offloader->scope();
    auto loss = samples::lm_loss(model->forward(batch.tokens), batch.targets);
  }
  int64_t registered = 0;
  for (auto& p : obs->packs) registered += p.reason == KeepReason::RegisteredStorage;
  EXPECT_GT(registered, 0);
  for (auto& p : model->parameters()) p.requires_grad_(true);
}

TEST(Models, HeadInputIsNotOffloaded) {
  // With the head excluded, the final norm's output (the head's input) stays; without, it moves.
  Llama model(test_config(), 3);
  const auto batch = samples::make_token_batch(2, 32, model->config().vocab_size, 2, at::kCPU);
  auto count_offloaded = [&](bool exclude) {
    auto setup = make_offloader_for(*model, host_sim_options(), /*warn_if_no_head=*/false);
    ActivationOffloader plain(host_sim_options());
    ActivationOffloader& off = exclude ? *setup.offloader : plain;
    for (auto& p : model->parameters()) off.never_offload(p);
    {
      auto scope = off.scope();
      auto loss = samples::lm_loss(model->forward(batch.tokens), batch.targets);
      loss.backward();
    }
    model->zero_grad();
    return off.stats().offloaded;
  };
  EXPECT_GT(count_offloaded(false), count_offloaded(true));
}

TEST(Models, NoHeadWarnsUnlessSuppressed) {
  struct Headless : torch::nn::Module {
    Headless() { register_module("body", torch::nn::Linear(4, 4)); }
  } model;
  std::string warnings;
  struct Capture : c10::WarningHandler {
    std::string* out;
    explicit Capture(std::string* o) : out(o) {}
    void process(const c10::Warning& w) override { *out += w.msg(); }
  } handler(&warnings);
  c10::WarningUtils::WarningHandlerGuard guard(&handler);
  auto quiet = make_offloader_for(model, host_sim_options(), /*warn_if_no_head=*/false);
  EXPECT_TRUE(warnings.empty());
  auto loud = make_offloader_for(model, host_sim_options(), /*warn_if_no_head=*/true);
  EXPECT_FALSE(loud.head_found);
  EXPECT_NE(warnings.find("no output head found"), std::string::npos);
}

// Accounting: after forward, offloading frees on the "device" what the engine reports as offloaded,
// minus what the forward window still holds. Tolerance: 2% of the offloaded bytes (allocator noise:
// small metadata tensors, the scope's bookkeeping).
TEST(Models, DevicePeakDropsByOffloadedBytesMinusWindow) {
  LlamaConfig c = LlamaConfig::preset("tiny");
  c.dim = 128;
  c.ffn_hidden = 344;
  c.n_layers = 4;
  Llama model(c, 4);
  const auto batch = samples::make_token_batch(4, 128, c.vocab_size, 3, at::kCPU);
  auto setup = make_offloader_for(*model, host_sim_options(1024, 5));
  ActivationOffloader& off = *setup.offloader;

  auto measure = [&](bool offload, int64_t& after_forward, int64_t& step_peak,
                     int64_t& window_bytes) {
    const auto before = off.device_memory().allocated;
    off.reset_peak_device_memory();
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (offload) scope.emplace(off.scope());
      loss = samples::lm_loss(model->forward(batch.tokens), batch.targets);
    }
    after_forward = off.device_memory().allocated - before;
    window_bytes = off.resident().fwd_stash_bytes;
    loss.backward();
    loss = at::Tensor();
    model->zero_grad();
    step_peak = off.device_memory().peak_allocated - before;
  };
  int64_t base_fwd = 0, base_peak = 0, unused = 0;
  measure(false, base_fwd, base_peak, unused);  // warm-up (grads allocated)
  measure(false, base_fwd, base_peak, unused);
  const auto offloaded_before = off.stats().offloaded_bytes;
  int64_t off_fwd = 0, off_peak = 0, window = 0;
  measure(true, off_fwd, off_peak, window);
  const int64_t offloaded = off.stats().offloaded_bytes - offloaded_before;
  const int64_t expected_drop = offloaded - window;
  const int64_t drop = base_fwd - off_fwd;
  RecordProperty("offloaded_bytes", std::to_string(offloaded));
  RecordProperty("after_forward_drop", std::to_string(drop));
  std::cout << "offloaded " << offloaded << " B, window holds " << window
            << " B, after-forward drop " << drop << " B, step peak " << base_peak << " -> "
            << off_peak << " B\n";
  ASSERT_GT(offloaded, 0);
  EXPECT_NEAR(static_cast<double>(drop), static_cast<double>(expected_drop),
              0.02 * static_cast<double>(offloaded));
  // The whole step's peak (backward included) drops too, if less: backward brings tensors back.
  EXPECT_LT(off_peak, base_peak);
}

}  // namespace
}  // namespace offtune::test
