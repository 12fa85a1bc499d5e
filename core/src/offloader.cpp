// The engine logic, written once against Backend. Lifetime rules, in one place:
//
// - Every saved tensor gets a Slot (seam.hpp). A slot that offloads owns a share of an Entry: the
// host
//   copy of one storage span. Slots of tensors on the same live storage at the same version share
//   one entry (de-duplication), so a tensor saved twice, or a view saved beside its base, moves
//   once.
// - Forward window: after an offload copy is issued, the entry holds the device span (fwd_hold)
// until
//   the copy is known complete; at most max_fwd_stash_size (and max_fwd_stash_bytes) are in flight,
//   else forward makes compute wait for the oldest. Completed copies release their hold at once.
// - Backward: unpack serves the entry from its forward hold, a prefetched buffer, or a new reload,
// and
//   prefetches the entries packed just before it in the same forward. The device buffer stays with
//   the entry until the entry's last slot is destroyed (its node ran, or the graph was freed), or
//   until the end of the backward (retain_graph, unconsumed prefetches). Releasing a reloaded
//   buffer makes the copy stream wait for compute; if its storage gained users (a backward output
//   is a view of it), record_stream keeps it from reuse until compute is done.
// - Host blocks go back to the pool only after every copy that touches them has completed.
// None of this depends on "first forward" or "first backward" flags: state lives in entries, which
// die with their slots, so forward-only passes, several forwards per backward, several backwards,
// exceptions and dropped graphs all return the engine to rest.
#include "offtune/offloader.hpp"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend.hpp"
#include "host_pool.hpp"
#include "seam.hpp"
#include "sysmem.hpp"

namespace offtune::detail {

struct Entry {
  TensorId id;
  int64_t generation = 0;  // forward scope it was packed in (prefetch stays within one)
  int64_t bytes = 0;       // span length
  int64_t span_lo = 0;     // span start, in bytes, in the source storage
  c10::StorageImpl* source_key = nullptr;
  c10::weak_intrusive_ptr<c10::StorageImpl> source{c10::intrusive_ptr<c10::StorageImpl>()};
  int64_t version = 0;
  at::Tensor host;  // uint8 host copy from the pool
  bool pinned = true;
  FencePtr offload_fence;
  bool in_fwd_stash = false;
  at::Tensor fwd_hold;  // uint8 view of the device span while the offload copy may be in flight
  at::Tensor device;    // uint8 device bytes in backward
  bool device_reloaded = false;  // device came from a reload (else from the forward hold)
  bool prefetched = false;       // reload issued ahead of use, not yet consumed
  FencePtr reload_fence;
  bool reload_waited = true;
  int task = -1;  // autograd graph task that brought `device` in (end-of-backward releases it)
  int slots = 0;
};

class Slot;

class Context : public std::enable_shared_from_this<Context> {
 public:
  Context(OffloadOptions options, std::unique_ptr<Backend> backend)
      : options_(std::move(options)), backend_(std::move(backend)) {
    pool_ = std::make_shared<HostPool>(backend_->host_memory(), options_.host_pool_slab_bytes,
                                       options_.poison_freed);
  }

  void pack(Slot& slot, const at::Tensor& t);
  at::Tensor unpack(Slot& slot);
  void release(Slot& slot) noexcept;

