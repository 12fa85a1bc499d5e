// The replay half of the what-if predictor (predict.hpp): the engine's rules (offloader.cpp)
// applied to a recorded step, on two clocks, with device memory counted block by block. No libtorch
// here: a 48-point grid replays in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>

#include "offtune/allocator_model.hpp"
#include "offtune/knobs.hpp"
#include "offtune/offload_rule.hpp"
#include "offtune/profiler/metrics.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/version.hpp"  // the predictor a stored prediction names

namespace offtune::profiler {
namespace {

struct Entry {
  int64_t id = 0;
  int64_t block = -1;
  int64_t span_lo = 0;
  int64_t bytes = 0;
  uint32_t version = 0;
  uint64_t generation = 0;
  int slots = 0;
  bool alive = true;
  bool in_fwd = false;     // in the forward window, holding its block
  int64_t d2h_end = 0;     // when its offload copy ends
  bool device = false;     // backward: has device bytes (a reload buffer or the held block)
  bool from_hold = false;  // ... the held block
  bool reloaded = false;
  bool prefetched = false;
  int64_t h2d_end = 0;
  int64_t chain_prev = -1;  // entries of its generation, in pack order
  int64_t chain_next = -1;
  int64_t buffer = 0;      // its reload buffer in the allocator model (0: none)
  int64_t item_bytes = 1;  // with block and span_lo, its address key under trl with streams
};

// Semantics trl with streams: the reference's storage de-duplication keys a saved tensor by its
// storage's address, its offset in elements and its dtype (offloader.cpp's trl_key_of). Replayed
// by storage block instead of address (the recording's addresses are not the ones another
// configuration would get; a tensor saved twice, or a view at the same offset, keeps its block),
// and by element size for the dtype.
struct TrlKey {
  int64_t block, offset, item_bytes;
  bool operator<(const TrlKey& o) const {
    return std::tie(block, offset, item_bytes) < std::tie(o.block, o.offset, o.item_bytes);
  }
};
TrlKey trl_key(int64_t block, int64_t span_lo, int64_t item_bytes) {
  return {block, span_lo / item_bytes, item_bytes};
}

// The copy stream, as the allocator model numbers streams (the compute stream is 0).
constexpr int64_t kCopyStream = 1;

class Replay {
 public:
  // `alloc` follows the step's allocations and frees (reload buffers included) as CUDA's caching
  // allocator would: `handles` holds each block's handle in it (0: not allocated there), those of
  // blocks from before the step set by the caller.
  Replay(const Trace& trace, const EngineConfig& config, const LinkModel& link,
         AllocatorModel& alloc, std::vector<int64_t>& handles)
      : t_(trace),
        c_(config),
        link_(link),
        trl_(config.semantics == Semantics::Trl),
        cpu_(trace.clock == Trace::Clock::Cpu && config.offload),
        alloc_(alloc),
        handles_(handles) {
    const size_t n = trace.blocks.size();
    live_.assign(n, false);
    dead_.assign(n, false);
    refs_.assign(n, 0);
    for (size_t b = 0; b < n; ++b) live_[b] = trace.blocks[b].before_step;
    slot_entry_.assign(trace.slots.size(), -1);
    slot_kept_.assign(trace.slots.size(), false);
    mem_ = peak_ = trace.base_allocated;
  }

