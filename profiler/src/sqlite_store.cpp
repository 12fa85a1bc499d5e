// The SQLite store: one file, a versioned schema (PRAGMA user_version) moved forward by an ordered
// list of migrations, WAL journaling, and one transaction per batched write.
//
// Opening is careful not to touch a file it is about to refuse: the SQLite header is checked by
// hand, then a read-only (immutable, when no writer is active) connection runs quick_check and
// reads the schema version and the offtune identity. Only a file that passes is opened for writing;
// any error before that leaves the bytes, and the directory, as they were. docs/store.md describes
// the schema.
//
// Nothing is left behind: a file this code created and could not make a store of is removed, and a
// read-only store folds away the -wal/-shm files its connection made. Nothing hangs: runs and
// claims name their owning process (Owner), and those of a process that ended are recognised as
// such.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "offtune/profiler/store.hpp"
#include "offtune/version.hpp"  // the meta table records which offtune wrote a file
#include "sqlite_uri.hpp"

namespace offtune::profiler {
namespace {

namespace fs = std::filesystem;
using Kind = StoreError::Kind;

constexpr int kSchemaVersion = 7;
// The oldest schema that a read-only open can read as is (a read-only open never migrates).
constexpr int kOldestReadableSchema = 1;
// The first schema with run_owners and claims.
constexpr int kOwnersSchema = 2;
// The first schema with the step-time confidence interval.
constexpr int kCiSchema = 3;
// The first schema with the engine variants (checkpoint, offload set, tier).
constexpr int kVariantSchema = 4;
// The first schema with layer offloading and the workload's LoRA rank.
constexpr int kLayerSchema = 5;
// The first schema with the predictions table (predict-first sweeps).
constexpr int kPredictionSchema = 5;
// The first schema with the verify flag (the correctness sentinel) of runs and points.
constexpr int kVerifySchema = 6;
// The first schema with ranks: each run's rank, world size and job (distributed training).
constexpr int kRanksSchema = 7;
// PRAGMA application_id, so that tools like file(1) can tell an offtune store ("OFTN").
constexpr int32_t kApplicationId = 0x4f46544e;
constexpr int kBusyTimeoutMs = 5000;
constexpr std::string_view kAppName = "offtune";

int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// SQLite's error message may span lines (quick_check output does); the store promises one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

// ---------------------------------------------------------------------------------------------------
// Owners: which process, on which host, and whether it still runs.

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown-host";
  return name.data();
}

struct ProcStat {
  char state = '?';
  int64_t start = 0;  // field 22: clock ticks since boot
};

// /proc/PID/stat is "pid (comm) state ppid ... starttime ...". comm may contain spaces and ')', so
// the fields are counted from the last ')'. nullopt: no such process (or no procfs).
std::optional<ProcStat> proc_stat(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 1));
  ProcStat st;
  fields >> st.state;  // field 3
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;
  fields >> st.start;
  if (!fields) return std::nullopt;
  return st;
}

// Without procfs (another kernel, a sandbox) there is no start time: the pid alone is checked, and
// a reused pid reads as alive. Erring that way waits for a point or shows a run as running; the
// other way would take live work from a process.
bool have_procfs() {
  static const bool have = proc_stat(getpid()).has_value();
  return have;
}

Kind kind_for(int rc) {
  switch (rc & 0xff) {  // primary code; extended codes are on for the messages
    case SQLITE_NOTADB:
      return Kind::NotADatabase;
    case SQLITE_CORRUPT:
      return Kind::Corrupt;
    case SQLITE_FULL:
      return Kind::Full;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Kind::Busy;
    case SQLITE_CANTOPEN:
      return Kind::CannotOpen;
    case SQLITE_CONSTRAINT:
      // A row the schema refuses (unknown run or sweep id, duplicate key) is the caller's bad
      // argument, the same thing the memory store reports as Invalid.
      return Kind::Invalid;
    default:
      return Kind::Io;
  }
}

// SQLITE_TRANSIENT is an old-style cast in a macro; this is the same value, spelled for -Werror.
const sqlite3_destructor_type kTransient =
    reinterpret_cast<sqlite3_destructor_type>(static_cast<std::intptr_t>(-1));

struct DbCloser {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};

// One sqlite3* with the file name that every error message carries.
class Connection {
 public:
  // `path` is what the user gave (for messages); `uri` is what SQLite opens.
  Connection(std::string path, const std::string& uri, int flags) : path_(std::move(path)) {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(uri.c_str(), &raw, flags | SQLITE_OPEN_URI, nullptr);
    db_.reset(raw);  // even on failure: the handle must be closed
    if (rc != SQLITE_OK) fail(rc, "open");
    sqlite3_extended_result_codes(db_.get(), 1);
    sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);
  }

  sqlite3* get() const { return db_.get(); }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(int rc, std::string_view op) const {
    std::string detail = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
    // SQLite does not say which reference failed; every foreign key here is a run or sweep id.
    if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) detail += " (unknown run or sweep id)";
    throw StoreError(kind_for(rc), one_line(path_ + ": " + std::string(op) + ": " + detail));
  }
  // The one place where SQLite result codes become StoreErrors. Returns rc for step's ROW/DONE.
  int check(int rc, std::string_view op) const {
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) fail(rc, op);
    return rc;
  }
  void exec(const std::string& sql, std::string_view op) const {
    check(sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, nullptr), op);
  }

 private:
  std::string path_;
  std::unique_ptr<sqlite3, DbCloser> db_;
};

// A prepared statement. Use it through Query, which binds and reads by position and resets the
// statement when done, so that no read transaction stays open and blocks checkpoints.
class Statement {
 public:
  Statement(const Connection& conn, const std::string& sql, std::string op, bool persistent)
      : conn_(conn), op_(std::move(op)) {
    sqlite3_stmt* raw = nullptr;
    const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
    const int rc = sqlite3_prepare_v3(conn.get(), sql.c_str(), static_cast<int>(sql.size()), flags,
                                      &raw, nullptr);
    stmt_.reset(raw);
    conn_.check(rc, "prepare " + op_);
  }

  sqlite3_stmt* get() const { return stmt_.get(); }
  const Connection& conn() const { return conn_; }
  const std::string& op() const { return op_; }

 private:
  const Connection& conn_;
  std::string op_;  // what the statement does, for messages ("insert events")
  std::unique_ptr<sqlite3_stmt, StmtFinalizer> stmt_;
};

class Query {
 public:
  explicit Query(Statement& stmt) : s_(stmt) { sqlite3_reset(s_.get()); }
  ~Query() {
    sqlite3_reset(s_.get());
    sqlite3_clear_bindings(s_.get());
  }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  // Binding, left to right.
  Query& i64(int64_t v) { return bound(sqlite3_bind_int64(s_.get(), ++bind_, v)); }
  Query& u64(uint64_t v) { return i64(static_cast<int64_t>(v)); }  // bit pattern (C++20 modular)
  Query& boolean(bool v) { return i64(v ? 1 : 0); }
  // NaN binds as NULL in SQLite; real_or_nan() reads it back as NaN.
  Query& real(double v) { return bound(sqlite3_bind_double(s_.get(), ++bind_, v)); }
  Query& text(std::string_view v) {
    return bound(
        sqlite3_bind_text64(s_.get(), ++bind_, v.data(), v.size(), kTransient, SQLITE_UTF8));
  }
  Query& null() { return bound(sqlite3_bind_null(s_.get(), ++bind_)); }
  Query& id_or_null(int64_t id) { return id >= 0 ? i64(id) : null(); }

  // Stepping. next() is for reads; run() for statements that return nothing.
  bool next() {
    col_ = 0;
    return s_.conn().check(sqlite3_step(s_.get()), s_.op()) == SQLITE_ROW;
  }
  void run() {
    while (next()) {
    }
  }
  // Makes the statement ready for the next row of a batch.
  void again() {
    sqlite3_reset(s_.get());
    bind_ = 0;
  }

