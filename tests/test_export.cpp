// Exporters on a hand-made store: two small runs whose every event is known, and a sweep with
// points in each status. Each format is read back the way its users read it (nlohmann for the
// Chrome JSON, SQL joins for the Nsight-shaped file, text for the CSV) and compared with exact
// values.
#include "offtune/profiler/export.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace offtune::profiler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kBaseA = 5'000'000'000;  // run A's clock at its first event
constexpr int64_t kBaseB = 9'000'000;

OccupancySample occ(RunId run, int64_t t, int64_t fwd_count, int64_t fwd_bytes, int64_t bwd_count,
                    int64_t bwd_bytes, int64_t device_bytes) {
  return {run, t, fwd_count, fwd_bytes, bwd_count, bwd_bytes, device_bytes};
}

// Run A: one step of an offloading run on host-sim: compute on stream 0, a D2H and a prefetched
// pageable H2D on the side stream, a wait, and a kernel on another stream (7). Run B: a baseline
// with two events on a different device. Times below are relative to each run's first event.
struct Fixture {
  std::unique_ptr<Store> store = make_memory_store();
  RunId a, b;
  SweepId sweep;

  Fixture() {
    RunRecord ra;
    ra.status = RunStatus::Ok;
    ra.label = "baseline, take 2";
    ra.env.offtune_version = "0.1.0";
    ra.env.backend = "host-sim";
    ra.env.device = "host-sim (test cpu)";
    ra.workload.model = "tiny";
    ra.started_unix_ns = 1'700'000'000'000'000'000;
    a = store->begin_run(ra);

    RunRecord rb;
    rb.status = RunStatus::Ok;
    rb.env.device = "Test GPU";
    rb.workload.model = "mlp";
    rb.config.offload = false;
    b = store->begin_run(rb);

    const int64_t T = kBaseA;
    store->add_events({
        event_span(EventKind::Step, T, T + 10000, {.run = a, .name = "step 0"}),
        event_span(EventKind::Forward, T, T + 4000, {.run = a, .name = "forward"}),
        event_span(EventKind::Compute, T, T + 1500, {.run = a, .name = "compute"}),
        event_span(EventKind::Pack, T + 500, T + 500,
                   {.run = a, .bytes = 4096, .tensor = 3, .name = "offloaded"}),
        event_span(EventKind::CopyD2H, T + 600, T + 1834,
                   {.run = a, .stream = 1, .bytes = 4096, .tensor = 3, .name = "D2H"}),
        event_span(EventKind::Compute, T + 1500, T + 4000, {.run = a, .name = "compute"}),
        event_span(EventKind::Backward, T + 4000, T + 10000, {.run = a, .name = "backward"}),
        event_span(EventKind::CopyH2D, T + 4200, T + 5200,
                   {.run = a,
                    .stream = 1,
                    .bytes = 4096,
                    .tensor = 3,
                    .pinned = false,
                    .prefetch = true,
                    .name = "prefetch"}),
        event_span(EventKind::Wait, T + 5000, T + 5250, {.run = a, .tensor = 3, .name = "reload"}),
        event_span(EventKind::Unpack, T + 5300, T + 5300,
                   {.run = a, .bytes = 4096, .tensor = 3, .name = "host"}),
        event_span(EventKind::Compute, T + 5300, T + 10000,
                   {.run = a, .stream = 7, .name = "gemm_kernel"}),
    });
    store->add_occupancy(
        {occ(a, T + 500, 1, 4096, 0, 0, -1), occ(a, T + 4100, 0, 0, 1, 4096, 1234567)});
    StepRecord s;
    s.run = a;
    s.step = 0;
    s.begin_ns = T;
    s.end_ns = T + 10000;
    s.peak_allocated = 8192;
    s.loss = 2.5;
    store->add_steps({s});

    const int64_t U = kBaseB;
    store->add_events(
        {event_span(EventKind::Step, U, U + 3000, {.run = b, .name = "step 0"}),
         event_span(EventKind::Compute, U + 100, U + 2900, {.run = b, .name = "compute"})});
    store->add_occupancy({occ(b, U + 50, 0, 0, 0, 0, 777)});

    SweepRecord sw;
    sw.name = "grid";
    sw.key = "k1";
    sweep = store->create_sweep(sw);
    add_points();
  }

