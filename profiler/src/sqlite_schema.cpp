// The store's schema (sqlite_schema.hpp): migrations, one function per step, and the identity
// check.
#include "sqlite_schema.hpp"

#include <array>
#include <chrono>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "offtune/version.hpp"  // the meta table records which offtune wrote a file

namespace offtune::profiler::detail {

namespace {

using Kind = StoreError::Kind;

// Schema and migrations.
//
// Each migration moves the schema from version `from` to `from + 1`. They are applied in order,
// together, inside one transaction, and the steps of a released migration never change: a file at
// version N is always the result of the same steps (SqliteStoreTest.ANewStoreHasTheReleasedSchema-
// ByteForByte holds the result to tests/data/store/schema_v9.txt). Version 0 is an empty file.

// ALTER TABLE ... ADD COLUMN of each column to runs, then to points: a run's and a point's engine
// config and figures are the same columns.
std::string add_to_runs_and_points(std::initializer_list<const char*> columns) {
  std::string sql;
  for (const char* table : {"runs", "points"}) {
    for (const char* column : columns) {
      sql += std::string("ALTER TABLE ") + table + " ADD COLUMN " + column + ";\n";
    }
  }
  return sql;
}

// The workload's columns, of runs and of sweeps, their names padded to `width` (as each table's
// CREATE statement was written).
std::string workload_columns_v1(size_t width) {
  static constexpr std::pair<const char*, const char*> kColumns[] = {
      {"model", "TEXT    NOT NULL"},  {"batch", "INTEGER NOT NULL"},
      {"seq", "INTEGER NOT NULL"},    {"dtype", "TEXT    NOT NULL"},
      {"seed", "INTEGER NOT NULL"},   {"steps", "INTEGER NOT NULL"},
      {"warmup", "INTEGER NOT NULL"}, {"optimizer", "INTEGER NOT NULL"}};
  std::string sql;
  for (const auto& [name, type] : kColumns) {
    sql += "  " + std::string(name) + std::string(width - std::string_view(name).size(), ' ') +
           " " + type + ",\n";
  }
  return sql;
}

// The columns that runs and points share: the engine config and the figures of a measurement.
constexpr const char* kConfigColumnsV1 = R"sql(  offload             INTEGER NOT NULL,
  min_offload_size    INTEGER NOT NULL,
  max_fwd_stash_size  INTEGER NOT NULL,
  max_fwd_stash_bytes INTEGER NOT NULL,
  prefetch            INTEGER NOT NULL,
  use_streams         INTEGER NOT NULL,
  use_pin_memory      INTEGER NOT NULL,
  link                TEXT    NOT NULL,
)sql";
constexpr const char* kSummaryColumnsV1 = R"sql(  step_ms_median      REAL,
  step_ms_min         REAL,
  step_ms_max         REAL,
  step_ms_stddev      REAL,
  peak_allocated      INTEGER NOT NULL,
  peak_reserved       INTEGER NOT NULL,
  host_bytes_peak     INTEGER NOT NULL,
  pinned_bytes        INTEGER NOT NULL,
  offloaded_bytes     INTEGER NOT NULL,
  reloaded_bytes      INTEGER NOT NULL,
  hidden_copy_pct     REAL,
  hidden_d2h_pct      REAL,
  hidden_h2d_pct      REAL,
  exposed_copy_ns     INTEGER NOT NULL,
  pageable_copies     INTEGER NOT NULL,
  final_loss          REAL)sql";

