// host-sim backend: the copy "stream" is one worker thread that runs copies in issue order; fences
// are tickets it completes. Compute runs synchronously on the calling thread, so a compute-stream
// wait is a host block and compute-stream events are complete when recorded. The link model makes
// each copy take at least latency + bytes / bandwidth.
#include <ATen/ops/empty.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "backend.hpp"
#include "offtune/host_sim.hpp"

namespace offtune::detail {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

class Ticket final : public Fence {
 public:
  bool query() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  void synchronize() override {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
  }
  void complete() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

// Copy src's bytes to dst, then hold the link for what the model says the transfer costs.
void run_copy(const at::Tensor& dst, const at::Tensor& src, const LinkModel& link, bool pinned) {
  const int64_t start = now_ns();
  std::memcpy(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(src.numel()));
  const int64_t cost = link.copy_ns(src.numel(), pinned);
  if (cost > 0) {
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(start + cost)));
  }
}

class AlignedHostMemory final : public HostMemorySource {
 public:
  void* allocate(int64_t bytes, bool /*pinned*/) override {
    // Page-aligned like real pinned memory; not through c10's CPU allocator (that is "device"
    // here).
    const auto size = static_cast<size_t>((bytes + 4095) / 4096 * 4096);
    return std::aligned_alloc(4096, size);
  }
  void release(void* ptr, int64_t, bool) override { std::free(ptr); }
};

class HostSimBackend final : public Backend {
 public:
  explicit HostSimBackend(const OffloadOptions& options) : link_(options.link) {
    host_sim::install();
    if (options.poison_freed) host_sim::set_poison(true);
    worker_ = std::thread([this] { work(); });
  }
  ~HostSimBackend() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  BackendKind kind() const override { return BackendKind::HostSim; }
  bool is_device_tensor(const at::Tensor& t) const override { return t.device().is_cpu(); }

  FencePtr copy(const at::Tensor& dst, const at::Tensor& src, bool side_stream, bool, bool pinned,
                const std::function<void(int64_t)>& on_done) override {
    auto ticket = std::make_shared<Ticket>();
    if (!side_stream) {
      run_copy(dst, src, link_, pinned);
      ticket->complete();
      if (on_done) on_done(now_ns());
      return ticket;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(Task{dst, src, pinned, ticket, on_done});
    }
    cv_.notify_all();
    return ticket;
  }
  bool times_completions() const override { return true; }

  at::Tensor empty_device_bytes(int64_t bytes, bool) override {
    return at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
  }
  void compute_wait(const FencePtr& fence) override { fence->synchronize(); }
  void copy_wait_compute() override {}  // compute is synchronous: all of it is already done
  void record_stream_compute(const at::Tensor&) override {}
  void synchronize() override {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }

  DeviceMemory memory() const override {
    const auto c = host_sim::counters();
    return {c.allocated, c.peak, c.allocated, c.peak};
  }
  void reset_peak() override { host_sim::reset_peak(); }
  HostMemorySource& host_memory() override { return host_memory_; }

 private:
  struct Task {
    at::Tensor dst, src;
    bool pinned;
    std::shared_ptr<Ticket> ticket;
    std::function<void(int64_t)> on_done;
  };

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      Task task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      run_copy(task.dst, task.src, link_, task.pinned);
      task.dst.reset();
      task.src.reset();
      task.ticket->complete();
      if (task.on_done) task.on_done(now_ns());
      lock.lock();
      busy_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
    }
  }

  LinkModel link_;
  AlignedHostMemory host_memory_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Task> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Backend> make_host_sim_backend(const OffloadOptions& options) {
  return std::make_unique<HostSimBackend>(options);
}

}  // namespace offtune::detail