  Prediction run() {
    for (const Trace::Event& ev : t_.events) {
      now_ = ev.time_ns + delay_;
      switch (ev.kind) {
        case Trace::Kind::Alloc:
          live_[ev.index] = true;
          add_mem(t_.blocks[ev.index].bytes);
          if (t_.blocks[ev.index].bytes > 0) {
            handles_[ev.index] = alloc_.allocate(t_.blocks[ev.index].bytes);
          }
          break;
        case Trace::Kind::Free:
          dead_[ev.index] = true;
          if (refs_[ev.index] == 0) free_block(ev.index);
          break;
        case Trace::Kind::Pack:
          pack(ev.index);
          hook(t_.pack_hook_ns);
          break;
        case Trace::Kind::Unpack:
          unpack(ev.index);
          hook(t_.unpack_hook_ns);
          break;
        case Trace::Kind::Release:
          release(ev.index);
          break;
        case Trace::Kind::ForwardBegin:
          forward_begin_ = now_;
          break;
        case Trace::Kind::ForwardEnd:
          forward_end_ = now_;
          break;
        case Trace::Kind::BackwardEnd:
          backward_end_ = now_;
          end_of_backward();
          break;
      }
    }
    // The runner's drain: the step ends when the last copy has.
    const int64_t end = std::max(t_.step_ns + delay_, copy_free_);
    // Copies still running at the step's end are done before the next step.
    alloc_.complete_stream(kCopyStream);
    Prediction p;
    p.step_ns = end;
    p.peak_allocated = peak_;
    p.peak_reserved = alloc_.peak_reserved();
    p.offloaded_bytes = offloaded_;
    p.reloaded_bytes = reloaded_;
    p.copies = copies_;
    p.window_waits = window_waits_;
    p.stalled_ns = delay_ - hooks_ns_;
    p.hidden_copy_pct = hidden_pct();
    // The physical limit (predict.hpp): the compute cannot shrink; the copies run one after
    // another, on the copy stream from the first save on, or on the compute stream.
    p.compute_ns = t_.step_ns + hooks_ns_;
    if (!c_.use_streams) {
      p.bound_ns = p.compute_ns + copy_ns_;
    } else {
      p.bound_ns = copies_ > 0 ? std::max(p.compute_ns, first_copy_at_ + copy_ns_) : p.compute_ns;
    }
    return p;
  }

 private:
  // The engine's bookkeeping in a hook, on this CPU's clock (a device model's has none).
  void hook(int64_t ns) {
    if (!cpu_ || ns <= 0) return;
    hooks_ns_ += ns;
    delay_ += ns;
    now_ += ns;
  }

  // A copy's duration: the link model's, and on this CPU's clock no less than this machine's
  // copy rate allows (host-sim's copy runs a memcpy and then waits out the link's time).
  int64_t copy_cost(int64_t bytes, bool d2h) const {
    int64_t cost = link_.copy_ns(bytes, c_.use_pin_memory);
    const double rate = d2h ? t_.d2h_bytes_per_ns : t_.h2d_bytes_per_ns;
    if (cpu_ && rate > 0) {
      cost = std::max(cost, static_cast<int64_t>(static_cast<double>(bytes) / rate));
    }
    return cost;
  }

  void add_mem(int64_t bytes) {
    mem_ += bytes;
    peak_ = std::max(peak_, mem_);
  }
  void free_block(int64_t b) {
    if (!live_[b]) return;
    live_[b] = false;
    mem_ -= t_.blocks[b].bytes;
    alloc_.free(std::exchange(handles_[b], 0));
  }
  void ref(int64_t b) { ++refs_[b]; }
  void unref(int64_t b) {
    if (--refs_[b] == 0 && dead_[b]) free_block(b);
  }

  // The compute thread blocks until `until` (a wait, or a single-stream copy running on it).
  void block_until(int64_t until, bool is_wait) {
    if (until <= now_) return;
    blocked_.push_back({now_, until});
    if (is_wait) ++waits_;
    delay_ += until - now_;
    now_ = until;
  }

  // A copy of `bytes`: on the copy stream after the ones before it, or on the compute stream.
  int64_t copy(int64_t bytes, bool d2h, bool prefetch) {
    const int64_t cost = copy_cost(bytes, d2h);
    if (copies_ == 0) first_copy_at_ = now_;
    ++copies_;
    copy_ns_ += cost;
    TimelineEvent e;
    e.kind = d2h ? EventKind::CopyD2H : EventKind::CopyH2D;
    e.bytes = bytes;
    e.pinned = c_.use_pin_memory;
    e.prefetch = prefetch;
    if (!c_.use_streams) {
      e.stream = 0;
      e.start_ns = now_;
      block_until(now_ + cost, /*is_wait=*/false);
      e.end_ns = now_;
      copy_events_.push_back(e);
      return now_;
    }
    e.stream = 1;
    e.start_ns = std::max(copy_free_, now_);
    copy_free_ = e.start_ns + cost;
    e.end_ns = copy_free_;
    copy_events_.push_back(e);
    return copy_free_;
  }

  int64_t held_bytes(int64_t block) const {
    auto it = held_.find(block);
    return it == held_.end() ? 0 : it->second;
  }
  void hold(int64_t block) {
    if (held_[block]++ == 0) fwd_bytes_ += t_.blocks[block].bytes;
  }
  void unhold(int64_t block) {
    auto it = held_.find(block);
    if (it == held_.end()) return;
    if (--it->second == 0) {
      fwd_bytes_ -= t_.blocks[block].bytes;
      held_.erase(it);
    }
  }
  void leave_window(Entry& e) {
    fwd_.erase(std::find(fwd_.begin(), fwd_.end(), &e - entries_.data()));
    e.in_fwd = false;
    unhold(e.block);
  }