  // Reading the current row, left to right.
  int64_t col_i64() { return sqlite3_column_int64(s_.get(), col_++); }
  uint64_t col_u64() { return static_cast<uint64_t>(col_i64()); }
  bool col_bool() { return col_i64() != 0; }
  double col_real() {
    const int c = col_++;
    if (sqlite3_column_type(s_.get(), c) == SQLITE_NULL) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    return sqlite3_column_double(s_.get(), c);
  }
  std::string col_text() {
    const int c = col_++;
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_.get(), c));
    const int n = sqlite3_column_bytes(s_.get(), c);  // after column_text, per the SQLite docs
    return p ? std::string(p, static_cast<size_t>(n)) : std::string();
  }
  int64_t col_id_or_invalid() {
    const int c = col_;
    if (sqlite3_column_type(s_.get(), c) == SQLITE_NULL) {
      ++col_;
      return -1;
    }
    return col_i64();
  }

 private:
  Query& bound(int rc) {
    s_.conn().check(rc, "bind " + s_.op());
    return *this;
  }
  Statement& s_;
  int bind_ = 0;
  int col_ = 0;
};

// BEGIN IMMEDIATE takes the write lock up front, so a second writer waits (busy_timeout) at the
// start instead of failing at its first write. Rolls back unless committed.
class Transaction {
 public:
  Transaction(const Connection& conn, std::string op) : conn_(conn), op_(std::move(op)) {
    conn_.exec("BEGIN IMMEDIATE", "begin " + op_);
  }
  ~Transaction() {
    // SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR): only roll back an
    // open transaction, and never throw from here.
    if (!committed_ && sqlite3_get_autocommit(conn_.get()) == 0) {
      sqlite3_exec(conn_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    conn_.exec("COMMIT", "commit " + op_);
    committed_ = true;
  }

 private:
  const Connection& conn_;
  std::string op_;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------------
// Schema and migrations.
//
// Each migration moves the schema from version `from` to `from + 1`. They are applied in order,
// together, inside one transaction, and the text of a released migration never changes: a file at
// version N is always the result of the same steps. Version 0 is an empty file.

void migrate_0_to_1(const Connection& c) {
  c.exec(R"sql(
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
  model               TEXT    NOT NULL,
  batch               INTEGER NOT NULL,
  seq                 INTEGER NOT NULL,
  dtype               TEXT    NOT NULL,
  seed                INTEGER NOT NULL,
  steps               INTEGER NOT NULL,
  warmup              INTEGER NOT NULL,
  optimizer           INTEGER NOT NULL,
  offload             INTEGER NOT NULL,
  min_offload_size    INTEGER NOT NULL,
  max_fwd_stash_size  INTEGER NOT NULL,
  max_fwd_stash_bytes INTEGER NOT NULL,
  prefetch            INTEGER NOT NULL,
  use_streams         INTEGER NOT NULL,
  use_pin_memory      INTEGER NOT NULL,
  link                TEXT    NOT NULL,
  started_unix_ns     INTEGER NOT NULL,
  finished_unix_ns    INTEGER NOT NULL,
  step_ms_median      REAL,
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
  final_loss          REAL
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
  model           TEXT    NOT NULL,
  batch           INTEGER NOT NULL,
  seq             INTEGER NOT NULL,
  dtype           TEXT    NOT NULL,
  seed            INTEGER NOT NULL,
  steps           INTEGER NOT NULL,
  warmup          INTEGER NOT NULL,
  optimizer       INTEGER NOT NULL,
  grid            TEXT    NOT NULL,
  created_unix_ns INTEGER NOT NULL
);

CREATE TABLE points (
  id                  INTEGER PRIMARY KEY,
  sweep               INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point_index         INTEGER NOT NULL,
  offload             INTEGER NOT NULL,
  min_offload_size    INTEGER NOT NULL,
  max_fwd_stash_size  INTEGER NOT NULL,
  max_fwd_stash_bytes INTEGER NOT NULL,
  prefetch            INTEGER NOT NULL,
  use_streams         INTEGER NOT NULL,
  use_pin_memory      INTEGER NOT NULL,
  link                TEXT    NOT NULL,
  status              TEXT    NOT NULL,
  error               TEXT    NOT NULL,
  run                 INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  step_ms_median      REAL,
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
  final_loss          REAL,
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

  Statement meta(c, "INSERT INTO meta (key, value) VALUES (?, ?)", "insert meta", false);
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
  c.exec(R"sql(
ALTER TABLE runs ADD COLUMN step_ms_ci_low REAL;
ALTER TABLE runs ADD COLUMN step_ms_ci_high REAL;
ALTER TABLE runs ADD COLUMN step_ms_ci_level REAL;
ALTER TABLE points ADD COLUMN step_ms_ci_low REAL;
ALTER TABLE points ADD COLUMN step_ms_ci_high REAL;
ALTER TABLE points ADD COLUMN step_ms_ci_level REAL;
ALTER TABLE runs ADD COLUMN semantics TEXT NOT NULL DEFAULT 'offtune';
ALTER TABLE points ADD COLUMN semantics TEXT NOT NULL DEFAULT 'offtune';
)sql",
         "migrate schema 2 -> 3");
}

// Schema 4: the engine variant each run and point was measured under (gradient checkpointing, what
// was offloaded, the tier copies went to); older rows get what there was then.
void migrate_3_to_4(const Connection& c) {
  c.exec(R"sql(
ALTER TABLE runs ADD COLUMN checkpoint TEXT NOT NULL DEFAULT 'none';
ALTER TABLE runs ADD COLUMN offload_set TEXT NOT NULL DEFAULT 'all';
ALTER TABLE runs ADD COLUMN tier TEXT NOT NULL DEFAULT 'host';
ALTER TABLE points ADD COLUMN checkpoint TEXT NOT NULL DEFAULT 'none';
ALTER TABLE points ADD COLUMN offload_set TEXT NOT NULL DEFAULT 'all';
ALTER TABLE points ADD COLUMN tier TEXT NOT NULL DEFAULT 'host';
)sql",
         "migrate schema 3 -> 4");
}

// Schema 5: layer offloading of frozen weights (each run's and point's) and the LoRA rank of the
// workload (each run's and sweep's); older rows had neither. And the what-if predictor's figures of
// each grid point of a predict-first sweep, by (sweep, point_index) like points, whether or not the
// point was then measured; older sweeps have none.
void migrate_4_to_5(const Connection& c) {
  c.exec(R"sql(
ALTER TABLE runs ADD COLUMN layer_offload TEXT NOT NULL DEFAULT 'off';
ALTER TABLE points ADD COLUMN layer_offload TEXT NOT NULL DEFAULT 'off';
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
  c.exec(R"sql(
ALTER TABLE runs ADD COLUMN verify INTEGER NOT NULL DEFAULT 0;
ALTER TABLE points ADD COLUMN verify INTEGER NOT NULL DEFAULT 0;
)sql",
         "migrate schema 5 -> 6");
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

struct Migration {
  int from;  // applies to a file at this version and leaves it at from + 1
  void (*apply)(const Connection&);
};
// In order; the last one ends at kSchemaVersion.
constexpr std::array<Migration, 7> kMigrations{{{0, &migrate_0_to_1},
                                                {1, &migrate_1_to_2},
                                                {2, &migrate_2_to_3},
                                                {3, &migrate_3_to_4},
                                                {4, &migrate_4_to_5},
                                                {5, &migrate_5_to_6},
                                                {6, &migrate_6_to_7}}};
static_assert(kMigrations.back().from + 1 == kSchemaVersion, "a migration must reach the schema");

// ---------------------------------------------------------------------------------------------------
// Opening: inspection of a file before it is trusted.

using detail::file_uri;

int64_t pragma_int(const Connection& c, const char* pragma) {
  Statement s(c, std::string("PRAGMA ") + pragma, pragma, false);
  Query q(s);
  return q.next() ? q.col_i64() : 0;
}

// What the file says it is, read from a connection.
struct Identity {
  int version = 0;     // PRAGMA user_version
  bool empty = false;  // no schema objects at all: a new file, version 0
};

// Throws unless the connection holds an empty database or an offtune store of a version this build
// can open; `writable` says whether the caller would migrate an older one.
Identity read_identity(const Connection& c, bool writable) {
  Identity id;
  const int64_t version = pragma_int(c, "user_version");
  const int64_t app_id = pragma_int(c, "application_id");
  int64_t objects = 0;
  bool has_meta = false;
  {
    Statement s(
        c, "SELECT count(*), coalesce(sum(type = 'table' AND name = 'meta'), 0) FROM sqlite_master",
        "read schema", false);
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
    Statement s(c, "SELECT value FROM meta WHERE key = 'app'", "read meta", false);
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

enum class FileState { Missing, Empty, Sqlite };

// Looks at the file itself before SQLite does: SQLite would happily treat some non-database files
// (e.g. an empty-looking one) as new databases and write to them.
FileState probe_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return FileState::Missing;
  if (fs::is_directory(st)) {
    throw StoreError(Kind::CannotOpen, path + ": open: is a directory, not a store file");
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw StoreError(Kind::CannotOpen, path + ": open: " + ec.message());
  if (size == 0) return FileState::Empty;

  static constexpr std::string_view kMagic{"SQLite format 3\0", 16};
  std::array<char, 16> head{};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StoreError(Kind::CannotOpen, path + ": open: cannot read the file");
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  // 100 bytes is the SQLite header; anything shorter cannot be a database.
  if (size < 100 || in.gcount() != static_cast<std::streamsize>(head.size()) ||
      std::string_view(head.data(), head.size()) != kMagic) {
    throw StoreError(Kind::NotADatabase,
                     path + " is not an offtune store (not an SQLite database)");
  }
  return FileState::Sqlite;
}

// The first problem of a quick_check report, without its "*** in database main ***" heading.
std::string first_problem(const std::string& report) {
  size_t pos = 0;
  while (pos < report.size()) {
    size_t end = report.find('\n', pos);
    if (end == std::string::npos) end = report.size();
    const std::string line = report.substr(pos, end - pos);
    if (!line.empty() && line.rfind("***", 0) != 0) return one_line(line);
    pos = end + 1;
  }
  return one_line(report);
}

// Checks an existing SQLite file through a connection that cannot write it. Without a -wal file
// nobody has the database open for writing, and immutable=1 reads the main file alone: SQLite then
// creates no -wal/-shm files, so a refused file leaves no trace. With a -wal file, a writer may be
// active or may have crashed; its committed frames matter, so a normal read-only connection reads
// them (the side files exist already).
Identity inspect_existing(const std::string& path, bool writable) {
  std::error_code ec;
  const bool has_wal = fs::exists(path + "-wal", ec);
  const std::string uri = file_uri(path) + (has_wal ? "?mode=ro" : "?immutable=1");
  try {
    Connection c(path, uri, SQLITE_OPEN_READONLY);
    {
      // quick_check(1): one problem is enough to refuse the file, and stops early on a bad one.
      Statement s(c, "PRAGMA quick_check(1)", "quick_check", false);
      Query q(s);
      if (q.next()) {
        const std::string verdict = q.col_text();
        if (verdict != "ok") {
          throw StoreError(Kind::Corrupt,
                           path + " is corrupt (quick_check: " + first_problem(verdict) + ")");
        }
      }
    }
    return read_identity(c, writable);
  } catch (const StoreError& e) {
    // SQLite's own wording for a damaged header is "file is not a database"; say what it means
    // here.
    if (e.kind() == Kind::NotADatabase) {
      throw StoreError(Kind::NotADatabase,
                       path + " is not an offtune store (not an SQLite database)");
    }
    throw;
  }
}

// Brings a writable connection's schema to kSchemaVersion. Inspects again under the write lock: the
// file may have changed since it was checked (another process migrated it, or created it).
void migrate(const Connection& c) {
  Transaction tx(c, "migrate schema");
  const Identity id = read_identity(c, true);
  const int start = id.empty ? 0 : id.version;
  if (start < kSchemaVersion) {
    for (const Migration& m : kMigrations) {
      if (m.from >= start) m.apply(c);
    }
    Statement s(c, "INSERT OR REPLACE INTO meta (key, value) VALUES ('writer_version', ?)",
                "update meta", false);
    Query q(s);
    q.text(std::string(kVersion)).run();
    c.exec("PRAGMA user_version = " + std::to_string(kSchemaVersion), "set schema version");
    c.exec("PRAGMA application_id = " + std::to_string(kApplicationId), "set application id");
  }
  tx.commit();
}

// A run's owner from the next columns of a row that LEFT JOINs run_owners: (present, host, pid,
// pid_start). Nothing when the run has no owner row (written before schema 2).
std::optional<Owner> read_owner(Query& q) {
  if (!q.col_bool()) {
    q.col_text();  // skip the NULL columns of the missing row
    q.col_i64();
    q.col_i64();
    return std::nullopt;
  }
  Owner owner;
  owner.host = q.col_text();
  owner.pid = q.col_i64();
  owner.start = q.col_i64();
  return owner;
}

// The error of a run that is `running` while its owner has ended. No owner: written before
// schema 2.
std::string interrupted_error(const std::optional<Owner>& owner) {
  if (!owner) return "interrupted: the process recording it ended (recorded by an older offtune)";
  return "interrupted: the process recording it ended (pid " + std::to_string(owner->pid) + " on " +
         owner->host + ")";
}

// On a writable open: the running runs of owners that ended become interrupted in the file, and
// their claims go (nobody is left to release them). One transaction, under the write lock, so that
// it sees every commit; an owner that ended cannot write again, so nothing it decides goes stale.
void interrupt_orphans(const Connection& c) {
  Transaction tx(c, "mark interrupted runs");
  std::vector<std::pair<int64_t, std::string>> ended;
  {
    Statement s(c,
                "SELECT r.id, o.run IS NOT NULL, coalesce(o.host, ''), coalesce(o.pid, 0), "
                "coalesce(o.pid_start, 0) FROM runs r LEFT JOIN run_owners o ON o.run = r.id "
                "WHERE r.status = ?",
                "read running runs", false);
    Query q(s);
    q.text(to_string(RunStatus::Running));
    while (q.next()) {
      const int64_t id = q.col_i64();
      const std::optional<Owner> owner = read_owner(q);
      if (!owner || !owner_alive(*owner)) ended.emplace_back(id, interrupted_error(owner));
    }
  }
  if (!ended.empty()) {
    Statement s(c, "UPDATE runs SET status = ?, error = ? WHERE id = ?", "mark run interrupted",
                false);
    for (const auto& [id, error] : ended) {
      Query q(s);
      q.text(to_string(RunStatus::Interrupted)).text(error).i64(id).run();
    }
  }
  std::vector<std::pair<int64_t, int64_t>> stale;
  {
    Statement s(c, "SELECT sweep, point_index, host, pid, pid_start FROM claims", "read claims",
                false);
    Query q(s);
    while (q.next()) {
      const int64_t sweep = q.col_i64();
      const int64_t index = q.col_i64();
      Owner holder;
      holder.host = q.col_text();
      holder.pid = q.col_i64();
      holder.start = q.col_i64();
      if (!owner_alive(holder)) stale.emplace_back(sweep, index);
    }
  }
  if (!stale.empty()) {
    Statement s(c, "DELETE FROM claims WHERE sweep = ? AND point_index = ?", "drop stale claim",
                false);
    for (const auto& [sweep, index] : stale) {
      Query q(s);
      q.i64(sweep).i64(index).run();
    }
  }
  tx.commit();
}

// Creates the store file, so that a failure later knows the file is this open's to remove: SQLite
// would create it as well, but would not say whether it did. false: it appeared meanwhile (another
// process is creating the same store), and is not ours.
bool create_store_file(const std::string& path) {
  // 0644: what SQLite itself creates files with (SQLITE_DEFAULT_FILE_PERMISSIONS), umask applied.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  const int err = errno;
  if (err == EEXIST) return false;
  const Kind kind = err == ENOSPC || err == EDQUOT ? Kind::Full : Kind::CannotOpen;
  throw StoreError(kind, path + ": open: " + std::generic_category().message(err));
}

// Removes a store file this process created and could not finish, with its side files. Kept when
// another process has meanwhile made a store of it (it holds schema objects) or is writing it now
// (its write lock is taken): then it is not ours alone any more.
// A file of 0 bytes holds nothing of anybody's and always goes (on a full disk even BEGIN fails,
// with SQLITE_FULL, not because somebody else writes).
void remove_unfinished_store(const std::string& path) noexcept {
  try {
    std::error_code size_ec;
    const bool empty = fs::file_size(path, size_ec) == 0 && !size_ec;
    bool keep = false;
    sqlite3* db = nullptr;
    if (!empty && sqlite3_open_v2(file_uri(path).c_str(), &db,
                                  SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, nullptr) == SQLITE_OK) {
      const int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
      if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
        keep = true;
      } else if (rc == SQLITE_OK) {
        sqlite3_stmt* stmt = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &stmt, nullptr) ==
                SQLITE_OK &&
            sqlite3_step(stmt) == SQLITE_ROW) {
          keep = sqlite3_column_int64(stmt, 0) != 0;
        }
        sqlite3_finalize(stmt);
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      }
    }
    sqlite3_close_v2(db);
    if (keep) return;
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ec);
  } catch (...) {
    // Tidying up must not hide the error that brought us here.
  }
}

// Closing the last connection of a WAL database checkpoints it and deletes -wal and -shm, but only
// a connection that may write does so: a read-only one leaves them behind. A brief writable
// connection that reads once (which opens the WAL) and closes is that last connection when nobody
// else has the store open, and SQLite then tidies up; with another connection open it is not, and
// the files stay with their owner. A file that cannot be written stays as it is.
//
// Only an empty -wal is folded: it holds no commit, so the checkpoint cannot change the store file
// (a read-only command never writes the store), and it is what readers leave. A -wal with frames
// is a writer's (live, or crashed: the next writer recovers it) and stays as it is.
bool wal_has_frames(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path + "-wal", ec);
  return !ec && size > 0;
}

