// The profiler sections of offtune-bench (see profiler_bench.hpp).
#include "profiler_bench.hpp"

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/observer.hpp"
#include "offtune/options.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/knob_text.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/samples/registry.hpp"

namespace offtune::bench {

namespace fs = std::filesystem;
namespace pf = offtune::profiler;

// ---- temporary directory -----------------------------------------------------------------------

TempDir::TempDir(const std::string& base) {
  const fs::path parent = base.empty() ? fs::temp_directory_path() : fs::path(base);
  std::string pattern = (parent / "offtune-bench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create a temporary directory in " + parent.string() + ": " +
                             std::strerror(errno));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;  // best effort: never throw from a destructor
  fs::remove_all(path_, ec);
}

namespace {

constexpr int64_t kEventsPerStep = 1000;  // synthetic timeline: events per training step
constexpr int64_t kSlotNs = 10'000;       // one event every 10 us
constexpr int64_t kTensorBytes = int64_t{1} << 20;

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Bytes of an SQLite database on disk: the file and a WAL not yet checkpointed into it.
int64_t db_bytes(const fs::path& db) {
  std::error_code ec;
  int64_t total = 0;
  for (const fs::path& p : {db, fs::path(db.string() + "-wal")}) {
    const auto size = fs::file_size(p, ec);
    if (!ec) total += static_cast<int64_t>(size);
  }
  return total;
}

int64_t file_bytes(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(size);
}

pf::RunRecord synthetic_run() {
  pf::RunRecord run;
  run.label = "offtune-bench synthetic timeline";
  run.env.backend = "host-sim";
  run.env.device = "synthetic";
  run.workload.model = "synthetic";
  run.workload.dtype = "fp32";
  run.started_unix_ns = now_unix_ns();
  return run;
}

// Event `i` of a synthetic timeline shaped like the recorder's: every step of kEventsPerStep events
// has a step span, a forward and a backward span, and otherwise a repeating mix of compute spans,
// pack and unpack instants, copies on the side stream and waits. Start times increase with i.
void synthetic_event(pf::RunId run, int64_t i, pf::TimelineEvent& e) {
  const int64_t j = i % kEventsPerStep;
  const int64_t t = i * kSlotNs;
  e.run = run;
  e.start_ns = t;
  e.end_ns = t;
  e.stream = 0;
  e.bytes = 0;
  e.tensor = -1;
  e.pinned = true;
  e.prefetch = false;
  if (j == 0) {
    e.kind = pf::EventKind::Step;
    e.end_ns = t + kEventsPerStep * kSlotNs - 1;
    e.name = "step";
    return;
  }
  if (j == 1 || j == kEventsPerStep / 2) {
    e.kind = j == 1 ? pf::EventKind::Forward : pf::EventKind::Backward;
    e.end_ns = t + (kEventsPerStep / 2 - 1) * kSlotNs;
    e.name = j == 1 ? "forward" : "backward";
    return;
  }
  switch (j % 6) {
    case 0:
      e.kind = pf::EventKind::Compute;
      e.end_ns = t + 8'000;
      e.name = "compute";
      break;
    case 1:
      e.kind = pf::EventKind::Pack;
      e.bytes = kTensorBytes;
      e.tensor = i;
      e.name = to_string(PackDecision::Offloaded);
      break;
    case 2:
      e.kind = pf::EventKind::CopyD2H;
      e.end_ns = t + 45'000;
      e.stream = 1;
      e.bytes = kTensorBytes;
      e.tensor = i - 1;
      e.name = to_string(CopyDirection::DeviceToHost);
      break;
    case 3:
      e.kind = pf::EventKind::Wait;
      e.end_ns = t + 2'000;
      e.name = to_string(WaitKind::ForwardWindow);
      break;
    case 4:
      e.kind = pf::EventKind::Unpack;
      e.bytes = kTensorBytes;
      e.tensor = i - 3;
      e.name = to_string(UnpackSource::Prefetched);
      break;
    default:
      e.kind = pf::EventKind::CopyH2D;
      e.end_ns = t + 45'000;
      e.stream = 1;
      e.bytes = kTensorBytes;
      e.tensor = i - 4;
      e.prefetch = true;
      e.name = "prefetch";
      break;
  }
}

void synthetic_step(pf::RunId run, int64_t i, pf::StepRecord& s) {
  s.run = run;
  s.step = i;
  s.begin_ns = i * kEventsPerStep * kSlotNs;
  s.end_ns = s.begin_ns + kEventsPerStep * kSlotNs - 1;
  s.peak_allocated = (int64_t{3} << 30) + i % 4096;
  s.peak_reserved = int64_t{4} << 30;
  s.offloaded_bytes = 166 * kTensorBytes;
  s.reloaded_bytes = 166 * kTensorBytes;
  s.hidden_copy_pct = 97.5;
  s.exposed_copy_ns = 120'000 + i % 1000;
  s.loss = 10.0 / static_cast<double>(i + 1);
}

void synthetic_occupancy(pf::RunId run, int64_t i, pf::OccupancySample& o) {
  o.run = run;
  o.time_ns = i * kSlotNs;
  o.fwd_count = i % 6;
  o.fwd_bytes = (i % 6) * kTensorBytes;
  o.bwd_count = i % 3;
  o.bwd_bytes = (i % 3) * kTensorBytes;
  o.device_bytes = (int64_t{2} << 30) + (i % 1000) * kTensorBytes;
}

// Inserts `rows` synthetic rows in calls of `batch` (each one transaction), timing the calls only.
template <typename Record, typename Fill, typename Add>
void insert_rows(int64_t rows, int64_t batch, Fill fill, Add add, InsertRow& out) {
  std::vector<Record> buffer;
  std::vector<double> call_ms;
  double total_s = 0.0;
  for (int64_t done = 0; done < rows;) {
    const int64_t n = std::min(batch, rows - done);
    buffer.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) fill(done + k, buffer[static_cast<size_t>(k)]);
    const auto start = Clock::now();
    add(buffer);
    const double ms = ms_since(start);
    call_ms.push_back(ms);
    total_s += ms / 1e3;
    done += n;
  }
  out.rows = rows;
  out.batch = batch;
  out.insert_s = total_s;
  out.batch_ms_p50 = median(call_ms);
  out.batch_ms_max = call_ms.empty() ? kNaN : *std::max_element(call_ms.begin(), call_ms.end());
}

enum class TableKind { Events, Steps, Occupancy };

const char* table_name(TableKind t) {
  switch (t) {
    case TableKind::Events:
      return "events";
    case TableKind::Steps:
      return "steps";
    default:
      return "occupancy";
  }
}

// Inserts into one table of `store` under a fresh run.
InsertRow insert_into(pf::Store& store, TableKind table, int64_t rows, int64_t batch) {
  InsertRow row;
  row.table = table_name(table);
  const pf::RunId run = store.begin_run(synthetic_run());
  switch (table) {
    case TableKind::Events:
      insert_rows<pf::TimelineEvent>(
          rows, batch, [&](int64_t i, pf::TimelineEvent& e) { synthetic_event(run, i, e); },
          [&](const std::vector<pf::TimelineEvent>& b) { store.add_events(b); }, row);
      break;
    case TableKind::Steps:
      insert_rows<pf::StepRecord>(
          rows, batch, [&](int64_t i, pf::StepRecord& s) { synthetic_step(run, i, s); },
          [&](const std::vector<pf::StepRecord>& b) { store.add_steps(b); }, row);
      break;
    case TableKind::Occupancy:
      insert_rows<pf::OccupancySample>(
          rows, batch, [&](int64_t i, pf::OccupancySample& o) { synthetic_occupancy(run, i, o); },
          [&](const std::vector<pf::OccupancySample>& b) { store.add_occupancy(b); }, row);
      break;
  }
  store.finish_run(run, pf::RunStatus::Ok, "", pf::RunSummary{}, now_unix_ns());
  return row;
}

int64_t aux_rows(int64_t events) { return std::max<int64_t>(1, events / 10); }

}  // namespace