  void pack(int64_t s) {
    const Trace::Slot& slot = t_.slots[s];
    if (slot.reason != KeepReason::None) return;  // kept whatever the knobs (its life is recorded)
    // The baseline keeps every saved tensor, as autograd does without an offloader.
    if (!c_.offload || (trl_keys_on() && trl_keeps(slot)) ||
        offload_decision(slot.reason, slot.weight, c_.min_offload_size) != KeepReason::None) {
      slot_kept_[s] = true;
      ref(slot.block);
      return;
    }
    if (!trl_) {
      if (const int64_t dup = find_duplicate(slot); dup >= 0) {
        slot_entry_[s] = dup;
        ++entries_[dup].slots;
        return;
      }
    }
    std::vector<int64_t> waits;
    if (c_.use_streams) make_room(slot, waits);
    const auto index = static_cast<int64_t>(entries_.size());
    Entry& e = entries_.emplace_back();
    e.id = slot.id;
    e.block = slot.block;
    e.span_lo = slot.span_lo;
    e.bytes = slot.bytes;
    e.version = slot.version;
    e.generation = slot.generation;
    e.slots = 1;
    e.item_bytes = slot.item_bytes;
    if (trl_keys_on()) trl_keys_[trl_key(e.block, e.span_lo, e.item_bytes)] = e.id;
    if (auto [it, inserted] = chain_tail_.try_emplace(e.generation, index); !inserted) {
      e.chain_prev = it->second;
      entries_[it->second].chain_next = index;
      it->second = index;
    }
    slot_entry_[s] = index;
    by_block_.emplace(e.block, index);
    offloaded_ += e.bytes;
    e.d2h_end = copy(e.bytes, /*d2h=*/true, /*prefetch=*/false);
    if (c_.use_streams) {
      ref(e.block);
      hold(e.block);
      e.in_fwd = true;
      fwd_.push_back(index);
    }
    // Forward's waits for the entries that left the window, then their blocks may go.
    for (const int64_t w : waits) {
      block_until(entries_[w].d2h_end, /*is_wait=*/true);
      ++window_waits_;
    }
    for (const int64_t w : waits) unref(entries_[w].block);
  }

  bool trl_keys_on() const { return trl_ && c_.use_streams; }
  // The save takes the key over (kept) when a tensor of this forward holds it (offloaded and still
  // in the window, or kept so).
  bool trl_keeps(const Trace::Slot& slot) {
    if (slot.generation != trl_keys_generation_) {
      trl_keys_.clear();
      trl_keys_generation_ = slot.generation;
    }
    auto it = trl_keys_.find(trl_key(slot.block, slot.span_lo, slot.item_bytes));
    if (it == trl_keys_.end()) return false;
    it->second = slot.id;
    return true;
  }

  int64_t find_duplicate(const Trace::Slot& slot) const {
    if (!live_[slot.block]) return -1;
    auto [first, last] = by_block_.equal_range(slot.block);
    for (auto it = first; it != last; ++it) {
      const Entry& e = entries_[it->second];
      if (!e.alive || e.version != slot.version) continue;
      const int64_t lo = slot.span_lo;
      const int64_t hi = slot.span_lo + slot.bytes;
      if (e.span_lo <= lo && hi <= e.span_lo + e.bytes && (lo - e.span_lo) % slot.item_bytes == 0) {
        return it->second;
      }
    }
    return -1;
  }

  void make_room(const Trace::Slot& incoming, std::vector<int64_t>& waits) {
    if (!trl_) {
      // Finished copies leave the window first, wherever they are in it.
      for (auto it = fwd_.begin(); it != fwd_.end();) {
        Entry& e = entries_[*it];
        if (e.d2h_end <= now_) {
          it = fwd_.erase(it);
          e.in_fwd = false;
          unhold(e.block);
          unref(e.block);
        } else {
          ++it;
        }
      }
    }
    const int64_t incoming_bytes =
        held_bytes(incoming.block) > 0 ? 0 : t_.blocks[incoming.block].bytes;
    const auto must_go = [&](const Entry& oldest) {
      if (trl_) return oldest.id <= incoming.id - c_.max_fwd_stash_size;
      return static_cast<int64_t>(fwd_.size()) >= c_.max_fwd_stash_size ||
             (c_.max_fwd_stash_bytes > 0 && fwd_bytes_ + incoming_bytes > c_.max_fwd_stash_bytes);
    };
    while (!fwd_.empty() && must_go(entries_[fwd_.front()])) {
      const int64_t index = fwd_.front();
      fwd_.pop_front();
      Entry& e = entries_[index];
      e.in_fwd = false;
      if (trl_keys_on()) {
        // Its key goes with it, unless a kept duplicate took the key over.
        auto it = trl_keys_.find(trl_key(e.block, e.span_lo, e.item_bytes));
        if (it != trl_keys_.end() && it->second == e.id) trl_keys_.erase(it);
      }
      unhold(e.block);
      waits.push_back(index);  // its reference goes after the wait
    }
  }

