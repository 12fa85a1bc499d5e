#include "pressure.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace offtune::detail {
namespace {

std::mutex g_mutex;
std::vector<std::weak_ptr<Reclaimer>>& reclaimers() {
  static auto* list = new std::vector<std::weak_ptr<Reclaimer>>();  // leaked: used at exit
  return *list;
}
thread_local int t_no_reclaim = 0;
std::atomic<int64_t> g_largest_offloaded{0};
constexpr int64_t kMinMargin = int64_t{20} << 20;

}  // namespace

void register_reclaimer(const std::weak_ptr<Reclaimer>& reclaimer) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& list = reclaimers();
  std::erase_if(list, [](const std::weak_ptr<Reclaimer>& r) { return r.expired(); });
  list.push_back(reclaimer);
}

int64_t reclaim_device_memory(int device) noexcept {
  if (t_no_reclaim > 0) return 0;
  std::vector<std::shared_ptr<Reclaimer>> live;
  try {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& weak : reclaimers()) {
      auto r = weak.lock();
      if (!r) continue;
      const int own = r->device();
      if (device == kAnyDevice || own == kAnyDevice || own == device) live.push_back(std::move(r));
    }
  } catch (...) {
    return 0;  // no memory for the list: nothing reclaimed, the allocator goes on as without
  }
  // Called without the registry's lock: a reclaimer frees memory, which may re-enter an allocator.
  int64_t freed = 0;
  for (const auto& r : live) freed += r->reclaim_device_memory();
  return freed;
}

int64_t pressure_margin() noexcept {
  return std::max(kMinMargin, 2 * g_largest_offloaded.load(std::memory_order_relaxed));
}

void note_offloaded_bytes(int64_t bytes) noexcept {
  int64_t seen = g_largest_offloaded.load(std::memory_order_relaxed);
  while (bytes > seen &&
         !g_largest_offloaded.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
  }
}

NoReclaimScope::NoReclaimScope() { ++t_no_reclaim; }
NoReclaimScope::~NoReclaimScope() { --t_no_reclaim; }

}  // namespace offtune::detail