void migrate_0_to_1(const Connection& c) {
  c.exec(std::string(R"sql(
CREATE TABLE meta (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE runs (
  id                  INTEGER PRIMARY KEY,
  status              TEXT    NOT NULL,
  error               TEXT    NOT NULL,
  label               TEXT    NOT NULL,
  env_offtune_version TEXT    NOT NULL,
  env_torch_version   TEXT    NOT NULL,
  env_backend         TEXT    NOT NULL,
  env_device          TEXT    NOT NULL,
  env_git_revision    TEXT    NOT NULL,
  env_host            TEXT    NOT NULL,
)sql" + workload_columns_v1(19)) +
             kConfigColumnsV1 +
             R"sql(  started_unix_ns     INTEGER NOT NULL,
  finished_unix_ns    INTEGER NOT NULL,
)sql" + kSummaryColumnsV1 +
             R"sql(
);

CREATE TABLE steps (
  run             INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step            INTEGER NOT NULL,
  begin_ns        INTEGER NOT NULL,
  end_ns          INTEGER NOT NULL,
  peak_allocated  INTEGER NOT NULL,
  peak_reserved   INTEGER NOT NULL,
  offloaded_bytes INTEGER NOT NULL,
  reloaded_bytes  INTEGER NOT NULL,
  hidden_copy_pct REAL,
  exposed_copy_ns INTEGER NOT NULL,
  loss            REAL,
  PRIMARY KEY (run, step)
);

CREATE TABLE events (
  id       INTEGER PRIMARY KEY,
  run      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind     TEXT    NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns   INTEGER NOT NULL,
  stream   INTEGER NOT NULL,
  bytes    INTEGER NOT NULL,
  tensor   INTEGER NOT NULL,
  pinned   INTEGER NOT NULL,
  prefetch INTEGER NOT NULL,
  name     TEXT    NOT NULL
);
CREATE INDEX events_run_start ON events (run, start_ns);

CREATE TABLE occupancy (
  id           INTEGER PRIMARY KEY,
  run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  time_ns      INTEGER NOT NULL,
  fwd_count    INTEGER NOT NULL,
  fwd_bytes    INTEGER NOT NULL,
  bwd_count    INTEGER NOT NULL,
  bwd_bytes    INTEGER NOT NULL,
  device_bytes INTEGER NOT NULL
);
CREATE INDEX occupancy_run_time ON occupancy (run, time_ns);

CREATE TABLE sweeps (
  id              INTEGER PRIMARY KEY,
  name            TEXT    NOT NULL,
  key             TEXT    NOT NULL UNIQUE,
)sql" + workload_columns_v1(15) +
             R"sql(  grid            TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL
);

CREATE TABLE points (
  id                  INTEGER PRIMARY KEY,
  sweep               INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index         INTEGER NOT NULL,
)sql" + kConfigColumnsV1 +
             R"sql(  status              TEXT    NOT NULL,
  error               TEXT    NOT NULL,
  run                 INTEGER REFERENCES runs(id) ON DELETE SET NULL,
)sql" + kSummaryColumnsV1 +
             R"sql(,
  UNIQUE (sweep, point_index)
);
CREATE INDEX points_run ON points (run);

CREATE TABLE recommendations (
  id              INTEGER PRIMARY KEY,
  sweep           INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  constraint_spec TEXT    NOT NULL,
  point_index     INTEGER NOT NULL,
  rationale       TEXT    NOT NULL,
  snippets_json   TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL
);
CREATE INDEX recommendations_sweep ON recommendations (sweep);
)sql",
         "migrate schema 0 -> 1");

  Statement meta(c, "INSERT INTO meta (key, value) VALUES (?, ?)", "insert meta");
  const std::array<std::pair<std::string_view, std::string>, 3> rows{{
      {"app", std::string(kAppName)},
      {"created_unix_ns", std::to_string(now_unix_ns())},
      {"created_by", std::string(kVersion)},
  }};
  for (const auto& [key, value] : rows) {
    Query q(meta);
    q.text(key).text(value).run();
  }
}

// Schema 2: who owns what. run_owners names the process recording each run, so that a run whose
// process ended (SIGKILL, a crash) is not `running` forever. claims names the process measuring a
// sweep point, so that two processes running one sweep measure each point once. Runs of schema 1
// have no owner row.
void migrate_1_to_2(const Connection& c) {
  c.exec(R"sql(
CREATE TABLE run_owners (
  run       INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  host      TEXT    NOT NULL,
  pid       INTEGER NOT NULL,
  pid_start INTEGER NOT NULL
);

CREATE TABLE claims (
  sweep           INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index     INTEGER NOT NULL,
  host            TEXT    NOT NULL,
  pid             INTEGER NOT NULL,
  pid_start       INTEGER NOT NULL,
  claimed_unix_ns INTEGER NOT NULL,
  PRIMARY KEY (sweep, point_index)
);
)sql",
         "migrate schema 1 -> 2");
}

// Schema 3: the confidence interval of each run's and point's median step time, and its coverage
// (metrics.hpp), NULL (not known) in rows written before it; and the engine semantics each was
// measured under, 'offtune' for those rows (the only one there was).
void migrate_2_to_3(const Connection& c) {
  c.exec(add_to_runs_and_points({"step_ms_ci_low REAL", "step_ms_ci_high REAL",
                                 "step_ms_ci_level REAL",
                                 "semantics TEXT NOT NULL DEFAULT 'offtune'"}),
         "migrate schema 2 -> 3");
}

