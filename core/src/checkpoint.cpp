// Gradient checkpointing (offtune/checkpoint.hpp) on the engine's hook frames (context.hpp): a
// region's forward runs under a frame whose saved tensors are placeholders (an index, and the shape
// for the check); the first unpack of one in a backward reruns the region under a frame that
// captures what the rerun saves, in the same order, and each placeholder takes its tensor by index.
// This is what torch.utils.checkpoint does with saved-tensor hooks in Python; libtorch has no
// equivalent.
//
// Why per backward (graph task): with retain_graph a second backward unpacks the same placeholders
// again, so each backward recomputes once and drops each tensor as its node takes it ("frees as it
// goes"); what a backward did not take (autograd::grad() to an inner tensor, an output it does not
// reach, an error part way) goes when that backward ends (context.hpp's TaskListener).
//
// Nested regions: a region whose forward runs inside another's saves its inputs through the outer
// region's hooks, as placeholders of the outer one (torch.utils.checkpoint saves them likewise
// through the outer hooks), so that they are recomputed with the outer region instead of being
// kept on the device from forward to backward. In the outer recompute the inner region runs its
// forward again (a new inner region, whose inputs the recompute captures in order); in backward
// the inner region's recompute takes its inputs from the outer region's recompute.
#include "offtune/checkpoint.hpp"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>

#include "context.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/observer.hpp"
#include "offtune/options.hpp"
#include "seam.hpp"
#include "span_guard.hpp"