std::vector<KnobValue> sweep_axis(std::string_view key, std::string_view text,
                                  std::string_view flag) {
  const Knob& k = knob(key);
  try {
    return pf::parse_knob_list(k, text);
  } catch (const std::invalid_argument& e) {
    if (flag.empty()) throw;
    // The message names the knob's flag ("--max-fwd-stash-size must be ..."): the bench's instead.
    const std::string what = e.what();
    throw std::invalid_argument(std::string(flag) + (what.rfind(k.flag, 0) == 0
                                                         ? what.substr(k.flag.size())
                                                         : ": " + what));
  }
}

void validate(const ProfilerArgs& args) {
  sweep_axis("min_offload_size", args.sweep_sizes, "--sweep-min-offload-size");
  sweep_axis("max_fwd_stash_size", args.sweep_windows, "--sweep-max-fwd-stash-size");
}

// ---- store -------------------------------------------------------------------------------------

StoreResult bench_store(const ProfilerArgs& args, const fs::path& dir) {
  StoreResult result;
  struct Plan {
    TableKind table;
    int64_t rows;
    const char* file;
  };
  const std::vector<Plan> plans = {{TableKind::Events, args.events, "events.db"},
                                   {TableKind::Steps, aux_rows(args.events), "steps.db"},
                                   {TableKind::Occupancy, aux_rows(args.events), "occupancy.db"}};
  // SQLite: one fresh file per table, so that each file's size is that table's.
  for (const Plan& plan : plans) {
    const fs::path db = dir / plan.file;
    std::unique_ptr<pf::Store> store = pf::open_sqlite_store(db.string());
    InsertRow row = insert_into(*store, plan.table, plan.rows, args.batch_events);
    const auto start = Clock::now();
    store.reset();
    row.close_s = seconds_since(start);
    row.store = "sqlite";
    row.file_bytes = db_bytes(db);
    result.rows.push_back(row);
    if (plan.table != TableKind::Events) fs::remove(db);  // events.db stays for the export section
  }
  // Memory: one store for the three tables, as a sweep's would be.
  std::unique_ptr<pf::Store> memory = pf::make_memory_store();
  std::vector<InsertRow> memory_rows;
  for (const Plan& plan : plans) {
    memory_rows.push_back(insert_into(*memory, plan.table, plan.rows, args.batch_events));
  }
  const auto start = Clock::now();
  memory.reset();
  const double close_s = seconds_since(start);
  for (InsertRow& row : memory_rows) {
    row.store = "memory";
    row.close_s = close_s;  // the whole store is freed at once
    result.rows.push_back(row);
  }
  return result;
}

