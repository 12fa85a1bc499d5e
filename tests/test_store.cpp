// The store: Store semantics on both implementations (SQLite and memory), then what only the SQLite
// file has: the schema version and its migrations, WAL, refusing files it must not touch (and
// proving their bytes unchanged), read-only opens, disk full, atomic batches and crashed writers.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include "child_process.hpp"
#include "raw_db.hpp"
#include "temp_dir.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#define OFFTUNE_TEST_HAS_SPAWN 1
#endif

#include "offtune/profiler/job.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"

namespace offtune::build_paths {
extern const char* const test_data_dir;
}

namespace offtune::profiler {
namespace {

namespace fs = std::filesystem;
using Kind = StoreError::Kind;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// A fresh directory per test, removed afterwards.
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("offtune-store-test") {}
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool has_side_files(const std::string& path) {
  return fs::exists(path + "-wal") || fs::exists(path + "-shm") || fs::exists(path + "-journal");
}

#ifdef OFFTUNE_TEST_HAS_SPAWN
std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

using test::ChildProcess;
#endif

using test::RawDb;  // for what the Store API cannot do: hand-made files, PRAGMAs, crashes

// ---------------------------------------------------------------------------------------------------
// Sample records with every field away from its default, including values that are easy to lose
// on the way through SQLite: NaN and infinities, int64 extremes, uint64 seeds above INT64_MAX,
// quotes, non-ASCII text and an embedded NUL.

Environment sample_env(int salt) {
  return {"0.1." + std::to_string(salt),
          "2.9.0+cu130",
          "host-sim",
          "host-sim (Ryzen \xe2\x84\xa2)",
          "deadbeef" + std::to_string(salt),
          "node-'" + std::to_string(salt) + "'"};
}

Workload sample_workload(int salt) {
  Workload w;
  w.model = "gpt-tiny";
  w.batch = 4 + salt;
  w.seq = 128;
  w.dtype = "bf16";
  w.seed = std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(salt);
  w.steps = 10;
  w.warmup = 3;
  w.optimizer = true;
  w.lora_rank = salt % 2 == 0 ? 8 : 0;
  return w;
}

EngineConfig sample_config(int salt) {
  EngineConfig c;
  c.offload = salt % 2 == 0;
  c.min_offload_size = 4096 + salt;
  c.max_fwd_stash_size = 7;
  c.max_fwd_stash_bytes = int64_t{1} << 40;
  c.prefetch = 2;
  c.use_streams = false;
  c.use_pin_memory = false;
  c.link = parse_link("12.5:3");
  c.semantics = salt % 3 == 0 ? Semantics::Trl : Semantics::Offtune;
  c.checkpoint = salt % 2 == 0 ? CheckpointPolicy::every_k(salt + 2) : CheckpointPolicy::none();
  c.offload_set = salt % 2 == 0 ? OffloadSet::Boundaries : OffloadSet::All;
  c.tier = salt % 3 == 0 ? Tier::Disk : Tier::Host;
  c.layer_offload = salt % 2 == 0 ? salt / 2 + 1 : 0;
  c.verify = salt % 2 == 0;
  return c;
}

RunSummary sample_summary(int salt) {
  RunSummary s;
  s.step_ms_median = 12.25 + salt;
  s.step_ms_min = 0.1;
  s.step_ms_max = kInf;
  s.step_ms_stddev = 1e-300;
  s.step_ms_ci_low = 11.5 + salt;
  s.step_ms_ci_high = 14.0 + salt;
  s.step_ms_ci_level = 0.9375;
  s.peak_allocated = kMax;
  s.peak_reserved = kMax - 1;
  s.host_bytes_peak = 123456789;
  s.pinned_bytes = 1 << 20;
  s.device_outside = (int64_t{512} << 20) + salt;
  s.host_rss_peak = kMax - 2;
  s.offloaded_bytes = 777;
  s.reloaded_bytes = 778;
  s.hidden_copy_pct = 99.5;
  s.hidden_d2h_pct = -kInf;
  s.hidden_h2d_pct = 42.0;
  s.exposed_copy_ns = kMin;
  s.pageable_copies = 3;
  s.final_loss = kNaN;
  return s;
}

RunRecord sample_run(int salt) {
  RunRecord r;
  r.id = RunId(12345);  // ignored by begin_run
  r.status = RunStatus::Running;
  r.error = std::string("first\0second", 12);
  r.label = "baseline \"quoted\" \xc3\xa9t\xc3\xa9 #" + std::to_string(salt);
  r.env = sample_env(salt);
  r.workload = sample_workload(salt);
  r.config = sample_config(salt);
  r.started_unix_ns = 1700000000000000000 + salt;
  r.finished_unix_ns = -5;
  r.summary = sample_summary(salt);
  r.rank = salt % 3;
  r.world_size = 3 + salt;
  if (salt % 2 == 1) r.job_run = RunId(40 + salt);
  return r;
}

SweepRecord sample_sweep(int salt) {
  SweepRecord s;
  s.id = SweepId(999);  // ignored by create_sweep
  s.name = "sweep " + std::to_string(salt);
  s.key = "key-" + std::to_string(salt);
  s.workload = sample_workload(salt);
  s.grid = R"({"prefetch":[0,1,2],"min_offload_size":[1024]})";
  s.created_unix_ns = 1700000000000000000 - salt;
  return s;
}

TimelineEvent event(RunId run, int64_t start, std::string name,
                    EventKind kind = EventKind::Compute) {
  // Every field away from its default, so that a round trip that drops one is seen.
  return event_span(kind, start, start + 10,
                    {.run = run,
                     .stream = 1,
                     .bytes = 4096,
                     .tensor = 17,
                     .pinned = false,
                     .prefetch = true,
                     .name = std::move(name)});
}

// A double as the store must keep it: the same value, or NaN for NaN.
struct Same {
  double v;
  bool operator==(const Same& o) const { return std::isnan(v) ? std::isnan(o.v) : v == o.v; }
};
void PrintTo(const Same& s, std::ostream* os) { *os << s.v; }

// Every field of a record, in a tuple that EXPECT_EQ compares and prints. Records that hold others
// concatenate their fields; the id, which the store assigns, is left out.
auto fields(const Environment& e) {
  return std::make_tuple(e.offtune_version, e.torch_version, e.backend, e.device, e.git_revision,
                         e.host);
}
auto fields(const Workload& w) {
  return std::make_tuple(w.model, w.batch, w.seq, w.dtype, w.seed, w.steps, w.warmup, w.optimizer,
                         w.lora_rank);
}
auto fields(const RunSummary& s) {
  return std::make_tuple(Same{s.step_ms_median}, Same{s.step_ms_min}, Same{s.step_ms_max},
                         Same{s.step_ms_stddev}, Same{s.step_ms_ci_low}, Same{s.step_ms_ci_high},
                         Same{s.step_ms_ci_level}, s.peak_allocated, s.peak_reserved,
                         s.host_bytes_peak, s.pinned_bytes, s.offloaded_bytes, s.reloaded_bytes,
                         Same{s.hidden_copy_pct}, Same{s.hidden_d2h_pct}, Same{s.hidden_h2d_pct},
                         s.exposed_copy_ns, s.pageable_copies, Same{s.final_loss});
}
auto fields(const RunRecord& r) {
  return std::tuple_cat(std::make_tuple(r.status, r.error, r.label), fields(r.env),
                        fields(r.workload),
                        std::make_tuple(r.config, r.started_unix_ns, r.finished_unix_ns),
                        fields(r.summary), std::make_tuple(r.rank, r.world_size, r.job_run));
}
auto fields(const StepRecord& s) {
  return std::make_tuple(s.run, s.step, s.begin_ns, s.end_ns, s.peak_allocated, s.peak_reserved,
                         s.offloaded_bytes, s.reloaded_bytes, Same{s.hidden_copy_pct},
                         s.exposed_copy_ns, Same{s.loss});
}
auto fields(const TimelineEvent& e) {
  return std::make_tuple(e.run, e.kind, e.start_ns, e.end_ns, e.stream, e.bytes, e.tensor, e.pinned,
                         e.prefetch, e.name);
}
auto fields(const OccupancySample& o) {
  return std::make_tuple(o.run, o.time_ns, o.fwd_count, o.fwd_bytes, o.bwd_count, o.bwd_bytes,
                         o.device_bytes, o.reserved_bytes, o.host_bytes, o.host_pool_bytes);
}
auto fields(const SweepRecord& s) {
  return std::tuple_cat(std::make_tuple(s.name, s.key), fields(s.workload),
                        std::make_tuple(s.grid, s.created_unix_ns));
}
auto fields(const PointRecord& p) {
  return std::tuple_cat(std::make_tuple(p.sweep, p.index, p.config, p.status, p.error, p.run),
                        fields(p.summary));
}
auto fields(const RecommendationRecord& r) {
  return std::make_tuple(r.sweep, r.constraint, r.point_index, r.rationale, r.snippets_json,
                         r.created_unix_ns);
}

template <typename R>
void expect_same(const R& a, const R& b) {
  EXPECT_EQ(fields(a), fields(b));
}

// Three records written out of order, the last first (keys {2, 0, 1}), read back ordered by key.
template <typename R>
void expect_read_in_order(const std::vector<R>& written, const std::vector<R>& read) {
  ASSERT_EQ(read.size(), 3u);
  expect_same(written[1], read[0]);
  expect_same(written[2], read[1]);
  expect_same(written[0], read[2]);
}

template <typename F>
void expect_store_error(F&& f, Kind kind, const std::string& message_part = "") {
  try {
    f();
    ADD_FAILURE() << "expected a StoreError";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
}

// ---------------------------------------------------------------------------------------------------
// Records: enum names.

TEST(Records, EnumNamesRoundTrip) {
  for (RunStatus s : {RunStatus::Running, RunStatus::Ok, RunStatus::Failed, RunStatus::OutOfMemory,
                      RunStatus::Interrupted}) {
    EXPECT_EQ(parse_run_status(to_string(s)), s);
  }
  for (EventKind k : {EventKind::Step, EventKind::Forward, EventKind::Backward, EventKind::Compute,
                      EventKind::CopyD2H, EventKind::CopyH2D, EventKind::Pack, EventKind::Unpack,
                      EventKind::Wait}) {
    EXPECT_EQ(parse_event_kind(to_string(k)), k);
  }
  for (PointStatus s :
       {PointStatus::Pending, PointStatus::Ok, PointStatus::Failed, PointStatus::OutOfMemory}) {
    EXPECT_EQ(parse_point_status(to_string(s)), s);
  }
  // The stored spellings are file format.
  EXPECT_STREQ(to_string(RunStatus::OutOfMemory), "oom");
  EXPECT_STREQ(to_string(EventKind::CopyD2H), "copy_d2h");
  EXPECT_STREQ(to_string(PointStatus::Pending), "pending");
}

TEST(Records, ParseErrorsListValidValues) {
  try {
    parse_event_kind("copy");
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'copy'"), std::string::npos) << what;
    EXPECT_NE(what.find("copy_d2h"), std::string::npos) << what;
    EXPECT_NE(what.find("wait"), std::string::npos) << what;
  }
  EXPECT_THROW(parse_run_status("OK"), std::invalid_argument);
  EXPECT_THROW(parse_point_status(""), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------------
// Store semantics, on both implementations.

struct Impl {
  std::string name;
  bool sqlite;
};

class StoreSemantics : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override { store_ = open(); }

  std::unique_ptr<Store> open() {
    return GetParam().sqlite ? open_sqlite_store(dir_.file("store.db")) : make_memory_store();
  }
  // Reads after this come from the file on the SQLite store (the memory store has no file).
  void reopen() {
    if (!GetParam().sqlite) return;
    store_.reset();
    store_ = open();
  }
  Store& store() { return *store_; }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreSemantics, RunRoundTripsEveryField) {
  const RunRecord in = sample_run(1);
  const RunId id = store().begin_run(in);
  ASSERT_TRUE(id.valid());
  reopen();
  const auto out = store().run(id);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->id, id);
  expect_same(in, *out);
}

TEST_P(StoreSemantics, FinishRunUpdatesStatusErrorSummaryAndTime) {
  const RunRecord in = sample_run(2);
  const RunId id = store().begin_run(in);
  RunSummary summary = sample_summary(9);
  summary.final_loss = 0.125;
  summary.step_ms_max = 30.5;
  store().finish_run(id, RunStatus::OutOfMemory, "CUDA out of memory", summary,
                     1800000000000000000);
  reopen();
  const auto out = store().run(id);
  ASSERT_TRUE(out.has_value());
  RunRecord expected = in;
  expected.status = RunStatus::OutOfMemory;
  expected.error = "CUDA out of memory";
  expected.summary = summary;
  expected.finished_unix_ns = 1800000000000000000;
  expect_same(expected, *out);
}

TEST_P(StoreSemantics, RunsAreOrderedById) {
  std::vector<RunId> ids;
  for (int i = 0; i < 5; ++i) {
    RunRecord r = sample_run(i);
    r.status = i % 2 ? RunStatus::Ok : RunStatus::Interrupted;
    ids.push_back(store().begin_run(r));
  }
  reopen();
  const auto runs = store().runs();
  ASSERT_EQ(runs.size(), 5u);
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].id, ids[i]);
    EXPECT_EQ(runs[i].label, sample_run(static_cast<int>(i)).label);
    if (i > 0) {
      EXPECT_LT(runs[i - 1].id, runs[i].id);
    }
  }
}

