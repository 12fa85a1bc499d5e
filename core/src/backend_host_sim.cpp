// host-sim backend: the copy stream is one worker thread that runs copies in issue order on raw
// memory (nothing keeps either side alive but the engine); fences are tickets numbered in issue
// order. Compute runs on the calling thread, so a stream wait orders the stream (for the checker)
// and host_block_for blocks the caller. The link model makes each copy take at least
// latency + bytes / bandwidth; debug_copy_delay_ns holds every copy back so that races have room.
//
// With a device model (host_sim::set_device_model), time is simulated instead: a copy is not slowed
// down, it gets a simulated end (it starts when both the copy stream and the compute work before it
// are done, and takes the link model's time), a fence reads as complete once the compute clock has
// reached that end, and every wait moves the compute clock to it. Decisions that depend on whether
// a copy is done (the forward window's early release) then depend on the model alone, never on
// this machine's thread timing.
//
// Hand-off cost: the worker takes every queued copy per wake-up and spins briefly before it
// sleeps, and a producer wakes it only when it sleeps, so that a forward pass that offloads every
// tensor pays no thread wake-up per tensor.
#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "block_cache.hpp"
#include "host_sim_internal.hpp"
#include "offtune/host_sim.hpp"

namespace offtune::detail {

// One clock for the engine and the profiler: steady, or the device model's (sim_clock.cpp).
int64_t now_ns() { return host_sim::clock_ns(); }

namespace {

using sim::CopyStream;

// How long a thread spins on a condition that is about to become true before it sleeps: longer
// than a small copy or the gap between two hooks, far shorter than a scheduler time slice.
constexpr auto kSpin = std::chrono::microseconds(30);

// Spins until `done()` or kSpin has passed; returns done(). Reads the clock every 64 rounds and
// pauses in between, so that a spinning thread leaves the core's other hardware thread (maybe
// the one it waits for) most of the execution units.
template <typename Done>
bool spin(Done done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= until) return done();
  }
}

// Waits until cs has completed copy `seq`: spins for kSpin, then sleeps on the counter.
void wait_completed(CopyStream& cs, uint64_t seq) {
  if (spin([&] { return cs.completed.load(std::memory_order_acquire) >= seq; })) return;
  for (uint64_t v = cs.completed.load(std::memory_order_acquire); v < seq;
       v = cs.completed.load(std::memory_order_acquire)) {
    cs.completed.wait(v, std::memory_order_acquire);
  }
}

class Ticket final : public Fence {
 public:
  // A copy on the copy stream, numbered `seq`.
  Ticket(CopyStream& cs, uint64_t seq) : cs_(&cs), seq_(seq) {}
  // Work that already ran on the calling thread (a single-stream copy).
  explicit Ticket(int64_t done_ns) : done_ns_(done_ns) {}

  bool query() override {
    if (cs_ == nullptr) return true;
    if (modelled_end_ >= 0) {
      // Done in simulated time; then make it so physically (the copy thread is at most a copy or
      // two behind).
      if (sim::compute_clock() < modelled_end_) return false;
      wait_completed(*cs_, seq_);
    } else if (cs_->completed.load(std::memory_order_acquire) < seq_) {
      return false;
    }
    sim::note_observed(*cs_, seq_);
    return true;
  }
  void synchronize() override {
    if (modelled_end_ >= 0) sim::compute_wait_until(modelled_end_);
    if (cs_ == nullptr) return;
    wait_completed(*cs_, seq_);
    sim::note_observed(*cs_, seq_);
  }
  int64_t completed_ns() override {
    return modelled_end_ >= 0 ? modelled_end_ : done_ns_.load(std::memory_order_acquire);
  }

  CopyStream* stream() const { return cs_; }
  uint64_t seq() const { return seq_; }
  void set_done(int64_t t) { done_ns_.store(t, std::memory_order_release); }
  // With a device model: the copy's simulated end (set once, before the ticket is shared).
  void set_modelled_end(int64_t t) { modelled_end_ = t; }
  int64_t modelled_end() const { return modelled_end_; }

