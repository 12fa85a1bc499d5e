#include "offtune/device_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>

#include "offtune/options.hpp"

namespace offtune {

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::NoKernel:
      return "no-kernel";
    case OpClass::Matmul:
      return "matmul";
    case OpClass::Attention:
      return "attention";
    case OpClass::Memory:
      return "memory";
  }
  return "?";
}

namespace {

constexpr int64_t GiB = int64_t{1} << 30;

// Per-kernel cost for every profile: a kernel that does nothing still occupies the GPU for about
// this long between its neighbours in a stream (launch gap plus ramp-up and tail), as traces of
// small back-to-back kernels on these parts show; a planning assumption, not a vendor figure.
constexpr int64_t kKernelOverheadNs = 2'000;

// torch's default cuBLAS workspace per (handle, stream) (CublasHandlePool.cpp,
// parseChosenWorkspaceSize): 32 MiB on compute capability 9, 10 and 12; ":4096:2:16:8" otherwise.
constexpr int64_t kBlasWorkspaceLarge = 32 * 1024 * 1024;
constexpr int64_t kBlasWorkspaceSmall = 4096 * 1024 * 2 + 16 * 1024 * 8;

// What the CUDA context, its lazily loaded kernel images and the libraries' handles take outside
// the caching allocator, by the class of part, for a torch training process with CUDA's lazy
// module loading (its default since CUDA 11.7). Planning estimates, not vendor figures: the GPU
// issue measures them (docs/gpu-results.md) and a model file replaces them.
constexpr int64_t kContextHopper = 512 * 1024 * 1024;
constexpr int64_t kContextAmpere = 448 * 1024 * 1024;
constexpr int64_t kContextAda = 384 * 1024 * 1024;

DeviceModel profile(std::string name, std::string title, double fp32, double bf16, double gbps,
                    int64_t bytes, std::string source, int64_t context, int64_t workspace) {
  DeviceModel m;
  m.context_bytes = context;
  m.blas_workspace_bytes = workspace;
  m.name = std::move(name);
  m.title = std::move(title);
  m.fp32_tflops = fp32;
  m.bf16_tflops = bf16;
  m.memory_gbps = gbps;
  m.memory_bytes = bytes;
  m.kernel_overhead_ns = kKernelOverheadNs;
  m.source = std::move(source);
  return m;
}

std::vector<DeviceModel> profiles() {
  return {
      // NVIDIA H100 Tensor Core GPU datasheet (SXM5 column): FP32 67 TFLOPS, BF16 Tensor Core
      // 1,979 TFLOPS with sparsity (989 dense), 3.35 TB/s HBM3, 80 GB.
      profile("h100-sxm", "NVIDIA H100 SXM5 80GB", 67.0, 989.0, 3350.0, 80 * GiB,
              "NVIDIA H100 datasheet (SXM5)", kContextHopper, kBlasWorkspaceLarge),
      // NVIDIA H200 Tensor Core GPU datasheet (SXM): same compute as H100 SXM, 4.8 TB/s HBM3e,
      // 141 GB.
      profile("h200", "NVIDIA H200 SXM 141GB", 67.0, 989.0, 4800.0, int64_t{141'000'000'000},
              "NVIDIA H200 datasheet (SXM)", kContextHopper, kBlasWorkspaceLarge),
      // NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): FP32 19.5 TFLOPS, BF16 312 TFLOPS dense,
      // 2,039 GB/s HBM2e.
      profile("a100-80gb", "NVIDIA A100 SXM4 80GB", 19.5, 312.0, 2039.0, 80 * GiB,
              "NVIDIA A100 datasheet (80GB SXM)", kContextAmpere, kBlasWorkspaceSmall),
      // NVIDIA L4 datasheet: FP32 30.3 TFLOPS, BF16 242 TFLOPS with sparsity (121 dense),
      // 300 GB/s GDDR6, 24 GB.
      profile("l4", "NVIDIA L4 24GB", 30.3, 121.0, 300.0, 24 * GiB, "NVIDIA L4 datasheet",
              kContextAda, kBlasWorkspaceSmall),
      // NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090: FP32 82.6 TFLOPS, BF16
      // tensor with FP32 accumulate 165.2 TFLOPS dense, 1,008 GB/s GDDR6X, 24 GB.
      profile("rtx4090", "NVIDIA GeForce RTX 4090 24GB", 82.6, 165.2, 1008.0, 24 * GiB,
              "NVIDIA Ada Lovelace whitepaper (RTX 4090)", kContextAda, kBlasWorkspaceSmall),
  };
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The op's name without the "aten::" namespace.
std::string_view base_name(std::string_view name) {
  if (name.rfind("aten::", 0) == 0) name.remove_prefix(6);
  return name;
}

// clang-format off
constexpr std::string_view kNoKernel[] = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "reshape_as", "t", "transpose",
    "permute", "expand", "expand_as", "as_strided", "slice", "select", "unsqueeze", "squeeze",
    "split", "split_with_sizes", "chunk", "unbind", "narrow", "flatten", "unflatten", "movedim",
    "diagonal", "detach", "alias", "lift_fresh", "empty", "empty_like", "empty_strided",
    "new_empty", "new_empty_strided", "resize_", "set_", "size", "stride", "numel", "dim",
    "is_same_size", "result_type", "_has_compatible_shallow_copy_type", "contiguous", "to",
    "type_as", "mT", "numpy_T",
};
// clang-format on

double product(const std::vector<int64_t>& v, size_t from, size_t to) {
  double p = 1.0;
  for (size_t i = from; i < to && i < v.size(); ++i) p *= static_cast<double>(v[i]);
  return p;
}

bool aliases_an_input(const OpTensor& out, const OpCall& call) {
  if (out.storage == nullptr) return false;
  return std::any_of(call.inputs.begin(), call.inputs.end(),
                     [&](const OpTensor& in) { return in.storage == out.storage; });
}

bool any_low_precision(const OpCall& call) {
  return std::any_of(call.inputs.begin(), call.inputs.end(),
                     [](const OpTensor& t) { return t.low_precision; });
}

double bytes_moved(const OpCall& call) {
  double b = 0.0;
  for (const OpTensor& t : call.inputs) b += static_cast<double>(t.read_bytes());
  for (const OpTensor& t : call.outputs) b += static_cast<double>(t.bytes());
  return b;
}

// The tensors with at least `rank` dimensions, in order.
std::vector<const OpTensor*> of_rank(const std::vector<OpTensor>& ts, size_t rank) {
  std::vector<const OpTensor*> out;
  for (const OpTensor& t : ts) {
    if (t.sizes.size() >= rank) out.push_back(&t);
  }
  return out;
}

OpCost matmul_cost(const OpCall& call) {
  OpCost c{OpClass::Matmul, 0.0, bytes_moved(call), any_low_precision(call)};
  if (call.outputs.empty()) return c;
  // The first matrix operand: addmm/baddbmm/addbmm/_addmm_activation take a bias first.
  const std::string_view n = base_name(call.name);
  const bool bias_first =
      n == "addmm" || n == "baddbmm" || n == "addbmm" || n == "_addmm_activation" || n == "addmm_";
  const auto mats = of_rank(call.inputs, 1);
  const size_t first = bias_first ? 1 : 0;
  if (mats.size() <= first) return c;
  const OpTensor& a = *mats[first];
  const double k = static_cast<double>(a.sizes.back());
  double out_elems = static_cast<double>(call.outputs.front().numel());
  // addbmm sums the batch into one matrix: every batch's product counts.
  if (n == "addbmm" && a.sizes.size() == 3) out_elems *= static_cast<double>(a.sizes[0]);
  c.flops = 2.0 * out_elems * k;
  return c;
}

OpCost attention_cost(const OpCall& call) {
  OpCost c{OpClass::Attention, 0.0, bytes_moved(call), any_low_precision(call)};
  const bool backward = ends_with(call.name, "_backward");
  // q, k, v: the first three 4-D inputs of the forward; the backward's first is the output's grad.
  const auto t4 = of_rank(call.inputs, 4);
  const size_t skip = backward ? 1 : 0;
  if (t4.size() < skip + 3) return c;
  const OpTensor& q = *t4[skip];
  const OpTensor& k = *t4[skip + 1];
  const OpTensor& v = *t4[skip + 2];
  const size_t r = q.sizes.size();
  const double bh = product(q.sizes, 0, r - 2);
  const double l = static_cast<double>(q.sizes[r - 2]);
  const double e = static_cast<double>(q.sizes[r - 1]);
  const double s = static_cast<double>(k.sizes[k.sizes.size() - 2]);
  const double ev = static_cast<double>(v.sizes.back());
  double flops = 2.0 * bh * l * s * e + 2.0 * bh * l * s * ev;
  if (call.flag) flops /= 2.0;
  if (backward) flops *= 2.5;
  c.flops = flops;
  return c;
}

}  // namespace

void DeviceModel::validate() const {
  auto positive = [&](double v, const char* field) {
    if (!(v > 0.0) || !std::isfinite(v)) {
      throw OptionsError("device model '" + name + "': " + field + " must be a positive number");
    }
  };
  positive(fp32_tflops, "fp32_tflops");
  positive(bf16_tflops, "bf16_tflops");
  positive(memory_gbps, "memory_gbps");
  for (const auto& [v, field] : {std::pair{matmul_efficiency, "matmul_efficiency"},
                                 std::pair{attention_efficiency, "attention_efficiency"},
                                 std::pair{memory_efficiency, "memory_efficiency"}}) {
    if (!(v > 0.0 && v <= 1.0)) {
      throw OptionsError("device model '" + name + "': " + field + " must be in (0, 1]");
    }
  }
  if (kernel_overhead_ns < 0 || kernel_overhead_ns > 1'000'000'000) {
    throw OptionsError("device model '" + name + "': kernel_overhead_ns must be 0..1e9");
  }
  if (memory_bytes < 0) {
    throw OptionsError("device model '" + name + "': memory_bytes must be >= 0");
  }
  if (context_bytes < 0) {
    throw OptionsError("device model '" + name + "': context_bytes must be >= 0");
  }
  if (blas_workspace_bytes < 0) {
    throw OptionsError("device model '" + name + "': blas_workspace_bytes must be >= 0");
  }
}

int64_t parse_cublas_workspace_config(std::string_view config) {
  // torch matches ":([0-9]+):([0-9]+)" repeatedly and adds SIZE * 1024 * COUNT for each match.
  int64_t total = 0;
  bool any = false;
  size_t i = 0;
  const auto digits = [&](size_t at, int64_t& out) -> size_t {
    size_t j = at;
    out = 0;
    while (j < config.size() && config[j] >= '0' && config[j] <= '9') {
      if (out > (int64_t{1} << 24)) return at;  // absurd (16 Gi): not a match
      out = out * 10 + (config[j] - '0');
      ++j;
    }
    return j;
  };
  while (i < config.size()) {
    if (config[i] != ':') {
      ++i;
      continue;
    }
    int64_t size = 0;
    int64_t count = 0;
    const size_t a = digits(i + 1, size);
    if (a == i + 1 || a >= config.size() || config[a] != ':') {
      ++i;
      continue;
    }
    const size_t b = digits(a + 1, count);
    if (b == a + 1) {
      ++i;
      continue;
    }
    constexpr int64_t kMost = int64_t{1} << 62;  // more is absurd: not taken
    if (size > 0 && (count > kMost / 1024 / size || total > kMost - size * 1024 * count)) {
      ++i;
      continue;
    }
    total += size * 1024 * count;
    any = true;
    i = b;
  }
  return any ? total : -1;
}

int64_t DeviceModel::blas_workspace() const {
  if (const char* env = std::getenv("CUBLAS_WORKSPACE_CONFIG")) {
    if (const int64_t configured = parse_cublas_workspace_config(env); configured >= 0) {
      return configured;
    }
  }
  return blas_workspace_bytes;
}

int64_t DeviceModel::kernel_ns(OpClass cls, double flops, double bytes, bool low_precision) const {
  if (cls == OpClass::NoKernel) return 0;
  double compute_eff = matmul_efficiency;
  double peak = low_precision ? bf16_tflops : fp32_tflops;
  if (cls == OpClass::Attention) compute_eff = attention_efficiency;
  if (cls == OpClass::Memory) {
    // Vector units, not tensor cores; bandwidth decides in practice.
    peak = fp32_tflops;
    compute_eff = memory_efficiency;
  }
  // TFLOPS = 1e12 FLOP/s = 1e3 FLOP/ns; GB/s = 1 byte/ns.
  const double compute = flops / (peak * 1e3 * compute_eff);
  const double memory = bytes / (memory_gbps * memory_efficiency);
  return kernel_overhead_ns + static_cast<int64_t>(std::llround(std::max(compute, memory)));
}

std::vector<std::string> device_model_names() {
  std::vector<std::string> out;
  for (const auto& p : profiles()) out.push_back(p.name);
  return out;
}

DeviceModel device_model_named(std::string_view name) {
  std::string_view key = name;
  if (key == "h100") key = "h100-sxm";
  if (key == "a100") key = "a100-80gb";
  for (auto& p : profiles()) {
    if (p.name == key) return p;
  }
  std::string valid;
  for (const auto& n : device_model_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw OptionsError("unknown device model '" + std::string(name) + "' (valid: " + valid +
                     ", or a JSON file)");
}

int64_t OpTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t OpTensor::read_bytes() const {
  const int64_t b = bytes();
  return storage_bytes >= 0 ? std::min(b, storage_bytes) : b;
}

OpClass op_class_by_name(std::string_view name) {
  const std::string_view n = base_name(name);
  if (n == "mm" || n == "addmm" || n == "bmm" || n == "baddbmm" || n == "addbmm" || n == "matmul" ||
      n == "linear" || n == "_addmm_activation" || n == "addmm_") {
    return OpClass::Matmul;
  }
  if (n.find("scaled_dot_product") != std::string_view::npos ||
      n.find("flash_attention") != std::string_view::npos ||
      n.find("efficient_attention") != std::string_view::npos) {
    return OpClass::Attention;
  }
  if (std::find(std::begin(kNoKernel), std::end(kNoKernel), n) != std::end(kNoKernel)) {
    return OpClass::NoKernel;
  }
  return OpClass::Memory;
}

OpCost op_cost(const OpCall& call) {
  switch (op_class_by_name(call.name)) {
    case OpClass::NoKernel:
      return {};
    case OpClass::Matmul:
      return matmul_cost(call);
    case OpClass::Attention:
      return attention_cost(call);
    case OpClass::Memory:
      break;
  }
  const std::string_view n = base_name(call.name);
  // A view that is not on the list (its outputs are its inputs' storages, nothing written).
  if (!ends_with(n, "_") && !call.outputs.empty() &&
      std::all_of(call.outputs.begin(), call.outputs.end(),
                  [&](const OpTensor& o) { return aliases_an_input(o, call); })) {
    return {};
  }
  OpCost c{OpClass::Memory, 0.0, 0.0, any_low_precision(call)};
  for (const OpTensor& o : call.outputs) c.flops += static_cast<double>(o.numel());
  if (n == "embedding" || n == "index_select" || n == "gather" || n == "index") {
    // Rows looked up: as many bytes read from the table (the first input) as written, plus the
    // other inputs (the indices) read whole.
    double out = 0.0;
    for (const OpTensor& o : call.outputs) out += static_cast<double>(o.bytes());
    double indices = 0.0;
    for (size_t i = 1; i < call.inputs.size(); ++i) {
      indices += static_cast<double>(call.inputs[i].read_bytes());
    }
    c.bytes = 2.0 * out + indices;
    return c;
  }
  if (n == "fill_" || n == "zero_" || n == "normal_" || n == "uniform_" || n == "random_") {
    // Write-only: the old values are not read.
    for (const OpTensor& o : call.outputs) c.bytes += static_cast<double>(o.bytes());
    return c;
  }
  c.bytes = bytes_moved(call);
  return c;
}

}  // namespace offtune