  void add_points() {
    PointRecord p0;
    p0.sweep = sweep;
    p0.index = 0;
    p0.config.offload = false;
    p0.status = PointStatus::Ok;
    p0.summary.step_ms_median = 12.5;
    p0.summary.step_ms_stddev = 0.25;
    p0.summary.peak_allocated = 1048576;
    p0.summary.peak_reserved = 2097152;
    store->put_point(p0);

    PointRecord p1;
    p1.sweep = sweep;
    p1.index = 1;
    p1.config.min_offload_size = 1048576;
    p1.config.max_fwd_stash_size = 3;
    p1.config.max_fwd_stash_bytes = 67108864;
    p1.config.prefetch = 2;
    p1.config.use_pin_memory = false;
    p1.status = PointStatus::Ok;
    p1.summary.step_ms_median = 13.75;
    p1.summary.step_ms_stddev = 0.5;
    p1.summary.peak_allocated = 524288;
    p1.summary.peak_reserved = 1048576;
    p1.summary.offloaded_bytes = 4194304;
    p1.summary.hidden_copy_pct = 87.5;
    p1.summary.exposed_copy_ns = 125000;
    store->put_point(p1);

    PointRecord p2;
    p2.sweep = sweep;
    p2.index = 2;
    p2.config.use_streams = false;
    p2.status = PointStatus::Failed;
    p2.error = "copy failed, code \"7\"";
    p2.summary.step_ms_median = 99.0;  // not a measurement: must not be exported
    store->put_point(p2);

    PointRecord p3;
    p3.sweep = sweep;
    p3.index = 3;
    p3.config.min_offload_size = 4096;
    store->put_point(p3);  // pending

    PointRecord p4;
    p4.sweep = sweep;
    p4.index = 4;
    p4.config.max_fwd_stash_size = 8;
    p4.status = PointStatus::OutOfMemory;
    p4.error = "CUDA out of memory\ntried to allocate 2 GiB";
    store->put_point(p4);
  }
};

// A fresh directory per test, removed afterwards.
class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "offtune-export-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::permissions(dir_, fs::perms::owner_all, ignored);
    fs::remove_all(dir_, ignored);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }

  fs::path dir_;
  Fixture fx_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// --- Chrome trace
// ---------------------------------------------------------------------------------

json load_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<json> select(const json& trace, const std::string& ph, int64_t pid) {
  std::vector<json> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph && e.at("pid") == pid) out.push_back(e);
  }
  return out;
}

const json* find_named(const std::vector<json>& events, const std::string& name) {
  for (const auto& e : events) {
    if (e.at("name") == name) return &e;
  }
  return nullptr;
}

