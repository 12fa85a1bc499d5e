#include "offtune/samples/gpt.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/scaled_dot_product_attention.h>

#include <string>
#include <string_view>

#include "decoder_parts.hpp"
#include "offtune/offloader.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune::samples {
namespace {

constexpr std::string_view kConfig = "GptConfig";

// GPT-2's initialisation (decoder_parts.hpp): the projections that write into the residual
// stream are the `c_proj`s.
void init_parameters(torch::nn::Module& module, at::Generator& gen, double residual_std,
                     c10::ScalarType dtype) {
  detail::init_parameters(module, gen, residual_std, dtype, {"c_proj.weight"});
}

torch::nn::LayerNorm layer_norm(const GptConfig& config) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({config.dim}).eps(config.norm_eps).elementwise_affine(true));
}

}  // namespace

// ---- GptConfig ---------------------------------------------------------------------------------

std::vector<std::string_view> GptConfig::preset_names() { return {"gpt-tiny", "gpt-small"}; }

GptConfig GptConfig::preset(std::string_view name) {
  GptConfig c;
  if (name == "gpt-tiny") {
    c.vocab_size = 512, c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.max_seq_len = 128;
  } else if (name == "gpt-small") {
    c.vocab_size = 4096, c.dim = 256, c.n_layers = 4, c.n_heads = 8, c.max_seq_len = 512;
  } else {
    detail::unknown_preset("GPT", name, preset_names());
  }
  c.ffn_hidden = 4 * c.dim;
  return c;
}

void GptConfig::validate() const {
  detail::check_shape(kConfig, *this);
  if (ffn_hidden < 0) {
    detail::bad_config(kConfig,
                       "ffn_hidden must be >= 0 (0: 4 * dim), got " + std::to_string(ffn_hidden));
  }
  if (max_seq_len <= 0) {
    detail::bad_config(kConfig, "max_seq_len must be > 0, got " + std::to_string(max_seq_len));
  }
  detail::check_numerics(kConfig, *this);
}

// ---- GptAttention ------------------------------------------------------------------------------

GptAttentionImpl::GptAttentionImpl(const GptConfig& config)
    : n_heads(config.n_heads), head_dim(config.head_dim()) {
  c_attn = register_module("c_attn", torch::nn::Linear(config.dim, 3 * config.dim));
  c_proj = register_module("c_proj", torch::nn::Linear(config.dim, config.dim));
  c_attn_lora = make_lora(*this, "c_attn_lora", config.dim, 3 * config.dim, config.lora_rank,
                          config.lora_alpha, config.dtype);
  c_proj_lora = make_lora(*this, "c_proj_lora", config.dim, config.dim, config.lora_rank,
                          config.lora_alpha, config.dtype);
}

at::Tensor GptAttentionImpl::forward(const at::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), dim = n_heads * head_dim;
  const at::Tensor qkv = detail::project(c_attn, c_attn_lora, x);
  // q, k and v are strided views of the one qkv storage; [B, T, heads, d] -> [B, heads, T, d], the
  // layout SDPA takes. The views keep that storage shared, so an offloader moves it once.
  const auto heads = [&](int64_t part) {
    return qkv.narrow(-1, part * dim, dim).view({b, t, n_heads, head_dim}).transpose(1, 2);
  };
  at::Tensor out = at::scaled_dot_product_attention(heads(0), heads(1), heads(2),
                                                    /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                    /*is_causal=*/true);
  out = out.transpose(1, 2).reshape({b, t, dim});
  return detail::project(c_proj, c_proj_lora, out);
}

// ---- GptMlp ------------------------------------------------------------------------------------

