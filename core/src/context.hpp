// The engine's internal Context API: how offloader.cpp, checkpoint.cpp and layer_offload.cpp reach
// an offloader's context and the scope that is active on a thread. Two halves:
// - the per-thread stack of scope frames and the binding of each backward to the offloader that
//   receives what it saves (context.cpp, which answers offtune's autograd Engine through the
//   seam's AutogradClient);
// - Context's own face, free functions over the class that offloader.cpp keeps to itself
//   (implemented there).
// This header includes seam.hpp, and the seam includes nothing of the engine: the dependency goes
// one way (engine -> seam).
#pragma once

#include <c10/core/Storage.h>

#include <cstdint>
#include <memory>

#include "seam.hpp"

namespace at {
class Tensor;
}
namespace offtune {
class Observer;
enum class HookFloor : uint8_t;  // offtune/offloader.hpp
}  // namespace offtune

namespace offtune::detail {

class Context;  // offloader.cpp
class Backend;  // backend.hpp

// Installs offtune's autograd Engine (the seam's install_engine), answering from the frames below.
// Throws EngineError where another engine is the default (see install_engine).
void ensure_engine_installed();

// ---- scope frames (context.cpp) ----------------------------------------------------------------

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

// A HookFloorScope's hooks object of `kind`, for ExternalHooks (another engine's hooks).
std::unique_ptr<torch::autograd::SavedVariableHooks> make_floor_hooks(HookFloor kind);

// ---- backwards (context.cpp) -------------------------------------------------------------------

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
// (queue_final_callback), once per backward: when it succeeds, before backward() returns. A
// failed backward runs no final callbacks there; its buffers go with the saved tensors.
void note_unpack_in_backward(Context& ctx);

// ---- Context's face (offloader.cpp) ------------------------------------------------------------

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

}  // namespace offtune::detail