TEST_F(ExportTest, ChromeTraceHasProcessesTracksAndEvents) {
  const std::string out = file("trace.json");
  export_chrome_trace(*fx_.store, {fx_.a, fx_.b}, out);
  const json trace = load_json(out);

  EXPECT_EQ(trace.at("displayTimeUnit"), "ns");
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  ASSERT_EQ(trace.at("metadata").at("runs").size(), 2u);
  EXPECT_EQ(trace.at("metadata").at("runs").at(0).at("time_origin_ns"), kBaseA);
  EXPECT_EQ(trace.at("metadata").at("runs").at(1).at("status"), "ok");

  // Process and thread names.
  std::map<int64_t, std::string> processes;
  std::map<std::pair<int64_t, int64_t>, std::string> threads;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    const auto pid = e.at("pid").get<int64_t>();
    if (e.at("name") == "process_name") processes[pid] = e.at("args").at("name");
    if (e.at("name") == "thread_name") {
      threads[{pid, e.at("tid").get<int64_t>()}] = e.at("args").at("name");
    }
  }
  const int64_t pa = fx_.a.value;
  const int64_t pb = fx_.b.value;
  EXPECT_EQ(processes, (std::map<int64_t, std::string>{
                           {pa, "run " + std::to_string(pa) +
                                    ": tiny offload min=1KiB stash=5 "
                                    "prefetch=1"},
                           {pb, "run " + std::to_string(pb) + ": mlp no offload"}}));
  EXPECT_EQ(threads,
            (std::map<std::pair<int64_t, int64_t>, std::string>{{{pa, 0}, "compute"},
                                                                {{pa, 1}, "copy (side stream)"},
                                                                {{pa, 7}, "stream 7"},
                                                                {{pa, 1000000}, "phases"},
                                                                {{pb, 0}, "compute"},
                                                                {{pb, 1000000}, "phases"}}));

  // Complete events: step, forward, backward, three compute, two copies, one wait.
  const auto xa = select(trace, "X", pa);
  EXPECT_EQ(xa.size(), 9u);
  EXPECT_EQ(select(trace, "X", pb).size(), 2u);

  const json* d2h = find_named(xa, "D2H");
  ASSERT_NE(d2h, nullptr);
  EXPECT_EQ((*d2h).at("tid"), 1);
  EXPECT_EQ((*d2h).at("cat"), "copy");
  EXPECT_DOUBLE_EQ((*d2h).at("ts").get<double>(), 0.6);
  EXPECT_DOUBLE_EQ((*d2h).at("dur").get<double>(), 1.234);
  EXPECT_EQ((*d2h).at("args").at("bytes"), 4096);
  EXPECT_EQ((*d2h).at("args").at("tensor"), 3);
  EXPECT_EQ((*d2h).at("args").at("pinned"), true);
  EXPECT_EQ((*d2h).at("args").at("prefetch"), false);

  const json* h2d = find_named(xa, "H2D");
  ASSERT_NE(h2d, nullptr);
  EXPECT_DOUBLE_EQ((*h2d).at("ts").get<double>(), 4.2);
  EXPECT_DOUBLE_EQ((*h2d).at("dur").get<double>(), 1.0);
  EXPECT_EQ((*h2d).at("args").at("pinned"), false);
  EXPECT_EQ((*h2d).at("args").at("prefetch"), true);

  const json* wait = find_named(xa, "wait: reload");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ((*wait).at("tid"), 0);
  EXPECT_EQ((*wait).at("cat"), "wait");
  EXPECT_DOUBLE_EQ((*wait).at("ts").get<double>(), 5.0);
  EXPECT_DOUBLE_EQ((*wait).at("dur").get<double>(), 0.25);

  const json* step = find_named(xa, "step 0");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ((*step).at("tid"), 1000000);
  EXPECT_DOUBLE_EQ((*step).at("dur").get<double>(), 10.0);
  EXPECT_EQ((*step).at("args").at("peak_allocated"), 8192);
  EXPECT_DOUBLE_EQ((*step).at("args").at("loss").get<double>(), 2.5);

  const json* kernel = find_named(xa, "gemm_kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ((*kernel).at("tid"), 7);
  EXPECT_DOUBLE_EQ((*kernel).at("ts").get<double>(), 5.3);

  // Instants.
  const auto ia = select(trace, "i", pa);
  ASSERT_EQ(ia.size(), 2u);
  const json* pack = find_named(ia, "pack: offloaded");
  ASSERT_NE(pack, nullptr);
  EXPECT_DOUBLE_EQ((*pack).at("ts").get<double>(), 0.5);
  EXPECT_EQ((*pack).at("args").at("decision"), "offloaded");
  EXPECT_EQ((*pack).at("args").at("bytes"), 4096);
  EXPECT_EQ((*pack).at("args").at("tensor"), 3);
  ASSERT_NE(find_named(ia, "unpack: host"), nullptr);

  // Counters: two stash samples; device bytes only where known.
  const auto ca = select(trace, "C", pa);
  int stash_bytes = 0;
  int stash_count = 0;
  std::vector<json> device;
  for (const auto& c : ca) {
    if (c.at("name") == "stash bytes") ++stash_bytes;
    if (c.at("name") == "stash count") ++stash_count;
    if (c.at("name") == "device bytes") device.push_back(c);
  }
  EXPECT_EQ(stash_bytes, 2);
  EXPECT_EQ(stash_count, 2);
  ASSERT_EQ(device.size(), 1u);
  EXPECT_DOUBLE_EQ(device[0].at("ts").get<double>(), 4.1);
  EXPECT_EQ(device[0].at("args").at("bytes"), 1234567);
  const json* first_bytes = find_named(ca, "stash bytes");
  ASSERT_NE(first_bytes, nullptr);
  EXPECT_EQ((*first_bytes).at("args").at("fwd_bytes"), 4096);
  EXPECT_EQ((*first_bytes).at("args").at("bwd_bytes"), 0);

  // Run B's origin is its first occupancy-or-event time: the step.
  const auto xb = select(trace, "X", pb);
  const json* compute_b = find_named(xb, "compute");
  ASSERT_NE(compute_b, nullptr);
  EXPECT_DOUBLE_EQ((*compute_b).at("ts").get<double>(), 0.1);
  EXPECT_DOUBLE_EQ((*compute_b).at("dur").get<double>(), 2.8);

  EXPECT_EQ(entries(), (std::set<std::string>{"trace.json"}));  // no temporary left behind
}