// Schema 4: the engine variant each run and point was measured under (gradient checkpointing, what
// was offloaded, the tier copies went to); older rows get what there was then.
void migrate_3_to_4(const Connection& c) {
  c.exec(add_to_runs_and_points({"checkpoint TEXT NOT NULL DEFAULT 'none'",
                                 "offload_set TEXT NOT NULL DEFAULT 'all'",
                                 "tier TEXT NOT NULL DEFAULT 'host'"}),
         "migrate schema 3 -> 4");
}

// Schema 5: layer offloading of frozen weights (each run's and point's) and the LoRA rank of the
// workload (each run's and sweep's); older rows had neither. And the what-if predictor's figures of
// each grid point of a predict-first sweep, by (sweep, point_index) like points, whether or not the
// point was then measured; older sweeps have none.
void migrate_4_to_5(const Connection& c) {
  c.exec(add_to_runs_and_points({"layer_offload TEXT NOT NULL DEFAULT 'off'"}) + R"sql(
ALTER TABLE runs ADD COLUMN lora_rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sweeps ADD COLUMN lora_rank INTEGER NOT NULL DEFAULT 0;

CREATE TABLE predictions (
  sweep           INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index     INTEGER NOT NULL,
  step_ns         INTEGER NOT NULL,
  peak_allocated  INTEGER NOT NULL,
  hidden_copy_pct REAL    NOT NULL,
  offloaded_bytes INTEGER NOT NULL,
  predictor       TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL,
  PRIMARY KEY (sweep, point_index)
);
)sql",
         "migrate schema 4 -> 5");
}

// Schema 6: whether each run and point ran with verify (OffloadOptions::verify: every offloaded
// copy checked at unpack); older rows did not.
void migrate_5_to_6(const Connection& c) {
  c.exec(add_to_runs_and_points({"verify INTEGER NOT NULL DEFAULT 0"}), "migrate schema 5 -> 6");
}

// Schema 7: each run's place in a distributed job (torchrun): its rank, the world size, and the run
// of rank 0 in the same store (NULL: the run is its own job). Older rows were single processes.
// job_run is a plain id, not a foreign key, as the contract with the sweep has it: the ranks of one
// job are begun by different processes in any order, and a foreign key adds nothing a reader
// checks.
void migrate_6_to_7(const Connection& c) {
  c.exec(R"sql(
ALTER TABLE runs ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN world_size INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN job_run INTEGER;
CREATE INDEX runs_job ON runs (job_run);
)sql",
         "migrate schema 6 -> 7");
}

// Schema 8: the device allocator's segments each run and point was measured with (the knob
// alloc_segments); older rows left them as the environment set them.
void migrate_7_to_8(const Connection& c) {
  c.exec(add_to_runs_and_points({"alloc_segments TEXT NOT NULL DEFAULT 'env'"}),
         "migrate schema 7 -> 8");
}

void migrate_8_to_9(const Connection& c) {
  c.exec(add_to_runs_and_points({"device_outside INTEGER NOT NULL DEFAULT 0",
                                 "host_rss_peak INTEGER NOT NULL DEFAULT 0"}),
         "migrate schema 8 -> 9");
}

// Schema 10: a run's memory history (--memory-history), for memory snapshots.
void migrate_9_to_10(const Connection& c) {
  c.exec(R"sql(
CREATE TABLE memory_events (
  run         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq         INTEGER NOT NULL,
  time_ns     INTEGER NOT NULL,
  action      TEXT    NOT NULL,
  addr        INTEGER NOT NULL,
  size        INTEGER NOT NULL,
  block_size  INTEGER NOT NULL,
  stream      INTEGER NOT NULL,
  device_free INTEGER NOT NULL,
  note        TEXT    NOT NULL,
  PRIMARY KEY (run, seq)
);
CREATE TABLE memory_blocks (
  run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  segment_addr INTEGER NOT NULL,
  segment_size INTEGER NOT NULL,
  stream       INTEGER NOT NULL,
  small_pool   INTEGER NOT NULL,
  expandable   INTEGER NOT NULL,
  addr         INTEGER NOT NULL,
  size         INTEGER NOT NULL,
  requested    INTEGER NOT NULL,
  state        TEXT    NOT NULL,
  note         TEXT    NOT NULL,
  PRIMARY KEY (run, addr)
);
)sql",
         "migrate schema 9 -> 10");
}

