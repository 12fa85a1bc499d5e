// The Chrome Trace Event exporter. The JSON is written by hand, event by event, rather than built
// as one document and dumped: a long run has millions of events and a DOM would hold them all a
// second time. nlohmann-json still escapes every string and serializes the small per-event args
// objects.
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/wait_flows.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <streambuf>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace offtune::profiler {

namespace {

using nlohmann::json;

// The names PyTorch's profiler (kineto) gives copies, which Holistic Trace Analysis and
// Perfetto's PyTorch views classify by: "Memcpy DtoH (Device -> Pinned)" and the like.
std::string memcpy_name(const TimelineEvent& e) {
  const char* host = e.pinned ? "Pinned" : "Pageable";
  return e.kind == EventKind::CopyD2H ? std::string("Memcpy DtoH (Device -> ") + host + ")"
                                      : std::string("Memcpy HtoD (") + host + " -> Device)";
}

// Bytes per nanosecond is GB/s, the unit of kineto's "memory bandwidth (GB/s)".
double bandwidth_gbps(const TimelineEvent& e) {
  const int64_t ns = e.end_ns - e.start_ns;
  return ns > 0 ? static_cast<double>(e.bytes) / static_cast<double>(ns) : 0.0;
}

// A track id that no stream is likely to have, so that phases never share a track with a stream.
constexpr int64_t kPhasesTidBase = 1000000;

// A JSON string literal. Invalid UTF-8 (a name from a .pt file, say) is replaced, never thrown on.
std::string quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string dumped(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Nanoseconds as microseconds with all nanosecond digits and no rounding: 1234 -> "1.234",
// 600 -> "0.6", 5000 -> "5". Exact where a double division and a printf would not be.
std::string micros(int64_t ns) {
  std::string s;
  if (ns < 0) {
    s += '-';
    ns = -ns;
  }
  s += std::to_string(ns / 1000);
  int64_t frac = ns % 1000;
  if (frac != 0) {
    char digits[4] = {static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                      static_cast<char>('0' + frac % 10), '\0'};
    std::string_view d(digits, 3);
    while (d.back() == '0') d.remove_suffix(1);
    s += '.';
    s += d;
  }
  return s;
}

const char* phase_fallback_name(EventKind k) {
  switch (k) {
    case EventKind::Step:
      return "step";
    case EventKind::Forward:
      return "forward";
    case EventKind::Backward:
      return "backward";
    default:
      return "phase";
  }
}

bool is_phase(EventKind k) {
  return k == EventKind::Step || k == EventKind::Forward || k == EventKind::Backward;
}

// The track an event is drawn on: its stream, except that waits block the compute thread and
// phases get their own track.
// Disk traffic gets tracks of its own after the phases: apart from the link's copies.
int64_t track_of(const TimelineEvent& e, int64_t phases_tid) {
  if (is_phase(e.kind)) return phases_tid;
  if (e.kind == EventKind::Wait || e.kind == EventKind::Recompute) return 0;
  if (e.kind == EventKind::DiskWrite) return phases_tid + 1;
  if (e.kind == EventKind::DiskRead) return phases_tid + 2;
  return e.stream;
}

// What a person reads on a host-sim run's process and device tracks: its kernels and copies keep
// the names PyTorch's profiler gives real ones (which Holistic Trace Analysis classifies by), so
// that without it the trace would pass for a GPU's in Perfetto.
constexpr std::string_view kModelled = " [host-sim (modelled)]";

std::string stream_track_name(int64_t stream, bool modelled) {
  std::string name = stream == 0   ? "compute"
                     : stream == 1 ? "copy (side stream)"
                                   : "stream " + std::to_string(stream);
  if (modelled) name += kModelled;
  return name;
}

// A stream buffer that writes gzip through zlib: `-o trace.json.gz` (Perfetto and HTA read it).
// Written as it goes, as the plain file is; close() says whether every byte reached the file.
class GzipBuf final : public std::streambuf {
 public:
  explicit GzipBuf(const std::string& path) : file_(gzopen(path.c_str(), "wb")) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  ~GzipBuf() override { close(); }
  GzipBuf(const GzipBuf&) = delete;
  GzipBuf& operator=(const GzipBuf&) = delete;

  bool is_open() const { return file_ != nullptr; }
  // Writes what is buffered and gzip's trailer; false when a write failed (a full disk).
  bool close() {
    if (file_ == nullptr) return false;
    const bool flushed = drain();
    const bool closed = gzclose(file_) == Z_OK;
    file_ = nullptr;
    return flushed && closed;
  }

 protected:
  int_type overflow(int_type ch) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const auto n = static_cast<unsigned>(pptr() - pbase());
    if (n > 0 && (file_ == nullptr || gzwrite(file_, pbase(), n) != static_cast<int>(n))) {
      failed_ = true;
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return !failed_;
  }
  gzFile file_;
  std::array<char, 1 << 16> buf_{};
  bool failed_ = false;
};

// Writes the traceEvents array one event at a time.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}

  // Opens one event: the separator and the fields every event has.
  void open(std::string_view ph, std::string_view name, int64_t pid, int64_t tid) {
    out_ << (first_ ? "\n" : ",\n") << R"({"ph":")" << ph << R"(","name":)" << quoted(name)
         << R"(,"pid":)" << pid << R"(,"tid":)" << tid;
    first_ = false;
  }
  void field(std::string_view key, std::string_view raw_value) {
    out_ << ",\"" << key << "\":" << raw_value;
  }
  void close() { out_ << '}'; }

  void metadata(std::string_view name, int64_t pid, int64_t tid, const json& args) {
    open("M", name, pid, tid);
    field("args", dumped(args));
    close();
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

json step_args(const StepRecord& s) {
  return {{"step", s.step},
          {"loss", s.loss},
          {"peak_allocated", s.peak_allocated},
          {"peak_reserved", s.peak_reserved},
          {"offloaded_bytes", s.offloaded_bytes},
          {"reloaded_bytes", s.reloaded_bytes},
          {"hidden_copy_pct", s.hidden_copy_pct},
          {"exposed_copy_ns", s.exposed_copy_ns}};
}

json run_json(const RunRecord& r, int64_t origin_ns) {
  return {{"id", r.id.value},
          {"pid", r.id.value},
          {"title", run_title(r)},
          {"status", to_string(r.status)},
          {"error", r.error},
          {"label", r.label},
          {"started_unix_ns", r.started_unix_ns},
          {"finished_unix_ns", r.finished_unix_ns},
          {"time_origin_ns", origin_ns},
          {"workload", to_json(r.workload)},
          {"config", to_json(r.config)},
          // Every figure of the run, memory named as in the store (docs/metrics.md).
          {"summary", to_json(r.summary)},
          {"environment",
           {{"offtune_version", r.env.offtune_version},
            {"torch_version", r.env.torch_version},
            {"backend", r.env.backend},
            {"device", r.env.device},
            {"git_revision", r.env.git_revision},
            {"host", r.env.host}}}};
}

// A time inside an event's slice, for a flow event bound to it: its last nanosecond (its start
// when it lasts none). Viewers bind a flow event to the slice open on its track at its time, and
// a slice is no longer open at its end.
int64_t inside(const TimelineEvent& e) { return e.end_ns > e.start_ns ? e.end_ns - 1 : e.start_ns; }

// Writes one run's metadata, events and counters; returns its time origin (the first event).
// Flow ids count up across the file from `next_flow_id`.
int64_t write_run(Store& store, const RunRecord& run, int sort_index, EventWriter& w,
                  int64_t& next_flow_id, int64_t& next_correlation) {
  const int64_t pid = run.id.value;
  std::vector<TimelineEvent> events;
  std::vector<OccupancySample> occupancy;
  std::vector<StepRecord> steps;
  try {
    events = store.events(run.id);
    occupancy = store.occupancy(run.id);
    steps = store.steps(run.id);
  } catch (const StoreError& e) {
    throw ExportError("cannot read run " + std::to_string(pid) + ": " + e.what());
  }

  int64_t origin = 0;
  bool have_origin = false;
  auto consider = [&](int64_t t) {
    origin = have_origin ? std::min(origin, t) : t;
    have_origin = true;
  };
  // Events come ordered by start, but a store is not trusted to sort: scanning is cheap.
  for (const auto& e : events) consider(e.start_ns);
  for (const auto& s : occupancy) consider(s.time_ns);

  std::set<int64_t> streams;
  bool have_phases = false;
  bool have_disk_write = false, have_disk_read = false;
  for (const auto& e : events) {
    if (is_phase(e.kind)) {
      have_phases = true;
    } else if (is_disk(e.kind)) {
      (e.kind == EventKind::DiskWrite ? have_disk_write : have_disk_read) = true;
    } else {
      streams.insert(e.kind == EventKind::Wait ? 0 : e.stream);
    }
    // Kernels and copies put their launch calls on the host thread, the phases track.
    if (e.kind == EventKind::Compute || e.kind == EventKind::CopyD2H ||
        e.kind == EventKind::CopyH2D) {
      have_phases = true;
    }
  }
  const int64_t phases_tid =
      std::max(kPhasesTidBase, streams.empty() ? int64_t{0} : *streams.rbegin() + 1);

  // A host-sim run says so where a person reads: its name, its device tracks and a marker at its
  // start (its events keep the names HTA needs).
  const bool modelled = run.env.backend == "host-sim";
  std::string title = run_title(run);
  if (modelled) title += kModelled;
  w.metadata("process_name", pid, 0, {{"name", title}});
  w.metadata("process_sort_index", pid, 0, {{"sort_index", sort_index}});
  if (!run.label.empty()) w.metadata("process_labels", pid, 0, {{"labels", run.label}});
  int thread_index = 0;
  if (have_phases) {
    w.metadata("thread_name", pid, phases_tid, {{"name", "phases"}});
    w.metadata("thread_sort_index", pid, phases_tid, {{"sort_index", thread_index++}});
  }
  for (int64_t s : streams) {  // ascending: compute, copy, then other streams
    w.metadata("thread_name", pid, s, {{"name", stream_track_name(s, modelled)}});
    w.metadata("thread_sort_index", pid, s, {{"sort_index", thread_index++}});
  }
  if (have_disk_write) {
    w.metadata("thread_name", pid, phases_tid + 1, {{"name", "disk write"}});
    w.metadata("thread_sort_index", pid, phases_tid + 1, {{"sort_index", thread_index++}});
  }
  if (have_disk_read) {
    w.metadata("thread_name", pid, phases_tid + 2, {{"name", "disk read"}});
    w.metadata("thread_sort_index", pid, phases_tid + 2, {{"sort_index", thread_index++}});
  }

  if (modelled) {
    w.open("i", "host-sim (modelled): not a GPU trace", pid, have_phases ? phases_tid : 0);
    w.field("cat", R"("offtune")");
    w.field("ts", "0");
    w.field("s", R"("p")");
    w.field("args",
            dumped({{"backend", run.env.backend},
                    {"device", run.env.device},
                    {"note",
                     "kernels and copies carry the names PyTorch's profiler gives a GPU's, so "
                     "that its readers open this file; their times are host-sim's (a device "
                     "model's, or the CPU's), not a GPU's"}}));
    w.close();
  }

  std::unordered_map<int64_t, const StepRecord*> step_at;
  for (const auto& s : steps) step_at.emplace(s.begin_ns, &s);
  int64_t step_index = 0;

  // The fields PyTorch's profiler writes on device work, so that its analysis tools (Holistic
  // Trace Analysis) read this trace as a profiler trace: each kernel and copy carries its device,
  // stream and a correlation id, and a CUDA runtime call with the same correlation id sits on the
  // host thread (the phases track) at the activity's start, zero long (offtune records no
  // launches). `device` is 0: each run is a process with its one device.
  const auto device_args = [&](json& args, const TimelineEvent& e) {
    args["device"] = 0;
    args["stream"] = e.stream;
    args["correlation"] = next_correlation;
  };
  const auto launch = [&](const TimelineEvent& e, const char* api) {
    w.close();
    w.open("X", api, pid, phases_tid);
    w.field("cat", R"("cuda_runtime")");
    w.field("ts", micros(e.start_ns - origin));
    w.field("dur", "0");
    w.field("args", dumped(json{{"correlation", next_correlation++}}));
  };

  for (const auto& e : events) {
    const int64_t tid = track_of(e, phases_tid);
    const std::string ts = micros(e.start_ns - origin);
    const std::string dur = micros(std::max<int64_t>(0, e.end_ns - e.start_ns));
    switch (e.kind) {
      case EventKind::Step:
      case EventKind::Forward:
      case EventKind::Backward: {
        w.open("X", e.name.empty() ? phase_fallback_name(e.kind) : e.name, pid, tid);
        w.field("cat", R"("phase")");
        w.field("ts", ts);
        w.field("dur", dur);
        if (e.kind == EventKind::Step) {
          auto it = step_at.find(e.start_ns);
          if (it != step_at.end()) w.field("args", dumped(step_args(*it->second)));
          // The span PyTorch's profiler marks each iteration with, which HTA divides a trace by.
          const int64_t n = it != step_at.end() ? it->second->step : step_index;
          ++step_index;
          w.close();
          w.open("X", "ProfilerStep#" + std::to_string(n), pid, tid);
          w.field("cat", R"("user_annotation")");
          w.field("ts", ts);
          w.field("dur", dur);
        }
        break;
      }
      case EventKind::Compute: {
        w.open("X", e.name.empty() ? "compute" : e.name, pid, tid);
        w.field("cat", R"("kernel")");
        w.field("ts", ts);
        w.field("dur", dur);
        json args = json::object();
        if (e.bytes > 0) args["bytes"] = e.bytes;
        if (e.tensor >= 0) args["tensor"] = e.tensor;
        device_args(args, e);
        w.field("args", dumped(args));
        launch(e, "cudaLaunchKernel");
        break;
      }
      case EventKind::CopyD2H:
      case EventKind::CopyH2D: {
        // Layer offloading's weight copies share the copy stream: named and categorised apart so
        // that Perfetto can filter either kind of traffic.
        const bool weights = is_weight_copy(e);
        w.open("X", memcpy_name(e), pid, tid);
        w.field("cat", weights ? R"("gpu_memcpy,weights")" : R"("gpu_memcpy")");
        w.field("ts", ts);
        w.field("dur", dur);
        json args = {{"bytes", e.bytes},
                     {"tensor", e.tensor},
                     {"pinned", e.pinned},
                     {"prefetch", e.prefetch},
                     {"memory bandwidth (GB/s)", bandwidth_gbps(e)}};
        if (!e.name.empty()) args["name"] = e.name;
        if (weights) args["weights"] = true;
        device_args(args, e);
        w.field("args", dumped(args));
        launch(e, "cudaMemcpyAsync");
        break;
      }
      case EventKind::Recompute: {
        w.open("X", "recompute", pid, tid);
        w.field("cat", R"("recompute")");
        w.field("ts", ts);
        w.field("dur", dur);
        w.field("args", dumped(json{{"bytes", e.bytes}, {"tensors", e.tensor}}));
        break;
      }
      case EventKind::DiskWrite:
      case EventKind::DiskRead: {
        w.open("X", e.kind == EventKind::DiskWrite ? "disk write" : "disk read", pid, tid);
        w.field("cat", R"("disk")");
        w.field("ts", ts);
        w.field("dur", dur);
        json args = {{"bytes", e.bytes}, {"tensor", e.tensor}, {"read_ahead", e.prefetch}};
        if (!e.name.empty()) args["name"] = e.name;
        w.field("args", dumped(args));
        break;
      }
      case EventKind::Wait: {
        w.open("X", e.name.empty() ? "wait" : "wait: " + e.name, pid, tid);
        w.field("cat", R"("wait")");
        w.field("ts", ts);
        w.field("dur", dur);
        json args = {{"tensor", e.tensor}};
        if (!e.name.empty()) args["kind"] = e.name;
        w.field("args", dumped(args));
        break;
      }
      case EventKind::Pack:
      case EventKind::Unpack: {
        const bool pack = e.kind == EventKind::Pack;
        const std::string base = pack ? "pack" : "unpack";
        w.open("i", e.name.empty() ? base : base + ": " + e.name, pid, tid);
        w.field("cat", pack ? R"("pack")" : R"("unpack")");
        w.field("ts", ts);
        w.field("s", R"("t")");
        json args = {{"bytes", e.bytes}, {"tensor", e.tensor}};
        args[pack ? "decision" : "source"] = e.name;
        w.field("args", dumped(args));
        break;
      }
    }
    w.close();
  }

  // Flow events (Trace Event Format, "Flow events"): an arrow from each copy to the wait that
  // waited on it. The start ("s") lies inside the copy's slice on its track and the end ("f")
  // inside the wait's, with "bp":"e" so that it binds to that enclosing slice rather than the next
  // one. Both carry the same id, name and category: Perfetto pairs v1 flow events by all three.
  for (const WaitFlow& f : wait_flows(events)) {
    const TimelineEvent& copy = events[f.copy];
    const TimelineEvent& wait = events[f.wait];
    const std::string id = std::to_string(next_flow_id++);
    w.open("s", "waited on", pid, track_of(copy, phases_tid));
    w.field("cat", R"("flow")");
    w.field("id", id);
    w.field("ts", micros(inside(copy) - origin));
    w.close();
    w.open("f", "waited on", pid, track_of(wait, phases_tid));
    w.field("cat", R"("flow")");
    w.field("id", id);
    w.field("ts", micros(inside(wait) - origin));
    w.field("bp", R"("e")");
    w.close();
  }

  for (const auto& s : occupancy) {
    const std::string ts = micros(s.time_ns - origin);
    w.open("C", "stash bytes", pid, 0);
    w.field("ts", ts);
    w.field("args", dumped({{"fwd_bytes", s.fwd_bytes}, {"bwd_bytes", s.bwd_bytes}}));
    w.close();
    w.open("C", "stash count", pid, 0);
    w.field("ts", ts);
    w.field("args", dumped({{"fwd_count", s.fwd_count}, {"bwd_count", s.bwd_count}}));
    w.close();
    // Memory over time, one counter per figure (each named as what it is; a stacked counter would
    // read as their sum): device allocated ("device bytes", its name since the first export),
    // device reserved, offtune's host copies and its pinned pool. A figure not known is left out.
    const auto counter = [&](const char* name, int64_t bytes) {
      if (bytes < 0) return;
      w.open("C", name, pid, 0);
      w.field("ts", ts);
      w.field("args", dumped({{"bytes", bytes}}));
      w.close();
    };
    counter("device bytes", s.device_bytes);
    counter("device reserved bytes", s.reserved_bytes);
    counter("host copies bytes", s.host_bytes);
    counter("pinned pool bytes", s.host_pool_bytes);
  }
  return origin;
}

}  // namespace

void export_chrome_trace(Store& store, const std::vector<RunId>& runs, const std::string& path) {
  detail::PendingFile file(path, store.path());  // a target that must not be written: refused first
  const std::vector<RunRecord> records = detail::load_runs(store, runs);

  const auto write = [&](std::ostream& out) {
    out << R"({"traceEvents":[)";
    EventWriter writer(out);
    json run_meta = json::array();
    int index = 0;
    int64_t next_flow_id = 1;
    // Correlation ids start at 2^31 (still in CUPTI's 32-bit range for 2^31 launches): Holistic
    // Trace Analysis 0.5.0 types its correlation column from the ids' range (int8 for ids up to
    // 127, int16 up to 32767) and then writes events' positions in traceEvents into a column of
    // that type, which pandas 3 refuses ("Invalid value ... for dtype 'int8'") once a file has
    // more events than the ids' type holds. From 2^31 the column is int64 whatever the file.
    int64_t next_correlation = int64_t{1} << 31;
    for (const RunRecord& r : records) {
      const int64_t origin = write_run(store, r, index++, writer, next_flow_id, next_correlation);
      run_meta.push_back(run_json(r, origin));
      if (!out) break;
    }
    // The metadata comes last because each run's time origin is known only once it is written.
    const json meta = {{"exporter", "offtune"},
                       {"format", "chrome-trace-event"},
                       {"time_unit", "ts and dur in microseconds from each run's time_origin_ns"},
                       {"runs", run_meta}};
    out << "\n],\"displayTimeUnit\":\"ns\",\"metadata\":" << dumped(meta) << "}\n";
    out.flush();
  };
  const auto failed = [&] {
    return ExportError("cannot write " + path + ": write failed (disk full?)");
  };
  if (path.ends_with(".gz")) {
    GzipBuf buf(file.path());
    if (!buf.is_open()) throw ExportError("cannot write " + path + ": " + std::strerror(errno));
    std::ostream out(&buf);
    write(out);
    if (!buf.close() || !out) throw failed();
  } else {
    std::ofstream out(file.path(), std::ios::binary | std::ios::trunc);
    if (!out) throw ExportError("cannot write " + path + ": " + std::strerror(errno));
    write(out);
    if (!out) throw failed();
  }
  file.commit();
}

}  // namespace offtune::profiler
