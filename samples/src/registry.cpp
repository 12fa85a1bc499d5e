#include "offtune/samples/registry.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/layer_offload.hpp"
#include "offtune/model_support.hpp"
#include "offtune/samples/gpt.hpp"
#include "offtune/samples/layer_hooks.hpp"
#include "offtune/samples/llama.hpp"
#include "offtune/samples/mlp.hpp"
#include "offtune/samples/torchscript_checkpoint.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune::samples {
namespace {

// A driver's block marks as the built-in models' layer hooks. Unset marks stay unset, so that the
// models then skip the per-block calls and the backward tensor hooks altogether.
LayerHooks layer_hooks_of(const StepMarks& marks) {
  return {.forward_begin = marks.layer_forward_begin,
          .forward_end = marks.layer_forward_end,
          .backward_begin = marks.layer_backward_begin,
          .backward_end = marks.layer_backward_end};
}

// A phase mark, begun on construction and ended on destruction (an exception included).
class PhaseMark {
 public:
  PhaseMark(const StepMarks& marks, StepPhase phase)
      : marks_(marks), phase_(phase), on_(marks.phase_begin && marks.phase_end) {
    if (on_) marks_.phase_begin(phase_);
  }
  ~PhaseMark() {
    if (on_) marks_.phase_end(phase_);
  }
  PhaseMark(const PhaseMark&) = delete;
  PhaseMark& operator=(const PhaseMark&) = delete;

 private:
  const StepMarks& marks_;
  const StepPhase phase_;
  const bool on_;
};

// What every workload here shares: one timed training step. A workload makes the step's input (and
// targets), runs its forward and computes its loss; this class runs the forward under the
// offloader's scope, brackets forward and backward with the driver's marks and the phase times it
// records, steps the optimizer when there is one, and drops the step's tensors at its end so that
// they never count in the next step's peak.
class TrainingStep : public WorkloadInstance {
 public:
  void step(ActivationOffloader* offloader, int64_t index, StepPhases& phases) final {
    before_step(offloader);
    seed_generators(index);
    prepare(index);
    phases.forward_begin = host_sim::clock_ns();
    at::Tensor loss;
    {
      // The driver's marks (NVTX ranges under the profiler, which marks the step around them).
      PhaseMark forward_mark(marks_, StepPhase::Forward);
      at::Tensor out;
      {
        std::optional<OffloadScope> scope;
        if (offloader) scope.emplace(offloader->scope());
        out = forward();
      }
      // Outside the scope: the loss's saved tensors are the first backward needs.
      loss = loss_of(out);
    }
    phases.forward_end = host_sim::clock_ns();
    {
      PhaseMark backward_mark(marks_, StepPhase::Backward);
      loss.backward();
    }
    if (optimizer_) optimizer_->step();
    synchronize();
    phases.backward_end = host_sim::clock_ns();
    phases.loss = loss.item<double>();
    input_ = at::Tensor();
    targets_ = at::Tensor();
  }
  void synchronize() override {
    if (device_.is_cuda()) torch::cuda::synchronize();
  }
  void set_marks(const StepMarks& marks) override {
    marks_ = marks;
    set_layer_hooks(layer_hooks_of(marks_));
  }
  void set_checkpoint(const CheckpointPolicy& policy) override { apply_checkpoint(policy); }
  // Every run starts from the state the model was built in (keep_state), so that a sweep's points
  // and repeats measure the same work: with an optimizer each run would otherwise train on from
  // the last one's weights.
  void reset() override {
    {
      at::NoGradGuard no_grad;
      for (Kept& k : kept_) {
        k.tensor.copy_(at::from_blob(k.bytes.data(), k.tensor.sizes(),
                                     at::TensorOptions().dtype(k.tensor.dtype())));
      }
    }
    // SGD keeps momentum buffers per parameter once it has any: back to none, as built.
    if (optimizer_) optimizer_->state().clear();
    // The last step's gradients live on until the next step's zero_grad: dropped here, as a
    // fresh process has none, so that a run's device memory does not depend on where an earlier
    // run's gradients were allocated (the caching allocator places this run's blocks around them).
    for (at::Tensor& p : trained_) p.mutable_grad() = at::Tensor();
    warm();
  }