  void begin_scope() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
  }
  void never_offload(const at::Tensor& t);
  void exclude_module(const void* m) {
    std::lock_guard<std::mutex> lock(mutex_);
    excluded_.insert(m);
  }
  bool is_excluded(const void* m) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return excluded_.count(m) != 0;
  }
  void set_observer(std::shared_ptr<Observer> o) {
    std::lock_guard<std::mutex> lock(mutex_);
    observer_ = std::move(o);
  }
  const OffloadOptions& options() const { return options_; }
  Backend& backend() { return *backend_; }
  OffloadStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    OffloadStats s = stats_;
    s.pageable_fallbacks = pool_->pageable_fallbacks();
    return s;
  }
  ResidentState resident();
  void synchronize();
  void release_cached_memory() {
    synchronize();
    pool_->trim();
  }

 private:
  friend class Slot;
  KeepReason classify(const at::Tensor& t) const;
  Entry* find_duplicate(const at::Tensor& t, int64_t lo, int64_t hi);
  void make_room(int64_t incoming_bytes);
  void drop_fwd_hold(Entry& e);
  void issue_reload(Entry& e, bool prefetch);
  void prefetch_before(const Entry& e);
  void release_device(Entry& e);
  void destroy_entry(Entry& e);
  void free_host_when_done(Entry& e);
  void collect_pending();
  void maybe_queue_end_of_backward();
  void end_of_backward(int task);
  void emit_stash();
  std::function<void(int64_t)> completion_callback(const Entry& e, CopyDirection dir,
                                                   bool prefetch);

  const OffloadOptions options_;
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<HostPool> pool_;
  std::shared_ptr<Observer> observer_;

  mutable std::mutex mutex_;
  int64_t next_id_ = 0;
  int64_t generation_ = 0;
  int64_t live_slots_ = 0;
  std::map<int64_t, std::unique_ptr<Entry>> entries_;  // offloaded entries by id (pack order)
  std::unordered_multimap<c10::StorageImpl*, Entry*> by_storage_;
  std::deque<Entry*> fwd_stash_;
  int64_t fwd_bytes_ = 0;
  int64_t bwd_count_ = 0;
  int64_t bwd_bytes_ = 0;
  int64_t host_bytes_ = 0;
  struct PendingFree {
    std::vector<FencePtr> fences;
    at::Tensor host;
  };
  std::vector<PendingFree> pending_;
  std::unordered_map<c10::StorageImpl*, c10::weak_intrusive_ptr<c10::StorageImpl>> registered_;
  std::unordered_set<const void*> excluded_;
  std::unordered_set<int> queued_tasks_;
  OffloadStats stats_;
};

namespace {

// A 1-D uint8 view of [offset, offset + n) bytes of `storage`.
at::Tensor byte_view(const c10::Storage& storage, int64_t offset, int64_t n, at::Device device) {
  at::Tensor v = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));
  v.set_(storage, offset, {n}, {1});
  return v;
}

// Element range [lo, hi) that a strided tensor touches in its storage (strides are >= 0 in torch).
std::pair<int64_t, int64_t> element_span(const at::Tensor& t) {
  int64_t hi = t.storage_offset() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) hi += (t.size(d) - 1) * t.stride(d);
  return {t.storage_offset(), hi};
}

// Brackets a piece of the engine's work with on_span_begin/on_span_end (observer.hpp). `observer`
// is read once, without the mutex, as the hooks' other unlocked reads of observer_: set_observer is
// not allowed while hooks run, so it cannot change under a span. Without an observer this is a
// branch on construction and one on destruction.
class SpanGuard {
 public:
  SpanGuard(Observer* observer, Span span) : observer_(observer), span_(span) {
    if (observer_) observer_->on_span_begin(span_);
  }
  ~SpanGuard() {
    if (!observer_) return;
    // The destructor may run while the hook's exception propagates: a second one would terminate.
    try {
      observer_->on_span_end(span_);
    } catch (const std::exception& ex) {
      TORCH_WARN("offtune: observer threw from on_span_end: ", ex.what());
    } catch (...) {
      TORCH_WARN("offtune: observer threw from on_span_end");
    }
  }
  SpanGuard(const SpanGuard&) = delete;
  SpanGuard& operator=(const SpanGuard&) = delete;

 private:
  Observer* const observer_;
  const Span span_;
};

}  // namespace

