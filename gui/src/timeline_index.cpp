// The timeline's index (timeline.hpp): one run's events sorted into lanes, each with its
// level-of-detail pyramid, host-sim's compute slices, and each wait linked to the copy it waited
// on.
#include "offtune/gui/timeline.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "offtune/profiler/units.hpp"
#include "timeline_detail.hpp"
namespace offtune::gui {

using detail::to_ns;

namespace {

using profiler::EventKind;

// ---- building -----------------------------------------------------------------------------------

// Co-sorts a set's arrays by start when the run's events were not already in order.
template <typename Keys, typename... Columns>
void sort_by(Keys& keys, Columns&... columns) {
  if (std::is_sorted(keys.begin(), keys.end())) return;
  std::vector<uint32_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&keys](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  const auto apply = [&order](auto& column) {
    std::remove_reference_t<decltype(column)> sorted;
    sorted.reserve(column.size());
    for (uint32_t i : order) sorted.push_back(column[i]);
    column = std::move(sorted);
  };
  apply(keys);
  (apply(columns), ...);
}

struct FlagPresence {
  bool pageable = false;
  bool prefetch = false;
  bool forward = false;
};

void start_level(TimelineLevel& level, const FlagPresence& has, size_t reserve) {
  level.start.reserve(reserve);
  level.end.reserve(reserve);
  level.cum_count.reserve(reserve + 1);
  level.cum_bytes.reserve(reserve + 1);
  level.cum_busy.reserve(reserve + 1);
  level.cum_count.push_back(0);
  level.cum_bytes.push_back(0);
  level.cum_busy.push_back(0);
  if (has.pageable) level.cum_pageable.assign(1, 0);
  if (has.prefetch) level.cum_prefetch.assign(1, 0);
  if (has.forward) level.cum_forward.assign(1, 0);
}

struct BlockTotals {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t busy = 0;
  uint32_t pageable = 0;
  uint32_t prefetch = 0;
  uint32_t forward = 0;
};

void push_block(TimelineLevel& level, int64_t start, int64_t end, const BlockTotals& t) {
  level.start.push_back(start);
  level.end.push_back(end);
  level.cum_count.push_back(level.cum_count.back() + t.count);
  level.cum_bytes.push_back(level.cum_bytes.back() + t.bytes);
  level.cum_busy.push_back(level.cum_busy.back() + t.busy);
  if (!level.cum_pageable.empty())
    level.cum_pageable.push_back(level.cum_pageable.back() + t.pageable);
  if (!level.cum_prefetch.empty())
    level.cum_prefetch.push_back(level.cum_prefetch.back() + t.prefetch);
  if (!level.cum_forward.empty()) level.cum_forward.push_back(level.cum_forward.back() + t.forward);
}

// Level 0: the union of the events (sorted by start, possibly overlapping); touching events merge.
TimelineLevel union_level(const TimelineIntervals& set, const FlagPresence& has) {
  TimelineLevel level;
  start_level(level, has, set.size());
  const size_t n = set.size();
  size_t i = 0;
  while (i < n) {
    const int64_t block_start = set.start[i];
    int64_t block_end = set.end[i];
    BlockTotals t;
    for (; i < n && set.start[i] <= block_end; ++i) {
      block_end = std::max(block_end, set.end[i]);
      const TimelineEventInfo& info = set.info[i];
      ++t.count;
      t.bytes += info.bytes;
      t.pageable += (info.flags & kFlagPageable) ? 1 : 0;
      t.prefetch += (info.flags & kFlagPrefetch) ? 1 : 0;
      t.forward += (info.flags & kFlagForward) ? 1 : 0;
    }
    t.busy = block_end - block_start;  // one contiguous union
    push_block(level, block_start, block_end, t);
  }
  return level;
}

// The next level: blocks of `below` whose gaps are at most `threshold` merged.
TimelineLevel merge_level(const TimelineLevel& below, int64_t threshold, const FlagPresence& has) {
  TimelineLevel level;
  level.threshold_ns = threshold;
  const size_t n = below.size();
  start_level(level, has, n / 2 + 1);
  const auto flagged = [](const std::vector<uint32_t>& cum, size_t a, size_t b) {
    return static_cast<uint32_t>(TimelineLevel::flagged(cum, a, b));
  };
  size_t i = 0;
  while (i < n) {
    const size_t first = i;
    int64_t block_end = below.end[i];
    for (++i; i < n && below.start[i] - block_end <= threshold; ++i) block_end = below.end[i];
    BlockTotals t;
    t.count = below.count(first, i);
    t.bytes = below.bytes(first, i);
    t.busy = below.busy(first, i);
    t.pageable = flagged(below.cum_pageable, first, i);
    t.prefetch = flagged(below.cum_prefetch, first, i);
    t.forward = flagged(below.cum_forward, first, i);
    push_block(level, below.start[first], block_end, t);
  }
  return level;
}

// Below this many blocks a frame is cheap whatever the zoom: no coarser level is worth its memory.
constexpr size_t kCoarsestBlocks = 32;

void build_levels(TimelineIntervals& set) {
  set.levels.clear();
  if (set.size() == 0) return;
  FlagPresence has;
  for (const auto& info : set.info) {
    has.pageable |= (info.flags & kFlagPageable) != 0;
    has.prefetch |= (info.flags & kFlagPrefetch) != 0;
    has.forward |= (info.flags & kFlagForward) != 0;
  }
  set.levels.push_back(union_level(set, has));
  std::vector<int64_t> gaps;
  while (set.levels.back().size() > kCoarsestBlocks) {
    const TimelineLevel& below = set.levels.back();
    gaps.resize(below.size() - 1);
    for (size_t i = 0; i + 1 < below.size(); ++i) gaps[i] = below.start[i + 1] - below.end[i];
    // Merging every gap up to the median at least halves the blocks; rounding the threshold to a
    // power of two (and at least doubling it) keeps the levels a short, regular ladder.
    const auto mid = gaps.begin() + static_cast<std::ptrdiff_t>((gaps.size() - 1) / 2);
    std::nth_element(gaps.begin(), mid, gaps.end());
    const int64_t median = *mid;
    int64_t threshold = below.threshold_ns > 0 ? below.threshold_ns * 2 : 1;
    if (median > threshold) {
      threshold = median < (int64_t{1} << 61)
                      ? static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(median)))
                      : median;
    }
    set.levels.push_back(merge_level(below, threshold, has));
  }
}

