#include "offtune/options.hpp"

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

#include "offtune/observer.hpp"

namespace offtune {

namespace {

// An enum's names, as options and the CLI spell them: to_string and parse_* read one table, so a
// name and its message cannot disagree.
template <class E>
struct Named {
  E value;
  std::string_view name;
};

template <class E, size_t N>
std::string_view name_of(const Named<E> (&names)[N], E value) {
  for (const Named<E>& n : names) {
    if (n.value == value) return n.name;
  }
  return "?";
}

// OptionsError naming `what` and the valid names when `text` is none of them.
template <class E, size_t N>
E parse_named(const Named<E> (&names)[N], std::string_view what, std::string_view text) {
  std::string valid;
  for (const Named<E>& n : names) {
    if (n.name == text) return n.value;
    valid += valid.empty() ? "" : ", ";
    valid += n.name;
  }
  throw OptionsError("unknown " + std::string(what) + " '" + std::string(text) +
                     "' (valid: " + valid + ")");
}

constexpr Named<BackendKind> kBackends[] = {
    {BackendKind::Auto, "auto"}, {BackendKind::Cuda, "cuda"}, {BackendKind::HostSim, "host-sim"}};
constexpr Named<Semantics> kSemantics[] = {{Semantics::Offtune, "offtune"},
                                           {Semantics::Trl, "trl"}};
constexpr Named<OffloadSet> kOffloadSets[] = {{OffloadSet::All, "all"},
                                              {OffloadSet::Boundaries, "boundaries"}};
constexpr Named<Tier> kTiers[] = {{Tier::Host, "host"}, {Tier::Disk, "disk"}, {Tier::Auto, "auto"}};
constexpr Named<AllocSegments> kAllocSegments[] = {{AllocSegments::Env, "env"},
                                                   {AllocSegments::Fixed, "fixed"},
                                                   {AllocSegments::Expandable, "expandable"}};

}  // namespace

std::string_view to_string(BackendKind kind) { return name_of(kBackends, kind); }

BackendKind parse_backend(std::string_view text) {
  if (text == "hostsim" || text == "host_sim") return BackendKind::HostSim;  // accepted spellings
  return parse_named(kBackends, "backend", text);
}

std::string_view to_string(Semantics semantics) { return name_of(kSemantics, semantics); }

Semantics parse_semantics(std::string_view text) {
  return parse_named(kSemantics, "semantics", text);
}

std::string_view to_string(OffloadSet set) { return name_of(kOffloadSets, set); }

OffloadSet parse_offload_set(std::string_view text) {
  return parse_named(kOffloadSets, "offload set", text);
}

std::string_view to_string(Tier tier) { return name_of(kTiers, tier); }

Tier parse_tier(std::string_view text) { return parse_named(kTiers, "tier", text); }

std::string_view to_string(AllocSegments segments) { return name_of(kAllocSegments, segments); }

AllocSegments parse_alloc_segments(std::string_view text) {
  return parse_named(kAllocSegments, "alloc segments", text);
}

int64_t LinkModel::copy_ns(int64_t bytes, bool pinned) const {
  if (!enabled()) return 0;
  double gbps = pinned ? pinned_gbps : (pageable_gbps > 0.0 ? pageable_gbps : pinned_gbps / 2.0);
  const double transfer =
      gbps > 0.0 ? static_cast<double>(bytes) / gbps : 0.0;  // bytes/(GB/s) = ns
  return latency_ns + static_cast<int64_t>(std::llround(transfer));
}

LinkModel LinkModel::pcie4() { return LinkModel{24.0, 10.0, 10'000}; }
LinkModel LinkModel::pcie5() { return LinkModel{48.0, 16.0, 8'000}; }
LinkModel LinkModel::nvlink_c2c() { return LinkModel{350.0, 120.0, 3'000}; }

void OffloadOptions::validate() const {
  auto fail = [](const std::string& msg) { throw OptionsError(msg); };
  if (min_offload_size < 0) {
    fail("min_offload_size must be >= 0 bytes, got " + std::to_string(min_offload_size));
  }
  if (max_fwd_stash_size < 1) {
    fail("max_fwd_stash_size must be at least 1, got " + std::to_string(max_fwd_stash_size));
  }
  if (max_fwd_stash_bytes < 0) {
    fail("max_fwd_stash_bytes must be >= 0 (0 = no byte bound), got " +
         std::to_string(max_fwd_stash_bytes));
  }
  if (prefetch < 0) fail("prefetch must be >= 0, got " + std::to_string(prefetch));
  if (max_prefetch_bytes < 0) {
    fail("max_prefetch_bytes must be >= 0 (0 = no byte bound), got " +
         std::to_string(max_prefetch_bytes));
  }
  if (device_index < -1) {
    fail("device_index must be >= 0, or -1 for the current device, got " +
         std::to_string(device_index));
  }
  if (debug_copy_delay_ns < 0) {
    fail("debug_copy_delay_ns must be >= 0, got " + std::to_string(debug_copy_delay_ns));
  }
  if (!(host_ram_warn_percent > 0.0 && host_ram_warn_percent <= 100.0)) {
    fail("host_ram_warn_percent must be in (0, 100], got " + std::to_string(host_ram_warn_percent));
  }
  if (host_pool_slab_bytes < (int64_t{1} << 20)) {
    fail("host_pool_slab_bytes must be at least 1 MiB, got " +
         std::to_string(host_pool_slab_bytes));
  }
  if (tier != Tier::Host && tier != Tier::Disk && tier != Tier::Auto) {
    fail("tier must be host, disk or auto, got " + std::to_string(static_cast<int>(tier)));
  }
  if (to_string(alloc_segments) == "?") {
    fail("alloc_segments must be env, fixed or expandable, got " +
         std::to_string(static_cast<int>(alloc_segments)));
  }
  if (host_budget_bytes < 0) {
    fail("host_budget_bytes must be >= 0 (0 = derived), got " + std::to_string(host_budget_bytes));
  }
  if (disk_arena_bytes < 0) {
    fail("disk_arena_bytes must be >= 0 (0 = grows as needed), got " +
         std::to_string(disk_arena_bytes));
  }
  if (disk_read_ahead_bytes < 0) {
    fail("disk_read_ahead_bytes must be >= 0 (0 = no read-ahead), got " +
         std::to_string(disk_read_ahead_bytes));
  }
  if (!(disk_min_gbps >= 0.0) || !std::isfinite(disk_min_gbps)) {
    fail("disk_min_gbps must be finite and >= 0 (0 = no bandwidth check), got " +
         std::to_string(disk_min_gbps));
  }
  if (debug_disk_faults.fail_write < 0 || debug_disk_faults.fail_read < 0 ||
      debug_disk_faults.error <= 0) {
    fail("debug_disk_faults: fail_write and fail_read must be >= 0 and error a positive errno");
  }
  if (!(link.pinned_gbps >= 0.0) || !std::isfinite(link.pinned_gbps) ||
      !(link.pageable_gbps >= 0.0) || !std::isfinite(link.pageable_gbps) || link.latency_ns < 0) {
    fail("link model values must be finite and >= 0");
  }
}

std::string_view to_string(PackDecision d) {
  switch (d) {
    case PackDecision::Offloaded:
      return "offloaded";
    case PackDecision::Deduplicated:
      return "deduplicated";
    case PackDecision::Kept:
      return "kept";
  }
  return "?";
}
std::string_view to_string(KeepReason r) {
  switch (r) {
    case KeepReason::None:
      return "none";
    case KeepReason::BelowThreshold:
      return "below-threshold";
    case KeepReason::Parameter:
      return "parameter";
    case KeepReason::RegisteredStorage:
      return "registered-storage";
    case KeepReason::NotOnDevice:
      return "not-on-device";
    case KeepReason::OtherDevice:
      return "other-device";
    case KeepReason::Unsupported:
      return "unsupported";
    case KeepReason::NotBoundary:
      return "not-boundary";
    case KeepReason::SharedInWindow:
      return "shared-in-window";
  }
  return "?";
}
std::string_view to_string(CopyDirection d) {
  switch (d) {
    case CopyDirection::DeviceToHost:
      return "d2h";
    case CopyDirection::HostToDevice:
      return "h2d";
    case CopyDirection::HostToDisk:
      return "disk-write";
    case CopyDirection::DiskToHost:
      return "disk-read";
  }
  return "?";
}
std::string_view to_string(UnpackSource s) {
  switch (s) {
    case UnpackSource::Kept:
      return "kept";
    case UnpackSource::ForwardStash:
      return "forward-stash";
    case UnpackSource::Reloaded:
      return "reloaded";
    case UnpackSource::Prefetched:
      return "prefetched";
  }
  return "?";
}
std::string_view to_string(WaitKind k) {
  switch (k) {
    case WaitKind::ForwardWindow:
      return "forward-window";
    case WaitKind::Reload:
      return "reload";
    case WaitKind::Drain:
      return "drain";
    case WaitKind::Spill:
      return "spill";
    case WaitKind::DiskRead:
      return "disk-read";
    case WaitKind::Weights:
      return "weights";
  }
  return "?";
}

}  // namespace offtune