void print_store(const StoreResult& r) {
  fmt::print("== Store insert rate ==\n");
  fmt::print(
      "synthetic timeline (steps of {} events: step/forward/backward spans, compute, pack, D2H, "
      "wait, unpack, H2D); steps and occupancy rows: events/10 each; every add_* call is one "
      "transaction; sqlite: a fresh file per table (WAL, synchronous=NORMAL), bytes after close; "
      "memory: one store, close frees it\n",
      kEventsPerStep);
  Table table({"store", "table", "rows", "rows/call", "insert s", "rows/s", "call ms p50",
               "call ms max", "close s", "file MiB", "bytes/row"},
              2);
  for (const InsertRow& row : r.rows) {
    const bool file = row.file_bytes >= 0;
    table.add({row.store, row.table, grouped(row.rows), grouped(row.batch), fixed(row.insert_s, 4),
               grouped(static_cast<double>(row.rows) / row.insert_s), fixed(row.batch_ms_p50, 2),
               fixed(row.batch_ms_max, 2), fixed(row.close_s, 4),
               file ? fixed(static_cast<double>(row.file_bytes) / kMiB, 1) : std::string("-"),
               file ? fixed(static_cast<double>(row.file_bytes) / static_cast<double>(row.rows), 1)
                    : std::string("-")});
  }
  table.print();
  fmt::print("\n");
}

