// The SQLite store: one file, a versioned schema (PRAGMA user_version) moved forward by an ordered
// list of migrations, WAL journaling, and one transaction per batched write. This file is the
// Store implementation and the two ways to open one; its parts live beside it:
//   sqlite_db      the SQLite seam: connection, statements, transactions, errors
//   sqlite_schema  schema versions, migrations, the identity check
//   sqlite_file    the file before and after SQLite has it: inspection, creation, tidying up
//   sqlite_rows    row mapping: one column list per record type
//   owners         which process owns a run or a claim, and whether it still runs
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
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "offtune/profiler/store.hpp"
#include "owners.hpp"
#include "sqlite_db.hpp"
#include "sqlite_file.hpp"
#include "sqlite_rows.hpp"
#include "sqlite_schema.hpp"

namespace offtune::profiler {
namespace {

namespace fs = std::filesystem;
using Kind = StoreError::Kind;
using namespace detail;  // the store's parts

// "INSERT INTO table (a, b) VALUES (?, ?)" over column lists.
template <typename... R>
std::string insert_sql(std::string_view table, const Columns<R>&... cols) {
  std::string list;
  size_t n = 0;
  ((list += (list.empty() ? "" : ", ") + names(cols), n += cols.size()), ...);
  return "INSERT INTO " + std::string(table) + " (" + list + ") VALUES (" + placeholders(n) + ")";
}

template <typename T>
std::optional<T> first(std::vector<T> rows) {
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

// Reads a row that is exactly `cols`.
template <typename R>
std::function<R(Query&)> reader(const Columns<R>& cols) {
  return [&cols](Query& q) {
    R r;
    read_row(q, cols, r);
    return r;
  };
}

SweepRecord read_sweep(Query& q) {
  SweepRecord s;
  s.id = SweepId(q.col_i64());
  read_row(q, sweep_columns(), s);
  return s;
}

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
    static const std::string sql = insert_sql("runs", run_columns());
    static const std::string owner_sql = "INSERT INTO run_owners (run, " + names(owner_columns()) +
                                         ") VALUES (?, " + placeholders(owner_columns().size()) +
                                         ")";
    // The run and its owner commit together: no moment when another process sees a running run
    // without the owner that tells whether it still runs.
    Transaction tx(*conn_, "insert run");
    {
      Query q(stmt(sql, "insert run"));
      bind_row(q, run_columns(), run);
      q.run();
    }
    const RunId id(conn_->last_insert_rowid());
    {
      Query q(stmt(owner_sql, "insert run owner"));
      q.i64(id.value);
      bind_row(q, owner_columns(), current_owner());
      q.run();
    }
    tx.commit();
    return id;
  }

  void finish_run(RunId id, RunStatus status, const std::string& error, const RunSummary& summary,
                  int64_t finished_unix_ns) override {
    std::lock_guard lock(mu_);
    writable("finish run");
    static const std::string sql = "UPDATE runs SET status = ?, error = ?, finished_unix_ns = ?, " +
                                   set_params(summary_columns()) + " WHERE id = ?";
    Query q(stmt(sql, "finish run"));
    q.text(to_string(status)).text(error).i64(finished_unix_ns);
    bind_row(q, summary_columns(), summary);
    q.i64(id.value).run();
    if (conn_->changes() == 0) throw unknown("finish run", "run", id.value);
  }

  void describe_run(RunId id, const RunDescription& d) override {
    std::lock_guard lock(mu_);
    writable("describe run");
    static const std::string sql = "UPDATE runs SET " + set_params(description_columns()) +
                                   " WHERE id = ? AND status = 'running'";
    Query q(stmt(sql, "describe run"));
    bind_row(q, description_columns(), d);
    q.i64(id.value).run();
    if (conn_->changes() == 0) {
      Query status(stmt("SELECT status FROM runs WHERE id = ?", "describe run"));
      status.i64(id.value);
      if (!status.next()) throw unknown("describe run", "run", id.value);
      throw StoreError(Kind::Invalid, conn_->path() + ": describe run: run " +
                                          std::to_string(id.value) + " is " + status.col_text() +
                                          ", not running: only a running run can be continued");
    }
  }

