// host-sim's device model (offtune/host_sim.hpp, offtune/device_model.hpp): the simulated compute
// clock and the op listener that advances it.
//
// Which ops are kernels. ATen reports every op, also the ones an op calls inside itself (linear
// calls addmm, zeros calls empty and zero_). The listener times the innermost ops that do work:
// - an op that does work and calls none that does (a leaf: add, sin, copy_) is one kernel;
// - an op that calls others is their sum, not a kernel of its own;
// - a matmul or attention op is one kernel whatever it calls (as cuBLAS or a fused attention
//   kernel would be on the GPU), so the ops inside it are not timed;
// - views and empty tensors take no time.
//
// cuBLAS's workspaces. torch gives each (cuBLAS handle, stream) pair a workspace from the caching
// allocator on its first matmul and keeps it (CublasHandlePool.cpp, getCurrentCUDABlasHandle). On a
// GPU, forward runs on the caller's thread and backward on autograd's device thread, each with its
// own handle: two workspaces per stream that runs matmuls. Here backward runs on the caller's
// thread, so the pair is told apart by whether a backward pass is running. The workspaces are
// device memory like any other (allocated, reserved, the caching-allocator model); they are given
// back when the device model changes, as clearCublasWorkspaces would.
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "host_sim_internal.hpp"
#include "offtune/host_sim.hpp"
#include "seam.hpp"

namespace offtune::detail::sim {
namespace {

std::atomic<const DeviceModel*> g_model{nullptr};
// Starts at one second, not zero: callers take a zero time for "not set" (a phase never marked).
std::atomic<int64_t> g_compute{1'000'000'000};
std::atomic<int64_t> g_kernels{0};
std::atomic<int64_t> g_kernel_ns{0};
std::atomic<int64_t> g_copies{0};
std::atomic<int64_t> g_stalled{0};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct OpFrame {
  OpClass cls = OpClass::Memory;
  bool absorbed = false;  // inside a matmul or attention op: timed with it
  bool did_work = false;  // an op inside it was timed
  OpCall call;            // its inputs, when it may be timed
};
thread_local std::vector<OpFrame> t_ops;

bool whole_kernel(OpClass c) { return c == OpClass::Matmul || c == OpClass::Attention; }

std::mutex g_workspace_mutex;
// Leaked: a workspace's DataPtr frees through host-sim's allocator, which must not run at exit.
auto& g_workspaces = *new std::map<std::pair<bool, host_sim::StreamId>, c10::DataPtr>();

// The workspace of this matmul's (handle, stream) pair, allocated on its first matmul. A workspace
// that does not fit is not kept (the matmul goes on; on a GPU it would fail with out-of-memory,
// which host-sim's capacity reports on the allocations around it).
void take_blas_workspace(const DeviceModel& m) {
  const int64_t bytes = m.blas_workspace();
  if (bytes <= 0 || !host_sim::installed()) return;
  const std::pair key{current_graph_task_id() >= 0, host_sim::current_stream()};
  {
    std::lock_guard<std::mutex> lock(g_workspace_mutex);
    if (g_workspaces.contains(key)) return;
  }
  c10::DataPtr block;
  try {
    block = c10::GetCPUAllocator()->allocate(static_cast<size_t>(bytes));
  } catch (const c10::OutOfMemoryError&) {
    return;
  }
  std::lock_guard<std::mutex> lock(g_workspace_mutex);
  g_workspaces.try_emplace(key, std::move(block));  // a racing thread's stays; this one is freed
}

class Timer final : public OpListener {
 public:
  void op_begin(std::string_view name, c10::function_ref<OpCall()> inputs) override {
    OpFrame& f = t_ops.emplace_back();
    f.cls = op_class_by_name(name);
    if (t_ops.size() > 1) {
      const OpFrame& parent = t_ops[t_ops.size() - 2];
      f.absorbed = parent.absorbed || whole_kernel(parent.cls);
    }
    if (!f.absorbed && f.cls != OpClass::NoKernel) f.call = inputs();
    if (!f.absorbed && f.cls == OpClass::Matmul) {
      if (const DeviceModel* m = g_model.load(std::memory_order_acquire)) take_blas_workspace(*m);
    }
  }

  void op_end(c10::function_ref<void(OpCall&)> outputs) override {
    if (t_ops.empty()) return;  // began before the listener was installed
    OpFrame f = std::move(t_ops.back());
    t_ops.pop_back();
    if (f.absorbed) return;
    bool worked = f.did_work;
    if (whole_kernel(f.cls) || (!f.did_work && f.cls == OpClass::Memory)) {
      const DeviceModel* m = g_model.load(std::memory_order_acquire);
      if (m == nullptr) return;
      outputs(f.call);
      const OpCost c = op_cost(f.call);
      if (c.cls != OpClass::NoKernel) {
        const int64_t ns = m->kernel_ns(c.cls, c.flops, c.bytes, c.low_precision);
        g_compute.fetch_add(ns, std::memory_order_relaxed);
        g_kernels.fetch_add(1, std::memory_order_relaxed);
        g_kernel_ns.fetch_add(ns, std::memory_order_relaxed);
        worked = true;
      }
    }
    if (worked && !t_ops.empty()) t_ops.back().did_work = true;
  }
};

Timer& timer() {
  static auto* t = new Timer();  // leaked: ops on other threads may still call it at exit
  return *t;
}

}  // namespace

bool modelled() { return g_model.load(std::memory_order_acquire) != nullptr; }

int64_t compute_clock() { return g_compute.load(std::memory_order_acquire); }

void compute_advance(int64_t ns) {
  if (ns > 0) g_compute.fetch_add(ns, std::memory_order_acq_rel);
}

void compute_wait_until(int64_t t) {
  int64_t now = g_compute.load(std::memory_order_acquire);
  while (t > now && !g_compute.compare_exchange_weak(now, t, std::memory_order_acq_rel)) {
  }
  if (t > now) g_stalled.fetch_add(t - now, std::memory_order_relaxed);
}

void count_modelled_copy() { g_copies.fetch_add(1, std::memory_order_relaxed); }

}  // namespace offtune::detail::sim

namespace offtune::host_sim {

void set_device_model(const DeviceModel* model) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  namespace sim = detail::sim;
  if (model == nullptr) {
    detail::set_op_listener(nullptr);
    sim::g_model.store(nullptr, std::memory_order_release);
    clear_blas_workspaces();
    sim::apply_capacity();
    return;
  }
  model->validate();
  // Leaked: device_model()'s pointer stays valid for the life of the process.
  sim::g_model.store(new DeviceModel(*model), std::memory_order_release);
  clear_blas_workspaces();
  sim::apply_capacity();  // the context is outside the allocator: less room in it
  detail::set_op_listener(&sim::timer());
}

const DeviceModel* device_model() { return detail::sim::g_model.load(std::memory_order_acquire); }

void clear_blas_workspaces() {
  std::map<std::pair<bool, StreamId>, c10::DataPtr> gone;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(detail::sim::g_workspace_mutex);
    gone.swap(detail::sim::g_workspaces);
  }
}

int64_t clock_ns() {
  return detail::sim::modelled() ? detail::sim::compute_clock() : detail::sim::steady_ns();
}

ModelCounters model_counters() {
  namespace sim = detail::sim;
  return {sim::g_kernels.load(), sim::g_kernel_ns.load(), sim::g_copies.load(),
          sim::g_stalled.load()};
}

}  // namespace offtune::host_sim