TEST_P(StoreSemantics, StepsRoundTripOrderedByStep) {
  const RunId a = store().begin_run(sample_run(1));
  const RunId b = store().begin_run(sample_run(2));
  std::vector<StepRecord> in;
  for (int64_t step : {2, 0, 1}) {
    StepRecord s;
    s.run = a;
    s.step = step;
    s.begin_ns = 1000 * step;
    s.end_ns = 1000 * step + 999;
    s.peak_allocated = kMax - step;
    s.peak_reserved = 5 + step;
    s.offloaded_bytes = 6 + step;
    s.reloaded_bytes = 7 + step;
    s.hidden_copy_pct = step == 1 ? kNaN : 12.5 * static_cast<double>(step);
    s.exposed_copy_ns = kMin + step;
    s.loss = 2.0 / 3.0 + static_cast<double>(step);
    in.push_back(s);
  }
  store().add_steps(in);
  StepRecord other;
  other.run = b;
  other.step = 0;
  store().add_steps({other});
  reopen();
  const auto out = store().steps(a);
  expect_read_in_order(in, out);
  ASSERT_EQ(store().steps(b).size(), 1u);
  expect_same(other, store().steps(b)[0]);
}

TEST_P(StoreSemantics, EventsRoundTripOrderedByStartThenInsertion) {
  const RunId run = store().begin_run(sample_run(1));
  const RunId other = store().begin_run(sample_run(2));
  std::vector<TimelineEvent> first;
  const EventKind kinds[] = {EventKind::Step,    EventKind::Forward, EventKind::Backward,
                             EventKind::Compute, EventKind::CopyD2H, EventKind::CopyH2D,
                             EventKind::Pack,    EventKind::Unpack,  EventKind::Wait};
  int64_t start = 900;
  for (EventKind k : kinds) {
    TimelineEvent e = event(run, start, std::string("ev-") + to_string(k), k);
    e.stream = start;
    e.bytes = kMax - start;
    e.tensor = k == EventKind::Wait ? -1 : start;
    e.pinned = start % 200 == 0;
    e.prefetch = start % 300 == 0;
    first.push_back(e);
    start -= 100;  // inserted in decreasing start order
  }
  store().add_events(first);
  // Same start as an earlier one: comes after it (insertion order breaks ties).
  const TimelineEvent tie = event(run, 500, "tie");
  store().add_events({tie, event(other, 0, "other run")});
  reopen();
  const auto out = store().events(run);
  ASSERT_EQ(out.size(), first.size() + 1);
  for (size_t i = 1; i < out.size(); ++i) EXPECT_LE(out[i - 1].start_ns, out[i].start_ns);
  // first[i] has start 900 - 100 i; ascending order reverses it, with `tie` right after start 500.
  size_t at = 0;
  for (size_t i = first.size(); i-- > 0;) {
    expect_same(first[i], out[at++]);
    if (first[i].start_ns == 500) expect_same(tie, out[at++]);
  }
  ASSERT_EQ(store().events(other).size(), 1u);
  EXPECT_EQ(store().events(other)[0].name, "other run");
}

TEST_P(StoreSemantics, OccupancyRoundTripOrderedByTime) {
  const RunId run = store().begin_run(sample_run(1));
  std::vector<OccupancySample> in;
  for (int64_t t : {30, 10, 20}) {
    OccupancySample o;
    o.run = run;
    o.time_ns = t;
    o.fwd_count = t + 1;
    o.fwd_bytes = kMax - t;
    o.bwd_count = t + 2;
    o.bwd_bytes = t + 3;
    o.device_bytes = t == 20 ? -1 : t * 1000;
    o.reserved_bytes = t == 20 ? -1 : t * 2048;
    o.host_bytes = t * 7;
    o.host_pool_bytes = kMax - 2 * t;
    in.push_back(o);
  }
  store().add_occupancy(in);
  reopen();
  const auto out = store().occupancy(run);
  expect_read_in_order(in, out);
}

TEST_P(StoreSemantics, SweepsRoundTripAndAreFoundByKey) {
  const SweepRecord a = sample_sweep(1);
  const SweepRecord b = sample_sweep(2);
  const SweepId ida = store().create_sweep(a);
  const SweepId idb = store().create_sweep(b);
  EXPECT_LT(ida, idb);
  reopen();
  const auto found = store().find_sweep(b.key);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, idb);
  expect_same(b, *found);
  const auto byid = store().sweep(ida);
  ASSERT_TRUE(byid.has_value());
  EXPECT_EQ(byid->id, ida);
  expect_same(a, *byid);
  const auto all = store().sweeps();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, ida);
  EXPECT_EQ(all[1].id, idb);
  EXPECT_FALSE(store().find_sweep("no such key").has_value());
  // The key is the sweep's identity: creating it again finds the first one (two identical sweeps
  // started at once share it), never a duplicate, and leaves its record as it was.
  SweepRecord again = a;
  again.name = "renamed";
  again.grid = "{}";
  EXPECT_EQ(store().create_sweep(again), ida);
  EXPECT_EQ(store().sweeps().size(), 2u);
  reopen();
  expect_same(a, *store().sweep(ida));
}

TEST_P(StoreSemantics, PutPointInsertsOrdersByIndexAndUpserts) {
  const SweepId sweep = store().create_sweep(sample_sweep(1));
  const SweepId other = store().create_sweep(sample_sweep(2));
  const RunId run = store().begin_run(sample_run(1));
  std::vector<PointRecord> in;
  std::vector<PointId> ids;
  for (int64_t index : {2, 0, 1}) {
    PointRecord p;
    p.id = PointId(4242);  // ignored
    p.sweep = sweep;
    p.index = index;
    p.config = sample_config(static_cast<int>(index));
    p.status = PointStatus::Pending;
    in.push_back(p);
    ids.push_back(store().put_point(p));
  }
  PointRecord elsewhere;
  elsewhere.sweep = other;
  elsewhere.index = 0;
  store().put_point(elsewhere);

  // Measuring point 1 replaces it, and keeps its id.
  PointRecord measured = in[2];
  measured.status = PointStatus::Ok;
  measured.error = "";
  measured.run = run;
  measured.summary = sample_summary(3);
  measured.config.prefetch = 9;
  EXPECT_EQ(store().put_point(measured), ids[2]);
  PointRecord failed = in[0];
  failed.status = PointStatus::OutOfMemory;
  failed.error = "out of memory at step 3";
  EXPECT_EQ(store().put_point(failed), ids[0]);

  reopen();
  const auto out = store().points(sweep);
  ASSERT_EQ(out.size(), 3u);
  expect_same(in[1], out[0]);
  EXPECT_EQ(out[0].id, ids[1]);
  EXPECT_FALSE(out[0].run.valid());
  expect_same(measured, out[1]);
  EXPECT_EQ(out[1].id, ids[2]);
  expect_same(failed, out[2]);
  EXPECT_EQ(out[2].id, ids[0]);
  ASSERT_EQ(store().points(other).size(), 1u);
}

TEST_P(StoreSemantics, RecommendationsRoundTripInInsertionOrder) {
  const SweepId sweep = store().create_sweep(sample_sweep(1));
  const SweepId other = store().create_sweep(sample_sweep(2));
  RecommendationRecord a;
  a.sweep = sweep;
  a.constraint = "memory-budget=8GiB";
  a.point_index = 3;
  a.rationale = "fits in 7.9 GiB at 1.08x the baseline step time";
  a.snippets_json = R"({"cpp":"opts.prefetch = 2;","trl":"...","axolotl":"..."})";
  a.created_unix_ns = 1700000000000000001;
  RecommendationRecord b = a;
  b.constraint = "none";
  b.point_index = -1;
  b.rationale = "nothing satisfies the constraint";
  RecommendationRecord c = a;
  c.sweep = other;
  store().add_recommendation(a);
  store().add_recommendation(c);
  store().add_recommendation(b);
  reopen();
  const auto out = store().recommendations(sweep);
  ASSERT_EQ(out.size(), 2u);
  expect_same(a, out[0]);
  expect_same(b, out[1]);
  ASSERT_EQ(store().recommendations(other).size(), 1u);
}

PointPrediction sample_prediction(SweepId sweep, int64_t index, int salt) {
  PointPrediction p;
  p.sweep = sweep;
  p.index = index;
  p.step_ns = 12'345'678 + 1000 * salt;
  p.peak_allocated = (int64_t{3} << 30) + salt;  // beyond 32 bits
  p.hidden_copy_pct = 87.25 + salt;
  p.offloaded_bytes = int64_t{48} << 20;
  p.predictor = "what-if, offtune 9.9." + std::to_string(salt);
  p.created_unix_ns = 1700000000000000000 + salt;
  p.peak_reserved = (int64_t{4} << 30) + 2 * salt;
  return p;
}

// Predictions are kept per (sweep, index), read by index, and replaced when a point is predicted
// again; a batch naming an unknown sweep writes nothing.
TEST_P(StoreSemantics, PredictionsRoundTripByIndexAndReplace) {
  const SweepId sweep = store().create_sweep(sample_sweep(1));
  const SweepId other = store().create_sweep(sample_sweep(2));
  EXPECT_TRUE(store().predictions(sweep).empty());
  store().put_predictions({sample_prediction(sweep, 2, 2), sample_prediction(sweep, 0, 0),
                           sample_prediction(sweep, 1, 1)});
  store().put_predictions({sample_prediction(other, 0, 7)});
  store().put_predictions({});  // nothing to write: a no-op
  // Predicting point 1 again replaces it; the others stay.
  const PointPrediction again = sample_prediction(sweep, 1, 5);
  store().put_predictions({again});
  reopen();
  const auto out = store().predictions(sweep);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], sample_prediction(sweep, 0, 0));
  EXPECT_EQ(out[1], again);
  EXPECT_EQ(out[2], sample_prediction(sweep, 2, 2));
  EXPECT_DOUBLE_EQ(out[1].step_ms(), 12.350678);
  ASSERT_EQ(store().predictions(other).size(), 1u);
  EXPECT_EQ(store().predictions(other)[0], sample_prediction(other, 0, 7));

  const SweepId no_sweep(987654);
  expect_store_error(
      [&] {
        store().put_predictions(
            {sample_prediction(sweep, 3, 3), sample_prediction(no_sweep, 0, 0)});
      },
      Kind::Invalid);
  EXPECT_EQ(store().predictions(sweep).size(), 3u) << "a refused batch writes nothing";
  EXPECT_TRUE(store().predictions(no_sweep).empty());
}

