// The engine logic, written once against Backend. Lifetime and stream rules, in one place:
//
// - Every saved tensor gets a Slot. A slot that offloads owns a share of an Entry: the host copy of
//   one storage span. Slots of tensors on the same live storage at the same version share one
//   entry (de-duplication), so a tensor saved twice, or a view saved beside its base, moves once.
// - Autograd's version check is kept: a slot remembers the tensor's version at pack and unpack
//   raises autograd's own error when the tensor was modified in place since, offloaded or not.
// - Forward window: after an offload copy is issued, the entry holds the device storage until the
//   copy is known complete; at most max_fwd_stash_size entries (and max_fwd_stash_bytes of
//   storage) are held, else forward makes its stream wait for the oldest. A hold dropped while its
//   copy may still run is recorded on the copy stream: whichever stream owns the block, it is not
//   reused before the copy read it.
// - Backward: unpack serves the entry from its forward hold, a prefetched buffer, or a new reload.
//   Reload buffers are allocated on the stream that consumes them, so they return to that stream's
//   pool; the copy stream first waits for that stream. Every stream that is handed the buffer waits
//   for the reload once (a de-duplicated entry may be consumed on two streams), and a consumer that
//   is not the block's stream is recorded on it when the buffer is released.
// - Prefetch is an optimisation that never causes an out-of-memory: skipped when the device has
//   no room, and unused prefetched buffers are given back when an allocation needs the memory.
// - Host blocks go back to the pool only after every copy that touches them has completed.
// - Disk tier (disk_pump.hpp, the collaborator that drives disk_tier.hpp): a host copy may go on
//   to the arena file once its offload copy is known complete (tier disk: every one; tier auto:
//   the oldest, while the host copies alive pass host_budget_bytes); its host block is freed when
//   the write completed. Backward reads it back into a staging block (ahead of use, in backward
//   order, bounded in bytes), then reloads from there as from any host copy. A failed write leaves
//   the host copy in place and the step goes on from it (counted, warned about once): only a copy
//   with no host copy left fails a step. A failed read, a read whose checksum does not match its
//   write's, or an arena full is thrown once, as EngineError, by the unpack that needs it (an arena
//   full by the next hook of its forward), and warned about if that forward's graph dies first.
// - verify (verify.hpp): pack checksums what autograd saved, unpack what it hands back, once the
//   bytes are there (after the reload's wait); a mismatch throws, naming where the copy went.
// - Observers are never called under the engine's lock (they may call stats()); blocking waits
//   happen outside it too.
// None of this depends on "first forward" or "first backward" flags: state lives in entries, which
// die with their slots, so forward-only passes, several forwards per backward, several backwards,
// exceptions and dropped graphs all return the engine to rest.
#include "offtune/offloader.hpp"
#include "offtune/external_hooks.hpp"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <c10/util/flat_hash_map.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <iostream>
#include <map>
#include <memory_resource>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "backend.hpp"
#include "block_cache.hpp"
#include "context.hpp"
#include "disk_pump.hpp"
#include "disk_tier.hpp"
#include "host_pool.hpp"
#include "host_sim_internal.hpp"
#include "offload_entry.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/offload_rule.hpp"
#include "pressure.hpp"
#include "seam.hpp"
#include "span_guard.hpp"
#include "sysmem.hpp"
#include "verify.hpp"

namespace offtune::detail {

class Slot;

// What the engine tells observers, collected under the lock and delivered after it.
using Emission = std::variant<PackEvent, std::pair<bool, CopyEvent>, UnpackEvent, WaitEvent,
                              StashEvent, ReleaseEvent>;  // pair: (completed?, copy)

// An attached observer, as events collected for it refer to it. Events wait in a thread's queue
// until the outermost engine call on that thread ends (a reclaim, run by whatever thread's
// allocation asked for memory, may leave them there until that thread's next engine call), so they
// hold this instead of the observer: set_observer() detaches it (waiting for deliveries in flight
// on other threads), and a delivery checks it first. No event reaches an observer once
// set_observer() has replaced it.
struct Attached {
  explicit Attached(std::shared_ptr<Observer> o) : observer(std::move(o)) {}
  std::shared_ptr<Observer> observer;
  std::shared_mutex delivering;  // shared while a delivery runs, exclusive to detach
  std::atomic<bool> attached{true};
  void detach();
};
thread_local const Attached* t_delivering =
    nullptr;  // the Attached whose events this thread delivers

void Attached::detach() {
  attached.store(false, std::memory_order_release);
  // An observer's callback that detaches its own observer is inside the shared lock already.
  if (t_delivering != this) std::unique_lock<std::shared_mutex> wait(delivering);
}

struct Pending {
  std::shared_ptr<Attached> to;
  Emission what;
};
thread_local std::vector<Pending> t_pending;
thread_local int t_sinks = 0;
thread_local const Context* t_holding = nullptr;  // the context whose lock this thread holds

// Delivers what was collected on this thread once the outermost engine call ends (after its lock
// is released: declare it before the lock). The hooks make an inactive one when there is no
// observer (nothing is collected then): it costs a branch.
class EventSink {
 public:
  explicit EventSink(bool active = true) : active_(active) {
    if (active_) [[unlikely]] {
      ++t_sinks;
    }
  }
  ~EventSink() {
    if (!active_ || --t_sinks > 0 || t_pending.empty()) [[likely]] {
      return;
    }
    std::vector<Pending> batch;
    batch.swap(t_pending);
    for (auto& p : batch) deliver(p);
    batch.clear();
    if (t_pending.empty()) t_pending.swap(batch);  // keep the capacity
  }
  EventSink(const EventSink&) = delete;
  EventSink& operator=(const EventSink&) = delete;