TEST_F(ExportTest, ChromeTraceExportsARepeatedRunOnce) {
  const std::string out = file("trace.json");
  export_chrome_trace(*fx_.store, {fx_.b, fx_.b}, out);
  const json trace = load_json(out);
  EXPECT_EQ(trace.at("metadata").at("runs").size(), 1u);
  EXPECT_EQ(select(trace, "X", fx_.b.value).size(), 2u);
}

// --- Nsight-shaped SQLite ------------------------------------------------------------------------

using Rows = std::vector<std::vector<std::string>>;

class Db {
 public:
  explicit Db(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Every row of a query, each column as text ("NULL" for NULL).
  Rows query(const std::string& sql) {
    Rows rows;
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << sqlite3_errmsg(db_);
    if (rc != SQLITE_OK) return rows;
    while (sqlite3_step(stmt) == SQLITE_ROW) rows.push_back(row(stmt));
    sqlite3_finalize(stmt);
    return rows;
  }
  sqlite3* handle() { return db_; }

  static std::vector<std::string> row(sqlite3_stmt* stmt) {
    std::vector<std::string> r;
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      const unsigned char* text = sqlite3_column_text(stmt, i);
      r.push_back(text == nullptr ? "NULL" : reinterpret_cast<const char*>(text));
    }
    return r;
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST_F(ExportTest, NsysLayoutAnswersNsightQueries) {
  const std::string out = file("trace.sqlite");
  export_nsys_sqlite(*fx_.store, {fx_.a, fx_.b}, out);
  Db db(out);

  // A cuda_gpu_trace-style join: copies with their Nsight copy-kind labels.
  EXPECT_EQ(db.query("SELECT m.start, m.end, m.bytes, e.label FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
                     "JOIN ENUM_CUDA_MEMCPY_OPER e ON m.copyKind = e.id ORDER BY m.start"),
            (Rows{{"600", "1834", "4096", "Device-to-Host"},
                  {"4200", "5200", "4096", "Host-to-Device"}}));
  EXPECT_EQ(
      db.query("SELECT e.name, s.label, d.label, m.streamId, m.globalPid >> 24 "
               "FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
               "JOIN ENUM_CUDA_MEMCPY_OPER e ON m.copyKind = e.id "
               "JOIN ENUM_CUDA_MEM_KIND s ON m.srcKind = s.id "
               "JOIN ENUM_CUDA_MEM_KIND d ON m.dstKind = d.id ORDER BY m.start"),
      (Rows{{"CUDA_MEMCPY_KIND_DTOH", "Device", "Pinned", "1", std::to_string(fx_.a.value)},
            {"CUDA_MEMCPY_KIND_HTOD", "Pageable", "Device", "1", std::to_string(fx_.a.value)}}));
  EXPECT_EQ(db.query("SELECT i.tensor, i.pinned, i.prefetch FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
                     "JOIN OFFTUNE_COPY_INFO i USING (correlationId) ORDER BY m.start"),
            (Rows{{"3", "1", "0"}, {"3", "0", "1"}}));

  // Kernels through StringIds.
  const std::string ga = std::to_string(fx_.a.value << 24);
  const std::string gb = std::to_string(fx_.b.value << 24);
  EXPECT_EQ(db.query("SELECT k.globalPid, k.start, k.end, k.streamId, k.deviceId, s.value "
                     "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON k.shortName = s.id "
                     "ORDER BY k.globalPid, k.start"),
            (Rows{{ga, "0", "1500", "0", "0", "compute"},
                  {ga, "1500", "4000", "0", "0", "compute"},
                  {ga, "5300", "10000", "7", "0", "gemm_kernel"},
                  {gb, "100", "2900", "0", "1", "compute"}}));
  EXPECT_EQ(db.query("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                     "JOIN StringIds d ON k.demangledName = d.id WHERE d.value = 'gemm_kernel'"),
            (Rows{{"1"}}));

  // NVTX ranges and marks of run A, on its main thread.
  const std::string ta = std::to_string((fx_.a.value << 24) | fx_.a.value);
  EXPECT_EQ(db.query("SELECT text, eventType, start, end FROM NVTX_EVENTS WHERE globalTid = " + ta +
                     " ORDER BY start, rowid"),
            (Rows{{"offtune:step 0", "59", "0", "10000"},
                  {"offtune:forward", "59", "0", "4000"},
                  {"offtune:pack offloaded", "34", "500", "NULL"},
                  {"offtune:backward", "59", "4000", "10000"},
                  {"offtune:wait reload", "59", "5000", "5250"},
                  {"offtune:unpack host", "34", "5300", "NULL"}}));
  EXPECT_EQ(db.query("SELECT e.label, COUNT(*) FROM NVTX_EVENTS n "
                     "JOIN ENUM_NSYS_EVENT_TYPE e ON n.eventType = e.id GROUP BY e.label "
                     "ORDER BY e.label"),
            (Rows{{"NvtxMark", "2"}, {"NvtxPushPopRange", "5"}}));
  EXPECT_EQ(db.query("SELECT int64Value, jsonText FROM NVTX_EVENTS WHERE eventType = 34 "
                     "ORDER BY start"),
            (Rows{{"4096", R"({"bytes":4096,"decision":"offloaded","tensor":3})"},
                  {"4096", R"({"bytes":4096,"source":"host","tensor":3})"}}));

  // Processes, devices, enums and metadata.
  EXPECT_EQ(db.query("SELECT pid, name FROM PROCESSES ORDER BY pid"),
            (Rows{{std::to_string(fx_.a.value), "run " + std::to_string(fx_.a.value) +
                                                    ": tiny offload min=1KiB stash=5 "
                                                    "prefetch=1"},
                  {std::to_string(fx_.b.value),
                   "run " + std::to_string(fx_.b.value) + ": mlp no offload"}}));
  EXPECT_EQ(db.query("SELECT id, name FROM TARGET_INFO_GPU ORDER BY id"),
            (Rows{{"0", "host-sim (test cpu)"}, {"1", "Test GPU"}}));
  EXPECT_EQ(db.query("SELECT id, label FROM ENUM_CUDA_MEM_KIND WHERE id IN (0, 1, 2, 7) "
                     "ORDER BY id"),
            (Rows{{"0", "Pageable"}, {"1", "Pinned"}, {"2", "Device"}, {"7", "Unknown"}}));
  EXPECT_EQ(db.query("SELECT COUNT(*), MIN(id), MAX(id) FROM ENUM_CUDA_MEMCPY_OPER"),
            (Rows{{"14", "0", "13"}}));
  EXPECT_EQ(db.query("SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'"),
            (Rows{{"3.16.1"}}));
  EXPECT_EQ(db.query("SELECT runId, timeOriginNs, status FROM OFFTUNE_RUNS ORDER BY runId"),
            (Rows{{std::to_string(fx_.a.value), std::to_string(kBaseA), "ok"},
                  {std::to_string(fx_.b.value), std::to_string(kBaseB), "ok"}}));
  EXPECT_EQ(db.query("SELECT start, fwdBytes, bwdBytes, deviceBytes FROM OFFTUNE_STASH_OCCUPANCY "
                     "WHERE globalPid = " +
                     ga + " ORDER BY start"),
            (Rows{{"500", "4096", "0", "NULL"}, {"4100", "0", "4096", "1234567"}}));
  EXPECT_EQ(db.query("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"),
            (Rows{{"1700000000000000000"}}));
  EXPECT_EQ(entries(), (std::set<std::string>{"trace.sqlite"}));
}

// The example queries of docs/export.md (kept in a fixture) run and return rows on this export.
TEST_F(ExportTest, NsysLayoutRunsTheDocumentedQueries) {
  const std::string out = file("trace.sqlite");
  export_nsys_sqlite(*fx_.store, {fx_.a, fx_.b}, out);
  const fs::path sql_path = fs::path(OFFTUNE_TEST_DATA_DIR) / "export/nsys_queries.sql";
  const std::string sql = read_all(sql_path.string());
  ASSERT_FALSE(sql.empty()) << sql_path;

  Db db(out);
  const char* next = sql.c_str();
  int queries = 0;
  while (*next != '\0') {
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db.handle(), next, -1, &stmt, &tail), SQLITE_OK)
        << sqlite3_errmsg(db.handle()) << " in: " << next;
    if (stmt == nullptr) break;  // only comments or white space left
    int rows = 0;
    while (sqlite3_step(stmt) == SQLITE_ROW) ++rows;
    EXPECT_GT(rows, 0) << "no rows from: " << sqlite3_sql(stmt);
    sqlite3_finalize(stmt);
    ++queries;
    next = tail;
  }
  EXPECT_GE(queries, 3);
}

TEST_F(ExportTest, NsysExportReplacesAnExistingFile) {
  const std::string out = file("trace.sqlite");
  std::ofstream(out) << "not a database";
  export_nsys_sqlite(*fx_.store, {fx_.b}, out);
  Db db(out);
  EXPECT_EQ(db.query("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"), (Rows{{"1"}}));
  EXPECT_EQ(db.query("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"), (Rows{{"0"}}));
}

// --- CSV -----------------------------------------------------------------------------------------

TEST_F(ExportTest, PointsCsvHasHeaderRowsAndQuoting) {
  const std::string out = file("points.csv");
  export_points_csv(*fx_.store, fx_.sweep, out);
  EXPECT_EQ(read_all(out),
            "index,status,offload,min_offload_size,max_fwd_stash_size,max_fwd_stash_bytes,"
            "prefetch,use_streams,use_pin_memory,step_ms_median,step_ms_stddev,peak_allocated,"
            "peak_reserved,offloaded_bytes,hidden_copy_pct,exposed_copy_ns,error\r\n"
            "0,ok,false,1024,5,0,1,true,true,12.5,0.25,1048576,2097152,0,0,0,\r\n"
            "1,ok,true,1048576,3,67108864,2,true,false,13.75,0.5,524288,1048576,4194304,87.5,"
            "125000,\r\n"
            "2,failed,true,1024,5,0,1,false,true,,,,,,,,\"copy failed, code \"\"7\"\"\"\r\n"
            "3,pending,true,4096,5,0,1,true,true,,,,,,,,\r\n"
            "4,oom,true,1024,8,0,1,true,true,,,,,,,,\"CUDA out of memory\ntried to allocate 2 "
            "GiB\"\r\n");
  EXPECT_EQ(std::string(kPointsCsvHeader) + "\r\n",
            read_all(out).substr(0, std::string(kPointsCsvHeader).size() + 2));
}

TEST_F(ExportTest, PointsCsvOfAnEmptySweepIsTheHeader) {
  SweepRecord sw;
  sw.key = "empty";
  const SweepId empty = fx_.store->create_sweep(sw);
  const std::string out = file("points.csv");
  export_points_csv(*fx_.store, empty, out);
  EXPECT_EQ(read_all(out), std::string(kPointsCsvHeader) + "\r\n");
}

// --- errors --------------------------------------------------------------------------------------

TEST_F(ExportTest, UnknownIdsThrowAndWriteNothing) {
  const RunId missing(424242);
  EXPECT_THROW(export_chrome_trace(*fx_.store, {fx_.a, missing}, file("t.json")), ExportError);
  EXPECT_THROW(export_nsys_sqlite(*fx_.store, {missing}, file("t.sqlite")), ExportError);
  EXPECT_THROW(export_points_csv(*fx_.store, SweepId(424242), file("p.csv")), ExportError);
  EXPECT_THROW(export_chrome_trace(*fx_.store, {}, file("t.json")), ExportError);
  EXPECT_TRUE(entries().empty());
  try {
    export_chrome_trace(*fx_.store, {missing}, file("t.json"));
    FAIL() << "no exception";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("424242"), std::string::npos) << e.what();
  }
}

