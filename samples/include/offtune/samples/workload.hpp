// The synthetic training workload shared by the demo, benchmarks and tests: deterministic token
// batches for next-token prediction, the language-model loss, and small helpers (dtype names,
// parameter counts) that every such program needs. Batches depend on the seed only, never on the
// global RNG, so that two runs compared against each other (offloading on and off) see the same
// data.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string_view>

#include "offtune/host_sim.hpp"

namespace torch::nn {
class Module;
}

namespace offtune {
class ActivationOffloader;
}

namespace offtune::samples {

struct Batch {
  at::Tensor tokens;   // int64 [batch, seq], values in [0, vocab)
  at::Tensor targets;  // int64 [batch, seq]: tokens shifted left by one (the next token)
};

// Draws [batch, seq + 1] uniform tokens from a CPU generator seeded with `seed` and splits them
// into inputs and next-token targets, then moves both to `device`. Throws std::invalid_argument
// when a size is not positive.
Batch make_token_batch(int64_t batch, int64_t seq, int64_t vocab, uint64_t seed,
                       c10::Device device);

// Mean cross entropy of logits [..., vocab] against targets [...], computed in float32 whatever the
// logits' dtype (bf16 log-softmax over a large vocabulary is too coarse). Returns a float32 scalar.
at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& targets);

// "fp32"/"float32"/"float", "bf16"/"bfloat16", "fp16"/"float16"/"half"; throws
// std::invalid_argument listing the valid names otherwise.
c10::ScalarType parse_dtype(std::string_view name);
// The short name parse_dtype accepts ("fp32", "bf16", "fp16"), or c10's name for other types.
std::string_view dtype_name(c10::ScalarType dtype);

// Number of parameter elements of `module` and its submodules.
int64_t count_parameters(const torch::nn::Module& module);

// Intra-op threads for a training program (offtune/host_sim.hpp says why host-sim leaves a core).
using host_sim::default_threads;

// One training step's autograd part for a language model: forward (under `offloader`'s scope when
// one is given), lm_loss, backward. The logits leave scope before backward: the loss graph keeps
// what it needs, and holding [batch, seq, vocab] through backward would distort the peak. Returns
// the detached loss; gradients accumulate into the parameters.
at::Tensor lm_forward_backward(const std::function<at::Tensor(const at::Tensor&)>& forward,
                               const Batch& batch, ActivationOffloader* offloader);

}  // namespace offtune::samples