 private:
  const bool active_;
  static void deliver(Pending& p) noexcept {
    std::shared_lock<std::shared_mutex> lock(p.to->delivering);
    if (!p.to->attached.load(std::memory_order_acquire)) return;
    Observer* const observer = p.to->observer.get();
    const Attached* const outer = std::exchange(t_delivering, p.to.get());
    struct Restore {
      const Attached* outer;
      ~Restore() { t_delivering = outer; }
    } restore{outer};
    try {
      std::visit(
          [&](auto& e) {
            using T = std::decay_t<decltype(e)>;
            if constexpr (std::is_same_v<T, PackEvent>) {
              observer->on_pack(e);
            } else if constexpr (std::is_same_v<T, std::pair<bool, CopyEvent>>) {
              if (e.first) {
                observer->on_copy_completed(e.second);
              } else {
                observer->on_copy_issued(e.second);
              }
            } else if constexpr (std::is_same_v<T, UnpackEvent>) {
              observer->on_unpack(e);
            } else if constexpr (std::is_same_v<T, WaitEvent>) {
              observer->on_wait(e);
            } else if constexpr (std::is_same_v<T, ReleaseEvent>) {
              observer->on_release(e);
            } else {
              observer->on_stash(e);
            }
          },
          p.what);
    } catch (const std::exception& ex) {
      TORCH_WARN("offtune: observer threw: ", ex.what());
    } catch (...) {
      TORCH_WARN("offtune: observer threw");
    }
  }
};

class Context : public std::enable_shared_from_this<Context>,
                public Reclaimer,
                private DiskPump::Engine {
 public:
  Context(OffloadOptions options, std::unique_ptr<Backend> backend)
      : options_(std::move(options)), backend_(std::move(backend)) {
    open_disk_tier();
    pool_ = std::make_shared<HostPool>(backend_->host_memory(), options_.host_pool_slab_bytes,
                                       options_.poison_freed, disk_ ? kDiskAlign : 512);
  }
  // No slot is left (slots own the context), so no entry: only host blocks whose copies may still
  // run, which must not go back to the pool before they ran.
  ~Context() override {
    try {
      if (disk_) disk_->tier().drain();
      backend_->synchronize();
    } catch (...) {
    }
  }

  void pack(Slot& slot, const at::Tensor& t);
  at::Tensor unpack(Slot& slot);
  void release(Slot& slot) noexcept;

  uint64_t new_generation() { return next_generation_.fetch_add(1) + 1; }
  void never_offload(const at::Tensor& t);
  void never_offload_storage(const c10::Storage& storage);
  void register_weight_storage(const c10::Storage& storage, std::weak_ptr<WeightSource> source,
                               int64_t key);
  // The source of a frozen weight's device copy that `t` lives on, if any (see WeightSource).
  std::shared_ptr<WeightSource> weight_source_of(const at::Tensor& t, int64_t& key);
  void exclude_module(const void* m) {
    std::lock_guard<std::mutex> lock(mutex_);
    excluded_.insert(m);
  }
  bool is_excluded(const void* m) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return excluded_.count(m) != 0;
  }
  void set_observer(std::shared_ptr<Observer> o) {
    std::shared_ptr<Attached> old;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      old = std::exchange(attached_, o ? std::make_shared<Attached>(o) : nullptr);
      observer_ = std::move(o);
    }
    if (old) old->detach();  // outside the lock: a delivery in flight may call into the engine
  }
  const OffloadOptions& options() const { return options_; }
  std::shared_ptr<Observer> observer() const { return observer_; }  // see SpanGuard
  Backend& backend() { return *backend_; }
  OffloadStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    OffloadStats s = stats_;
    s.packed = next_id_.load(std::memory_order_relaxed);
    s.kept = kept_.load(std::memory_order_relaxed);
    s.pageable_fallbacks = pool_->pageable_fallbacks();
    return s;
  }
  ResidentState resident();
  DiskTierInfo disk_info() const { return disk_ ? disk_->tier().info() : disk_off_; }
  void synchronize();
  void release_cached_memory() {
    synchronize();
    pool_->trim();
  }
  void end_of_backward(int task);
  int64_t reclaim_device_memory() noexcept override;
  int device() const noexcept override { return backend_->device_index(); }

 private:
  friend class Slot;
  // The engine's lock; marks the thread as its holder, so that an allocation it makes may reclaim
  // without taking the lock again.
  class Lock {
   public:
    explicit Lock(Context& c) : c_(c) { lock(); }
    ~Lock() {
      if (locked_) unlock();
    }
    void lock() {
      c_.mutex_.lock();
      previous_ = t_holding;
      t_holding = &c_;
      locked_ = true;
    }
    void unlock() {
      t_holding = previous_;
      locked_ = false;
      c_.mutex_.unlock();
    }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    Context& c_;
    const Context* previous_ = nullptr;
    bool locked_ = false;
  };

  // An entry leaving the forward window that forward must wait for (outside the lock).
  struct WindowWait {
    TensorId id;
    FencePtr fence;
    c10::Storage hold;  // kept until the wait is over
  };
  using WindowWaits = c10::SmallVector<WindowWait, 2>;

  KeepReason classify(const at::Tensor& t) const;
  bool is_registered(const at::Tensor& t) const;
  // The hooks' hot path is a tensor kept as it is, with no observer: pack, unpack and release run
  // it inline and hand everything else (offloading, kept tensors that need more than a reference,
  // the observer's events) to functions of their own, so that its instructions stay on a few cache
  // lines between autograd's. kObserved: an observer is set (its events are built and sent).
  template <bool kObserved>
  void pack_impl(Slot& slot, const at::Tensor& t);
  void pack_observed(Slot& slot, const at::Tensor& t);
  void keep_special(Slot& slot, const at::Tensor& t, KeepReason reason);
  void pack_offload(Slot& slot, const at::Tensor& t, int64_t lo, int64_t hi, PackEvent& ev);
  template <bool kObserved>
  at::Tensor unpack_impl(Slot& slot);
  at::Tensor unpack_observed(Slot& slot);
  at::Tensor unpack_rebuilt(Slot& slot);
  at::Tensor unpack_offloaded(Slot& slot);
  // verify: where an entry's bytes went (under the lock), and the check of what unpack hands back.
  std::string where_copy_went(const Entry& e) const;
  void verify_unpacked(const Slot& slot, const c10::Storage& bytes, int64_t offset,
                       const Checksum& expected, const std::string& went);
  void release_entry(Slot& slot) noexcept;
  Entry* find_duplicate(const at::Tensor& t, int64_t lo, int64_t hi);
  int64_t hold_storage(const c10::Storage& s);  // returns the bytes newly held
  void unhold_storage(const c10::Storage& s);
  // Releases what the window must let go before an offload with id `incoming_id` is held.
  void make_room(const c10::Storage& incoming, TensorId incoming_id, WindowWaits& waits);
  bool trl() const { return options_.semantics == Semantics::Trl; }
  // Semantics trl with streams: the reference's storage de-duplication. Its key for a tensor is
  // the storage's address plus the storage offset counted in elements (as the reference adds
  // them) and the dtype; the key of an offloaded tensor is held while it is in the window, and a
  // save with a held key is kept on the device and takes the key over, for the rest of that
  // forward. trl_keeps() tells (and takes the key over); trl_hold_key() records an offload's.
  static uint64_t trl_key_of(const at::Tensor& t);
  bool trl_keeps(const Slot& slot, const at::Tensor& t);
  void trl_hold_key(Entry& e, const at::Tensor& t);
  void trl_forward(uint64_t generation);  // under the lock: a new forward clears the keys
  // Under the lock: `id` gives its key up (if it still holds it), as the reference does whenever
  // a save leaves the window or is unpacked; a save that left by any other way (destroyed with its
  // graph, synchronize(), backward's start) gives it up too, or a later tensor at the recycled
  // address would be kept as its duplicate.
  void trl_release_key(uint64_t key, int64_t id);
  // A kept duplicate's key (SharedInWindow), from what the slot keeps.
  static uint64_t trl_key_of_kept(const Slot& slot);
  void trl_release_kept_key(Slot& slot) noexcept;
  void drop_hold(Entry& e);
  void issue_reload(Entry& e, bool prefetch);
  bool try_prefetch(Entry& e);
  void prefetch_before(const Entry& e);
  void release_device(Entry& e);
  void destroy_entry(Entry& e);
  void free_host_when_done(Entry& e) override;
  void collect_pending();
  void report_completions();
  // issued_ns: taken before the copy was enqueued (the worker may start it at once).
  void watch_completion(const Entry& e, CopyDirection dir, bool prefetch, const FencePtr& fence,
                        int64_t issued_ns);
  void emit(Emission what) {
    if (attached_) t_pending.push_back({attached_, std::move(what)});
  }
  void emit_stash();
  Entry* new_entry();

  // Disk tier: the pump (disk_pump.hpp) does the work, under the lock; these are what it needs.
  void open_disk_tier();
  bool host_ready(const Entry& e) const { return e.host && !(e.io && !e.io->write); }
  bool observed() const override { return observer_ != nullptr; }
  void emit_disk_copy(bool completed, const CopyEvent& event) override {
    emit(std::make_pair(completed, event));
  }
  HostBlock allocate_staging(int64_t bytes, bool& pinned) override {
    return pool_->allocate(bytes, options_.use_pin_memory, pinned);
  }
  void add_host_bytes(int64_t delta) override { host_bytes_ += delta; }
  int64_t host_bytes_in_use() const override { return host_bytes_; }
  OffloadStats& disk_stats() override { return stats_; }
  // Outside the lock: forward waits while the host copies alive pass the budget; backward waits
  // until the entry's host copy is readable (reading it from disk if need be).
  void wait_for_spills(uint64_t generation);
  void await_host_copy(Slot& slot);

  const OffloadOptions options_;
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<HostPool> pool_;
  std::shared_ptr<Observer> observer_;
  std::shared_ptr<Attached> attached_;  // observer_'s, for the events collected for it
  std::atomic<uint64_t> next_generation_{0};

  mutable std::mutex mutex_;
  // The kept path (most saved tensors) takes no lock: ids and its counters are atomics, and the
  // registry of never-offload storages is looked up under the lock only when it is not empty.
  std::atomic<int64_t> next_id_{0};  // one per pack: also the count of packed tensors
  std::atomic<int64_t> live_slots_{0};
  std::atomic<int64_t> kept_{0};
  std::atomic<bool> has_registered_{false};
  std::atomic<bool> warned_other_device_{false};
  Entry* live_head_ = nullptr;
  std::vector<std::unique_ptr<Entry>> spare_;  // recycled entries
  // The maps below gain and lose a key per offloaded tensor. The unique-key ones are open-addressed
  // (c10's flat_hash_map: no node, and a multiply instead of a division per lookup); the
  // multimap's nodes come from a pool (used under the lock only), not from the heap.
  std::pmr::unsynchronized_pool_resource nodes_;
  ska::flat_hash_map<uint64_t, Entry*> chain_tail_;
  std::pmr::unordered_multimap<c10::StorageImpl*, Entry*> by_storage_{&nodes_};
  // In pack order. A vector, not a deque: make_room takes completed copies out from anywhere, and a
  // deque that loses its last element at a node boundary frees the node for the next push to
  // allocate again, once per tensor at worst. The window is small; erasing moves a few pointers.
  std::vector<Entry*> fwd_stash_;
  ska::flat_hash_map<c10::StorageImpl*, int> held_;  // held storages, with counts
  const bool trl_keys_on_ = options_.semantics == Semantics::Trl && options_.use_streams;
  ska::flat_hash_map<uint64_t, int64_t> trl_keys_;  // key -> id of the save holding it
  uint64_t trl_keys_generation_ = 0;                // the forward they belong to
  int64_t fwd_bytes_ = 0;
  int64_t bwd_count_ = 0;
  int64_t bwd_bytes_ = 0;
  int64_t prefetched_bytes_ = 0;  // prefetched buffers not consumed yet
  int64_t host_bytes_ = 0;
  struct PendingFree {
    c10::SmallVector<FencePtr, 2> fences;
    IoJobPtr io;      // a disk transfer that still uses the block
    DiskExtent disk;  // and its extent
    HostBlock host;
  };
  std::vector<PendingFree> pending_;
  struct Unreported {
    FencePtr fence;
    CopyEvent event;
  };
  std::deque<Unreported> unreported_;  // copies whose completion observers have not heard of
  std::unordered_map<c10::StorageImpl*, c10::weak_intrusive_ptr<c10::StorageImpl>> registered_;
  struct WeightRef {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    std::weak_ptr<WeightSource> source;
    int64_t key = 0;
  };
  std::unordered_map<c10::StorageImpl*, WeightRef> weights_;  // layer offloading's device copies
  std::atomic<bool> has_weights_{false};
  std::unordered_set<const void*> excluded_;
  OffloadStats stats_;  // packed and kept live in the atomics above
  // Disk tier (null with tier host, or with tier auto on a disk found too slow).
  std::unique_ptr<DiskPump> disk_;
  DiskTierInfo disk_off_;  // what disk_info() says without disk_
};

namespace {

// Element range [lo, hi) that a strided tensor touches in its storage (strides are >= 0 in torch).
std::pair<int64_t, int64_t> element_span(const at::Tensor& t) {
  int64_t hi = t.storage_offset() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) hi += (t.size(d) - 1) * t.stride(d);
  return {t.storage_offset(), hi};
}

