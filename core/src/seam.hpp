// The one seam between offtune and libtorch's internal autograd API (see seam.cpp for why it
// exists). Nothing else in offtune includes torch/csrc/autograd internals.
#pragma once

#include <functional>
#include <memory>

namespace at {
class Tensor;
}

namespace offtune::detail {

class Context;

// One saved tensor's pack/unpack pair. The seam makes one per tensor that autograd saves under an
// active offload scope and destroys it when autograd drops the saved tensor: after its node's
// backward ran (graph not retained), or when the graph is freed. That destruction is the "node
// finished" signal. pack() may never be called (autograd skips hooks for wrapped numbers).
class SavedTensorSlot {
 public:
  virtual ~SavedTensorSlot() = default;
  virtual void pack(const at::Tensor& tensor) = 0;
  virtual at::Tensor unpack() = 0;
};

// Installs offtune's autograd Engine as libtorch's default engine, once per process. Throws
// EngineError when another engine (Python's, when torch is loaded from Python) is already the
// default: replacing it would break Python's own saved-tensor hooks.
void ensure_engine_installed();

// Per-thread stack of frames: an offloader's context, or nullptr for a no-offload region.
void push_frame(Context* ctx);
void pop_frame();
Context* top_frame();  // nullptr when the stack is empty or a no-offload region is innermost
bool frame_stack_empty();

// Backward-pass facts from the autograd engine; valid on an autograd thread inside backward.
int current_graph_task_id();  // -1 outside backward
bool current_graph_task_keep_graph();
// Runs `fn` when the current backward finishes successfully. Requires current_graph_task_id() >= 0.
void queue_end_of_backward(std::function<void()> fn);

// Implemented by Context (offloader.cpp): a new slot for the saved tensor about to be packed.
std::unique_ptr<SavedTensorSlot> make_slot(Context& ctx);

}  // namespace offtune::detail