// A run's memory history (records.hpp): events by seq, blocks by address, each run its own; a run
// without one has none; an unknown run is refused.
TEST_P(StoreSemantics, MemoryHistoryRoundTripsPerRun) {
  const RunId run = store().begin_run(sample_run(1));
  const RunId other = store().begin_run(sample_run(2));
  EXPECT_TRUE(store().memory_events(run).empty());
  EXPECT_TRUE(store().memory_blocks(run).empty());
  MemoryEventRecord seg{
      .seq = 0, .time_ns = 10, .action = "segment_alloc", .addr = 1 << 20, .size = 2 << 20};
  MemoryEventRecord alloc{.seq = 1,
                          .time_ns = 11,
                          .action = "alloc",
                          .addr = 1 << 20,
                          .size = 1000,
                          .block_size = 1024,
                          .stream = 3,
                          .note = "offloaded by offtune: tensor 7"};
  MemoryEventRecord oom{
      .seq = 2, .time_ns = 12, .action = "oom", .size = 1 << 30, .device_free = 5 << 20};
  MemoryBlockRecord b0{.segment_addr = 1 << 20,
                       .segment_size = 2 << 20,
                       .stream = 3,
                       .small_pool = true,
                       .addr = (1 << 20) + 1024,
                       .size = (2 << 20) - 1024,
                       .state = "inactive"};
  MemoryBlockRecord b1{.segment_addr = 1 << 20,
                       .segment_size = 2 << 20,
                       .stream = 3,
                       .small_pool = true,
                       .addr = 1 << 20,
                       .size = 1024,
                       .requested = 1000,
                       .state = "active_allocated",
                       .note = "offloaded by offtune: tensor 7"};
  store().add_memory_history(run, {oom, seg, alloc}, {b0, b1});
  store().add_memory_history(other, {seg}, {});
  reopen();
  auto events = store().memory_events(run);
  for (auto* e : {&seg, &alloc, &oom}) e->run = run;
  EXPECT_EQ(events, (std::vector<MemoryEventRecord>{seg, alloc, oom}));
  b0.run = b1.run = run;
  EXPECT_EQ(store().memory_blocks(run), (std::vector<MemoryBlockRecord>{b1, b0}));
  ASSERT_EQ(store().memory_events(other).size(), 1u);
  EXPECT_EQ(store().memory_events(other)[0].run, other);
  EXPECT_TRUE(store().memory_blocks(other).empty());
  expect_store_error([&] { store().add_memory_history(RunId(987654), {seg}, {}); }, Kind::Invalid);
}

TEST_P(StoreSemantics, UnknownIdsReadAsAbsentAndAreRefusedOnWrite) {
  const RunId nope(987654);
  const SweepId no_sweep(987654);
  EXPECT_FALSE(store().run(nope).has_value());
  EXPECT_FALSE(store().run(RunId()).has_value());
  EXPECT_TRUE(store().runs().empty());
  EXPECT_TRUE(store().steps(nope).empty());
  EXPECT_TRUE(store().events(nope).empty());
  EXPECT_TRUE(store().occupancy(nope).empty());
  EXPECT_FALSE(store().sweep(no_sweep).has_value());
  EXPECT_TRUE(store().sweeps().empty());
  EXPECT_TRUE(store().points(no_sweep).empty());
  EXPECT_TRUE(store().recommendations(no_sweep).empty());

  expect_store_error([&] { store().finish_run(nope, RunStatus::Ok, "", RunSummary{}, 1); },
                     Kind::Invalid, "987654");
  StepRecord step;
  step.run = nope;
  expect_store_error([&] { store().add_steps({step}); }, Kind::Invalid);
  expect_store_error([&] { store().add_events({event(nope, 1, "x")}); }, Kind::Invalid);
  OccupancySample sample;
  sample.run = nope;
  expect_store_error([&] { store().add_occupancy({sample}); }, Kind::Invalid);
  PointRecord point;
  point.sweep = no_sweep;
  expect_store_error([&] { store().put_point(point); }, Kind::Invalid);
  point.sweep = store().create_sweep(sample_sweep(1));
  point.run = nope;  // a measured point names a run that exists
  expect_store_error([&] { store().put_point(point); }, Kind::Invalid);
  RecommendationRecord rec;
  rec.sweep = no_sweep;
  expect_store_error([&] { store().add_recommendation(rec); }, Kind::Invalid);
  EXPECT_TRUE(store().points(point.sweep).empty());
}

TEST_P(StoreSemantics, RefusedBatchAddsNothing) {
  const RunId run = store().begin_run(sample_run(1));
  store().add_events({event(run, 1, "committed")});
  std::vector<TimelineEvent> batch;
  for (int i = 0; i < 100; ++i) batch.push_back(event(run, 10 + i, "doomed"));
  batch.push_back(event(RunId(run.value + 1000), 5, "bad row"));  // last row: unknown run
  expect_store_error([&] { store().add_events(batch); }, Kind::Invalid);

  StepRecord s;
  s.run = run;
  s.step = 0;
  store().add_steps({s});
  StepRecord s1 = s;
  s1.step = 1;
  expect_store_error([&] { store().add_steps({s1, s}); }, Kind::Invalid);  // step 0 exists

  OccupancySample o;
  o.run = run;
  OccupancySample bad = o;
  bad.run = RunId(run.value + 1000);
  expect_store_error([&] { store().add_occupancy({o, o, bad}); }, Kind::Invalid);

  reopen();
  const auto events = store().events(run);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "committed");
  ASSERT_EQ(store().steps(run).size(), 1u);
  EXPECT_TRUE(store().occupancy(run).empty());
  // The store is still usable after a refused batch.
  store().add_steps({s1});
  EXPECT_EQ(store().steps(run).size(), 2u);
}

TEST_P(StoreSemantics, EmptyBatchesAreNoOps) {
  store().add_steps({});
  store().add_events({});
  store().add_occupancy({});
  EXPECT_TRUE(store().runs().empty());
}

TEST_P(StoreSemantics, ConcurrentWritersFromManyThreads) {
  const RunId run = store().begin_run(sample_run(1));
  constexpr int kThreads = 4;
  constexpr int kBatches = 25;
  constexpr int kPerBatch = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<TimelineEvent> batch;
        for (int i = 0; i < kPerBatch; ++i) {
          batch.push_back(event(run, (t * kBatches + b) * kPerBatch + i, "t" + std::to_string(t)));
        }
        store().add_events(batch);
        store().events(run);  // readers interleave with writers
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto out = store().events(run);
  ASSERT_EQ(out.size(), static_cast<size_t>(kThreads * kBatches * kPerBatch));
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].start_ns, static_cast<int64_t>(i));
}

TEST_P(StoreSemantics, ClaimPointClaimsPendingPointsAndReportsFinishedOnes) {
  const SweepId sweep = store().create_sweep(sample_sweep(1));
  const Claim first = store().claim_point(sweep, 0);
  EXPECT_EQ(first.status, ClaimStatus::Claimed);
  EXPECT_EQ(first.holder, current_owner());
  // This process again (a second thread, a resumed sweep): its own claim is no obstacle.
  EXPECT_EQ(store().claim_point(sweep, 0).status, ClaimStatus::Claimed);
  PointRecord p;
  p.sweep = sweep;
  p.index = 0;
  p.status = PointStatus::Pending;
  store().put_point(p);
  EXPECT_EQ(store().claim_point(sweep, 0).status, ClaimStatus::Claimed) << "pending is not done";
  p.status = PointStatus::Failed;
  p.error = "boom";
  store().put_point(p);
  store().release_point(sweep, 0);
  reopen();
  EXPECT_EQ(store().claim_point(sweep, 0).status, ClaimStatus::Finished);
  EXPECT_EQ(store().claim_point(sweep, 1).status, ClaimStatus::Claimed);
  store().release_point(sweep, 1);
  expect_store_error([&] { store().claim_point(SweepId(987654), 0); }, Kind::Invalid);
}

TEST_P(StoreSemantics, DescribeRunWritesOverARunningRunOnly) {
  const RunRecord begun = sample_run(2);  // as a sweep begins a script's point
  const RunId id = store().begin_run(begun);
  RunDescription d;
  d.workload = sample_workload(5);
  d.env = sample_env(5);
  d.rank = 0;
  d.world_size = 2;
  store().describe_run(id, d);
  reopen();
  RunRecord out = *store().run(id);
  expect_same(out.workload, d.workload);
  expect_same(out.env, d.env);
  EXPECT_EQ(out.world_size, 2);
  EXPECT_EQ(out.rank, 0);
  EXPECT_FALSE(out.job_run.has_value());
  EXPECT_EQ(out.status, RunStatus::Running);
  EXPECT_EQ(out.label, begun.label) << "the label and config stay the begun run's";
  EXPECT_EQ(out.config, begun.config);
  store().finish_run(id, RunStatus::Ok, "", sample_summary(2), 9);
  expect_store_error([&] { store().describe_run(id, d); }, Kind::Invalid, "is ok, not running");
  expect_store_error([&] { store().describe_run(RunId(987654), d); }, Kind::Invalid,
                     "unknown run id 987654");
}

// Rank 0's run, then ranks 2 and 1 (begun in any order) naming it: the job is as slow as its
// slowest rank and as big as its biggest, and failed when a rank failed.
TEST_P(StoreSemantics, AJobIsItsSlowestRankAndItsHighestPeak) {
  const auto put = [&](int64_t rank, std::optional<RunId> job, double ms, int64_t alloc,
                       int64_t reserved, RunStatus status) {
    RunRecord r = sample_run(1);
    r.rank = rank;
    r.world_size = 3;
    r.job_run = job;
    const RunId id = store().begin_run(r);
    RunSummary s;
    s.step_ms_median = ms;
    s.peak_allocated = alloc;
    s.peak_reserved = reserved;
    store().finish_run(id, status, "", s, 1);
    return id;
  };
  const RunId zero = put(0, std::nullopt, 10.0, 500, 900, RunStatus::Ok);
  const RunId other = put(0, std::nullopt, 99.0, 9999, 9999, RunStatus::Ok);  // another job
  const RunId two = put(2, zero, 12.5, 400, 1000, RunStatus::Ok);
  const RunId one = put(1, zero, 11.0, 700, 800, RunStatus::Ok);
  reopen();
  JobSummary job = job_summary(store(), zero);
  EXPECT_EQ(job.job, zero);
  EXPECT_EQ(job.world_size, 3);
  EXPECT_EQ(job.status, RunStatus::Ok);
  EXPECT_EQ(job.step_ms_median, 12.5);
  EXPECT_EQ(job.peak_allocated, 700);
  EXPECT_EQ(job.peak_reserved, 1000);
  ASSERT_EQ(job.ranks.size(), 3u);
  EXPECT_EQ(job.ranks[0].run, zero);
  EXPECT_EQ(job.ranks[1].run, one);
  EXPECT_EQ(job.ranks[1].rank, 1);
  EXPECT_EQ(job.ranks[1].step_ms_median, 11.0);
  EXPECT_EQ(job.ranks[2].run, two);
  EXPECT_EQ(job.ranks[2].peak_reserved, 1000);
  EXPECT_EQ(job_summary(store(), other).ranks.size(), 1u) << "a single process is a job of one";
  EXPECT_EQ(job_summary(store(), other).step_ms_median, 99.0);
  put(3, other, 1.0, 1, 1, RunStatus::OutOfMemory);
  EXPECT_EQ(job_summary(store(), other).status, RunStatus::OutOfMemory);
  expect_store_error([&] { job_summary(store(), RunId(987654)); }, Kind::Invalid,
                     "unknown run id 987654");
}