// A tensor on `storage` with the given geometry, built directly (no dispatcher call): what unpack
// hands autograd.
at::Tensor make_view(const c10::Storage& storage, int64_t offset, c10::IntArrayRef sizes,
                     c10::IntArrayRef strides, at::ScalarType dtype, c10::Device device) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(storage),
      c10::DispatchKeySet(c10::computeDispatchKey(dtype, at::kStrided, device)),
      c10::scalarTypeToTypeMeta(dtype));
  impl->set_sizes_and_strides(sizes, strides, offset);
  return at::Tensor(std::move(impl));
}

// Whether `t` is an ordinary dense tensor that make_view rebuilds exactly (no subclass, wrapper,
// lazy conjugation or negation, zero tensor): then a kept tensor need not be detached.
bool plain_tensor(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (typeid(*impl) != typeid(c10::TensorImpl) || t.layout() != at::kStrided ||
      !(t.device().is_cpu() || t.device().is_cuda())) {
    return false;
  }
  // The keys a TensorImpl made by make_view gets (its constructor adds autograd and autocast keys).
  c10::DispatchKeySet canonical(c10::computeDispatchKey(t.scalar_type(), at::kStrided, t.device()));
  const c10::BackendComponent backend = canonical.highestBackendKey();
  canonical = canonical | c10::getAutogradRelatedKeySetFromBackend(backend) |
              c10::getAutocastRelatedKeySetFromBackend(backend);
  return impl->key_set() == canonical;
}

// A tensor's version, read from its version counter: TensorBase::_version() goes through
// autograd's VariableHooks, two calls into libtorch for a load on the hooks' hot path.
inline uint32_t version_of(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->version_counter().current_version();
}

// "CPUFloatType [16, 32]", as autograd describes a tensor in its version-check error.
std::string describe(at::ScalarType dtype, c10::Device device, c10::IntArrayRef sizes) {
  std::ostringstream s;
  s << (device.is_cuda() ? "CUDA" : "CPU") << c10::toString(dtype) << "Type " << sizes;
  return s.str();
}

// Autograd's own error (torch/csrc/autograd/saved_variable.cpp), which it cannot raise itself for
// a tensor saved through hooks.
[[noreturn]] void throw_modified_in_place(const std::string& what, uint32_t now, uint32_t saved) {
  TORCH_CHECK(false,
              "one of the variables needed for gradient computation has been modified by an "
              "inplace operation: [",
              what, "] is at version ", now, "; expected version ", saved,
              " instead. Hint: enable anomaly detection to find the operation that failed to "
              "compute its gradient, with torch.autograd.set_detect_anomaly(True). (offtune: the "
              "tensor was saved under an offload scope.)");
}

}  // namespace

// What rebuilding a saved tensor at unpack needs when the slot does not keep the tensor itself: an
// offloaded tensor, a kept output saved by its own node (kept as its storage), a frozen weight's
// reference. Constructed in the slot only then, after the slot's other members, so that the hooks
// of a tensor kept as it is (most saved tensors) touch the slot's first cache line alone.
struct Rebuild {
  // The geometry of `t` and its version counter, for autograd's in-place check.
  explicit Rebuild(const at::Tensor& t)
      : version(t.unsafeGetTensorImpl()->version_counter()),
        sizes(t.sizes().begin(), t.sizes().end()),
        strides(t.strides().begin(), t.strides().end()),
        dtype(t.scalar_type()),
        device(t.device()) {}

  c10::Storage storage;  // kept as its storage (the caller's offset below)
  int64_t offset = 0;    // kept or weight: in elements
  // A frozen weight's device copy (layer offloading): its storage had again from the source at
  // unpack, at `offset`.
  std::shared_ptr<WeightSource> weight_source;
  int64_t weight_key = 0;
  int64_t offset_in_span = 0;  // offloaded: bytes from the span start to the first element
  c10::VariableVersion version;
  c10::SmallVector<int64_t, 5> sizes, strides;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

// One saved tensor's share in the engine; see SavedTensorSlot (seam.hpp).
class Slot final : public SavedTensorSlot {
 public:
  Slot(std::shared_ptr<Context> ctx, uint64_t generation)
      : ctx_(std::move(ctx)), generation_(generation) {}
  OFFTUNE_HOT ~Slot() override {
    ctx_->release(*this);
    if (rebuild_) rebuild_->~Rebuild();
  }
  Slot(const Slot&) = delete;  // rebuild_ points into this slot
  Slot& operator=(const Slot&) = delete;
  // Autograd makes and destroys a slot for every saved tensor: from the thread's block cache.
  static void* operator new(size_t) { return BlockCache<sizeof(Slot)>::take(); }
  static void operator delete(void* p) noexcept { BlockCache<sizeof(Slot)>::give(p); }

 protected:
  OFFTUNE_HOT void pack(const at::Tensor& tensor) override { ctx_->pack(*this, tensor); }
  // The tensor, after (host-sim, when checking stream order) the emulator's check that it is ready
  // on the stream it is handed to.
  OFFTUNE_HOT at::Tensor unpack() override {
    at::Tensor t = ctx_->unpack(*this);
    sim::check_handout(t);
    return t;
  }

 private:
  friend class Context;
  std::shared_ptr<Context> ctx_;
  uint64_t generation_ = 0;
  TensorId id_;
  Entry* entry_ = nullptr;  // offloaded: its share of an entry
  at::Tensor kept_;         // kept as it is
  uint32_t saved_version_ = 0;
  bool packed_ = false;
  bool trl_key_held_ = false;  // kept as a duplicate in TRL's window: holds its storage key
  // Neither: in rebuild_storage_ (see Rebuild). Not a std::optional: its engaged flag would sit
  // after the payload, on another cache line than the members above.
  Rebuild* rebuild_ = nullptr;
  alignas(Rebuild) unsigned char rebuild_storage_[sizeof(Rebuild)];

  Rebuild& make_rebuild(const at::Tensor& t) {
    rebuild_ = new (rebuild_storage_) Rebuild(t);
    return *rebuild_;
  }
};

OFFTUNE_HOT std::unique_ptr<SavedTensorSlot> make_slot(Context& ctx, uint64_t generation) {
  return std::make_unique<Slot>(ctx.shared_from_this(), generation);
}
std::weak_ptr<Context> weak_of(Context& ctx) { return ctx.weak_from_this(); }
uint64_t new_generation(Context& ctx) { return ctx.new_generation(); }
void end_of_backward(Context& ctx, int task) { ctx.end_of_backward(task); }

namespace {
thread_local bool t_packing_boundary = false;  // pack_boundary() is packing a checkpoint boundary
}  // namespace

void pack_boundary(SavedTensorSlot& slot, const at::Tensor& tensor) {
  t_packing_boundary = true;
  try {
    slot.call_pack_hook(tensor);
  } catch (...) {
    t_packing_boundary = false;
    throw;
  }
  t_packing_boundary = false;
}

std::shared_ptr<Observer> observer_of(Context& ctx) { return ctx.observer(); }
Backend& backend_of(Context& ctx) { return ctx.backend(); }
void never_offload_storage(Context& ctx, const c10::Storage& storage) {
  ctx.never_offload_storage(storage);
}
void register_weight_storage(Context& ctx, const c10::Storage& storage,
                             std::weak_ptr<WeightSource> source, int64_t key) {
  ctx.register_weight_storage(storage, std::move(source), key);
}

OFFTUNE_HOT KeepReason Context::classify(const at::Tensor& t) const {
  if (options_.offload == OffloadSet::Boundaries && !t_packing_boundary) {
    return KeepReason::NotBoundary;
  }
  // Only a plain dense tensor is offloaded: unpack rebuilds it with make_view. Sparse tensors have
  // no storage to read; wrapper subclasses (DTensor, torchao's NF4 and float8, anything made by
  // _make_wrapper_subclass) carry a storage that is not their data (copying it read address 0), and
  // lazy conjugation or negation would be lost: all are kept as autograd keeps them.
  if (!t.defined() || !t.has_storage() || t.layout() != at::kStrided || t.is_quantized() ||
      t.is_nested() || t.numel() == 0 || !plain_tensor(t)) {
    return KeepReason::Unsupported;
  }
  if (!backend_->is_device_tensor(t)) return KeepReason::NotOnDevice;
  if (!backend_->on_this_device(t)) return KeepReason::OtherDevice;
  // Parameters, and views of them (linear saves weight.t(), a view, not the parameter itself: the
  // reference's isinstance(Parameter) check misses it and offloads the weights).
  if (t.is_leaf() && t.requires_grad()) return KeepReason::Parameter;
  if (t.is_view() && options_.semantics == Semantics::Offtune) {
    const at::TensorBase& base = t._base();
    if (base.is_leaf() && base.requires_grad()) return KeepReason::Parameter;
  }
  if (has_registered_.load(std::memory_order_acquire) && is_registered(t)) [[unlikely]] {
    return KeepReason::RegisteredStorage;
  }
  return KeepReason::None;
}

bool Context::is_registered(const at::Tensor& t) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = registered_.find(t.storage().unsafeGetStorageImpl());
  return it != registered_.end() && it->second.use_count() > 0;
}

Entry* Context::find_duplicate(const at::Tensor& t, int64_t lo, int64_t hi) {
  c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
  const auto version = t._version();
  const int64_t itemsize = static_cast<int64_t>(t.element_size());
  auto [first, last] = by_storage_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    Entry* e = it->second;
    // Live storage only: a weak reference pins the StorageImpl's address, so a freed storage cannot
    // alias a new one. Same version: an in-place write since then makes the old copy stale.
    if (e->source.use_count() == 0 || e->version != version) continue;
    if (e->span_lo <= lo && hi <= e->span_lo + e->bytes && (lo - e->span_lo) % itemsize == 0) {
      return e;
    }
  }
  return nullptr;
}