namespace offtune {
namespace {

namespace ag = torch::autograd;

// ---- RNG ---------------------------------------------------------------------------------------

at::Tensor generator_state(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The generators a region's ops may draw from: the CPU's (host-sim's device is the CPU), the
// default one of each accelerator an input lives on (torch.utils.checkpoint stops there), and that
// of each CUDA device that has a context: a region can draw on a GPU none of its inputs is on
// (inputs moved there inside it, or parameters only), and a device without a context has run
// nothing. Asking does not initialize CUDA; each state is a few bytes on the host.
struct RngState {
  std::vector<std::pair<c10::Device, at::Tensor>> states;

  static at::Generator generator(c10::Device device) {
    return device.is_cpu() ? at::detail::getDefaultCPUGenerator()
                           : at::globalContext().defaultGenerator(device);
  }
  void capture(const std::vector<at::Tensor>& inputs) {
    add(c10::Device(c10::kCPU));
    for (const at::Tensor& t : inputs) {
      if (t.defined() && !t.device().is_cpu()) add(t.device());
    }
    if (at::globalContext().hasCUDA()) {
      const auto& cuda = at::globalContext().getAcceleratorHooksInterface(c10::kCUDA);
      const auto count = static_cast<c10::DeviceIndex>(at::getNumGPUs());
      for (c10::DeviceIndex i = 0; i < count; ++i) {
        if (cuda.hasPrimaryContext(i)) add(c10::Device(c10::kCUDA, i));
      }
    }
  }

 private:
  void add(c10::Device device) {
    const bool seen =
        std::any_of(states.begin(), states.end(), [&](const auto& s) { return s.first == device; });
    if (!seen) states.emplace_back(device, generator_state(generator(device)));
  }
};

// While alive, the generators are where the forward left them; then back where they were.
class RngFork {
 public:
  explicit RngFork(const RngState& saved) {
    for (const auto& [device, state] : saved.states) {
      at::Generator gen = RngState::generator(device);
      current_.emplace_back(gen, generator_state(gen));
      set_generator_state(gen, state);
    }
  }
  ~RngFork() {
    for (auto& [gen, state] : current_) set_generator_state(gen, state);
  }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  std::vector<std::pair<at::Generator, at::Tensor>> current_;
};

// ---- autocast ----------------------------------------------------------------------------------

// The autocast state a region's forward ran under: per device type autocast knows, whether it is
// enabled and its dtype, and the cast cache's switch. The recompute runs under it, whatever the
// state where backward is called (autograd's threads inherit that one): else a forward under
// autocast recomputes in float32 when backward is called outside it. torch.utils.checkpoint
// captures and re-enters the same (per device type, and the cache switch).
class AutocastState {
 public:
  static AutocastState current() {
    AutocastState s;
    for (size_t i = 0; i < kTypes; ++i) {
      const c10::DeviceType type = at::autocast::_AUTOCAST_SUPPORTED_DEVICES[i];
      s.enabled_[i] = at::autocast::is_autocast_enabled(type);
      s.dtype_[i] = at::autocast::get_autocast_dtype(type);
    }
    s.cache_enabled_ = at::autocast::is_autocast_cache_enabled();
    return s;
  }
  bool any_enabled() const {
    return std::find(enabled_.begin(), enabled_.end(), true) != enabled_.end();
  }
  void apply() const {
    for (size_t i = 0; i < kTypes; ++i) {
      const c10::DeviceType type = at::autocast::_AUTOCAST_SUPPORTED_DEVICES[i];
      at::autocast::set_autocast_enabled(type, enabled_[i]);
      at::autocast::set_autocast_dtype(type, dtype_[i]);
    }
    at::autocast::set_autocast_cache_enabled(cache_enabled_);
  }
  bool operator==(const AutocastState&) const = default;

 private:
  // torch's own list (a device type it adds is captured too).
  static constexpr size_t kTypes =
      std::tuple_size_v<std::remove_cv_t<decltype(at::autocast::_AUTOCAST_SUPPORTED_DEVICES)>>;
  std::array<bool, kTypes> enabled_{};
  std::array<at::ScalarType, kTypes> dtype_{};
  bool cache_enabled_ = true;
};

// While alive, the forward's autocast state, as Python's `with torch.autocast(...)` enters it (one
// nesting level more; the cast cache cleared when the outermost level ends); then the caller's.
class AutocastFork {
 public:
  explicit AutocastFork(const AutocastState& forward) : caller_(AutocastState::current()) {
    forward.apply();
    at::autocast::increment_nesting();
  }
  ~AutocastFork() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    caller_.apply();
  }
  AutocastFork(const AutocastFork&) = delete;
  AutocastFork& operator=(const AutocastFork&) = delete;

 private:
  AutocastState caller_;
};

// ---- frames ------------------------------------------------------------------------------------

class FrameGuard {
 public:
  explicit FrameGuard(detail::HookSource* source) : token_(detail::push_source_frame(source)) {}
  ~FrameGuard() { detail::pop_frame(token_); }
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;

 private:
  uint64_t token_;
};

struct SavedMeta {
  c10::SmallVector<int64_t, 5> sizes;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::kCPU;

  static SavedMeta of(const at::Tensor& t) {
    return {c10::SmallVector<int64_t, 5>(t.sizes().begin(), t.sizes().end()), t.scalar_type(),
            t.device()};
  }
  bool matches(const at::Tensor& t) const {
    return t.scalar_type() == dtype && t.device() == device &&
           std::equal(sizes.begin(), sizes.end(), t.sizes().begin(), t.sizes().end());
  }
  std::string describe() const {
    std::ostringstream out;
    out << c10::toString(dtype) << "[";
    for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
    out << "] on " << device;
    return out.str();
  }
};

// A hook source of this file: a region's forward, or its recompute. A region inside one takes
// the observer from it.
class RegionSource : public detail::HookSource {
 public:
  virtual std::shared_ptr<Observer> observer() const = 0;
};

// The recompute's saved tensors, in the order they were saved.
class Capture final : public RegionSource {
 public:
  explicit Capture(std::shared_ptr<Observer> observer) : observer_(std::move(observer)) {}
  std::unique_ptr<ag::SavedVariableHooks> make_hooks() override {
    return std::make_unique<Hooks>(this);
  }
  std::shared_ptr<Observer> observer() const override { return observer_; }
  std::vector<at::Tensor> tensors;

 private:
  class Hooks final : public ag::SavedVariableHooks {
   public:
    explicit Hooks(Capture* capture) : capture_(capture) {}
    // Detached: the recomputed graph is dropped once the rerun returns, and a tensor kept with its
    // grad_fn would keep that graph alive.
    void call_pack_hook(const at::Tensor& t) override {
      capture_->tensors.push_back(t.requires_grad() ? t.detach() : t);
    }
    at::Tensor call_unpack_hook() override {
      throw CheckpointError("offtune checkpoint: a recomputed region's own graph was backwarded");
    }

   private:
    Capture* capture_;  // only used during the rerun, while it is alive
  };
  std::shared_ptr<Observer> observer_;
};

// One checkpointed region: what its forward kept (the inputs, the RNG state, the function) and
// the tensors a backward recomputed and its nodes have not taken yet.
class Region final : public RegionSource,
                     public detail::TaskListener,
                     public std::enable_shared_from_this<Region> {
 public:
  Region(CheckpointFunction fn, const CheckpointOptions& options)
      : fn_(std::move(fn)), options_(options) {}

  // Keeps the inputs: inside another region's forward (or recompute) as saved tensors of that
  // region, else through the offloader of the scope active here when there is one (they are the
  // checkpoint boundaries), else as they are.
  void keep_inputs(const std::vector<at::Tensor>& inputs) {
    auto* outer = static_cast<RegionSource*>(detail::top_source());  // only this file's sources
    const detail::OffloadTarget target = detail::top_target();
    inputs_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& t = inputs[i];
      Input& in = inputs_[i];
      if (!t.defined()) continue;
      in.defined = true;
      in.requires_grad = t.requires_grad();
      if (outer != nullptr) {
        in.saved = outer->make_hooks();
        in.saved->call_pack_hook(t);
      } else if (target.ctx != nullptr) {
        auto slot = detail::make_slot(*target.ctx, target.generation);
        detail::pack_boundary(*slot, t);
        in.saved = std::move(slot);
      } else {
        // Detached: shares the storage and the version counter (checked at recompute).
        in.kept = t.detach();
        in.version = t._version();
      }
    }
    if (outer != nullptr) {
      observer_ = outer->observer();
    } else if (target.ctx != nullptr) {
      observer_ = detail::observer_of(*target.ctx);
    }
    if (options_.preserve_rng_state) rng_.capture(inputs);
    autocast_ = AutocastState::current();
  }

  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) {
    FrameGuard frame(this);
    return fn_(inputs);
  }