// merge joins a job: the point's run brings its other ranks' runs, their job the copy's id.
TEST_P(StoreSemantics, MergeCopiesAJobsRanksWithTheirJobRemapped) {
  auto src = make_memory_store();
  src->begin_run(sample_run(7));  // ids in src differ from those in dst
  RunRecord r0 = sample_run(2);
  r0.rank = 0;
  r0.world_size = 2;
  const RunId zero = src->begin_run(r0);
  src->finish_run(zero, RunStatus::Ok, "", sample_summary(2), 5);
  RunRecord r1 = sample_run(2);
  r1.rank = 1;
  r1.world_size = 2;
  r1.job_run = zero;
  const RunId one = src->begin_run(r1);
  src->add_steps({{.run = one, .step = 0, .begin_ns = 1, .end_ns = 2}});
  src->finish_run(one, RunStatus::Ok, "", sample_summary(3), 6);
  const SweepId sweep = src->create_sweep(sample_sweep(1));
  PointRecord p;
  p.sweep = sweep;
  p.index = 0;
  p.status = PointStatus::Ok;
  p.run = zero;
  src->put_point(p);

  store().begin_run(sample_run(8));
  store().begin_run(sample_run(9));
  store().begin_run(sample_run(10));
  EXPECT_EQ(merge_stores(store(), *src), 1);
  reopen();
  const auto points = store().points(store().find_sweep(sample_sweep(1).key)->id);
  ASSERT_EQ(points.size(), 1u);
  const JobSummary job = job_summary(store(), points[0].run);
  ASSERT_EQ(job.ranks.size(), 2u);
  const RunRecord copy = *store().run(job.ranks[1].run);
  EXPECT_EQ(copy.rank, 1);
  EXPECT_EQ(copy.job_run, points[0].run);
  EXPECT_NE(copy.job_run, zero) << "remapped to the destination's id";
  EXPECT_EQ(store().steps(copy.id).size(), 1u);
  EXPECT_EQ(copy.summary.step_ms_median, sample_summary(3).step_ms_median);
  EXPECT_FALSE(store().run(points[0].run)->job_run.has_value());
}

INSTANTIATE_TEST_SUITE_P(Both, StoreSemantics,
                         ::testing::Values(Impl{"Sqlite", true}, Impl{"Memory", false}),
                         [](const ::testing::TestParamInfo<Impl>& param) {
                           return param.param.name;
                         });

// ---------------------------------------------------------------------------------------------------
// SQLite only.

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name = "store.db") const { return dir_.file(name); }

  // Fills a store with one run of each kind of data, and closes it.
  RunId populate(const std::string& file, int events = 50) {
    auto store = open_sqlite_store(file);
    const RunId run = store->begin_run(sample_run(1));
    std::vector<TimelineEvent> batch;
    for (int i = 0; i < events; ++i) batch.push_back(event(run, i, "event " + std::to_string(i)));
    store->add_events(batch);
    StepRecord s;
    s.run = run;
    store->add_steps({s});
    const SweepId sweep = store->create_sweep(sample_sweep(1));
    PointRecord p;
    p.sweep = sweep;
    store->put_point(p);
    return run;
  }

  // Opening `file` fails with `kind`, both for writing and read-only, and leaves the file's bytes
  // as they were, with no -wal/-shm/-journal files next to it.
  void expect_refused(const std::string& file, Kind kind, const std::string& message) {
    ASSERT_FALSE(has_side_files(file)) << "the fixture itself left side files";
    const std::string before = read_bytes(file);
    const auto before_time = fs::last_write_time(file);
    for (bool read_only : {false, true}) {
      SCOPED_TRACE(read_only ? "read-only open" : "read-write open");
      try {
        if (read_only) {
          open_sqlite_store_readonly(file);
        } else {
          open_sqlite_store(file);
        }
        ADD_FAILURE() << "expected the open to be refused";
      } catch (const StoreError& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << "names the file";
      }
      EXPECT_EQ(read_bytes(file), before) << "the refused file was modified";
      EXPECT_EQ(fs::last_write_time(file), before_time);
      EXPECT_FALSE(fs::exists(file + "-wal"));
      EXPECT_FALSE(fs::exists(file + "-shm"));
      EXPECT_FALSE(fs::exists(file + "-journal"));
    }
  }

  TempDir dir_;
};

TEST_F(SqliteStoreTest, SchemaVersionIsElevenAndNewFilesCarryIt) {
  EXPECT_EQ(store_schema_version(), 11);
  open_sqlite_store(path());
  RawDb db(path());
  EXPECT_EQ(db.integer("PRAGMA user_version"), 11);
  EXPECT_EQ(db.integer("PRAGMA application_id"), 0x4f46544e);
  EXPECT_EQ(db.text("SELECT value FROM meta WHERE key = 'app'"), "offtune");
  EXPECT_GT(db.integer("SELECT value FROM meta WHERE key = 'created_unix_ns'"), 0);
  EXPECT_FALSE(db.text("SELECT value FROM meta WHERE key = 'writer_version'").empty());
  // The tables and indexes docs/store.md describes.
  for (const char* name :
       {"meta", "runs", "steps", "events", "occupancy", "sweeps", "points", "recommendations",
        "events_run_start", "occupancy_run_time", "run_owners", "claims", "predictions", "runs_job",
        "memory_events", "memory_blocks"}) {
    EXPECT_EQ(
        db.integer(std::string("SELECT count(*) FROM sqlite_master WHERE name = '") + name + "'"),
        1)
        << name;
  }
}

// The schema of a new store, as SQLite keeps it (the text of every CREATE, with the columns later
// migrations added), is file format: a change to how the migrations are written must leave it
// byte for byte as released. tests/data/store/schema_v11.txt holds it.
TEST_F(SqliteStoreTest, ANewStoreHasTheReleasedSchemaByteForByte) {
  open_sqlite_store(path());
  RawDb db(path());
  const std::string schema = db.column_concat(
      "SELECT type || ' ' || name || ':' || char(10) || coalesce(sql, '') || char(10) "
      "FROM sqlite_master ORDER BY type, name",
      0);
  const std::string golden =
      read_bytes((fs::path(build_paths::test_data_dir) / "store/schema_v11.txt").string());
  ASSERT_FALSE(golden.empty()) << "tests/data/store/schema_v11.txt is missing";
  EXPECT_EQ(schema, golden);
}

TEST_F(SqliteStoreTest, JournalModeIsWal) {
  auto store = open_sqlite_store(path());
  store->begin_run(sample_run(1));
  EXPECT_TRUE(fs::exists(path() + "-wal"));  // while open
  store.reset();
  RawDb db(path());
  EXPECT_EQ(db.text("PRAGMA journal_mode"), "wal");  // persistent in the file header
}

