// The host-sim emulator (offtune/host_sim.hpp): the accounting allocator behind "device" memory,
// with CUDA's per-stream block ownership, an optional block cache, deferred frees for blocks
// recorded on a copy stream, and the stream-order checker.
//
// Memory figures follow CUDA's caching allocator: `allocated` drops when a tensor is freed, even if
// its block may not be reused yet; `reserved` counts every block the allocator holds (in use,
// cached, or freed but waiting for a copy stream). Beside the emulator's own blocks, every
// allocation and free goes through a model of CUDA's caching allocator (alloc_model.hpp): the
// segments a GPU process would reserve for them, and whether the device's capacity holds them.
#include "offtune/host_sim.hpp"
#include "offtune/memory_history.hpp"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "alloc_model.hpp"
#include "host_sim_internal.hpp"
#include "pressure.hpp"

namespace offtune::host_sim {
namespace {

using detail::sim::CopyStream;

// c10 requires a CPU DataPtr's context to equal its data pointer (raw_allocate asserts it), so the
// block's facts live in a header just before the data; 64 bytes keep c10's 64-byte alignment.
constexpr size_t kHeader = 64;

struct Header {
  int64_t bytes = 0;
  StreamId owner = kDefaultStream;  // the stream current at allocation
  // A copy stream this block was recorded on, and the last copy issued there at that time: the
  // block is not reused before that copy ran.
  CopyStream* recorded_on = nullptr;
  uint64_t recorded_seq = 0;
  std::atomic<bool> checked{false};  // the checker tracks this block (g_tracked has an entry)
  // The block the caching-allocator model gave this allocation, and the model's id of its free
  // while that waits for a copy stream (0: none).
  detail::sim::CachingAllocatorModel::Block* modelled = nullptr;
  detail::sim::CachingAllocatorModel::PendingFree pending = 0;
};
static_assert(sizeof(Header) <= kHeader);

Header* header_of(void* data) {
  return reinterpret_cast<Header*>(static_cast<char*>(data) - kHeader);
}

std::atomic<int64_t> g_allocated{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_reserved{0};
std::atomic<int64_t> g_peak_reserved{0};
std::atomic<bool> g_poison{false};
std::atomic<bool> g_caching{false};
std::atomic<bool> g_check{false};
std::atomic<bool> g_installed{false};
std::atomic<int64_t> g_capacity{0};
std::atomic<StreamId> g_next_stream{1};
thread_local StreamId t_stream = kDefaultStream;
std::atomic<AllocationListener*> g_listener{nullptr};

void raise(std::atomic<int64_t>& peak, int64_t now) {
  int64_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

// ---- the caching allocator, modelled -----------------------------------------------------------

std::mutex g_model_mutex;
detail::sim::CachingAllocatorModel& alloc_model() {
  static auto* m = new detail::sim::CachingAllocatorModel();  // leaked: frees at exit
  return *m;
}

// The model's side of a free. A block recorded on a copy stream whose work has not run yet is
// freed as CUDA frees it: held back (reserved, not reusable) until that stream's work is done.
// Without a device model "done" is the copies having run (release_block() tells the model); with
// one, the copy stream's simulated clock having passed the end of its last copy issued before the
// free, as a GPU's event would (the host issues ahead of both streams there, so a block freed
// during forward may wait for copies issued after its own).
struct TimedFree {
  int64_t at = 0;  // simulated time
  detail::sim::CachingAllocatorModel::PendingFree id = 0;
};
std::vector<TimedFree> g_timed_frees;  // under g_model_mutex

// The memory history's listener (memory_history.hpp); events are sent under g_model_mutex, so that
// they arrive in the order the model saw them.
std::atomic<MemoryHistoryListener*> g_history{nullptr};

// Under g_model_mutex: an allocation or the request of a free, which the model leaves to us.
void report(MemoryEvent::Action action, const detail::sim::CachingAllocatorModel::Block* b,
            const void* data) {
  MemoryHistoryListener* l = g_history.load(std::memory_order_acquire);
  if (l == nullptr || b == nullptr) return;
  using Model = detail::sim::CachingAllocatorModel;
  MemoryEvent e;
  e.action = action;
  e.addr = Model::address(b);
  e.size = Model::requested_of(b);
  e.block_size = Model::size_of(b);
  e.stream = Model::stream_of(b);
  e.time_ns = clock_ns();
  e.data = data;
  l->on_memory_event(e);
}

// Under g_model_mutex: the timed frees whose time the compute stream has reached.
void complete_due_frees() {
  if (g_timed_frees.empty()) return;
  const int64_t now = detail::sim::compute_clock();
  std::erase_if(g_timed_frees, [&](const TimedFree& f) {
    if (f.at > now) return false;
    alloc_model().complete(f.id);
    return true;
  });
}

void model_free(Header* h, detail::sim::CopyStream* waits_for) {
  if (h->modelled == nullptr) return;
  std::lock_guard<std::mutex> lock(g_model_mutex);
  report(MemoryEvent::Action::FreeRequested, h->modelled, reinterpret_cast<char*>(h) + kHeader);
  if (detail::sim::modelled()) {
    const int64_t tail = h->recorded_on != nullptr
                             ? h->recorded_on->modelled_tail.load(std::memory_order_acquire)
                             : -1;
    const bool waits = tail > detail::sim::compute_clock();
    if (waits) alloc_model().record_stream(h->modelled, h->recorded_on->id);
    const auto id = alloc_model().free(h->modelled);
    if (waits && id != 0) g_timed_frees.push_back({tail, id});
  } else {
    if (waits_for != nullptr) alloc_model().record_stream(h->modelled, waits_for->id);
    h->pending = alloc_model().free(h->modelled);
  }
  h->modelled = nullptr;
}

// ---- the block cache -------------------------------------------------------------------------

std::mutex g_cache_mutex;
std::map<std::pair<StreamId, int64_t>, std::vector<Header*>> g_cache;  // LIFO per (stream, size)

void release_to_system(Header* h) {
  g_reserved.fetch_sub(h->bytes, std::memory_order_relaxed);
  c10::free_cpu(h);
}

// The block is free for its stream's later work: poison it, then cache it or give it back.
void release_block(Header* h) {
  if (h->pending != 0) {
    std::lock_guard<std::mutex> lock(g_model_mutex);
    alloc_model().complete(h->pending);
    h->pending = 0;
  }
  if (g_poison.load(std::memory_order_relaxed)) {
    std::memset(reinterpret_cast<char*>(h) + kHeader, 0xFF, static_cast<size_t>(h->bytes));
  }
  h->recorded_on = nullptr;
  h->recorded_seq = 0;
  if (g_caching.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    g_cache[{h->owner, h->bytes}].push_back(h);
    return;
  }
  release_to_system(h);
}

// Empties every stream's cache; returns the bytes given back.
int64_t flush_caches() {
  std::vector<Header*> blocks;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    for (auto& [key, list] : g_cache) blocks.insert(blocks.end(), list.begin(), list.end());
    g_cache.clear();
  }
  int64_t freed = 0;
  for (Header* h : blocks) {
    freed += h->bytes;
    release_to_system(h);
  }
  return freed;
}

Header* take_cached(StreamId stream, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto it = g_cache.find({stream, bytes});
  if (it == g_cache.end() || it->second.empty()) return nullptr;
  Header* h = it->second.back();
  it->second.pop_back();
  return h;
}

// ---- frees that wait for a copy stream ---------------------------------------------------------

std::mutex g_deferred_mutex;
std::vector<Header*> g_deferred;
std::atomic<int64_t> g_deferred_count{0};

void release_ready_deferred() {
  // Reused: a free on the compute thread may land here, and the engine's hooks allocate nothing
  // per tensor (tests/test_allocations.cpp counts).
  thread_local std::vector<Header*> ready;
  ready.clear();
  {
    std::lock_guard<std::mutex> lock(g_deferred_mutex);
    for (auto it = g_deferred.begin(); it != g_deferred.end();) {
      Header* h = *it;
      if (h->recorded_on->completed.load(std::memory_order_acquire) >= h->recorded_seq) {
        ready.push_back(h);
        it = g_deferred.erase(it);
      } else {
        ++it;
      }
    }
    g_deferred_count.store(static_cast<int64_t>(g_deferred.size()));
  }
  for (Header* h : ready) release_block(h);
}

// CUDA's last resort before an out-of-memory error (synchronize_and_free_events): wait for the
// copies that deferred frees wait for, then release those blocks.
void wait_for_deferred() {
  std::vector<std::pair<CopyStream*, uint64_t>> waits;
  {
    std::lock_guard<std::mutex> lock(g_deferred_mutex);
    for (Header* h : g_deferred) waits.emplace_back(h->recorded_on, h->recorded_seq);
  }
  for (auto [cs, seq] : waits) {
    for (uint64_t v = cs->completed.load(std::memory_order_acquire); v < seq;
         v = cs->completed.load(std::memory_order_acquire)) {
      cs->completed.wait(v, std::memory_order_acquire);
    }
  }
  release_ready_deferred();
}

void defer_or_release(Header* h) {
  if (h->recorded_on == nullptr ||
      h->recorded_on->completed.load(std::memory_order_acquire) >= h->recorded_seq) {
    model_free(h, nullptr);
    release_block(h);
    return;
  }
  model_free(h, h->recorded_on);
  {
    std::lock_guard<std::mutex> lock(g_deferred_mutex);
    g_deferred.push_back(h);
    g_deferred_count.store(static_cast<int64_t>(g_deferred.size()));
  }
  // The copy may have run between the check above and the push: its note_copy_done may have seen
  // no deferred block.
  if (h->recorded_on->completed.load(std::memory_order_seq_cst) >= h->recorded_seq) {
    release_ready_deferred();
  }
}

// ---- the stream-order checker (set_check_streams) ---------------------------------------------

struct Access {
  CopyStream* cs = nullptr;  // a copy on this stream...
  uint64_t seq = 0;
  bool writes = false;
  StreamId compute = -1;  // ...or a compute stream other than the owner that was handed the block
};
struct Tracked {
  std::vector<Access> accesses;
  std::vector<StreamId> recorded;  // record_stream targets (compute or copy streams)
};
// What a compute stream has waited for: the last copy of each copy stream it is ordered after.
using Clock = std::vector<std::pair<CopyStream*, uint64_t>>;

std::mutex g_check_mutex;
std::unordered_map<void*, Tracked> g_tracked;  // by block data pointer
std::unordered_map<StreamId, Clock> g_clocks;
std::unordered_map<StreamId, CopyStream*> g_copy_streams;
std::deque<std::string> g_races;
constexpr size_t kMaxRaces = 1000;

uint64_t clock_of(const Clock& c, const CopyStream* cs) {
  for (const auto& [s, seq] : c) {
    if (s == cs) return seq;
  }
  return 0;
}
uint64_t clock_of(StreamId stream, const CopyStream* cs) {
  auto it = g_clocks.find(stream);
  return it == g_clocks.end() ? 0 : clock_of(it->second, cs);
}

void report(std::string message) {
  if (g_races.size() >= kMaxRaces) g_races.pop_front();
  g_races.push_back(std::move(message));
}

// Whether copy `a` is ordered before `stream`'s work from now on.
bool ordered_before(const Access& a, StreamId stream) {
  return a.seq <= a.cs->observed.load(std::memory_order_acquire) || a.seq <= clock_of(stream, a.cs);
}

// Checked at free, with g_check_mutex held. Returns true when the free races with a copy or with
// another stream's use. A copy that is ordered only by the owner's stream wait and has not run yet
// is returned in `wait`: the block must stay intact until it ran (the owner's later work would run
// after it on a GPU).
bool check_free(void* data, const Header& h, std::pair<CopyStream*, uint64_t>& wait) {
  auto it = g_tracked.find(data);
  if (it == g_tracked.end()) return false;
  const Tracked t = std::move(it->second);
  g_tracked.erase(it);
  auto recorded = [&](StreamId s) {
    return std::find(t.recorded.begin(), t.recorded.end(), s) != t.recorded.end();
  };
  bool raced = false;
  for (const Access& a : t.accesses) {
    if (a.cs == nullptr) {
      if (a.compute == h.owner || recorded(a.compute)) continue;
      std::ostringstream m;
      m << "device block of " << h.bytes << " B (allocated on stream " << h.owner
        << ") freed after stream " << a.compute
        << " was handed a tensor on it, without record_stream on that stream: the owner may "
           "reuse it while that stream still reads it";
      report(m.str());
      raced = true;
      continue;
    }
    if (recorded(a.cs->id)) continue;
    bool by_record = false;
    for (StreamId r : t.recorded) by_record = by_record || a.seq <= clock_of(r, a.cs);
    if (by_record || a.seq <= a.cs->observed.load(std::memory_order_acquire)) continue;
    if (a.seq <= clock_of(h.owner, a.cs)) {
      if (a.seq > a.cs->completed.load(std::memory_order_acquire) &&
          (wait.first == nullptr || (wait.first == a.cs && a.seq > wait.second))) {
        wait = {a.cs, a.seq};
      }
      continue;
    }
    std::ostringstream m;
    m << "device block of " << h.bytes << " B (allocated on stream " << h.owner
      << ") freed while copy #" << a.seq << " on copy stream " << a.cs->id << " may still "
      << (a.writes ? "write" : "read")
      << " it: its stream has not waited for that copy and the block was not recorded on the "
         "copy stream";
    report(m.str());
    raced = true;
  }
  return raced;
}

// ---- the allocator -----------------------------------------------------------------------------

void free_allocation(void* data) {
  if (data == nullptr) return;
  Header* h = header_of(data);
  g_allocated.fetch_sub(h->bytes, std::memory_order_relaxed);
  if (AllocationListener* l = g_listener.load(std::memory_order_acquire)) {
    l->on_free(data, h->bytes, clock_ns());
  }
  // CUDA records a freed block's event on each stream it was recorded on at the free: the block
  // waits for everything queued there by then, not only for the copies issued before
  // record_stream.
  if (h->recorded_on != nullptr) {
    h->recorded_seq =
        std::max(h->recorded_seq, h->recorded_on->issued.load(std::memory_order_acquire));
  }
  if (h->checked.load(std::memory_order_acquire)) {
    bool raced = false;
    std::pair<CopyStream*, uint64_t> wait{nullptr, 0};
    {
      std::lock_guard<std::mutex> lock(g_check_mutex);
      raced = check_free(data, *h, wait);
    }
    h->checked.store(false, std::memory_order_relaxed);
    // A copy may still run on this block: make that visible in the values, as a reuse would.
    if (raced) std::memset(data, 0xFF, static_cast<size_t>(h->bytes));
    if (wait.first != nullptr) {
      if (h->recorded_on == nullptr || h->recorded_on == wait.first) {
        h->recorded_on = wait.first;
        h->recorded_seq = std::max(h->recorded_seq, wait.second);
      } else {
        while (wait.first->completed.load(std::memory_order_acquire) < wait.second) {
          std::this_thread::yield();
        }
      }
    }
  }
  defer_or_release(h);
}

[[noreturn]] void out_of_memory(int64_t requested) {
  // Like the CUDA caching allocator, an error that callers can catch as c10::OutOfMemoryError (a
  // sweep records such a point as "oom" and goes on), in its terms.
  std::optional<detail::sim::CachingAllocatorModel::OutOfMemory> oom;
  {
    std::lock_guard<std::mutex> lock(g_model_mutex);
    oom = alloc_model().last_oom();
  }
  const auto mib = [](int64_t bytes) {  // "7.45", "20", "1536"
    const double v = static_cast<double>(bytes) / (1024.0 * 1024.0);
    char text[32];
    std::snprintf(text, sizeof text, v >= 100 ? "%.0f" : "%.3g", v);
    return std::string(text);
  };
  // In MiB, as torch's own message: a person reads it in a tooltip (before: "a request of
  // 5636096 bytes").
  if (!oom) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "host-sim device out of memory: tried to allocate ",
                     mib(requested), " MiB");
  }
  const std::string free = oom->free() > 0 ? mib(oom->free()) + " MiB free" : "none of it free";
  TORCH_CHECK_WITH(OutOfMemoryError, false, "host-sim device out of memory: tried to allocate ",
                   mib(oom->alloc_size), " MiB (a segment for a request of ", mib(requested),
                   " MiB). Capacity ", mib(oom->capacity), " MiB, ", free,
                   "; reserved by the modelled caching allocator ", mib(oom->reserved),
                   " MiB, allocated ", mib(oom->allocated), " MiB");
}

// A block of the model for `bytes` on `stream`, as CUDA's allocator finds one: from its cache, a
// new segment, or after releasing its cache (which it does itself); then, before it fails, after
// offloaders gave back prefetched buffers they can bring back later (offtune's free-memory
// callback on cuda). Throws c10::OutOfMemoryError when none fits the capacity.
detail::sim::CachingAllocatorModel::Block* model_allocate(int64_t bytes, StreamId stream) {
  // One try of the model. When it released its cache (CUDA's synchronize_and_free_events, then
  // freeing every cached segment), the frees it let through waited for the copy stream on a GPU:
  // here too, so that a block reused that way is not in use by a copy (on the simulated clock with
  // a device model, and physically).
  const auto attempt = [&]() -> detail::sim::CachingAllocatorModel::Block* {
    detail::sim::CachingAllocatorModel::Block* b = nullptr;
    int64_t synced_until = -1;
    {
      std::lock_guard<std::mutex> lock(g_model_mutex);
      complete_due_frees();
      const int64_t syncs = alloc_model().stats().num_sync_all_streams;
      b = alloc_model().allocate(bytes, stream);
      if (alloc_model().stats().num_sync_all_streams == syncs) return b;
      for (const TimedFree& f : g_timed_frees) synced_until = std::max(synced_until, f.at);
      g_timed_frees.clear();
    }
    if (synced_until >= 0) detail::sim::compute_wait_until(synced_until);
    wait_for_deferred();
    return b;
  };
  if (auto* b = attempt(); b != nullptr || bytes == 0) return b;
  detail::reclaim_device_memory();  // frees blocks: takes the model's lock itself
  if (auto* b = attempt()) return b;
  out_of_memory(bytes);
}

class AccountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const auto bytes = static_cast<int64_t>(n);
    const StreamId stream = t_stream;
    // The model decides whether the device holds it; the emulator's block holds the bytes.
    auto* modelled = model_allocate(bytes, stream);
    Header* h = g_caching.load(std::memory_order_relaxed) ? take_cached(stream, bytes) : nullptr;
    if (h == nullptr) {
      try {
        h = static_cast<Header*>(c10::alloc_cpu(n + kHeader));
      } catch (...) {  // the host is out of memory: the model's block goes back
        std::lock_guard<std::mutex> lock(g_model_mutex);
        alloc_model().free(modelled);
        throw;
      }
      new (h) Header();
      h->bytes = bytes;
      h->owner = stream;
      raise(g_peak_reserved, g_reserved.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    }
    raise(g_peak, g_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    h->modelled = modelled;
    void* data = reinterpret_cast<char*>(h) + kHeader;
    if (modelled != nullptr && g_history.load(std::memory_order_acquire) != nullptr) {
      std::lock_guard<std::mutex> lock(g_model_mutex);
      report(MemoryEvent::Action::Alloc, modelled, data);
    }
    if (AllocationListener* l = g_listener.load(std::memory_order_acquire)) {
      l->on_allocate(data, bytes, clock_ns());
    }
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

Counters counters() {
  Counters c{g_allocated.load(), g_peak.load(), g_allocations.load(), g_reserved.load(),
             g_peak_reserved.load()};
  std::lock_guard<std::mutex> lock(g_model_mutex);
  const auto s = alloc_model().stats();
  c.cache_flushes = s.num_alloc_retries;
  c.modelled_reserved = s.reserved;
  c.modelled_peak_reserved = s.peak_reserved;
  c.modelled_inactive_split = s.inactive_split_bytes;
  c.modelled_pending = s.pending_bytes;
  c.modelled_allocated = s.allocated;
  return c;
}

void set_allocation_listener(AllocationListener* listener) {
  g_listener.store(listener, std::memory_order_release);
}

const char* to_string(MemoryEvent::Action a) {
  switch (a) {
    case MemoryEvent::Action::Alloc:
      return "alloc";
    case MemoryEvent::Action::FreeRequested:
      return "free_requested";
    case MemoryEvent::Action::FreeCompleted:
      return "free_completed";
    case MemoryEvent::Action::SegmentAlloc:
      return "segment_alloc";
    case MemoryEvent::Action::SegmentFree:
      return "segment_free";
    case MemoryEvent::Action::SegmentMap:
      return "segment_map";
    case MemoryEvent::Action::SegmentUnmap:
      return "segment_unmap";
    case MemoryEvent::Action::Oom:
      return "oom";
  }
  return "unknown";
}

void set_memory_history_listener(MemoryHistoryListener* listener) {
  using Trace = detail::sim::CachingAllocatorModel::TraceEvent;
  std::lock_guard<std::mutex> lock(g_model_mutex);
  g_history.store(listener, std::memory_order_release);
  if (listener == nullptr) {
    alloc_model().set_tracer({});
    return;
  }
  alloc_model().set_tracer([listener](const Trace& t) {
    MemoryEvent e;
    e.action = t.action;
    e.addr = t.addr;
    e.size = t.size;
    e.stream = t.stream;
    e.device_free = t.device_free;
    e.time_ns = clock_ns();
    listener->on_memory_event(e);
  });
}

std::vector<MemorySegment> memory_segments() {
  std::vector<detail::sim::CachingAllocatorModel::SegmentState> state;
  {
    std::lock_guard<std::mutex> lock(g_model_mutex);
    state = alloc_model().state();
  }
  std::vector<MemorySegment> out;
  out.reserve(state.size());
  for (const auto& s : state) {
    MemorySegment seg{s.addr, s.size, s.stream, s.small, s.expandable, {}};
    for (const auto& b : s.blocks) {
      seg.blocks.push_back({b.addr, b.size, b.requested,
                            b.allocated ? MemoryBlock::State::Allocated
                            : b.pending ? MemoryBlock::State::PendingFree
                                        : MemoryBlock::State::Inactive});
    }
    out.push_back(std::move(seg));
  }
  return out;
}

void reset_peak() {
  g_peak.store(g_allocated.load());
  g_peak_reserved.store(g_reserved.load());
  std::lock_guard<std::mutex> lock(g_model_mutex);
  alloc_model().reset_peak();
}

void set_capacity(int64_t bytes) {
  g_capacity.store(bytes > 0 ? bytes : 0);
  detail::sim::apply_capacity();
}
int64_t capacity() { return g_capacity.load(); }

void set_poison(bool on) {
  if (on) g_poison.store(true);
}
bool poison() { return g_poison.load(); }

void set_caching(bool on) {
  if (on) g_caching.store(true);
}
bool caching() { return g_caching.load(); }

void empty_cache() {
  wait_for_deferred();
  flush_caches();
  std::lock_guard<std::mutex> lock(g_model_mutex);
  alloc_model().empty_cache();  // completes every held-back free
  g_timed_frees.clear();
}

StreamId new_stream() { return g_next_stream.fetch_add(1); }
StreamId current_stream() { return t_stream; }

StreamGuard::StreamGuard(StreamId stream) : previous_(t_stream) { t_stream = stream; }
StreamGuard::~StreamGuard() { t_stream = previous_; }

void set_check_streams(bool on) {
  if (on) g_check.store(true);
}
bool check_streams() { return g_check.load(); }

StreamId owner_stream(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || !detail::sim::is_device_block(t.storage())) return -1;
  return header_of(t.storage().mutable_data())->owner;
}

std::vector<std::string> take_stream_races() {
  std::lock_guard<std::mutex> lock(g_check_mutex);
  std::vector<std::string> out(g_races.begin(), g_races.end());
  g_races.clear();
  return out;
}

int64_t default_threads(int64_t requested, bool host_sim) {
  if (requested >= 0) return requested;
  if (!host_sim) return 0;
  const auto cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  return std::max<int64_t>(1, cores - 1);
}

}  // namespace offtune::host_sim

namespace offtune::detail::sim {

using host_sim::g_check;

void apply_capacity() {
  const int64_t device = host_sim::g_capacity.load();
  int64_t allocator = device;  // 0: unlimited
  if (device > 0) {
    if (const DeviceModel* model = host_sim::device_model()) {
      // A device smaller than its context has no room at all (not an unlimited one).
      allocator = std::max<int64_t>(1, device - model->context_bytes);
    }
  }
  std::lock_guard<std::mutex> lock(host_sim::g_model_mutex);
  host_sim::alloc_model().set_capacity(allocator);
}
using host_sim::g_check_mutex;

CopyStream& new_copy_stream() {
  auto* cs = new CopyStream();  // leaked: blocks may name it after its backend is gone
  cs->id = host_sim::new_stream();
  std::lock_guard<std::mutex> lock(g_check_mutex);
  host_sim::g_copy_streams[cs->id] = cs;
  return *cs;
}

bool is_device_block(const c10::Storage& storage) {
  return storage.data_ptr().get_deleter() == &host_sim::free_allocation;
}

void note_copy(const c10::Storage& device, CopyStream& cs, uint64_t seq, bool writes_device) {
  if (!g_check.load(std::memory_order_relaxed) || !is_device_block(device)) return;
  void* data = device.mutable_data();
  std::lock_guard<std::mutex> lock(g_check_mutex);
  host_sim::g_tracked[data].accesses.push_back({&cs, seq, writes_device, -1});
  host_sim::header_of(data)->checked.store(true, std::memory_order_release);
}

void note_copy_done(CopyStream& cs, uint64_t seq) {
  cs.completed.store(seq, std::memory_order_seq_cst);
  if (host_sim::g_deferred_count.load(std::memory_order_seq_cst) > 0) {
    host_sim::release_ready_deferred();
  }
}

void note_observed(CopyStream& cs, uint64_t seq) {
  uint64_t cur = cs.observed.load(std::memory_order_relaxed);
  while (seq > cur && !cs.observed.compare_exchange_weak(cur, seq, std::memory_order_release)) {
  }
}

void note_stream_wait(StreamId stream, CopyStream& cs, uint64_t seq) {
  if (!g_check.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_check_mutex);
  auto& clock = host_sim::g_clocks[stream];
  for (auto& [s, at] : clock) {
    if (s == &cs) {
      at = std::max(at, seq);
      return;
    }
  }
  clock.emplace_back(&cs, seq);
}

void note_record_stream(const c10::Storage& device, StreamId stream) {
  if (!is_device_block(device)) return;
  void* data = device.mutable_data();
  host_sim::Header* h = host_sim::header_of(data);
  CopyStream* cs = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_check_mutex);
    auto it = host_sim::g_copy_streams.find(stream);
    if (it != host_sim::g_copy_streams.end()) cs = it->second;
    if (g_check.load(std::memory_order_relaxed)) {
      host_sim::g_tracked[data].recorded.push_back(stream);
      h->checked.store(true, std::memory_order_release);
    }
  }
  if (cs == nullptr) return;  // a compute stream: its work so far is already done on the host
  if (h->recorded_on != nullptr && h->recorded_on != cs) {
    // One copy stream per block is tracked; a second one first waits for the first (rare: two
    // offloaders copying one block).
    while (h->recorded_on->completed.load(std::memory_order_acquire) < h->recorded_seq) {
      std::this_thread::yield();
    }
  }
  h->recorded_on = cs;
  h->recorded_seq = cs->issued.load(std::memory_order_acquire);
}