void fold_side_files(const std::string& path) noexcept {
  try {
    std::error_code ec;
    if (!fs::exists(path + "-wal", ec) && !fs::exists(path + "-shm", ec)) return;
    if (wal_has_frames(path)) return;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file_uri(path).c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI,
                        nullptr) == SQLITE_OK &&
        sqlite3_db_readonly(db, "main") == 0) {
      sqlite3_busy_timeout(db, kBusyTimeoutMs);
      sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    }
    sqlite3_close_v2(db);
  } catch (...) {
    // Called from a destructor: side files left behind are untidy, not wrong.
  }
}

// ---------------------------------------------------------------------------------------------------
// Column lists, shared by inserts and selects so that the order of binds and reads is one list.

constexpr const char* kEnvCols =
    "env_offtune_version, env_torch_version, env_backend, env_device, env_git_revision, env_host";
constexpr int kEnvN = 6;
constexpr const char* kWorkloadCols =
    "model, batch, seq, dtype, seed, steps, warmup, optimizer, lora_rank";
constexpr int kWorkloadN = 9;
// What a read of a file older than schema 5 selects instead.
constexpr const char* kWorkloadColsBeforeLayers =
    "model, batch, seq, dtype, seed, steps, warmup, optimizer, 0";
constexpr const char* kConfigCols =
    "offload, min_offload_size, max_fwd_stash_size, max_fwd_stash_bytes, prefetch, use_streams, "
    "use_pin_memory, link, semantics, checkpoint, offload_set, tier, layer_offload, verify";