TEST_F(SqliteStoreTest, EventQueriesUseTheRunStartIndex) {
  open_sqlite_store(path());
  RawDb db(path());
  const std::string plan = db.column_concat(
      "EXPLAIN QUERY PLAN SELECT * FROM events WHERE run = 1 ORDER BY start_ns, id", 3);
  EXPECT_NE(plan.find("events_run_start"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("TEMP B-TREE"), std::string::npos) << "no sort step: " << plan;
}

TEST_F(SqliteStoreTest, ReopenKeepsEverything) {
  const RunId run = populate(path(), 300);
  auto store = open_sqlite_store(path());
  ASSERT_EQ(store->runs().size(), 1u);
  expect_same(sample_run(1), *store->run(run));
  EXPECT_EQ(store->events(run).size(), 300u);
  EXPECT_EQ(store->steps(run).size(), 1u);
  ASSERT_EQ(store->sweeps().size(), 1u);
  EXPECT_EQ(store->points(store->sweeps()[0].id).size(), 1u);
  // Ids continue after the stored ones.
  EXPECT_GT(store->begin_run(sample_run(2)), run);
}

TEST_F(SqliteStoreTest, MigratesAZeroByteFile) {
  write_bytes(path(), "");
  auto store = open_sqlite_store(path());
  store->begin_run(sample_run(1));
  store.reset();
  RawDb db(path());
  EXPECT_EQ(db.integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(db.integer("SELECT count(*) FROM runs"), 1);
}

TEST_F(SqliteStoreTest, MigratesAHandMadeVersionZeroFile) {
  {
    // A valid SQLite file with a header and pages but no schema: what version 0 looks like.
    RawDb db(path());
    db.must("CREATE TABLE scratch (x); DROP TABLE scratch; PRAGMA user_version = 0");
  }
  ASSERT_GT(fs::file_size(path()), 0u);
  auto store = open_sqlite_store(path());
  const RunId run = store->begin_run(sample_run(1));
  store.reset();
  {
    RawDb db(path());
    EXPECT_EQ(db.integer("PRAGMA user_version"), store_schema_version());
    EXPECT_EQ(db.text("SELECT value FROM meta WHERE key = 'app'"), "offtune");
  }
  // And the migrated file is a store that read-only opens accept.
  auto ro = open_sqlite_store_readonly(path());
  ASSERT_TRUE(ro->run(run).has_value());
  expect_same(sample_run(1), *ro->run(run));
}

TEST_F(SqliteStoreTest, OpeningACurrentStoreDoesNotMigrateIt) {
  populate(path());
  RawDb(path()).must("UPDATE meta SET value = 'marker' WHERE key = 'writer_version'");
  open_sqlite_store(path());
  RawDb db(path());
  EXPECT_EQ(db.text("SELECT value FROM meta WHERE key = 'writer_version'"), "marker");
  EXPECT_EQ(db.integer("PRAGMA user_version"), store_schema_version());
}

TEST_F(SqliteStoreTest, RefusesAFileThatIsNotSqlite) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "run,step,ms\n1,0,12.5\n";
  write_bytes(path("notes.csv"), text);
  expect_refused(path("notes.csv"), Kind::NotADatabase,
                 path("notes.csv") + " is not an offtune store (not an SQLite database)");
  write_bytes(path("short"), "SQLite format 3");  // shorter than an SQLite header
  expect_refused(path("short"), Kind::NotADatabase, "not an SQLite database");
}

TEST_F(SqliteStoreTest, RefusesASqliteFileWithADamagedHeader) {
  populate(path());
  std::string bytes = read_bytes(path());
  bytes[16] = 3;  // page size 768: not a power of two
  bytes[17] = 0;
  write_bytes(path(), bytes);
  expect_refused(path(), Kind::NotADatabase, "not an SQLite database");
}

TEST_F(SqliteStoreTest, RefusesACorruptFile) {
  populate(path(), 3000);
  std::string bytes = read_bytes(path());
  const size_t page = 4096;
  ASSERT_GT(bytes.size(), 8 * page);
  // Leave page 1 (header and schema root) alone; overwrite the back half with garbage.
  for (size_t i = bytes.size() / 2; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>((i * 37) & 0xff);
  }
  write_bytes(path(), bytes);
  expect_refused(path(), Kind::Corrupt, "corrupt");
}

TEST_F(SqliteStoreTest, RefusesAnSqliteFileThatIsNotAStore) {
  {
    RawDb db(path("other.db"));
    db.must("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
    db.must("INSERT INTO customers (name) VALUES ('ada'), ('grace')");
  }
  expect_refused(path("other.db"), Kind::Invalid, "not an offtune store");
  {
    // A table named meta is not enough: it must say it is offtune's.
    RawDb db(path("meta.db"));
    db.must("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)");
    db.must("INSERT INTO meta VALUES ('app', 'something else')");
    db.must("PRAGMA user_version = 1");
  }
  expect_refused(path("meta.db"), Kind::Invalid, "not an offtune store");
}

TEST_F(SqliteStoreTest, RefusesANewerSchema) {
  populate(path());
  {
    RawDb db(path());
    db.must("PRAGMA user_version = 99");
  }
  ASSERT_FALSE(has_side_files(path()));  // the raw connection was the last one: WAL checkpointed
  expect_refused(path(), Kind::NewerSchema,
                 path() + " was written by a newer offtune (schema 99, this build reads up to " +
                     std::to_string(store_schema_version()) + ")");
}

TEST_F(SqliteStoreTest, ReadOnlyOpenOfAMissingFileIsCannotOpen) {
  expect_store_error([&] { open_sqlite_store_readonly(path("missing.db")); }, Kind::CannotOpen,
                     path("missing.db"));
  EXPECT_FALSE(fs::exists(path("missing.db")));
  EXPECT_FALSE(has_side_files(path("missing.db")));
}

TEST_F(SqliteStoreTest, ReadOnlyOpenRefusesFilesWithNoStoreYet) {
  write_bytes(path(), "");
  expect_store_error([&] { open_sqlite_store_readonly(path()); }, Kind::Invalid, "empty");
  EXPECT_EQ(fs::file_size(path()), 0u);
  {
    RawDb db(path("v0.db"));
    db.must("CREATE TABLE scratch (x); DROP TABLE scratch");
  }
  const std::string before = read_bytes(path("v0.db"));
  expect_store_error([&] { open_sqlite_store_readonly(path("v0.db")); }, Kind::Invalid, "empty");
  EXPECT_EQ(read_bytes(path("v0.db")), before);
}

TEST_F(SqliteStoreTest, OpenInAMissingDirectoryIsCannotOpen) {
  const std::string file = path("no/such/dir/store.db");
  expect_store_error([&] { open_sqlite_store(file); }, Kind::CannotOpen, file);
  expect_store_error([&] { open_sqlite_store(dir_.file("")); }, Kind::CannotOpen);
}

TEST_F(SqliteStoreTest, ReadOnlyStoreReadsButNeverWrites) {
  const RunId run = populate(path());
  const std::string before = read_bytes(path());
  {
    auto ro = open_sqlite_store_readonly(path());
    ASSERT_TRUE(ro->run(run).has_value());
    expect_same(sample_run(1), *ro->run(run));
    EXPECT_EQ(ro->events(run).size(), 50u);
    expect_store_error([&] { ro->begin_run(sample_run(2)); }, Kind::Invalid, "read-only");
    expect_store_error([&] { ro->add_events({event(run, 1, "x")}); }, Kind::Invalid, "read-only");
    expect_store_error([&] { ro->create_sweep(sample_sweep(7)); }, Kind::Invalid, "read-only");
    expect_store_error([&] { ro->claim_point(SweepId(1), 0); }, Kind::Invalid, "read-only");
    expect_store_error([&] { ro->release_point(SweepId(1), 0); }, Kind::Invalid, "read-only");
  }
  EXPECT_EQ(read_bytes(path()), before);
}

TEST_F(SqliteStoreTest, ReadOnlyStoreSeesALiveWritersCommits) {
  auto writer = open_sqlite_store(path());
  const RunId run = writer->begin_run(sample_run(1));
  writer->add_events({event(run, 1, "a"), event(run, 2, "b")});
  // The commits are in the -wal file only (no checkpoint yet); the reader must see them.
  auto reader = open_sqlite_store_readonly(path());
  ASSERT_EQ(reader->events(run).size(), 2u);
  writer->add_events({event(run, 3, "c")});
  EXPECT_EQ(reader->events(run).size(), 3u);
  // A second writer on the same file works too (the GUI and the CLI may share a store).
  auto second = open_sqlite_store(path());
  second->add_events({event(run, 4, "d")});
  EXPECT_EQ(writer->events(run).size(), 4u);
}

TEST_F(SqliteStoreTest, NamesWithUriCharactersOpenAsThemselves) {
  const std::string file = path("odd name?x=1#frag%20.db");
  const RunId run = populate(file);
  EXPECT_TRUE(fs::exists(file));
  auto ro = open_sqlite_store_readonly(file);
  EXPECT_TRUE(ro->run(run).has_value());
  EXPECT_FALSE(fs::exists(path("odd name")));
}

// Caps the size of every database opened while alive, through an SQLite auto-extension: the public
// Store API has no knob for it, and a real full disk needs root and a tiny filesystem.
class PageCap {
 public:
  explicit PageCap(int64_t pages) {
    pages_ = pages;
    sqlite3_auto_extension(reinterpret_cast<void (*)()>(&apply));
  }
  ~PageCap() { sqlite3_cancel_auto_extension(reinterpret_cast<void (*)()>(&apply)); }
  PageCap(const PageCap&) = delete;
  PageCap& operator=(const PageCap&) = delete;

 private:
  static int apply(sqlite3* db, char**, const sqlite3_api_routines*) {
    const std::string sql = "PRAGMA max_page_count = " + std::to_string(pages_.load());
    sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    return SQLITE_OK;
  }
  static inline std::atomic<int64_t> pages_{0};
};

TEST_F(SqliteStoreTest, FullDiskFailsTheBatchAndKeepsEarlierCommits) {
  const RunId run = populate(path(), 100);
  int64_t pages = 0;
  {
    RawDb db(path());
    pages = db.integer("PRAGMA page_count");
  }
  int failed_batch = -1;
  int committed_batches = 0;
  constexpr int kPerBatch = 400;
  {
    PageCap cap(pages + 40);
    auto store = open_sqlite_store(path());
    for (int b = 0; b < 200 && failed_batch < 0; ++b) {
      std::vector<TimelineEvent> batch;
      for (int i = 0; i < kPerBatch; ++i) {
        batch.push_back(event(run, 1000 + b * kPerBatch + i, "batch-" + std::to_string(b)));
      }
      try {
        store->add_events(batch);
        ++committed_batches;
      } catch (const StoreError& e) {
        EXPECT_EQ(e.kind(), Kind::Full) << e.what();
        EXPECT_NE(std::string(e.what()).find(path()), std::string::npos) << e.what();
        failed_batch = b;
      }
    }
    ASSERT_GE(failed_batch, 1) << "the cap should allow one batch and refuse a later one";
    // Same connection, after the failure: earlier data intact, nothing of the failed batch.
    const auto events = store->events(run);
    EXPECT_EQ(events.size(), static_cast<size_t>(100 + committed_batches * kPerBatch));
    for (const auto& e : events) EXPECT_NE(e.name, "batch-" + std::to_string(failed_batch));
  }
  // Reopened without the cap: the same, and writable again.
  auto store = open_sqlite_store(path());
  const auto events = store->events(run);
  EXPECT_EQ(events.size(), static_cast<size_t>(100 + committed_batches * kPerBatch));
  for (const auto& e : events) EXPECT_NE(e.name, "batch-" + std::to_string(failed_batch));
  store->add_events({event(run, 1, "after")});
  EXPECT_EQ(store->events(run).size(), events.size() + 1);
}

TEST_F(SqliteStoreTest, AnotherWriterHoldingTheLockIsBusy) {
  const RunId run = populate(path());
  auto store = open_sqlite_store(path());
  RawDb other(path());
  other.must("BEGIN IMMEDIATE");
  const auto start = std::chrono::steady_clock::now();
  expect_store_error([&] { store->add_events({event(run, 1, "x")}); }, Kind::Busy, path());
  // busy_timeout: the store waited for the lock before giving up.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  other.must("ROLLBACK");
  store->add_events({event(run, 1, "x")});
  EXPECT_EQ(store->events(run).size(), 51u);
}

#ifdef OFFTUNE_TEST_HAS_SPAWN
// The child commits one batch through the store, then dies in the middle of a big transaction
// whose pages have spilled into the -wal file: no destructors, _exit only. Args: PATH RUN.
OFFTUNE_CHILD_ROLE(commit_then_crash)(const std::vector<std::string>& args, test::ChildControl&) {
  const std::string& path = args.at(0);
  const RunId run(std::stoll(args.at(1)));
  auto store = open_sqlite_store(path);
  store->add_events({event(run, 100, "child committed")});
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  sqlite3_exec(db, "PRAGMA cache_size = 10; BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  for (int i = 0; i < 20000; ++i) {
    const std::string sql =
        "INSERT INTO events (run, kind, start_ns, end_ns, stream, bytes, tensor, pinned, "
        "prefetch, name) VALUES (" +
        std::to_string(run.value) + ", 'compute', " + std::to_string(1000 + i) +
        ", 0, 0, 0, -1, 1, 0, 'uncommitted " + std::string(200, 'x') + "')";
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) return 3;
  }
  return 0;  // run_child_role_if_asked _exits: the transaction is never committed
}
#endif

TEST_F(SqliteStoreTest, CrashedWriterLeavesEarlierCommitsIntact) {
#ifdef OFFTUNE_TEST_HAS_SPAWN
  const RunId run = populate(path(), 10);
  ChildProcess child("commit_then_crash", {path(), std::to_string(run.value)},
                     ChildProcess::After::Exit);
  ASSERT_EQ(child.wait(), 0);
  ASSERT_TRUE(fs::exists(path() + "-wal"));
  EXPECT_GT(fs::file_size(path() + "-wal"), 100u * 4096) << "uncommitted pages reached the WAL";

  for (bool read_only : {true, false}) {
    SCOPED_TRACE(read_only ? "read-only" : "read-write");
    auto store = read_only ? open_sqlite_store_readonly(path()) : open_sqlite_store(path());
    const auto events = store->events(run);
    ASSERT_EQ(events.size(), 11u);
    EXPECT_EQ(events.back().name, "child committed");
  }
  // And it is writable again.
  auto store = open_sqlite_store(path());
  store->add_events({event(run, 200, "after the crash")});
  EXPECT_EQ(store->events(run).size(), 12u);
#else
  GTEST_SKIP() << "needs posix_spawn";
#endif
}

// ---------------------------------------------------------------------------------------------------
// Nothing left behind: side files of read-only opens, half-created stores.

TEST_F(SqliteStoreTest, ReadOnlyOpenLeavesNoSideFiles) {
  const RunId run = populate(path());
  ASSERT_FALSE(has_side_files(path()));
  const std::string before = read_bytes(path());
  {
    auto ro = open_sqlite_store_readonly(path());
    ASSERT_TRUE(ro->run(run).has_value());
    EXPECT_EQ(ro->events(run).size(), 50u);
  }
  EXPECT_FALSE(fs::exists(path() + "-wal"));
  EXPECT_FALSE(fs::exists(path() + "-shm"));
  EXPECT_EQ(read_bytes(path()), before);
}

TEST_F(SqliteStoreTest, ReadOnlyOpenKeepsTheSideFilesOfAWriterStillOpen) {
  const RunId run = populate(path());
  auto ro = open_sqlite_store_readonly(path());
  ASSERT_TRUE(ro->run(run).has_value());
  // Opened after the read-only store, so the side files were not there when it opened.
  auto writer = open_sqlite_store(path());
  writer->add_events({event(run, 100, "while read")});
  EXPECT_EQ(ro->events(run).size(), 51u);
  ro.reset();
  EXPECT_TRUE(fs::exists(path() + "-wal"));
  EXPECT_TRUE(fs::exists(path() + "-shm"));
  writer->add_events({event(run, 101, "after the reader closed")});
  EXPECT_EQ(writer->events(run).size(), 52u);
  writer.reset();
  EXPECT_FALSE(has_side_files(path()));
  EXPECT_EQ(open_sqlite_store_readonly(path())->events(run).size(), 52u);
}

TEST_F(SqliteStoreTest, AFailedCreationLeavesNoFile) {
  const std::string file = path("new.db");
  {
    PageCap cap(1);  // the header page only: the schema does not fit
    expect_store_error([&] { open_sqlite_store(file); }, Kind::Full, file);
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(has_side_files(file));
  // Nothing in the way of the next attempt.
  open_sqlite_store(file)->begin_run(sample_run(1));
  EXPECT_EQ(open_sqlite_store_readonly(file)->runs().size(), 1u);
}

TEST_F(SqliteStoreTest, AFailedOpenKeepsAFileThatWasThere) {
  write_bytes(path(), "");
  {
    PageCap cap(1);
    expect_store_error([&] { open_sqlite_store(path()); }, Kind::Full, path());
  }
  EXPECT_TRUE(fs::exists(path())) << "the user's file is not the open's to remove";
}

// ---------------------------------------------------------------------------------------------------
// Nothing hangs: runs of processes that ended, sweeps created at once.

#ifdef OFFTUNE_TEST_HAS_SPAWN
// Args: PATH. Begins sample run 2 (left running) and sample run 3 (finished ok), then exits.
OFFTUNE_CHILD_ROLE(begin_running_and_ok_runs)
(const std::vector<std::string>& args, test::ChildControl&) {
  auto store = open_sqlite_store(args.at(0));
  store->begin_run(sample_run(2));
  const RunId ok = store->begin_run(sample_run(3));
  store->finish_run(ok, RunStatus::Ok, "", sample_summary(3), 5);
  return 0;
}

// Args: PATH SALT. Begins sample run SALT and reports; the store stays open while the child
// lingers.
OFFTUNE_CHILD_ROLE(begin_run_and_linger)
(const std::vector<std::string>& args, test::ChildControl& control) {
  static std::unique_ptr<Store> held;
  held = open_sqlite_store(args.at(0));
  held->begin_run(sample_run(std::stoi(args.at(1))));
  control.ready(0);
  return 0;
}
#endif

TEST_F(SqliteStoreTest, RunsOfEndedProcessesAreInterrupted) {
#ifdef OFFTUNE_TEST_HAS_SPAWN
  const RunId mine = open_sqlite_store(path())->begin_run(sample_run(1));
  ChildProcess exited("begin_running_and_ok_runs", {path()}, ChildProcess::After::Exit);
  const pid_t exited_pid = exited.pid();
  ASSERT_EQ(exited.wait(), 0);
  // Its store stays open in the child until it is killed.
  ChildProcess killed("begin_run_and_linger", {path(), "4"}, ChildProcess::After::Linger);
  const pid_t killed_pid = killed.pid();
  killed.kill_now();

  const auto ended = [&](pid_t pid) {
    return "interrupted: the process recording it ended (pid " + std::to_string(pid) + " on " +
           this_host() + ")";
  };
  {
    auto ro = open_sqlite_store_readonly(path());
    const auto runs = ro->runs();
    ASSERT_EQ(runs.size(), 4u);
    EXPECT_EQ(runs[0].id, mine);
    EXPECT_EQ(runs[0].status, RunStatus::Running) << "this process is alive";
    EXPECT_EQ(runs[0].error, sample_run(1).error);
    EXPECT_EQ(runs[1].label, sample_run(2).label);
    EXPECT_EQ(runs[1].status, RunStatus::Interrupted);
    EXPECT_EQ(runs[1].error, ended(exited_pid));
    EXPECT_EQ(runs[2].status, RunStatus::Ok);
    EXPECT_EQ(runs[3].label, sample_run(4).label);
    EXPECT_EQ(runs[3].status, RunStatus::Interrupted);
    EXPECT_EQ(runs[3].error, ended(killed_pid));
    EXPECT_EQ(ro->run(runs[3].id)->status, RunStatus::Interrupted);
  }
  {
    // The killed child's own (writable) open marked the run of the child that had exited; the
    // read-only open wrote nothing.
    RawDb db(path());
    EXPECT_EQ(db.column_concat("SELECT status FROM runs ORDER BY id", 0),
              "running | interrupted | ok | running");
  }
  open_sqlite_store(path());
  RawDb db(path());
  EXPECT_EQ(db.column_concat("SELECT status FROM runs ORDER BY id", 0),
            "running | interrupted | ok | interrupted");
  EXPECT_EQ(db.text("SELECT error FROM runs WHERE id = 4"), ended(killed_pid));
#else
  GTEST_SKIP() << "needs posix_spawn";
#endif
}

// What schema 11 added to schema 10: the reserved and host figures of occupancy samples. Each
// older kDropSchemaN begins with it, so that the file is one at schema N.
constexpr const char* kDropSchema11 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; ";

// What schema 10 added to schema 9: the memory history tables. Each older kDropSchemaN begins with
// it, so that the file is one at schema N.
constexpr const char* kDropSchema10 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; "
    "DROP TABLE memory_events; DROP TABLE memory_blocks; ";

// What schema 9 added to schema 8: device memory outside the allocator and the host peak, of runs
// and points. Each older kDropSchemaN begins with it, so that the file is one at schema N.
constexpr const char* kDropSchema9 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; "
    "DROP TABLE memory_events; DROP TABLE memory_blocks; "
    "ALTER TABLE runs DROP COLUMN device_outside; ALTER TABLE runs DROP COLUMN host_rss_peak; "
    "ALTER TABLE points DROP COLUMN device_outside; ALTER TABLE points DROP COLUMN host_rss_peak; ";

// What schema 8 added to schema 7: the allocator segments of runs and points. Each older
// kDropSchemaN begins with it, so that the file is one at schema N.
constexpr const char* kDropSchema8 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; "
    "DROP TABLE memory_events; DROP TABLE memory_blocks; "
    "ALTER TABLE runs DROP COLUMN device_outside; ALTER TABLE runs DROP COLUMN host_rss_peak; "
    "ALTER TABLE points DROP COLUMN device_outside; ALTER TABLE points DROP COLUMN host_rss_peak; "
    "ALTER TABLE runs DROP COLUMN alloc_segments; ALTER TABLE points DROP COLUMN alloc_segments; ";

// What schema 7 added to schema 6: the ranks of runs. Each older kDropSchemaN begins with it, so
// that the file is one at schema N.
constexpr const char* kDropSchema7 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; "
    "DROP TABLE memory_events; DROP TABLE memory_blocks; "
    "ALTER TABLE runs DROP COLUMN device_outside; ALTER TABLE runs DROP COLUMN host_rss_peak; "
    "ALTER TABLE points DROP COLUMN device_outside; ALTER TABLE points DROP COLUMN host_rss_peak; "
    "ALTER TABLE runs DROP COLUMN alloc_segments; ALTER TABLE points DROP COLUMN alloc_segments; "
    "DROP INDEX runs_job; ALTER TABLE runs DROP COLUMN job_run; "
    "ALTER TABLE runs DROP COLUMN world_size; ALTER TABLE runs DROP COLUMN rank; ";

// What schema 6 added to schema 5: the verify flag of runs and points.
constexpr const char* kDropSchema6 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; "
    "DROP TABLE memory_events; DROP TABLE memory_blocks; "
    "ALTER TABLE runs DROP COLUMN device_outside; ALTER TABLE runs DROP COLUMN host_rss_peak; "
    "ALTER TABLE points DROP COLUMN device_outside; ALTER TABLE points DROP COLUMN host_rss_peak; "
    "ALTER TABLE runs DROP COLUMN alloc_segments; ALTER TABLE points DROP COLUMN alloc_segments; "
    "DROP INDEX runs_job; ALTER TABLE runs DROP COLUMN job_run; "
    "ALTER TABLE runs DROP COLUMN world_size; ALTER TABLE runs DROP COLUMN rank; "
    "ALTER TABLE runs DROP COLUMN verify; ALTER TABLE points DROP COLUMN verify; ";

// What schema 5 added to schema 4 (after schema 6's, so that the file is one at schema 4): layer
// offloading, the LoRA rank and the predictions.
constexpr const char* kDropSchema5 =
    "ALTER TABLE occupancy DROP COLUMN reserved_bytes; ALTER TABLE occupancy DROP COLUMN "
    "host_bytes; "
    "ALTER TABLE occupancy DROP COLUMN host_pool_bytes; ALTER TABLE predictions DROP COLUMN "
    "peak_reserved; "
    "DROP TABLE memory_events; DROP TABLE memory_blocks; "
    "ALTER TABLE runs DROP COLUMN device_outside; ALTER TABLE runs DROP COLUMN host_rss_peak; "
    "ALTER TABLE points DROP COLUMN device_outside; ALTER TABLE points DROP COLUMN host_rss_peak; "
    "ALTER TABLE runs DROP COLUMN alloc_segments; ALTER TABLE points DROP COLUMN alloc_segments; "
    "DROP INDEX runs_job; ALTER TABLE runs DROP COLUMN job_run; "
    "ALTER TABLE runs DROP COLUMN world_size; ALTER TABLE runs DROP COLUMN rank; "
    "ALTER TABLE runs DROP COLUMN verify; ALTER TABLE points DROP COLUMN verify; "
    "ALTER TABLE runs DROP COLUMN layer_offload; ALTER TABLE points DROP COLUMN layer_offload; "
    "ALTER TABLE runs DROP COLUMN lora_rank; ALTER TABLE sweeps DROP COLUMN lora_rank; "
    "DROP TABLE predictions; ";

// What schema 4 added to schema 3: the engine variant columns (a file at schema 3 is one without
// them and without schema 5's: std::string(kDropSchema5) + kDropSchema4).
constexpr const char* kDropSchema4 =
    "ALTER TABLE runs DROP COLUMN checkpoint; ALTER TABLE runs DROP COLUMN offload_set; "
    "ALTER TABLE runs DROP COLUMN tier; ALTER TABLE points DROP COLUMN checkpoint; "
    "ALTER TABLE points DROP COLUMN offload_set; ALTER TABLE points DROP COLUMN tier; ";

// What schema 3 added to schema 2 (and 4 to 3): the step-time interval columns and the semantics
// (after kDropSchema5, likewise).
constexpr const char* kDropSchema3 =
    "ALTER TABLE runs DROP COLUMN checkpoint; ALTER TABLE runs DROP COLUMN offload_set; "
    "ALTER TABLE runs DROP COLUMN tier; ALTER TABLE points DROP COLUMN checkpoint; "
    "ALTER TABLE points DROP COLUMN offload_set; ALTER TABLE points DROP COLUMN tier; "
    "ALTER TABLE runs DROP COLUMN step_ms_ci_low; ALTER TABLE runs DROP COLUMN step_ms_ci_high; "
    "ALTER TABLE runs DROP COLUMN step_ms_ci_level; "
    "ALTER TABLE points DROP COLUMN step_ms_ci_low; ALTER TABLE points DROP COLUMN "
    "step_ms_ci_high; ALTER TABLE points DROP COLUMN step_ms_ci_level; "
    "ALTER TABLE runs DROP COLUMN semantics; ALTER TABLE points DROP COLUMN semantics; ";

// A schema 2 file reads (read-only, as is) with its intervals unknown, and migrates on a writable
// open: its old rows keep them unknown, new ones have them.
TEST_F(SqliteStoreTest, ASchemaTwoFileReadsWithoutIntervalsAndMigrates) {
  RunId old_run;
  {
    auto store = open_sqlite_store(path());
    old_run = store->begin_run(sample_run(1));
    store->finish_run(old_run, RunStatus::Ok, "", sample_summary(1), 7);
  }
  {
    RawDb db(path());
    db.must(std::string(kDropSchema5) + kDropSchema3 + "PRAGMA user_version = 2");
  }
  {
    auto ro = open_sqlite_store_readonly(path());
    const RunSummary s = ro->run(old_run)->summary;
    EXPECT_EQ(s.step_ms_median, sample_summary(1).step_ms_median);
    EXPECT_EQ(s.step_ms_ci_level, 0.0);
    EXPECT_EQ(ro->run(old_run)->config.semantics, Semantics::Offtune);
    EXPECT_EQ(step_interval(s).low, s.step_ms_min) << "unknown: the interval is min..max";
    EXPECT_EQ(step_interval(s).high, s.step_ms_max);
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 2) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->run(old_run)->summary.step_ms_ci_level, 0.0);
  const RunId new_run = store->begin_run(sample_run(2));
  store->finish_run(new_run, RunStatus::Ok, "", sample_summary(2), 7);
  EXPECT_EQ(store->run(new_run)->summary.step_ms_ci_level, 0.9375);
  EXPECT_EQ(store->run(new_run)->summary.step_ms_ci_high, sample_summary(2).step_ms_ci_high);
}

// One run of `r`, and a sweep (sample_sweep(salt)) whose one point has the run's config: what the
// migration tests write before they turn the file into an older schema.
std::pair<RunId, SweepId> put_run_and_point(Store& store, const RunRecord& r, int salt) {
  const RunId run = store.begin_run(r);
  const SweepId sweep = store.create_sweep(sample_sweep(salt));
  PointRecord p;
  p.sweep = sweep;
  p.index = 0;
  p.config = r.config;
  store.put_point(p);
  return {run, sweep};
}

// A schema 3 file reads (read-only, as is) with every run and point of the default variant (plain
// offloading to host memory), and migrates on a writable open: its rows keep that, new rows carry
// their variant.
TEST_F(SqliteStoreTest, ASchemaThreeFileReadsAsPlainOffloadingAndMigrates) {
  RunId old_run;
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    RunRecord r = sample_run(1);  // odd salt: no checkpointing, all, host
    std::tie(old_run, sweep) = put_run_and_point(*store, r, 1);
  }
  RawDb(path()).must(std::string(kDropSchema5) + kDropSchema4 + "PRAGMA user_version = 3");
  {
    auto ro = open_sqlite_store_readonly(path());
    const EngineConfig c = ro->run(old_run)->config;
    EXPECT_EQ(to_string(c.checkpoint), "none");
    EXPECT_EQ(c.offload_set, OffloadSet::All);
    EXPECT_EQ(c.tier, Tier::Host);
    EXPECT_EQ(c.semantics, sample_config(1).semantics) << "schema 3's own columns still read";
    EXPECT_EQ(to_string(ro->points(sweep).at(0).config.checkpoint), "none");
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 3) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->run(old_run)->config.tier, Tier::Host);
  const RunRecord variant = sample_run(6);  // every:8, boundaries, disk
  const RunId new_run = store->begin_run(variant);
  EXPECT_EQ(store->run(new_run)->config, variant.config);
  EXPECT_EQ(to_string(store->run(new_run)->config.checkpoint), "every:8");
}