  void reload(Entry& e, bool prefetch) {
    add_mem(e.bytes);
    // On the stream that consumes it (the compute stream), as the engine allocates it.
    if (e.bytes > 0) e.buffer = alloc_.allocate(e.bytes);
    reloaded_ += e.bytes;
    e.device = true;
    e.from_hold = false;
    e.reloaded = true;
    e.prefetched = prefetch;
    e.h2d_end = copy(e.bytes, /*d2h=*/false, prefetch);
  }

  void unpack(int64_t s) {
    const int64_t index = slot_entry_[s];
    if (index < 0) return;
    Entry& e = entries_[index];
    if (!e.device) {
      if (e.in_fwd) {
        // Backward began before the copy was known complete: the held block serves it.
        leave_window(e);
        e.device = true;
        e.from_hold = true;
        e.reloaded = false;
      } else {
        reload(e, /*prefetch=*/false);
      }
    }
    e.prefetched = false;
    const bool wait = e.reloaded && e.h2d_end > now_;
    const int64_t until = e.h2d_end;
    prefetch_before(e);
    if (wait) block_until(until, /*is_wait=*/true);
  }

  void prefetch_before(const Entry& e) {
    if (c_.prefetch == 0 || !c_.use_streams || trl_) return;
    int64_t looked = 0;
    for (int64_t p = e.chain_prev; p >= 0 && looked < c_.prefetch; p = entries_[p].chain_prev) {
      ++looked;
      Entry& q = entries_[p];
      if (!q.device && !q.in_fwd) reload(q, /*prefetch=*/true);
    }
  }

  void release_device(Entry& e) {
    if (!e.device) return;
    if (e.from_hold) {
      unref(e.block);
    } else {
      mem_ -= e.bytes;
      // A buffer whose copy may still be filling it is recorded on the copy stream, as the engine
      // does: reused once that stream is done.
      if (e.reloaded && e.h2d_end > now_) alloc_.record_stream(e.buffer, kCopyStream);
      alloc_.free(std::exchange(e.buffer, 0));
    }
    e.device = e.from_hold = e.reloaded = e.prefetched = false;
  }

  void release(int64_t s) {
    if (slot_kept_[s]) {
      slot_kept_[s] = false;
      unref(t_.slots[s].block);
      return;
    }
    const int64_t index = slot_entry_[s];
    if (index < 0) return;
    slot_entry_[s] = -1;
    Entry& e = entries_[index];
    if (--e.slots > 0) return;
    if (e.in_fwd) {
      leave_window(e);
      unref(e.block);
    }
    release_device(e);
    e.alive = false;
    auto [first, last] = by_block_.equal_range(e.block);
    for (auto it = first; it != last; ++it) {
      if (it->second == index) {
        by_block_.erase(it);
        break;
      }
    }
    if (e.chain_next >= 0) {
      entries_[e.chain_next].chain_prev = e.chain_prev;
    } else if (auto it = chain_tail_.find(e.generation);
               it != chain_tail_.end() && it->second == index) {
      if (e.chain_prev >= 0) {
        it->second = e.chain_prev;
      } else {
        chain_tail_.erase(it);
      }
    }
    if (e.chain_prev >= 0) entries_[e.chain_prev].chain_next = e.chain_next;
  }

  // The engine gives back what backward brought in and nobody released (unconsumed prefetches).
  void end_of_backward() {
    for (Entry& e : entries_) {
      if (e.alive && e.device) release_device(e);
    }
  }

