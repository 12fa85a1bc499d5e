// cuda backend: the compute stream is whatever stream is current when the engine needs it (resolved
// at each use: autograd sets a per-node current stream in backward, and users switch streams); the
// copy stream is one side stream from c10's pool per offloader. Pinned host slabs come from
// cudaHostAlloc directly: torch's caching host allocator rounds every block up to a power of two.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/ops/empty.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <optional>

#include "backend.hpp"
#include "cuda_check.hpp"

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

class EventFence final : public Fence {
 public:
  explicit EventFence(const c10::cuda::CUDAStream& stream) { event_.record(stream); }
  bool query() override { return event_.query(); }
  void synchronize() override { event_.synchronize(); }
  void block(const c10::cuda::CUDAStream& stream) { event_.block(stream); }

 private:
  at::cuda::CUDAEvent event_;
};

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
      (void)cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
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

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const OffloadOptions& options)
      : device_(static_cast<c10::DeviceIndex>(options.device_index)),
        copy_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_)),
        host_memory_(device_) {}

  BackendKind kind() const override { return BackendKind::Cuda; }
  bool is_device_tensor(const at::Tensor& t) const override { return t.device().is_cuda(); }

  FencePtr copy(const at::Tensor& dst, const at::Tensor& src, bool side_stream, bool after_compute,
                bool, const std::function<void(int64_t)>&) override {
    c10::cuda::CUDAGuard device_guard(device_);
    const auto compute = compute_stream();
    const auto stream = side_stream ? copy_stream_ : compute;
    if (side_stream && after_compute) EventFence(compute).block(copy_stream_);
    c10::cuda::CUDAStreamGuard stream_guard(stream);
    dst.copy_(src, /*non_blocking=*/true);
    return std::make_shared<EventFence>(stream);
  }
  bool times_completions() const override { return false; }

  at::Tensor empty_device_bytes(int64_t bytes, bool side_stream) override {
    c10::cuda::CUDAGuard device_guard(device_);
    // Allocated while the stream that writes it is current: the caching allocator then orders the
    // block's reuse on that stream.
    std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
    if (side_stream) stream_guard.emplace(copy_stream_);
    return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device_));
  }

  void compute_wait(const FencePtr& fence) override {
    static_cast<EventFence&>(*fence).block(compute_stream());
  }
  void copy_wait_compute() override { EventFence(compute_stream()).block(copy_stream_); }
  void record_stream_compute(const at::Tensor& t) override {
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), compute_stream());
  }
  void synchronize() override {
    copy_stream_.synchronize();
    compute_stream().synchronize();
  }

  DeviceMemory memory() const override {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_);
    // Index 0 is the aggregate over pool types in every torch release since 1.x.
    const auto& allocated = stats.allocated_bytes[0];
    const auto& reserved = stats.reserved_bytes[0];
    return {allocated.current, allocated.peak, reserved.current, reserved.peak};
  }
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }
  HostMemorySource& host_memory() override { return host_memory_; }

 private:
  c10::cuda::CUDAStream compute_stream() const { return c10::cuda::getCurrentCUDAStream(device_); }

  c10::DeviceIndex device_;
  c10::cuda::CUDAStream copy_stream_;
  PinnedHostMemory host_memory_;
};

}  // namespace

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