TEST_F(ExportTest, UnwritablePathThrowsAndLeavesNoFile) {
  const fs::path missing_dir = dir_ / "no" / "such" / "dir";
  const std::string json_out = (missing_dir / "t.json").string();
  const std::string sql_out = (missing_dir / "t.sqlite").string();
  const std::string csv_out = (missing_dir / "p.csv").string();
  EXPECT_THROW(export_chrome_trace(*fx_.store, {fx_.a}, json_out), ExportError);
  EXPECT_THROW(export_nsys_sqlite(*fx_.store, {fx_.a}, sql_out), ExportError);
  EXPECT_THROW(export_points_csv(*fx_.store, fx_.sweep, csv_out), ExportError);
  EXPECT_FALSE(fs::exists(dir_ / "no"));
  EXPECT_TRUE(entries().empty());

  // A target that is a directory cannot be replaced; the temporary is cleaned up.
  fs::create_directory(dir_ / "taken");
  EXPECT_THROW(export_chrome_trace(*fx_.store, {fx_.a}, file("taken")), ExportError);
  EXPECT_THROW(export_nsys_sqlite(*fx_.store, {fx_.a}, file("taken")), ExportError);
  EXPECT_THROW(export_points_csv(*fx_.store, fx_.sweep, file("taken")), ExportError);
  EXPECT_EQ(entries(), (std::set<std::string>{"taken"}));

  // A directory without write permission (meaningless for root, who may write anyway).
  if (::geteuid() != 0) {
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(export_chrome_trace(*fx_.store, {fx_.a}, file("t.json")), ExportError);
    EXPECT_THROW(export_nsys_sqlite(*fx_.store, {fx_.a}, file("t.sqlite")), ExportError);
    EXPECT_THROW(export_points_csv(*fx_.store, fx_.sweep, file("p.csv")), ExportError);
    fs::permissions(dir_, fs::perms::owner_all);
    EXPECT_EQ(entries(), (std::set<std::string>{"taken"}));
  }
}