// A schema 4 file reads (read-only, as is) with no layer offloading and no LoRA anywhere, and
// migrates on a writable open: its rows keep that, new rows carry theirs.
TEST_F(SqliteStoreTest, ASchemaFourFileReadsWithoutLayerOffloadingAndMigrates) {
  RunId old_run;
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    RunRecord r = sample_run(2);  // even salt: LoRA rank 8, layers on:2
    ASSERT_EQ(r.config.layer_offload, 2);
    std::tie(old_run, sweep) = put_run_and_point(*store, r, 2);
    EXPECT_EQ(store->run(old_run)->workload.lora_rank, 8);
    EXPECT_EQ(store->points(sweep).at(0).config.layer_offload, 2);
  }
  RawDb(path()).must(std::string(kDropSchema5) + "PRAGMA user_version = 4");
  {
    auto ro = open_sqlite_store_readonly(path());
    const RunRecord run = *ro->run(old_run);
    EXPECT_EQ(run.config.layer_offload, 0);
    EXPECT_EQ(run.workload.lora_rank, 0);
    EXPECT_EQ(run.config.checkpoint, sample_config(2).checkpoint) << "schema 4's own columns";
    EXPECT_EQ(ro->points(sweep).at(0).config.layer_offload, 0);
    EXPECT_EQ(ro->sweeps().at(0).workload.lora_rank, 0);
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 4) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->run(old_run)->config.layer_offload, 0);
  const RunRecord layered = sample_run(4);  // LoRA rank 8, layers on:3
  const RunId new_run = store->begin_run(layered);
  EXPECT_EQ(store->run(new_run)->config, layered.config);
  EXPECT_EQ(store->run(new_run)->workload.lora_rank, 8);
  EXPECT_EQ(store->run(new_run)->config.layer_offload, 3);
}

