// Per-layer callbacks for the built-in models: the seam through which a profiler marks each block's
// forward and backward (the CLI connects them to NVTX ranges) without the models depending on the
// profiler. A model with no hooks set pays a test of two empty std::functions per block.
//
//   model->set_layer_hooks({.forward_begin = ..., .forward_end = ...,
//                           .backward_begin = ..., .backward_end = ...});
//
// Blocks are numbered from 0 in forward order: a decoder's blocks (Llama, GPT), the MLP's hidden
// Linear+GELU layers.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace offtune::samples {

struct LayerHooks {
  // Around block `layer`'s forward, on the thread running the forward: begin, the block, end (end
  // also when the block throws). Strictly nested in the caller's scopes, so a push/pop range fits.
  std::function<void(int64_t layer)> forward_begin;
  std::function<void(int64_t layer)> forward_end;

  // Block `layer`'s backward, taken from autograd tensor hooks: it begins when the gradient of the
  // block's output is complete (just before autograd runs the block's last op backwards) and ends
  // when the gradient of its input is. Weight gradients that are not on that path (accumulation
  // into .grad) may finish after the end. Calls come from whichever thread autograd runs the block
  // on (on cuda a device thread, never the one that called backward()), and begin and end of one
  // block need not share a thread: begin returns a token that end gets back, e.g. the id of an
  // NVTX start/end range (push/pop ranges do not fit).
  // Only blocks whose input the graph computed (requires grad, not a leaf) in a forward run with
  // grad mode on get a backward: the input's gradient is the end signal, and a hook on a leaf would
  // outlive the graph (it stays with the tensor, one more every forward). That is every decoder
  // block (the first reads the embedding's output), and the MLP's layers but the first (its input
  // is the data). A backward that stops early (an exception, or autograd::grad() to an inner
  // tensor) ends its open blocks when the graph is freed, so that every begin gets its end. Must
  // not throw: that end may come from a destructor.
  std::function<uint64_t(int64_t layer)> backward_begin;
  std::function<void(int64_t layer, uint64_t token)> backward_end;

  // A pair is used only when both of its functions are set.
  bool traces_forward() const { return forward_begin && forward_end; }
  bool traces_backward() const { return backward_begin && backward_end; }
};

namespace detail {

// One forward pass's layer marks, used by the models' forward loops:
//
//   LayerTrace trace(hooks_, n_blocks);
//   for (i ...) { auto block = trace.block(i, h); h = blocks[i](h); }
//   trace.finish(h);
//
// Backward boundaries: the tensor between blocks i-1 and i is block i's input and block i-1's
// output; one hook on it ends block i and then begins block i-1 (two hooks would run in
// registration order, beginning i-1 before ending i). The last block's output begins it.
class LayerTrace {
 public:
  LayerTrace(const LayerHooks& hooks, int64_t n_blocks)
      : hooks_(hooks),
        backward_(hooks.traces_backward() && at::GradMode::is_enabled()
                      ? std::make_shared<Backward>(hooks, n_blocks)
                      : nullptr) {}

  // RAII around one block's forward.
  class Block {
   public:
    Block(const LayerHooks& hooks, int64_t index) : hooks_(hooks), index_(index) {
      if (hooks_.traces_forward()) hooks_.forward_begin(index_);
    }
    ~Block() {
      if (hooks_.traces_forward()) hooks_.forward_end(index_);
    }
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;

   private:
    const LayerHooks& hooks_;
    const int64_t index_;
  };

  // Call before block `index` runs on `input` (the previous block's output, for index > 0).
  [[nodiscard]] Block block(int64_t index, const at::Tensor& input) {
    if (backward_ && input.requires_grad() && !input.is_leaf()) {
      backward_->slots[static_cast<size_t>(index)].traced = true;
      input.register_hook([state = backward_, index](const at::TensorBase&) {
        state->end(index);
        if (index > 0) state->begin(index - 1);
      });
    }
    return Block(hooks_, index);
  }

  // Call with the last block's output.
  void finish(const at::Tensor& output) {
    if (!backward_ || backward_->slots.empty() || !output.requires_grad()) return;
    const auto last = static_cast<int64_t>(backward_->slots.size()) - 1;
    output.register_hook([state = backward_, last](const at::TensorBase&) { state->begin(last); });
  }

 private:
  // Shared by the hooks of one forward's graph, and freed with it. No lock: block i's begin happens
  // before its end through autograd's own ordering (the end waits for a gradient computed after the
  // begin), and blocks touch their own slots only.
  struct Backward {
    struct Slot {
      bool traced = false;  // its input requires grad: the end has a hook
      bool open = false;
      uint64_t token = 0;
    };
    Backward(const LayerHooks& hooks, int64_t n_blocks)
        : begin_fn(hooks.backward_begin),
          end_fn(hooks.backward_end),
          slots(static_cast<size_t>(n_blocks)) {}
    ~Backward() {
      for (size_t i = 0; i < slots.size(); ++i) end(static_cast<int64_t>(i));
    }
    Backward(const Backward&) = delete;
    Backward& operator=(const Backward&) = delete;

    void begin(int64_t index) {
      Slot& s = slots[static_cast<size_t>(index)];
      if (!s.traced || s.open) return;  // no end would come, or already begun
      s.token = begin_fn(index);
      s.open = true;
    }
    void end(int64_t index) {
      Slot& s = slots[static_cast<size_t>(index)];
      if (!s.open) return;
      s.open = false;
      end_fn(index, s.token);
    }

    // Copies: the model's hooks may be replaced while this graph is alive.
    std::function<uint64_t(int64_t)> begin_fn;
    std::function<void(int64_t, uint64_t)> end_fn;
    std::vector<Slot> slots;
  };

  const LayerHooks& hooks_;
  std::shared_ptr<Backward> backward_;
};

}  // namespace detail

}  // namespace offtune::samples