constexpr int kConfigN = 14;
// What a read of a file older than schema 6 selects instead.
constexpr const char* kConfigColsBeforeVerify =
    "offload, min_offload_size, max_fwd_stash_size, max_fwd_stash_bytes, prefetch, use_streams, "
    "use_pin_memory, link, semantics, checkpoint, offload_set, tier, layer_offload, 0";
// What a read of a file older than schema 5 selects instead.
constexpr const char* kConfigColsBeforeLayers =
    "offload, min_offload_size, max_fwd_stash_size, max_fwd_stash_bytes, prefetch, use_streams, "
    "use_pin_memory, link, semantics, checkpoint, offload_set, tier, 'off', 0";
// What a read of a file older than schema 4 selects instead.
constexpr const char* kConfigColsBeforeVariants =
    "offload, min_offload_size, max_fwd_stash_size, max_fwd_stash_bytes, prefetch, use_streams, "
    "use_pin_memory, link, semantics, 'none', 'all', 'host', 'off', 0";
// What a read of a file older than schema 3 selects instead.
constexpr const char* kConfigColsBeforeSemantics =
    "offload, min_offload_size, max_fwd_stash_size, max_fwd_stash_bytes, prefetch, use_streams, "
    "use_pin_memory, link, 'offtune', 'none', 'all', 'host', 'off', 0";
constexpr const char* kRankCols = "rank, world_size, job_run";
constexpr int kRankN = 3;
// What a read of a file older than schema 7 selects instead: a single process, its own job.
constexpr const char* kRankColsBeforeRanks = "0, 1, NULL";
constexpr const char* kSummaryCols =
    "step_ms_median, step_ms_min, step_ms_max, step_ms_stddev, peak_allocated, peak_reserved, "
    "host_bytes_peak, pinned_bytes, offloaded_bytes, reloaded_bytes, hidden_copy_pct, "
    "hidden_d2h_pct, hidden_h2d_pct, exposed_copy_ns, pageable_copies, final_loss, "
    "step_ms_ci_low, step_ms_ci_high, step_ms_ci_level";
constexpr int kSummaryN = 19;
// What a read of a file older than schema 3 selects instead (it has no interval columns).
constexpr const char* kSummaryColsBeforeCi =
    "step_ms_median, step_ms_min, step_ms_max, step_ms_stddev, peak_allocated, peak_reserved, "
    "host_bytes_peak, pinned_bytes, offloaded_bytes, reloaded_bytes, hidden_copy_pct, "
    "hidden_d2h_pct, hidden_h2d_pct, exposed_copy_ns, pageable_copies, final_loss, "
    "NULL, NULL, NULL";

std::string placeholders(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += i == 0 ? "?" : ", ?";
  return out;
}

std::vector<std::string> split_cols(std::string_view list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view col = list.substr(pos, end - pos);
    while (!col.empty() && col.front() == ' ') col.remove_prefix(1);
    while (!col.empty() && col.back() == ' ') col.remove_suffix(1);
    if (!col.empty()) out.emplace_back(col);
    pos = end + 1;
  }
  return out;
}

// "a = <rhs(a)>, b = <rhs(b)>" over a column list, for UPDATE and upsert statements.
template <typename Rhs>
std::string assignments(std::string_view list, Rhs rhs) {
  std::string out;
  for (const std::string& col : split_cols(list)) {
    if (!out.empty()) out += ", ";
    out += col + " = " + rhs(col);
  }
  return out;
}

void bind_env(Query& q, const Environment& e) {
  q.text(e.offtune_version).text(e.torch_version).text(e.backend).text(e.device);
  q.text(e.git_revision).text(e.host);
}
Environment read_env(Query& q) {
  Environment e;
  e.offtune_version = q.col_text();
  e.torch_version = q.col_text();
  e.backend = q.col_text();
  e.device = q.col_text();
  e.git_revision = q.col_text();
  e.host = q.col_text();
  return e;
}

void bind_workload(Query& q, const Workload& w) {
  q.text(w.model).i64(w.batch).i64(w.seq).text(w.dtype).u64(w.seed).i64(w.steps).i64(w.warmup);
  q.boolean(w.optimizer).i64(w.lora_rank);
}
Workload read_workload(Query& q) {
  Workload w;
  w.model = q.col_text();
  w.batch = q.col_i64();
  w.seq = q.col_i64();
  w.dtype = q.col_text();
  w.seed = q.col_u64();
  w.steps = q.col_i64();
  w.warmup = q.col_i64();
  w.optimizer = q.col_bool();
  w.lora_rank = q.col_i64();
  return w;
}

void bind_config(Query& q, const EngineConfig& c) {
  q.boolean(c.offload).i64(c.min_offload_size).i64(c.max_fwd_stash_size);
  q.i64(c.max_fwd_stash_bytes).i64(c.prefetch).boolean(c.use_streams).boolean(c.use_pin_memory);
  q.text(c.link).text(c.semantics).text(c.checkpoint).text(c.offload_set).text(c.tier);
  q.text(c.layer_offload).boolean(c.verify);
}
EngineConfig read_config(Query& q) {
  EngineConfig c;
  c.offload = q.col_bool();
  c.min_offload_size = q.col_i64();
  c.max_fwd_stash_size = q.col_i64();
  c.max_fwd_stash_bytes = q.col_i64();
  c.prefetch = q.col_i64();
  c.use_streams = q.col_bool();
  c.use_pin_memory = q.col_bool();
  c.link = q.col_text();
  c.semantics = q.col_text();
  c.checkpoint = q.col_text();
  c.offload_set = q.col_text();
  c.tier = q.col_text();
  c.layer_offload = q.col_text();
  c.verify = q.col_bool();
  return c;
}