Entry* Context::new_entry() {
  std::unique_ptr<Entry> owned;
  if (!spare_.empty()) {
    owned = std::move(spare_.back());
    spare_.pop_back();
  } else {
    owned = std::make_unique<Entry>();
  }
  Entry* e = owned.release();
  e->live_next = live_head_;
  if (live_head_) live_head_->live_prev = e;
  live_head_ = e;
  return e;
}

int64_t Context::hold_storage(const c10::Storage& s) {
  int& n = held_[s.unsafeGetStorageImpl()];
  if (n++ > 0) return 0;
  const auto bytes = static_cast<int64_t>(s.nbytes());
  fwd_bytes_ += bytes;
  return bytes;
}

void Context::unhold_storage(const c10::Storage& s) {
  auto it = held_.find(s.unsafeGetStorageImpl());
  if (it == held_.end()) return;
  if (--it->second == 0) {
    fwd_bytes_ -= static_cast<int64_t>(s.nbytes());
    held_.erase(it);
  }
}

OFFTUNE_HOT void Context::pack(Slot& slot, const at::Tensor& t) {
  if (observer_) [[unlikely]] {
    pack_observed(slot, t);
    return;
  }
  pack_impl<false>(slot, t);
}

void Context::pack_observed(Slot& slot, const at::Tensor& t) {
  SpanGuard hook_span(observer_.get(), {SpanKind::Pack});
  EventSink sink;
  pack_impl<true>(slot, t);
}

template <bool kObserved>
OFFTUNE_HOT void Context::pack_impl(Slot& slot, const at::Tensor& t) {
  slot.packed_ = true;
  slot.id_ = TensorId(next_id_.fetch_add(1, std::memory_order_relaxed));
  slot.saved_version_ = t.defined() ? version_of(t) : 0;
  live_slots_.fetch_add(1, std::memory_order_relaxed);

  // The reference's de-duplication comes before its other rules.
  KeepReason reason = trl_keys_on_ && trl_keeps(slot, t) ? KeepReason::SharedInWindow : classify(t);
  slot.trl_key_held_ = reason == KeepReason::SharedInWindow;
  PackEvent ev;
  ev.id = slot.id_;
  if constexpr (kObserved) ev.time_ns = now_ns();
  int64_t lo = 0, hi = 0;
  if constexpr (!kObserved) {
    // offtune weighs a tensor by the span its copy would move, which its storage bounds: a storage
    // below the threshold needs no span (the reference's weight, numel x item size, may exceed it).
    // Only for a tensor the rules would offload: a kept one may have no storage (sparse) at all.
    if (!trl() && reason == KeepReason::None) {
      reason = offload_decision(reason, static_cast<int64_t>(t.storage().nbytes()),
                                options_.min_offload_size);
    }
  }
  if (reason == KeepReason::None) {
    const auto [elo, ehi] = element_span(t);
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    lo = elo * itemsize;
    hi = ehi * itemsize;
    const int64_t weight = offload_weight(options_.semantics, hi - lo, t.numel(), itemsize);
    reason = offload_decision(reason, weight, options_.min_offload_size);
    if constexpr (kObserved) {
      ev.storage = reinterpret_cast<uint64_t>(t.storage().data());
      ev.storage_bytes = static_cast<int64_t>(t.storage().nbytes());
      ev.span_lo = lo;
      ev.weight = weight;
      ev.item_bytes = itemsize;
      ev.version = slot.saved_version_;
      ev.generation = slot.generation_;
    }
  }
  if (reason == KeepReason::None) {
    pack_offload(slot, t, lo, hi, ev);
    return;
  }
  // Kept: the slot alone, no lock; the tensor itself, unless keep_special says otherwise.
  if (reason == KeepReason::RegisteredStorage || reason == KeepReason::OtherDevice ||
      (t.defined() && may_be_saved_by_its_own_node(t))) [[unlikely]] {
    keep_special(slot, t, reason);
  } else {
    slot.kept_ = t;
  }
  kept_.fetch_add(1, std::memory_order_relaxed);
  if constexpr (kObserved) {
    ev.bytes = t.defined() && t.has_storage() ? static_cast<int64_t>(t.nbytes()) : 0;
    ev.decision = PackDecision::Kept;
    ev.reason = reason;
    emit(ev);
  }
}

namespace {
// torchrun starts one process per GPU and says so in the environment: there, an offloader that took
// the current device when it was made (device_index -1), before torch.cuda.set_device(local_rank)
// or with the model on cuda:{rank} without it, would keep every tensor of every rank but 0.
bool under_torchrun() {
  static const bool yes =
      std::getenv("LOCAL_RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr;
  return yes;
}
}  // namespace

// A kept tensor that is not kept as it is, or that needs a word. The tensor itself, as autograd
// keeps a saved input, unless it may be an output saved by its own node: keeping it would close a
// reference cycle (node -> slot -> tensor -> node) and leak the graph. Such a tensor is kept as its
// storage and geometry (rebuilt at unpack) when it is an ordinary one, else detached. A frozen
// weight's device copy (layer offloading) is kept as a reference: backward gets it back from its
// source, so that the graph does not hold every block's weights from forward to backward.
void Context::keep_special(Slot& slot, const at::Tensor& t, KeepReason reason) {
  if (reason == KeepReason::OtherDevice && options_.device_index < 0 && under_torchrun()) {
    throw EngineError("offtune: a tensor on " + t.device().str() +
                      " was saved under an offloader for " + backend_->device_name() +
                      ", the device that was current when it was made (device_index not given); "
                      "under torchrun this rank would offload nothing. Make the offloader after "
                      "torch.cuda.set_device(local_rank), or give it device_index=local_rank");
  }
  std::shared_ptr<WeightSource> source;
  int64_t weight_key = 0;
  if (reason == KeepReason::RegisteredStorage && plain_tensor(t)) {
    source = weight_source_of(t, weight_key);
  }
  if (source) {
    slot.make_rebuild(t);
    slot.rebuild_->weight_source = std::move(source);
    slot.rebuild_->weight_key = weight_key;
    slot.rebuild_->offset = t.storage_offset();
  } else if (!t.defined() || !may_be_saved_by_its_own_node(t)) {
    slot.kept_ = t;
  } else if (plain_tensor(t)) {
    slot.make_rebuild(t);
    slot.rebuild_->storage = t.storage();
    slot.rebuild_->offset = t.storage_offset();
  } else {
    slot.kept_ = t.detach();  // shares the version counter
  }
  if (reason == KeepReason::OtherDevice && !warned_other_device_.exchange(true)) {
    TORCH_WARN("offtune: a tensor on ", t.device(), " was saved under an offloader for ",
               backend_->device_name(),
               "; it stays on its device (create one offloader per device)");
  }
}

namespace {
// A copy to or from host memory cannot be part of a CUDA graph (a captured copy would replay into
// memory the engine has since given back), and the copy stream must never be pulled into a
// capture: refused before anything is issued or allocated.
[[noreturn]] void refuse_capture(const char* what) {
  throw EngineError(
      std::string("offtune: a saved tensor was ") + what +
      " while a CUDA graph is being captured (torch.cuda.graph, or torch.compile with "
      "mode=\"reduce-overhead\"): offloading copies cannot be captured. Keep the captured region "
      "out of offloading (offtune.no_offload() around it, or no offload scope), or offload outside "
      "the graph");
}
}  // namespace

void Context::pack_offload(Slot& slot, const at::Tensor& t, int64_t lo, int64_t hi, PackEvent& ev) {
  if (backend_->capturing()) [[unlikely]]
    refuse_capture("to be offloaded");
  WindowWaits waits;
  Stream stream = Stream(Stream::DEFAULT, c10::Device(c10::DeviceType::CPU));
  // Outside the lock: on cuda it runs torch ops, whose allocations may reclaim (taking the lock).
  Checksum verify_sum;
  if (options_.verify) verify_sum = checksum_of(t.storage(), lo, hi - lo);
  {
    Lock lock(*this);
    report_completions();
    collect_pending();
    if (disk_) {
      disk_->pump();
      disk_->throw_error(slot.generation_);
    }
    stream = backend_->current_stream();
    slot.make_rebuild(t);
    ev.bytes = hi - lo;

    if (Entry* dup = trl() ? nullptr : find_duplicate(t, lo, hi)) {
      slot.entry_ = dup;
      slot.rebuild_->offset_in_span =
          t.storage_offset() * static_cast<int64_t>(t.element_size()) - dup->span_lo;
      ++dup->slots;
      ++stats_.deduplicated;
      if (observer_) {
        ev.decision = PackDecision::Deduplicated;
        emit(ev);
      }
      return;
    }

    const int64_t bytes = hi - lo;
    if (options_.use_streams) make_room(t.storage(), slot.id_, waits);
    Entry& e = *new_entry();
    e.id = slot.id_;
    e.generation = slot.generation_;
    e.bytes = bytes;
    e.span_lo = lo;
    e.source_key = t.storage().unsafeGetStorageImpl();
    e.source = t.storage().getWeakStorageImpl();
    e.version = t._version();
    e.slots = 1;
    e.pack_stream = stream;
    e.verify_sum = std::move(verify_sum);
    // Link before anything below may throw: destroy_entry unlinks whatever was linked.
    if (auto [it, inserted] = chain_tail_.emplace(e.generation, &e); !inserted) {
      e.chain_prev = it->second;
      it->second->chain_next = &e;
      it->second = &e;
    }
    slot.entry_ = &e;
    slot.rebuild_->offset_in_span =
        t.storage_offset() * static_cast<int64_t>(t.element_size()) - lo;
    by_storage_.emplace(e.source_key, &e);
    if (trl_keys_on_) trl_hold_key(e, t);
    e.host = pool_->allocate(bytes, options_.use_pin_memory, e.pinned);
    host_bytes_ += bytes;
    const c10::Storage& storage = t.storage();
    const int64_t issued = observer_ ? now_ns() : 0;
    e.offload_fence = backend_->copy({CopyDirection::DeviceToHost, &storage, lo, e.host.data(),
                                      bytes, options_.use_streams, e.pinned, observer_ != nullptr});
    if (options_.use_streams) {
      e.hold = storage;
      hold_storage(e.hold);
      e.in_fwd_stash = true;
      fwd_stash_.push_back(&e);
    }
    ++stats_.offloaded;
    stats_.offloaded_bytes += bytes;
    note_offloaded_bytes(bytes);  // what "real pressure" means on cuda (pressure.hpp)
    if (observer_) {
      ev.decision = PackDecision::Offloaded;
      emit(ev);
      watch_completion(e, CopyDirection::DeviceToHost, false, e.offload_fence, issued);
      emit_stash();
    }
    if (disk_) {
      disk_->list_spill(e);
      disk_->pump();
    }
  }
  // Outside the lock: forward's wait for the window (host-sim blocks here; on cuda the stream wait
  // was enqueued above), then the held storages may go.
  for (WindowWait& w : waits) {
    const int64_t begin = now_ns();
    {
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::ForwardWindow});
      backend_->host_block_for(stream, w.fence);
    }
    if (observer_) emit(WaitEvent{WaitKind::ForwardWindow, w.id, begin, now_ns()});
    w.hold = c10::Storage();
  }
  if (disk_) wait_for_spills(slot.generation_);
}