json store_json(const StoreResult& r) {
  json rows = json::array();
  for (const InsertRow& row : r.rows) {
    const bool file = row.file_bytes >= 0;
    rows.push_back(
        {{"store", row.store},
         {"table", row.table},
         {"rows", row.rows},
         {"rows_per_call", row.batch},
         {"insert_seconds", row.insert_s},
         {"rows_per_second", number_or_null(static_cast<double>(row.rows) / row.insert_s)},
         {"call_ms_p50", number_or_null(row.batch_ms_p50)},
         {"call_ms_max", number_or_null(row.batch_ms_max)},
         {"close_seconds", row.close_s},
         {"file_bytes", file ? json(row.file_bytes) : json(nullptr)},
         {"bytes_per_row",
          file ? json(static_cast<double>(row.file_bytes) / static_cast<double>(row.rows))
               : json(nullptr)}});
  }
  return {{"events_per_step", kEventsPerStep}, {"rows", rows}};
}

// ---- export ------------------------------------------------------------------------------------

ExportResult bench_export(const ProfilerArgs& args, const fs::path& dir) {
  ExportResult result;
  const fs::path db = dir / "events.db";
  if (!fs::exists(db)) {  // the store section did not run: fill it here, untimed for the export
    const auto start = Clock::now();
    std::unique_ptr<pf::Store> store = pf::open_sqlite_store(db.string());
    insert_into(*store, TableKind::Events, args.events, args.batch_events);
    store.reset();
    result.prepared = true;
    result.prepare_s = seconds_since(start);
  }
  result.db_bytes = db_bytes(db);

  auto start = Clock::now();
  std::unique_ptr<pf::Store> store = pf::open_sqlite_store_readonly(db.string());
  result.rows.push_back({"open read-only", 0, seconds_since(start), -1});
  const std::vector<pf::RunRecord> runs = store->runs();
  if (runs.size() != 1) {
    throw std::runtime_error(db.string() + ": expected one run, found " +
                             std::to_string(runs.size()));
  }
  const pf::RunId run = runs.front().id;

  start = Clock::now();
  int64_t events = 0;
  {
    const std::vector<pf::TimelineEvent> all = store->events(run);
    events = static_cast<int64_t>(all.size());
  }
  result.rows.push_back({"read (Store::events)", events, seconds_since(start), -1});
  result.rows.front().events = events;

  const auto export_one = [&](const std::string& what, const fs::path& out, auto&& write) {
    const auto begin = Clock::now();
    write(*store, std::vector<pf::RunId>{run}, out.string());
    const double s = seconds_since(begin);
    result.rows.push_back({what, events, s, file_bytes(out)});
    std::error_code ec;
    fs::remove(out, ec);  // free the space before the next one
  };
  export_one("chrome-json", dir / "trace.json", pf::export_chrome_trace);
  export_one("nsys-sqlite", dir / "trace.nsys.sqlite", pf::export_nsys_sqlite);
  return result;
}

void print_export(const ExportResult& r) {
  fmt::print("== Export of one run ==\n");
  const int64_t events = r.rows.empty() ? 0 : r.rows.front().events;
  fmt::print("{} events of one run from an SQLite store ({:.1f} MiB{}); each export once\n",
             grouped(events), static_cast<double>(r.db_bytes) / kMiB,
             r.prepared ? fmt::format(", filled first in {:.1f} s", r.prepare_s)
                        : std::string(", the store section's events.db"));
  Table table({"operation", "events", "seconds", "events/s", "MB written", "MB/s", "bytes/event"},
              1);
  for (const ExportRow& row : r.rows) {
    const bool reads = row.what != "open read-only";
    const bool writes = row.bytes >= 0;
    const double mb = static_cast<double>(row.bytes) / kMB;
    table.add({row.what, grouped(row.events), fixed(row.seconds, 3),
               reads ? grouped(static_cast<double>(row.events) / row.seconds) : std::string("-"),
               writes ? fixed(mb, 1) : std::string("-"),
               writes ? fixed(mb / row.seconds, 1) : std::string("-"),
               writes && row.events > 0
                   ? fixed(static_cast<double>(row.bytes) / static_cast<double>(row.events), 1)
                   : std::string("-")});
  }
  table.print();
  fmt::print("\n");
}

