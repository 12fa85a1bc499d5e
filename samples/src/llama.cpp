#include "offtune/samples/llama.hpp"
#include "offtune/samples/workload.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/silu.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "offtune/layer_offload.hpp"
#include "offtune/offloader.hpp"

namespace offtune::samples {
namespace {

constexpr double kInitStd = 0.02;

// Every parameter of `module` (in registration order, so the draw order is fixed) gets fresh values
// from `gen`: matrices ~ N(0, std), scaled down for the projections that write into the residual
// stream (`wo`, `w2`) so that its variance does not grow with depth; vectors (norm weights) are
// ones. Values are drawn in float32 and then cast, so that the model in bf16 is the float32 model
// rounded.
void init_parameters(torch::nn::Module& module, at::Generator& gen, double residual_std,
                     c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    if (item.key().find("_lora.") != std::string::npos) continue;  // lora.cpp draws adapters
    at::Tensor& param = item.value();
    at::Tensor values;
    if (param.dim() == 1) {
      values = at::ones(param.sizes(), at::TensorOptions().dtype(c10::kFloat));
    } else {
      const std::string& name = item.key();
      const bool residual = name.ends_with("wo.weight") || name.ends_with("w2.weight");
      values = at::empty(param.sizes(), at::TensorOptions().dtype(c10::kFloat));
      values.normal_(0.0, residual ? residual_std : kInitStd, gen);
    }
    // set_data keeps the parameter's identity (the module's registry and member share it).
    param.set_data(values.to(dtype));
  }
}

bool supported_dtype(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kBFloat16 || dtype == c10::kHalf;
}

[[noreturn]] void bad_config(const std::string& what) {
  throw std::invalid_argument("LlamaConfig: " + what);
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
    std::string valid;
    for (std::string_view n : preset_names()) {
      valid += valid.empty() ? "" : ", ";
      valid += n;
    }
    throw std::invalid_argument("unknown Llama preset '" + std::string(name) +
                                "' (valid: " + valid + ")");
  }
  return c;
}

void LlamaConfig::validate() const {
  if (vocab_size <= 0) bad_config("vocab_size must be > 0, got " + std::to_string(vocab_size));
  if (dim <= 0) bad_config("dim must be > 0, got " + std::to_string(dim));
  if (n_layers < 0) bad_config("n_layers must be >= 0, got " + std::to_string(n_layers));
  if (n_heads <= 0 || dim % n_heads != 0) {
    bad_config("n_heads (" + std::to_string(n_heads) + ") must be > 0 and divide dim (" +
               std::to_string(dim) + ")");
  }
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
  if (!(norm_eps > 0.0)) bad_config("norm_eps must be > 0");
  if (!supported_dtype(dtype)) {
    bad_config(std::string("dtype must be float32, bfloat16 or float16, got ") +
               c10::toString(dtype));
  }
  if (lora_rank < 0) bad_config("lora_rank must be >= 0, got " + std::to_string(lora_rank));
  if (lora_rank > 0 && !(lora_alpha > 0.0)) bad_config("lora_alpha must be > 0");
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
  at::Tensor q, k, v;
  {
    ModuleRegion region(wq.get());
    q = with_lora(wq(x), wq_lora, x);
  }
  {
    ModuleRegion region(wk.get());
    k = with_lora(wk(x), wk_lora, x);
  }
  {
    ModuleRegion region(wv.get());
    v = with_lora(wv(x), wv_lora, x);
  }
  // [B, T, heads * d] -> [B, heads, T, d], the layout SDPA takes.
  q = apply_rope(q.view({b, t, n_heads, head_dim}).transpose(1, 2), cos, sin);
  k = apply_rope(k.view({b, t, n_kv_heads, head_dim}).transpose(1, 2), cos, sin);
  v = v.view({b, t, n_kv_heads, head_dim}).transpose(1, 2);
  const int64_t n_rep = n_heads / n_kv_heads;
  at::Tensor out = at::scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep),
                                                    /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                    /*is_causal=*/true);
  out = out.transpose(1, 2).reshape({b, t, n_heads * head_dim});
  ModuleRegion region(wo.get());
  return with_lora(wo(out), wo_lora, out);
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
  at::Tensor gate, up;
  {
    ModuleRegion region(w1.get());
    gate = with_lora(w1(x), w1_lora, x);
  }
  {
    ModuleRegion region(w3.get());
    up = with_lora(w3(x), w3_lora, x);
  }
  const at::Tensor hidden = at::silu(gate) * up;
  ModuleRegion region(w2.get());
  return with_lora(w2(hidden), w2_lora, hidden);
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
  at::Tensor h;
  {
    at::Tensor normed;
    {
      ModuleRegion region(attention_norm.get());
      normed = attention_norm(x);
    }
    ModuleRegion region(attention.get());
    h = x + attention(normed, cos, sin);
  }
  at::Tensor normed;
  {
    ModuleRegion region(ffn_norm.get());
    normed = ffn_norm(h);
  }
  ModuleRegion region(feed_forward.get());
  return h + feed_forward(normed);
}