void Context::watch_completion(const Entry& e, CopyDirection dir, bool prefetch,
                               const FencePtr& fence, int64_t issued) {
  CopyEvent ce{e.id, dir, e.bytes, e.pinned, options_.use_streams, prefetch, issued, issued};
  emit(std::make_pair(false, ce));
  unreported_.push_back({fence, ce});
}

// Copies complete in issue order on the copy stream: report those done, oldest first, with the
// time they completed (not the time the engine noticed).
void Context::report_completions() {
  while (!unreported_.empty() && unreported_.front().fence->query()) {
    Unreported& u = unreported_.front();
    const int64_t done = u.fence->completed_ns();
    u.event.time_ns = done > 0 ? done : now_ns();
    emit(std::make_pair(true, u.event));
    unreported_.pop_front();
  }
}

void Context::make_room(const c10::Storage& incoming, TensorId incoming_id, WindowWaits& waits) {
  // Copies known complete need no hold: release them first, whatever their position. (The
  // reference keeps them until the window moves past them.)
  for (auto it = fwd_stash_.begin(); !trl() && it != fwd_stash_.end();) {
    Entry* e = *it;
    if (e->offload_fence->query()) {
      it = fwd_stash_.erase(it);
      drop_hold(*e);
    } else {
      ++it;
    }
  }
  const int64_t incoming_bytes =
      held_.count(incoming.unsafeGetStorageImpl()) ? 0 : static_cast<int64_t>(incoming.nbytes());
  const auto count_limit = static_cast<size_t>(options_.max_fwd_stash_size);
  const Stream stream = backend_->current_stream();
  // offtune: at most max_fwd_stash_size copies in flight (and the byte bound). The reference: the
  // held activations whose ids are max_fwd_stash_size or more behind the incoming one, kept
  // tensors' ids counted.
  const auto must_go = [&](const Entry& oldest) {
    if (trl()) return oldest.id.value <= incoming_id.value - options_.max_fwd_stash_size;
    return fwd_stash_.size() >= count_limit ||
           (options_.max_fwd_stash_bytes > 0 &&
            fwd_bytes_ + incoming_bytes > options_.max_fwd_stash_bytes);
  };
  while (!fwd_stash_.empty() && must_go(*fwd_stash_.front())) {
    Entry& e = *fwd_stash_.front();
    fwd_stash_.erase(fwd_stash_.begin());
    e.in_fwd_stash = false;
    trl_release_key(e.trl_key, e.id.value);  // unless a kept duplicate took the key over
    // Forward's stream waits for the oldest copy (the window's throttle), and the block, whoever
    // owns it, is not reused before the copy read it. When that stream is the one the tensor was
    // saved on, the wait is enough: a block it owns is reused by its later work only, which the
    // wait orders after the copy, and a block another stream owns was recorded on this one by
    // whoever handed it over, so its free waits for this stream too. record_stream on the copy
    // stream would instead hold the block out of reuse until every copy issued before its free
    // ran (CUDA records the event at the free), which is reserved memory TRL's reference, which
    // only waits, does not pay. Saved on another stream: the copy stream is recorded, as before.
    backend_->stream_wait(stream, e.offload_fence);
    if (e.pack_stream != stream) {
      backend_->record_stream(e.hold, backend_->copy_stream());
      ++stats_.record_streams;
    }
    ++stats_.window_waits;
    unhold_storage(e.hold);
    waits.push_back({e.id, e.offload_fence, std::move(e.hold)});
    e.hold = c10::Storage();
    if (observer_) emit_stash();
  }
}

uint64_t Context::trl_key_of(const at::Tensor& t) {
  // The reference's key: untyped_storage().data_ptr() + storage_offset() (bytes plus elements),
  // and the dtype. No key (0) without an address, where the reference falls back to id(tensor),
  // which matches nothing.
  if (!t.defined() || !t.has_storage()) return 0;
  const auto address = reinterpret_cast<uint64_t>(
      t.storage().unsafeGetStorageImpl()->_mutable_data_ptr_no_checks().get());
  if (address == 0) return 0;
  // Addresses take 48 bits: the dtype goes in the low byte, exactly.
  const auto key = address + static_cast<uint64_t>(t.storage_offset());
  return (key << 8) | static_cast<uint8_t>(t.scalar_type());
}

void Context::trl_forward(uint64_t generation) {
  if (generation != trl_keys_generation_) {
    trl_keys_.clear();
    trl_keys_generation_ = generation;
  }
}

bool Context::trl_keeps(const Slot& slot, const at::Tensor& t) {
  const uint64_t key = trl_key_of(t);
  if (key == 0) return false;
  Lock lock(*this);
  trl_forward(slot.generation_);
  auto it = trl_keys_.find(key);
  if (it == trl_keys_.end()) return false;
  it->second = slot.id_.value;
  return true;
}

void Context::trl_release_key(uint64_t key, int64_t id) {
  if (!trl_keys_on_ || key == 0) return;
  if (auto it = trl_keys_.find(key); it != trl_keys_.end() && it->second == id) trl_keys_.erase(it);
}

uint64_t Context::trl_key_of_kept(const Slot& slot) {
  if (slot.kept_.defined()) return trl_key_of(slot.kept_);
  if (slot.rebuild_ == nullptr || !slot.rebuild_->storage) return 0;
  // trl_key_of's key of the tensor the slot rebuilds: its storage's address plus its offset in
  // elements, and its dtype.
  const Rebuild& r = *slot.rebuild_;
  const auto address = reinterpret_cast<uint64_t>(
      r.storage.unsafeGetStorageImpl()->_mutable_data_ptr_no_checks().get());
  if (address == 0) return 0;
  return ((address + static_cast<uint64_t>(r.offset)) << 8) | static_cast<uint8_t>(r.dtype);
}

void Context::trl_release_kept_key(Slot& slot) noexcept {
  slot.trl_key_held_ = false;
  try {
    // Also from a slot destroyed on a thread inside this engine (its lock held): never lock twice.
    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    if (t_holding != this) lock.lock();
    if (slot.generation_ == trl_keys_generation_) {
      trl_release_key(trl_key_of_kept(slot), slot.id_.value);
    }
  } catch (const std::exception& ex) {
    TORCH_WARN("offtune: error while releasing a saved tensor's key: ", ex.what());
  }
}

void Context::trl_hold_key(Entry& e, const at::Tensor& t) {
  trl_forward(e.generation);
  e.trl_key = trl_key_of(t);
  if (e.trl_key != 0) trl_keys_[e.trl_key] = e.id.value;
}

// The entry must already be out of fwd_stash_.
void Context::drop_hold(Entry& e) {
  e.in_fwd_stash = false;
  trl_release_key(e.trl_key, e.id.value);
  if (!e.hold) return;
  if (!e.offload_fence->query()) {
    backend_->record_stream(e.hold, backend_->copy_stream());
    ++stats_.record_streams;
  }
  unhold_storage(e.hold);
  e.hold = c10::Storage();
  if (observer_) emit_stash();
}

void Context::issue_reload(Entry& e, bool prefetch) {
  // Allocated on the stream that will consume it, so that it returns to that stream's pool; the
  // copy stream waits for that stream first (the block may just have been freed there). Both steps
  // may throw (out of memory): commit to the entry only once the copy is issued.
  TORCH_CHECK(host_ready(e), "offtune: internal error: reload of a copy not in host memory");
  const Stream stream = backend_->current_stream();
  c10::Storage buffer = backend_->allocate_device(e.bytes, stream);
  const int64_t issued = observer_ ? now_ns() : 0;
  FencePtr fence = backend_->copy({CopyDirection::HostToDevice, &buffer, 0, e.host.data(), e.bytes,
                                   options_.use_streams, e.pinned, observer_ != nullptr});
  e.device = std::move(buffer);
  e.device_offset = 0;
  e.device_stream = stream;
  e.reload_fence = std::move(fence);
  e.ready_on.clear();
  e.consumers.clear();
  // Single-stream mode copies on the consuming stream itself.
  if (!options_.use_streams) e.ready_on.push_back(stream);
  e.device_reloaded = true;
  e.prefetched = prefetch;
  e.task = current_graph_task_id();
  ++bwd_count_;
  bwd_bytes_ += e.bytes;
  ++stats_.reloaded;
  stats_.reloaded_bytes += e.bytes;
  if (prefetch) {
    ++stats_.prefetched;
    prefetched_bytes_ += e.bytes;
  }
  if (observer_) {
    watch_completion(e, CopyDirection::HostToDevice, prefetch, e.reload_fence, issued);
    emit_stash();
  }
  if (e.on_disk) {
    // The host block was staging for this reload: it goes once the copy ran (a later backward of a
    // retained graph reads the file again).
    disk_->end_read_ahead(e);
    free_host_when_done(e);
  }
}

