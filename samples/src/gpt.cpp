#include "offtune/samples/gpt.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "offtune/layer_offload.hpp"
#include "offtune/offloader.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune::samples {
namespace {

constexpr double kInitStd = 0.02;

// GPT-2's initialisation, drawn from `gen` in registration order (so the draw order is fixed):
// matrices and embeddings ~ N(0, 0.02), the projections that write into the residual stream
// (`c_proj`) scaled down by sqrt(2 * layers) so that its variance does not grow with depth; biases
// zero; LayerNorm weights one. Values are drawn in float32 and then cast, so that the bf16 model is
// the float32 model rounded.
void init_parameters(torch::nn::Module& module, at::Generator& gen, double residual_std,
                     c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const auto f32 = at::TensorOptions().dtype(c10::kFloat);
  for (auto& item : module.named_parameters()) {
    at::Tensor& param = item.value();
    const std::string& name = item.key();
    if (name.find("_lora.") != std::string::npos) continue;  // lora.cpp draws adapters
    at::Tensor values;
    if (name.ends_with("bias")) {
      values = at::zeros(param.sizes(), f32);
    } else if (param.dim() == 1) {
      values = at::ones(param.sizes(), f32);
    } else {
      values = at::empty(param.sizes(), f32);
      values.normal_(0.0, name.ends_with("c_proj.weight") ? residual_std : kInitStd, gen);
    }
    // set_data keeps the parameter's identity (the module's registry and member share it).
    param.set_data(values.to(dtype));
  }
}

[[noreturn]] void bad_config(const std::string& what) {
  throw std::invalid_argument("GptConfig: " + what);
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
    std::string valid;
    for (std::string_view n : preset_names()) {
      valid += valid.empty() ? "" : ", ";
      valid += n;
    }
    throw std::invalid_argument("unknown GPT preset '" + std::string(name) + "' (valid: " + valid +
                                ")");
  }
  c.ffn_hidden = 4 * c.dim;
  return c;
}

void GptConfig::validate() const {
  if (vocab_size <= 0) bad_config("vocab_size must be > 0, got " + std::to_string(vocab_size));
  if (dim <= 0) bad_config("dim must be > 0, got " + std::to_string(dim));
  if (n_layers < 0) bad_config("n_layers must be >= 0, got " + std::to_string(n_layers));
  if (n_heads <= 0 || dim % n_heads != 0) {
    bad_config("n_heads (" + std::to_string(n_heads) + ") must be > 0 and divide dim (" +
               std::to_string(dim) + ")");
  }
  if (ffn_hidden < 0) {
    bad_config("ffn_hidden must be >= 0 (0: 4 * dim), got " + std::to_string(ffn_hidden));
  }
  if (max_seq_len <= 0) bad_config("max_seq_len must be > 0, got " + std::to_string(max_seq_len));
  if (!(norm_eps > 0.0)) bad_config("norm_eps must be > 0");
  if (dtype != c10::kFloat && dtype != c10::kBFloat16 && dtype != c10::kHalf) {
    bad_config(std::string("dtype must be float32, bfloat16 or float16, got ") +
               c10::toString(dtype));
  }
  if (lora_rank < 0) bad_config("lora_rank must be >= 0, got " + std::to_string(lora_rank));
  if (lora_rank > 0 && !(lora_alpha > 0.0)) bad_config("lora_alpha must be > 0");
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
  at::Tensor qkv;
  {
    ModuleRegion region(c_attn.get());
    qkv = with_lora(c_attn(x), c_attn_lora, x);
  }
  // q, k and v are strided views of the one qkv storage; [B, T, heads, d] -> [B, heads, T, d], the
  // layout SDPA takes. The views keep that storage shared, so an offloader moves it once.
  const auto heads = [&](int64_t part) {
    return qkv.narrow(-1, part * dim, dim).view({b, t, n_heads, head_dim}).transpose(1, 2);
  };
  at::Tensor out = at::scaled_dot_product_attention(heads(0), heads(1), heads(2),
                                                    /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                    /*is_causal=*/true);
  out = out.transpose(1, 2).reshape({b, t, dim});
  ModuleRegion region(c_proj.get());
  return with_lora(c_proj(out), c_proj_lora, out);
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
  at::Tensor hidden;
  {
    ModuleRegion region(c_fc.get());
    hidden = with_lora(c_fc(x), c_fc_lora, x);
  }
  // GPT-2's GELU is the tanh approximation.
  hidden = at::gelu(hidden, "tanh");
  ModuleRegion region(c_proj.get());
  return with_lora(c_proj(hidden), c_proj_lora, hidden);
}

// ---- GptBlock ----------------------------------------------------------------------------------

