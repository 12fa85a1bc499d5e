// cuda backend: the compute stream is whatever stream is current when the engine needs it (resolved
// at each use: autograd sets a per-node current stream in backward, and users switch streams); the
// copy stream is offtune's own, one per device, created once and never handed to anyone else (c10's
// stream pool is shared with every library in the process, collectives included). Copies are
// cudaMemcpyAsync on raw pointers. Pinned host slabs come from cudaHostAlloc directly: torch's
// caching host allocator rounds every block up to a power of two.
//
// Completion times: a fence created for an observer records a timing event; its completion time is
// the host time of an anchor event plus the GPU time elapsed between the two (re-anchored at every
// synchronize), so observers get when a copy finished, not when the engine noticed.
#include <ATen/cuda/Sleep.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>

#include "backend.hpp"
#include "block_cache.hpp"
#include "cuda_check.hpp"
#include "pressure.hpp"

namespace offtune::detail {

void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
  throw EngineError(std::string("offtune: CUDA call failed: ") + call + ": " +
                    cudaGetErrorString(err) + " (" + file + ":" + std::to_string(line) + ")");
}

void warn_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
  TORCH_WARN("offtune: CUDA call failed (continuing): ", call, ": ", cudaGetErrorString(err), " (",
             file, ":", line, ")");
}

bool cuda_available() { return c10::cuda::device_count() > 0; }

namespace {

// What the device has in use beyond the allocator's segments: the context, the libraries, and any
// other process on this GPU (cudaMemGetInfo sees the device, not the process), less reserved at
// the same moment. Asked of the driver at most every 50 ms per device: the recorder reads device
// memory at every stash change, and a driver query there would cost each of them microseconds.
int64_t outside_allocator(c10::DeviceIndex device, int64_t reserved) {
  constexpr int64_t kRefreshNs = 50'000'000;
  struct Sample {
    std::atomic<int64_t> at{-1};  // steady clock ns; -1: never
    std::atomic<int64_t> outside{0};
  };
  static std::array<Sample, 64> samples;
  if (device < 0 || static_cast<size_t>(device) >= samples.size()) return 0;
  Sample& s = samples[static_cast<size_t>(device)];
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const int64_t at = s.at.load(std::memory_order_acquire);
  if (at < 0 || now - at > kRefreshNs) {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    const c10::cuda::CUDAGuard guard(device);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      const auto used = static_cast<int64_t>(total_bytes - free_bytes);
      s.outside.store(std::max<int64_t>(0, used - reserved), std::memory_order_relaxed);
    } else {
      (void)cudaGetLastError();  // not sticky: clear it for the next caller
    }
    s.at.store(now, std::memory_order_release);
  }
  return s.outside.load(std::memory_order_relaxed);
}

}  // namespace

DeviceMemory cuda_device_memory(c10::DeviceIndex device) {
  if (device < 0) device = c10::cuda::current_device();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  // Index 0 is the aggregate over pool types in every torch release since 1.x.
  const auto& allocated = stats.allocated_bytes[0];
  const auto& reserved = stats.reserved_bytes[0];
  return {allocated.current, allocated.peak, reserved.current, reserved.peak,
          outside_allocator(device, reserved.current)};
}

void cuda_reset_peak(c10::DeviceIndex device) {
  if (device < 0) device = c10::cuda::current_device();
  c10::cuda::CUDACachingAllocator::resetPeakStats(device);
}