// One saved tensor's share in the engine; see seam.hpp.
class Slot final : public SavedTensorSlot {
 public:
  explicit Slot(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
  ~Slot() override { ctx_->release(*this); }
  void pack(const at::Tensor& tensor) override { ctx_->pack(*this, tensor); }
  at::Tensor unpack() override { return ctx_->unpack(*this); }

 private:
  friend class Context;
  std::shared_ptr<Context> ctx_;
  bool packed_ = false;
  TensorId id_;
  at::Tensor kept_;
  Entry* entry_ = nullptr;
  // Geometry to rebuild the tensor from its entry's bytes.
  std::vector<int64_t> sizes_, strides_;
  int64_t offset_in_span_ = 0;  // bytes from the span start to the tensor's first element
  at::ScalarType dtype_ = at::kFloat;
  at::Device device_ = at::kCPU;
};

std::unique_ptr<SavedTensorSlot> make_slot(Context& ctx) {
  return std::make_unique<Slot>(ctx.shared_from_this());
}

KeepReason Context::classify(const at::Tensor& t) const {
  if (!t.defined() || !t.has_storage() || t.layout() != at::kStrided || t.is_quantized() ||
      t.is_nested() || t.is_conj() || t.is_neg() || t.numel() == 0) {
    return KeepReason::Unsupported;
  }
  if (!backend_->is_device_tensor(t)) return KeepReason::NotOnDevice;
  // Parameters, and views of them (linear saves weight.t(), a view, not the parameter itself: the
  // reference's isinstance(Parameter) check misses it and offloads the weights).
  if (t.is_leaf() && t.requires_grad()) return KeepReason::Parameter;
  if (t.is_view()) {
    const at::TensorBase& base = t._base();
    if (base.is_leaf() && base.requires_grad()) return KeepReason::Parameter;
  }
  auto it = registered_.find(t.storage().unsafeGetStorageImpl());
  if (it != registered_.end() && it->second.use_count() > 0) return KeepReason::RegisteredStorage;
  return KeepReason::None;
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

void Context::pack(Slot& slot, const at::Tensor& t) {
  // Before the lock: time spent waiting for it (another thread's hook) is the hook's time too.
  SpanGuard hook_span(observer_.get(), {SpanKind::Pack});
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending();
  slot.packed_ = true;
  slot.id_ = TensorId(next_id_++);
  ++live_slots_;
  ++stats_.packed;

  KeepReason reason = classify(t);
  int64_t lo = 0, hi = 0;
  if (reason == KeepReason::None) {
    const auto [elo, ehi] = element_span(t);
    const int64_t itemsize = static_cast<int64_t>(t.element_size());
    lo = elo * itemsize;
    hi = ehi * itemsize;
    if (hi - lo < options_.min_offload_size) reason = KeepReason::BelowThreshold;
  }
  PackEvent ev;
  ev.id = slot.id_;
  ev.time_ns = observer_ ? now_ns() : 0;
  if (reason != KeepReason::None) {
    // Detached: the saved tensor must not own its grad_fn (an output saved by its own node would
    // form a reference cycle and leak the graph).
    slot.kept_ = t.detach();
    ++stats_.kept;
    if (observer_) {
      ev.bytes = t.defined() && t.has_storage() ? static_cast<int64_t>(t.nbytes()) : 0;
      ev.decision = PackDecision::Kept;
      ev.reason = reason;
      observer_->on_pack(ev);
    }
    return;
  }

  slot.sizes_ = t.sizes().vec();
  slot.strides_ = t.strides().vec();
  slot.dtype_ = t.scalar_type();
  slot.device_ = t.device();
  ev.bytes = hi - lo;

  if (Entry* dup = find_duplicate(t, lo, hi)) {
    slot.entry_ = dup;
    slot.offset_in_span_ =
        t.storage_offset() * static_cast<int64_t>(t.element_size()) - dup->span_lo;
    ++dup->slots;
    ++stats_.deduplicated;
    if (observer_) {
      ev.decision = PackDecision::Deduplicated;
      observer_->on_pack(ev);
    }
    return;
  }

  const int64_t bytes = hi - lo;
  if (options_.use_streams) make_room(bytes);
  auto entry = std::make_unique<Entry>();
  Entry& e = *entry;
  e.id = slot.id_;
  e.generation = generation_;
  e.bytes = bytes;
  e.span_lo = lo;
  e.source_key = t.storage().unsafeGetStorageImpl();
  e.source = t.storage().getWeakStorageImpl();
  e.version = t._version();
  e.host = pool_->allocate(bytes, options_.use_pin_memory, e.pinned);
  at::Tensor src = byte_view(t.storage(), lo, bytes, t.device());
  e.offload_fence =
      backend_->copy(e.host, src, options_.use_streams, /*after_compute=*/true, e.pinned,
                     completion_callback(e, CopyDirection::DeviceToHost, false));
  if (options_.use_streams) {
    e.fwd_hold = std::move(src);
    e.in_fwd_stash = true;
    fwd_stash_.push_back(&e);
    fwd_bytes_ += bytes;
  }
  e.slots = 1;
  host_bytes_ += bytes;
  slot.entry_ = &e;
  slot.offset_in_span_ = t.storage_offset() * static_cast<int64_t>(t.element_size()) - lo;
  by_storage_.emplace(e.source_key, &e);
  entries_.emplace(e.id.value, std::move(entry));
  ++stats_.offloaded;
  stats_.offloaded_bytes += bytes;
  if (observer_) {
    ev.decision = PackDecision::Offloaded;
    observer_->on_pack(ev);
    CopyEvent ce{e.id,    CopyDirection::DeviceToHost, bytes, e.pinned, options_.use_streams, false,
                 now_ns()};
    observer_->on_copy_issued(ce);
    emit_stash();
  }
}

std::function<void(int64_t)> Context::completion_callback(const Entry& e, CopyDirection dir,
                                                          bool prefetch) {
  if (!observer_ || !backend_->times_completions()) return {};
  // Runs on the copy thread: capture values, never the entry.
  CopyEvent ce{e.id, dir, e.bytes, e.pinned, options_.use_streams, prefetch, 0, now_ns()};
  return [obs = observer_, ce](int64_t t) mutable {
    ce.time_ns = t;
    obs->on_copy_completed(ce);
  };
}

void Context::make_room(int64_t incoming_bytes) {
  // Copies known complete need no hold: release them first, whatever their position.
  for (auto it = fwd_stash_.begin(); it != fwd_stash_.end();) {
    Entry* e = *it;
    if (e->offload_fence->query()) {
      it = fwd_stash_.erase(it);
      drop_fwd_hold(*e);
    } else {
      ++it;
    }
  }
  const auto count_limit = static_cast<size_t>(options_.max_fwd_stash_size);
  while (!fwd_stash_.empty() && (fwd_stash_.size() >= count_limit ||
                                 (options_.max_fwd_stash_bytes > 0 &&
                                  fwd_bytes_ + incoming_bytes > options_.max_fwd_stash_bytes))) {
    Entry* e = fwd_stash_.front();
    fwd_stash_.pop_front();
    const int64_t begin = now_ns();
    {
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::ForwardWindow});
      // Compute must not reuse the activation's memory before the copy has read it.
      backend_->compute_wait(e->offload_fence);
    }
    ++stats_.window_waits;
    if (observer_) observer_->on_wait({WaitKind::ForwardWindow, e->id, begin, now_ns()});
    drop_fwd_hold(*e);
  }
}