// A store that fails part-way through an export, after the output was opened.
class FailingStore final : public Store {
 public:
  explicit FailingStore(Store& inner) : inner_(inner) {}
  RunId begin_run(const RunRecord& r) override { return inner_.begin_run(r); }
  void finish_run(RunId id, RunStatus s, const std::string& e, const RunSummary& sum,
                  int64_t t) override {
    inner_.finish_run(id, s, e, sum, t);
  }
  std::optional<RunRecord> run(RunId id) override { return inner_.run(id); }
  std::vector<RunRecord> runs() override { return inner_.runs(); }
  void add_steps(const std::vector<StepRecord>& s) override { inner_.add_steps(s); }
  void add_events(const std::vector<TimelineEvent>& e) override { inner_.add_events(e); }
  void add_occupancy(const std::vector<OccupancySample>& o) override { inner_.add_occupancy(o); }
  std::vector<StepRecord> steps(RunId id) override { return inner_.steps(id); }
  std::vector<TimelineEvent> events(RunId id) override { return inner_.events(id); }
  std::vector<OccupancySample> occupancy(RunId) override {
    throw StoreError(StoreError::Kind::Corrupt, "database disk image is malformed");
  }
  SweepId create_sweep(const SweepRecord& s) override { return inner_.create_sweep(s); }
  std::optional<SweepRecord> find_sweep(const std::string& k) override {
    return inner_.find_sweep(k);
  }
  std::optional<SweepRecord> sweep(SweepId id) override { return inner_.sweep(id); }
  std::vector<SweepRecord> sweeps() override { return inner_.sweeps(); }
  PointId put_point(const PointRecord& p) override { return inner_.put_point(p); }
  std::vector<PointRecord> points(SweepId) override {
    throw StoreError(StoreError::Kind::Io, "disk I/O error");
  }
  void add_recommendation(const RecommendationRecord& r) override { inner_.add_recommendation(r); }
  std::vector<RecommendationRecord> recommendations(SweepId id) override {
    return inner_.recommendations(id);
  }

