#include "memory_history.hpp"

#include <algorithm>
#include <string>

namespace offtune::profiler::detail {

namespace {

// Per thread: how deep in the engine's unpack hooks it is, and the reload buffer it allocated
// there that no reload has named yet (an index into entries_, or -1).
thread_local int t_unpack_depth = 0;
thread_local int64_t t_unnamed_reload = -1;

const char* state_name(host_sim::MemoryBlock::State s) {
  switch (s) {
    case host_sim::MemoryBlock::State::Allocated:
      return "active_allocated";
    case host_sim::MemoryBlock::State::PendingFree:
      return "active_awaiting_free";
    case host_sim::MemoryBlock::State::Inactive:
      return "inactive";
  }
  return "inactive";
}

bool is_block_event(host_sim::MemoryEvent::Action a) {
  using A = host_sim::MemoryEvent::Action;
  return a == A::Alloc || a == A::FreeRequested || a == A::FreeCompleted;
}

}  // namespace

MemoryHistory::~MemoryHistory() { stop(); }

void MemoryHistory::start() {
  {
    std::lock_guard lock(mu_);
    listening_ = true;
    started_ = true;
  }
  host_sim::set_memory_history_listener(this);
}

void MemoryHistory::stop() {
  bool was = false;
  {
    std::lock_guard lock(mu_);
    was = listening_;
    listening_ = false;
  }
  if (was) host_sim::set_memory_history_listener(nullptr);
}

void MemoryHistory::on_memory_event(const host_sim::MemoryEvent& e) noexcept {
  using A = host_sim::MemoryEvent::Action;
  try {
    std::lock_guard lock(mu_);
    Entry entry{e, {}, false};
    switch (e.action) {
      case A::Alloc:
        if (t_unpack_depth > 0) {
          entry.note = "reloaded by offtune";
          t_unnamed_reload = static_cast<int64_t>(entries_.size());
        }
        live_[e.data] = entries_.size();
        break;
      case A::FreeRequested:
        if (auto it = live_.find(e.data); it != live_.end()) {
          entry.note = entries_[it->second].note;
          live_.erase(it);
        }
        freeing_[e.addr] = entry.note;
        break;
      case A::FreeCompleted:
        if (auto it = freeing_.find(e.addr); it != freeing_.end()) {
          entry.note = std::move(it->second);
          freeing_.erase(it);
        }
        break;
      default:
        break;
    }
    entries_.push_back(std::move(entry));
  } catch (...) {
    // Out of host memory while recording: the history misses this event rather than the run.
  }
}

void MemoryHistory::on_pack(const PackEvent& e) {
  if (e.decision != PackDecision::Offloaded || e.storage == 0) return;
  std::lock_guard lock(mu_);
  if (!listening_) return;
  auto it = live_.find(reinterpret_cast<const void*>(e.storage));
  if (it == live_.end()) return;
  std::string note = "offloaded by offtune: tensor " + std::to_string(e.id.value);
  entries_[it->second].note = note;
  // And when: an annotation of the live block, at the pack.
  Entry annotation{entries_[it->second].event, std::move(note), true};
  annotation.event.time_ns = e.time_ns;
  entries_.push_back(std::move(annotation));
}

void MemoryHistory::on_copy_issued(const CopyEvent& e) {
  if (e.direction != CopyDirection::HostToDevice || t_unnamed_reload < 0) return;
  std::lock_guard lock(mu_);
  if (static_cast<size_t>(t_unnamed_reload) < entries_.size()) {
    Entry& alloc = entries_[static_cast<size_t>(t_unnamed_reload)];
    alloc.note = e.weights ? "weights reloaded by offtune: block " + std::to_string(e.id.value)
                           : "reloaded by offtune: tensor " + std::to_string(e.id.value);
    Entry annotation{alloc.event, alloc.note, true};
    annotation.event.time_ns = e.time_ns;
    entries_.push_back(std::move(annotation));
  }
  t_unnamed_reload = -1;
}

void MemoryHistory::on_span_begin(Span span) {
  if (span.kind == SpanKind::Unpack) ++t_unpack_depth;
}

void MemoryHistory::on_span_end(Span span) {
  if (span.kind != SpanKind::Unpack) return;
  if (--t_unpack_depth <= 0) {
    t_unpack_depth = 0;
    t_unnamed_reload = -1;
  }
}

MemoryHistory::History MemoryHistory::finish(int64_t from_ns,
                                             const std::vector<StepRecord>& steps) {
  {
    std::lock_guard lock(mu_);
    if (!started_) return {};  // no measured step began: no history
  }
  const std::vector<host_sim::MemorySegment> segments = host_sim::memory_segments();
  stop();
  std::lock_guard lock(mu_);
  const auto with_step = [&](const std::string& note, int64_t time_ns) {
    std::string step;
    for (const StepRecord& s : steps) {
      if (time_ns >= s.begin_ns && time_ns <= s.end_ns) {
        step = "step " + std::to_string(s.step);
        break;
      }
    }
    if (note.empty()) return step;
    return step.empty() ? note : note + " (" + step + ")";
  };
  History out;
  // The notes of the blocks live now, by address, for the state.
  std::unordered_map<int64_t, std::string> live_notes;
  for (const auto& [data, index] : live_) {
    const Entry& a = entries_[index];
    live_notes[a.event.addr] = with_step(a.note, a.event.time_ns);
  }
  for (const Entry& entry : entries_) {
    const host_sim::MemoryEvent& e = entry.event;
    if (e.time_ns < from_ns) continue;
    MemoryEventRecord r;
    r.seq = static_cast<int64_t>(out.events.size());
    r.time_ns = e.time_ns;
    r.action = entry.annotation ? "annotate" : host_sim::to_string(e.action);
    r.addr = e.addr;
    r.size = e.size;
    r.block_size = e.block_size;
    r.stream = e.stream;
    r.device_free = e.device_free;
    if (entry.annotation || is_block_event(e.action)) r.note = with_step(entry.note, e.time_ns);
    out.events.push_back(std::move(r));
  }
  for (const host_sim::MemorySegment& s : segments) {
    for (const host_sim::MemoryBlock& b : s.blocks) {
      MemoryBlockRecord r;
      r.segment_addr = s.addr;
      r.segment_size = s.size;
      r.stream = s.stream;
      r.small_pool = s.small_pool;
      r.expandable = s.expandable;
      r.addr = b.addr;
      r.size = b.size;
      r.requested = b.requested;
      r.state = state_name(b.state);
      if (b.state == host_sim::MemoryBlock::State::Allocated) {
        if (auto it = live_notes.find(b.addr); it != live_notes.end()) r.note = it->second;
      }
      out.blocks.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace offtune::profiler::detail