 protected:
  TrainingStep(const WorkloadSpec& w, c10::Device device) : w_(w), device_(device) {}
  // Keeps the values of what steps change (the trained parameters with an optimizer, and the
  // buffers, which a forward in training mode may update), for reset() to put back. Kept in plain
  // host memory: on host-sim a copy on the "device" would count in every peak.
  void keep_state(const std::vector<at::Tensor>& parameters,
                  const std::vector<at::Tensor>& buffers) {
    const auto keep = [&](const at::Tensor& t) {
      if (!t.defined()) return;
      Kept k{t, std::vector<std::byte>(static_cast<size_t>(t.numel()) * t.element_size())};
      at::from_blob(k.bytes.data(), t.sizes(), at::TensorOptions().dtype(t.dtype()))
          .copy_(t.detach());
      kept_.push_back(std::move(k));
    };
    if (optimizer_) {
      for (const at::Tensor& p : parameters) {
        if (p.requires_grad()) keep(p);  // frozen ones never change
      }
    }
    for (const at::Tensor& p : parameters) {
      if (p.requires_grad()) trained_.push_back(p);
    }
    for (const at::Tensor& b : buffers) keep(b);
  }
  // The one-time work of a model's first steps, done by reset() outside any step; none here.
  virtual void warm() {}
  // Forward and backward on step 0's batch, without the optimizer's step: work that changes no
  // weight. Returns the time it took on the engine's clock (a device model's, when one is set).
  int64_t untimed_pass() {
    seed_generators(0);
    prepare(0);
    const int64_t begin = host_sim::clock_ns();
    loss_of(forward()).backward();
    synchronize();
    const int64_t took = host_sim::clock_ns() - begin;
    input_ = at::Tensor();
    targets_ = at::Tensor();
    return took;
  }
  // Called first in every step with the step's offloader (the layer offloader follows its link).
  virtual void before_step(ActivationOffloader* /*offloader*/) {}
  // Sets input_ (and targets_ when the loss needs them) for step `index`, and clears gradients.
  virtual void prepare(int64_t index) = 0;
  virtual at::Tensor forward() = 0;
  virtual at::Tensor loss_of(const at::Tensor& out) = 0;
  // The model's per-block hooks, for models that have blocks.
  virtual void set_layer_hooks(const LayerHooks& /*hooks*/) {}
  // The model's checkpoint policy; the default refuses all but none (WorkloadInstance's rule).
  virtual void apply_checkpoint(const CheckpointPolicy& policy) {
    WorkloadInstance::set_checkpoint(policy);
  }

  WorkloadSpec w_;
  StepMarks marks_;
  c10::Device device_;
  at::Tensor input_;
  at::Tensor targets_;
  std::optional<torch::optim::SGD> optimizer_;

 private:
  // Dropout and every other random op draw from torch's default generators (the CPU's, and each
  // GPU's where there is one), which nothing else seeds: seeded per step from the workload's seed
  // and the step, the same command gives the same losses, and every point of a sweep draws the
  // same masks at the same step. (Apart from the batches' seed, so the two draws do not
  // correlate.)
  void seed_generators(int64_t index) const {
    constexpr uint64_t kStream = 0x9E3779B97F4A7C15ULL;
    at::manual_seed((w_.seed + 1) * kStream + static_cast<uint64_t>(index));
  }

