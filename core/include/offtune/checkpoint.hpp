// Gradient checkpointing for libtorch (which has none): a checkpointed region's forward keeps only
// its inputs; backward reruns the region to get back what its ops saved. Non-reentrant, as
// torch.utils.checkpoint(use_reentrant=False): the region's graph is the ordinary one, its saved
// tensors are placeholders, and the first unpack of one in a backward recomputes the region once
// for that backward (under the RNG state of the forward), handing each recomputed tensor to its
// node and dropping it as the node takes it.
//
//   h = offtune::checkpoint([block](const at::Tensor& x) { return block->forward(x); }, h);
//
// With offloading (an OffloadScope active where checkpoint() is called) the inputs, the checkpoint
// boundaries, go through that offloader like any saved tensor and are prefetched ahead of the
// recompute in backward, and the recompute's own saved tensors are never offloaded; with
// OffloadOptions::offload = OffloadSet::Boundaries the boundaries are all it moves.
//
// The function is kept until the graph is freed and called again in backward, maybe on another
// thread: capture what it uses by value (modules by their holder, tensors by value), never by
// reference to the caller's locals. It must compute the same thing both times; checkpoint()
// checks that the recompute saves as many tensors, of the same shapes, dtypes and devices, and
// throws CheckpointError otherwise. Inputs modified in place after the forward are detected at
// recompute (autograd's "modified by an inplace operation" error).
//
// What the recompute runs under, so that it computes what the forward did wherever backward is
// called (torch.utils.checkpoint does the same):
// - the forward's autocast state: per device type (CPU, CUDA and every other type ATen's autocast
//   knows) enabled or not and its dtype, and the cast cache's switch; the caller's state is back
//   when the recompute returns. A forward under autocast may be backwarded outside it, and the
//   other way round.
// - with preserve_rng_state, the forward's state of the CPU generator, of the default generator
//   of each device an input lives on, and of each CUDA device that had a context at the forward
//   (so dropout on a GPU draws the same mask when the input came from the host). A generator of
//   another accelerator that no input lives on is not restored; a generator the function creates
//   itself is its own business.
// Grad mode is on in the recompute; other thread-local state is the backward's (a guard the
// function needs, it sets itself).
//
// Regions nest: a checkpoint() inside a checkpointed function saves its inputs as saved tensors
// of the outer region (recomputed with it), so nested regions keep no more on the device than the
// outer ones alone. A NoOffloadRegion (or an excluded ModuleRegion) inside a checkpointed
// function only turns offloading off: its ops are still recomputed. Do not open an OffloadScope
// inside one: the ops under it are offloaded instead of recomputed (open scopes around
// checkpoint()).
//
// Each backward recomputes a region once, at its first unpack, and hands each recomputed tensor to
// its node; what that backward does not take (autograd::grad to a tensor inside, an output it does
// not reach, an exception part way) is dropped when it ends, so repeated partial backwards of a
// retained graph hold nothing between calls.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/checkpoint_policy.hpp"

namespace at {
class Tensor;
}

namespace offtune {

// The recompute saved other tensors than the forward did, or a region was misused (one line).
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckpointOptions {
  // Restore the forward's generator states for the recompute (the CPU's, each input device's and
  // each CUDA device's with a context, above), so that dropout draws the same mask; the caller's
  // RNG stream is left as it was.
  bool preserve_rng_state = true;
  // Compare what the recompute saved with what the forward saved (count, shape, dtype, device).
  bool check_recompute = true;
};

using CheckpointFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

// Runs `fn(inputs)` as a checkpointed region and returns its outputs. Undefined inputs are passed
// through. Under no grad mode it is a plain call.
std::vector<at::Tensor> checkpoint(CheckpointFunction fn, const std::vector<at::Tensor>& inputs,
                                   const CheckpointOptions& options = {});
// One input, one output.
at::Tensor checkpoint(std::function<at::Tensor(const at::Tensor&)> fn, const at::Tensor& input,
                      const CheckpointOptions& options = {});

}  // namespace offtune
