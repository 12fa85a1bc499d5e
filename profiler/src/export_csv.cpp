// The sweep-points CSV exporter, and the pieces all three exporters share: the temporary file that
// is renamed into place on success, run loading, and run titles.
#include "offtune/profiler/export.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "sqlite_db.hpp"

namespace offtune::profiler {

namespace {

// One line of the points CSV, built field by field: each field is preceded by its comma, and a
// field whose `present` is false is left empty (a figure that does not apply, not a zero).
class CsvLine {
 public:
  // One CSV field per RFC 4180: quoted only when it has to be, quotes doubled inside.
  void text(std::string_view v, bool present = true) {
    next();
    if (!present) return;
    if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
      line_ += v;
      return;
    }
    line_ += '"';
    for (char c : v) {
      if (c == '"') line_ += '"';
      line_ += c;
    }
    line_ += '"';
  }
  void integer(int64_t v, bool present = true) {
    next();
    if (present) line_ += std::to_string(v);
  }
  // The shortest text that reads back as the same double; empty for NaN and infinities, which no
  // spreadsheet reads the same way.
  void real(double v, bool present = true) {
    next();
    if (!present || !std::isfinite(v)) return;
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    line_.append(buf, res.ptr);
  }
  void boolean(bool v, bool present = true) {
    next();
    if (present) line_ += v ? "true" : "false";
  }
  // A knob's value as its kind is written: a Switch true/false, a Count or a Size the number, a
  // Choice its name.
  void value(const KnobValue& v, bool present) {
    if (const auto* b = std::get_if<bool>(&v)) {
      boolean(*b, present);
    } else if (const auto* i = std::get_if<int64_t>(&v)) {
      integer(*i, present);
    } else {
      text(std::get<std::string>(v), present);
    }
  }
  std::string end() { return std::move(line_) + "\r\n"; }

 private:
  void next() {
    if (started_) line_ += ',';
    started_ = true;
  }
  std::string line_;
  bool started_ = false;
};

// `prediction`: the point's what-if prediction (a predict-first sweep), or null.
std::string point_line(const PointRecord& p, const PointPrediction* prediction) {
  CsvLine line;
  line.integer(p.index);
  line.text(to_string(p.status));
  // Every knob, in the table's order: the engine variant too, without which the points of a sweep
  // over variants would read as repeats. A point that does not offload has no offload settings:
  // empty, not the defaults it was stored with (which would read as a configuration that was
  // measured).
  for (const Knob& k : knob_table()) {
    line.value(k.get(p.config), p.config.offload || !k.offload_only);
  }
  // The run that measured it, to find its timeline and steps (`report --run`, `export --run`).
  line.integer(p.run.value, p.run.valid());
  // Only a measured point has figures; the zeros of a pending or failed one would read as data.
  const bool measured = p.status == PointStatus::Ok;
  const RunSummary& s = p.summary;
  line.real(s.step_ms_median, measured);
  line.real(s.step_ms_stddev, measured);
  line.real(s.step_ms_min, measured);
  line.real(s.step_ms_max, measured);
  // The interval comparisons use (records.hpp: step_interval); its level is empty when unknown
  // (min..max of fewer than 2 steps' coverage, or no interval recorded).
  const StepInterval ci = step_interval(s);
  line.real(ci.low, measured);
  line.real(ci.high, measured);
  line.real(ci.level, measured && ci.level > 0);
  line.integer(s.peak_allocated, measured);
  line.integer(s.peak_reserved, measured);
  line.integer(s.device_outside, measured);
  line.integer(peak_device_total(s), measured);
  line.integer(s.pinned_bytes, measured);
  line.integer(s.host_bytes_peak, measured);
  line.integer(s.host_rss_peak, measured && s.host_rss_peak > 0);  // empty: not measured
  line.integer(s.offloaded_bytes, measured);
  line.integer(s.reloaded_bytes, measured);
  line.integer(s.pageable_copies, measured);
  // A point that copied nothing has no overlap to speak of: empty, as the tables' n/a.
  const bool copied = measured && copied_anything(p.config, s);
  line.real(s.hidden_copy_pct, copied);
  line.real(s.hidden_d2h_pct, copied);
  line.real(s.hidden_h2d_pct, copied);
  line.integer(s.exposed_copy_ns, measured);
  // The loss of the last measured step: points of one sweep train the same model on the same
  // batches, so a point whose loss differs from the baseline's computed something else (a loss
  // that is not finite is left empty, as every such double).
  line.real(s.final_loss, measured);
  const bool predicted = prediction != nullptr;
  line.real(predicted ? prediction->step_ms() : 0.0, predicted);
  line.integer(predicted ? prediction->peak_allocated : 0, predicted);
  line.integer(predicted ? prediction->offloaded_bytes : 0, predicted);
  line.real(predicted ? prediction->hidden_copy_pct : 0.0,
            predicted && prediction->offloaded_bytes > 0);
  line.text(predicted ? prediction->predictor : std::string(), predicted);
  line.text(p.error);
  return line.end();
}

}  // namespace

