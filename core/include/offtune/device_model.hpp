// The device model: how long the ops of a step would take on a named GPU, so that host-sim can time
// a step as that GPU would instead of as this CPU does. A documented mode of host-sim
// (host_sim::set_device_model), deterministic: the same step gives the same time on every run and
// every machine.
//
// Each kernel is timed by a roofline: the larger of its FLOPs over the device's peak compute and
// its bytes moved over the device's memory bandwidth, each scaled by an efficiency for the op's
// class, plus a fixed cost per kernel (launch gap and tail). Ops that launch no kernel (views,
// empty tensors) take no time. The figures below are the vendors' published peaks; the efficiencies
// and the per-kernel cost are planning assumptions, stated here and replaceable with a model file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace offtune {

// What bounds a kernel, and which efficiency applies.
enum class OpClass : uint8_t {
  NoKernel,   // views, reshapes, empty tensors: no time
  Matmul,     // mm, addmm, bmm, linear, matmul: tensor cores (bf16/fp16) or CUDA cores (fp32)
  Attention,  // fused scaled-dot-product attention, forward and backward
  Memory,     // everything else: elementwise, reductions, norms, copies (bandwidth-bound)
};
std::string_view to_string(OpClass c);

struct DeviceModel {
  std::string name;   // profile name ("h100-sxm") or the file it came from
  std::string title;  // what it models, for reports ("NVIDIA H100 SXM5 80GB")
  // Dense peaks. fp32: CUDA cores (PyTorch does not use TF32 for fp32 matmuls by default);
  // bf16/fp16: tensor cores with fp32 accumulation, without sparsity.
  double fp32_tflops = 0.0;
  double bf16_tflops = 0.0;
  double memory_gbps = 0.0;        // device memory bandwidth, GB/s (1e9 bytes/s)
  int64_t memory_bytes = 0;        // device memory (informational; --device-capacity sets a cap)
  int64_t kernel_overhead_ns = 0;  // fixed cost of each kernel
  // What the process holds on the device besides its tensors (docs/memory.md, "What the device
  // really holds"):
  // - context_bytes: the CUDA context, its kernel images and the libraries' own device state,
  //   outside the caching allocator (torch's counters never see it; nvidia-smi does). A planning
  //   estimate per part, replaceable in a model file; the GPU issue measures it.
  // - blas_workspace_bytes: the cuBLAS workspace torch gives each (cuBLAS handle, stream) pair on
  //   its first matmul, from the caching allocator (so inside allocated and reserved) and kept for
  //   the process's life; cuBLASLt shares it (torch's unified workspace). torch's default: 32 MiB
  //   on compute capability 9, 10 and 12, else 8 MiB + 128 KiB; CUBLAS_WORKSPACE_CONFIG, when set,
  //   overrides it as in torch. A training step uses two pairs: forward on the caller's thread and
  //   backward on autograd's device thread, each with its own handle.
  int64_t context_bytes = 0;
  int64_t blas_workspace_bytes = 0;
  // Share of the peak a kernel of each class reaches.
  double matmul_efficiency = 0.7;
  double attention_efficiency = 0.5;
  double memory_efficiency = 0.8;
  std::string source;  // where the figures come from

  // Throws OptionsError naming the first bad field.
  void validate() const;

  // Modelled duration of one kernel in nanoseconds (0 for OpClass::NoKernel).
  int64_t kernel_ns(OpClass cls, double flops, double bytes, bool low_precision) const;

  // blas_workspace_bytes, or what CUBLAS_WORKSPACE_CONFIG (":SIZE_KIB:COUNT" pairs) asks for when
  // it is set and parses, as torch reads it.
  int64_t blas_workspace() const;
};

// torch's reading of a CUBLAS_WORKSPACE_CONFIG value: the sum of SIZE KiB times COUNT over its
// ":SIZE:COUNT" pairs; -1 when it has none (torch then warns and keeps its default).
int64_t parse_cublas_workspace_config(std::string_view config);

// Built-in profiles: h100-sxm, h200, a100-80gb, l4, rtx4090.
std::vector<std::string> device_model_names();
// Also accepts "h100" for h100-sxm and "a100" for a100-80gb. Throws OptionsError listing the names.
DeviceModel device_model_named(std::string_view name);

// One tensor of an op, as the model sees it.
struct OpTensor {
  std::vector<int64_t> sizes;
  int64_t itemsize = 4;
  bool low_precision = false;     // bf16 or fp16
  const void* storage = nullptr;  // identity of its storage (aliasing); nullptr: none
  int64_t storage_bytes = -1;     // bytes of that storage; -1: unknown

  int64_t numel() const;
  // Bytes a kernel reads of it: its elements, but no more than its storage holds (a broadcast
  // tensor reads its storage once).
  int64_t read_bytes() const;
  int64_t bytes() const { return numel() * itemsize; }
};

// One op: its name ("aten::mm"), tensors in and out (lists flattened), and the first bool argument
// (is_causal for attention).
struct OpCall {
  std::string name;
  std::vector<OpTensor> inputs;
  std::vector<OpTensor> outputs;
  bool flag = false;
};

struct OpCost {
  OpClass cls = OpClass::NoKernel;
  double flops = 0.0;
  double bytes = 0.0;
  bool low_precision = false;
};

// The class an op has by its name alone (Matmul, Attention, NoKernel for known views and factories;
// Memory otherwise). An op of class Matmul or Attention is timed as one kernel, whatever it calls.
OpClass op_class_by_name(std::string_view name);

// FLOPs and bytes of one op:
// - Matmul: 2 * (elements of the output) * K, K the inner dimension (the last of the first matrix
//   operand); bytes are the operands read and the output written.
// - Attention: 4 * B * H * L * S * E for Q.K^T and P.V (q [B,H,L,E], k [B,H,S,E]), halved when
//   causal; a backward op (name ending in "_backward") 2.5 times that.
// - Memory: one FLOP per output element; bytes read of each input plus bytes of each output.
//   Index lookups (embedding, index_select, gather) read only the rows they return; fills
//   (fill_, zero_, normal_, uniform_, random_) only write.
// - NoKernel, and any op whose outputs all alias its inputs' storages without writing them (its
//   name does not end in '_'): nothing.
OpCost op_cost(const OpCall& call);

}  // namespace offtune
