#include "offtune/samples/llama.hpp"
#include "offtune/samples/workload.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/silu.h>

#include <string>
#include <string_view>

#include "decoder_parts.hpp"
#include "offtune/offloader.hpp"

namespace offtune::samples {
namespace {

constexpr std::string_view kConfig = "LlamaConfig";

// Llama's initialisation (decoder_parts.hpp): the projections that write into the residual stream
// are `wo` and `w2`.
void init_parameters(torch::nn::Module& module, at::Generator& gen, double residual_std,
                     c10::ScalarType dtype) {
  detail::init_parameters(module, gen, residual_std, dtype, {"wo.weight", "w2.weight"});
}

// [..., d] -> [..., d] rotated by the RoPE angles (the "rotate half" pairing: element i with i +
// d/2). cos/sin are [T, d/2] float32 and broadcast over the leading [B, H] dims. Computed in
// float32, as the reference Llama does, then cast back.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor xf = x.to(c10::kFloat);
  const at::Tensor x1 = xf.narrow(-1, 0, half);
  const at::Tensor x2 = xf.narrow(-1, half, half);
  return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1).to(x.scalar_type());
}

// [B, kv_heads, T, d] -> [B, kv_heads * n_rep, T, d], each kv head repeated n_rep times in place.
// Explicit rather than SDPA's enable_gqa: not every SDPA kernel (CPU flash, CUDA memory-efficient)
// takes grouped heads, and the math fallback would materialise the [T, T] scores.
at::Tensor repeat_kv(const at::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) {
    return x;
  }
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, h, n_rep, t, d}).reshape({b, h * n_rep, t, d});
}

}  // namespace

// ---- LlamaConfig -------------------------------------------------------------------------------

std::vector<std::string_view> LlamaConfig::preset_names() { return {"tiny", "small", "1b"}; }

LlamaConfig LlamaConfig::preset(std::string_view name) {
  LlamaConfig c;
  if (name == "tiny") {
    c.vocab_size = 512, c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
    c.ffn_hidden = 172, c.max_seq_len = 128;
  } else if (name == "small") {
    c.vocab_size = 4096, c.dim = 256, c.n_layers = 4, c.n_heads = 8, c.n_kv_heads = 4;
    c.ffn_hidden = 688, c.max_seq_len = 512;
  } else if (name == "1b") {
    c.vocab_size = 128256, c.dim = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8;
    c.ffn_hidden = 8192, c.max_seq_len = 4096, c.rope_theta = 500000.0;
  } else {
    detail::unknown_preset("Llama", name, preset_names());
  }
  return c;
}

void LlamaConfig::validate() const {
  const auto bad_config = [](const std::string& what) { detail::bad_config(kConfig, what); };
  detail::check_shape(kConfig, *this);
  if (head_dim() % 2 != 0) {
    bad_config("head_dim (dim / n_heads = " + std::to_string(head_dim()) +
               ") must be even for RoPE");
  }
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    bad_config("n_kv_heads (" + std::to_string(n_kv_heads) + ") must be > 0 and divide n_heads (" +
               std::to_string(n_heads) + ")");
  }
  if (ffn_hidden <= 0) bad_config("ffn_hidden must be > 0, got " + std::to_string(ffn_hidden));
  if (max_seq_len <= 0) bad_config("max_seq_len must be > 0, got " + std::to_string(max_seq_len));
  if (!(rope_theta > 0.0)) bad_config("rope_theta must be > 0");
  detail::check_numerics(kConfig, *this);
}

// ---- RMSNorm -----------------------------------------------------------------------------------

RMSNormImpl::RMSNormImpl(int64_t dim, double eps_value, c10::ScalarType dtype)
    : weight(register_parameter("weight", at::ones({dim}, at::TensorOptions().dtype(dtype)))),
      eps(eps_value) {}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  const at::Tensor xf = x.to(c10::kFloat);
  const at::Tensor normed = xf * (xf.pow(2).mean(-1, /*keepdim=*/true) + eps).rsqrt();
  return normed.to(x.scalar_type()) * weight;
}

// ---- Attention ---------------------------------------------------------------------------------

AttentionImpl::AttentionImpl(const LlamaConfig& config)
    : n_heads(config.n_heads), n_kv_heads(config.n_kv_heads), head_dim(config.head_dim()) {
  const auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  wq = register_module("wq", linear(config.dim, n_heads * head_dim));
  wk = register_module("wk", linear(config.dim, n_kv_heads * head_dim));
  wv = register_module("wv", linear(config.dim, n_kv_heads * head_dim));
  wo = register_module("wo", linear(n_heads * head_dim, config.dim));
  const int64_t r = config.lora_rank;
  const double alpha = config.lora_alpha;
  wq_lora = make_lora(*this, "wq_lora", config.dim, n_heads * head_dim, r, alpha, config.dtype);
  wk_lora = make_lora(*this, "wk_lora", config.dim, n_kv_heads * head_dim, r, alpha, config.dtype);
  wv_lora = make_lora(*this, "wv_lora", config.dim, n_kv_heads * head_dim, r, alpha, config.dtype);
  wo_lora = make_lora(*this, "wo_lora", n_heads * head_dim, config.dim, r, alpha, config.dtype);
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& cos,
                                  const at::Tensor& sin) {
  const int64_t b = x.size(0), t = x.size(1);
  at::Tensor q = detail::project(wq, wq_lora, x);
  at::Tensor k = detail::project(wk, wk_lora, x);
  at::Tensor v = detail::project(wv, wv_lora, x);
  // [B, T, heads * d] -> [B, heads, T, d], the layout SDPA takes.
  q = apply_rope(q.view({b, t, n_heads, head_dim}).transpose(1, 2), cos, sin);
  k = apply_rope(k.view({b, t, n_kv_heads, head_dim}).transpose(1, 2), cos, sin);
  v = v.view({b, t, n_kv_heads, head_dim}).transpose(1, 2);
  const int64_t n_rep = n_heads / n_kv_heads;
  at::Tensor out = at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep),
                                                    /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                    /*is_causal=*/true);
  out = out.transpose(1, 2).reshape({b, t, n_heads * head_dim});
  return detail::project(wo, wo_lora, out);
}