std::string points_csv_header() {
  std::string out = "index,status";
  for (const Knob& k : knob_table()) out += "," + std::string(k.key);
  return out +
         ",run,step_ms_median,step_ms_stddev,step_ms_min,step_ms_max,step_ms_ci_low,"
         "step_ms_ci_high,step_ms_ci_level,peak_allocated,peak_reserved,device_outside,"
         "peak_device_total,pinned_bytes,host_bytes_peak,host_rss_peak,offloaded_bytes,"
         "reloaded_bytes,pageable_copies,hidden_copy_pct,hidden_d2h_pct,hidden_h2d_pct,"
         "exposed_copy_ns,final_loss,predicted_step_ms,predicted_peak_allocated,"
         "predicted_offloaded_bytes,predicted_hidden_copy_pct,predictor,error";
}

std::string describe_config(const EngineConfig& c) {
  // "offload" or "no offload", then the knobs that apply (an offload-only one means nothing
  // without offloading) in their words, in the table's order: the figures every offloading
  // config has (a count or a size whose default is not 0, i.e. not "none") always, the others
  // where they differ from their defaults. A choice of "none" (no link model: the device's own)
  // says nothing.
  const EngineConfig defaults;
  const Knob& offload = knob("offload");
  std::string out = offload.words(c);
  for (const Knob& k : knob_table()) {
    if (&k == &offload || (k.offload_only && !c.offload)) continue;
    const KnobValue v = k.get(c);
    const KnobValue d = k.get(defaults);
    const bool figure =
        (k.kind == KnobKind::Count || k.kind == KnobKind::Size) && d != KnobValue(int64_t{0});
    const bool none = k.kind == KnobKind::Choice && std::get<std::string>(v) == "none";
    if (figure || (v != d && !none)) out += ", " + k.words(c);
  }
  return out;
}

std::string run_title(const RunRecord& run) {
  std::string s = "run " + std::to_string(run.id.value) + ":";
  if (!run.workload.model.empty()) s += " " + run.workload.model;
  return s + " " + describe_config(run.config);
}

