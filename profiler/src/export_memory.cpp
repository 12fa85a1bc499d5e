// The memory-snapshot exporter: a run's memory history (records.hpp) as the pickle
// torch.cuda.memory._snapshot() writes, for PyTorch's memory visualiser. The pickle is written by
// hand, streamed, in the subset of protocol 2 the snapshot needs (dicts, lists, a tuple, strings,
// integers, booleans): torch's own pickler is an internal libtorch API (torch/csrc/jit) that tags
// aggregates for TorchScript, and Python reads this subset with nothing but its standard library.
#include "offtune/profiler/export.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>

namespace offtune::profiler {

namespace {

// Pickle protocol 2, the opcodes the snapshot needs (Lib/pickletools.py names them).
class Pickler {
 public:
  explicit Pickler(std::ostream& out) : out_(out) { out_.write("\x80\x02", 2); }  // PROTO 2
  void stop() { out_.put('.'); }                                                  // STOP

  void begin_dict() { out_.write("}(", 2); }  // EMPTY_DICT, MARK
  void end_dict() { out_.put('u'); }          // SETITEMS
  void begin_list() { out_.write("](", 2); }  // EMPTY_LIST, MARK
  void end_list() { out_.put('e'); }          // APPENDS

  void str(std::string_view s) {  // BINUNICODE: length, then UTF-8
    out_.put('X');
    le(static_cast<uint64_t>(s.size()), 4);
    out_.write(s.data(), static_cast<std::streamsize>(s.size()));
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {  // BININT1
      out_.put('K');
      out_.put(static_cast<char>(v));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {  // BININT: 4 bytes, signed
      out_.put('J');
      le(static_cast<uint64_t>(v), 4);
    } else {  // LONG1: 8 bytes, two's complement
      out_.write("\x8a\x08", 2);
      le(static_cast<uint64_t>(v), 8);
    }
  }
  void boolean(bool v) { out_.put(v ? '\x88' : '\x89'); }  // NEWTRUE, NEWFALSE
  void tuple2(int64_t a, int64_t b) {
    integer(a);
    integer(b);
    out_.put('\x86');  // TUPLE2
  }

  // key: value, inside a dict.
  void key(std::string_view k) { str(k); }

 private:
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.put(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  std::ostream& out_;
};

// A block's or event's frames: offtune's note as the one frame, as memory_viz shows a stack.
void frames(Pickler& p, const std::string& note) {
  p.begin_list();
  if (!note.empty()) {
    p.begin_dict();
    p.key("filename");
    p.str("offtune");
    p.key("line");
    p.integer(0);
    p.key("name");
    p.str(note);
    p.end_dict();
  }
  p.end_list();
}

void write_snapshot(Pickler& p, const RunRecord& run, const std::vector<MemoryEventRecord>& events,
                    const std::vector<MemoryBlockRecord>& blocks) {
  p.begin_dict();
  // First, so that an earlier export is known by its first bytes (export_csv.cpp).
  p.key("offtune");
  p.begin_dict();
  p.key("exporter");
  p.str("offtune memory-snapshot export");
  p.key("run");
  p.integer(run.id.value);
  p.key("title");
  p.str(run_title(run));
  p.key("device");
  p.str(run.env.device);
  p.key("note");
  p.str(
      "host-sim's modelled CUDA caching allocator (its addresses), from the run's first measured "
      "step to its last; time_us on the run's clock");
  p.end_dict();

  // The allocator's state where the history ends: one segment per address, its blocks in order.
  std::map<int64_t, std::vector<const MemoryBlockRecord*>> segments;
  for (const MemoryBlockRecord& b : blocks) segments[b.segment_addr].push_back(&b);
  p.key("segments");
  p.begin_list();
  for (const auto& [addr, list] : segments) {
    const MemoryBlockRecord& first = *list.front();
    int64_t allocated = 0, active = 0, requested = 0;
    for (const MemoryBlockRecord* b : list) {
      if (b->state == "active_allocated") {
        allocated += b->size;
        requested += b->requested;
      }
      if (b->state != "inactive") active += b->size;
    }
    p.begin_dict();
    p.key("device");
    p.integer(0);
    p.key("address");
    p.integer(addr);
    p.key("total_size");
    p.integer(first.segment_size);
    p.key("allocated_size");
    p.integer(allocated);
    p.key("active_size");
    p.integer(active);
    p.key("requested_size");
    p.integer(requested);
    p.key("stream");
    p.integer(first.stream);
    p.key("segment_type");
    p.str(first.small_pool ? "small" : "large");
    p.key("segment_pool_id");
    p.tuple2(0, 0);
    p.key("is_expandable");
    p.boolean(first.expandable);
    p.key("frames");
    frames(p, {});
    p.key("blocks");
    p.begin_list();
    for (const MemoryBlockRecord* b : list) {
      p.begin_dict();
      p.key("address");
      p.integer(b->addr);
      p.key("size");
      p.integer(b->size);
      p.key("requested_size");
      p.integer(b->state == "active_allocated" ? b->requested : b->size);
      p.key("state");
      p.str(b->state);
      p.key("frames");
      frames(p, b->note);
      p.end_dict();
    }
    p.end_list();
    p.end_dict();
  }
  p.end_list();

  // One device's trace.
  p.key("device_traces");
  p.begin_list();
  p.begin_list();
  for (const MemoryEventRecord& e : events) {
    p.begin_dict();
    p.key("action");
    p.str(e.action);
    if (e.action != "oom") {
      p.key("addr");
      p.integer(e.addr);
    }
    p.key("size");
    p.integer(e.size);
    p.key("stream");
    p.integer(e.stream);
    p.key("time_us");
    p.integer(e.time_ns / 1000);
    p.key("frames");
    frames(p, e.note);
    if (!e.note.empty()) {
      p.key("user_metadata");
      p.str(e.note);
    }
    if (e.action == "oom") {
      p.key("device_free");
      p.integer(e.device_free);
    }
    p.end_dict();
  }
  p.end_list();
  p.end_list();
  p.end_dict();
  p.stop();
}

}  // namespace

void export_memory_snapshot(Store& store, RunId run, const std::string& path) {
  detail::PendingFile file(path, store.path());  // a target that must not be written: refused first
  const std::vector<RunRecord> records = detail::load_runs(store, {run});
  std::vector<MemoryEventRecord> events;
  std::vector<MemoryBlockRecord> blocks;
  try {
    events = store.memory_events(run);
    blocks = store.memory_blocks(run);
  } catch (const StoreError& e) {
    throw ExportError("cannot read run " + std::to_string(run.value) + ": " + e.what());
  }
  if (events.empty() && blocks.empty()) {
    throw ExportError("run " + std::to_string(run.value) +
                      " has no memory history: record one with `offtune run --memory-history` "
                      "(host-sim)");
  }
  {
    std::ofstream out(file.path(), std::ios::binary | std::ios::trunc);
    if (!out) throw ExportError("cannot write " + path + ": " + std::strerror(errno));
    Pickler p(out);
    write_snapshot(p, records.front(), events, blocks);
    out.flush();
    if (!out) throw ExportError("cannot write " + path + ": write failed (disk full?)");
  }
  file.commit();
}

}  // namespace offtune::profiler