// A schema 5 file reads (read-only, as is) with verify off everywhere, and migrates on a writable
// open: its rows keep that, new rows carry theirs.
TEST_F(SqliteStoreTest, ASchemaFiveFileReadsWithoutVerifyAndMigrates) {
  RunId old_run;
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    RunRecord r = sample_run(2);  // even salt: verify on
    ASSERT_TRUE(r.config.verify);
    std::tie(old_run, sweep) = put_run_and_point(*store, r, 2);
    EXPECT_TRUE(store->run(old_run)->config.verify);
    EXPECT_TRUE(store->points(sweep).at(0).config.verify);
  }
  RawDb(path()).must(std::string(kDropSchema6) + "PRAGMA user_version = 5");
  {
    auto ro = open_sqlite_store_readonly(path());
    EXPECT_FALSE(ro->run(old_run)->config.verify);
    EXPECT_EQ(ro->run(old_run)->config.layer_offload, sample_config(2).layer_offload)
        << "schema 5's own columns";
    EXPECT_FALSE(ro->points(sweep).at(0).config.verify);
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 5) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_FALSE(store->run(old_run)->config.verify);
  const RunRecord verified = sample_run(4);
  const RunId new_run = store->begin_run(verified);
  EXPECT_EQ(store->run(new_run)->config, verified.config);
  EXPECT_TRUE(store->run(new_run)->config.verify);
}

// A schema 7 file reads (read-only, as is) with every run and point at the allocator segments the
// environment set, and migrates on a writable open: its rows keep that, new rows carry theirs.
TEST_F(SqliteStoreTest, ASchemaSevenFileReadsItsSegmentsAsTheEnvironmentsAndMigrates) {
  RunId old_run;
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    RunRecord r = sample_run(1);
    r.config.alloc_segments = AllocSegments::Expandable;
    std::tie(old_run, sweep) = put_run_and_point(*store, r, 1);
    EXPECT_EQ(store->run(old_run)->config.alloc_segments, AllocSegments::Expandable);
  }
  RawDb(path()).must(std::string(kDropSchema8) + "PRAGMA user_version = 7");
  {
    auto ro = open_sqlite_store_readonly(path());
    EXPECT_EQ(ro->run(old_run)->config.alloc_segments, AllocSegments::Env);
    EXPECT_EQ(ro->points(sweep).at(0).config.alloc_segments, AllocSegments::Env);
    EXPECT_EQ(ro->run(old_run)->config, sample_config(1)) << "schema 7's own columns";
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 7) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->run(old_run)->config.alloc_segments, AllocSegments::Env);
  RunRecord fixed = sample_run(2);
  fixed.config.alloc_segments = AllocSegments::Fixed;
  const RunId new_run = store->begin_run(fixed);
  EXPECT_EQ(store->run(new_run)->config.alloc_segments, AllocSegments::Fixed);
}

// A schema 8 file (before the device total and the host peak) reads them as 0, not measured, and
// migrates on a writable open: its rows keep 0, new rows carry theirs.
TEST_F(SqliteStoreTest, ASchemaEightFileReadsNoDeviceOutsideAndNoHostPeakAndMigrates) {
  RunId old_run;
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    RunRecord r = sample_run(1);
    r.summary.device_outside = 512 << 20;
    r.summary.host_rss_peak = int64_t{3} << 30;
    std::tie(old_run, sweep) = put_run_and_point(*store, r, 1);
    store->finish_run(old_run, RunStatus::Ok, "", r.summary, 1);
    PointRecord p;
    p.sweep = sweep;
    p.index = 1;
    p.config = r.config;
    p.status = PointStatus::Ok;
    p.summary = r.summary;
    store->put_point(p);
    EXPECT_EQ(store->run(old_run)->summary.device_outside, 512 << 20);
    EXPECT_EQ(store->points(sweep).at(1).summary.host_rss_peak, int64_t{3} << 30);
  }
  RawDb(path()).must(std::string(kDropSchema9) + "PRAGMA user_version = 8");
  {
    auto ro = open_sqlite_store_readonly(path());
    EXPECT_EQ(ro->run(old_run)->summary.device_outside, 0);
    EXPECT_EQ(ro->run(old_run)->summary.host_rss_peak, 0);
    EXPECT_EQ(ro->points(sweep).at(1).summary.device_outside, 0);
    EXPECT_EQ(ro->run(old_run)->summary.peak_reserved, sample_run(1).summary.peak_reserved)
        << "schema 8's own columns";
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 8) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->run(old_run)->summary.host_rss_peak, 0);
  RunRecord measured = sample_run(2);
  measured.summary.device_outside = 600 << 20;
  measured.summary.host_rss_peak = int64_t{5} << 30;
  const RunId new_run = store->begin_run(measured);
  store->finish_run(new_run, RunStatus::Ok, "", measured.summary, 1);
  EXPECT_EQ(store->run(new_run)->summary.device_outside, 600 << 20);
  EXPECT_EQ(store->run(new_run)->summary.host_rss_peak, int64_t{5} << 30);
}

// A schema 10 file's occupancy samples have no reserved or host figures: read-only they read -1
// (not known), and a writable open migrates the file so that new samples keep them.
TEST_F(SqliteStoreTest, ASchemaTenFilesOccupancyHasNoMemoryCurvesAndMigratesToKeepThem) {
  RunId run;
  {
    auto store = open_sqlite_store(path());
    run = store->begin_run(sample_run(1));
    store->add_occupancy({{.run = run, .time_ns = 5, .device_bytes = 100}});
  }
  RawDb(path()).must(std::string(kDropSchema11) + "PRAGMA user_version = 10");
  {
    auto ro = open_sqlite_store_readonly(path());
    const auto samples = ro->occupancy(run);
    ASSERT_EQ(samples.size(), 1u);
    EXPECT_EQ(samples[0].device_bytes, 100);
    EXPECT_EQ(samples[0].reserved_bytes, -1);
    EXPECT_EQ(samples[0].host_bytes, -1);
    EXPECT_EQ(samples[0].host_pool_bytes, -1);
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 10) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->occupancy(run)[0].reserved_bytes, -1) << "an old sample stays not known";
  store->add_occupancy({{.run = run,
                         .time_ns = 9,
                         .device_bytes = 100,
                         .reserved_bytes = 2 << 20,
                         .host_bytes = 64,
                         .host_pool_bytes = 4096}});
  const auto samples = store->occupancy(run);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].reserved_bytes, 2 << 20);
  EXPECT_EQ(samples[1].host_bytes, 64);
  EXPECT_EQ(samples[1].host_pool_bytes, 4096);
}

