// Layer offloading of frozen weights (Axolotl's `layer_offloading: true`, done in C++): the frozen
// (requires_grad = false) parameters of a model's blocks live in pinned host memory and are copied
// to the device one block ahead of their use, on a side stream; trainable parameters (LoRA
// adapters) stay on the device. A frozen weight changed while on the device is copied back when its
// block's device copy goes (see "Registered weights" below).
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
// Registered weights: what a program may and may not do with them.
// - Read or change them inside their block (between enter and exit, or while block() lives): they
//   are device tensors there. A change made with a tensor op (w.mul_(2), w.copy_(v), an optimizer's
//   update, a LoRA merge: anything that bumps the weight's version counter) is kept: the device
//   copy is written back to the host copy when it goes (stats().device_to_host), and the copy
//   waits for the stream that leaves the block.
// - Outside their block they point at their host copy, keeping shape, dtype and device: reading and
//   writing them there works (a parameter loop, an EMA, a norm, saving a checkpoint, a change
//   between steps) and reads and writes the host copy itself, on cuda over the link (slow; pinned
//   memory only). A block copied ahead before such a change is copied again when entered
//   (stats().refreshed). With LayerOffloadOptions::strict, or on cuda when the host copy is
//   pageable (pinning failed or use_pin_memory = false), any op that reads or writes one outside
//   its block throws c10::Error naming the weight and its block instead.
// - Not seen: a write that bypasses the version counter (through tensor.data(), a raw pointer, or
//   another library's kernel). Inside the block it is lost when the block's device copy goes;
//   outside, a block copied ahead keeps the old values. Write through the weight itself.
// - Do not keep a view of a weight across its block's entries: a view holds the storage it was
//   taken on (the host copy, or one device copy), so it neither sees nor makes later changes.
// - A registered weight must stay frozen: one that requires grad when its block is entered is
//   refused (std::logic_error). Unfreeze it after the offloader is destroyed.
// - Register each weight once, by the tensor that owns its storage: a weight in two blocks, a view
//   of another tensor, and a weight whose storage another tensor shares are refused at add_block.
// - Destroying the offloader gives every weight a device copy again, with its changes.
//
// Threads: enter/exit come from the thread running the block (a recompute runs on an autograd
// thread); one block at a time, as a model's forward runs them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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
  // Outside their block, registered weights throw (c10::Error naming the weight and its block)
  // on any op that reads or writes them, instead of reaching their host copy: for a program that
  // wants to hear of such access (on cuda it runs over the link).
  bool strict = false;

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
  // Weights changed on the device and written back to their host copy when it went (one per
  // weight and write-back).
  int64_t device_to_host = 0;
  // Weights copied again because their host copy changed after their block was copied ahead.
  int64_t refreshed = 0;
  // Look-ahead loads not issued because they did not fit in device memory (the block is loaded
  // when entered instead).
  int64_t prefetch_skipped = 0;
};

class LayerOffloader {
 public:
  // An offloader with its own backend and copy stream (options.backend).
  explicit LayerOffloader(LayerOffloadOptions options = {});
  // Shares `activations`' backend, copy stream and observer ("one link"); `activations` must
  // outlive nothing: the layer offloader keeps what it shares alive.
  LayerOffloader(ActivationOffloader& activations, LayerOffloadOptions options = {});
  // Gives every frozen parameter a device copy again (as before add_block), with its changes; a
  // view of a weight taken outside its block moves to the device with it.
  ~LayerOffloader();
  LayerOffloader(const LayerOffloader&) = delete;
  LayerOffloader& operator=(const LayerOffloader&) = delete;

  // Registers the next block's frozen parameters (forward order) and returns its index. Each is
  // copied to host memory and its device storage released; outside its block it points at its host
  // copy (see "Registered weights" above). `names` (one per parameter, or none) name them in
  // errors. Throws std::invalid_argument, registering nothing of the block, for a parameter that
  // requires grad, is an inference tensor, is not contiguous, is not on the backend's device, is
  // registered already, shares its storage with a registered weight or another tensor, or is part
  // of a larger storage.
  int64_t add_block(std::vector<at::Tensor> frozen, std::vector<std::string> names = {});

  // Out of device memory, enter throws c10::OutOfMemoryError only when the block itself does not
  // fit (a look-ahead that does not fit is skipped: stats().prefetch_skipped), and leaves the
  // offloader as it was: the block can be entered again once memory is free. Throws
  // std::logic_error for a weight of the block that requires grad.
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
  // not use the blocks, ...), writing changed weights back first. The next enter loads its block
  // again.
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