// Where an event goes: its lane and which of the lane's sets.
enum class Slot : uint8_t { Spans, Steps, Packs, Unpacks };
struct Destination {
  uint32_t lane = 0;
  Slot slot = Slot::Spans;
};

// Host-sim's compute slices are what is left of forward and backward once the waits are cut out
// (profiler/src/recorder.cpp, derive_compute_locked), all named "compute". Named here after what
// ends them or holds them: a wait starting where the slice ends, else the phase.
template <typename Intern>
void name_compute_slices(TimelineIndex& index,
                         const std::unordered_map<std::string_view, uint32_t>& name_ids,
                         Intern&& intern, uint32_t phases_lane, uint32_t first_compute,
                         uint32_t after_compute, uint32_t waits_lane) {
  const auto generic = name_ids.find(std::string_view("compute"));
  if (generic == name_ids.end()) return;
  const TimelineIntervals& phases = index.lanes[phases_lane].spans;
  const TimelineIntervals& waits = index.lanes[waits_lane].spans;
  uint32_t forward = 0;
  uint32_t backward = 0;
  std::unordered_map<int64_t, uint32_t> before_wait;  // by tensor
  for (uint32_t l = first_compute; l < after_compute; ++l) {
    TimelineIntervals& set = index.lanes[l].spans;
    for (size_t i = 0; i < set.size(); ++i) {
      TimelineEventInfo& info = set.info[i];
      if (info.name != generic->second) continue;
      const auto w = std::lower_bound(waits.start.begin(), waits.start.end(), set.end[i]);
      if (w != waits.start.end() && *w == set.end[i]) {
        const TimelineEventInfo& wait = waits.info[static_cast<size_t>(w - waits.start.begin())];
        if (wait.tensor >= 0) {
          auto it = before_wait.find(wait.tensor);
          if (it == before_wait.end()) {
            it = before_wait
                     .emplace(wait.tensor, intern("compute before wait on tensor " +
                                                  std::to_string(wait.tensor)))
                     .first;
          }
          info.name = it->second;
        } else {
          const std::string& kind = index.names[wait.name];
          info.name = intern(kind.empty() ? std::string("compute before wait")
                                          : "compute before " + kind + " wait");
        }
        continue;
      }
      // The phase holding the slice's start: the last one starting at or before it.
      const auto p = std::upper_bound(phases.start.begin(), phases.start.end(), set.start[i]);
      if (p == phases.start.begin()) continue;
      const size_t k = static_cast<size_t>(p - phases.start.begin()) - 1;
      if (phases.end[k] < set.start[i]) continue;
      if (phases.info[k].flags & kFlagForward) {
        if (forward == 0) forward = intern("forward compute");
        info.name = forward;
      } else {
        if (backward == 0) backward = intern("backward compute");
        info.name = backward;
      }
    }
  }
}