namespace {

using c10::cuda::CUDAEvent;
using c10::cuda::CUDAStream;

// offtune's copy stream for `device`: created on first use, never destroyed (blocks recorded on it
// may be freed long after any offloader is gone, and the caching allocator then records an event
// on it).
CUDAStream offtune_copy_stream(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::array<cudaStream_t, 64> streams{};
  std::lock_guard<std::mutex> lock(mutex);
  TORCH_CHECK(device >= 0 && device < static_cast<c10::DeviceIndex>(streams.size()),
              "offtune: CUDA device index ", static_cast<int>(device), " out of range");
  auto& s = streams[static_cast<size_t>(device)];
  if (s == nullptr) {
    c10::cuda::CUDAGuard guard(device);
    // Non-blocking: no implicit sync with the legacy default stream.
    OFFTUNE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return c10::cuda::getStreamFromExternal(s, device);
}

// Host time of a GPU instant: an event whose completion the host waited for.
struct Anchor {
  CUDAEvent event{cudaEventDefault};
  int64_t host_ns = 0;
  explicit Anchor(const CUDAStream& stream) {
    event.record(stream);
    event.synchronize();
    host_ns = now_ns();
  }
};

// The events of untimed fences (all of them unless an observer wants copy times): one per copy, so
// they come from a pool instead of a cudaEventCreate and a cudaEventDestroy each. Leaked: a fence
// may outlive static destruction.
c10::cuda::CUDAEventPool& event_pool() {
  static auto* pool = new c10::cuda::CUDAEventPool();
  return *pool;
}

class EventFence final : public Fence {
 public:
  EventFence(const CUDAStream& stream, std::shared_ptr<Anchor> anchor)
      : anchor_(std::move(anchor)) {
    if (anchor_) {
      timed_.emplace(cudaEventDefault);  // elapsed_time needs timing: not from the pool
    } else {
      pooled_ = event_pool().get(stream.device_index());
    }
    event().record(stream);
  }
  bool query() override { return event().query(); }
  void synchronize() override { event().synchronize(); }
  int64_t completed_ns() override {
    if (!anchor_ || !timed_->query()) return 0;
    const double ms = anchor_->event.elapsed_time(*timed_);
    return anchor_->host_ns + static_cast<int64_t>(std::llround(ms * 1e6));
  }
  void block(const CUDAStream& stream) { event().block(stream); }

 private:
  CUDAEvent& event() { return anchor_ ? *timed_ : *pooled_; }

  std::optional<CUDAEvent> timed_;
  c10::cuda::CUDAEventPool::Event pooled_;
  std::shared_ptr<Anchor> anchor_;
};

// Bytes the caching allocator can still get from the driver for this process on `device` (-1 when
// unknown): the driver's free memory, within the process's memory fraction when one is set
// (torch.cuda.set_per_process_memory_fraction: the allocator refuses to reserve beyond it).
int64_t process_free_bytes(c10::DeviceIndex device) {
  size_t free = 0, total = 0;
  c10::cuda::CUDAGuard guard(device);
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  auto result = static_cast<int64_t>(free);
  const double fraction = c10::cuda::CUDACachingAllocator::getMemoryFraction(device);
  if (fraction > 0.0 && fraction < 1.0) {
    const auto allowed = static_cast<int64_t>(static_cast<double>(total) * fraction);
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    result = std::min(result, allowed - stats.reserved_bytes[0].current);
  }
  return std::max<int64_t>(result, 0);
}

class PinnedHostMemory final : public HostMemorySource {
 public:
  explicit PinnedHostMemory(c10::DeviceIndex device) : device_(device) {}
  void* allocate(int64_t bytes, bool pinned) override {
    if (!pinned) {
      return std::aligned_alloc(4096, static_cast<size_t>((bytes + 4095) / 4096 * 4096));
    }
    c10::cuda::CUDAGuard guard(device_);
    void* ptr = nullptr;
    if (cudaHostAlloc(&ptr, static_cast<size_t>(bytes), cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the error so later calls are unaffected
      return nullptr;
    }
    return ptr;
  }
  void release(void* ptr, int64_t, bool pinned) override {
    if (!pinned) {
      std::free(ptr);
      return;
    }
    OFFTUNE_CUDA_WARN(cudaFreeHost(ptr));
  }

 private:
  c10::DeviceIndex device_;
};

c10::DeviceIndex resolve_device(int index) {
  return index >= 0 ? static_cast<c10::DeviceIndex>(index) : c10::cuda::current_device();
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const OffloadOptions& options)
      : device_(resolve_device(options.device_index)),
        copy_stream_(offtune_copy_stream(device_)),
        host_memory_(device_),
        delay_ns_(options.debug_copy_delay_ns) {
    if (delay_ns_ > 0) {
      int khz = 0;
      OFFTUNE_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device_));
      // A driver that reports no clock rate would turn the delay into none at all, silently (the
      // race tests would then pass without holding anything back): assume 2 GHz instead, the
      // boost clock of the GPUs this runs on, so that the delay is at least as long as asked.
      if (khz <= 0) khz = 2'000'000;
      delay_cycles_ = static_cast<int64_t>(static_cast<double>(delay_ns_) * khz / 1e6);
    }
  }

