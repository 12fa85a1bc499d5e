// The sweep-points CSV exporter, and the pieces all three exporters share: the temporary file that
// is renamed into place on success, run loading, and run titles.
#include "offtune/profiler/export.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "offtune/profiler/units.hpp"

namespace offtune::profiler {

namespace {

// format_size without its space, so that "min=1MiB" stays one word in a title.
std::string compact_size(int64_t bytes) {
  std::string s = format_size(bytes);
  std::erase(s, ' ');
  return s;
}

// One CSV field per RFC 4180: quoted only when it has to be, quotes doubled inside.
void put_field(std::string& line, std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) {
    line += text;
    return;
  }
  line += '"';
  for (char c : text) {
    if (c == '"') line += '"';
    line += c;
  }
  line += '"';
}

void put_int(std::string& line, int64_t v) { line += std::to_string(v); }

// The shortest text that reads back as the same double; empty for NaN and infinities, which no
// spreadsheet reads the same way.
void put_double(std::string& line, double v) {
  if (!std::isfinite(v)) return;
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  line.append(buf, res.ptr);
}

void put_bool(std::string& line, bool v) { line += v ? "true" : "false"; }

std::string point_line(const PointRecord& p) {
  std::string line;
  put_int(line, p.index);
  line += ',';
  put_field(line, to_string(p.status));
  line += ',';
  put_bool(line, p.config.offload);
  line += ',';
  put_int(line, p.config.min_offload_size);
  line += ',';
  put_int(line, p.config.max_fwd_stash_size);
  line += ',';
  put_int(line, p.config.max_fwd_stash_bytes);
  line += ',';
  put_int(line, p.config.prefetch);
  line += ',';
  put_bool(line, p.config.use_streams);
  line += ',';
  put_bool(line, p.config.use_pin_memory);
  // Only a measured point has figures; the zeros of a pending or failed one would read as data.
  const bool measured = p.status == PointStatus::Ok;
  const RunSummary& s = p.summary;
  line += ',';
  if (measured) put_double(line, s.step_ms_median);
  line += ',';
  if (measured) put_double(line, s.step_ms_stddev);
  line += ',';
  if (measured) put_int(line, s.peak_allocated);
  line += ',';
  if (measured) put_int(line, s.peak_reserved);
  line += ',';
  if (measured) put_int(line, s.offloaded_bytes);
  line += ',';
  if (measured) put_double(line, s.hidden_copy_pct);
  line += ',';
  if (measured) put_int(line, s.exposed_copy_ns);
  line += ',';
  put_field(line, p.error);
  line += "\r\n";
  return line;
}

}  // namespace

std::string describe_config(const EngineConfig& c) {
  if (!c.offload) return "no offload";
  std::string s = "offload min=" + compact_size(c.min_offload_size) +
                  " stash=" + std::to_string(c.max_fwd_stash_size);
  if (c.max_fwd_stash_bytes > 0) s += " stash_bytes=" + compact_size(c.max_fwd_stash_bytes);
  s += " prefetch=" + std::to_string(c.prefetch);
  if (!c.use_streams) s += " single-stream";
  if (!c.use_pin_memory) s += " pageable";
  if (!c.link.empty() && c.link != "none") s += " link=" + c.link;
  return s;
}

std::string run_title(const RunRecord& run) {
  std::string s = "run " + std::to_string(run.id.value) + ":";
  if (!run.workload.model.empty()) s += " " + run.workload.model;
  return s + " " + describe_config(run.config);
}

namespace detail {

PendingFile::PendingFile(std::string target) : target_(std::move(target)) {
  // Unique per process and per export, hidden, and in the same directory as the target.
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path t(target_);
  std::filesystem::path name = "." + t.filename().string() + ".tmp-" +
                               std::to_string(static_cast<long long>(::getpid())) + "-" +
                               std::to_string(counter.fetch_add(1));
  temp_ = (t.parent_path() / name).string();
}

PendingFile::~PendingFile() {
  if (committed_) return;
  std::error_code ignored;
  std::filesystem::remove(temp_, ignored);
  // SQLite may have left its rollback journal beside an aborted database.
  std::filesystem::remove(temp_ + "-journal", ignored);
}

void PendingFile::commit() {
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    std::error_code ignored;
    std::filesystem::remove(temp_, ignored);
    throw ExportError("cannot write " + target_ + ": " + std::strerror(err));
  }
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
  try {
    if (!store.sweep(sweep)) throw ExportError("unknown sweep id " + std::to_string(sweep.value));
    points = store.points(sweep);
  } catch (const StoreError& e) {
    throw ExportError("cannot read sweep " + std::to_string(sweep.value) + ": " + e.what());
  }

  detail::PendingFile file(path);
  {
    std::ofstream out(file.path(), std::ios::binary | std::ios::trunc);
    if (!out) throw ExportError("cannot write " + path + ": " + std::strerror(errno));
    out << kPointsCsvHeader << "\r\n";
    for (const PointRecord& p : points) out << point_line(p);
    out.flush();
    if (!out) throw ExportError("cannot write " + path + ": write failed (disk full?)");
  }
  file.commit();
}

}  // namespace offtune::profiler
