// The one seam between offtune and libtorch's internal autograd API (see seam.cpp for why it
// exists). Nothing else in offtune includes torch/csrc/autograd internals; this header includes
// only the small abstract SavedVariableHooks interface, so that a saved tensor costs one
// allocation.
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
class Observer;
enum class HookFloor : uint8_t;  // offtune/offloader.hpp
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

class Context;

// One saved tensor's pack/unpack pair, handed to autograd as its SavedVariableHooks. The seam makes
// one per tensor that autograd saves under an active offload scope and autograd destroys it when it
// drops the saved tensor: after its node's backward ran (graph not retained), or when the graph is
// freed. That destruction is the "node finished" signal. pack() may never be called (autograd
// skips hooks for wrapped numbers).
class SavedTensorSlot : public torch::autograd::SavedVariableHooks {
 public:
  OFFTUNE_HOT void call_pack_hook(const at::Tensor& tensor) final { pack(tensor); }
  // unpack(), then (host-sim, when checking stream order) the emulator's check that the tensor is
  // ready on the stream it is handed to.
  OFFTUNE_HOT at::Tensor call_unpack_hook() final;

 protected:
  virtual void pack(const at::Tensor& tensor) = 0;
  virtual at::Tensor unpack() = 0;
};

// Installs offtune's autograd Engine as libtorch's default engine, once per process. Throws
// EngineError when another engine (Python's, when torch is loaded from Python) is already the
// default: replacing it would break Python's own saved-tensor hooks.
void ensure_engine_installed();

// Per-thread stack of frames: an offloader's context with the generation its tensors join, or
// nullptr for a no-offload region. Frames are removed by the token push_frame returned, wherever
// they are in the stack (a movable scope may end out of order).
uint64_t push_frame(Context* ctx, uint64_t generation);
// A HookFloorScope's frame: no offloader (top_frame() is nullptr), and every saved tensor gets the
// floor hook of `kind`.
uint64_t push_floor_frame(HookFloor kind);
// A frame whose saved tensors get their hooks from `source` (checkpoint.cpp: a checkpointed
// region's forward, and its recompute). top_frame() is nullptr under it.
class HookSource {
 public:
  virtual ~HookSource() = default;
  virtual std::unique_ptr<torch::autograd::SavedVariableHooks> make_hooks() = 0;
};
uint64_t push_source_frame(HookSource* source);
void pop_frame(uint64_t token);
// The innermost frame's source: a checkpointed region's forward or recompute, also under a
// no-offload region inside one (push_frame(nullptr, 0) there keeps the source: a NoOffloadRegion
// turns offloading off, not checkpointing). nullptr elsewhere.
HookSource* top_source();
Context* top_frame();  // nullptr when the stack is empty or a no-offload region is innermost
// The innermost frame's offloader and the generation its tensors join ({nullptr, 0} as above).
struct OffloadTarget {
  Context* ctx = nullptr;
  uint64_t generation = 0;
};
OffloadTarget top_target();

// Whether keeping `t` itself in its saved tensor could close a reference cycle: its grad_fn may be
// the node that saves it (an op saving its own output), which is the newest node on this thread.
// When false, keeping `t` is what autograd itself does for a saved input.
bool may_be_saved_by_its_own_node(const at::Tensor& t);

// Backward-pass facts from the autograd engine; valid on an autograd thread inside backward.
int current_graph_task_id();  // -1 outside backward

// Keeps state per backward and drops it when that backward ends, successfully or not
// (checkpoint.cpp: the recomputed tensors of a region that the backward's nodes did not take).
class TaskListener {
 public:
  virtual ~TaskListener() = default;
  // Called once, on whichever thread ends the backward; must not throw.
  virtual void end_of_task(int task) noexcept = 0;
};
// `listener` (held weakly) hears the end of the current backward. False outside a backward, or in
// one not started through offtune's engine (then nothing is heard).
bool listen_to_current_task(std::weak_ptr<TaskListener> listener);

// Called by the engine when it unpacks a tensor inside backward: `ctx` takes part in the current
// backward (it hears end_of_backward when that backward ends, successfully or not), and becomes the
// offloader of the tensors that backward saves on its threads, unless the thread that called
// backward() named one (its innermost scope, or a no-offload region). In a backward run by another
// engine (Python's), `ctx` hears end_of_backward through that engine's final callbacks
// (Engine::queue_callback), once per backward: when it succeeds, before backward() returns. A
// failed backward runs no final callbacks there; its buffers go with the saved tensors.
void note_unpack_in_backward(Context& ctx);

// A HookFloorScope's hooks object of `kind`, for ExternalHooks (another engine's hooks).
std::unique_ptr<torch::autograd::SavedVariableHooks> make_floor_hooks(HookFloor kind);

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

// Implemented by Context (offloader.cpp).
std::unique_ptr<SavedTensorSlot> make_slot(Context& ctx, uint64_t generation);
// Packs a checkpoint boundary (a checkpointed region's input) into `slot`, made by make_slot: with
// OffloadOptions::offload == CheckpointBoundaries, the only tensors the offloader moves.
void pack_boundary(SavedTensorSlot& slot, const at::Tensor& tensor);
// The offloader's observer (may be null), for the events of a checkpoint that stored its
// boundaries there.
std::shared_ptr<Observer> observer_of(Context& ctx);
std::weak_ptr<Context> weak_of(Context& ctx);
uint64_t new_generation(Context& ctx);
void end_of_backward(Context& ctx, int task);
// For the layer offloader (layer_offload.cpp), which shares an activation offloader's link.
class Backend;
Backend& backend_of(Context& ctx);
// The storage is never offloaded (as ActivationOffloader::never_offload; held weakly).
void never_offload_storage(Context& ctx, const c10::Storage& storage);
// Device copies of frozen weights that can be had again (layer_offload.cpp). A tensor on one of
// its storages saved under the offloader is kept as a reference (no device memory held) and
// rebuilt at unpack on the storage acquire(key) returns, ready on the calling thread's stream.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual c10::Storage acquire(int64_t key) = 0;
};
// `storage` (held weakly, never offloaded) is weight `key` of `source` (held weakly).
void register_weight_storage(Context& ctx, const c10::Storage& storage,
                             std::weak_ptr<WeightSource> source, int64_t key);

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

}  // namespace offtune::detail