  // As the runner measures it: copy time overlapped by the compute thread's busy time (forward
  // and backward, less its waits and the copies it ran itself).
  double hidden_pct() const {
    if (copy_events_.empty()) return 0.0;
    std::vector<TimelineEvent> events = copy_events_;
    std::vector<std::pair<int64_t, int64_t>> blocked = blocked_;
    std::sort(blocked.begin(), blocked.end());
    if (forward_begin_ >= 0 && backward_end_ >= 0) {
      int64_t cursor = forward_begin_;
      for (auto [b, e] : blocked) {
        if (e <= cursor || b >= backward_end_) continue;
        if (b > cursor) events.push_back(event_span(EventKind::Compute, cursor, b));
        cursor = std::max(cursor, e);
      }
      if (cursor < backward_end_) {
        events.push_back(event_span(EventKind::Compute, cursor, backward_end_));
      }
    }
    if (std::none_of(events.begin(), events.end(),
                     [](const TimelineEvent& e) { return e.kind == EventKind::Compute; })) {
      return 0.0;
    }
    return compute_overlap(events).hidden_pct;
  }

  const Trace& t_;
  const EngineConfig& c_;
  const LinkModel link_;
  const bool trl_;
  const bool cpu_;  // on this CPU's clock, an offloading point: hooks and copy rate count
  AllocatorModel& alloc_;
  std::vector<int64_t>& handles_;
  std::map<TrlKey, int64_t> trl_keys_;  // key -> id of the save holding it (trl_keys_on())
  uint64_t trl_keys_generation_ = 0;
  std::vector<bool> live_, dead_;
  std::vector<int64_t> refs_;
  std::vector<int64_t> slot_entry_;
  std::vector<bool> slot_kept_;
  std::vector<Entry> entries_;
  std::unordered_multimap<int64_t, int64_t> by_block_;
  std::unordered_map<uint64_t, int64_t> chain_tail_;
  std::deque<int64_t> fwd_;
  std::unordered_map<int64_t, int64_t> held_;
  int64_t fwd_bytes_ = 0;
  int64_t mem_ = 0, peak_ = 0;
  int64_t now_ = 0, delay_ = 0, copy_free_ = 0;
  int64_t forward_begin_ = -1, forward_end_ = -1, backward_end_ = -1;
  int64_t offloaded_ = 0, reloaded_ = 0, copies_ = 0, window_waits_ = 0, waits_ = 0;
  int64_t hooks_ns_ = 0, copy_ns_ = 0, first_copy_at_ = 0;
  std::vector<TimelineEvent> copy_events_;
  std::vector<std::pair<int64_t, int64_t>> blocked_;
};

}  // namespace

Prediction predict(const Trace& trace, const EngineConfig& config, const LinkModel& link) {
  if (!trace.replays(config)) {
    throw std::invalid_argument(
        "a trace recorded under " + std::string(to_string(trace.semantics)) + " semantics, " +
        "checkpoint " + to_string(trace.checkpoint) + ", offload " +
        std::string(to_string(trace.offload_set)) + " cannot predict a point under " +
        std::string(to_string(config.semantics)) + ", checkpoint " + to_string(config.checkpoint) +
        ", offload " + std::string(to_string(config.offload_set)) +
        (replayable(config) ? "" : " (the disk tier and layer offloading are measured)"));
  }
  if (config.offload && config.max_fwd_stash_size < 1) {
    throw std::invalid_argument("max_fwd_stash_size must be >= 1, got " +
                                std::to_string(config.max_fwd_stash_size));
  }
  // Reserved memory depends on what the allocator cached before the step: the blocks from before
  // it (the model's weights and state, one by one where the trace knows them, the rest as one
  // block), then the step once as the warm-up the runner measures after, its blocks still held at
  // its end given back (the next step's take their place), then the step measured.
  AllocatorModel alloc;
  std::vector<int64_t> handles(trace.blocks.size(), 0);
  int64_t known = 0;
  for (size_t b = 0; b < trace.blocks.size(); ++b) {
    if (!trace.blocks[b].before_step || trace.blocks[b].bytes <= 0) continue;
    handles[b] = alloc.allocate(trace.blocks[b].bytes);
    known += trace.blocks[b].bytes;
  }
  if (trace.base_allocated > known) alloc.allocate(trace.base_allocated - known);
  Replay(trace, config, link, alloc, handles).run();
  for (size_t b = 0; b < trace.blocks.size(); ++b) {
    if (!trace.blocks[b].before_step) alloc.free(std::exchange(handles[b], 0));
  }
  alloc.reset_peak();
  return Replay(trace, config, link, alloc, handles).run();
}

PointRecord as_point(int64_t index, const EngineConfig& config, const Prediction& prediction) {
  PointRecord p;
  p.index = index;
  p.config = config;
  p.status = PointStatus::Ok;
  RunSummary& s = p.summary;
  s.step_ms_median = s.step_ms_min = s.step_ms_max = prediction.step_ms();
  // Every replayed step is the same: an exact interval (a level above 0 with zero width).
  s.step_ms_ci_low = s.step_ms_ci_high = prediction.step_ms();
  s.step_ms_ci_level = 1.0;
  s.peak_allocated = prediction.peak_allocated;
  s.peak_reserved = prediction.peak_reserved;
  s.offloaded_bytes = prediction.offloaded_bytes;
  s.reloaded_bytes = prediction.reloaded_bytes;
  s.hidden_copy_pct = prediction.hidden_copy_pct;
  s.host_bytes_peak = prediction.offloaded_bytes;
  return p;
}

PointPrediction as_prediction_record(int64_t index, const Prediction& prediction,
                                     const std::string& source) {
  PointPrediction p;
  p.index = index;
  p.step_ns = prediction.step_ns;
  p.peak_allocated = prediction.peak_allocated;
  p.peak_reserved = prediction.peak_reserved;
  p.hidden_copy_pct = prediction.hidden_copy_pct;
  p.offloaded_bytes = prediction.offloaded_bytes;
  p.predictor = (source.empty() ? std::string("what-if") : "what-if (" + source + ")") +
                ", offtune " + std::string(kVersion);
  p.created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return p;
}

std::vector<bool> predicted_front(const std::vector<Prediction>& predicted) {
  const size_t n = predicted.size();
  std::vector<bool> front(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Prediction& y = predicted[i];
    bool dominated = false;
    for (size_t j = 0; j < n && !dominated; ++j) {
      const Prediction& x = predicted[j];
      const bool no_worse = x.peak_allocated <= y.peak_allocated && x.step_ns <= y.step_ns;
      const bool better = x.peak_allocated < y.peak_allocated || x.step_ns < y.step_ns;
      // A point predicted exactly as an earlier one (the same copies, or none) is the same
      // measurement: the earlier one stands for it.
      dominated = j != i && no_worse && (better || j < i);
    }
    front[i] = !dominated;
  }
  return front;
}

std::vector<int64_t> points_that_matter(const std::vector<EngineConfig>& configs,
                                        const std::vector<Prediction>& predicted) {
  if (configs.size() != predicted.size()) {
    throw std::invalid_argument("points_that_matter: one prediction per point");
  }
  const size_t n = configs.size();
  const std::vector<bool> on_front = predicted_front(predicted);
  std::vector<bool> keep(n, false);
  std::vector<size_t> front;
  for (size_t i = 0; i < n; ++i) {
    if (!configs[i].offload) keep[i] = true;  // the baseline, which every slowdown refers to
    if (on_front[i]) {
      keep[i] = true;
      front.push_back(i);
    }
  }
  // A front point's neighbours are one step away in min_offload_size or max_fwd_stash_size, every
  // other knob the same.
  const Knob& size = knob("min_offload_size");
  const Knob& window = knob("max_fwd_stash_size");
  // Positions of a knob's value among the values the grid's offloading points take.
  const auto rank = [&](const Knob& k) {
    const auto value = [&](const EngineConfig& c) { return std::get<int64_t>(k.get(c)); };
    std::vector<int64_t> values;
    for (const auto& c : configs) {
      if (c.offload) values.push_back(value(c));
    }
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    std::vector<int64_t> r(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (configs[i].offload) {
        r[i] = std::lower_bound(values.begin(), values.end(), value(configs[i])) - values.begin();
      }
    }
    return r;
  };
  const auto size_rank = rank(size);
  const auto window_rank = rank(window);
  const auto same_but_size_and_window = [&](const EngineConfig& a, const EngineConfig& b) {
    for (const Knob& k : knob_table()) {
      if (&k != &size && &k != &window && k.get(a) != k.get(b)) return false;
    }
    return true;
  };
  for (size_t f : front) {
    if (!configs[f].offload) continue;
    for (size_t i = 0; i < n; ++i) {
      if (!configs[i].offload || !same_but_size_and_window(configs[f], configs[i])) continue;
      const int64_t d =
          std::abs(size_rank[f] - size_rank[i]) + std::abs(window_rank[f] - window_rank[i]);
      if (d == 1) keep[i] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < n; ++i) {
    if (keep[i]) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace offtune::profiler