 private:
  Store& inner_;
};

TEST_F(ExportTest, StoreFailureMidExportKeepsThePreviousOutput) {
  FailingStore failing(*fx_.store);
  const std::string json_out = file("t.json");
  const std::string sql_out = file("t.sqlite");
  const std::string csv_out = file("p.csv");
  std::ofstream(json_out) << "previous";
  std::ofstream(sql_out) << "previous";
  std::ofstream(csv_out) << "previous";

  EXPECT_THROW(export_chrome_trace(failing, {fx_.a}, json_out), ExportError);
  EXPECT_THROW(export_nsys_sqlite(failing, {fx_.a}, sql_out), ExportError);
  EXPECT_THROW(export_points_csv(failing, fx_.sweep, csv_out), ExportError);
  EXPECT_EQ(read_all(json_out), "previous");
  EXPECT_EQ(read_all(sql_out), "previous");
  EXPECT_EQ(read_all(csv_out), "previous");
  EXPECT_EQ(entries(), (std::set<std::string>{"t.json", "t.sqlite", "p.csv"}));
}

// --- where an export may go (issue 11: "data destroyed with exit 0")
// ------------------------------

// An SQLite store with one small run, as the CLI exports it.
struct FileStore {
  explicit FileStore(const std::string& path) : store(open_sqlite_store(path)) {
    RunRecord r;
    r.status = RunStatus::Ok;
    r.workload.model = "tiny";
    run = store->begin_run(r);
    store->add_events({event_span(EventKind::Compute, 0, 100, {.run = run, .name = "compute"})});
    SweepRecord sw;
    sw.name = "s";
    sw.key = "k";
    sweep = store->create_sweep(sw);
  }
  std::unique_ptr<Store> store;
  RunId run;
  SweepId sweep;
};

