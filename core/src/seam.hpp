// The one seam between offtune and libtorch's internal APIs (see seam.cpp for why it exists, and
// seam_ops.cpp for its second half, ATen's op observer). Checked against the pinned torch 2.15.0
// (static_asserts in seam.cpp and seam_ops.cpp, tests/test_seam.cpp). Nothing else in offtune
// includes torch/csrc/autograd internals; this header includes only the small abstract
// SavedVariableHooks interface, so that a saved tensor costs one allocation.
//
// The seam knows nothing of offloaders, scopes or checkpoints: offtune's autograd Engine asks the
// rest of offtune through AutogradClient, which the engine's scope stack implements (context.hpp).
// Includes go one way: the engine includes this header, never the other way round.
#pragma once

#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <c10/core/Storage.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace at {
class Tensor;
}
namespace offtune {
struct OpCall;
}  // namespace offtune

// The hooks' hot path (every saved tensor goes through it): these functions are grouped in
// .text.hot, so that the few hundred instructions of a kept tensor's pack, unpack and release share
// instruction-cache lines instead of each pulling in lines of its own between autograd's (a
// callgrind run counted ~78 more L1i misses per saved tensor than a no-op hook before).
#if defined(__GNUC__)
#define OFFTUNE_HOT [[gnu::hot]]
#else
#define OFFTUNE_HOT
#endif

namespace offtune::detail {

// One saved tensor's pack/unpack pair, handed to autograd as its SavedVariableHooks. The engine
// makes one per tensor that autograd saves under an active offload scope and autograd destroys it
// when it drops the saved tensor: after its node's backward ran (graph not retained), or when the
// graph is freed. That destruction is the "node finished" signal. pack() may never be called
// (autograd skips hooks for wrapped numbers); unpack() may be called more than once
// (retain_graph).
class SavedTensorSlot : public torch::autograd::SavedVariableHooks {
 public:
  OFFTUNE_HOT void call_pack_hook(const at::Tensor& tensor) final { pack(tensor); }
  OFFTUNE_HOT at::Tensor call_unpack_hook() final { return unpack(); }

 protected:
  virtual void pack(const at::Tensor& tensor) = 0;
  virtual at::Tensor unpack() = 0;
};

// What offtune's autograd Engine asks and tells the rest of offtune. The engine's scope stack
// implements it (context.cpp); the seam holds it and never learns what is behind it.
class AutogradClient {
 public:
  // Engine::get_default_saved_variable_hooks: the hooks object for the tensor autograd saves now
  // on this thread, or nullptr (autograd keeps the tensor itself). Runs for every saved tensor in
  // the process.
  virtual std::unique_ptr<torch::autograd::SavedVariableHooks> saved_variable_hooks() = 0;
  // Backward (graph task `task`) starts through offtune's engine, on the thread that called
  // backward() or grad() (for a backward started inside another one, that one's thread).
  virtual void task_started(int64_t task) = 0;
  // That backward has ended, successfully or not. Heard once or more per task: where autograd
  // completes the task (with CUDA an autograd device thread, after backward()'s caller was woken),
  // and again before backward() or grad() returns or throws. Only the first call does the work; a
  // later one returns once that work is done.
  virtual void task_finished(int64_t task) = 0;

 protected:
  ~AutogradClient() = default;
};

// Installs offtune's autograd Engine as libtorch's default engine, once per process, answering
// from `client` (the same one on every call; only the first call's is used). Throws EngineError
// when another engine (Python's, when torch is loaded from Python) is already the default:
// replacing it would break Python's own saved-tensor hooks.
void install_engine(AutogradClient& client);

// Whether keeping `t` itself in its saved tensor could close a reference cycle: its grad_fn may be
// the node that saves it (an op saving its own output), which is the newest node on this thread.
// When false, keeping `t` is what autograd itself does for a saved input.
bool may_be_saved_by_its_own_node(const at::Tensor& t);

// The backward (graph task) running on this thread; valid on an autograd thread inside backward,
// whichever engine runs it. -1 outside backward.
int current_graph_task_id();

// Runs `callback` when the backward running on this thread ends successfully, after its last
// node, before backward() returns (Engine::queue_callback: one of the graph task's final
// callbacks, whichever engine runs it, Python's included). A failed backward runs none.
void queue_final_callback(std::function<void()> callback);

// ATen's op observer (record-function callbacks), the other libtorch API this seam confines: the
// device model (sim_clock.cpp) hears every ATen op, on every thread, begin and end, to time it.
// The describe callbacks build the op's shapes (offtune/device_model.hpp's OpCall) and are valid
// only during the call: ATen keeps an op's inputs only until its begin callbacks have run, so
// op_begin takes what op_end will need; op_end gets the outputs.
class OpListener {
 public:
  virtual ~OpListener() = default;
  // `inputs` gives the name, the input tensors and the first bool argument.
  virtual void op_begin(std::string_view name, c10::function_ref<OpCall()> inputs) = 0;
  // `outputs` fills call.outputs.
  virtual void op_end(c10::function_ref<void(OpCall& call)> outputs) = 0;
};
// Installs `listener` (nullptr removes it); one at a time. The listener must outlive every op that
// started while it was installed (sim_clock.cpp's is never destroyed).
void set_op_listener(OpListener* listener);

// A storage of zero bytes on `device` whose data pointer, whenever an op asks for it to read or
// write a tensor on it, throws c10::Error with `message` instead of handing out a null pointer that
// the kernel would dereference (layer_offload.cpp: a frozen weight outside its block where its host
// copy cannot be reached). It uses StorageImpl's custom data-pointer error, which c10 keeps for
// torch's own fake and functional tensors: internal, hence here.
c10::Storage storage_that_throws(c10::Device device, std::string message);

// Exchanges the memory (data pointer and byte size) of two storages, so that every tensor on `a`
// reads what was `b`'s and the other way round (layer_offload.cpp moves a weight back to the device
// under the tensors that hold it). StorageImpl::swap_data_ptr does this from torch 2.12 on; older
// releases (the GPU machines' 2.11) lack it, so it is built from set_data_ptr, which both have.
void swap_storage_data(c10::StorageImpl& a, c10::StorageImpl& b);

// Sets the device caching allocator's expandable_segments for segments made from now on (the
// process's setting, as PYTORCH_CUDA_ALLOC_CONF would) and returns what it was. c10's allocator
// settings (c10/core/AllocatorConfig.h, the C++ side of torch.cuda.memory._set_allocator_settings,
// a private Python API) are read by CUDA's caching allocator and by host-sim's model of it
// (alloc_model.hpp) alike.
bool set_expandable_segments(bool on);

}  // namespace offtune::detail