// Each wait on a tensor, linked to the copy it waited on: the latest copy of that tensor that
// started before the wait ended, offloads (D2H) for a forward-window wait, reloads (H2D) for a
// reload wait, either for a wait of another or no kind (drains wait for every copy: no link).
void link_waits_to_copies(TimelineIndex& index, uint32_t d2h_lane, uint32_t h2d_lane,
                          uint32_t waits_lane) {
  const TimelineIntervals& waits = index.lanes[waits_lane].spans;
  if (std::none_of(waits.info.begin(), waits.info.end(),
                   [](const TimelineEventInfo& i) { return i.tensor >= 0; })) {
    return;
  }
  struct CopyRef {
    int64_t tensor;
    uint32_t lane;
    int64_t start;
    uint32_t index;
  };
  const auto key = [](const CopyRef& c) { return std::tie(c.tensor, c.lane, c.start); };
  std::vector<CopyRef> copies;
  for (uint32_t lane : {d2h_lane, h2d_lane}) {
    const TimelineIntervals& set = index.lanes[lane].spans;
    for (size_t i = 0; i < set.size(); ++i) {
      if (set.info[i].tensor >= 0) {
        copies.push_back({set.info[i].tensor, lane, set.start[i], static_cast<uint32_t>(i)});
      }
    }
  }
  std::sort(copies.begin(), copies.end(),
            [&key](const CopyRef& a, const CopyRef& b) { return key(a) < key(b); });
  // The last copy of `tensor` in `lane` that started before `before`.
  const auto latest = [&](int64_t tensor, uint32_t lane, int64_t before) -> const CopyRef* {
    const CopyRef probe{tensor, lane, before, 0};
    const auto it =
        std::lower_bound(copies.begin(), copies.end(), probe,
                         [&key](const CopyRef& a, const CopyRef& b) { return key(a) < key(b); });
    if (it == copies.begin()) return nullptr;
    const CopyRef& c = *(it - 1);
    return c.tensor == tensor && c.lane == lane ? &c : nullptr;
  };
  for (size_t w = 0; w < waits.size(); ++w) {
    const TimelineEventInfo& info = waits.info[w];
    if (info.tensor < 0) continue;
    const std::string& kind = index.names[info.name];
    const CopyRef* copy = nullptr;
    if (kind == "forward-window") {
      copy = latest(info.tensor, d2h_lane, waits.end[w]);
    } else if (kind == "reload") {
      copy = latest(info.tensor, h2d_lane, waits.end[w]);
    } else if (kind != "drain") {
      const CopyRef* out = latest(info.tensor, d2h_lane, waits.end[w]);
      const CopyRef* in = latest(info.tensor, h2d_lane, waits.end[w]);
      copy = !in || (out && out->start > in->start) ? out : in;
    }
    if (!copy) continue;
    TimelineFlow flow;
    flow.from_ns = index.lanes[copy->lane].spans.end[copy->index];
    flow.to_ns = waits.end[w];
    flow.from_lane = copy->lane;
    flow.copy = copy->index;
    flow.wait = static_cast<uint32_t>(w);
    index.flows.push_back(flow);
  }
  std::stable_sort(index.flows.begin(), index.flows.end(),
                   [](const TimelineFlow& a, const TimelineFlow& b) { return a.to_ns < b.to_ns; });
}

}  // namespace

std::pair<int64_t, int64_t> run_time_bounds(const RunData& run) {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  for (const auto& e : run.events) {
    lo = std::min(lo, e.start_ns);
    hi = std::max(hi, std::max(e.start_ns, e.end_ns));
  }
  for (const auto& s : run.steps) {
    lo = std::min(lo, s.begin_ns);
    hi = std::max(hi, std::max(s.begin_ns, s.end_ns));
  }
  for (const auto& o : run.occupancy) {
    lo = std::min(lo, o.time_ns);
    hi = std::max(hi, o.time_ns);
  }
  if (lo > hi) return {0, 0};
  return {lo, hi};
}

// ---- index ------------------------------------------------------------------------------------

const TimelineLane* TimelineIndex::lane(LaneKind kind) const {
  for (const auto& l : lanes) {
    if (l.kind == kind) return &l;
  }
  return nullptr;
}

