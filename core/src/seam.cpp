// Why this seam exists: libtorch has no public C++ API for default saved-tensor hooks. Python's
// `torch.autograd.graph.saved_tensors_hooks` works because every SavedVariable asks
// `Engine::get_default_engine().get_default_saved_variable_hooks()` for a hooks object, and the
// Python engine (a subclass) answers from its hook stack. We do the same from C++: subclass
// torch::autograd::Engine, answer that virtual from offtune's per-thread frame stack, and install
// the subclass with set_default_engine_stub. These are internal APIs, so they are confined to this
// file and checked against the pinned torch (tests/test_seam.cpp; static_asserts below).
//
// Verified on torch 2.15.0 (the pinned version) and written to compile on torch >= 2.4.
#include "seam.hpp"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <mutex>
#include <type_traits>
#include <vector>

#include "offtune/options.hpp"

namespace offtune::detail {
namespace {

namespace ag = torch::autograd;

// The virtual we override must keep this exact signature; fail the build loudly if a torch upgrade
// changes it instead of silently never being called.
static_assert(std::is_same_v<decltype(&ag::Engine::get_default_saved_variable_hooks),
                             std::unique_ptr<ag::SavedVariableHooks> (ag::Engine::*)()>,
              "torch changed Engine::get_default_saved_variable_hooks; update offtune's seam");

thread_local std::vector<Context*> t_frames;

class HooksAdapter final : public ag::SavedVariableHooks {
 public:
  explicit HooksAdapter(std::unique_ptr<SavedTensorSlot> slot) : slot_(std::move(slot)) {}
  void call_pack_hook(const at::Tensor& tensor) override { slot_->pack(tensor); }
  at::Tensor call_unpack_hook() override { return slot_->unpack(); }

 private:
  std::unique_ptr<SavedTensorSlot> slot_;
};

class OfftuneEngine final : public ag::Engine {
 public:
  OfftuneEngine() = default;
  // Engine's contract: a subclass stops the worker threads before its own members go away.
  ~OfftuneEngine() override { stop(); }

  std::unique_ptr<ag::SavedVariableHooks> get_default_saved_variable_hooks() override {
    // Hot path for every saved tensor in the process: one thread-local read when offtune is idle.
    if (t_frames.empty() || t_frames.back() == nullptr) {
      return nullptr;
    }
    return std::make_unique<HooksAdapter>(make_slot(*t_frames.back()));
  }
};

ag::Engine& offtune_engine() {
  // Leaked on purpose: autograd worker threads may outlive static destruction.
  static auto* engine = new OfftuneEngine();
  return *engine;
}

}  // namespace

void ensure_engine_installed() {
  static std::once_flag once;
  static bool foreign = false;
  std::call_once(once, [] {
    ag::Engine& current = ag::Engine::get_default_engine();
    if (&current != &ag::Engine::get_base_engine() && &current != &offtune_engine()) {
      foreign = true;
      return;
    }
    ag::set_default_engine_stub(&offtune_engine);
  });
  if (foreign) {
    throw EngineError(
        "offtune: another autograd engine is the default (torch loaded from Python?); offtune's "
        "C++ "
        "hooks cannot be installed there. Use torch's saved_tensors_hooks from Python instead.");
  }
}

void push_frame(Context* ctx) { t_frames.push_back(ctx); }
void pop_frame() {
  if (!t_frames.empty()) t_frames.pop_back();
}
Context* top_frame() { return t_frames.empty() ? nullptr : t_frames.back(); }
bool frame_stack_empty() { return t_frames.empty(); }

int current_graph_task_id() { return ag::get_current_graph_task_id(); }
bool current_graph_task_keep_graph() { return ag::get_current_graph_task_keep_graph(); }
void queue_end_of_backward(std::function<void()> fn) {
  ag::Engine::get_default_engine().queue_callback(std::move(fn));
}

}  // namespace offtune::detail