  std::optional<RunRecord> run(RunId id) override {
    return first(
        read_rows(select_runs_ + " WHERE runs.id = ?", "read run", id.value, run_reader()));
  }

  std::vector<RunRecord> runs() override {
    return read_rows(select_runs_ + " ORDER BY runs.id", "read runs", std::nullopt, run_reader());
  }

  void add_steps(const std::vector<StepRecord>& steps) override {
    add_rows("steps", step_columns(), steps);
  }
  void add_events(const std::vector<TimelineEvent>& events) override {
    add_rows("events", event_columns(), events);
  }
  void add_occupancy(const std::vector<OccupancySample>& samples) override {
    add_rows("occupancy", occupancy_columns(), samples);
  }

  std::vector<StepRecord> steps(RunId run) override {
    static const std::string sql =
        "SELECT " + names(step_columns()) + " FROM steps WHERE run = ? ORDER BY step";
    return read_rows(sql, "read steps", run.value, reader(step_columns()));
  }

  std::vector<TimelineEvent> events(RunId run) override {
    static const std::string sql =
        "SELECT id, " + names(event_columns()) + " FROM events WHERE run = ? ORDER BY start_ns, id";
    return read_rows(sql, "read events", run.value, [this](Query& q) {
      TimelineEvent e;
      const int64_t row = q.col_i64();
      read_checked(q, event_columns(), e, "events", row);
      return e;
    });
  }

  std::vector<OccupancySample> occupancy(RunId run) override {
    // This file's columns: an older one read-only has no reserved or host figures (-1).
    const std::string sql = "SELECT " + select_list(occupancy_columns(), schema_) +
                            " FROM occupancy WHERE run = ? ORDER BY time_ns, id";
    return read_rows(sql, "read occupancy", run.value, reader(occupancy_columns()));
  }