 private:
  CopyStream* cs_ = nullptr;
  uint64_t seq_ = 0;
  std::atomic<int64_t> done_ns_{0};
  int64_t modelled_end_ = -1;
};

void run_copy(void* dst, const void* src, int64_t bytes, const LinkModel& link, bool pinned) {
  const int64_t start = now_ns();
  std::memcpy(dst, src, static_cast<size_t>(bytes));
  const int64_t cost = link.copy_ns(bytes, pinned);
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

c10::Stream sim_stream(host_sim::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CPU), id);
}

class HostSimBackend final : public Backend {
 public:
  explicit HostSimBackend(const OffloadOptions& options)
      : link_(options.link), delay_ns_(options.debug_copy_delay_ns), cs_(sim::new_copy_stream()) {
    host_sim::install();
    if (options.poison_freed) host_sim::set_poison(true);
    if (options.reuse_freed) host_sim::set_caching(true);
    if (options.check_streams) host_sim::set_check_streams(true);
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
  bool on_this_device(const at::Tensor&) const override { return true; }
  std::string device_name() const override { return "host-sim"; }

  Stream current_stream() const override { return sim_stream(host_sim::current_stream()); }
  Stream copy_stream() const override { return sim_stream(cs_.id); }

  FencePtr copy(const CopyRequest& r) override {
    char* device = static_cast<char*>(r.device->mutable_data()) + r.device_offset;
    const bool to_host = r.direction == CopyDirection::DeviceToHost;
    void* dst = to_host ? r.host : device;
    const void* src = to_host ? static_cast<const void*>(device) : r.host;
    const bool modelled = sim::modelled();
    if (!r.side_stream) {
      // On the compute stream, which is this thread: it runs now.
      if (modelled) {
        std::memcpy(dst, src, static_cast<size_t>(r.bytes));
        sim::compute_advance(link_.copy_ns(r.bytes, r.pinned));
        sim::count_modelled_copy();
      } else {
        run_copy(dst, src, r.bytes, link_, r.pinned);
      }
      return make_shared_cached<Ticket>(now_ns());
    }
    std::shared_ptr<Ticket> ticket;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint64_t seq = cs_.issued.load(std::memory_order_relaxed) + 1;
      ticket = make_shared_cached<Ticket>(cs_, seq);  // one per copy: recycled
      if (modelled) {
        // After the copy stream's earlier copies and the compute work issued before it.
        const int64_t start = std::max(modelled_copy_clock_, sim::compute_clock());
        modelled_copy_clock_ = start + link_.copy_ns(r.bytes, r.pinned);
        ticket->set_modelled_end(modelled_copy_clock_);
        cs_.modelled_tail.store(modelled_copy_clock_, std::memory_order_release);
        sim::count_modelled_copy();
      }
      sim::note_copy(*r.device, cs_, seq, /*writes_device=*/!to_host);
      // The worker shares the ticket only to stamp its completion time, when that is wanted:
      // otherwise it touches neither the ticket nor its reference count (another core's lines).
      queue_.push_back(
          Task{dst, src, r.bytes, seq, r.pinned, modelled, r.timed ? ticket : nullptr});
      cs_.issued.store(seq, std::memory_order_release);
      wake = sleeping_;
    }
    if (wake) cv_.notify_one();
    return ticket;
  }

  c10::Storage allocate_device(int64_t bytes, Stream on) override {
    host_sim::StreamGuard guard(on.id());
    return c10::Storage(c10::Storage::use_byte_size_t(), bytes, c10::GetCPUAllocator(),
                        /*resizable=*/false);
  }