// The entry must already be out of fwd_stash_.
void Context::drop_fwd_hold(Entry& e) {
  e.in_fwd_stash = false;
  e.fwd_hold.reset();
  fwd_bytes_ -= e.bytes;
  if (observer_) {
    if (!backend_->times_completions()) {
      observer_->on_copy_completed({e.id, CopyDirection::DeviceToHost, e.bytes, e.pinned,
                                    options_.use_streams, false, now_ns()});
    }
    emit_stash();
  }
}

void Context::issue_reload(Entry& e, bool prefetch) {
  // Both steps may throw (device out of memory): commit to the entry only once the copy is issued.
  at::Tensor device = backend_->empty_device_bytes(e.bytes, options_.use_streams);
  FencePtr fence =
      backend_->copy(device, e.host, options_.use_streams, /*after_compute=*/false, e.pinned,
                     completion_callback(e, CopyDirection::HostToDevice, prefetch));
  e.device = std::move(device);
  e.reload_fence = std::move(fence);
  e.reload_waited = false;
  e.device_reloaded = true;
  e.prefetched = prefetch;
  e.task = current_graph_task_id();
  ++bwd_count_;
  bwd_bytes_ += e.bytes;
  ++stats_.reloaded;
  stats_.reloaded_bytes += e.bytes;
  if (prefetch) ++stats_.prefetched;
  if (observer_) {
    observer_->on_copy_issued({e.id, CopyDirection::HostToDevice, e.bytes, e.pinned,
                               options_.use_streams, prefetch, now_ns()});
    emit_stash();
  }
}

void Context::prefetch_before(const Entry& e) {
  // Single-stream mode copies on the compute stream: prefetching there only moves the wait.
  if (options_.prefetch == 0 || !options_.use_streams) return;
  auto it = entries_.find(e.id.value);
  int64_t looked = 0;
  while (it != entries_.begin() && looked < options_.prefetch) {
    --it;
    Entry& p = *it->second;
    if (p.generation != e.generation) break;
    ++looked;
    if (!p.device.defined() && !p.in_fwd_stash) issue_reload(p, /*prefetch=*/true);
  }
}