bool Context::try_prefetch(Entry& e) {
  const bool over_bound =
      options_.max_prefetch_bytes > 0 && prefetched_bytes_ + e.bytes > options_.max_prefetch_bytes;
  if (over_bound || backend_->headroom() < e.bytes) {
    ++stats_.prefetch_skipped;
    return false;
  }
  // Its own allocation must fail rather than take memory from other prefetches (or from compute).
  NoReclaimScope no_reclaim;
  try {
    issue_reload(e, /*prefetch=*/true);
  } catch (const c10::OutOfMemoryError&) {
    ++stats_.prefetch_skipped;
    return false;
  }
  return true;
}

void Context::prefetch_before(const Entry& e) {
  // Single-stream mode copies on the compute stream: prefetching there only moves the wait.
  if (options_.prefetch == 0 || !options_.use_streams || trl()) return;
  int64_t looked = 0;
  for (Entry* p = e.chain_prev; p != nullptr && looked < options_.prefetch; p = p->chain_prev) {
    ++looked;
    // A copy still on disk is left to the read-ahead: the device copy starts once it is in host.
    if (!p->device && !p->in_fwd_stash && host_ready(*p) && !try_prefetch(*p)) break;
  }
}

OFFTUNE_HOT at::Tensor Context::unpack(Slot& slot) {
  if (observer_) [[unlikely]]
    return unpack_observed(slot);
  return unpack_impl<false>(slot);
}

at::Tensor Context::unpack_observed(Slot& slot) {
  SpanGuard hook_span(observer_.get(), {SpanKind::Unpack});
  EventSink sink;
  return unpack_impl<true>(slot);
}

template <bool kObserved>
OFFTUNE_HOT at::Tensor Context::unpack_impl(Slot& slot) {
  note_unpack_in_backward(*this);
  if (slot.entry_) return unpack_offloaded(slot);
  if constexpr (kObserved) emit(UnpackEvent{slot.id_, UnpackSource::Kept, 0, now_ns()});
  if (slot.trl_key_held_) [[unlikely]]
    trl_release_kept_key(slot);
  if (slot.rebuild_) [[unlikely]]
    return unpack_rebuilt(slot);
  if (slot.kept_.defined()) {
    if (const uint32_t now = version_of(slot.kept_); now != slot.saved_version_) [[unlikely]] {
      throw_modified_in_place(
          describe(slot.kept_.scalar_type(), slot.kept_.device(), slot.kept_.sizes()), now,
          slot.saved_version_);
    }
  }
  return slot.kept_;
}

// Kept as its storage and geometry, or as a reference to a frozen weight (see keep_special).
at::Tensor Context::unpack_rebuilt(Slot& slot) {
  const Rebuild& r = *slot.rebuild_;
  if (const uint32_t now = r.version.current_version(); now != slot.saved_version_) {
    throw_modified_in_place(describe(r.dtype, r.device, r.sizes), now, slot.saved_version_);
  }
  at::Tensor out = make_view(r.weight_source ? r.weight_source->acquire(r.weight_key) : r.storage,
                             r.offset, r.sizes, r.strides, r.dtype, r.device);
  out.unsafeGetTensorImpl()->set_version_counter(r.version);  // as detach() would
  return out;
}

at::Tensor Context::unpack_offloaded(Slot& slot) {
  const Rebuild& r = *slot.rebuild_;
  if (const uint32_t now = r.version.current_version(); now != slot.saved_version_) {
    throw_modified_in_place(describe(r.dtype, r.device, r.sizes), now, slot.saved_version_);
  }
  if (backend_->capturing()) [[unlikely]]
    refuse_capture("to be brought back from host memory");
  const Stream stream = backend_->current_stream();
  FencePtr wait_for;
  at::Tensor out;
  // verify: the bytes handed back, checked once they are there; what pack saw; where they went.
  c10::Storage check;
  int64_t check_offset = 0;
  Checksum expected;
  std::string went;
  for (bool taken = false; !taken;) {
    if (disk_) await_host_copy(slot);
    Lock lock(*this);
    report_completions();
    collect_pending();
    Entry& e = *slot.entry_;
    // await_host_copy found a copy to go on from and let go of the lock: meanwhile a write of the
    // host copy that was running may have finished, and another thread's pump freed the host copy
    // for the one on disk. Then the copy is read back first (never a reload from freed memory).
    if (disk_ && !e.device && !e.in_fwd_stash && !host_ready(e)) continue;
    taken = true;
    trl_release_key(e.trl_key, e.id.value);
    UnpackSource source;
    if (e.device) {
      source = e.prefetched
                   ? UnpackSource::Prefetched
                   : (e.device_reloaded ? UnpackSource::Reloaded : UnpackSource::ForwardStash);
    } else if (e.in_fwd_stash) {
      // Backward began before this offload copy was known complete: use the device bytes as they
      // are.
      fwd_stash_.erase(std::find(fwd_stash_.begin(), fwd_stash_.end(), &e));
      e.in_fwd_stash = false;
      unhold_storage(e.hold);
      e.device = std::move(e.hold);
      e.hold = c10::Storage();
      e.device_offset = e.span_lo;
      e.device_stream = e.pack_stream;
      e.device_reloaded = false;
      e.ready_on.clear();
      e.consumers.clear();
      e.task = current_graph_task_id();
      ++bwd_count_;
      bwd_bytes_ += e.bytes;
      ++stats_.from_fwd_stash;
      source = UnpackSource::ForwardStash;
    } else {
      issue_reload(e, /*prefetch=*/false);
      source = UnpackSource::Reloaded;
    }
    if (e.prefetched) {
      e.prefetched = false;
      prefetched_bytes_ -= e.bytes;
    }
    // Every stream handed a reloaded buffer waits for the reload once; every caller blocks for it
    // as long as it may still run (a no-op on cuda; on host-sim two threads may share a stream,
    // and only one of them issued the wait).
    if (e.device_reloaded && !e.reload_fence->query()) {
      if (!contains(e.ready_on, stream)) {
        backend_->stream_wait(stream, e.reload_fence);
        e.ready_on.push_back(stream);
      }
      wait_for = e.reload_fence;
    } else if (e.device_reloaded && !contains(e.ready_on, stream)) {
      e.ready_on.push_back(stream);  // complete, and seen so: nothing to wait for
    }
    if (stream != e.device_stream && !contains(e.consumers, stream)) e.consumers.push_back(stream);
    prefetch_before(e);
    if (observer_) {
      emit(UnpackEvent{slot.id_, source, e.bytes, now_ns()});
      emit_stash();
    }
    const auto itemsize = static_cast<int64_t>(c10::elementSize(r.dtype));
    const int64_t first_byte = e.device_offset + r.offset_in_span;
    out = make_view(e.device, first_byte / itemsize, r.sizes, r.strides, r.dtype, r.device);
    if (options_.verify) {
      check = e.device;
      check_offset = e.device_offset;
      expected = e.verify_sum;
      went = where_copy_went(e);
      ++stats_.verified;
    }
  }
  if (wait_for) {
    const int64_t begin = now_ns();
    {
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Reload});
      backend_->host_block_for(stream, wait_for);
    }
    if (observer_) emit(WaitEvent{WaitKind::Reload, slot.id_, begin, now_ns()});
  }
  if (check) verify_unpacked(slot, check, check_offset, expected, went);
  return out;
}

std::string Context::where_copy_went(const Entry& e) const {
  if (!e.device_reloaded) {
    return "nowhere: it never left the device (backward came before its copy to host memory "
           "completed)";
  }
  std::string went = e.pinned ? "pinned host memory" : "pageable host memory";
  if (e.on_disk && disk_) {
    went += ", then the disk arena file in '" + disk_->tier().info().directory + "' (offset " +
            std::to_string(e.disk.offset()) + "), and back";
  }
  return went + ", and back to the device";
}

void Context::verify_unpacked(const Slot& slot, const c10::Storage& bytes, int64_t offset,
                              const Checksum& expected, const std::string& went) {
  const Entry& e = *slot.entry_;
  const uint64_t saw = value_of(expected);
  const uint64_t got = value_of(checksum_of(bytes, offset, e.bytes));
  if (saw == got) return;
  const Rebuild& r = *slot.rebuild_;
  char sums[96];
  std::snprintf(sums, sizeof sums, "checksum 0x%016llx at pack, 0x%016llx at unpack",
                static_cast<unsigned long long>(saw), static_cast<unsigned long long>(got));
  throw EngineError("offtune: verify: saved tensor #" + std::to_string(slot.id_.value) + " (" +
                    describe(r.dtype, r.device, r.sizes) + ", " + std::to_string(e.bytes) +
                    " bytes offloaded) came back different from what pack saw (" + sums +
                    "); its copy went to " + went +
                    ". Either offtune copied it wrong (please report this line), the memory or "
                    "disk holding it changed it, or its bytes were written behind autograd's back "
                    "(through .data or a raw pointer) before its copy ran");
}

