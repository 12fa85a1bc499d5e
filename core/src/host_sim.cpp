// Accounting allocator behind host-sim's "device" memory: wraps c10's CPU allocator, counts live
// bytes and their peak, and optionally poisons memory as it is freed.
#include "offtune/host_sim.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

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
std::atomic<int64_t> g_capacity{0};

// c10 requires a CPU DataPtr's context to equal its data pointer (raw_allocate asserts it), so the
// size lives in a header just before the data; 64 bytes keep c10's 64-byte alignment.
constexpr size_t kHeader = 64;

void raise_peak(int64_t now) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void free_allocation(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeader;
  int64_t bytes = 0;
  std::memcpy(&bytes, base, sizeof(bytes));
  if (g_poison.load(std::memory_order_relaxed)) {
    std::memset(data, 0xFF, static_cast<size_t>(bytes));
  }
  g_allocated.fetch_sub(bytes, std::memory_order_relaxed);
  c10::free_cpu(base);
}

class AccountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const auto requested = static_cast<int64_t>(n);
    if (const int64_t cap = g_capacity.load(std::memory_order_relaxed); cap > 0) {
      const int64_t now = g_allocated.load(std::memory_order_relaxed);
      // Like the CUDA caching allocator, report an out-of-memory error that callers can catch as
      // c10::OutOfMemoryError (a sweep records such a point as "oom" and goes on).
      TORCH_CHECK_WITH(OutOfMemoryError, now + requested <= cap,
                       "host-sim device out of memory: tried to allocate ", requested,
                       " bytes with ", now, " of ", cap, " bytes in use");
    }
    auto* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    const auto bytes = static_cast<int64_t>(n);
    std::memcpy(base, &bytes, sizeof(bytes));
    void* data = base + kHeader;
    raise_peak(g_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    return {data, data, &free_allocation, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_allocation; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked: CPU tensors may be freed during static destruction.
    static auto* allocator = new AccountingAllocator();
    // Priority above the default (0) so that a later default registration does not displace us.
    c10::SetCPUAllocator(allocator, /*priority=*/1);
    g_installed = true;
  });
}

bool installed() { return g_installed.load(); }

Counters counters() { return {g_allocated.load(), g_peak.load(), g_allocations.load()}; }

void reset_peak() { g_peak.store(g_allocated.load()); }

void set_capacity(int64_t bytes) { g_capacity.store(bytes > 0 ? bytes : 0); }
int64_t capacity() { return g_capacity.load(); }

void set_poison(bool on) { g_poison.store(on); }
bool poison() { return g_poison.load(); }

}  // namespace offtune::host_sim
