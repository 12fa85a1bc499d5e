// A recorded step in a file of its own (predict.hpp: save_trace, load_trace): how `offtune predict
// --script` gets the step its script's process recorded. JSON, one object:
//   {"format": "offtune-trace", "version": 1, "semantics", "checkpoint", "offload_set", "clock",
//    "device_model", "steps", "step_ns", "base_allocated", "d2h_bytes_per_ns", "h2d_bytes_per_ns",
//    "pack_hook_ns", "unpack_hook_ns",
//    "events": [[kind, time_ns, index], ...],   kind as Trace::Kind's value
//    "blocks": [[bytes, before_step], ...],
//    "slots": [[id, reason, block, storage_bytes, span_lo, bytes, weight, item_bytes, version,
//               generation], ...]}
// Read back, every index is checked against the arrays it points into.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "offtune/observer.hpp"
#include "offtune/profiler/predict.hpp"

namespace offtune::profiler {
namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "offtune-trace";
constexpr int kVersion = 1;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw std::invalid_argument(path + " is not an offtune trace: " + why);
}

}  // namespace

void save_trace(const Trace& t, const std::string& path) {
  json events = json::array();
  for (const auto& e : t.events) {
    events.push_back({static_cast<int>(e.kind), e.time_ns, e.index});
  }
  json blocks = json::array();
  for (const auto& b : t.blocks) blocks.push_back({b.bytes, b.before_step});
  json slots = json::array();
  for (const auto& s : t.slots) {
    slots.push_back({s.id, static_cast<int>(s.reason), s.block, s.storage_bytes, s.span_lo, s.bytes,
                     s.weight, s.item_bytes, s.version, s.generation});
  }
  const json out{{"format", kFormat},
                 {"version", kVersion},
                 {"semantics", std::string(to_string(t.semantics))},
                 {"checkpoint", to_string(t.checkpoint)},
                 {"offload_set", std::string(to_string(t.offload_set))},
                 {"clock", t.clock == Trace::Clock::Cpu ? "cpu" : "model"},
                 {"device_model", t.device_model},
                 {"steps", t.steps},
                 {"step_ns", t.step_ns},
                 {"base_allocated", t.base_allocated},
                 {"d2h_bytes_per_ns", t.d2h_bytes_per_ns},
                 {"h2d_bytes_per_ns", t.h2d_bytes_per_ns},
                 {"pack_hook_ns", t.pack_hook_ns},
                 {"unpack_hook_ns", t.unpack_hook_ns},
                 {"events", events},
                 {"blocks", blocks},
                 {"slots", slots}};
  // Written into a file of its own beside `path` (mkstemp: O_EXCL, never an existing file such as
  // someone's PATH.tmp), then renamed over `path`: a reader never sees half a trace.
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    throw std::runtime_error("cannot write the trace to " + path + ": " + std::strerror(errno));
  }
  const std::string text = out.dump();
  bool ok = true;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write the trace to " + path);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write the trace to " + path + ": " + ec.message());
  }
}

Trace load_trace(const std::string& path) {
  std::ifstream f(path);
  if (!f) bad(path, "it cannot be read");
  json in;
  try {
    in = json::parse(f);
  } catch (const json::exception& e) {
    bad(path, std::string("not JSON (") + e.what() + ")");
  }
  Trace t;
  try {
    if (!in.is_object() || in.value("format", "") != kFormat)
      bad(path, "no \"format\": \"" + std::string(kFormat) + "\"");
    if (in.at("version").get<int>() != kVersion) {
      bad(path, "version " + in.at("version").dump() + " (this offtune reads " +
                    std::to_string(kVersion) + ")");
    }
    t.semantics = parse_semantics(in.at("semantics").get<std::string>());
    t.checkpoint = parse_checkpoint_policy(in.at("checkpoint").get<std::string>());
    t.offload_set = parse_offload_set(in.at("offload_set").get<std::string>());
    const std::string clock = in.at("clock").get<std::string>();
    if (clock != "cpu" && clock != "model") bad(path, "clock '" + clock + "'");
    t.clock = clock == "cpu" ? Trace::Clock::Cpu : Trace::Clock::Model;
    t.device_model = in.at("device_model").get<std::string>();
    t.steps = in.at("steps").get<int64_t>();
    t.step_ns = in.at("step_ns").get<int64_t>();
    t.base_allocated = in.at("base_allocated").get<int64_t>();
    t.d2h_bytes_per_ns = in.at("d2h_bytes_per_ns").get<double>();
    t.h2d_bytes_per_ns = in.at("h2d_bytes_per_ns").get<double>();
    t.pack_hook_ns = in.at("pack_hook_ns").get<int64_t>();
    t.unpack_hook_ns = in.at("unpack_hook_ns").get<int64_t>();
    for (const auto& b : in.at("blocks")) {
      t.blocks.push_back({b.at(0).get<int64_t>(), b.at(1).get<bool>()});
      if (t.blocks.back().bytes < 0) bad(path, "a block of negative size");
    }
    const auto nblocks = static_cast<int64_t>(t.blocks.size());
    for (const auto& s : in.at("slots")) {
      Trace::Slot slot;
      slot.id = s.at(0).get<int64_t>();
      const int reason = s.at(1).get<int>();
      if (reason < 0 || reason > static_cast<int>(KeepReason::SharedInWindow)) {
        bad(path, "a slot's keep reason " + std::to_string(reason));
      }
      slot.reason = static_cast<KeepReason>(reason);
      slot.block = s.at(2).get<int64_t>();
      slot.storage_bytes = s.at(3).get<int64_t>();
      slot.span_lo = s.at(4).get<int64_t>();
      slot.bytes = s.at(5).get<int64_t>();
      slot.weight = s.at(6).get<int64_t>();
      slot.item_bytes = s.at(7).get<int64_t>();
      slot.version = s.at(8).get<uint32_t>();
      slot.generation = s.at(9).get<uint64_t>();
      if (slot.reason == KeepReason::None &&
          (slot.block < 0 || slot.block >= nblocks || slot.item_bytes < 1 || slot.bytes < 0)) {
        bad(path, "a slot names no block of the trace");
      }
      t.slots.push_back(slot);
    }
    const auto nslots = static_cast<int64_t>(t.slots.size());
    int64_t last = 0;
    for (const auto& e : in.at("events")) {
      const int kind = e.at(0).get<int>();
      if (kind < 0 || kind > static_cast<int>(Trace::Kind::BackwardEnd)) {
        bad(path, "an event of kind " + std::to_string(kind));
      }
      Trace::Event ev{static_cast<Trace::Kind>(kind), e.at(1).get<int64_t>(),
                      e.at(2).get<int64_t>()};
      const bool on_block = ev.kind == Trace::Kind::Alloc || ev.kind == Trace::Kind::Free;
      const bool on_slot = ev.kind == Trace::Kind::Pack || ev.kind == Trace::Kind::Unpack ||
                           ev.kind == Trace::Kind::Release;
      if ((on_block && (ev.index < 0 || ev.index >= nblocks)) ||
          (on_slot && (ev.index < 0 || ev.index >= nslots))) {
        bad(path, "an event names no block or slot of the trace");
      }
      if (ev.time_ns < last) bad(path, "events out of time order");
      last = ev.time_ns;
      t.events.push_back(ev);
    }
  } catch (const json::exception& e) {
    bad(path, std::string("a field is missing or of the wrong kind (") + e.what() + ")");
  } catch (const OptionsError& e) {
    bad(path, e.what());
  }
  return t;
}

}  // namespace offtune::profiler