TEST_F(ExportTest, NeverReplacesTheStoreItsSideFilesOrAnotherStore) {
  const std::string db = file("s.db");
  FileStore fs_store(db);
  Store& store = *fs_store.store;
  const std::string before = read_all(db);
  // Before the fix each of these printed "wrote ..." and replaced the file.
  for (const std::string& target : {db, db + "-wal", db + "-shm", db + "-journal"}) {
    EXPECT_THROW(export_points_csv(store, fs_store.sweep, target), ExportError) << target;
    EXPECT_THROW(export_nsys_sqlite(store, {fs_store.run}, target), ExportError) << target;
    EXPECT_THROW(export_chrome_trace(store, {fs_store.run}, target), ExportError) << target;
  }
  // The same file by another name.
  fs::create_symlink(db, file("link.db"));
  EXPECT_THROW(export_nsys_sqlite(store, {fs_store.run}, file("link.db")), ExportError);
  EXPECT_THROW(export_chrome_trace(store, {fs_store.run}, dir_.string() + "/./s.db"), ExportError);
  try {
    export_points_csv(store, fs_store.sweep, db);
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("store being exported"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_all(db), before);

  // Another offtune store is not an export either.
  { FileStore other(file("other.db")); }
  const std::string other_before = read_all(file("other.db"));
  EXPECT_THROW(export_nsys_sqlite(store, {fs_store.run}, file("other.db")), ExportError);
  EXPECT_EQ(read_all(file("other.db")), other_before);

  // An earlier export is replaced, as always; through a symbolic link, the file it points to.
  export_chrome_trace(store, {fs_store.run}, file("t.json"));
  fs::create_symlink(file("t.json"), file("latest.json"));
  export_chrome_trace(store, {fs_store.run}, file("latest.json"));
  EXPECT_TRUE(fs::is_symlink(file("latest.json")));
  EXPECT_NO_THROW(load_json(file("latest.json")));
  export_nsys_sqlite(store, {fs_store.run}, file("n.sqlite"));
  export_nsys_sqlite(store, {fs_store.run}, file("n.sqlite"));  // an export, not a store
}

TEST_F(ExportTest, DevicesAndFifosAreStreamsNeverReplaced) {
  // /dev/null takes the export as a stream and stays a device (before: renamed over as root).
  export_chrome_trace(*fx_.store, {fx_.a}, "/dev/null");
  export_points_csv(*fx_.store, fx_.sweep, "/dev/null");
  export_nsys_sqlite(*fx_.store, {fx_.a}, "/dev/null");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // /dev/full refuses the bytes: an error, not "wrote /dev/full" (before: exit 0, and the device
  // node became a regular file).
  if (fs::is_character_file("/dev/full")) {
    EXPECT_THROW(export_chrome_trace(*fx_.store, {fx_.a}, "/dev/full"), ExportError);
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
  // A FIFO: whatever reads it gets the whole export.
  const std::string fifo = file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = read_all(fifo); });
  export_points_csv(*fx_.store, fx_.sweep, fifo);
  reader.join();
  EXPECT_EQ(received.rfind(kPointsCsvHeader, 0), 0U) << received.substr(0, 80);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(entries(), (std::set<std::string>{"pipe"}));  // no temporary left beside it
}

TEST_F(ExportTest, ADirectoryIsRefusedBeforeAnythingIsWritten) {
  fs::create_directory(dir_ / "d");
  try {
    export_chrome_trace(*fx_.store, {fx_.a}, file("d"));
    FAIL() << "no exception";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(), (std::set<std::string>{"d"}));
}

// --- titles --------------------------------------------------------------------------------------

TEST(ExportTitles, DescribeConfig) {
  EngineConfig c;
  EXPECT_EQ(describe_config(c), "offload min=1KiB stash=5 prefetch=1");
  c.max_fwd_stash_bytes = 64 << 20;
  c.use_streams = false;
  c.use_pin_memory = false;
  c.link = "pcie4";
  EXPECT_EQ(describe_config(c),
            "offload min=1KiB stash=5 stash_bytes=64MiB prefetch=1 single-stream pageable "
            "link=pcie4");
  c.offload = false;
  EXPECT_EQ(describe_config(c), "no offload");

  RunRecord r;
  r.id = RunId(12);
  r.workload.model = "gpt-tiny";
  EXPECT_EQ(run_title(r), "run 12: gpt-tiny offload min=1KiB stash=5 prefetch=1");
}

}  // namespace
}  // namespace offtune::profiler