// ---- Llama -------------------------------------------------------------------------------------

LlamaImpl::LlamaImpl(const LlamaConfig& config, uint64_t seed) : config_(config) {
  config_.validate();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto depth = static_cast<double>(std::max<int64_t>(config_.n_layers, 1));
  const double residual_std = kInitStd / std::sqrt(2.0 * depth);

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
    layer_list_.push_back(layer);
  }

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

void LlamaImpl::set_layer_offload(std::shared_ptr<LayerOffloader> offloader) {
  if (offloader && offloader->blocks() == 0) {
    for (DecoderLayer& layer : layer_list_) offloader->add_block(frozen_parameters(*layer));
  } else if (offloader && offloader->blocks() != static_cast<int64_t>(layer_list_.size())) {
    throw std::invalid_argument("Llama::set_layer_offload: the layer offloader holds " +
                                std::to_string(offloader->blocks()) + " blocks, the model has " +
                                std::to_string(layer_list_.size()));
  }
  layer_offload_ = std::move(offloader);
}

at::Tensor LlamaImpl::forward(const at::Tensor& tokens) {
  if (tokens.dim() != 2 || tokens.scalar_type() != c10::kLong) {
    throw std::invalid_argument("Llama::forward: tokens must be int64 [batch, seq], got " +
                                std::string(c10::toString(tokens.scalar_type())) + " with " +
                                std::to_string(tokens.dim()) + " dims");
  }
  const int64_t t = tokens.size(1);
  if (t > config_.max_seq_len) {
    throw std::invalid_argument("Llama::forward: sequence length " + std::to_string(t) +
                                " exceeds max_seq_len " + std::to_string(config_.max_seq_len));
  }
  // Slices of the registered buffers: views of storages the offloader never moves.
  const at::Tensor cos = rope_cos_.narrow(0, 0, t);
  const at::Tensor sin = rope_sin_.narrow(0, 0, t);

  at::Tensor h;
  {
    ModuleRegion region(tok_embeddings.get());
    h = tok_embeddings(tokens);
  }
  detail::LayerTrace trace(layer_hooks_, static_cast<int64_t>(layer_list_.size()));
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    DecoderLayer& layer = layer_list_[i];
    ModuleRegion region(layer.get());
    const auto index = static_cast<int64_t>(i);
    const auto traced = trace.block(index, h);
    // Captured by value: a checkpointed region reruns in backward, after this frame is gone. The
    // layer offloader is entered inside, so that the recompute brings the block's weights back.
    auto run = [l = layer.ptr(), cos, sin, lo = layer_offload_, index](const at::Tensor& x) {
      std::optional<LayerOffloader::Resident> resident;
      if (lo) resident.emplace(lo->block(index));
      return l->forward(x, cos, sin);
    };
    h = checkpoint_.applies(index) ? checkpoint(run, h) : run(h);
  }
  trace.finish(h);
  {
    ModuleRegion region(norm.get());
    h = norm(h);
  }
  ModuleRegion region(lm_head.get());
  return lm_head(h);
}

at::Tensor forward_backward(Llama& model, const Batch& batch, ActivationOffloader* offloader) {
  return lm_forward_backward([&](const at::Tensor& tokens) { return model(tokens); }, batch,
                             offloader);
}

}  // namespace offtune::samples
