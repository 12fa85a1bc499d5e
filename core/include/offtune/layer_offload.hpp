// Layer offloading of frozen weights (Axolotl's `layer_offloading: true`, done in C++): the frozen
// (requires_grad = false) parameters of a model's blocks live in pinned host memory and are copied
// to the device one block ahead of their use, on a side stream; trainable parameters (LoRA
// adapters) stay on the device. Frozen weights are never copied back: they did not change.
//
//   offtune::LayerOffloader layers(activation_offloader, {.depth = 1});  // shares its copy stream
//   for (auto& block : model->blocks) layers.add_block(frozen_parameters_of(block));
//   ...
//   for (i ...) { auto resident = layers.block(i); h = blocks[i](h); }     // forward
//
// Schedule. Blocks are numbered in forward order. Entering block i (forward, or its checkpoint
// recompute inside backward) makes its frozen parameters point at device copies, waiting for the
// copy when it was issued earlier, and issues the copies of the next `depth` blocks of the
// schedule: i+1, i+2, ... in forward; i-1, i-2, ... inside backward (a recompute re-enters the
// blocks in backward order); past the last block forward turns into backward (the last blocks are
// the first a checkpointed backward recomputes) and past block 0 backward turns into the next
// step's forward. Leaving a block lets its device copies go unless it is among the next `depth`.
// At most depth + 1 blocks are resident this way.
//
// Lifetimes. A block's device copies are ordinary device storages, one per parameter, and freed
// when nothing refers to them: what autograd saved for backward keeps them as long as it needs
// them. Autograd saves the frozen weights of every block for the gradient of the activations
// (linear saves weight.t()). With an ActivationOffloader's scope active, those saved tensors are
// references to the layer offloader's copies (no device memory held) and are had again in
// backward, in backward order with prefetch; with checkpointing a block's forward saves nothing and
// its recompute's saved weights go with its backward. Either way the peak drops by about the
// frozen bytes of all blocks but depth + 1 (measured: tests/test_layer_offload.cpp). With neither
// (no hooks see what autograd saves), every block's weights stay on the device from forward to
// backward and the peak does not drop.
//
// A parameter that autograd saved as itself (x * weight saves the weight's own tensor, where
// linear saves a view of it) would be read in backward through the parameter, whatever it points
// at by then: the offloader sees its TensorImpl gain references that its storage did not while its
// block runs, and keeps it on the device from then on (stats().kept_on_device). That happens
// where no offloader's hooks see the save (no scope, or a checkpoint's recompute); in the built-in
// models these are the norms' weights, a few KiB a block.
//
// With an ActivationOffloader: one link (the copies share its copy stream and backend), its
// observer hears the weight copies (CopyEvent::weights) apart from the activations', and the device
// copies of frozen weights are never offloaded as activations: saved under its scope, they are
// kept as references to this offloader's copies (above).
//
// Threads: enter/exit come from the thread running the block (a recompute runs on an autograd
// thread); one block at a time, as a model's forward runs them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "offtune/observer.hpp"
#include "offtune/offloader.hpp"
#include "offtune/options.hpp"

namespace at {
class Tensor;
}

namespace offtune {

namespace detail {
class LayerState;
}

struct LayerOffloadOptions {
  // Blocks copied ahead of the one running (>= 1). More hides a slow link better and costs a
  // block of device memory each.
  int64_t depth = 1;
  // The rest is used by an offloader of its own (no ActivationOffloader to share): as in
  // OffloadOptions.
  BackendKind backend = BackendKind::Auto;
  int device_index = -1;
  bool use_pin_memory = true;
  LinkModel link{};                 // host-sim only
  int64_t debug_copy_delay_ns = 0;  // hold every copy back (races show as wrong values)
  bool poison_freed = false;        // host-sim only (debug), as OffloadOptions::poison_freed
  bool reuse_freed = false;         // host-sim only (debug), as OffloadOptions::reuse_freed

  // Throws OptionsError naming the first bad field.
  void validate() const;
};

// Counters since construction (monotonic), and the sizes registered.
struct LayerOffloadStats {
  int64_t blocks = 0;
  int64_t parameters = 0;       // frozen parameters registered
  int64_t frozen_bytes = 0;     // their bytes, all blocks (what lives in host memory)
  int64_t max_block_bytes = 0;  // the largest block's
  int64_t loads = 0;            // blocks copied to the device
  int64_t loaded_bytes = 0;
  int64_t prefetched = 0;    // of them, issued ahead of use
  int64_t demand_loads = 0;  // issued when the block was entered (not prefetched)
  int64_t waits = 0;         // enters that waited for a copy still running
  // Parameters that a graph saved as themselves (x * weight, a norm's weight), found when their
  // block was left: they stay on the device from then on (their bytes leave frozen_bytes).
  int64_t kept_on_device = 0;
  int64_t device_to_host = 0;  // copies of frozen weights back to the host: always 0
};

class LayerOffloader {
 public:
  // An offloader with its own backend and copy stream (options.backend).
  explicit LayerOffloader(LayerOffloadOptions options = {});
  // Shares `activations`' backend, copy stream and observer ("one link"); `activations` must
  // outlive nothing: the layer offloader keeps what it shares alive.
  LayerOffloader(ActivationOffloader& activations, LayerOffloadOptions options = {});
  // Gives every frozen parameter a device copy again (as before add_block).
  ~LayerOffloader();
  LayerOffloader(const LayerOffloader&) = delete;
  LayerOffloader& operator=(const LayerOffloader&) = delete;

  // Registers the next block's frozen parameters (forward order) and returns its index. Each is
  // copied to host memory and its device storage released; until the block is entered it has its
  // shape but no data (a zero-byte storage with a null pointer: reading it outside its block is a
  // bug, and crashes rather than computing with stale values).
  // Throws std::invalid_argument for a parameter that requires grad, is not contiguous, is not on
  // the backend's device, or was registered already.
  int64_t add_block(std::vector<at::Tensor> frozen);

  void enter(int64_t block);
  void exit(int64_t block);

  // enter(block) now, exit(block) at the end of the scope.
  class Resident {
   public:
    Resident(Resident&& other) noexcept : owner_(other.owner_), block_(other.block_) {
      other.owner_ = nullptr;
    }
    Resident& operator=(Resident&&) = delete;
    Resident(const Resident&) = delete;
    Resident& operator=(const Resident&) = delete;
    ~Resident();

   private:
    friend class LayerOffloader;
    Resident(LayerOffloader* owner, int64_t block) : owner_(owner), block_(block) {}
    LayerOffloader* owner_;
    int64_t block_;
  };
  [[nodiscard]] Resident block(int64_t block);

  // Lets every device copy go that no graph holds (after training, before an evaluation that does
  // not use the blocks, ...). The next enter loads its block again.
  void release();
  // Blocks until every copy issued has finished.
  void synchronize();

  // Standalone only (with a shared ActivationOffloader its observer is used): attach or detach.
  void set_observer(std::shared_ptr<Observer> observer);

  // Whether its copies use `activations`' link (nullptr: whether it has a link of its own).
  bool uses_link_of(const ActivationOffloader* activations) const;

  const LayerOffloadOptions& options() const;
  BackendKind backend() const;
  int64_t blocks() const;
  LayerOffloadStats stats() const;
  // Blocks whose device copies the offloader holds now (resident or being copied).
  int64_t resident_blocks() const;
  DeviceMemory device_memory() const;
  void reset_peak_device_memory();

 private:
  std::shared_ptr<detail::LayerState> state_;
};

}  // namespace offtune
