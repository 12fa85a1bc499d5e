// The GPT-like sample: its shapes and module names, causality, deterministic initialisation, and
// bit-identical training steps under the engine (host-sim) with the head left out.
#include <gtest/gtest.h>

#include "offtune/model_support.hpp"
#include "offtune/samples/gpt.hpp"
#include "offtune/samples/workload.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

using samples::Gpt;
using samples::GptConfig;

GptConfig tiny(at::ScalarType dtype = at::kFloat) {
  GptConfig c = GptConfig::preset("gpt-tiny");
  c.dtype = dtype;
  return c;
}

TEST(Gpt, PresetsAndValidation) {
  const GptConfig t = GptConfig::preset("gpt-tiny");
  EXPECT_EQ(t.vocab_size, 512);
  EXPECT_EQ(t.dim, 64);
  EXPECT_EQ(t.n_layers, 2);
  EXPECT_EQ(t.n_heads, 4);
  EXPECT_EQ(t.mlp_hidden(), 256);
  EXPECT_EQ(t.max_seq_len, 128);
  const GptConfig s = GptConfig::preset("gpt-small");
  EXPECT_EQ(s.vocab_size, 4096);
  EXPECT_EQ(s.dim, 256);
  EXPECT_EQ(s.n_layers, 4);
  EXPECT_EQ(s.n_heads, 8);
  EXPECT_EQ(s.mlp_hidden(), 1024);
  EXPECT_EQ(s.max_seq_len, 512);
  EXPECT_THROW(GptConfig::preset("gpt-huge"), std::invalid_argument);
  GptConfig bad = t;
  bad.n_heads = 3;  // does not divide 64
  EXPECT_THROW(bad.validate(), std::invalid_argument);
  GptConfig default_ffn;
  default_ffn.dim = 32;
  EXPECT_EQ(default_ffn.mlp_hidden(), 128);  // 0 means 4 * dim
}