void Context::release_device(Entry& e) {
  if (!e.device) return;
  // The block may be reused by its stream once we let go: not before the copy that fills (or
  // reads) it ran, nor before another stream we handed it to is done with it.
  const FencePtr& copy = e.device_reloaded ? e.reload_fence : e.offload_fence;
  const bool copy_ordered = e.device_reloaded
                                ? contains(e.ready_on, e.device_stream) || copy->query()
                                : copy == nullptr || copy->query();
  if (!copy_ordered) {
    backend_->record_stream(e.device, backend_->copy_stream());
    ++stats_.record_streams;
  }
  for (const Stream& s : e.consumers) {
    backend_->record_stream(e.device, s);
    ++stats_.record_streams;
  }
  if (e.prefetched) prefetched_bytes_ -= e.bytes;
  e.device = c10::Storage();
  e.device_reloaded = false;
  e.prefetched = false;
  e.ready_on.clear();
  e.consumers.clear();
  e.task = -1;
  --bwd_count_;
  bwd_bytes_ -= e.bytes;
  if (observer_) emit_stash();
}

void Context::free_host_when_done(Entry& e) {
  PendingFree p;
  if (e.offload_fence && !e.offload_fence->query()) p.fences.push_back(e.offload_fence);
  if (e.reload_fence && !e.reload_fence->query()) p.fences.push_back(e.reload_fence);
  if (e.io && !e.io->finished()) {
    // A disk transfer still reads or fills the block, at the extent's offset.
    p.io = e.io;
    p.disk = std::move(e.disk);
  }
  host_bytes_ -= e.bytes;
  if (p.fences.empty() && !p.io) {
    e.host.reset();
    return;
  }
  p.host = std::move(e.host);
  pending_.push_back(std::move(p));
}

void Context::collect_pending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = !it->io || it->io->finished();
    for (auto& f : it->fences) done = done && f->query();
    it = done ? pending_.erase(it) : std::next(it);
  }
}

void Context::destroy_entry(Entry& e) {
  if (e.in_fwd_stash) {
    fwd_stash_.erase(std::find(fwd_stash_.begin(), fwd_stash_.end(), &e));
    // The graph died: the copy may still read the hold, which drop_hold records.
    drop_hold(e);
  }
  release_device(e);
  if (disk_) disk_->release(e);
  if (e.host) free_host_when_done(e);
  e.disk.reset();
  if (e.source_key != nullptr) {
    auto [first, last] = by_storage_.equal_range(e.source_key);
    for (auto it = first; it != last; ++it) {
      if (it->second == &e) {
        by_storage_.erase(it);
        break;
      }
    }
  }
  // Unlink from its generation's chain and from the live list.
  if (e.chain_next) {
    e.chain_next->chain_prev = e.chain_prev;
  } else if (auto it = chain_tail_.find(e.generation);
             it != chain_tail_.end() && it->second == &e) {
    if (e.chain_prev) {
      it->second = e.chain_prev;
    } else {
      chain_tail_.erase(it);
    }
  }
  if (e.chain_prev) e.chain_prev->chain_next = e.chain_next;
  if (disk_ && e.chain_prev == nullptr && e.chain_next == nullptr) {
    // The last entry of its forward: a disk failure nobody was told of goes with it, said once.
    disk_->warn_unraised_error(e.generation);
  }
  if (e.live_prev) {
    e.live_prev->live_next = e.live_next;
  } else {
    live_head_ = e.live_next;
  }
  if (e.live_next) e.live_next->live_prev = e.live_prev;
  // Recycle: reset in place and keep a bounded number for the next steps.
  std::unique_ptr<Entry> owned(&e);
  *owned = Entry();
  if (spare_.size() < 4096) spare_.push_back(std::move(owned));
}

OFFTUNE_HOT void Context::release(Slot& slot) noexcept {
  if (!slot.packed_) return;
  live_slots_.fetch_sub(1, std::memory_order_relaxed);
  if (slot.trl_key_held_) [[unlikely]]
    trl_release_kept_key(slot);
  if (slot.entry_) [[unlikely]]
    release_entry(slot);  // kept: nothing of the engine's to give back
}

void Context::release_entry(Slot& slot) noexcept {
  try {
    EventSink sink;
    Lock lock(*this);
    if (observer_) emit(ReleaseEvent{slot.id_, now_ns()});
    if (--slot.entry_->slots == 0) destroy_entry(*slot.entry_);
    slot.entry_ = nullptr;
    collect_pending();
    report_completions();
  } catch (const std::exception& ex) {
    // Destructors run inside autograd's cleanup: never throw from here.
    TORCH_WARN("offtune: error while releasing a saved tensor: ", ex.what());
  }
}

void Context::end_of_backward(int task) {
  EventSink sink;
  Lock lock(*this);
  // Buffers this backward brought in and that are still on the device are unconsumed prefetches, or
  // belong to a retained graph (the next backward reloads them from the host copy), or to a
  // backward that failed: give their memory back. Buffers of a backward running concurrently on
  // another thread are left alone.
  for (Entry* e = live_head_; e != nullptr; e = e->live_next) {
    if (e->task == task) release_device(*e);
  }
  collect_pending();
  report_completions();
}

int64_t Context::reclaim_device_memory() noexcept {
  // Called by an allocator about to fail, possibly on a thread inside this engine (which then holds
  // the lock already) or inside another allocator's lock: never block on the engine's lock.
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (t_holding != this && !lock.try_lock()) return 0;
  int64_t freed = 0;
  try {
    for (Entry* e = live_head_; e != nullptr; e = e->live_next) {
      if (!e->prefetched || !e->device) continue;
      freed += e->bytes;
      release_device(*e);
      ++stats_.prefetch_dropped;
    }
  } catch (...) {
    // Nothing here allocates; keep the allocator's caller unaffected whatever happens.
  }
  return freed;
}

void Context::emit_stash() {
  emit(StashEvent{static_cast<int64_t>(fwd_stash_.size()), fwd_bytes_, bwd_count_, bwd_bytes_,
                  now_ns(), host_bytes_, pool_->reserved_bytes()});
}

void Context::never_offload(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  never_offload_storage(t.storage());
}

void Context::register_weight_storage(const c10::Storage& storage,
                                      std::weak_ptr<WeightSource> source, int64_t key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = weights_.begin(); it != weights_.end();) {
      it = it->second.storage.use_count() == 0 ? weights_.erase(it) : std::next(it);
    }
    weights_.insert_or_assign(storage.unsafeGetStorageImpl(),
                              WeightRef{storage.getWeakStorageImpl(), std::move(source), key});
    has_weights_.store(true, std::memory_order_release);
  }
  never_offload_storage(storage);
}

std::shared_ptr<WeightSource> Context::weight_source_of(const at::Tensor& t, int64_t& key) {
  if (!has_weights_.load(std::memory_order_acquire) || !t.defined() || !t.has_storage()) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = weights_.find(t.storage().unsafeGetStorageImpl());
  if (it == weights_.end() || it->second.storage.use_count() == 0) return nullptr;
  key = it->second.key;
  return it->second.source.lock();
}

void Context::never_offload_storage(const c10::Storage& storage) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = registered_.begin(); it != registered_.end();) {
    it = it->second.use_count() == 0 ? registered_.erase(it) : std::next(it);
  }
  registered_.insert_or_assign(storage.unsafeGetStorageImpl(), storage.getWeakStorageImpl());
  has_registered_.store(true, std::memory_order_release);
}

ResidentState Context::resident() {
  EventSink sink;
  Lock lock(*this);
  if (disk_) disk_->pump();
  collect_pending();
  report_completions();
  ResidentState r;
  r.tracked = live_slots_.load();
  r.host_bytes = host_bytes_;
  r.fwd_stash_count = static_cast<int64_t>(fwd_stash_.size());
  r.fwd_stash_bytes = fwd_bytes_;
  r.bwd_stash_count = bwd_count_;
  r.bwd_stash_bytes = bwd_bytes_;
  r.pending_host_frees = static_cast<int64_t>(pending_.size());
  r.host_pool_in_use_bytes = pool_->in_use_bytes();
  r.host_pool_reserved_bytes = pool_->reserved_bytes();
  if (disk_) {
    r.disk_bytes = disk_->tier().arena_in_use();
    r.disk_io_in_flight = disk_->tier().in_flight();
    r.disk_arena_bytes = disk_->tier().file_bytes();
  }
  return r;
}

void Context::synchronize() {
  EventSink sink;
  {
    SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Drain});
    backend_->synchronize();
    if (disk_) {
      {
        Lock lock(*this);
        disk_->pump();  // every offload copy is complete: the writes they wait for start now
      }
      disk_->tier().drain();
    }
  }
  Lock lock(*this);
  if (disk_) disk_->pump();
  while (!fwd_stash_.empty()) {
    Entry* e = fwd_stash_.front();
    fwd_stash_.erase(fwd_stash_.begin());
    drop_hold(*e);
  }
  collect_pending();
  report_completions();
}

// ---- disk tier
// ------------------------------------------------------------------------------------

void Context::open_disk_tier() {
  if (options_.tier == Tier::Host) return;
  auto tier = std::make_unique<DiskTier>(options_);
  if (tier->too_slow()) {
    if (options_.tier == Tier::Disk) throw EngineError(tier->slow_message());
    TORCH_WARN(tier->slow_message(), " (tier auto: copies stay in host memory)");
    disk_off_ = tier->info();
    disk_off_.enabled = false;
    return;
  }
  DiskPump::Engine& engine = *this;  // a private base: converted here, where it is accessible
  disk_ = std::make_unique<DiskPump>(std::move(tier), options_, engine);
}