at::Tensor Context::unpack(Slot& slot) {
  SpanGuard hook_span(observer_.get(), {SpanKind::Unpack});
  if (!slot.entry_) {
    if (observer_) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (observer_) observer_->on_unpack({slot.id_, UnpackSource::Kept, 0, now_ns()});
    }
    return slot.kept_;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending();
  maybe_queue_end_of_backward();
  Entry& e = *slot.entry_;
  UnpackSource source;
  if (e.device.defined()) {
    source = e.prefetched
                 ? UnpackSource::Prefetched
                 : (e.device_reloaded ? UnpackSource::Reloaded : UnpackSource::ForwardStash);
  } else if (e.in_fwd_stash) {
    // Backward began before this offload copy was known complete: use the device bytes as they are.
    fwd_stash_.erase(std::find(fwd_stash_.begin(), fwd_stash_.end(), &e));
    e.in_fwd_stash = false;
    fwd_bytes_ -= e.bytes;
    e.device = std::move(e.fwd_hold);
    e.device_reloaded = false;
    e.task = current_graph_task_id();
    ++bwd_count_;
    bwd_bytes_ += e.bytes;
    ++stats_.from_fwd_stash;
    source = UnpackSource::ForwardStash;
  } else {
    issue_reload(e, /*prefetch=*/false);
    source = UnpackSource::Reloaded;
  }
  if (!e.reload_waited) {
    const int64_t begin = now_ns();
    {
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Reload});
      backend_->compute_wait(e.reload_fence);
    }
    e.reload_waited = true;
    if (observer_) observer_->on_wait({WaitKind::Reload, e.id, begin, now_ns()});
  }
  e.prefetched = false;
  prefetch_before(e);
  if (observer_) {
    observer_->on_unpack({slot.id_, source, e.bytes, now_ns()});
    emit_stash();
  }
  const auto itemsize = static_cast<int64_t>(c10::elementSize(slot.dtype_));
  const int64_t first_byte = e.device.storage_offset() + slot.offset_in_span_;
  at::Tensor out = at::empty({0}, at::TensorOptions().dtype(slot.dtype_).device(slot.device_));
  out.set_(e.device.storage(), first_byte / itemsize, slot.sizes_, slot.strides_);
  return out;
}

void Context::release_device(Entry& e) {
  if (!e.device.defined()) return;
  if (e.device_reloaded) {
    // Note [unpacked storage gained users]: our buffer holds one reference. More means a backward
    // output (or a user) kept a view of it: compute may still use it after this point, so the
    // allocator must not hand the block to the copy stream before compute is done.
    if (e.device.storage().use_count() > 1) {
      backend_->record_stream_compute(e.device);
      ++stats_.record_streams;
    }
    // Later copy-stream allocations that reuse this block are ordered after compute's use of it.
    backend_->copy_wait_compute();
  } else if (e.offload_fence && !e.offload_fence->query()) {
    // The forward hold: the offload copy may still be reading it.
    SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Drain});
    backend_->compute_wait(e.offload_fence);
  }
  e.device.reset();
  e.device_reloaded = false;
  e.prefetched = false;
  e.task = -1;
  --bwd_count_;
  bwd_bytes_ -= e.bytes;
  if (observer_) emit_stash();
}

void Context::free_host_when_done(Entry& e) {
  PendingFree p;
  if (e.offload_fence && !e.offload_fence->query()) p.fences.push_back(e.offload_fence);
  if (e.reload_fence && !e.reload_fence->query()) p.fences.push_back(e.reload_fence);
  host_bytes_ -= e.bytes;
  if (p.fences.empty()) {
    e.host.reset();
    return;
  }
  p.host = std::move(e.host);
  pending_.push_back(std::move(p));
}

void Context::collect_pending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true;
    for (auto& f : it->fences) done = done && f->query();
    it = done ? pending_.erase(it) : std::next(it);
  }
}

void Context::destroy_entry(Entry& e) {
  if (e.in_fwd_stash) {
    fwd_stash_.erase(std::find(fwd_stash_.begin(), fwd_stash_.end(), &e));
    if (!e.offload_fence->query()) {
      // The graph died before its offload copy finished: the copy may still be reading the span.
      SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Drain});
      backend_->compute_wait(e.offload_fence);
    }
    drop_fwd_hold(e);
  }
  release_device(e);
  free_host_when_done(e);
  auto [first, last] = by_storage_.equal_range(e.source_key);
  for (auto it = first; it != last; ++it) {
    if (it->second == &e) {
      by_storage_.erase(it);
      break;
    }
  }
  entries_.erase(e.id.value);  // destroys e
}

void Context::release(Slot& slot) noexcept {
  if (!slot.packed_) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    --live_slots_;
    if (slot.entry_ && --slot.entry_->slots == 0) destroy_entry(*slot.entry_);
    slot.entry_ = nullptr;
    collect_pending();
  } catch (const std::exception& ex) {
    // Destructors run inside autograd's cleanup: never throw from here.
    TORCH_WARN("offtune: error while releasing a saved tensor: ", ex.what());
  }
}