TEST(Gpt, ForwardShapesAndModuleNames) {
  Gpt model(tiny(), 1);
  const auto batch = samples::make_token_batch(2, 16, 512, 3, at::kCPU);
  const at::Tensor logits = model->forward(batch.tokens);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 512}));
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  EXPECT_TRUE(logits.isfinite().all().item<bool>());

  const auto params = model->named_parameters();
  for (const char* name :
       {"wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight",
        "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.1.ln_2.bias", "h.1.mlp.c_fc.weight",
        "h.1.mlp.c_proj.bias", "ln_f.weight", "lm_head.weight"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  EXPECT_EQ(params.find("lm_head.bias"), nullptr);  // untied and bias-free
  EXPECT_EQ(params["wpe.weight"].sizes(), (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(params["h.0.attn.c_attn.weight"].sizes(), (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(params["h.0.mlp.c_fc.weight"].sizes(), (std::vector<int64_t>{256, 64}));

  const auto too_long = samples::make_token_batch(1, 129, 512, 3, at::kCPU);
  EXPECT_THROW(model->forward(too_long.tokens), std::invalid_argument);
  EXPECT_THROW(model->forward(batch.tokens.to(at::kInt)), std::invalid_argument);
}

TEST(Gpt, Bf16ForwardKeepsTheDtype) {
  Gpt model(tiny(at::kBFloat16), 1);
  const auto batch = samples::make_token_batch(2, 8, 512, 3, at::kCPU);
  EXPECT_EQ(model->forward(batch.tokens).scalar_type(), at::kBFloat16);
}

TEST(Gpt, InitialisationIsDeterministicPerSeed) {
  Gpt a(tiny(), 7), b(tiny(), 7), c(tiny(), 8);
  const auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(pa[i], pb[i])) << "parameter " << i;
    any_differs = any_differs || !bitwise_equal(pa[i], pc[i]);
  }
  EXPECT_TRUE(any_differs);
}

TEST(Gpt, IsCausal) {
  // Changing token 10 leaves every earlier position's logits alone and changes the later ones.
  Gpt model(tiny(), 2);
  torch::NoGradGuard no_grad;
  const auto batch = samples::make_token_batch(2, 24, 512, 5, at::kCPU);
  at::Tensor changed = batch.tokens.clone();
  changed.select(1, 10).add_(1).remainder_(512);
  const at::Tensor before = model->forward(batch.tokens);
  const at::Tensor after = model->forward(changed);
  EXPECT_TRUE(at::allclose(before.narrow(1, 0, 10), after.narrow(1, 0, 10), /*rtol=*/0.0,
                           /*atol=*/1e-6));
  for (int64_t t = 10; t < 24; ++t) {
    EXPECT_GT((before.select(1, t) - after.select(1, t)).abs().max().item<float>(), 1e-4)
        << "position " << t;
  }
}

TEST(Gpt, FactoryFindsTheHead) {
  Gpt model(tiny(), 3);
  EXPECT_EQ(find_output_head(*model), "lm_head");
  auto setup = make_offloader_for(*model, host_sim_options());
  EXPECT_TRUE(setup.head_found);
  EXPECT_EQ(setup.excluded, std::vector<std::string>{"lm_head"});
}

TEST(Gpt, HeadInputIsNotOffloaded) {
  // With lm_head excluded, ln_f's output (the head's input) stays on the device; without, it moves.
  Gpt model(tiny(), 4);
  const auto batch = samples::make_token_batch(2, 32, 512, 2, at::kCPU);
  const auto count_offloaded = [&](bool exclude) {
    auto setup = make_offloader_for(*model, host_sim_options(), /*warn_if_no_head=*/false);
    ActivationOffloader plain(host_sim_options());
    ActivationOffloader& off = exclude ? *setup.offloader : plain;
    for (auto& p : model->parameters()) off.never_offload(p);
    samples::forward_backward(model, batch, &off);
    model->zero_grad();
    return off.stats().offloaded;
  };
  EXPECT_GT(count_offloaded(false), count_offloaded(true));
}

std::vector<at::Tensor> step_model(Gpt& model, const samples::Batch& batch,
                                   ActivationOffloader* off) {
  std::vector<at::Tensor> out{samples::forward_backward(model, batch, off).clone()};
  for (auto& g : take_grads(model->parameters())) out.push_back(g);
  return out;
}

// dtype, forward window, side stream, min_offload_size.
class GptGrid
    : public ::testing::TestWithParam<std::tuple<at::ScalarType, int64_t, bool, int64_t>> {};

TEST_P(GptGrid, TrainingStepsBitIdentical) {
  const auto [dtype, window, streams, threshold] = GetParam();
  Gpt model(tiny(dtype), 1);
  OffloadOptions o = host_sim_options(threshold, window);
  o.use_streams = streams;
  auto setup = make_offloader_for(*model, o);
  const auto batch = samples::make_token_batch(2, 32, model->config().vocab_size, 5, at::kCPU);
  for (int s = 0; s < 2; ++s) {
    const auto ref = step_model(model, batch, nullptr);
    const auto got = step_model(model, batch, setup.offloader.get());
    ASSERT_EQ(ref.size(), got.size());
    EXPECT_TRUE(bitwise_equal(ref[0], got[0])) << "loss " << ref[0] << " vs " << got[0];
    for (size_t i = 1; i < ref.size(); ++i) {
      ASSERT_TRUE(ref[i].defined()) << "no gradient for parameter " << (i - 1);
      EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << "gradient " << (i - 1);
    }
    setup.offloader->synchronize();
    EXPECT_TRUE(setup.offloader->resident().resting());
  }
  EXPECT_GT(setup.offloader->stats().offloaded, 0);
}

INSTANTIATE_TEST_SUITE_P(Configs, GptGrid,
                         ::testing::Values(std::make_tuple(at::kFloat, 1, true, 0),
                                           std::make_tuple(at::kFloat, 5, true, 1024),
                                           std::make_tuple(at::kFloat, 3, false, 1024),
                                           std::make_tuple(at::kBFloat16, 2, true, 1024)));

}  // namespace
}  // namespace offtune::test