  struct Kept {
    at::Tensor tensor;
    std::vector<std::byte> bytes;
  };
  std::vector<Kept> kept_;
  std::vector<at::Tensor> trained_;  // the parameters that get gradients
};

// A built-in decoder (Llama or GPT) on synthetic token batches. Config is the model's config type
// (with preset()), Model its module holder.
template <typename Config, typename Model>
class DecoderWorkload final : public TrainingStep {
 public:
  DecoderWorkload(const WorkloadSpec& w, c10::Device device) : TrainingStep(w, device) {
    auto config = Config::preset(w.model);
    config.dtype = w.dtype;
    config.lora_rank = w.lora_rank;
    if (w.seq > config.max_seq_len) {
      throw std::invalid_argument("--seq " + std::to_string(w.seq) + " exceeds the max_seq_len " +
                                  std::to_string(config.max_seq_len) + " of model " + w.model);
    }
    model_ = Model(config, w.seed);
    model_->to(device_);
    vocab_ = config.vocab_size;
    if (w.optimizer) {
      optimizer_.emplace(model_->parameters(), torch::optim::SGDOptions(1e-3));
    }
    keep_state(model_->parameters(), model_->buffers());
  }
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    return make_offloader_for(*model_, options, /*warn_if_no_head=*/false).offloader;
  }
  void set_layer_offload(int64_t depth) override {
    if (depth < 0) {
      throw std::invalid_argument("layer offload depth must be >= 0 (0 = off), got " +
                                  std::to_string(depth));
    }
    if (depth != layer_depth_) drop_layer_offload();
    layer_depth_ = depth;
  }
  ~DecoderWorkload() override { drop_layer_offload(); }

 private:
  // The layer offloader shares the link of the step's activation offloader: made again (the
  // weights given back to the device first) when the step brings another one.
  void before_step(ActivationOffloader* offloader) override {
    if (layer_depth_ == 0 || (layers_ && layers_->uses_link_of(offloader))) return;
    drop_layer_offload();
    LayerOffloadOptions o;
    o.depth = layer_depth_;
    o.backend = device_.is_cuda() ? BackendKind::Cuda : BackendKind::HostSim;
    o.device_index = device_.is_cuda() && device_.has_index() ? device_.index() : -1;
    layers_ = offloader ? std::make_shared<LayerOffloader>(*offloader, o)
                        : std::make_shared<LayerOffloader>(o);
    model_->set_layer_offload(layers_);
  }
  void drop_layer_offload() {
    if (!layers_) return;
    model_->set_layer_offload(nullptr);
    layers_.reset();  // the last reference: the frozen weights go back to the device
  }
  void prepare(int64_t index) override {
    auto batch = samples::make_token_batch(w_.batch, w_.seq, vocab_,
                                           w_.seed + static_cast<uint64_t>(index), device_);
    input_ = std::move(batch.tokens);
    targets_ = std::move(batch.targets);
    model_->zero_grad();
  }
  at::Tensor forward() override { return model_(input_); }
  at::Tensor loss_of(const at::Tensor& logits) override {
    return samples::lm_loss(logits, targets_);
  }
  void set_layer_hooks(const LayerHooks& hooks) override { model_->set_layer_hooks(hooks); }
  void apply_checkpoint(const CheckpointPolicy& policy) override { model_->set_checkpoint(policy); }

  Model model_{nullptr};
  int64_t vocab_ = 0;
  int64_t layer_depth_ = 0;
  std::shared_ptr<LayerOffloader> layers_;
};

class MlpWorkload final : public TrainingStep {
 public:
  MlpWorkload(const WorkloadSpec& w, c10::Device device) : TrainingStep(w, device) {
    samples::MlpConfig config;
    config.in = 256;
    config.hidden = 1024;
    config.layers = 4;
    config.out = 16;
    config.dtype = w.dtype;
    model_ = samples::Mlp(config, w.seed);
    model_->to(device_);
    if (w.optimizer) optimizer_.emplace(model_->parameters(), torch::optim::SGDOptions(1e-3));
    keep_state(model_->parameters(), model_->buffers());
  }
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    return make_offloader_for(*model_, options, /*warn_if_no_head=*/false).offloader;
  }

 private:
  void prepare(int64_t) override {
    const auto opts = at::TensorOptions().dtype(w_.dtype).device(device_);
    input_ = at::empty({w_.batch * std::max<int64_t>(w_.seq, 1), 256}, opts).fill_(0.5);
    model_->zero_grad();
  }
  at::Tensor forward() override { return model_(input_); }
  at::Tensor loss_of(const at::Tensor& out) override { return out.to(at::kFloat).pow(2).mean(); }
  void set_layer_hooks(const LayerHooks& hooks) override { model_->set_layer_hooks(hooks); }
  void apply_checkpoint(const CheckpointPolicy& policy) override { model_->set_checkpoint(policy); }

  samples::Mlp model_{nullptr};
};
using LlamaWorkload = DecoderWorkload<samples::LlamaConfig, samples::Llama>;
using GptWorkload = DecoderWorkload<samples::GptConfig, samples::Gpt>;