  std::unique_ptr<ag::SavedVariableHooks> make_hooks() override {
    return std::make_unique<Placeholder>(shared_from_this());
  }
  std::shared_ptr<Observer> observer() const override { return observer_; }

  // What a backward's nodes did not take goes when it ends.
  void end_of_task(int task) noexcept override {
    std::optional<Recomputed> dropped;  // destroyed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_task_.find(task);
    if (it == by_task_.end()) return;
    dropped.emplace(std::move(it->second));
    by_task_.erase(it);
  }

 private:
  struct Input {
    bool defined = false;
    bool requires_grad = false;
    at::Tensor kept;  // neither of the below
    // Through the outer region's hooks (a nested region) or the offloader (a boundary).
    std::unique_ptr<ag::SavedVariableHooks> saved;
    uint32_t version = 0;
  };

  struct Recomputed {
    std::vector<at::Tensor> tensors;
    std::vector<bool> taken;
    size_t left = 0;
  };

  // A saved tensor of the region's forward: its index in pack order.
  class Placeholder final : public ag::SavedVariableHooks {
   public:
    explicit Placeholder(std::shared_ptr<Region> region) : region_(std::move(region)) {}
    void call_pack_hook(const at::Tensor& t) override { index_ = region_->note_saved(t); }
    at::Tensor call_unpack_hook() override { return region_->take(index_); }

   private:
    std::shared_ptr<Region> region_;
    size_t index_ = 0;
  };

  size_t note_saved(const at::Tensor& t) {
    if (options_.check_recompute) saved_.push_back(SavedMeta::of(t));
    return count_++;
  }

  at::Tensor take(size_t index) {
    const int task = detail::current_graph_task_id();
    std::lock_guard<std::mutex> lock(mutex_);  // one recompute at a time; captures do not lock
    auto it = by_task_.find(task);
    if (it == by_task_.end()) {
      it = by_task_.emplace(task, recompute()).first;
      (void)detail::listen_to_current_task(weak_from_this());
    }
    Recomputed& r = it->second;
    if (index >= r.tensors.size() || r.taken[index]) {
      throw CheckpointError(
          "offtune checkpoint: a saved tensor of a checkpointed region was unpacked twice in one "
          "backward");
    }
    at::Tensor out = std::move(r.tensors[index]);
    r.taken[index] = true;
    if (--r.left == 0) by_task_.erase(it);
    return out;
  }