  void stream_wait(Stream stream, const FencePtr& fence) override {
    // With a device model the clock moves in host_block_for, which follows every stream wait
    // here, so that the engine's wait events span the stall.
    const auto& t = static_cast<const Ticket&>(*fence);
    if (t.stream() != nullptr) sim::note_stream_wait(stream.id(), *t.stream(), t.seq());
  }
  void host_block_for(Stream, const FencePtr& fence) override {
    // The stream's compute is this thread: it cannot go on before the copy ran. Not an
    // observation (a GPU stream wait would not be one).
    const auto& t = static_cast<const Ticket&>(*fence);
    if (t.modelled_end() >= 0) sim::compute_wait_until(t.modelled_end());
    if (t.stream() != nullptr) wait_completed(*t.stream(), t.seq());
  }
  void record_stream(const c10::Storage& storage, Stream stream) override {
    sim::note_record_stream(storage, stream.id());
  }
  void synchronize() override {
    uint64_t issued = 0;
    int64_t modelled_end = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      issued = cs_.issued.load(std::memory_order_acquire);
      modelled_end = modelled_copy_clock_;
    }
    if (sim::modelled()) sim::compute_wait_until(modelled_end);
    wait_completed(cs_, issued);
    sim::note_observed(cs_, issued);
  }
  int64_t headroom() const override {
    // As cuda's: what the modelled allocator can still get from the device, plus its cached
    // blocks that are whole (not the unused tails of split blocks).
    const int64_t cap = host_sim::capacity();
    if (cap <= 0) return std::numeric_limits<int64_t>::max();
    const auto c = host_sim::counters();
    const int64_t cached = c.modelled_reserved - c.modelled_allocated - c.modelled_inactive_split;
    return cap - c.modelled_reserved + std::max<int64_t>(cached, 0);
  }

  DeviceMemory memory() const override { return host_sim_device_memory(); }
  void reset_peak() override { host_sim::reset_peak(); }
  HostMemorySource& host_memory() override { return host_memory_; }

 private:
  struct Task {
    void* dst;
    const void* src;
    int64_t bytes;
    uint64_t seq;
    bool pinned;
    bool modelled;
    std::shared_ptr<Ticket> timed;  // stamped with the completion time; null when not wanted
  };

  void work() {
    std::vector<Task> batch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (queue_.empty()) {
          lock.unlock();
          // Spin a little before sleeping: the next copy usually follows within microseconds.
          spin([&] {
            return cs_.issued.load(std::memory_order_acquire) !=
                   cs_.completed.load(std::memory_order_relaxed);
          });
          lock.lock();
          sleeping_ = true;
          cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
          sleeping_ = false;
          if (queue_.empty()) return;  // stop_ and drained
        }
        batch.swap(queue_);
      }
      for (Task& task : batch) {
        if (delay_ns_ > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(delay_ns_));
        if (task.modelled) {
          std::memcpy(task.dst, task.src, static_cast<size_t>(task.bytes));  // time is modelled
        } else {
          run_copy(task.dst, task.src, task.bytes, link_, task.pinned);
          if (task.timed) task.timed->set_done(now_ns());
        }
        sim::note_copy_done(cs_, task.seq);
        cs_.completed.notify_all();
        task.timed.reset();
      }
      batch.clear();
    }
  }

  const LinkModel link_;
  const int64_t delay_ns_;
  CopyStream& cs_;
  AlignedHostMemory host_memory_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Task> queue_;
  bool sleeping_ = false;
  bool stop_ = false;
  int64_t modelled_copy_clock_ = 0;  // with a device model: when the copy stream is next free
  std::thread worker_;
};

}  // namespace

DeviceMemory host_sim_device_memory() {
  // Reserved as CUDA's caching allocator would hold it (the model), with or without a device model.
  const auto c = host_sim::counters();
  const DeviceModel* model = host_sim::device_model();
  return {c.allocated, c.peak, c.modelled_reserved, c.modelled_peak_reserved,
          model != nullptr ? model->context_bytes : 0};
}

std::unique_ptr<Backend> make_host_sim_backend(const OffloadOptions& options) {
  return std::make_unique<HostSimBackend>(options);
}

}  // namespace offtune::detail