// The first line of a message: c10's errors carry context lines (and jit's a source excerpt) that
// do not belong in a one-line CLI error.
std::string first_line(std::string_view message) {
  return std::string(message.substr(0, message.find('\n')));
}

// Why torch::jit::load refused a file, in one line. The archive reader appends a paragraph
// blaming corruption to every error, which misleads for the common case of a file that is a
// valid archive but no TorchScript (a torch.save checkpoint has no constants.pkl).
std::string load_reason(std::string_view message) {
  std::string reason = first_line(message);
  if (const auto blame = reason.find(" This is an internal miniz error");
      blame != std::string::npos) {
    reason.erase(blame);
  }
  if (reason.find("constants.pkl") != std::string::npos) {
    reason += " (not TorchScript: save the model with torch.jit.save, not torch.save)";
  }
  return reason;
}

// The tensor a TorchScript forward returned: itself, the first element of a tuple or list (Hugging
// Face models exported with torchscript=True return (logits, ...)), or a dict's "logits".
at::Tensor output_tensor(const c10::IValue& out) {
  if (out.isTensor()) return out.toTensor();
  if (out.isTuple() && !out.toTupleRef().elements().empty() &&
      out.toTupleRef().elements()[0].isTensor()) {
    return out.toTupleRef().elements()[0].toTensor();
  }
  if (out.isTensorList() && out.toTensorList().size() > 0) return out.toTensorList().get(0);
  if (out.isGenericDict()) {
    const auto dict = out.toGenericDict();
    const auto it = dict.find(c10::IValue("logits"));
    if (it != dict.end() && it->value().isTensor()) return it->value().toTensor();
  }
  throw std::runtime_error("the TorchScript model returned " + out.tagKind() +
                           "; expected a tensor, a tuple or list starting with one, or a dict "
                           "with a 'logits' tensor");
}