json export_json(const ExportResult& r) {
  json rows = json::array();
  for (const ExportRow& row : r.rows) {
    const bool reads = row.what != "open read-only";
    const bool writes = row.bytes >= 0;
    rows.push_back(
        {{"operation", row.what},
         {"events", row.events},
         {"seconds", row.seconds},
         {"events_per_second",
          reads ? number_or_null(static_cast<double>(row.events) / row.seconds) : json(nullptr)},
         {"bytes_written", writes ? json(row.bytes) : json(nullptr)},
         {"mb_written", writes ? json(static_cast<double>(row.bytes) / kMB) : json(nullptr)},
         {"mb_per_second", writes
                               ? number_or_null(static_cast<double>(row.bytes) / kMB / row.seconds)
                               : json(nullptr)}});
  }
  return {{"store_bytes", r.db_bytes},
          {"filled_here", r.prepared},
          {"fill_seconds", r.prepared ? json(r.prepare_s) : json(nullptr)},
          {"rows", rows}};
}

// ---- sweep -------------------------------------------------------------------------------------

namespace {

// Sets the intra-op thread count for a scope and puts the previous one back.
class ThreadsScope {
 public:
  explicit ThreadsScope(int64_t threads) : previous_(at::get_num_threads()) {
    if (threads > 0 && threads != previous_) at::set_num_threads(static_cast<int>(threads));
  }
  ~ThreadsScope() {
    if (at::get_num_threads() != previous_) at::set_num_threads(previous_);
  }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int previous_;
};

}  // namespace

SweepResult bench_sweep(const ProfilerArgs& args, const fs::path& dir) {
  host_sim::install();  // before the model is built, so that parameter bytes count
  const ThreadsScope threads(args.sweep_threads);

  pf::SweepSpec spec;
  spec.name = "offtune-bench";
  spec.workload.model = "tiny";
  spec.workload.batch = 8;
  spec.workload.seq = 128;
  spec.workload.dtype = "fp32";
  spec.workload.seed = 0;
  spec.workload.steps = args.sweep_steps;
  spec.workload.warmup = args.sweep_warmup;
  spec.grid.axes["min_offload_size"] = sweep_axis("min_offload_size", args.sweep_sizes);
  spec.grid.axes["max_fwd_stash_size"] = sweep_axis("max_fwd_stash_size", args.sweep_windows);
  spec.grid.base.link = parse_link("pcie4");
  spec.base.backend = BackendKind::HostSim;
  spec.base.link = spec.grid.base.link.model;
  spec.env.offtune_version = "offtune-bench";
  spec.env.backend = "host-sim";
  spec.env.device = "host-sim (link pcie4)";

  SweepResult result;
  result.model = spec.workload.model;
  result.batch = spec.workload.batch;
  result.seq = spec.workload.seq;
  result.steps = spec.workload.steps;
  result.warmup = spec.workload.warmup;
  result.sizes = args.sweep_sizes;
  result.windows = args.sweep_windows;
  result.threads = at::get_num_threads();

  const fs::path db = dir / "sweep.db";
  std::unique_ptr<pf::Store> store = pf::open_sqlite_store(db.string());
  auto start = Clock::now();
  offtune::samples::WorkloadSpec model;
  model.model = spec.workload.model;
  model.batch = spec.workload.batch;
  model.seq = spec.workload.seq;
  model.seed = spec.workload.seed;
  std::unique_ptr<pf::WorkloadInstance> workload =
      offtune::samples::make_workload(model, c10::Device(c10::kCPU));
  result.setup_s = seconds_since(start);

  start = Clock::now();
  auto last = start;
  const pf::SweepOutcome outcome =
      pf::run_sweep(*workload, spec, *store, [&](const pf::SweepProgress& p) {
        const auto now = Clock::now();
        if (p.last != nullptr) {
          SweepPointRow row;
          row.index = p.last->index;
          row.config = pf::describe_config(p.last->config);
          row.status = pf::to_string(p.last->status);
          row.step_ms =
              p.last->status == pf::PointStatus::Ok ? p.last->summary.step_ms_median : kNaN;
          row.peak_bytes = p.last->summary.peak_allocated;
          row.wall_s = std::chrono::duration<double>(now - last).count();
          row.error = p.last->error;
          result.rows.push_back(std::move(row));
        }
        last = now;
      });
  result.total_s = seconds_since(start);
  result.points = outcome.ran + outcome.skipped;
  result.ok = outcome.ok;
  result.failed = outcome.failed;
  result.oom = outcome.oom;

  for (const pf::RunRecord& run : store->runs()) {
    result.store_events += static_cast<int64_t>(store->events(run.id).size());
  }
  store.reset();
  result.store_bytes = db_bytes(db);
  return result;
}