  BackendKind kind() const override { return BackendKind::Cuda; }
  bool is_device_tensor(const at::Tensor& t) const override { return t.device().is_cuda(); }
  bool on_this_device(const at::Tensor& t) const override { return t.device().index() == device_; }
  std::string device_name() const override { return "cuda:" + std::to_string(device_); }
  int device_index() const override { return device_; }
  bool capturing() const override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    OFFTUNE_CUDA_CHECK(cudaStreamIsCapturing(compute_stream().stream(), &status));
    return status != cudaStreamCaptureStatusNone;
  }

  Stream current_stream() const override { return compute_stream().unwrap(); }
  Stream copy_stream() const override { return copy_stream_.unwrap(); }

  FencePtr copy(const CopyRequest& r) override {
    c10::cuda::CUDAGuard device_guard(device_);
    const CUDAStream compute = compute_stream();
    const CUDAStream stream = r.side_stream ? copy_stream_ : compute;
    if (r.side_stream) {
      // The copy stream waits for the compute stream's work so far. The event is shared, and the
      // activation engine and a layer offloader call copy() under locks of their own (and on
      // other threads): recording and waiting form one step, or a copy could be ordered after
      // another thread's compute stream instead of its own.
      std::lock_guard<std::mutex> lock(order_mutex_);
      order_.record(compute);
      order_.block(copy_stream_);
      if (delay_cycles_ > 0) {
        c10::cuda::CUDAStreamGuard guard(copy_stream_);
        at::cuda::sleep(delay_cycles_);
      }
    }
    char* device = static_cast<char*>(r.device->mutable_data()) + r.device_offset;
    const bool to_host = r.direction == CopyDirection::DeviceToHost;
    OFFTUNE_CUDA_CHECK(cudaMemcpyAsync(
        to_host ? r.host : device, to_host ? device : r.host, static_cast<size_t>(r.bytes),
        to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, stream.stream()));
    return make_shared_cached<EventFence>(stream, r.timed ? anchor() : nullptr);
  }

  c10::Storage allocate_device(int64_t bytes, Stream on) override {
    // Allocated while `on` is current: the caching allocator gives the block to that stream.
    c10::cuda::CUDAStreamGuard guard(CUDAStream(CUDAStream::UNCHECKED, on));
    return c10::Storage(c10::Storage::use_byte_size_t(), bytes,
                        c10::cuda::CUDACachingAllocator::get(), /*resizable=*/false);
  }

  void stream_wait(Stream stream, const FencePtr& fence) override {
    static_cast<EventFence&>(*fence).block(CUDAStream(CUDAStream::UNCHECKED, stream));
  }
  void host_block_for(Stream, const FencePtr&) override {}
  void record_stream(const c10::Storage& storage, Stream stream) override {
    c10::cuda::CUDACachingAllocator::recordStream(storage.data_ptr(),
                                                  CUDAStream(CUDAStream::UNCHECKED, stream));
  }
  void synchronize() override {
    copy_stream_.synchronize();
    compute_stream().synchronize();
    std::lock_guard<std::mutex> lock(anchor_mutex_);
    anchor_.reset();  // the next timed fence re-anchors: no drift between the two clocks
  }
  int64_t headroom() const override {
    // What a prefetch can have without the allocator emptying its cache or failing: the
    // driver's free memory (within the process's memory fraction, when one is set) plus the
    // cached blocks that are whole. Reserved minus allocated also counts the unused tails of split
    // blocks (inactive_split_bytes), which a new request of another size cannot use; counting
    // them made a prefetch look affordable that then emptied the cache and failed.
    const int64_t free = process_free_bytes(device_);
    if (free < 0) return std::numeric_limits<int64_t>::max();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
    const int64_t cached = stats.reserved_bytes[0].current - stats.allocated_bytes[0].current -
                           stats.inactive_split_bytes[0].current;
    // Less the pressure margin: a prefetch that leaves less would be dropped again at the next
    // cache miss (ReclaimPrefetches below).
    return free + std::max<int64_t>(cached, 0) - pressure_margin();
  }
  DeviceMemory memory() const override { return cuda_device_memory(device_); }
  void reset_peak() override { cuda_reset_peak(device_); }
  HostMemorySource& host_memory() override { return host_memory_; }

 private:
  CUDAStream compute_stream() const { return c10::cuda::getCurrentCUDAStream(device_); }
  std::shared_ptr<Anchor> anchor() {
    std::lock_guard<std::mutex> lock(anchor_mutex_);
    if (!anchor_) anchor_ = std::make_shared<Anchor>(copy_stream_);
    return anchor_;
  }

  c10::DeviceIndex device_;
  CUDAStream copy_stream_;
  PinnedHostMemory host_memory_;
  std::mutex order_mutex_;
  CUDAEvent order_;  // reused: a stream wait captures the event as recorded at that moment
  const int64_t delay_ns_;
  int64_t delay_cycles_ = 0;
  std::mutex anchor_mutex_;
  std::shared_ptr<Anchor> anchor_;
};

}  // namespace