  SweepId create_sweep(const SweepRecord& sweep) override {
    std::lock_guard lock(mu_);
    writable("create sweep");
    static const std::string sql =
        insert_sql("sweeps", sweep_columns()) + " ON CONFLICT (key) DO NOTHING";
    // Find or create under the write lock: two processes starting the same sweep get one row and
    // one id, where a find_sweep then create_sweep pair would let both insert and one fail.
    Transaction tx(*conn_, "create sweep");
    {
      Query q(stmt(sql, "insert sweep"));
      bind_row(q, sweep_columns(), sweep);
      q.run();
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
    return first(read_rows(select_sweeps_ + " WHERE key = ?", "find sweep", key, &read_sweep));
  }

  std::optional<SweepRecord> sweep(SweepId id) override {
    return first(read_rows(select_sweeps_ + " WHERE id = ?", "read sweep", id.value, &read_sweep));
  }

  std::vector<SweepRecord> sweeps() override {
    return read_rows(select_sweeps_ + " ORDER BY id", "read sweeps", std::nullopt, &read_sweep);
  }

  PointId put_point(const PointRecord& point) override {
    std::lock_guard lock(mu_);
    writable("put point");
    static const std::string sql =
        insert_sql("points", point_key_columns(), point_value_columns()) +
        " ON CONFLICT (sweep, point_index) DO UPDATE SET " + set_excluded(point_value_columns());
    // The upsert keeps the row (and its id) of an existing point; the id is read back in the same
    // transaction because last_insert_rowid is not set by the update branch.
    Transaction tx(*conn_, "put point");
    {
      Query q(stmt(sql, "upsert point"));
      bind_row(q, point_key_columns(), point);
      bind_row(q, point_value_columns(), point);
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
    const std::string sql = "SELECT id, " + names(point_key_columns()) + ", " +
                            select_list(point_value_columns(), schema_) +
                            " FROM points WHERE sweep = ? ORDER BY point_index";
    return read_rows(sql, "read points", sweep.value, [this](Query& q) {
      PointRecord p;
      p.id = PointId(q.col_i64());
      read_row(q, point_key_columns(), p);
      read_checked(q, point_value_columns(), p, "points", p.id.value);
      return p;
    });
  }

  Claim claim_point(SweepId sweep, int64_t index) override {
    std::lock_guard lock(mu_);
    writable("claim point");
    static const std::string read_claim =
        "SELECT " + names(owner_columns()) + " FROM claims WHERE sweep = ? AND point_index = ?";
    static const std::string insert_claim =
        "INSERT INTO claims (sweep, point_index, " + names(owner_columns()) +
        ", claimed_unix_ns) VALUES (?, ?, " + placeholders(owner_columns().size()) +
        ", ?) ON CONFLICT (sweep, point_index) DO UPDATE SET " + set_excluded(owner_columns()) +
        ", claimed_unix_ns = excluded.claimed_unix_ns";
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
        if (checked("points", row, [&] { return parse_point_status(q.col_text()); }) !=
            PointStatus::Pending) {
          return {ClaimStatus::Finished, Owner{}};
        }
      }
    }
    {
      Query q(stmt(read_claim, "read claim"));
      q.i64(sweep.value).i64(index);
      if (q.next()) {
        Owner holder;
        read_row(q, owner_columns(), holder);
        if (holder != me && owner_alive(holder)) return {ClaimStatus::Taken, holder};
      }
    }
    {
      Query q(stmt(insert_claim, "insert claim"));
      q.i64(sweep.value).i64(index);
      bind_row(q, owner_columns(), me);
      q.i64(now_unix_ns()).run();
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
    q.i64(sweep.value).i64(index);
    bind_row(q, owner_columns(), me);
    q.run();
  }

  void add_recommendation(const RecommendationRecord& rec) override {
    std::lock_guard lock(mu_);
    writable("add recommendation");
    static const std::string sql = insert_sql("recommendations", recommendation_columns());
    Query q(stmt(sql, "insert recommendation"));
    bind_row(q, recommendation_columns(), rec);
    q.run();
  }

  std::vector<RecommendationRecord> recommendations(SweepId sweep) override {
    static const std::string sql = "SELECT " + names(recommendation_columns()) +
                                   " FROM recommendations WHERE sweep = ? ORDER BY id";
    return read_rows(sql, "read recommendations", sweep.value, reader(recommendation_columns()));
  }

  void put_predictions(const std::vector<PointPrediction>& predictions) override {
    std::lock_guard lock(mu_);
    writable("put predictions");
    if (predictions.empty()) return;
    static const std::string sql =
        insert_sql("predictions", prediction_key_columns(), prediction_value_columns()) +
        " ON CONFLICT (sweep, point_index) DO UPDATE SET " +
        set_excluded(prediction_value_columns());
    // All or nothing: a refused row (an unknown sweep) rolls back the rows before it.
    Transaction tx(*conn_, "put predictions");
    for (const PointPrediction& p : predictions) {
      Query q(stmt(sql, "upsert prediction"));
      bind_row(q, prediction_key_columns(), p);
      bind_row(q, prediction_value_columns(), p);
      q.run();
    }
    tx.commit();
  }

  void add_memory_history(RunId run, const std::vector<MemoryEventRecord>& events,
                          const std::vector<MemoryBlockRecord>& blocks) override {
    std::lock_guard lock(mu_);
    writable("add memory history");
    if (query_int(*conn_, "SELECT count(*) FROM runs WHERE id = " + std::to_string(run.value),
                  "look for the run") == 0) {
      throw unknown("add memory history", "run", run.value);
    }
    static const std::string events_sql = insert_sql("memory_events", memory_event_columns());
    static const std::string blocks_sql = insert_sql("memory_blocks", memory_block_columns());
    Transaction tx(*conn_, "add memory history");
    {
      Query q(stmt(events_sql, "insert memory_events"));
      for (MemoryEventRecord e : events) {
        e.run = run;
        q.again();
        bind_row(q, memory_event_columns(), e);
        q.run();
      }
    }
    {
      Query q(stmt(blocks_sql, "insert memory_blocks"));
      for (MemoryBlockRecord b : blocks) {
        b.run = run;
        q.again();
        bind_row(q, memory_block_columns(), b);
        q.run();
      }
    }
    tx.commit();
  }

  std::vector<MemoryEventRecord> memory_events(RunId run) override {
    if (!has_memory_tables()) return {};
    static const std::string sql = "SELECT " + names(memory_event_columns()) +
                                   " FROM memory_events WHERE run = ? ORDER BY seq";
    return read_rows(sql, "read memory events", run.value, reader(memory_event_columns()));
  }

  std::vector<MemoryBlockRecord> memory_blocks(RunId run) override {
    if (!has_memory_tables()) return {};
    static const std::string sql = "SELECT " + names(memory_block_columns()) +
                                   " FROM memory_blocks WHERE run = ? ORDER BY addr";
    return read_rows(sql, "read memory blocks", run.value, reader(memory_block_columns()));
  }

  std::vector<PointPrediction> predictions(SweepId sweep) override {
    // An older file opened read-only (never migrated) has no table: no predictions. Nor has a file
    // written at schema 5 before the table was part of it (schema 5 was not released then): it
    // reads as a store without predictions rather than failing every sweep it holds.
    if (schema_ < kPredictionSchema) return {};
    // This file's columns: an older one read-only has no predicted peak reserved (0).
    const std::string sql = "SELECT " + select_list(prediction_columns(), schema_) +
                            " FROM predictions WHERE sweep = ? ORDER BY point_index";
    {
      std::lock_guard lock(mu_);
      if (!has_predictions_table_) {
        has_predictions_table_ =
            query_int(*conn_,
                      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                      "name = 'predictions'",
                      "look for the predictions table") > 0;
      }
      if (!*has_predictions_table_) return {};
    }
    return read_rows(sql, "read predictions", sweep.value, reader(prediction_columns()));
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

  // One batch of rows of `table` in one transaction (steps, events, occupancy).
  template <typename R>
  void add_rows(const char* table, const Columns<R>& cols, const std::vector<R>& rows) {
    std::lock_guard lock(mu_);
    const std::string what = std::string("add ") + table;
    writable(what.c_str());
    if (rows.empty()) return;
    // One table per record type: built once (a recorder adds events thousands of times).
    static const std::string sql = insert_sql(table, cols);
    const std::string insert = std::string("insert ") + table;
    Transaction tx(*conn_, what);
    Query q(stmt(sql, insert.c_str()));
    for (const R& r : rows) {
      q.again();
      bind_row(q, cols, r);
      q.run();
    }
    tx.commit();
  }

  // Runs `read`, which parses a stored enum name. A name this build does not know: the file was
  // edited by hand (a newer writer would have raised the schema version).
  template <typename F>
  std::invoke_result_t<F> checked(const char* table, int64_t row, F read) const {
    try {
      return read();
    } catch (const std::invalid_argument& e) {
      throw StoreError(Kind::Invalid, conn_->path() + ": read " + table + " row " +
                                          std::to_string(row) + ": " + e.what());
    }
  }
  template <typename R>
  void read_checked(Query& q, const Columns<R>& cols, R& r, const char* table, int64_t row) const {
    checked(table, row, [&] { read_row(q, cols, r); });
  }

  // Every row of `sql`, its one parameter bound to `key` (none: nullopt), each read by `read`.
  template <typename Key, typename Read>
  std::vector<std::invoke_result_t<Read, Query&>> read_rows(const std::string& sql, const char* op,
                                                            const Key& key, Read read) {
    std::lock_guard lock(mu_);
    Query q(stmt(sql, op));
    if constexpr (std::is_same_v<Key, std::string>) {
      q.text(key);
    } else if constexpr (!std::is_same_v<Key, std::nullopt_t>) {
      q.i64(key);
    }
    std::vector<std::invoke_result_t<Read, Query&>> out;
    while (q.next()) out.push_back(read(q));
    return out;
  }
  // The run columns, then its owner: present, host, pid, start. A schema 1 file has no owners.
  std::string select_runs() const {
    const std::string run_cols = "SELECT runs.id, " + select_list(run_columns(), schema_) + ", ";
    return has_owners_
               ? run_cols + kOwnerSelect + " FROM runs LEFT JOIN run_owners o ON o.run = runs.id"
               : run_cols + kNoOwnerSelect + " FROM runs";
  }
  // A running run whose owner ended reads as interrupted, also where the file still says running: a
  // read-only open never writes, and a writable one may outlive the owner.
  std::function<RunRecord(Query&)> run_reader() const {
    return [this](Query& q) {
      RunRecord r;
      r.id = RunId(q.col_i64());
      read_checked(q, run_columns(), r, "runs", r.id.value);
      const std::optional<Owner> owner = read_owner(q);
      if (r.status == RunStatus::Running && (!owner || !owner_alive(*owner))) {
        r.status = RunStatus::Interrupted;
        r.error = interrupted_error(owner);
      }
      return r;
    };
  }

  std::string select_sweeps() const {
    return "SELECT id, " + select_list(sweep_columns(), schema_) + " FROM sweeps";
  }
  std::mutex mu_;  // one connection, and the statement cache, used by one thread at a time
  std::unique_ptr<Connection> conn_;
  // Declared after conn_: statements are finalized before the connection closes.
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;

  bool read_only_;
  bool has_owners_;
  int schema_;
  bool fold_side_files_;
  const std::string select_runs_ = select_runs();      // for this file's schema
  const std::string select_sweeps_ = select_sweeps();  // for this file's schema
  // An older file opened read-only (never migrated) has no memory tables: no history.
  bool has_memory_tables() {
    std::lock_guard lock(mu_);
    if (!has_memory_tables_) {
      has_memory_tables_ = query_int(*conn_,
                                     "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                     "name = 'memory_events'",
                                     "look for the memory tables") > 0;
    }
    return *has_memory_tables_;
  }
  std::optional<bool> has_memory_tables_;
  std::optional<bool> has_predictions_table_;  // looked up on the first read of predictions
};

}  // namespace

int store_schema_version() { return kSchemaVersion; }

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

void Store::add_memory_history(RunId, const std::vector<MemoryEventRecord>&,
                               const std::vector<MemoryBlockRecord>&) {
  throw StoreError(Kind::Invalid, "add memory history: this store keeps none");
}
std::vector<MemoryEventRecord> Store::memory_events(RunId) { return {}; }
std::vector<MemoryBlockRecord> Store::memory_blocks(RunId) { return {}; }

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
    const int rc = c.try_exec("PRAGMA journal_mode = WAL");
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
    conn = std::make_unique<Connection>(path, Access::Create);
    if (conn->read_only()) {
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
      conn = std::make_unique<Connection>(path, Access::ReadOnly);
      id = read_identity(*conn, false);
    } catch (const StoreError& e) {
      // A WAL database without -shm/-wal in a directory this process cannot write: SQLite cannot
      // set up its shared index. Nobody can be writing the file either (a writer needs that
      // directory), so reading it as immutable is safe.
      // SQLite reports it as "attempt to write a readonly database" (Io) or as CannotOpen.
      const bool setup_failed = e.kind() == Kind::Io || e.kind() == Kind::CannotOpen;
      if (!setup_failed || fs::exists(path + "-wal", ec)) throw;
      conn = std::make_unique<Connection>(path, Access::ReadOnly,
                                          OpenOptions{.uri_query = "immutable=1"});
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
}  // namespace offtune::profiler