// Schema 11: each occupancy sample also has the reserved device bytes and the host side (host
// copies alive, the pinned pool's reserve) at its time; older samples read -1, not known. Each
// prediction has its peak reserved; older ones read 0, not predicted.
void migrate_10_to_11(const Connection& c) {
  c.exec(R"sql(
ALTER TABLE occupancy ADD COLUMN reserved_bytes INTEGER NOT NULL DEFAULT -1;
ALTER TABLE occupancy ADD COLUMN host_bytes INTEGER NOT NULL DEFAULT -1;
ALTER TABLE occupancy ADD COLUMN host_pool_bytes INTEGER NOT NULL DEFAULT -1;
ALTER TABLE predictions ADD COLUMN peak_reserved INTEGER NOT NULL DEFAULT 0;
)sql",
         "migrate schema 10 -> 11");
}

struct Migration {
  int from;  // applies to a file at this version and leaves it at from + 1
  void (*apply)(const Connection&);
};
// In order; the last one ends at kSchemaVersion.
constexpr std::array<Migration, 11> kMigrations{{{0, &migrate_0_to_1},
                                                 {1, &migrate_1_to_2},
                                                 {2, &migrate_2_to_3},
                                                 {3, &migrate_3_to_4},
                                                 {4, &migrate_4_to_5},
                                                 {5, &migrate_5_to_6},
                                                 {6, &migrate_6_to_7},
                                                 {7, &migrate_7_to_8},
                                                 {8, &migrate_8_to_9},
                                                 {9, &migrate_9_to_10},
                                                 {10, &migrate_10_to_11}}};
static_assert(kMigrations.back().from + 1 == kSchemaVersion, "a migration must reach the schema");

}  // namespace

Identity read_identity(const Connection& c, bool writable) {
  Identity id;
  const int64_t version = query_int(c, "PRAGMA user_version", "user_version");
  const int64_t app_id = query_int(c, "PRAGMA application_id", "application_id");
  int64_t objects = 0;
  bool has_meta = false;
  {
    Statement s(
        c, "SELECT count(*), coalesce(sum(type = 'table' AND name = 'meta'), 0) FROM sqlite_master",
        "read schema");
    Query q(s);
    if (q.next()) {
      objects = q.col_i64();
      has_meta = q.col_i64() != 0;
    }
  }
  const std::string not_offtune =
      c.path() + " is an SQLite database but not an offtune store (no offtune meta table)";
  if (objects == 0 && version == 0) {
    if (app_id != 0 && app_id != kApplicationId) throw StoreError(Kind::Invalid, not_offtune);
    id.empty = true;
    return id;
  }
  std::string app;
  if (has_meta) {
    Statement s(c, "SELECT value FROM meta WHERE key = 'app'", "read meta");
    Query q(s);
    if (q.next()) app = q.col_text();
  }
  if (app != kAppName) throw StoreError(Kind::Invalid, not_offtune);
  if (version > kSchemaVersion) {
    throw StoreError(Kind::NewerSchema, c.path() + " was written by a newer offtune (schema " +
                                            std::to_string(version) + ", this build reads up to " +
                                            std::to_string(kSchemaVersion) + ")");
  }
  if (!writable && version < kOldestReadableSchema) {
    throw StoreError(Kind::Invalid, c.path() + " has schema " + std::to_string(version) +
                                        ", too old to read without migrating; open it for writing "
                                        "once (any offtune command that records) to upgrade it");
  }
  id.version = static_cast<int>(version);
  return id;
}

void migrate(const Connection& c) {
  Transaction tx(c, "migrate schema");
  const Identity id = read_identity(c, true);
  const int start = id.empty ? 0 : id.version;
  if (start < kSchemaVersion) {
    for (const Migration& m : kMigrations) {
      if (m.from >= start) m.apply(c);
    }
    Statement s(c, "INSERT OR REPLACE INTO meta (key, value) VALUES ('writer_version', ?)",
                "update meta");
    Query q(s);
    q.text(std::string(kVersion)).run();
    c.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion), "set schema version");
    c.exec("PRAGMA application_id = " + std::to_string(kApplicationId), "set application id");
  }
  tx.commit();
}

}  // namespace offtune::profiler::detail
