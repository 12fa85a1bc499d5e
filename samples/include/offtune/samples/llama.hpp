// A Llama-like decoder written as torch::nn modules: the reference workload of offtune's demo,
// benchmarks and tests. It has what makes activation offloading interesting on a real LLM (RMSNorm
// computed in float32, grouped-query attention with RoPE through scaled_dot_product_attention, a
// SwiGLU MLP, a large output head) at sizes from a CI-sized "tiny" to a ~1B "1b".
//
// Every submodule call in a forward runs under an offtune::ModuleRegion for that submodule, the C++
// stand-in for the forward pre-hooks Python's offloading factory installs: it is how an offloader
// made by make_offloader_for() leaves the output head (`lm_head`) out.
//
// Initialisation is deterministic for a given seed and independent of the global RNG and of the
// dtype: weights are drawn in float32 from a private generator, then cast to the config's dtype.
#pragma once

#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
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

struct LlamaConfig {
  int64_t vocab_size = 512;
  int64_t dim = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;  // grouped-query attention: n_heads must be a multiple of it
  int64_t ffn_hidden = 172;
  int64_t max_seq_len = 128;  // RoPE tables are precomputed up to this length
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  c10::ScalarType dtype = c10::kFloat;  // parameters' dtype: kFloat, kBFloat16 or kHalf
  // LoRA (lora.hpp): adapters of this rank on every attention and MLP projection, the base
  // parameters frozen; 0 = none, every parameter trains.
  int64_t lora_rank = 0;
  double lora_alpha = 16.0;  // adapters scale their output by lora_alpha / lora_rank

  // "tiny" (CI), "small", "1b" (Llama-3.2-1B shapes; ~1.5B parameters as the head is not tied to
  // the embedding). dtype is kFloat; set it afterwards. Throws std::invalid_argument naming the
  // valid presets on an unknown name.
  static LlamaConfig preset(std::string_view name);
  static std::vector<std::string_view> preset_names();

  int64_t head_dim() const { return dim / n_heads; }
  // Throws std::invalid_argument (one line) naming the first inconsistent field.
  void validate() const;
};

// Root-mean-square layer norm. Normalises in float32 whatever the input dtype (bf16/fp16 lose too
// much in the mean of squares), casts back, then scales by `weight`.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps, c10::ScalarType dtype = c10::kFloat);
  at::Tensor forward(const at::Tensor& x);

  at::Tensor weight;
  double eps;
};
TORCH_MODULE(RMSNorm);

// Causal self-attention with grouped-query heads and rotary position embeddings.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const LlamaConfig& config);
  // x: [B, T, dim]; cos/sin: [T, head_dim / 2] (float32 RoPE tables, already sliced to T).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  // LoRA adapters (`wq_lora`, ...), null without LoRA.
  std::shared_ptr<LoraImpl> wq_lora, wk_lora, wv_lora, wo_lora;
  int64_t n_heads, n_kv_heads, head_dim;
};
TORCH_MODULE(Attention);

// SwiGLU MLP: w2(silu(w1(x)) * w3(x)).
class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t dim, int64_t hidden, int64_t lora_rank = 0, double lora_alpha = 16.0,
                  c10::ScalarType dtype = c10::kFloat);
  at::Tensor forward(const at::Tensor& x);

  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
  std::shared_ptr<LoraImpl> w1_lora, w2_lora, w3_lora;  // null without LoRA
};
TORCH_MODULE(FeedForward);

// Pre-norm decoder block: h = x + attention(attention_norm(x)); out = h +
// feed_forward(ffn_norm(h)).
class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const LlamaConfig& config);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

  RMSNorm attention_norm{nullptr};
  Attention attention{nullptr};
  RMSNorm ffn_norm{nullptr};
  FeedForward feed_forward{nullptr};
};
TORCH_MODULE(DecoderLayer);

class LlamaImpl : public DecoderBase {
 public:
  // Validates the config (std::invalid_argument) and builds the model on the CPU in config.dtype;
  // move it with ->to(device). The same config and seed give bit-identical parameters.
  explicit LlamaImpl(const LlamaConfig& config, uint64_t seed = 0);

  // tokens: int64 [B, T] with T <= max_seq_len. Returns logits [B, T, vocab_size] in config.dtype.
  at::Tensor forward(const at::Tensor& tokens);

  const LlamaConfig& config() const { return config_; }
  // set_layer_hooks, set_checkpoint, set_layer_offload: DecoderBase (decoder.hpp).

  torch::nn::Embedding tok_embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};  // of DecoderLayer
  RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  LlamaConfig config_;
  // RoPE tables [max_seq_len, head_dim / 2], float32, registered as buffers ("rope_cos",
  // "rope_sin") so that they follow the model's device and are never offloaded.
  at::Tensor rope_cos_, rope_sin_;
};
TORCH_MODULE(Llama);

struct Batch;

// One training step's autograd part: forward (under `offloader`'s scope when one is given, so that
// saved tensors are offloaded), lm_loss, backward. The logits leave scope before backward: the loss
// graph keeps what it needs, and holding [batch, seq, vocab] through backward would distort the
// peak. Returns the (detached) loss; gradients accumulate into the parameters.
at::Tensor forward_backward(Llama& model, const Batch& batch, ActivationOffloader* offloader);

}  // namespace offtune::samples
