// Accounting allocator behind host-sim's "device" memory: wraps c10's CPU allocator, counts live bytes
// and their peak, and optionally poisons memory as it is freed.
#include "offtune/host_sim.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace offtune::host_sim {
namespace {

std::atomic<int64_t> g_allocated{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};
std::atomic<bool> g_poison{false};
std::atomic<bool> g_installed{false};

struct Allocation {
  c10::DataPtr inner;
  int64_t bytes;
};

void raise_peak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void free_allocation(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  if (g_poison.load(std::memory_order_relaxed) && a->inner.get() != nullptr) {
    std::memset(a->inner.get(), 0xFF, static_cast<size_t>(a->bytes));
  }
  g_allocated.fetch_sub(a->bytes, std::memory_order_relaxed);
  delete a;  // frees through the wrapped allocator's deleter
}

class AccountingAllocator final : public c10::Allocator {
 public:
  explicit AccountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    const auto bytes = static_cast<int64_t>(n);
    auto* ctx = new Allocation{std::move(inner), bytes};
    raise_peak(g_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    return {data, ctx, &free_allocation, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked: CPU tensors may be freed during static destruction.
    static auto* allocator = new AccountingAllocator(c10::GetCPUAllocator());
    // Priority above the default (0) so that a later default registration does not displace us.
    c10::SetCPUAllocator(allocator, /*priority=*/1);
    g_installed = true;
  });
}

bool installed() { return g_installed.load(); }

Counters counters() {
  return {g_allocated.load(), g_peak.load(), g_allocations.load()};
}

void reset_peak() { g_peak.store(g_allocated.load()); }

void set_poison(bool on) { g_poison.store(on); }
bool poison() { return g_poison.load(); }

}  // namespace offtune::host_sim