void bind_summary(Query& q, const RunSummary& s) {
  q.real(s.step_ms_median).real(s.step_ms_min).real(s.step_ms_max).real(s.step_ms_stddev);
  q.i64(s.peak_allocated).i64(s.peak_reserved).i64(s.host_bytes_peak).i64(s.pinned_bytes);
  q.i64(s.offloaded_bytes).i64(s.reloaded_bytes);
  q.real(s.hidden_copy_pct).real(s.hidden_d2h_pct).real(s.hidden_h2d_pct);
  q.i64(s.exposed_copy_ns).i64(s.pageable_copies).real(s.final_loss);
  q.real(s.step_ms_ci_low).real(s.step_ms_ci_high).real(s.step_ms_ci_level);
}
RunSummary read_summary(Query& q) {
  RunSummary s;
  s.step_ms_median = q.col_real();
  s.step_ms_min = q.col_real();
  s.step_ms_max = q.col_real();
  s.step_ms_stddev = q.col_real();
  s.peak_allocated = q.col_i64();
  s.peak_reserved = q.col_i64();
  s.host_bytes_peak = q.col_i64();
  s.pinned_bytes = q.col_i64();
  s.offloaded_bytes = q.col_i64();
  s.reloaded_bytes = q.col_i64();
  s.hidden_copy_pct = q.col_real();
  s.hidden_d2h_pct = q.col_real();
  s.hidden_h2d_pct = q.col_real();
  s.exposed_copy_ns = q.col_i64();
  s.pageable_copies = q.col_i64();
  s.final_loss = q.col_real();
  const auto known_or_zero = [](double v) { return std::isnan(v) ? 0.0 : v; };
  s.step_ms_ci_low = known_or_zero(q.col_real());
  s.step_ms_ci_high = known_or_zero(q.col_real());
  s.step_ms_ci_level = known_or_zero(q.col_real());
  return s;
}