std::string sweep_script(const SweepRecord& sweep) {
  const nlohmann::json key = nlohmann::json::parse(sweep.key, nullptr, /*allow_exceptions=*/false);
  if (!key.is_object()) return "";
  const auto it = key.find("script");
  return it != key.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string describe_workload(const SweepRecord& sweep) {
  if (const std::string script = sweep_script(sweep); !script.empty()) {
    return "script '" + script + "'";
  }
  const Workload& w = sweep.workload;
  std::string out = w.model;
  if (w.batch > 0) out += ", batch " + std::to_string(w.batch);
  if (w.seq > 0) out += ", seq " + std::to_string(w.seq);
  if (!w.dtype.empty()) out += ", " + w.dtype;
  return out;
}

std::string default_trace_name(const std::vector<RunId>& runs, const PointRecord* point,
                               std::string_view extension) {
  std::string name = "offtune-";
  if (runs.size() == 1) {
    name += "run" + std::to_string(runs.front().value);
    if (point != nullptr) {
      name +=
          "-sweep" + std::to_string(point->sweep.value) + "-point" + std::to_string(point->index);
    }
  } else if (!runs.empty()) {
    const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
    name += "runs" + std::to_string(lo->value) + "-" + std::to_string(hi->value);
  } else {
    name += "runs";
  }
  return name.append(extension);
}

std::string default_trace_name(Store& store, const std::vector<RunId>& runs,
                               std::string_view extension) {
  // The sweep point a single run measured, if any: read from the store, and left out of the name
  // where it cannot be read.
  if (runs.size() == 1) {
    try {
      for (const SweepRecord& sweep : store.sweeps()) {
        for (const PointRecord& p : store.points(sweep.id)) {
          if (p.run == runs.front()) return default_trace_name(runs, &p, extension);
        }
      }
    } catch (const StoreError&) {
    }
  }
  return default_trace_name(runs, nullptr, extension);
}

std::string default_points_name(SweepId sweep) {
  return "offtune-sweep" + std::to_string(sweep.value) + "-points.csv";
}

namespace detail {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& target, const std::string& why) {
  throw ExportError("will not write " + target + ": " + why);
}

// The file's identity, if it exists.
std::optional<std::pair<dev_t, ino_t>> identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

// Whether `path` is an offtune store: an SQLite file whose header carries offtune's application id
// ("OFTN" at offset 68, big-endian, as PRAGMA application_id writes it).
bool is_offtune_store(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 72> head{};
  if (!in.read(head.data(), head.size())) return false;
  return std::string_view(head.data(), 16) == std::string_view("SQLite format 3\0", 16) &&
         std::string_view(head.data() + 68, 4) == "OFTN";
}

// How every memory snapshot of offtune's begins: pickle protocol 2, a dict, its first key
// "offtune".
constexpr std::string_view kSnapshotHead("\x80\x02}(X\x07\x00\x00\x00offtune", 16);

// How much of a Chrome trace's end is read for its metadata: a few hundred bytes per run, so the
// last MiB holds it for thousands of runs.
constexpr int64_t kTraceTail = int64_t{1} << 20;

// Whether a Chrome trace that begins with `head` and ends with `tail` is one of offtune's: its
// metadata, at the end, names offtune as its exporter (another tool's trace has other metadata, or
// none).
bool is_offtune_trace(std::string_view head, std::string_view tail) {
  return head.starts_with(R"({"traceEvents":[)") &&
         tail.find(R"("metadata":{"exporter":"offtune",)") != std::string_view::npos;
}

// Whether the gzip file `path` holds a Chrome trace of offtune's. Read to its end (the metadata is
// last), keeping its beginning and its last kTraceTail bytes; a file that does not decompress is
// not ours.
bool is_gzipped_offtune_trace(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::string head, tail;
  std::array<char, 1 << 16> buf{};
  int n = 0;
  while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
    const auto got = static_cast<size_t>(n);
    if (head.size() < 64) head.append(buf.data(), std::min(got, 64 - head.size()));
    tail.append(buf.data(), got);
    if (tail.size() > 2 * static_cast<size_t>(kTraceTail)) {
      tail.erase(0, tail.size() - static_cast<size_t>(kTraceTail));
    }
  }
  const bool read_through = n == 0;
  gzclose(f);
  return read_through && is_offtune_trace(head, tail);
}