// The caching allocator calls this whenever its cache has no block for a request, before it asks
// the driver for more (not only when the driver is out of memory: on every cache miss), without
// saying how much it needs. Offloaders give back prefetched buffers that backward has not used yet
// (they are reloaded when used) only under real pressure: when the driver's free memory is below
// the largest tensor the engine has seen saved (pressure.hpp's margin), the most a step's next
// allocation is likely to ask for. Dropping at every miss left prefetch nearly useless on a roomy
// GPU. Runs under the allocator's (recursive) lock; reclaimers never block.
class ReclaimPrefetches final : public c10::FreeMemoryCallback {
 public:
  bool Execute() override {
    if (!under_pressure()) return false;
    // The allocator runs this for the device it allocates on, which is current then: only that
    // device's offloaders are asked (pressure.hpp says why: no other device's lock is taken).
    return reclaim_device_memory(c10::cuda::current_device()) > 0;
  }

 private:
  static bool under_pressure() {
    const int64_t available = process_free_bytes(c10::cuda::current_device());
    return available < 0 || available < pressure_margin();  // unknown: as under pressure
  }
};

std::unique_ptr<Backend> make_cuda_backend(const OffloadOptions& options) {
  const int count = c10::cuda::device_count();
  if (count <= 0) {
    throw EngineError(
        "offtune: backend cuda needs a CUDA GPU, and none is usable here; use "
        "--backend host-sim (or auto)");
  }
  if (options.device_index >= count) {
    throw EngineError("offtune: CUDA device " + std::to_string(options.device_index) +
                      " does not exist (" + std::to_string(count) + " visible)");
  }
  return std::make_unique<CudaBackend>(options);
}

}  // namespace offtune::detail

namespace c10 {
// The registry's macro names c10's registerer unqualified: it must expand in namespace c10.
REGISTER_FREE_MEMORY_CALLBACK(offtune_reclaim_prefetches, offtune::detail::ReclaimPrefetches);
}  // namespace c10
