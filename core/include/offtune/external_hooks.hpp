// The engine's saved-tensor hooks for a process whose autograd engine is not offtune's: in Python,
// torch's own engine is the default and torch.autograd.graph.saved_tensors_hooks is the supported
// seam (DESIGN.md, "In a Python process, Python's hooks carry the engine"). A front end there makes
// its offloader with HookCarrier::External and, per forward, one ExternalHooks (what an
// OffloadScope is in C++); for each tensor autograd saves under it, the other engine asks for a
// hooks object, and make() gives one.
//
//   offtune::ActivationOffloader off(opts, offtune::HookCarrier::External);
//   offtune::ExternalHooks forward(off);          // one per forward
//   auto hooks = forward.make();                   // per saved tensor, in the pack hook:
//   hooks->call_pack_hook(tensor);                 //   once
//   at::Tensor t = hooks->call_unpack_hook();      //   in backward, any number of times
//   hooks.reset();                                 //   when autograd drops the saved tensor
//
// What a caller must do: call call_pack_hook once, before any unpack; destroy the object when the
// other engine drops the saved tensor (after its node's backward, or with its graph): that is the
// engine's "node finished" signal, and nothing is given back before it. What the engine does by
// itself: the first unpack inside a backward registers the end-of-backward cleanup with the running
// engine (torch::autograd::Engine::queue_callback), so prefetched buffers and those of a retained
// graph go when that backward returns. A backward that fails runs no such callback: what it
// brought in goes when the saved tensors are destroyed (when the graph is freed).
//
// Threads: make(), pack and unpack may run on any thread (autograd's included); tensors saved on
// autograd's threads reach this offloader only if the other engine carries the hooks there (Python
// does). No scope is needed for backward.
#pragma once

#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <cstdint>
#include <memory>

#include "offtune/offloader.hpp"

namespace offtune {

class ExternalHooks {
 public:
  // A new forward of `offloader` (backward prefetch stays within one forward, as with a scope).
  // The offloader may be made with either carrier; saved tensors keep what they need alive.
  explicit ExternalHooks(const ActivationOffloader& offloader);

  // One saved tensor's hooks, managed by the offloader (offloaded or kept by its rules).
  std::unique_ptr<torch::autograd::SavedVariableHooks> make() const;

  // Hooks that keep the tensor, as autograd itself would: a no-offload region (the output head)
  // inside a forward whose other tensors go through make().
  static std::unique_ptr<torch::autograd::SavedVariableHooks> make_kept();
  // The floor hook of `kind` (see HookFloorScope), for benchmarks of the other engine's cost.
  static std::unique_ptr<torch::autograd::SavedVariableHooks> make_floor(HookFloor kind);

 private:
  std::shared_ptr<detail::Context> ctx_;
  uint64_t generation_ = 0;
};

}  // namespace offtune
