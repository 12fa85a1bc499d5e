// A GPT-2-like decoder written as torch::nn modules: the second built-in transformer, shaped
// differently from the Llama sample where it matters to an offloader (LayerNorm with biases, a
// learned positional embedding, one fused qkv projection whose output is split into views, a
// GELU MLP four times wider than the residual stream). Module names follow GPT-2's (`wte`, `wpe`,
// `h.N.ln_1`, `h.N.attn.c_attn`, ..., `ln_f`), with an untied `lm_head`, so that weights and
// offloading decisions can be compared name for name with a Hugging Face model.
//
// As in the Llama sample, every submodule call in a forward runs under an offtune::ModuleRegion for
// that submodule (how make_offloader_for() leaves `lm_head` out), and initialisation is
// deterministic per seed: values are drawn in float32 from a private generator, then cast to the
// config's dtype.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "offtune/samples/decoder.hpp"
#include "offtune/samples/lora.hpp"

namespace offtune {
class ActivationOffloader;
}  // namespace offtune

namespace offtune::samples {

struct GptConfig {
  int64_t vocab_size = 512;
  int64_t dim = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t ffn_hidden = 0;     // MLP width; 0 means GPT-2's 4 * dim (see mlp_hidden())
  int64_t max_seq_len = 128;  // rows of the positional embedding
  double norm_eps = 1e-5;
  c10::ScalarType dtype = c10::kFloat;  // parameters' dtype: kFloat, kBFloat16 or kHalf
  // LoRA (lora.hpp): adapters of this rank on c_attn, the attention's c_proj, c_fc and the MLP's
  // c_proj, the base parameters frozen; 0 = none, every parameter trains.
  int64_t lora_rank = 0;
  double lora_alpha = 16.0;  // adapters scale their output by lora_alpha / lora_rank

  // "gpt-tiny" (CI-sized: vocab 512, dim 64, 2 layers, 4 heads, 128 positions) and "gpt-small"
  // (vocab 4096, dim 256, 4 layers, 8 heads, 512 positions). dtype is kFloat; set it afterwards.
  // Throws std::invalid_argument naming the valid presets on an unknown name.
  static GptConfig preset(std::string_view name);
  static std::vector<std::string_view> preset_names();

  int64_t head_dim() const { return dim / n_heads; }
  int64_t mlp_hidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * dim; }
  // Throws std::invalid_argument (one line) naming the first inconsistent field.
  void validate() const;
};

// Causal self-attention: one fused projection to q, k and v (`c_attn`, with bias), SDPA, and the
// output projection (`c_proj`).
class GptAttentionImpl : public torch::nn::Module {
 public:
  explicit GptAttentionImpl(const GptConfig& config);
  // x: [B, T, dim] -> [B, T, dim].
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  std::shared_ptr<LoraImpl> c_attn_lora, c_proj_lora;  // null without LoRA
  int64_t n_heads, head_dim;
};
TORCH_MODULE(GptAttention);

// c_proj(gelu_tanh(c_fc(x))).
class GptMlpImpl : public torch::nn::Module {
 public:
  GptMlpImpl(int64_t dim, int64_t hidden, int64_t lora_rank = 0, double lora_alpha = 16.0,
             c10::ScalarType dtype = c10::kFloat);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  std::shared_ptr<LoraImpl> c_fc_lora, c_proj_lora;  // null without LoRA
};
TORCH_MODULE(GptMlp);

// Pre-LayerNorm block: h = x + attn(ln_1(x)); out = h + mlp(ln_2(h)).
class GptBlockImpl : public torch::nn::Module {
 public:
  explicit GptBlockImpl(const GptConfig& config);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::LayerNorm ln_1{nullptr};
  GptAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  GptMlp mlp{nullptr};
};
TORCH_MODULE(GptBlock);

class GptImpl : public DecoderBase {
 public:
  // Validates the config (std::invalid_argument) and builds the model on the CPU in config.dtype;
  // move it with ->to(device). The same config and seed give bit-identical parameters.
  explicit GptImpl(const GptConfig& config, uint64_t seed = 0);

  // tokens: int64 [B, T] with T <= max_seq_len. Returns logits [B, T, vocab_size] in config.dtype.
  at::Tensor forward(const at::Tensor& tokens);

  const GptConfig& config() const { return config_; }
  // set_layer_hooks, set_checkpoint, set_layer_offload: DecoderBase (decoder.hpp).

  torch::nn::Embedding wte{nullptr};  // token embedding [vocab_size, dim]
  torch::nn::Embedding wpe{nullptr};  // positional embedding [max_seq_len, dim]
  torch::nn::ModuleList h{nullptr};   // of GptBlock
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  // not tied to wte

 private:
  GptConfig config_;
};
TORCH_MODULE(Gpt);

struct Batch;

// One training step's autograd part, as for the Llama sample: forward (under `offloader`'s scope
// when one is given), lm_loss, backward, with the logits released before backward. Returns the
// (detached) loss; gradients accumulate into the parameters.
at::Tensor forward_backward(Gpt& model, const Batch& batch, ActivationOffloader* offloader);

}  // namespace offtune::samples