std::shared_ptr<const TimelineIndex> build_timeline_index(const RunData& run) {
  auto index = std::make_shared<TimelineIndex>();
  const auto& events = run.events;

  // Compute streams: one lane each when there are a few, else one lane for all.
  std::vector<int64_t> compute_streams;
  bool too_many_streams = false;
  for (const auto& e : events) {
    if (e.kind != EventKind::Compute || too_many_streams) continue;
    if (std::find(compute_streams.begin(), compute_streams.end(), e.stream) !=
        compute_streams.end()) {
      continue;
    }
    compute_streams.push_back(e.stream);
    too_many_streams = compute_streams.size() > TimelineIndex::kMaxComputeLanes;
  }
  std::sort(compute_streams.begin(), compute_streams.end());
  const bool split_compute = compute_streams.size() > 1 && !too_many_streams;

  auto& lanes = index->lanes;
  const auto add_lane = [&lanes](LaneKind kind, std::string label, int64_t stream = -1) {
    TimelineLane lane;
    lane.kind = kind;
    lane.label = std::move(label);
    lane.stream = stream;
    lanes.push_back(std::move(lane));
    return static_cast<uint32_t>(lanes.size() - 1);
  };
  const uint32_t phases = add_lane(LaneKind::Phases, "phases");
  const uint32_t first_compute = static_cast<uint32_t>(lanes.size());
  if (split_compute) {
    for (int64_t s : compute_streams)
      add_lane(LaneKind::Compute, "compute s" + std::to_string(s), s);
  } else {
    add_lane(LaneKind::Compute, "compute");
  }
  const uint32_t d2h = add_lane(LaneKind::CopyD2H, "copy D2H");
  const uint32_t h2d = add_lane(LaneKind::CopyH2D, "copy H2D");
  // Layer offloading's weight copies, apart from the activations' reloads on a lane of their own.
  const bool have_weights = std::any_of(events.begin(), events.end(),
                                        [](const auto& e) { return profiler::is_weight_copy(e); });
  const uint32_t weights = have_weights ? add_lane(LaneKind::CopyH2D, "weights H2D") : h2d;
  const uint32_t waits = add_lane(LaneKind::Waits, "waits");
  const uint32_t instants = add_lane(LaneKind::PackUnpack, "pack / unpack");
  const bool have_disk = std::any_of(events.begin(), events.end(),
                                     [](const auto& e) { return profiler::is_disk(e.kind); });
  const uint32_t disk = have_disk ? add_lane(LaneKind::Disk, "disk") : instants;

  int64_t last_stream = std::numeric_limits<int64_t>::min();
  uint32_t last_compute_lane = first_compute;
  const auto destination = [&](const profiler::TimelineEvent& e) -> Destination {
    switch (e.kind) {
      case EventKind::Step:
        return {phases, Slot::Steps};
      case EventKind::Forward:
      case EventKind::Backward:
        return {phases, Slot::Spans};
      case EventKind::Compute:
        if (!split_compute) return {first_compute, Slot::Spans};
        if (e.stream != last_stream) {  // kernels come in long runs on one stream
          last_stream = e.stream;
          const auto it =
              std::lower_bound(compute_streams.begin(), compute_streams.end(), e.stream);
          last_compute_lane = first_compute + static_cast<uint32_t>(it - compute_streams.begin());
        }
        return {last_compute_lane, Slot::Spans};
      case EventKind::CopyD2H:
        return {d2h, Slot::Spans};
      case EventKind::CopyH2D:
        return {profiler::is_weight_copy(e) ? weights : h2d, Slot::Spans};
      case EventKind::Wait:
        return {waits, Slot::Spans};
      case EventKind::Recompute:
        return {phases, Slot::Spans};
      case EventKind::Pack:
        return {instants, Slot::Packs};
      case EventKind::Unpack:
        return {instants, Slot::Unpacks};
      case EventKind::DiskWrite:
      case EventKind::DiskRead:
        return {disk, Slot::Spans};
    }
    return {first_compute, Slot::Spans};
  };
  const auto intervals_of = [&lanes](Destination d) -> TimelineIntervals& {
    return d.slot == Slot::Steps ? lanes[d.lane].steps : lanes[d.lane].spans;
  };
  const auto instants_of = [&lanes](Destination d) -> TimelineInstants& {
    return d.slot == Slot::Packs ? lanes[d.lane].packs : lanes[d.lane].unpacks;
  };

  // Two passes: count, reserve, fill (a million push_backs with regrowth cost more than a scan).
  {
    std::vector<std::array<size_t, 4>> counts(lanes.size(), std::array<size_t, 4>{});
    for (const auto& e : events) {
      const Destination d = destination(e);
      ++counts[d.lane][static_cast<size_t>(d.slot)];
    }
    for (size_t l = 0; l < lanes.size(); ++l) {
      lanes[l].spans.start.reserve(counts[l][0]);
      lanes[l].spans.end.reserve(counts[l][0]);
      lanes[l].spans.info.reserve(counts[l][0]);
      lanes[l].steps.start.reserve(counts[l][1]);
      lanes[l].steps.end.reserve(counts[l][1]);
      lanes[l].steps.info.reserve(counts[l][1]);
      lanes[l].packs.time.reserve(counts[l][2]);
      lanes[l].packs.info.reserve(counts[l][2]);
      lanes[l].unpacks.time.reserve(counts[l][3]);
      lanes[l].unpacks.info.reserve(counts[l][3]);
    }
  }

  index->names.emplace_back();
  // Keys view the run's strings, which outlive this function; names holds the copies.
  std::unordered_map<std::string_view, uint32_t> name_ids;
  name_ids.emplace(std::string_view(), 0);
  std::string_view last_name;
  uint32_t last_name_id = 0;

  for (const auto& e : events) {
    const size_t kind = static_cast<size_t>(e.kind);
    if (kind < kEventKindCount) ++index->kind_counts[kind];
    const int64_t end = std::max(e.start_ns, e.end_ns);

    TimelineEventInfo info;
    info.bytes = e.bytes;
    info.tensor = e.tensor;
    info.stream = e.stream;
    info.kind = e.kind;
    if (!e.name.empty()) {
      if (e.name != last_name) {
        // find() before emplace(): emplace builds a node even for a name already there.
        auto it = name_ids.find(std::string_view(e.name));
        if (it == name_ids.end()) {
          it =
              name_ids.emplace(std::string_view(e.name), static_cast<uint32_t>(index->names.size()))
                  .first;
          index->names.push_back(e.name);
        }
        last_name = e.name;
        last_name_id = it->second;
      }
      info.name = last_name_id;
    }
    const bool copy = e.kind == EventKind::CopyD2H || e.kind == EventKind::CopyH2D;
    if (copy && !e.pinned) info.flags |= kFlagPageable;
    if (e.prefetch) info.flags |= kFlagPrefetch;
    if (e.kind == EventKind::Forward) info.flags |= kFlagForward;

    const Destination d = destination(e);
    if (d.slot == Slot::Packs || d.slot == Slot::Unpacks) {
      TimelineInstants& set = instants_of(d);
      set.time.push_back(e.start_ns);
      set.info.push_back(info);
    } else {
      TimelineIntervals& set = intervals_of(d);
      set.start.push_back(e.start_ns);
      set.end.push_back(end);
      set.info.push_back(info);
    }
  }
  index->event_count = static_cast<int64_t>(events.size());

  std::tie(index->begin_ns, index->end_ns) = run_time_bounds(run);

  for (auto& lane : lanes) {
    for (TimelineIntervals* set : {&lane.spans, &lane.steps}) {
      sort_by(set->start, set->end, set->info);
      for (size_t i = 0; i < set->size(); ++i) {
        set->max_duration_ns = std::max(set->max_duration_ns, set->end[i] - set->start[i]);
        if (set->info[i].flags & kFlagPageable) set->pageable.push_back(static_cast<uint32_t>(i));
      }
      build_levels(*set);
    }
    for (TimelineInstants* set : {&lane.packs, &lane.unpacks}) {
      sort_by(set->time, set->info);
      set->cum_bytes.resize(set->size() + 1);
      set->cum_bytes[0] = 0;
      for (size_t i = 0; i < set->size(); ++i) {
        set->cum_bytes[i + 1] = set->cum_bytes[i] + set->info[i].bytes;
      }
    }
  }

  // Names made here (not in the run): looked up among the run's first, then kept apart, since
  // name_ids' keys view the run's strings.
  std::unordered_map<std::string, uint32_t> made_ids;
  const auto intern = [&](std::string name) {
    if (const auto it = name_ids.find(std::string_view(name)); it != name_ids.end()) {
      return it->second;
    }
    const auto [it, fresh] =
        made_ids.emplace(std::move(name), static_cast<uint32_t>(index->names.size()));
    if (fresh) index->names.push_back(it->first);
    return it->second;
  };
  name_compute_slices(*index, name_ids, intern, phases, first_compute, d2h, waits);
  link_waits_to_copies(*index, d2h, h2d, waits);
  return index;
}

}  // namespace offtune::gui