void check_handout(const at::Tensor& t) {
  if (!g_check.load(std::memory_order_relaxed) || !t.defined() || !t.has_storage()) return;
  const c10::Storage& storage = t.storage();
  if (!is_device_block(storage)) return;
  const host_sim::StreamId stream = host_sim::t_stream;
  void* data = storage.mutable_data();
  std::lock_guard<std::mutex> lock(g_check_mutex);
  auto it = host_sim::g_tracked.find(data);
  if (it == host_sim::g_tracked.end()) return;
  const host_sim::Header* h = host_sim::header_of(data);
  for (const host_sim::Access& a : it->second.accesses) {
    if (a.cs == nullptr || !a.writes || host_sim::ordered_before(a, stream)) continue;
    std::ostringstream m;
    m << "tensor handed to autograd on stream " << stream << " before its reload (copy #" << a.seq
      << " on copy stream " << a.cs->id << ") is ordered before that stream";
    host_sim::report(m.str());
  }
  if (stream != h->owner) {
    auto& accesses = it->second.accesses;
    const bool known = std::any_of(
        accesses.begin(), accesses.end(),
        [&](const host_sim::Access& a) { return a.cs == nullptr && a.compute == stream; });
    if (!known) accesses.push_back({nullptr, 0, false, stream});
  }
}

}  // namespace offtune::detail::sim
