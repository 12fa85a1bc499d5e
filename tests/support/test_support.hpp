// Helpers shared by the engine tests: run a step with and without offloading, compare gradients bit
// for bit, and a recording observer.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <mutex>
#include <vector>

#include "offtune/core.hpp"
#include "offtune/device_model.hpp"
#include "offtune/host_sim.hpp"

namespace offtune::test {

// Options for host-sim with a small threshold so that test-sized tensors are offloaded, and the
// emulator's debug checks on (poison, immediate reuse, stream-order checks).
OffloadOptions host_sim_options(int64_t min_offload_size = 0, int64_t window = 2);

// Bitwise equality of two tensors (dtype, shape and every byte); NaNs compare by bit pattern.
bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);

// Runs forward (under `offloader`'s scope if given), backward on the returned scalar, and returns
// the loss followed by the gradients of `params` (cloned), zeroing them afterwards.
// With `sync_before_backward`, offloader->synchronize() runs between forward and backward: every
// copy (and disk write) of the forward has finished when backward starts, so what a test counts
// does not depend on how fast the copy threads ran on a loaded machine.
std::vector<at::Tensor> step(const std::function<at::Tensor()>& forward,
                             const std::vector<at::Tensor>& params, ActivationOffloader* offloader,
                             bool sync_before_backward = false);

// Clones and clears the gradients of `params` (undefined where a parameter got none).
std::vector<at::Tensor> take_grads(const std::vector<at::Tensor>& params);

// Expects loss and gradients of one step to be bit-identical with and without offloading.
void expect_identical_step(const std::function<at::Tensor()>& forward,
                           const std::vector<at::Tensor>& params, ActivationOffloader& offloader,
                           bool sync_before_backward = false);

// Expects host-sim's stream-order checker to have found nothing since the last call.
void expect_no_stream_races();

// A small net for whole training steps (matmuls, tanh, sigmoid, sin: saved inputs, outputs and
// views), its weights drawn from torch's global generator in declaration order.
struct SmallNet {
  at::Tensor w1 = torch::randn({32, 64}, torch::requires_grad());
  at::Tensor w2 = torch::randn({64, 64}, torch::requires_grad());
  at::Tensor w3 = torch::randn({64, 4}, torch::requires_grad());
  at::Tensor forward(const at::Tensor& x) const {
    auto h = torch::tanh(x.matmul(w1));
    h = torch::sigmoid(h.matmul(w2)) * h.sin();
    return h.matmul(w3).pow(2).mean();
  }
  std::vector<at::Tensor> params() const { return {w1, w2, w3}; }
};

// `x` through `n` sin ops: a chain in which every op saves its input.
at::Tensor sin_chain(const at::Tensor& x, int n);

// Simulated time on host-sim for as long as it lives (an H100 SXM device model): for tests whose
// outcome depends on a copy still running when the next tensor is packed. On this CPU's clock a
// loaded machine can deschedule the compute thread for longer than any copy takes, and the wait
// such a test looks for never comes.
class ModelledTime {
 public:
  ModelledTime() : model_(device_model_named("h100-sxm")) { host_sim::set_device_model(&model_); }
  ~ModelledTime() { host_sim::set_device_model(nullptr); }
  ModelledTime(const ModelledTime&) = delete;
  ModelledTime& operator=(const ModelledTime&) = delete;

 private:
  DeviceModel model_;
};

struct RecordingObserver : Observer {
  std::mutex mutex;
  std::vector<PackEvent> packs;
  std::vector<CopyEvent> issued, completed;
  std::vector<UnpackEvent> unpacks;
  std::vector<WaitEvent> waits;
  std::vector<StashEvent> stashes;
  void on_pack(const PackEvent& e) override;
  void on_copy_issued(const CopyEvent& e) override;
  void on_copy_completed(const CopyEvent& e) override;
  void on_unpack(const UnpackEvent& e) override;
  void on_wait(const WaitEvent& e) override;
  void on_stash(const StashEvent& e) override;
  int64_t count(PackDecision d);
};

}  // namespace offtune::test
