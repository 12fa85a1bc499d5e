// The small interface the engine logic is written against once; implemented by the cuda and
// host-sim backends. All tensors passed here are 1-D uint8 views of storage spans.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "offtune/offloader.hpp"
#include "offtune/options.hpp"

namespace offtune::detail {

// Completion of work issued on a stream: a CUDA event, or a host-sim copy-thread ticket.
class Fence {
 public:
  virtual ~Fence() = default;
  virtual bool query() = 0;        // done?
  virtual void synchronize() = 0;  // block the calling thread until done
};
using FencePtr = std::shared_ptr<Fence>;

// Where host copies come from: pinned (page-locked) or pageable memory, never through c10's CPU
// allocator (on host-sim that one counts as device memory).
class HostMemorySource {
 public:
  virtual ~HostMemorySource() = default;
  // Returns nullptr when the memory cannot be had (the pool then falls back or throws).
  virtual void* allocate(int64_t bytes, bool pinned) = 0;
  virtual void release(void* ptr, int64_t bytes, bool pinned) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual bool is_device_tensor(const at::Tensor& t) const = 0;

  // Copies src into dst (same byte size). side_stream: on the copy stream (which first waits for
  // the compute stream's work so far when after_compute is set); else on the compute stream.
  // on_done, when set and the backend can time completions (host-sim), is called with the
  // completion time from the copy thread; returns false in that case if it never will (cuda).
  virtual FencePtr copy(const at::Tensor& dst, const at::Tensor& src, bool side_stream,
                        bool after_compute, bool pinned,
                        const std::function<void(int64_t)>& on_done) = 0;
  virtual bool times_completions() const = 0;
  // A device byte buffer whose allocation is ordered on the stream the copy into it will run on.
  virtual at::Tensor empty_device_bytes(int64_t bytes, bool side_stream) = 0;
  // The compute stream (resolved now, never cached) waits for the fence.
  virtual void compute_wait(const FencePtr& fence) = 0;
  // The copy stream waits for the compute stream's work so far: later copy-stream allocations that
  // reuse a block freed now cannot overwrite memory compute still reads.
  virtual void copy_wait_compute() = 0;
  // `t`'s block is not reused before the compute stream's current work completes.
  virtual void record_stream_compute(const at::Tensor& t) = 0;
  // Blocks until both streams are idle.
  virtual void synchronize() = 0;

  virtual DeviceMemory memory() const = 0;
  virtual void reset_peak() = 0;
  virtual HostMemorySource& host_memory() = 0;
};

std::unique_ptr<Backend> make_host_sim_backend(const OffloadOptions& options);
// Throws EngineError when no CUDA device is usable.
std::unique_ptr<Backend> make_cuda_backend(const OffloadOptions& options);
bool cuda_available();

int64_t now_ns();

}  // namespace offtune::detail