std::string cols(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) {
    if (!out.empty()) out += ", ";
    out += p;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------

class SqliteStore final : public Store {
 public:
  // `has_owners`: the file has schema 2's run_owners (a read-only open may read schema 1).
  // `schema`: the file's schema version (a read-only open reads older ones as they are).
  // `fold_side_files`: no -wal with frames was there before this (read-only) open.
  SqliteStore(std::unique_ptr<Connection> conn, bool read_only, bool has_owners, int schema,
              bool fold_side_files)
      : conn_(std::move(conn)),
        read_only_(read_only),
        has_owners_(has_owners),
        schema_(schema),
        fold_side_files_(fold_side_files) {}

  ~SqliteStore() override {
    if (!fold_side_files_) return;
    // Only once every statement and the connection are closed can a last connection fold them.
    const std::string path = conn_->path();
    cache_.clear();
    conn_.reset();
    fold_side_files(path);
  }
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  RunId begin_run(const RunRecord& run) override {
    std::lock_guard lock(mu_);
    writable("begin run");
    static const std::string sql =
        "INSERT INTO runs (" +
        cols({"status, error, label", kEnvCols, kWorkloadCols, kConfigCols,
              "started_unix_ns, finished_unix_ns", kSummaryCols, kRankCols}) +
        ") VALUES (" + placeholders(3 + kEnvN + kWorkloadN + kConfigN + 2 + kSummaryN + kRankN) +
        ")";
    // The run and its owner commit together: no moment when another process sees a running run
    // without the owner that tells whether it still runs.
    Transaction tx(*conn_, "insert run");
    {
      Query q(stmt(sql, "insert run"));
      q.text(to_string(run.status)).text(run.error).text(run.label);
      bind_env(q, run.env);
      bind_workload(q, run.workload);
      bind_config(q, run.config);
      q.i64(run.started_unix_ns).i64(run.finished_unix_ns);
      bind_summary(q, run.summary);
      q.i64(run.rank).i64(run.world_size).id_or_null(run.job_run ? run.job_run->value : -1);
      q.run();
    }
    const RunId id(sqlite3_last_insert_rowid(conn_->get()));
    {
      const Owner me = current_owner();
      Query q(stmt("INSERT INTO run_owners (run, host, pid, pid_start) VALUES (?, ?, ?, ?)",
                   "insert run owner"));
      q.i64(id.value).text(me.host).i64(me.pid).i64(me.start).run();
    }
    tx.commit();
    return id;
  }

  void finish_run(RunId id, RunStatus status, const std::string& error, const RunSummary& summary,
                  int64_t finished_unix_ns) override {
    std::lock_guard lock(mu_);
    writable("finish run");
    static const std::string sql =
        "UPDATE runs SET status = ?, error = ?, finished_unix_ns = ?, " +
        assignments(kSummaryCols, [](const std::string&) { return std::string("?"); }) +
        " WHERE id = ?";
    Query q(stmt(sql, "finish run"));
    q.text(to_string(status)).text(error).i64(finished_unix_ns);
    bind_summary(q, summary);
    q.i64(id.value).run();
    if (sqlite3_changes(conn_->get()) == 0) throw unknown("finish run", "run", id.value);
  }

  void describe_run(RunId id, const RunDescription& d) override {
    std::lock_guard lock(mu_);
    writable("describe run");
    static const std::string sql =
        "UPDATE runs SET " +
        assignments(cols({kEnvCols, kWorkloadCols, kRankCols}),
                    [](const std::string&) { return std::string("?"); }) +
        " WHERE id = ? AND status = 'running'";
    Query q(stmt(sql, "describe run"));
    bind_env(q, d.env);
    bind_workload(q, d.workload);
    q.i64(d.rank).i64(d.world_size).id_or_null(d.job_run ? d.job_run->value : -1);
    q.i64(id.value).run();
    if (sqlite3_changes(conn_->get()) == 0) {
      Query status(stmt("SELECT status FROM runs WHERE id = ?", "describe run"));
      status.i64(id.value);
      if (!status.next()) throw unknown("describe run", "run", id.value);
      throw StoreError(Kind::Invalid, conn_->path() + ": describe run: run " +
                                          std::to_string(id.value) + " is " + status.col_text() +
                                          ", not running: only a running run can be continued");
    }
  }

  std::optional<RunRecord> run(RunId id) override {
    std::lock_guard lock(mu_);
    Query q(stmt(select_runs() + " WHERE runs.id = ?", "read run"));
    q.i64(id.value);
    if (!q.next()) return std::nullopt;
    return read_run(q);
  }

  std::vector<RunRecord> runs() override {
    std::lock_guard lock(mu_);
    Query q(stmt(select_runs() + " ORDER BY runs.id", "read runs"));
    std::vector<RunRecord> out;
    while (q.next()) out.push_back(read_run(q));
    return out;
  }

  void add_steps(const std::vector<StepRecord>& steps) override {
    std::lock_guard lock(mu_);
    writable("add steps");
    if (steps.empty()) return;
    Transaction tx(*conn_, "add steps");
    Query q(
        stmt("INSERT INTO steps (run, step, begin_ns, end_ns, peak_allocated, peak_reserved, "
             "offloaded_bytes, reloaded_bytes, hidden_copy_pct, exposed_copy_ns, loss) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             "insert steps"));
    for (const StepRecord& s : steps) {
      q.again();
      q.i64(s.run.value).i64(s.step).i64(s.begin_ns).i64(s.end_ns).i64(s.peak_allocated);
      q.i64(s.peak_reserved).i64(s.offloaded_bytes).i64(s.reloaded_bytes).real(s.hidden_copy_pct);
      q.i64(s.exposed_copy_ns).real(s.loss).run();
    }
    tx.commit();
  }

  void add_events(const std::vector<TimelineEvent>& events) override {
    std::lock_guard lock(mu_);
    writable("add events");
    if (events.empty()) return;
    Transaction tx(*conn_, "add events");
    Query q(stmt(
        "INSERT INTO events (run, kind, start_ns, end_ns, stream, bytes, tensor, pinned, prefetch, "
        "name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "insert events"));
    for (const TimelineEvent& e : events) {
      q.again();
      q.i64(e.run.value).text(to_string(e.kind)).i64(e.start_ns).i64(e.end_ns).i64(e.stream);
      q.i64(e.bytes).i64(e.tensor).boolean(e.pinned).boolean(e.prefetch).text(e.name).run();
    }
    tx.commit();
  }

  void add_occupancy(const std::vector<OccupancySample>& samples) override {
    std::lock_guard lock(mu_);
    writable("add occupancy");
    if (samples.empty()) return;
    Transaction tx(*conn_, "add occupancy");
    Query q(
        stmt("INSERT INTO occupancy (run, time_ns, fwd_count, fwd_bytes, bwd_count, bwd_bytes, "
             "device_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)",
             "insert occupancy"));
    for (const OccupancySample& o : samples) {
      q.again();
      q.i64(o.run.value).i64(o.time_ns).i64(o.fwd_count).i64(o.fwd_bytes).i64(o.bwd_count);
      q.i64(o.bwd_bytes).i64(o.device_bytes).run();
    }
    tx.commit();
  }

  std::vector<StepRecord> steps(RunId run) override {
    std::lock_guard lock(mu_);
    Query q(
        stmt("SELECT run, step, begin_ns, end_ns, peak_allocated, peak_reserved, offloaded_bytes, "
             "reloaded_bytes, hidden_copy_pct, exposed_copy_ns, loss FROM steps WHERE run = ? "
             "ORDER BY step",
             "read steps"));
    q.i64(run.value);
    std::vector<StepRecord> out;
    while (q.next()) {
      StepRecord s;
      s.run = RunId(q.col_i64());
      s.step = q.col_i64();
      s.begin_ns = q.col_i64();
      s.end_ns = q.col_i64();
      s.peak_allocated = q.col_i64();
      s.peak_reserved = q.col_i64();
      s.offloaded_bytes = q.col_i64();
      s.reloaded_bytes = q.col_i64();
      s.hidden_copy_pct = q.col_real();
      s.exposed_copy_ns = q.col_i64();
      s.loss = q.col_real();
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<TimelineEvent> events(RunId run) override {
    std::lock_guard lock(mu_);
    Query q(stmt(
        "SELECT id, run, kind, start_ns, end_ns, stream, bytes, tensor, pinned, prefetch, name "
        "FROM events WHERE run = ? ORDER BY start_ns, id",
        "read events"));
    q.i64(run.value);
    std::vector<TimelineEvent> out;
    while (q.next()) {
      const int64_t row = q.col_i64();
      TimelineEvent e;
      e.run = RunId(q.col_i64());
      e.kind = parse_enum(&parse_event_kind, q.col_text(), "events", row);
      e.start_ns = q.col_i64();
      e.end_ns = q.col_i64();
      e.stream = q.col_i64();
      e.bytes = q.col_i64();
      e.tensor = q.col_i64();
      e.pinned = q.col_bool();
      e.prefetch = q.col_bool();
      e.name = q.col_text();
      out.push_back(std::move(e));
    }
    return out;
  }

  std::vector<OccupancySample> occupancy(RunId run) override {
    std::lock_guard lock(mu_);
    Query q(
        stmt("SELECT run, time_ns, fwd_count, fwd_bytes, bwd_count, bwd_bytes, device_bytes "
             "FROM occupancy WHERE run = ? ORDER BY time_ns, id",
             "read occupancy"));
    q.i64(run.value);
    std::vector<OccupancySample> out;
    while (q.next()) {
      OccupancySample o;
      o.run = RunId(q.col_i64());
      o.time_ns = q.col_i64();
      o.fwd_count = q.col_i64();
      o.fwd_bytes = q.col_i64();
      o.bwd_count = q.col_i64();
      o.bwd_bytes = q.col_i64();
      o.device_bytes = q.col_i64();
      out.push_back(o);
    }
    return out;
  }

  SweepId create_sweep(const SweepRecord& sweep) override {
    std::lock_guard lock(mu_);
    writable("create sweep");
    static const std::string sql =
        "INSERT INTO sweeps (" + cols({"name, key", kWorkloadCols, "grid, created_unix_ns"}) +
        ") VALUES (" + placeholders(2 + kWorkloadN + 2) + ") ON CONFLICT (key) DO NOTHING";
    // Find or create under the write lock: two processes starting the same sweep get one row and
    // one id, where a find_sweep then create_sweep pair would let both insert and one fail.
    Transaction tx(*conn_, "create sweep");
    {
      Query q(stmt(sql, "insert sweep"));
      q.text(sweep.name).text(sweep.key);
      bind_workload(q, sweep.workload);
      q.text(sweep.grid).i64(sweep.created_unix_ns).run();
    }
    SweepId id;
    {
      Query q(stmt("SELECT id FROM sweeps WHERE key = ?", "read sweep id"));
      q.text(sweep.key);
      if (q.next()) id = SweepId(q.col_i64());
    }
    tx.commit();
    return id;
  }

  std::optional<SweepRecord> find_sweep(const std::string& key) override {
    std::lock_guard lock(mu_);
    Query q(stmt(select_sweeps() + " WHERE key = ?", "find sweep"));
    q.text(key);
    if (!q.next()) return std::nullopt;
    return read_sweep(q);
  }

  std::optional<SweepRecord> sweep(SweepId id) override {
    std::lock_guard lock(mu_);
    Query q(stmt(select_sweeps() + " WHERE id = ?", "read sweep"));
    q.i64(id.value);
    if (!q.next()) return std::nullopt;
    return read_sweep(q);
  }

  std::vector<SweepRecord> sweeps() override {
    std::lock_guard lock(mu_);
    Query q(stmt(select_sweeps() + " ORDER BY id", "read sweeps"));
    std::vector<SweepRecord> out;
    while (q.next()) out.push_back(read_sweep(q));
    return out;
  }

  PointId put_point(const PointRecord& point) override {
    std::lock_guard lock(mu_);
    writable("put point");
    static const std::string value_cols = cols({kConfigCols, "status, error, run", kSummaryCols});
    static const std::string sql =
        "INSERT INTO points (sweep, point_index, " + value_cols + ") VALUES (" +
        placeholders(2 + kConfigN + 3 + kSummaryN) +
        ") ON CONFLICT (sweep, point_index) DO UPDATE SET " +
        assignments(value_cols, [](const std::string& col) { return "excluded." + col; });
    // The upsert keeps the row (and its id) of an existing point; the id is read back in the same
    // transaction because last_insert_rowid is not set by the update branch.
    Transaction tx(*conn_, "put point");
    {
      Query q(stmt(sql, "upsert point"));
      q.i64(point.sweep.value).i64(point.index);
      bind_config(q, point.config);
      q.text(to_string(point.status)).text(point.error).id_or_null(point.run.value);
      bind_summary(q, point.summary);
      q.run();
    }
    PointId id;
    {
      Query q(stmt("SELECT id FROM points WHERE sweep = ? AND point_index = ?", "read point id"));
      q.i64(point.sweep.value).i64(point.index);
      if (q.next()) id = PointId(q.col_i64());
    }
    tx.commit();
    return id;
  }

  std::vector<PointRecord> points(SweepId sweep) override {
    std::lock_guard lock(mu_);
    const std::string sql = "SELECT id, sweep, point_index, " +
                            cols({config_read_cols(), "status, error, run", summary_read_cols()}) +
                            " FROM points WHERE sweep = ? ORDER BY point_index";
    Query q(stmt(sql, "read points"));
    q.i64(sweep.value);
    std::vector<PointRecord> out;
    while (q.next()) {
      PointRecord p;
      p.id = PointId(q.col_i64());
      p.sweep = SweepId(q.col_i64());
      p.index = q.col_i64();
      p.config = read_config(q);
      p.status = parse_enum(&parse_point_status, q.col_text(), "points", p.id.value);
      p.error = q.col_text();
      p.run = RunId(q.col_id_or_invalid());
      p.summary = read_summary(q);
      out.push_back(std::move(p));
    }
    return out;
  }

  Claim claim_point(SweepId sweep, int64_t index) override {
    std::lock_guard lock(mu_);
    writable("claim point");
    const Owner me = current_owner();
    // The write lock from the first read: the point's state and its claim cannot change between
    // the look and the claim.
    Transaction tx(*conn_, "claim point");
    {
      Query q(stmt("SELECT id, status FROM points WHERE sweep = ? AND point_index = ?",
                   "read point status"));
      q.i64(sweep.value).i64(index);
      if (q.next()) {
        const int64_t row = q.col_i64();
        if (parse_enum(&parse_point_status, q.col_text(), "points", row) != PointStatus::Pending) {
          return {ClaimStatus::Finished, Owner{}};
        }
      }
    }
    {
      Query q(stmt("SELECT host, pid, pid_start FROM claims WHERE sweep = ? AND point_index = ?",
                   "read claim"));
      q.i64(sweep.value).i64(index);
      if (q.next()) {
        Owner holder;
        holder.host = q.col_text();
        holder.pid = q.col_i64();
        holder.start = q.col_i64();
        if (holder != me && owner_alive(holder)) return {ClaimStatus::Taken, holder};
      }
    }
    {
      Query q(
          stmt("INSERT INTO claims (sweep, point_index, host, pid, pid_start, claimed_unix_ns) "
               "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sweep, point_index) DO UPDATE SET "
               "host = excluded.host, pid = excluded.pid, pid_start = excluded.pid_start, "
               "claimed_unix_ns = excluded.claimed_unix_ns",
               "insert claim"));
      q.i64(sweep.value).i64(index).text(me.host).i64(me.pid).i64(me.start).i64(now_unix_ns());
      q.run();
    }
    tx.commit();
    return {ClaimStatus::Claimed, me};
  }

  void release_point(SweepId sweep, int64_t index) override {
    std::lock_guard lock(mu_);
    writable("release point");
    const Owner me = current_owner();
    Query q(
        stmt("DELETE FROM claims WHERE sweep = ? AND point_index = ? AND host = ? AND pid = ? "
             "AND pid_start = ?",
             "release claim"));
    q.i64(sweep.value).i64(index).text(me.host).i64(me.pid).i64(me.start).run();
  }

  void add_recommendation(const RecommendationRecord& rec) override {
    std::lock_guard lock(mu_);
    writable("add recommendation");
    Query q(
        stmt("INSERT INTO recommendations (sweep, constraint_spec, point_index, rationale, "
             "snippets_json, created_unix_ns) VALUES (?, ?, ?, ?, ?, ?)",
             "insert recommendation"));
    q.i64(rec.sweep.value).text(rec.constraint).i64(rec.point_index).text(rec.rationale);
    q.text(rec.snippets_json).i64(rec.created_unix_ns).run();
  }

  std::vector<RecommendationRecord> recommendations(SweepId sweep) override {
    std::lock_guard lock(mu_);
    Query q(stmt(
        "SELECT sweep, constraint_spec, point_index, rationale, snippets_json, created_unix_ns "
        "FROM recommendations WHERE sweep = ? ORDER BY id",
        "read recommendations"));
    q.i64(sweep.value);
    std::vector<RecommendationRecord> out;
    while (q.next()) {
      RecommendationRecord r;
      r.sweep = SweepId(q.col_i64());
      r.constraint = q.col_text();
      r.point_index = q.col_i64();
      r.rationale = q.col_text();
      r.snippets_json = q.col_text();
      r.created_unix_ns = q.col_i64();
      out.push_back(std::move(r));
    }
    return out;
  }

  void put_predictions(const std::vector<PointPrediction>& predictions) override {
    std::lock_guard lock(mu_);
    writable("put predictions");
    if (predictions.empty()) return;
    // All or nothing: a refused row (an unknown sweep) rolls back the rows before it.
    Transaction tx(*conn_, "put predictions");
    for (const PointPrediction& p : predictions) {
      Query q(stmt(
          "INSERT INTO predictions (sweep, point_index, step_ns, peak_allocated, hidden_copy_pct, "
          "offloaded_bytes, predictor, created_unix_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (sweep, point_index) DO UPDATE SET step_ns = excluded.step_ns, "
          "peak_allocated = excluded.peak_allocated, hidden_copy_pct = excluded.hidden_copy_pct, "
          "offloaded_bytes = excluded.offloaded_bytes, predictor = excluded.predictor, "
          "created_unix_ns = excluded.created_unix_ns",
          "upsert prediction"));
      q.i64(p.sweep.value).i64(p.index).i64(p.step_ns).i64(p.peak_allocated);
      q.real(p.hidden_copy_pct).i64(p.offloaded_bytes).text(p.predictor).i64(p.created_unix_ns);
      q.run();
    }
    tx.commit();
  }

  std::vector<PointPrediction> predictions(SweepId sweep) override {
    std::lock_guard lock(mu_);
    // An older file opened read-only (never migrated) has no table: no predictions. Nor has a file
    // written at schema 5 before the table was part of it (schema 5 was not released then): it
    // reads as a store without predictions rather than failing every sweep it holds.
    if (schema_ < kPredictionSchema) return {};
    if (!has_predictions_table_) {
      Query t(
          stmt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
               "name = 'predictions'",
               "look for the predictions table"));
      has_predictions_table_ = t.next() && t.col_i64() > 0;
    }
    if (!*has_predictions_table_) return {};
    Query q(
        stmt("SELECT sweep, point_index, step_ns, peak_allocated, hidden_copy_pct, "
             "offloaded_bytes, predictor, created_unix_ns FROM predictions WHERE sweep = ? "
             "ORDER BY point_index",
             "read predictions"));
    q.i64(sweep.value);
    std::vector<PointPrediction> out;
    while (q.next()) {
      PointPrediction p;
      p.sweep = SweepId(q.col_i64());
      p.index = q.col_i64();
      p.step_ns = q.col_i64();
      p.peak_allocated = q.col_i64();
      p.hidden_copy_pct = q.col_real();
      p.offloaded_bytes = q.col_i64();
      p.predictor = q.col_text();
      p.created_unix_ns = q.col_i64();
      out.push_back(std::move(p));
    }
    return out;
  }

  std::string path() const override { return conn_->path(); }

 private:
  // Statements are prepared once per store and kept (SQLITE_PREPARE_PERSISTENT): a recorder calls
  // add_events thousands of times.
  Statement& stmt(const std::string& sql, const char* op) {
    auto it = cache_.find(sql);
    if (it == cache_.end()) {
      it = cache_.emplace(sql, std::make_unique<Statement>(*conn_, sql, op, true)).first;
    }
    return *it->second;
  }

  void writable(const char* op) const {
    if (read_only_) {
      throw StoreError(Kind::Invalid, conn_->path() + ": " + op + ": the store is open read-only");
    }
  }

  StoreError unknown(const char* op, const char* what, int64_t id) const {
    return StoreError(Kind::Invalid, conn_->path() + ": " + op + ": unknown " + what + " id " +
                                         std::to_string(id));
  }

  // A stored enum name this build does not know: the file was edited by hand (a newer writer would
  // have raised the schema version).
  template <typename E>
  E parse_enum(E (*parse)(const std::string&), const std::string& text, const char* table,
               int64_t row) const {
    try {
      return parse(text);
    } catch (const std::invalid_argument& e) {
      throw StoreError(Kind::Invalid, conn_->path() + ": read " + table + " row " +
                                          std::to_string(row) + ": " + e.what());
    }
  }

  // The run columns, then its owner: present, host, pid, start. A schema 1 file has no owners.
  const std::string& select_runs() const {
    if (select_runs_.empty()) {
      const std::string run_cols =
          "runs.id, " +
          cols({"status, error, label", kEnvCols, workload_read_cols(), config_read_cols(),
                "started_unix_ns, finished_unix_ns", summary_read_cols(), rank_read_cols()});
      select_runs_ = has_owners_ ? "SELECT " + run_cols +
                                       ", o.run IS NOT NULL, coalesce(o.host, ''), "
                                       "coalesce(o.pid, 0), coalesce(o.pid_start, 0) FROM runs "
                                       "LEFT JOIN run_owners o ON o.run = runs.id"
                                 : "SELECT " + run_cols + ", 0, '', 0, 0 FROM runs";
    }
    return select_runs_;
  }
  // A running run whose owner ended reads as interrupted, also where the file still says running: a
  // read-only open never writes, and a writable one may outlive the owner.
  RunRecord read_run(Query& q) const {
    RunRecord r;
    r.id = RunId(q.col_i64());
    r.status = parse_enum(&parse_run_status, q.col_text(), "runs", r.id.value);
    r.error = q.col_text();
    r.label = q.col_text();
    r.env = read_env(q);
    r.workload = read_workload(q);
    r.config = read_config(q);
    r.started_unix_ns = q.col_i64();
    r.finished_unix_ns = q.col_i64();
    r.summary = read_summary(q);
    r.rank = q.col_i64();
    r.world_size = q.col_i64();
    if (const int64_t job = q.col_id_or_invalid(); job >= 0) r.job_run = RunId(job);
    const std::optional<Owner> owner = read_owner(q);
    if (r.status == RunStatus::Running && (!owner || !owner_alive(*owner))) {
      r.status = RunStatus::Interrupted;
      r.error = interrupted_error(owner);
    }
    return r;
  }

  std::string select_sweeps() const {
    return "SELECT id, " + cols({"name, key", workload_read_cols(), "grid, created_unix_ns"}) +
           " FROM sweeps";
  }
  static SweepRecord read_sweep(Query& q) {
    SweepRecord s;
    s.id = SweepId(q.col_i64());
    s.name = q.col_text();
    s.key = q.col_text();
    s.workload = read_workload(q);
    s.grid = q.col_text();
    s.created_unix_ns = q.col_i64();
    return s;
  }

  std::mutex mu_;  // one connection, and the statement cache, used by one thread at a time
  std::unique_ptr<Connection> conn_;
  // Declared after conn_: statements are finalized before the connection closes.
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;
  // The summary columns a select reads: an older file's read-only open has no interval columns.
  const char* summary_read_cols() const {
    return schema_ >= kCiSchema ? kSummaryCols : kSummaryColsBeforeCi;
  }
  const char* rank_read_cols() const {
    return schema_ >= kRanksSchema ? kRankCols : kRankColsBeforeRanks;
  }
  const char* workload_read_cols() const {
    return schema_ >= kLayerSchema ? kWorkloadCols : kWorkloadColsBeforeLayers;
  }
  const char* config_read_cols() const {
    if (schema_ >= kVerifySchema) return kConfigCols;
    if (schema_ >= kLayerSchema) return kConfigColsBeforeVerify;
    if (schema_ >= kVariantSchema) return kConfigColsBeforeLayers;
    return schema_ >= kCiSchema ? kConfigColsBeforeVariants : kConfigColsBeforeSemantics;
  }

  bool read_only_;
  bool has_owners_;
  int schema_;
  bool fold_side_files_;
  mutable std::string select_runs_;            // built once, for this file's schema
  std::optional<bool> has_predictions_table_;  // looked up on the first read of predictions
};

}  // namespace

int store_schema_version() { return kSchemaVersion; }

Owner current_owner() {
  Owner me;
  me.host = host_name();
  me.pid = getpid();  // not cached: a forked child is another owner
  if (const auto st = proc_stat(me.pid)) me.start = st->start;
  return me;
}

bool owner_alive(const Owner& owner) {
  // A pid means nothing on another host, and nothing there can be asked: assume it runs.
  if (owner.host != host_name()) return true;
  if (owner.pid <= 0) return false;
  if (!have_procfs()) {
    // EPERM: the process exists but belongs to someone else.
    return ::kill(static_cast<pid_t>(owner.pid), 0) == 0 || errno == EPERM;
  }
  const auto st = proc_stat(owner.pid);
  // A zombie has ended; only its parent has not reaped it yet.
  if (!st || st->state == 'Z' || st->state == 'X') return false;
  return owner.start == 0 || st->start == owner.start;
}

Claim Store::claim_point(SweepId, int64_t) {
  throw StoreError(Kind::Invalid, "claim point: this store cannot coordinate sweeps");
}

void Store::release_point(SweepId, int64_t) {
  throw StoreError(Kind::Invalid, "release point: this store cannot coordinate sweeps");
}

void Store::put_predictions(const std::vector<PointPrediction>&) {
  throw StoreError(Kind::Invalid, "put predictions: this store keeps no predictions");
}

std::vector<PointPrediction> Store::predictions(SweepId) { return {}; }

void Store::describe_run(RunId, const RunDescription&) {
  throw StoreError(Kind::Invalid, "describe run: this store cannot continue a run");
}

namespace {

// Switches the file to WAL (a no-op when it is already). The switch needs an exclusive lock, and
// SQLite answers SQLITE_BUSY at once instead of calling the busy handler when another connection
// holds a lock (two processes creating the same store at the same moment: the second failed with
// "database is locked"), so it is retried here for as long as the busy timeout would wait.
void set_wal(const Connection& c) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    const int rc = sqlite3_exec(c.get(), "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
      c.check(rc, "set journal mode");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, 1 + attempt * 5)));
  }
}

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& path) {
  // Everything that can refuse the file runs before the first write.
  FileState state = probe_file(path);
  bool created = false;
  if (state == FileState::Missing) {
    created = create_store_file(path);
    // Not created: another process made it just now; it is an existing file like any other.
    state = created ? FileState::Empty : probe_file(path);
  }
  if (state == FileState::Sqlite) inspect_existing(path, true);

  std::unique_ptr<Connection> conn;
  try {
    conn = std::make_unique<Connection>(path, file_uri(path),
                                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // SQLite silently falls back to read-only when the file or directory is not writable.
    if (sqlite3_db_readonly(conn->get(), "main") == 1) {
      throw StoreError(Kind::CannotOpen, path + ": open: the file is not writable");
    }
    // WAL: readers (the GUI, `offtune report`) do not block the recorder, and a crash loses at
    // most the open transaction. synchronous=NORMAL is durable against process crashes in WAL
    // mode, which is what a profiler needs; a power loss may drop the last commits, never corrupt.
    set_wal(*conn);
    conn->exec("PRAGMA synchronous = NORMAL", "set synchronous");
    conn->exec("PRAGMA foreign_keys = ON", "enable foreign keys");
    migrate(*conn);
    interrupt_orphans(*conn);
    return std::make_unique<SqliteStore>(std::move(conn), false, true, kSchemaVersion, false);
  } catch (...) {
    // A store this call began and could not finish (a full disk) would be left as an empty file
    // that later reads as "an empty SQLite database, not an offtune store yet".
    if (created) {
      conn.reset();
      remove_unfinished_store(path);
    }
    throw;
  }
}

std::unique_ptr<Store> open_sqlite_store_readonly(const std::string& path) {
  // A -wal with frames belongs to a writer (or a crashed one) and stays. Empty side files are what
  // readers leave, this open's or another reader's (the dashboard reads on two threads at once):
  // they are folded away when the store is destroyed, by whichever reader closes last.
  std::error_code ec;
  const bool side_files_before = wal_has_frames(path);
  const FileState state = probe_file(path);
  if (state == FileState::Missing) {
    throw StoreError(Kind::CannotOpen, path + ": open read-only: no such file");
  }
  if (state == FileState::Empty) {
    throw StoreError(Kind::Invalid, path + " is empty, not an offtune store yet");
  }
  if (inspect_existing(path, false).empty) {
    throw StoreError(Kind::Invalid,
                     path + " is an empty SQLite database, not an offtune store yet");
  }
  // The file may have changed hands between the inspection and this open: the identity is read
  // again through the connection that will be used.
  std::unique_ptr<Connection> conn;
  try {
    Identity id;
    try {
      conn = std::make_unique<Connection>(path, file_uri(path), SQLITE_OPEN_READONLY);
      id = read_identity(*conn, false);
    } catch (const StoreError& e) {
      // A WAL database without -shm/-wal in a directory this process cannot write: SQLite cannot
      // set up its shared index. Nobody can be writing the file either (a writer needs that
      // directory), so reading it as immutable is safe.
      // SQLite reports it as "attempt to write a readonly database" (Io) or as CannotOpen.
      const bool setup_failed = e.kind() == Kind::Io || e.kind() == Kind::CannotOpen;
      if (!setup_failed || fs::exists(path + "-wal", ec)) throw;
      conn =
          std::make_unique<Connection>(path, file_uri(path) + "?immutable=1", SQLITE_OPEN_READONLY);
      id = read_identity(*conn, false);
    }
    if (id.empty) {
      throw StoreError(Kind::Invalid,
                       path + " is an empty SQLite database, not an offtune store yet");
    }
    return std::make_unique<SqliteStore>(std::move(conn), true, id.version >= kOwnersSchema,
                                         id.version, !side_files_before);
  } catch (...) {
    conn.reset();
    if (!side_files_before) fold_side_files(path);
    throw;
  }
}

std::string detail::file_uri(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "file:";
  // An empty authority keeps a name that starts with "//" from being read as a host.
  if (!path.empty() && path.front() == '/') out += "//";
  for (const unsigned char c : path) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '/' || c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

}  // namespace offtune::profiler