GptBlockImpl::GptBlockImpl(const GptConfig& config)
    : ln_1(register_module("ln_1", layer_norm(config))),
      attn(register_module("attn", GptAttention(config))),
      ln_2(register_module("ln_2", layer_norm(config))),
      mlp(register_module("mlp", GptMlp(config.dim, config.mlp_hidden(), config.lora_rank,
                                        config.lora_alpha, config.dtype))) {}

at::Tensor GptBlockImpl::forward(const at::Tensor& x) {
  at::Tensor h;
  {
    at::Tensor normed;
    {
      ModuleRegion region(ln_1.get());
      normed = ln_1(x);
    }
    ModuleRegion region(attn.get());
    h = x + attn(normed);
  }
  at::Tensor normed;
  {
    ModuleRegion region(ln_2.get());
    normed = ln_2(h);
  }
  ModuleRegion region(mlp.get());
  return h + mlp(normed);
}

// ---- Gpt ---------------------------------------------------------------------------------------

GptImpl::GptImpl(const GptConfig& config, uint64_t seed) : config_(config) {
  config_.validate();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto depth = static_cast<double>(std::max<int64_t>(config_.n_layers, 1));
  const double residual_std = kInitStd / std::sqrt(2.0 * depth);

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
    block_list_.push_back(block);
  }

  ln_f = register_module("ln_f", layer_norm(config_));
  init_parameters(*ln_f, gen, residual_std, config_.dtype);
  lm_head = register_module(
      "lm_head",
      torch::nn::Linear(torch::nn::LinearOptions(config_.dim, config_.vocab_size).bias(false)));
  init_parameters(*lm_head, gen, residual_std, config_.dtype);
  if (config_.lora_rank > 0) init_lora_and_freeze_base(*this, seed);
}

void GptImpl::set_layer_offload(std::shared_ptr<LayerOffloader> layers) {
  if (layers && layers->blocks() == 0) {
    for (GptBlock& block : block_list_) layers->add_block(frozen_parameters(*block));
  } else if (layers && layers->blocks() != static_cast<int64_t>(block_list_.size())) {
    throw std::invalid_argument("Gpt::set_layer_offload: the layer offloader holds " +
                                std::to_string(layers->blocks()) + " blocks, the model has " +
                                std::to_string(block_list_.size()));
  }
  layer_offload_ = std::move(layers);
}

at::Tensor GptImpl::forward(const at::Tensor& tokens) {
  if (tokens.dim() != 2 || tokens.scalar_type() != c10::kLong) {
    throw std::invalid_argument("Gpt::forward: tokens must be int64 [batch, seq], got " +
                                std::string(c10::toString(tokens.scalar_type())) + " with " +
                                std::to_string(tokens.dim()) + " dims");
  }
  const int64_t t = tokens.size(1);
  if (t > config_.max_seq_len) {
    throw std::invalid_argument("Gpt::forward: sequence length " + std::to_string(t) +
                                " exceeds max_seq_len " + std::to_string(config_.max_seq_len));
  }
  // Positions on the tokens' device; [T, dim] broadcasts over the batch.
  const at::Tensor positions = at::arange(t, tokens.options());

  at::Tensor x;
  {
    ModuleRegion region(wte.get());
    x = wte(tokens);
  }
  {
    ModuleRegion region(wpe.get());
    x = x + wpe(positions);
  }
  detail::LayerTrace trace(layer_hooks_, static_cast<int64_t>(block_list_.size()));
  for (size_t i = 0; i < block_list_.size(); ++i) {
    GptBlock& block = block_list_[i];
    ModuleRegion region(block.get());
    const auto index = static_cast<int64_t>(i);
    const auto traced = trace.block(index, x);
    // Captured by value: a checkpointed region reruns in backward, after this frame is gone. The
    // layer offloader is entered inside, so that the recompute brings the block's weights back.
    auto run = [b = block.ptr(), layers = layer_offload_, index](const at::Tensor& in) {
      std::optional<LayerOffloader::Resident> resident;
      if (layers) resident.emplace(layers->block(index));
      return b->forward(in);
    };
    x = checkpoint_.applies(index) ? checkpoint(run, x) : run(x);
  }
  trace.finish(x);
  {
    ModuleRegion region(ln_f.get());
    x = ln_f(x);
  }
  ModuleRegion region(lm_head.get());
  return lm_head(x);
}

at::Tensor forward_backward(Gpt& model, const Batch& batch, ActivationOffloader* offloader) {
  return lm_forward_backward([&](const at::Tensor& tokens) { return model(tokens); }, batch,
                             offloader);
}

}  // namespace offtune::samples