// Whether the regular file `path` (of `size` bytes) may be replaced by an export: it is empty, or
// an earlier offtune export of any format, told by its content (names alone prove nothing):
// - a points CSV: its first line begins with the first columns of points_csv_header();
// - a Chrome trace: it begins with {"traceEvents":[ and its metadata, at the end, names offtune as
//   its exporter (another tool's trace has other metadata, or none); gzipped or not;
// - the Nsight layout: an SQLite file whose META_DATA_EXPORT table has the OFFTUNE_EXPORTER row;
// - a memory snapshot: a pickle whose first key is "offtune".
bool is_offtune_export(const std::string& path, int64_t size) {
  if (size == 0) return true;
  std::ifstream in(path, std::ios::binary);
  std::array<char, 64> head{};
  in.read(head.data(), head.size());
  const std::string_view start(head.data(), static_cast<size_t>(in.gcount()));
  // How the header of every points CSV begins, the ones written before the knob table included:
  // the table's first two knobs.
  constexpr std::string_view kCsv = "index,status,offload,min_offload_size,";
  if (start.starts_with(kCsv)) return true;
  if (start.starts_with(R"({"traceEvents":[)")) {
    const int64_t tail = std::min<int64_t>(size, kTraceTail);
    std::string text(static_cast<size_t>(tail), '\0');
    in.clear();
    in.seekg(size - tail);
    in.read(text.data(), tail);
    return is_offtune_trace(start, text);
  }
  // A memory snapshot: a pickle whose first key is offtune's (export_memory.cpp).
  if (start.starts_with(kSnapshotHead)) return true;
  // A gzip file (-o trace.json.gz): read through, the trace it holds judged as a plain one.
  if (start.starts_with("\x1f\x8b")) return is_gzipped_offtune_trace(path);
  if (start.starts_with(std::string_view("SQLite format 3\0", 16))) {
    // Opened immutable: no lock taken and no -wal or -shm file made beside another program's file.
    // Any failure (not a database, no such table) means: not an export of ours.
    try {
      const Connection db(path, Access::ReadOnly, {.uri_query = "immutable=1"});
      return query_int(db, "SELECT 1 FROM META_DATA_EXPORT WHERE name = 'OFFTUNE_EXPORTER'",
                       "look for the exporter") == 1;
    } catch (const StoreError&) {
      return false;
    }
  }
  return false;
}

// The store's own files, which an export of it must never replace: the database and the side files
// SQLite keeps (or will create) beside it. Compared by identity where they exist and by resolved
// path where they do not yet.
void refuse_store_files(const std::string& target, const std::string& dest,
                        const std::string& store_path) {
  if (store_path.empty()) return;
  const auto target_id = identity(dest);
  std::error_code ec;
  const fs::path dest_path = fs::weakly_canonical(dest, ec);
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = store_path + suffix;
    const auto id = identity(file);
    const bool same = (target_id && id && *target_id == *id) ||
                      (!ec && fs::weakly_canonical(file, ec) == dest_path && !ec);
    if (same) {
      refuse(target, *suffix == '\0' ? "it is the store being exported (" + store_path + ")"
                                     : std::string("it is the store's ") + (suffix + 1) +
                                           " file (" + store_path + ")");
    }
  }
}

}  // namespace

PendingFile::PendingFile(std::string target, const std::string& store_path)
    : target_(std::move(target)), dest_(target_) {
  static std::atomic<unsigned> counter{0};
  const std::string unique = ".tmp-" + std::to_string(static_cast<long long>(::getpid())) + "-" +
                             std::to_string(counter.fetch_add(1));
  if (target_ == "-") {
    mode_ = Mode::Stdout;
    temp_ = (fs::temp_directory_path() / ("offtune-export" + unique)).string();
    return;
  }
  struct stat st {};
  if (::stat(target_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse(target_, "it is a directory");
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      mode_ = Mode::Stream;
      temp_ = (fs::temp_directory_path() / ("offtune-export" + unique)).string();
      return;
    }
    if (!S_ISREG(st.st_mode))
      refuse(target_, "it is not a regular file, a FIFO or a character device");
    std::error_code ec;
    const fs::path resolved = fs::canonical(target_, ec);  // a symbolic link stays one
    if (!ec) dest_ = resolved.string();
    refuse_store_files(target_, dest_, store_path);
    if (is_offtune_store(dest_)) refuse(target_, "it is an offtune store, not an export");
    if (!is_offtune_export(dest_, static_cast<int64_t>(st.st_size))) {
      refuse(target_, "it exists and is not an offtune export (remove it or choose another name)");
    }
  } else {
    refuse_store_files(target_, dest_, store_path);
  }
  // Unique per process and per export, hidden, and in the same directory as the destination.
  const fs::path d(dest_);
  temp_ = (d.parent_path() / ("." + d.filename().string() + unique)).string();
}