// A schema 10 file's predictions have no peak reserved: read-only they read 0 (not predicted), and
// a writable open migrates the file so that new ones keep it.
TEST_F(SqliteStoreTest, ASchemaTenFilesPredictionsHaveNoPeakReservedAndMigrateToKeepIt) {
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    sweep = store->create_sweep(sample_sweep(1));
    PointPrediction p;
    p.sweep = sweep;
    p.peak_allocated = 100;
    p.peak_reserved = 2 << 20;
    store->put_predictions({p});
  }
  RawDb(path()).must(std::string(kDropSchema11) + "PRAGMA user_version = 10");
  {
    auto ro = open_sqlite_store_readonly(path());
    const auto predictions = ro->predictions(sweep);
    ASSERT_EQ(predictions.size(), 1u);
    EXPECT_EQ(predictions[0].peak_allocated, 100);
    EXPECT_EQ(predictions[0].peak_reserved, 0);
  }
  auto store = open_sqlite_store(path());
  PointPrediction again;
  again.sweep = sweep;
  again.index = 1;
  again.peak_reserved = 4 << 20;
  store->put_predictions({again});
  const auto predictions = store->predictions(sweep);
  ASSERT_EQ(predictions.size(), 2u);
  EXPECT_EQ(predictions[0].peak_reserved, 0) << "an old prediction stays not predicted";
  EXPECT_EQ(predictions[1].peak_reserved, 4 << 20);
}

// A schema 9 file has no memory history: read-only it reads none (as is), and a writable open
// migrates it to keep one.
TEST_F(SqliteStoreTest, ASchemaNineFileHasNoMemoryHistoryAndMigratesToKeepOne) {
  RunId run;
  {
    auto store = open_sqlite_store(path());
    run = store->begin_run(sample_run(1));
  }
  RawDb(path()).must(std::string(kDropSchema10) + "PRAGMA user_version = 9");
  {
    auto ro = open_sqlite_store_readonly(path());
    EXPECT_TRUE(ro->memory_events(run).empty());
    EXPECT_TRUE(ro->memory_blocks(run).empty());
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 9) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  store->add_memory_history(run, {{.action = "segment_alloc", .addr = 4096, .size = 2 << 20}}, {});
  EXPECT_EQ(store->memory_events(run).size(), 1u);
}

// A schema 6 file reads (read-only, as is) with every run a single process, its own job, and
// migrates on a writable open: its rows keep that, new rows carry their rank, world size and job.
TEST_F(SqliteStoreTest, ASchemaSixFileReadsAsSingleProcessRunsAndMigrates) {
  RunId old_run;
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    RunRecord r = sample_run(1);
    r.rank = 2;
    r.world_size = 4;
    r.job_run = RunId(77);
    std::tie(old_run, sweep) = put_run_and_point(*store, r, 1);
    EXPECT_EQ(store->run(old_run)->rank, 2);
  }
  RawDb(path()).must(std::string(kDropSchema7) + "PRAGMA user_version = 6");
  {
    auto ro = open_sqlite_store_readonly(path());
    const RunRecord old = *ro->run(old_run);
    EXPECT_EQ(old.rank, 0);
    EXPECT_EQ(old.world_size, 1);
    EXPECT_FALSE(old.job_run.has_value());
    EXPECT_EQ(old.config, sample_config(1)) << "schema 6's own columns";
    EXPECT_EQ(ro->points(sweep).size(), 1u);
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 6) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(store->run(old_run)->world_size, 1);
  RunRecord ranked = sample_run(3);
  ranked.rank = 1;
  ranked.world_size = 2;
  ranked.job_run = old_run;
  const RunId new_run = store->begin_run(ranked);
  const RunRecord back = *store->run(new_run);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.job_run, old_run);
}

// A schema 4 file has no predictions table: read-only (never migrated) it reads as a store without
// predictions, not as an error; a writable open adds the table and keeps them.
TEST_F(SqliteStoreTest, ASchemaFourFileHasNoPredictionsAndMigratesToKeepThem) {
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    sweep = store->create_sweep(sample_sweep(1));
    store->put_predictions({sample_prediction(sweep, 0, 0)});
  }
  RawDb(path()).must(std::string(kDropSchema5) + "PRAGMA user_version = 4");
  EXPECT_EQ(RawDb(path()).integer("SELECT count(*) FROM sqlite_master WHERE name = 'predictions'"),
            0);
  {
    auto ro = open_sqlite_store_readonly(path());
    EXPECT_TRUE(ro->predictions(sweep).empty());
    EXPECT_EQ(ro->sweeps().size(), 1u);
  }
  EXPECT_EQ(RawDb(path()).integer("PRAGMA user_version"), 4) << "a read-only open never migrates";
  auto store = open_sqlite_store(path());
  EXPECT_TRUE(store->predictions(sweep).empty());
  store->put_predictions({sample_prediction(sweep, 4, 1)});
  ASSERT_EQ(store->predictions(sweep).size(), 1u);
  EXPECT_EQ(store->predictions(sweep)[0], sample_prediction(sweep, 4, 1));
}

// Read-only, a current file's predictions read; writing them is refused.
TEST_F(SqliteStoreTest, ReadOnlyStoreReadsPredictionsButNeverWritesThem) {
  SweepId sweep;
  {
    auto store = open_sqlite_store(path());
    sweep = store->create_sweep(sample_sweep(1));
    store->put_predictions({sample_prediction(sweep, 0, 0)});
  }
  auto ro = open_sqlite_store_readonly(path());
  ASSERT_EQ(ro->predictions(sweep).size(), 1u);
  expect_store_error([&] { ro->put_predictions({sample_prediction(sweep, 1, 1)}); }, Kind::Invalid,
                     "read-only");
}

TEST_F(SqliteStoreTest, RunningRunsOfAnOlderOfftuneAreInterruptedAndItsFileMigrates) {
  RunId running, finished;
  {
    auto store = open_sqlite_store(path());
    running = store->begin_run(sample_run(1));
    finished = store->begin_run(sample_run(2));
    store->finish_run(finished, RunStatus::Ok, "", sample_summary(2), 7);
  }
  {
    // What schema 1 is: the same tables without the run owners, the claims and the intervals.
    RawDb db(path());
    db.must(
        std::string(kDropSchema5) + kDropSchema3 +
        "DROP TABLE IF EXISTS run_owners; DROP TABLE IF EXISTS claims; PRAGMA user_version = 1");
  }
  const std::string message =
      "interrupted: the process recording it ended (recorded by an older offtune)";
  {
    auto ro = open_sqlite_store_readonly(path());
    EXPECT_EQ(ro->run(running)->status, RunStatus::Interrupted);
    EXPECT_EQ(ro->run(running)->error, message);
    EXPECT_EQ(ro->runs()[1].status, RunStatus::Ok);
  }
  {
    RawDb db(path());
    EXPECT_EQ(db.integer("PRAGMA user_version"), 1) << "a read-only open never migrates";
    EXPECT_EQ(db.text("SELECT status FROM runs WHERE id = 1"), "running");
  }
  open_sqlite_store(path());
  RawDb db(path());
  EXPECT_EQ(db.integer("PRAGMA user_version"), store_schema_version());
  EXPECT_EQ(db.integer("SELECT count(*) FROM sqlite_master WHERE name IN ('run_owners', 'claims')"),
            2);
  EXPECT_EQ(db.column_concat("SELECT status FROM runs ORDER BY id", 0), "interrupted | ok");
  EXPECT_EQ(db.text("SELECT error FROM runs WHERE id = 1"), message);
}

TEST_F(SqliteStoreTest, SweepsCreatedAtOnceThroughManyConnectionsAreOne) {
  open_sqlite_store(path());  // created first, so that the threads race on the sweeps alone
  constexpr int kThreads = 4;
  constexpr int kKeys = 10;
  std::vector<std::vector<SweepId>> ids(kThreads);
  std::vector<std::string> errors(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto store = open_sqlite_store(path());  // a connection of its own, like another process
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        for (int k = 0; k < kKeys; ++k) ids[t].push_back(store->create_sweep(sample_sweep(k)));
      } catch (const StoreError& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "");
    EXPECT_EQ(ids[t], ids[0]);
  }
  EXPECT_EQ(open_sqlite_store_readonly(path())->sweeps().size(), static_cast<size_t>(kKeys));
}

// ---------------------------------------------------------------------------------------------------
// Owners and claims between processes.

#ifdef OFFTUNE_TEST_HAS_SPAWN
TEST(Owner, IsThisProcessAndAReusedPidIsNotIt) {
  const Owner me = current_owner();
  EXPECT_EQ(me.pid, getpid());
  EXPECT_EQ(me.host, this_host());
  EXPECT_GT(me.start, 0) << "the start time from /proc/self/stat";
  EXPECT_TRUE(owner_alive(me));
  Owner reused = me;
  reused.start += 1;  // the same pid, another process
  EXPECT_FALSE(owner_alive(reused));
  Owner elsewhere = me;
  elsewhere.host += ".elsewhere";
  elsewhere.pid = 1 << 30;  // no such pid here; there, nobody can say
  EXPECT_TRUE(owner_alive(elsewhere));
  Owner gone = me;
  gone.pid = 1 << 30;
  EXPECT_FALSE(owner_alive(gone));
}

// Args: PATH SWEEP INDEX. Claims the point and reports whether it got it (0) or not (1); the store
// stays open as long as the child does.
OFFTUNE_CHILD_ROLE(claim_point)(const std::vector<std::string>& args, test::ChildControl& control) {
  static std::unique_ptr<Store> held;
  held = open_sqlite_store(args.at(0));
  const Claim claim = held->claim_point(SweepId(std::stoll(args.at(1))), std::stoll(args.at(2)));
  control.ready(claim.status == ClaimStatus::Claimed ? 0 : 1);
  return 0;
}

TEST_F(SqliteStoreTest, AClaimOfALiveProcessIsTakenAndOfAKilledOneIsTakenOver) {
  const SweepId sweep = open_sqlite_store(path())->create_sweep(sample_sweep(1));
  // The claim's store stays open in the child until it is killed.
  ChildProcess child("claim_point", {path(), std::to_string(sweep.value), "0"},
                     ChildProcess::After::Linger);
  auto store = open_sqlite_store(path());
  const Claim taken = store->claim_point(sweep, 0);
  EXPECT_EQ(taken.status, ClaimStatus::Taken);
  EXPECT_EQ(taken.holder.pid, child.pid());
  EXPECT_EQ(taken.holder.host, this_host());
  EXPECT_EQ(store->claim_point(sweep, 1).status, ClaimStatus::Claimed) << "other points are free";
  store->release_point(sweep, 0);  // not this process's claim: it stays
  EXPECT_EQ(store->claim_point(sweep, 0).status, ClaimStatus::Taken);

  child.kill_now();
  const Claim mine = store->claim_point(sweep, 0);
  EXPECT_EQ(mine.status, ClaimStatus::Claimed);
  EXPECT_EQ(mine.holder, current_owner());
  store->release_point(sweep, 0);
  store->release_point(sweep, 1);
  store.reset();
  RawDb db(path());
  EXPECT_EQ(db.integer("SELECT count(*) FROM claims"), 0);
}

TEST_F(SqliteStoreTest, ClaimsOfEndedProcessesGoWhenTheStoreIsOpened) {
  const SweepId sweep = open_sqlite_store(path())->create_sweep(sample_sweep(1));
  ChildProcess child("claim_point", {path(), std::to_string(sweep.value), "3"},
                     ChildProcess::After::Exit);
  ASSERT_EQ(child.wait(), 0);
  EXPECT_EQ(RawDb(path()).integer("SELECT count(*) FROM claims"), 1) << "nobody released it";
  open_sqlite_store(path());
  EXPECT_EQ(RawDb(path()).integer("SELECT count(*) FROM claims"), 0);
}
#endif

}  // namespace
}  // namespace offtune::profiler
