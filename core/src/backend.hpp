// The small interface the engine logic is written against once; implemented by the cuda and
// host-sim backends. Streams are c10::Stream values: CUDA streams on cuda, emulated ones on
// host-sim (device type CPU, the id being host_sim's stream id).
//
// Stream rules the engine relies on, as CUDA's caching allocator defines them:
// - a device block belongs to the stream current when it was allocated; once freed, that stream's
//   later work may reuse it at once, and no other stream's;
// - record_stream(block, s) delays the reuse until s's work issued so far has completed;
// - stream_wait(s, fence) orders s's later work after the fence, without blocking the host;
// - a fence that query() reports complete is complete for every later host action.
#pragma once

#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>

#include "offtune/observer.hpp"
#include "offtune/offloader.hpp"
#include "offtune/options.hpp"

namespace at {
class Tensor;
}

namespace offtune::detail {

using Stream = c10::Stream;

// Completion of one piece of work issued on a stream: a CUDA event, or a host-sim copy ticket.
class Fence {
 public:
  virtual ~Fence() = default;
  virtual bool query() = 0;        // done? A true answer orders every later host action after it.
  virtual void synchronize() = 0;  // block the calling thread until done
  // When it completed, in now_ns() time; valid once query() returned true. 0 when unknown.
  virtual int64_t completed_ns() = 0;
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

// One copy between a span of a device storage and host memory.
struct CopyRequest {
  CopyDirection direction = CopyDirection::DeviceToHost;
  const c10::Storage* device = nullptr;  // the device storage
  int64_t device_offset = 0;             // bytes from its start
  void* host = nullptr;
  int64_t bytes = 0;
  bool side_stream = true;  // on the copy stream; else on the current stream
  bool pinned = true;
  bool timed = false;  // the fence should know its completion time (an observer wants it)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // The backend's device type (cuda tensors on cuda, CPU tensors on host-sim).
  virtual bool is_device_tensor(const at::Tensor& t) const = 0;
  // On this backend's device (cuda: the offloader's GPU; host-sim: always).
  virtual bool on_this_device(const at::Tensor& t) const = 0;
  virtual std::string device_name() const = 0;
  // The device's index (cuda), or kAnyDevice for host-sim's single emulated device.
  virtual int device_index() const { return -1; }
  // Whether the compute stream is being captured into a CUDA graph now (host-sim: never).
  virtual bool capturing() const { return false; }

  virtual Stream current_stream() const = 0;
  virtual Stream copy_stream() const = 0;

  // Issues the copy. On the copy stream it first waits for the current stream's work so far (the
  // device data was produced there; a block freshly taken from that stream may have been in use
  // there). The caller keeps both sides alive until the fence completes (or records the block).
  virtual FencePtr copy(const CopyRequest& request) = 0;
  // Device bytes, allocated while `on` is the current stream (the block belongs to `on`).
  virtual c10::Storage allocate_device(int64_t bytes, Stream on) = 0;
  // `stream`'s later work waits for the fence; the host does not. Cheap: callable under the
  // engine's lock.
  virtual void stream_wait(Stream stream, const FencePtr& fence) = 0;
  // What such a wait costs the host: on host-sim, compute is the calling thread, so it blocks until
  // the fence completed; on cuda nothing (the GPU waits). Called outside the engine's lock, after
  // stream_wait. Not an observation of the fence.
  virtual void host_block_for(Stream stream, const FencePtr& fence) = 0;
  // The block of `storage` is not reused before `stream`'s work issued so far has completed.
  virtual void record_stream(const c10::Storage& storage, Stream stream) = 0;
  // Blocks until the copy stream and the current stream are idle.
  virtual void synchronize() = 0;
  // Device bytes that can still be allocated without an allocator retry (emptying caches, a
  // driver allocation that may fail); an estimate, for deciding whether a prefetch is affordable.
  virtual int64_t headroom() const = 0;

  virtual DeviceMemory memory() const = 0;
  virtual void reset_peak() = 0;
  virtual HostMemorySource& host_memory() = 0;
};

std::unique_ptr<Backend> make_host_sim_backend(const OffloadOptions& options);
// Throws EngineError when no CUDA device is usable.
std::unique_ptr<Backend> make_cuda_backend(const OffloadOptions& options);
bool cuda_available();
// The backends' memory figures without a backend (offtune::device_memory). Cuda: device -1 is the
// current device.
DeviceMemory cuda_device_memory(c10::DeviceIndex device);
void cuda_reset_peak(c10::DeviceIndex device);
DeviceMemory host_sim_device_memory();

int64_t now_ns();

}  // namespace offtune::detail