// ---- FeedForward -------------------------------------------------------------------------------

FeedForwardImpl::FeedForwardImpl(int64_t dim, int64_t hidden, int64_t lora_rank, double lora_alpha,
                                 c10::ScalarType dtype) {
  const auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  w1 = register_module("w1", linear(dim, hidden));
  w2 = register_module("w2", linear(hidden, dim));
  w3 = register_module("w3", linear(dim, hidden));
  w1_lora = make_lora(*this, "w1_lora", dim, hidden, lora_rank, lora_alpha, dtype);
  w2_lora = make_lora(*this, "w2_lora", hidden, dim, lora_rank, lora_alpha, dtype);
  w3_lora = make_lora(*this, "w3_lora", dim, hidden, lora_rank, lora_alpha, dtype);
}

at::Tensor FeedForwardImpl::forward(const at::Tensor& x) {
  const at::Tensor gate = detail::project(w1, w1_lora, x);
  const at::Tensor up = detail::project(w3, w3_lora, x);
  const at::Tensor hidden = at::silu(gate) * up;
  return detail::project(w2, w2_lora, hidden);
}

// ---- DecoderLayer ------------------------------------------------------------------------------

DecoderLayerImpl::DecoderLayerImpl(const LlamaConfig& config)
    : attention_norm(
          register_module("attention_norm", RMSNorm(config.dim, config.norm_eps, config.dtype))),
      attention(register_module("attention", Attention(config))),
      ffn_norm(register_module("ffn_norm", RMSNorm(config.dim, config.norm_eps, config.dtype))),
      feed_forward(register_module("feed_forward",
                                   FeedForward(config.dim, config.ffn_hidden, config.lora_rank,
                                               config.lora_alpha, config.dtype))) {}

at::Tensor DecoderLayerImpl::forward(const at::Tensor& x, const at::Tensor& cos,
                                     const at::Tensor& sin) {
  const at::Tensor h = detail::pre_norm_residual(
      x, attention_norm, attention, [&](const at::Tensor& in) { return attention(in, cos, sin); });
  return detail::pre_norm_residual(h, ffn_norm, feed_forward,
                                   [&](const at::Tensor& in) { return feed_forward(in); });
}

// ---- Llama -------------------------------------------------------------------------------------

LlamaImpl::LlamaImpl(const LlamaConfig& config, uint64_t seed)
    : DecoderBase("Llama"), config_(config) {
  config_.validate();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double residual_std = detail::residual_std(config_.n_layers);

  // Each part is initialised (and cast) as soon as it exists, so that building the "1b" model in
  // bf16 never holds more than one layer in float32 besides the embedding.
  tok_embeddings = register_module(
      "tok_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(config_.vocab_size, config_.dim)));
  init_parameters(*tok_embeddings, gen, residual_std, config_.dtype);

  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config_.n_layers; ++i) {
    DecoderLayer layer(config_);
    init_parameters(*layer, gen, residual_std, config_.dtype);
    layers->push_back(layer);
  }
  set_blocks(layers);

  norm = register_module("norm", RMSNorm(config_.dim, config_.norm_eps, config_.dtype));
  lm_head = register_module(
      "lm_head",
      torch::nn::Linear(torch::nn::LinearOptions(config_.dim, config_.vocab_size).bias(false)));
  init_parameters(*lm_head, gen, residual_std, config_.dtype);

  // Angles in float64 (positions up to 4096 times frequencies lose digits in float32), tables kept
  // in float32 whatever the model dtype: RoPE is applied in float32.
  const auto f64 = at::TensorOptions().dtype(c10::kDouble);
  const int64_t hd = config_.head_dim();
  const at::Tensor exponents = at::arange(0, hd, 2, f64) / static_cast<double>(hd);
  const at::Tensor inv_freq = at::pow(config_.rope_theta, exponents).reciprocal();
  const at::Tensor angles = at::outer(at::arange(config_.max_seq_len, f64), inv_freq);
  rope_cos_ = register_buffer("rope_cos", angles.cos().to(c10::kFloat));
  rope_sin_ = register_buffer("rope_sin", angles.sin().to(c10::kFloat));
  if (config_.lora_rank > 0) init_lora_and_freeze_base(*this, seed);
}

at::Tensor LlamaImpl::forward(const at::Tensor& tokens) {
  check_tokens(tokens, config_.max_seq_len);
  const int64_t t = tokens.size(1);
  // Slices of the registered buffers: views of storages the offloader never moves.
  const at::Tensor cos = rope_cos_.narrow(0, 0, t);
  const at::Tensor sin = rope_sin_.narrow(0, 0, t);

  at::Tensor h = detail::in_region(tok_embeddings, tokens);
  h = run_blocks(h, [cos, sin](torch::nn::Module& layer, const at::Tensor& x) {
    return static_cast<DecoderLayerImpl&>(layer).forward(x, cos, sin);
  });
  h = detail::in_region(norm, h);
  return detail::in_region(lm_head, h);
}

at::Tensor forward_backward(Llama& model, const Batch& batch, ActivationOffloader* offloader) {
  return lm_forward_backward([&](const at::Tensor& tokens) { return model(tokens); }, batch,
                             offloader);
}

}  // namespace offtune::samples
