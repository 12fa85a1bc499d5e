// Gradient checkpointing for TorchScript models, whose forward is a compiled graph that C++ cannot
// wrap block by block as the built-in models do: the blocks are named by module path (the
// container whose children they are, e.g. "model.layers" or "transformer.h", or found in the
// model), and each block's type is rewritten once so that its forward calls an operator that runs
// the original body either directly or as an offtune::checkpoint region (offtune/checkpoint.hpp),
// per instance. The policy can then change between steps at no cost.
//
//   torch::jit::Module m = torch::jit::load("model.pt");
//   offtune::samples::TorchScriptBlocks blocks(m, "");  // before m's first forward
//   blocks.set_policy(offtune::CheckpointPolicy::every_k(2));
//
// Blocks must take and return tensors only (a Tensor or a tuple of them). Their types are changed
// in place: every instance of a rewritten type, in this module or any other sharing the
// compilation unit, runs through the operator (plainly unless its blocks set it on), and a
// rewritten module saved with torch.jit.save needs offtune to load.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/checkpoint.hpp"

namespace offtune::samples {

// The blocks under one module path, ready to run as checkpointed regions.
class TorchScriptBlocks {
 public:
  // `path`: dotted submodule names from `module` ("model.layers"); empty = find_blocks(module).
  // Rewrites the blocks' types unless an earlier call did, and leaves every block plain (policy
  // none). Call it before the module's first forward: a method that already ran keeps the plan
  // its executor compiled, with the original blocks inlined in it (libtorch has no API to drop
  // it), and would never checkpoint. Throws std::invalid_argument (one line) when the path does
  // not exist or holds no children, when a block has no forward, or when a block's forward takes
  // or returns anything but tensors; nothing is changed then.
  TorchScriptBlocks(torch::jit::Module module, std::string_view path);

  // Which blocks (by position among the container's children) run as checkpointed regions from
  // the next forward on; none makes every block a plain call again.
  void set_policy(const CheckpointPolicy& policy);

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(blocks_.size()); }

 private:
  torch::jit::Module module_;
  std::string path_;
  std::vector<torch::jit::Module> blocks_;
};

// TorchScriptBlocks(module, blocks_path).set_policy(policy), for a module that has not run yet.
void checkpoint_blocks(torch::jit::Module& module, std::string_view blocks_path,
                       const CheckpointPolicy& policy);

// The module path of `module`'s blocks: among its submodules (at any depth, the module itself
// excluded) that have at least 2 direct children of one type (compared by qualified name without
// the `___torch_mangle_N` parts that tracing adds per instance), leave out those nested inside
// another's blocks, prefer children that have submodules of their own (decoder layers over a
// pair of embeddings), then take the most children. Throws std::invalid_argument (one line, with
// the candidates and "pass --blocks PATH") when there is none or a tie.
std::string find_blocks(const torch::jit::Module& module);

}  // namespace offtune::samples