void Context::wait_for_spills(uint64_t generation) {
  for (;;) {
    DiskPump::SpillWait wait;
    {
      Lock lock(*this);
      wait = disk_->spill_wait(generation);
      // Within the budget, or nothing on its way to disk: the budget cannot be met now.
      if (!wait.job && !wait.fence) return;
      ++stats_.spill_waits;
    }
    const int64_t begin = now_ns();
    {
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Spill});
      // The host really waits here (a stream wait would not free host memory).
      if (wait.job) {
        disk_->tier().wait(*wait.job);
      } else {
        wait.fence->synchronize();
      }
    }
    if (observer_) emit(WaitEvent{WaitKind::Spill, wait.id, begin, now_ns()});
  }
}

void Context::await_host_copy(Slot& slot) {
  for (;;) {
    IoJobPtr job;
    bool writing = false;
    {
      Lock lock(*this);
      disk_->pump();
      Entry& e = *slot.entry_;
      disk_->throw_error(e.generation);
      if (e.io && !e.io->write && e.io->failed()) {
        const Rebuild& r = *slot.rebuild_;
        std::string message = e.io->mismatch
                                  ? disk_->tier().corruption_message(
                                        *e.io, "saved tensor #" + std::to_string(slot.id_.value) +
                                                   " (" + describe(r.dtype, r.device, r.sizes) +
                                                   ", " + std::to_string(e.bytes) + " bytes)")
                                  : disk_->tier().failure_message(*e.io);
        e.io.reset();
        throw EngineError(message);
      }
      // Backward has reached it: writing it now would not pay. A queued write is dropped; a
      // running one finishes (the reload may read the host copy meanwhile).
      disk_->withdraw_write(e);
      const bool ready = e.device || e.in_fwd_stash || host_ready(e);
      if (!ready && !e.io) disk_->start_read(e, /*ahead=*/false);  // first in the reader's queue
      disk_->read_ahead_before(e);
      writing = ready && !e.device && !e.in_fwd_stash && e.io && e.io->write;
      if (!ready) job = e.io;
    }
    if (!job) {
      if (writing) [[unlikely]] {
        if (auto hook = disk_test_hooks().after_await_while_writing.load(std::memory_order_relaxed))
          hook();
      }
      return;
    }
    const int64_t begin = now_ns();
    {
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::DiskRead});
      disk_->tier().wait(*job);
    }
    if (observer_) emit(WaitEvent{WaitKind::DiskRead, slot.id_, begin, now_ns()});
  }
}

}  // namespace offtune::detail

namespace offtune {

using detail::Context;

namespace {
std::unique_ptr<detail::Backend> make_backend(const OffloadOptions& options) {
  BackendKind kind = options.backend;
  if (kind == BackendKind::Auto) {
    kind = detail::cuda_available() ? BackendKind::Cuda : BackendKind::HostSim;
    static std::once_flag said;
    std::call_once(said, [kind] {
      std::clog << "offtune: backend auto -> " << to_string(kind)
                << (kind == BackendKind::HostSim ? " (no CUDA device visible)" : "") << "\n";
    });
  }
  if (kind == BackendKind::Cuda) return detail::make_cuda_backend(options);
  return detail::make_host_sim_backend(options);
}
}  // namespace

DeviceMemory device_memory(BackendKind backend) {
  switch (backend) {
    case BackendKind::Cuda:
      return detail::cuda_device_memory(-1);
    case BackendKind::HostSim:
      return detail::host_sim_device_memory();
    case BackendKind::Auto:
      break;
  }
  throw OptionsError("device_memory needs a resolved backend (cuda or host-sim), not auto");
}

void reset_peak_device_memory(BackendKind backend) {
  switch (backend) {
    case BackendKind::Cuda:
      detail::cuda_reset_peak(-1);
      return;
    case BackendKind::HostSim:
      host_sim::reset_peak();
      return;
    case BackendKind::Auto:
      break;
  }
  throw OptionsError("reset_peak_device_memory needs a resolved backend (cuda or host-sim)");
}

ActivationOffloader::ActivationOffloader(OffloadOptions options, HookCarrier carrier)
    : carrier_(carrier) {
  options.validate();
  if (carrier == HookCarrier::OfftuneEngine) detail::ensure_engine_installed();
  detail::set_host_ram_warn_percent(options.host_ram_warn_percent);
  auto backend = make_backend(options);
  if (options.alloc_segments != AllocSegments::Env) {
    previous_expandable_ =
        detail::set_expandable_segments(options.alloc_segments == AllocSegments::Expandable) ? 1
                                                                                             : 0;
  }
  ctx_ = std::make_shared<Context>(std::move(options), std::move(backend));
  detail::register_reclaimer(ctx_);
}

ActivationOffloader::~ActivationOffloader() {
  // Saved tensors still alive keep the context (and the backend) alive through their slots.
  try {
    ctx_->synchronize();
  } catch (...) {
  }
  if (previous_expandable_ >= 0) {
    try {
      detail::set_expandable_segments(previous_expandable_ == 1);
    } catch (...) {
    }
  }
}

OffloadScope ActivationOffloader::scope() {
  if (carrier_ == HookCarrier::External) {
    throw EngineError(
        "offtune: this offloader was made for another engine's hooks (HookCarrier::External); an "
        "OffloadScope would not be heard: give its ExternalHooks to that engine instead");
  }
  return OffloadScope(ctx_);
}
void ActivationOffloader::never_offload(const at::Tensor& tensor) { ctx_->never_offload(tensor); }
void ActivationOffloader::exclude_module(const void* module) { ctx_->exclude_module(module); }
bool ActivationOffloader::is_excluded(const void* module) const {
  return ctx_->is_excluded(module);
}
void ActivationOffloader::set_observer(std::shared_ptr<Observer> observer) {
  ctx_->set_observer(std::move(observer));
}
const OffloadOptions& ActivationOffloader::options() const { return ctx_->options(); }
BackendKind ActivationOffloader::backend() const { return ctx_->backend().kind(); }
OffloadStats ActivationOffloader::stats() const { return ctx_->stats(); }
ResidentState ActivationOffloader::resident() const { return ctx_->resident(); }
DiskTierInfo ActivationOffloader::disk_tier() const { return ctx_->disk_info(); }
DeviceMemory ActivationOffloader::device_memory() const { return ctx_->backend().memory(); }
void ActivationOffloader::reset_peak_device_memory() { ctx_->backend().reset_peak(); }
void ActivationOffloader::synchronize() { ctx_->synchronize(); }
void ActivationOffloader::release_cached_memory() { ctx_->release_cached_memory(); }

OffloadScope::OffloadScope(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
  token_ = detail::push_frame(ctx_.get(), ctx_->new_generation());
}
OffloadScope::OffloadScope(OffloadScope&& other) noexcept
    : ctx_(std::move(other.ctx_)), token_(other.token_) {
  other.token_ = 0;
}
OffloadScope::~OffloadScope() {
  if (token_ != 0) detail::pop_frame(token_);
}

NoOffloadRegion::NoOffloadRegion() : token_(detail::push_frame(nullptr, 0)) {}
NoOffloadRegion::~NoOffloadRegion() { detail::pop_frame(token_); }

ExternalHooks::ExternalHooks(const ActivationOffloader& offloader)
    : ctx_(offloader.ctx_), generation_(ctx_->new_generation()) {}

std::unique_ptr<torch::autograd::SavedVariableHooks> ExternalHooks::make() const {
  return detail::make_slot(*ctx_, generation_);
}

namespace {

// A no-offload region's hooks: the tensor kept as autograd keeps it, with autograd's in-place
// check, which torch skips for every tensor saved through hooks (a region inside a scope must not
// lose it).
class KeptHooks final : public torch::autograd::SavedVariableHooks {
 public:
  void call_pack_hook(const at::Tensor& t) override {
    // detach() shares the version counter: the check below sees in-place changes of either.
    tensor_ = detail::may_be_saved_by_its_own_node(t) ? t.detach() : t;
    if (t.defined()) version_ = detail::version_of(t);
  }
  at::Tensor call_unpack_hook() override {
    if (tensor_.defined()) {
      const uint32_t now = detail::version_of(tensor_);
      if (now != version_) {
        detail::throw_modified_in_place(
            detail::describe(tensor_.scalar_type(), tensor_.device(), tensor_.sizes()), now,
            version_);
      }
    }
    return tensor_;
  }

 private:
  at::Tensor tensor_;
  uint32_t version_ = 0;
};

}  // namespace

std::unique_ptr<torch::autograd::SavedVariableHooks> ExternalHooks::make_kept() {
  return std::make_unique<KeptHooks>();
}

std::unique_ptr<torch::autograd::SavedVariableHooks> ExternalHooks::make_floor(HookFloor kind) {
  return detail::make_floor_hooks(kind);
}

HookFloorScope::HookFloorScope(HookFloor kind) {
  detail::ensure_engine_installed();
  token_ = detail::push_floor_frame(kind);
}
HookFloorScope::~HookFloorScope() { detail::pop_frame(token_); }

ModuleRegion::ModuleRegion(const void* module) {
  Context* top = detail::top_frame();
  if (top != nullptr && top->is_excluded(module)) token_ = detail::push_frame(nullptr, 0);
}
ModuleRegion::~ModuleRegion() {
  if (token_ != 0) detail::pop_frame(token_);
}

bool offloading_active() { return detail::top_frame() != nullptr; }

}  // namespace offtune