PendingFile::~PendingFile() {
  if (committed_) return;
  std::error_code ignored;
  std::filesystem::remove(temp_, ignored);
  // SQLite may have left its rollback journal beside an aborted database.
  std::filesystem::remove(temp_ + "-journal", ignored);
}

void PendingFile::commit() {
  const auto fail = [&](int err) {
    std::error_code ignored;
    fs::remove(temp_, ignored);
    throw ExportError("cannot write " + target_ + ": " + std::strerror(err));
  };
  if (mode_ == Mode::File) {
    if (std::rename(temp_.c_str(), dest_.c_str()) != 0) fail(errno);
    committed_ = true;
    return;
  }
  // A stream: the complete file is copied into it, and every byte must be taken.
  const int in = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) fail(errno);
  const int out =
      mode_ == Mode::Stdout ? STDOUT_FILENO : ::open(dest_.c_str(), O_WRONLY | O_CLOEXEC);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    fail(err);
  }
  std::array<char, 1 << 16> buf{};
  int err = 0;
  while (err == 0) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n == 0) break;
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    for (ssize_t done = 0; done < n && err == 0;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno != EINTR) err = errno;
      if (w > 0) done += w;
    }
  }
  ::close(in);
  if (mode_ == Mode::Stream && ::close(out) != 0 && err == 0) err = errno;
  if (err != 0) fail(err);
  std::error_code ignored;
  fs::remove(temp_, ignored);
  committed_ = true;
}

std::vector<RunRecord> load_runs(Store& store, const std::vector<RunId>& runs) {
  if (runs.empty()) throw ExportError("nothing to export: no run ids given");
  std::vector<RunRecord> out;
  std::unordered_set<RunId> seen;
  for (RunId id : runs) {
    if (!seen.insert(id).second) continue;
    std::optional<RunRecord> r;
    try {
      r = store.run(id);
    } catch (const StoreError& e) {
      throw ExportError("cannot read run " + std::to_string(id.value) + ": " + e.what());
    }
    if (!r) throw ExportError("unknown run id " + std::to_string(id.value));
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace detail

void export_points_csv(Store& store, SweepId sweep, const std::string& path) {
  std::vector<PointRecord> points;
  std::map<int64_t, PointPrediction> predicted;
  try {
    if (!store.sweep(sweep)) throw ExportError("unknown sweep id " + std::to_string(sweep.value));
    points = store.points(sweep);
    for (auto& p : store.predictions(sweep)) predicted.emplace(p.index, std::move(p));
  } catch (const StoreError& e) {
    throw ExportError("cannot read sweep " + std::to_string(sweep.value) + ": " + e.what());
  }

  detail::PendingFile file(path, store.path());
  {
    std::ofstream out(file.path(), std::ios::binary | std::ios::trunc);
    if (!out) throw ExportError("cannot write " + path + ": " + std::strerror(errno));
    out << points_csv_header() << "\r\n";
    for (const PointRecord& p : points) {
      const auto it = predicted.find(p.index);
      out << point_line(p, it == predicted.end() ? nullptr : &it->second);
    }
    out.flush();
    if (!out) throw ExportError("cannot write " + path + ": write failed (disk full?)");
  }
  file.commit();
}

}  // namespace offtune::profiler