void Context::maybe_queue_end_of_backward() {
  const int task = current_graph_task_id();
  if (task < 0 || !queued_tasks_.insert(task).second) return;
  std::weak_ptr<Context> weak = weak_from_this();
  queue_end_of_backward([weak, task] {
    if (auto ctx = weak.lock()) ctx->end_of_backward(task);
  });
}

void Context::end_of_backward(int task) {
  std::lock_guard<std::mutex> lock(mutex_);
  queued_tasks_.erase(task);
  // Buffers this backward brought in and that are still on the device are unconsumed prefetches, or
  // belong to a retained graph (the next backward reloads them from the host copy): give their
  // memory back. Buffers of a backward running concurrently on another thread are left alone.
  for (auto& [id, e] : entries_) {
    if (e->task == task) release_device(*e);
  }
  collect_pending();
}

void Context::emit_stash() {
  observer_->on_stash(
      {static_cast<int64_t>(fwd_stash_.size()), fwd_bytes_, bwd_count_, bwd_bytes_, now_ns()});
}

void Context::never_offload(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = registered_.begin(); it != registered_.end();) {
    it = it->second.use_count() == 0 ? registered_.erase(it) : std::next(it);
  }
  registered_.insert_or_assign(t.storage().unsafeGetStorageImpl(),
                               t.storage().getWeakStorageImpl());
}

ResidentState Context::resident() {
  std::lock_guard<std::mutex> lock(mutex_);
  collect_pending();
  ResidentState r;
  r.tracked = live_slots_;
  r.host_bytes = host_bytes_;
  r.fwd_stash_count = static_cast<int64_t>(fwd_stash_.size());
  r.fwd_stash_bytes = fwd_bytes_;
  r.bwd_stash_count = bwd_count_;
  r.bwd_stash_bytes = bwd_bytes_;
  r.pending_host_frees = static_cast<int64_t>(pending_.size());
  r.host_pool_in_use_bytes = pool_->in_use_bytes();
  r.host_pool_reserved_bytes = pool_->reserved_bytes();
  return r;
}

void Context::synchronize() {
  {
    SpanGuard wait_span(observer_.get(), {SpanKind::Wait, WaitKind::Drain});
    backend_->synchronize();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = fwd_stash_.begin(); it != fwd_stash_.end();) {
    Entry* e = *it;
    it = fwd_stash_.erase(it);
    drop_fwd_hold(*e);
  }
  collect_pending();
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

ActivationOffloader::ActivationOffloader(OffloadOptions options) {
  options.validate();
  detail::ensure_engine_installed();
  detail::set_host_ram_warn_percent(options.host_ram_warn_percent);
  auto backend = make_backend(options);
  ctx_ = std::make_shared<Context>(std::move(options), std::move(backend));
}

ActivationOffloader::~ActivationOffloader() {
  // Saved tensors still alive keep the context (and the backend) alive through their slots.
  try {
    ctx_->synchronize();
  } catch (...) {
  }
}

OffloadScope ActivationOffloader::scope() { return OffloadScope(ctx_); }
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
DeviceMemory ActivationOffloader::device_memory() const { return ctx_->backend().memory(); }
void ActivationOffloader::reset_peak_device_memory() { ctx_->backend().reset_peak(); }
void ActivationOffloader::synchronize() { ctx_->synchronize(); }
void ActivationOffloader::release_cached_memory() { ctx_->release_cached_memory(); }

OffloadScope::OffloadScope(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
  ctx_->begin_scope();
  detail::push_frame(ctx_.get());
  active_ = true;
}
OffloadScope::OffloadScope(OffloadScope&& other) noexcept
    : ctx_(std::move(other.ctx_)), active_(other.active_) {
  other.active_ = false;
}
OffloadScope::~OffloadScope() {
  if (active_) detail::pop_frame();
}

NoOffloadRegion::NoOffloadRegion() { detail::push_frame(nullptr); }
NoOffloadRegion::~NoOffloadRegion() { detail::pop_frame(); }

ModuleRegion::ModuleRegion(const void* module) {
  Context* top = detail::top_frame();
  if (top != nullptr && top->is_excluded(module)) {
    detail::push_frame(nullptr);
    pushed_ = true;
  }
}
ModuleRegion::~ModuleRegion() {
  if (pushed_) detail::pop_frame();
}

bool offloading_active() { return detail::top_frame() != nullptr; }

}  // namespace offtune
