// The contract between a training workload and whatever drives it: the samples' models implement
// WorkloadInstance, the profiler's runner measures one, and a user's own training loop can be
// measured the same way. It lives in core so that neither side depends on the other (cli, gui ->
// profiler, samples -> core).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>

#include "offtune/checkpoint.hpp"
#include "offtune/options.hpp"

namespace offtune {

class ActivationOffloader;

// Phase times a step reports back (steady_clock ns, the engine's clock).
struct StepPhases {
  int64_t forward_begin = 0;
  int64_t forward_end = 0;  // == backward begin
  int64_t backward_end = 0;
  double loss = 0.0;
};

enum class StepPhase : uint8_t { Forward, Backward };

// Marks a driver asks a workload to emit while it steps (the profiler connects them to NVTX
// ranges). Every function may be empty; a pair is used only when both of its functions are set.
struct StepMarks {
  // Around a step's forward (with its loss) and its backward, on the thread that runs the step:
  // begin then end, strictly nested, so push/pop ranges fit.
  std::function<void(StepPhase)> phase_begin;
  std::function<void(StepPhase)> phase_end;
  // Around block `layer`'s forward, on the forward thread (nested inside the forward phase).
  std::function<void(int64_t layer)> layer_forward_begin;
  std::function<void(int64_t layer)> layer_forward_end;
  // Block `layer`'s backward, from whichever thread autograd runs it on; begin returns a token
  // (e.g. an NVTX start/end range id) that end gets back. Must not throw.
  std::function<uint64_t(int64_t layer)> layer_backward_begin;
  std::function<void(int64_t layer, uint64_t token)> layer_backward_end;
};

// A workload bound to its model: what a driver needs and nothing about which model it is.
class WorkloadInstance {
 public:
  virtual ~WorkloadInstance() = default;
  // An offloader set up for this model (head excluded, parameters registered).
  virtual std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) = 0;
  // One training step: forward (under `offloader`'s scope when not null), loss, backward, and the
  // optimizer step if the workload has one. Fills the phase times.
  virtual void step(ActivationOffloader* offloader, int64_t index, StepPhases& phases) = 0;
  // Waits for the device (cuda) so that host timestamps bracket the work.
  virtual void synchronize() {}
  // Readies the model for a run that must measure the same work as any other run of it: puts back
  // what steps change (the parameters and buffers as the model was built, the optimizer's state)
  // and does, outside any step, the one-time work of the model's first steps (a TorchScript
  // model's executor profiling and optimising its graph). A driver calls it at the start of each
  // run, after set_checkpoint and set_layer_offload; steps then start from step index 0 again.
  // The default has nothing to put back.
  virtual void reset() {}
  // The marks to emit from the next step on (replacing earlier ones). A workload that cannot mark
  // its blocks marks its phases only; the default marks nothing.
  virtual void set_marks(const StepMarks& /*marks*/) {}
  // Which of its blocks the model runs as checkpointed regions (offtune/checkpoint.hpp) from the
  // next step on. A workload without blocks to checkpoint refuses any policy but none with
  // std::invalid_argument (one line saying why).
  virtual void set_checkpoint(const CheckpointPolicy& policy) {
    if (policy.enabled()) {
      throw std::invalid_argument("this workload cannot checkpoint its blocks");
    }
  }
  // Layer offloading of the blocks' frozen weights (offtune/layer_offload.hpp) from the next step
  // on: `depth` blocks copied ahead (>= 1), or 0 = off (the weights go back to the device). The
  // copies share the link of the offloader a step is given (or use one of their own without).
  // Only frozen parameters move: a model without any (no LoRA) gains nothing. A workload without
  // blocks refuses any depth but 0 with std::invalid_argument (one line saying why); a negative
  // depth is refused too.
  virtual void set_layer_offload(int64_t depth) {
    if (depth != 0) {
      throw std::invalid_argument("this workload cannot offload its blocks' weights");
    }
  }
};

}  // namespace offtune