GptMlpImpl::GptMlpImpl(int64_t dim, int64_t hidden, int64_t lora_rank, double lora_alpha,
                       c10::ScalarType dtype) {
  c_fc = register_module("c_fc", torch::nn::Linear(dim, hidden));
  c_proj = register_module("c_proj", torch::nn::Linear(hidden, dim));
  c_fc_lora = make_lora(*this, "c_fc_lora", dim, hidden, lora_rank, lora_alpha, dtype);
  c_proj_lora = make_lora(*this, "c_proj_lora", hidden, dim, lora_rank, lora_alpha, dtype);
}

at::Tensor GptMlpImpl::forward(const at::Tensor& x) {
  // GPT-2's GELU is the tanh approximation.
  const at::Tensor hidden = at::gelu(detail::project(c_fc, c_fc_lora, x), "tanh");
  return detail::project(c_proj, c_proj_lora, hidden);
}

// ---- GptBlock ----------------------------------------------------------------------------------

GptBlockImpl::GptBlockImpl(const GptConfig& config)
    : ln_1(register_module("ln_1", layer_norm(config))),
      attn(register_module("attn", GptAttention(config))),
      ln_2(register_module("ln_2", layer_norm(config))),
      mlp(register_module("mlp", GptMlp(config.dim, config.mlp_hidden(), config.lora_rank,
                                        config.lora_alpha, config.dtype))) {}

at::Tensor GptBlockImpl::forward(const at::Tensor& x) {
  const at::Tensor h =
      detail::pre_norm_residual(x, ln_1, attn, [&](const at::Tensor& in) { return attn(in); });
  return detail::pre_norm_residual(h, ln_2, mlp, [&](const at::Tensor& in) { return mlp(in); });
}

// ---- Gpt ---------------------------------------------------------------------------------------

GptImpl::GptImpl(const GptConfig& config, uint64_t seed) : DecoderBase("Gpt"), config_(config) {
  config_.validate();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double residual_std = detail::residual_std(config_.n_layers);

  // Each part is initialised (and cast) as soon as it exists, so that a bf16 model never holds more
  // than one part in float32 besides the one being built.
  wte = register_module(
      "wte", torch::nn::Embedding(torch::nn::EmbeddingOptions(config_.vocab_size, config_.dim)));
  init_parameters(*wte, gen, residual_std, config_.dtype);
  wpe = register_module(
      "wpe", torch::nn::Embedding(torch::nn::EmbeddingOptions(config_.max_seq_len, config_.dim)));
  init_parameters(*wpe, gen, residual_std, config_.dtype);

  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    GptBlock block(config_);
    init_parameters(*block, gen, residual_std, config_.dtype);
    h->push_back(block);
  }
  set_blocks(h);

  ln_f = register_module("ln_f", layer_norm(config_));
  init_parameters(*ln_f, gen, residual_std, config_.dtype);
  lm_head = register_module(
      "lm_head",
      torch::nn::Linear(torch::nn::LinearOptions(config_.dim, config_.vocab_size).bias(false)));
  init_parameters(*lm_head, gen, residual_std, config_.dtype);
  if (config_.lora_rank > 0) init_lora_and_freeze_base(*this, seed);
}

at::Tensor GptImpl::forward(const at::Tensor& tokens) {
  check_tokens(tokens, config_.max_seq_len);
  const int64_t t = tokens.size(1);
  // Positions on the tokens' device; [T, dim] broadcasts over the batch.
  const at::Tensor positions = at::arange(t, tokens.options());

  at::Tensor x = detail::in_region(wte, tokens);
  {
    ModuleRegion region(wpe.get());
    x = x + wpe(positions);
  }
  x = run_blocks(x, [](torch::nn::Module& block, const at::Tensor& in) {
    return static_cast<GptBlockImpl&>(block).forward(in);
  });
  x = detail::in_region(ln_f, x);
  return detail::in_region(lm_head, x);
}

at::Tensor forward_backward(Gpt& model, const Batch& batch, ActivationOffloader* offloader) {
  return lm_forward_backward([&](const at::Tensor& tokens) { return model(tokens); }, batch,
                             offloader);
}

}  // namespace offtune::samples