void print_sweep(const SweepResult& r) {
  fmt::print("== Sweep (the default `offtune sweep` of scripts/run.sh) ==\n");
  fmt::print(
      "model {} batch {} seq {}, {} measured step(s) after {} warmup per point; "
      "--min-offload-size {} x --max-fwd-stash-size {} plus the no-offload baseline; host-sim, "
      "link pcie4, intra-op threads {}; SQLite store (timelines recorded)\n",
      r.model, r.batch, r.seq, r.steps, r.warmup, r.sizes, r.windows, r.threads);
  Table summary({"points", "ok", "failed", "oom", "model setup s", "sweep s", "s/point",
                 "store MiB", "store events"},
                0);
  summary.add({std::to_string(r.points), std::to_string(r.ok), std::to_string(r.failed),
               std::to_string(r.oom), fixed(r.setup_s, 3), fixed(r.total_s, 2),
               fixed(r.points > 0 ? r.total_s / static_cast<double>(r.points) : kNaN, 2),
               fixed(static_cast<double>(r.store_bytes) / kMiB, 1), grouped(r.store_events)});
  summary.print();
  fmt::print("\n");
  Table points({"point", "config", "status", "step ms", "peak MiB", "point s"}, 3);
  for (const SweepPointRow& row : r.rows) {
    points.add({std::to_string(row.index), row.config, row.status, fixed(row.step_ms, 2),
                fixed(static_cast<double>(row.peak_bytes) / kMiB, 1), fixed(row.wall_s, 2)});
  }
  points.print();
  for (const SweepPointRow& row : r.rows) {
    if (!row.error.empty()) fmt::print("point {}: {}\n", row.index, row.error);
  }
  fmt::print("\n");
}

json sweep_json(const SweepResult& r) {
  json points = json::array();
  for (const SweepPointRow& row : r.rows) {
    points.push_back({{"index", row.index},
                      {"config", row.config},
                      {"status", row.status},
                      {"median_step_ms", number_or_null(row.step_ms)},
                      {"peak_device_bytes", row.peak_bytes},
                      {"seconds", row.wall_s},
                      {"error", row.error}});
  }
  return {{"model", r.model},
          {"batch", r.batch},
          {"seq", r.seq},
          {"steps", r.steps},
          {"warmup", r.warmup},
          {"min_offload_sizes", r.sizes},
          {"max_fwd_stash_sizes", r.windows},
          {"backend", "host-sim"},
          {"link", "pcie4"},
          {"intra_op_threads", r.threads},
          {"points", r.points},
          {"ok", r.ok},
          {"failed", r.failed},
          {"oom", r.oom},
          {"setup_seconds", r.setup_s},
          {"total_seconds", r.total_s},
          {"seconds_per_point",
           number_or_null(r.points > 0 ? r.total_s / static_cast<double>(r.points) : kNaN)},
          {"store_bytes", r.store_bytes},
          {"store_events", r.store_events},
          {"point_rows", points}};
}

}  // namespace offtune::bench
