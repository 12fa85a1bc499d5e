// Text names of the record enums. These strings are stored in the database and appear in exports
// and on the command line, so they are part of the file format: never rename one, only add.
#include "offtune/profiler/records.hpp"

#include <array>
#include <charconv>
#include <stdexcept>
#include <string>
#include <utility>

namespace offtune::profiler {
namespace {

template <typename E, size_t N>
using NameTable = std::array<std::pair<E, const char*>, N>;

constexpr NameTable<RunStatus, 5> kRunStatusNames{{
    {RunStatus::Running, "running"},
    {RunStatus::Ok, "ok"},
    {RunStatus::Failed, "failed"},
    {RunStatus::OutOfMemory, "oom"},
    {RunStatus::Interrupted, "interrupted"},
}};

constexpr NameTable<EventKind, 12> kEventKindNames{{
    {EventKind::Step, "step"},
    {EventKind::Forward, "forward"},
    {EventKind::Backward, "backward"},
    {EventKind::Compute, "compute"},
    {EventKind::CopyD2H, "copy_d2h"},
    {EventKind::CopyH2D, "copy_h2d"},
    {EventKind::Pack, "pack"},
    {EventKind::Unpack, "unpack"},
    {EventKind::Wait, "wait"},
    {EventKind::DiskWrite, "disk_write"},
    {EventKind::DiskRead, "disk_read"},
    {EventKind::Recompute, "recompute"},
}};

constexpr NameTable<PointStatus, 4> kPointStatusNames{{
    {PointStatus::Pending, "pending"},
    {PointStatus::Ok, "ok"},
    {PointStatus::Failed, "failed"},
    {PointStatus::OutOfMemory, "oom"},
}};

template <typename E, size_t N>
const char* name_of(const NameTable<E, N>& table, E value) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  // Only reachable through a cast of an out-of-range integer; a visible marker beats a crash.
  return "?";
}

template <typename E, size_t N>
E parse_name(const NameTable<E, N>& table, const std::string& text, const char* what) {
  for (const auto& [v, name] : table) {
    if (text == name) return v;
  }
  // The message lists every valid value so that a typo on the command line is fixable from it.
  std::string valid;
  for (const auto& entry : table) {
    if (!valid.empty()) valid += ", ";
    valid += entry.second;
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + text + "' (valid: " + valid +
                              ")");
}

}  // namespace

const char* to_string(RunStatus s) { return name_of(kRunStatusNames, s); }
RunStatus parse_run_status(const std::string& s) {
  return parse_name(kRunStatusNames, s, "run status");
}

const char* to_string(EventKind k) { return name_of(kEventKindNames, k); }
EventKind parse_event_kind(const std::string& s) {
  return parse_name(kEventKindNames, s, "event kind");
}

const char* to_string(PointStatus s) { return name_of(kPointStatusNames, s); }
PointStatus parse_point_status(const std::string& s) {
  return parse_name(kPointStatusNames, s, "point status");
}

std::string describe_variant(const EngineConfig& c) {
  std::string out;
  for (const Knob& k : knob_table()) {
    if (!k.variant || (k.offload_only && !c.offload) || k.get(c) == default_value(k)) continue;
    out += (out.empty() ? "" : ", ") + k.words(c);
  }
  return out;
}

}  // namespace offtune::profiler