// A TorchScript file (torch.jit.trace or torch.jit.script output) trained on inputs described by
// an InputSpec. The module is whatever the file holds: nothing is known of its structure, so the
// offloader registers its state but cannot leave an output head out as make_offloader_for does.
class TorchScriptWorkload final : public TrainingStep {
 public:
  TorchScriptWorkload(const WorkloadSpec& w, c10::Device device, InputSpec spec)
      : TrainingStep(w, device), spec_(std::move(spec)) {
    std::error_code ec;
    if (!std::filesystem::exists(w.model, ec)) fail_load("no such file");
    if (std::filesystem::is_directory(w.model, ec)) fail_load("is a directory");
    try {
      // Loading straight onto the device also moves the graph's constants, which module.to()
      // would leave on the device they were traced on.
      module_ = torch::jit::load(w.model, device_);
    } catch (const c10::Error& e) {
      fail_load(load_reason(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      fail_load(load_reason(e.what()));
    }
    // --dtype applies to the floating parameters and buffers, as for the built-in models.
    if (w.dtype != c10::kFloat) module_.to(w.dtype);
    module_.train();
    // The blocks are made checkpointable here, before the first forward compiles the model's
    // plan: a rewrite after it would not reach that plan (torchscript_checkpoint.hpp), and a
    // sweep's points share this workload with any policy in any order. Until a policy turns
    // them on the blocks are plain calls. A model whose blocks are not found, or cannot be
    // checkpointed, runs as it is; why is the refusal of an enabled policy. A path given in
    // w.blocks must work.
    try {
      blocks_.emplace(module_, w.blocks);
    } catch (const std::invalid_argument& e) {
      if (!w.blocks.empty()) throw std::invalid_argument(std::string("--blocks: ") + e.what());
      no_blocks_ = e.what();
    }
    for (const at::Tensor& p : module_.parameters()) params_.push_back(p);
    if (w.optimizer) optimizer_.emplace(params_, torch::optim::SGDOptions(1e-3));
    std::vector<at::Tensor> buffers;
    for (const at::Tensor& b : module_.buffers()) buffers.push_back(b);
    keep_state(params_, buffers);
  }
  // The head cannot be left out (registry.hpp's head_warning says so, for a front end to show).
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    auto offloader = std::make_unique<ActivationOffloader>(options);
    for (const at::Tensor& p : module_.parameters()) offloader->never_offload(p);
    for (const at::Tensor& b : module_.buffers()) offloader->never_offload(b);
    // Tensor attributes that are neither (a scripted module's plain `self.mask = ...`) are model
    // state too, and must stay put as well.
    for (const auto& a : module_.named_attributes()) {
      if (a.value.isTensor() && a.value.toTensor().defined()) {
        offloader->never_offload(a.value.toTensor());
      }
    }
    return offloader;
  }

 private:
  void prepare(int64_t index) override {
    const uint64_t seed = w_.seed + static_cast<uint64_t>(index);
    shape_ = spec_.shape(w_.batch, w_.seq);
    if (spec_.tokens()) {
      auto batch = samples::make_token_batch(shape_[0], shape_[1], spec_.vocab, seed, device_);
      input_ = std::move(batch.tokens);
      targets_ = std::move(batch.targets);
    } else {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
      input_ = at::empty(shape_, at::TensorOptions().dtype(c10::kFloat))
                   .normal_(0.0, 1.0, gen)
                   .to(device_, spec_.dtype);
    }
    for (at::Tensor& p : params_) p.mutable_grad() = at::Tensor();
  }
  at::Tensor forward() override {
    try {
      return output_tensor(module_.forward({input_}));
    } catch (const c10::OutOfMemoryError&) {
      throw;  // a result, not a failure: the driver records it as out of memory
    } catch (const c10::Error& e) {
      throw std::runtime_error(interpreter_failure(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw std::runtime_error(interpreter_failure(e.what()));
    }
  }
  // The profiling executor profiles a graph on its first calls and then optimises it (forward and
  // backward alike): different work, which a device model times as such, so that a run's first
  // steps would differ from the rest. Passes until two take the same modelled time (at most
  // kMaxWarmPasses), or two without a device model; once per checkpoint policy, since each runs
  // the blocks through other calls with their own plans.
  void warm() override {
    if (!warmed_.insert(policy_).second) return;
    constexpr int kMaxWarmPasses = 8;
    const bool modelled = host_sim::device_model() != nullptr;
    int64_t last = -1;
    for (int pass = 0; pass < kMaxWarmPasses; ++pass) {
      const int64_t took = untimed_pass();
      if (modelled ? took == last : pass == 1) break;
      last = took;
    }
  }
  // What a failure in the TorchScript interpreter was: its message opens with a line saying only
  // that an operation failed, then the TorchScript traceback, and ends with the cause. One line:
  // the cause, and for a dtype mismatch under --dtype what to do.
  std::string interpreter_failure(std::string_view message) const {
    constexpr std::string_view kInterpreter = "The following operation failed in the TorchScript";
    if (!message.starts_with(kInterpreter)) return first_line(message);
    // The cause is the line "RuntimeError: ..." (the error's Python class name) after the
    // traceback; a C++ backtrace may follow it (TORCH_SHOW_CPP_STACKTRACES).
    std::string cause;
    for (size_t at = 0; at < message.size();) {
      const size_t end = std::min(message.find('\n', at), message.size());
      const std::string_view line = message.substr(at, end - at);
      const size_t colon = line.find(": ");
      const std::string_view head = line.substr(0, colon);
      if (colon != std::string_view::npos && colon > 0 &&
          (head.ends_with("Error") || head.ends_with("Exception")) &&
          std::all_of(head.begin(), head.end(),
                      [](unsigned char c) { return std::isalnum(c) != 0 || c == '.'; })) {
        cause = line.substr(colon + 2);
        break;
      }
      at = end + 1;
    }
    if (cause.empty()) return first_line(message);
    std::string out = "the TorchScript model failed: " + cause;
    const bool dtype =
        cause.find("dtype") != std::string::npos || cause.find("scalar type") != std::string::npos;
    if (dtype && w_.dtype != c10::kFloat) {
      const std::string name(dtype_name(w_.dtype));
      out += " (--dtype " + name +
             " casts the parameters, not what the trace fixed in another "
             "dtype: trace the model in " +
             name + ", e.g. samples/export_torchscript.py --dtype " + name +
             ", or run it with --dtype fp32)";
    }
    return out;
  }
  void apply_checkpoint(const CheckpointPolicy& policy) override {
    policy_ = to_string(policy);
    if (blocks_) {
      blocks_->set_policy(policy);
    } else if (policy.enabled()) {
      throw std::invalid_argument("--checkpoint " + to_string(policy) + ": " + no_blocks_);
    }
  }
  at::Tensor loss_of(const at::Tensor& out) override {
    if (!spec_.tokens()) return out.to(at::kFloat).pow(2).mean();
    if (out.dim() != 3 || out.size(0) != shape_[0] || out.size(1) != shape_[1] ||
        out.size(2) < spec_.vocab) {
      throw std::runtime_error("the TorchScript model returned a tensor of shape " +
                               c10::str(out.sizes()) + "; expected logits [" +
                               std::to_string(shape_[0]) + ", " + std::to_string(shape_[1]) +
                               ", >= vocab " + std::to_string(spec_.vocab) + "]");
    }
    return samples::lm_loss(out, targets_);
  }

  [[noreturn]] void fail_load(const std::string& reason) const {
    throw std::invalid_argument("cannot load TorchScript model '" + w_.model + "': " + reason);
  }

  InputSpec spec_;
  std::vector<int64_t> shape_;  // the input's, this step
  torch::jit::Module module_;
  std::vector<at::Tensor> params_;
  std::optional<TorchScriptBlocks> blocks_;  // absent: no_blocks_ says why
  std::string no_blocks_;
  std::string policy_ = "none";   // the checkpoint policy's, for warm()
  std::set<std::string> warmed_;  // the policies warm() has warmed the executor under
};

[[noreturn]] void bad_spec(std::string_view spec, const std::string& why) {
  throw std::invalid_argument(
      "bad --input-spec '" + std::string(spec) + "': " + why +
      " (form: NAME:int64[B,T]:vocab=V, or NAME:float32[B,N] with N a number such as "
      "x:float32[B,64])");
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 15 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

bool is_torchscript_path(std::string_view model) {
  return model.ends_with(".pt") || model.ends_with(".pth") ||
         model.find('/') != std::string_view::npos;
}

std::string_view head_warning(std::string_view model) {
  if (!is_torchscript_path(model)) return {};
  return "TorchScript models can't exclude their output head from offloading (its input is "
         "offloaded and reloaded at once)";
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  for (auto name : LlamaConfig::preset_names()) names.emplace_back(name);
  for (auto name : GptConfig::preset_names()) names.emplace_back(name);
  names.emplace_back("mlp");
  return names;
}

std::vector<int64_t> InputSpec::shape(int64_t batch, int64_t seq) const {
  std::vector<int64_t> out;
  for (const auto& d : dims) out.push_back(d == "B" ? batch : d == "T" ? seq : std::stoll(d));
  return out;
}

InputSpec parse_input_spec(std::string_view spec) {
  InputSpec out;
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) bad_spec(spec, "no ':' after the input's name");
  out.name = std::string(spec.substr(0, colon));
  const bool identifier =
      !out.name.empty() && std::isdigit(static_cast<unsigned char>(out.name[0])) == 0 &&
      std::all_of(out.name.begin(), out.name.end(),
                  [](unsigned char c) { return std::isalnum(c) != 0 || c == '_'; });
  if (!identifier) bad_spec(spec, "the name must be an identifier");

  std::string_view rest = spec.substr(colon + 1);
  const auto open = rest.find('[');
  const auto close = rest.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    bad_spec(spec, "no [dims] after the type");
  }
  const std::string_view type = rest.substr(0, open);
  if (type == "int64") {
    out.dtype = c10::kLong;
  } else if (type == "float32") {
    out.dtype = c10::kFloat;
  } else if (type == "bfloat16") {
    out.dtype = c10::kBFloat16;
  } else if (type == "float16") {
    out.dtype = c10::kHalf;
  } else {
    bad_spec(spec,
             "unknown type '" + std::string(type) + "' (valid: int64, float32, bfloat16, float16)");
  }

  std::string_view dims = rest.substr(open + 1, close - open - 1);
  while (true) {
    const auto comma = dims.find(',');
    const std::string_view d = dims.substr(0, comma);
    if (d != "B" && d != "T" && !(all_digits(d) && std::stoll(std::string(d)) > 0)) {
      bad_spec(spec, "dimension '" + std::string(d) + "' is not B, T or a positive integer");
    }
    out.dims.emplace_back(d);
    if (comma == std::string_view::npos) break;
    dims.remove_prefix(comma + 1);
  }

  const std::string_view suffix = rest.substr(close + 1);
  if (out.tokens()) {
    if (out.dims.size() != 2) bad_spec(spec, "token ids take two dims, [B,T]");
    constexpr std::string_view kVocab = ":vocab=";
    if (!suffix.starts_with(kVocab)) bad_spec(spec, "token ids need ':vocab=V'");
    const std::string_view v = suffix.substr(kVocab.size());
    if (!all_digits(v) || std::stoll(std::string(v)) <= 0) {
      bad_spec(spec, "vocab must be a positive integer");
    }
    out.vocab = std::stoll(std::string(v));
  } else if (!suffix.empty()) {
    bad_spec(spec, "unexpected '" + std::string(suffix) + "' after the dims of a dense input");
  }
  return out;
}

std::unique_ptr<WorkloadInstance> make_workload(const WorkloadSpec& w, c10::Device device) {
  const auto named = [&](const std::vector<std::string_view>& names) {
    return std::find(names.begin(), names.end(), w.model) != names.end();
  };
  const bool llama = named(LlamaConfig::preset_names());
  const bool gpt = named(GptConfig::preset_names());
  if (llama || gpt || w.model == "mlp") {
    if (w.input_spec != kDefaultInputSpec) {
      throw std::invalid_argument(
          "--input-spec applies to TorchScript models (--model PATH.pt), "
          "not to the built-in '" +
          w.model + "'");
    }
    if (!w.blocks.empty()) {
      throw std::invalid_argument(
          "--blocks applies to TorchScript models (--model PATH.pt), not to "
          "the built-in '" +
          w.model + "', whose blocks are known");
    }
    if (w.lora_rank < 0) {
      throw std::invalid_argument("--lora-rank must be >= 0 (0 = no LoRA), got " +
                                  std::to_string(w.lora_rank));
    }
    if (w.lora_rank != 0 && !llama && !gpt) {
      throw std::invalid_argument("--lora-rank applies to the built-in decoders, not to '" +
                                  w.model + "'");
    }
    if (llama) return std::make_unique<LlamaWorkload>(w, device);
    if (gpt) return std::make_unique<GptWorkload>(w, device);
    return std::make_unique<MlpWorkload>(w, device);
  }
  if (is_torchscript_path(w.model)) {
    if (w.lora_rank != 0) {
      throw std::invalid_argument("--lora-rank applies to the built-in decoders, not to '" +
                                  w.model + "'");
    }
    return std::make_unique<TorchScriptWorkload>(w, device, parse_input_spec(w.input_spec));
  }
  std::string valid;
  for (const auto& name : builtin_model_names()) {
    if (name != "mlp") valid += name + ", ";
  }
  throw std::invalid_argument("unknown model '" + w.model + "' (valid: " + valid +
                              "mlp, or a .pt TorchScript file)");
}

}  // namespace offtune::samples