  Recomputed recompute() {
    detail::SpanGuard span(observer_.get(), {SpanKind::Recompute});
    const int64_t begin = observer_ ? host_sim::clock_ns() : 0;
    std::vector<at::Tensor> args(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      Input& in = inputs_[i];
      if (!in.defined) continue;
      at::Tensor t;
      if (in.saved) {
        t = in.saved->call_unpack_hook();  // the offloader checks the version itself
      } else {
        t = in.kept;
        TORCH_CHECK(t._version() == in.version,
                    "one of the variables needed for gradient computation has been modified by "
                    "an inplace operation: the input ",
                    i, " of a checkpointed region, ", SavedMeta::of(t).describe(),
                    ", is at version ", t._version(), "; expected version ", in.version,
                    " instead. (offtune: the region recomputes from its inputs in backward.)");
      }
      args[i] = t.detach();
      args[i].requires_grad_(in.requires_grad);
    }
    Capture capture(observer_);
    {
      std::optional<RngFork> fork;
      if (options_.preserve_rng_state) fork.emplace(rng_);
      // Nothing to do when the forward had autocast off and the caller has the same state (the
      // common case: no autocast anywhere).
      std::optional<AutocastFork> autocast;
      if (autocast_.any_enabled() || !(autocast_ == AutocastState::current())) {
        autocast.emplace(autocast_);
      }
      at::AutoGradMode grad(true);
      FrameGuard frame(&capture);
      (void)fn_(args);
    }
    if (options_.check_recompute) check(capture.tensors);
    if (capture.tensors.size() < count_) {
      throw CheckpointError("offtune checkpoint: the recompute saved " +
                            std::to_string(capture.tensors.size()) +
                            " tensors where the forward saved " + std::to_string(count_));
    }
    capture.tensors.resize(count_);  // without the check: extra saves are ignored
    Recomputed r;
    r.left = count_;
    r.taken.assign(count_, false);
    r.tensors = std::move(capture.tensors);
    if (observer_) {
      RecomputeEvent ev;
      ev.begin_ns = begin;
      ev.end_ns = host_sim::clock_ns();
      ev.tensors = static_cast<int64_t>(count_);
      for (const at::Tensor& t : r.tensors) {
        if (t.defined() && t.has_storage()) ev.bytes += static_cast<int64_t>(t.nbytes());
      }
      observer_->on_recompute(ev);
    }
    return r;
  }

  // The recompute must save what the forward saved: same count, shapes, dtypes and devices.
  void check(const std::vector<at::Tensor>& got) const {
    if (got.size() != saved_.size()) {
      throw CheckpointError("offtune checkpoint: the recompute saved " +
                            std::to_string(got.size()) + " tensors where the forward saved " +
                            std::to_string(saved_.size()) +
                            " (the region must compute the same thing twice: no data-dependent "
                            "control flow, and capture by value what it uses)");
    }
    for (size_t i = 0; i < got.size(); ++i) {
      if (!saved_[i].matches(got[i])) {
        throw CheckpointError("offtune checkpoint: saved tensor " + std::to_string(i) +
                              " of the region was " + saved_[i].describe() +
                              " in the forward and " + SavedMeta::of(got[i]).describe() +
                              " in the recompute");
      }
    }
  }

  CheckpointFunction fn_;
  const CheckpointOptions options_;
  std::vector<Input> inputs_;
  RngState rng_;
  AutocastState autocast_;
  std::shared_ptr<Observer> observer_;
  std::vector<SavedMeta> saved_;
  size_t count_ = 0;
  std::mutex mutex_;
  std::map<int, Recomputed> by_task_;
};

}  // namespace

std::vector<at::Tensor> checkpoint(CheckpointFunction fn, const std::vector<at::Tensor>& inputs,
                                   const CheckpointOptions& options) {
  if (!fn) throw CheckpointError("offtune checkpoint: no function to run");
  if (!at::GradMode::is_enabled()) return fn(inputs);  // nothing will be saved
  detail::ensure_engine_installed();
  auto region = std::make_shared<Region>(std::move(fn), options);
  region->keep_inputs(inputs);
  return region->forward(inputs);
}

at::Tensor checkpoint(std::function<at::Tensor(const at::Tensor&)> fn, const at::Tensor& input,
                      const CheckpointOptions& options) {
  if (!fn) throw CheckpointError("offtune checkpoint: no function to run");
  auto outputs = checkpoint(
      [fn = std::move(fn)](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{fn(in[0])};
      },
      std::vector<at::Tensor>{input}, options);
  return outputs[0];
}

std::string to_string(const CheckpointPolicy& policy) {
  switch (policy.kind) {
    case CheckpointPolicy::Kind::None:
      return "none";
    case CheckpointPolicy::Kind::All:
      return "all";
    case CheckpointPolicy::Kind::Every:
      return "every:" + std::to_string(policy.every);
  }
  return "none";
}

CheckpointPolicy parse_checkpoint_policy(std::string_view text) {
  if (text == "none") return CheckpointPolicy::none();
  if (text == "all") return CheckpointPolicy::all();
  constexpr std::string_view kEvery = "every:";
  if (text.substr(0, kEvery.size()) == kEvery) {
    const std::string_view digits = text.substr(kEvery.size());
    int64_t k = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (ec == std::errc{} && ptr == digits.data() + digits.size() && k >= 1) {
      return k == 1 ? CheckpointPolicy::all() : CheckpointPolicy::every_k(k);
    }
  }
  throw OptionsError("unknown checkpoint policy '" + std::string(text) +
                     "' (valid: none, all, every:K with K >= 1)");
}

}  // namespace offtune
