// The profiler's one seam to the SQLite C API: a connection, prepared statements with typed binds
// and columns, transactions, and the one error path that turns an SQLite result code into an
// exception. The store (sqlite_store.cpp and its parts) and the exporters that read or write SQLite
// files (export_nsys.cpp, export_csv.cpp) use it; nothing else in the profiler calls sqlite3_*.
//
// Errors: every failing call goes through Connection::fail, which maps the code to a
// StoreError::Kind (busy, full, corrupt, ...) and throws a StoreError "<path>: <op>: <SQLite's
// words>", one line. A connection that belongs to something other than the store (an export) gives
// an ErrorPolicy that throws its own exception from the same facts.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "offtune/profiler/store.hpp"

namespace offtune::profiler::detail {

// How long a connection waits for another process's lock before it reports Busy.
constexpr int kBusyTimeoutMs = 5000;

// SQLite's error message may span lines (quick_check output does); the store promises one line.
std::string single_line(std::string text);

// What failed, for an ErrorPolicy.
struct SqliteFailure {
  StoreError::Kind kind;
  int code;                    // SQLite's (extended) result code
  std::string op;              // what was being done ("insert events")
  std::string sqlite_message;  // SQLite's own words
};
// Throws the exception a failure should become. It must throw.
using ErrorPolicy = std::function<void(const SqliteFailure&)>;

enum class Access {
  ReadOnly,
  ReadWrite,  // an existing file
  Create,     // read-write, created when missing
};

struct OpenOptions {
  // URI query parameters: "immutable=1" reads the main file alone (no lock, no -wal/-shm made:
  // only safe when nobody writes it), "mode=ro" a read-only open that sees a writer's WAL.
  std::string_view uri_query = {};
  // 0: report Busy at once instead of waiting.
  int busy_timeout_ms = kBusyTimeoutMs;
  // Empty: failures throw StoreError.
  ErrorPolicy on_error = {};
};

// One sqlite3* with the file name that every error message carries. Extended result codes are on.
class Connection {
 public:
  // `path` is the file (and what messages name); any name opens as itself (it is percent-encoded
  // into an SQLite URI).
  Connection(std::string path, Access access, OpenOptions options = {});
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* get() const { return db_.get(); }
  const std::string& path() const { return path_; }

  // The one place where SQLite result codes become exceptions.
  [[noreturn]] void fail(int rc, std::string_view op) const;
  // Returns rc for step's ROW/DONE; fails on anything else but OK.
  int check(int rc, std::string_view op) const {
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) fail(rc, op);
    return rc;
  }
  // Runs one or more statements that return nothing.
  void exec(const std::string& sql, std::string_view op) const;
  // The same, returning SQLite's code instead of throwing: for retries and for tidying up, which
  // must not throw.
  int try_exec(const char* sql) const noexcept;

  // SQLite silently opens read-only when the file or its directory is not writable.
  bool read_only() const { return sqlite3_db_readonly(db_.get(), "main") == 1; }
  bool in_transaction() const { return sqlite3_get_autocommit(db_.get()) == 0; }
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }
  int64_t changes() const { return sqlite3_changes(db_.get()); }
  // Closes now and fails if SQLite cannot (a statement still open), so that every page has been
  // written out before the caller goes on (an export renames the file next).
  void close();

 private:
  struct Closer {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  std::string path_;
  ErrorPolicy on_error_;
  std::unique_ptr<sqlite3, Closer> db_;
};

// A prepared statement. Use it through Query, which binds and reads by position and resets the
// statement when done, so that no read transaction stays open and blocks checkpoints.
class Statement {
 public:
  // `persistent`: kept for the connection's lifetime (SQLITE_PREPARE_PERSISTENT).
  Statement(const Connection& conn, const std::string& sql, std::string op = "statement",
            bool persistent = false);

  sqlite3_stmt* get() const { return stmt_.get(); }
  const Connection& conn() const { return conn_; }
  const std::string& op() const { return op_; }

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
  };
  const Connection& conn_;
  std::string op_;  // what the statement does, for messages ("insert events")
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
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
  // NaN binds as NULL in SQLite; col_real() reads it back as NaN.
  Query& real(double v) { return bound(sqlite3_bind_double(s_.get(), ++bind_, v)); }
  Query& text(std::string_view v);
  Query& null() { return bound(sqlite3_bind_null(s_.get(), ++bind_)); }
  // A negative id (Id's invalid value) binds NULL.
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
  double col_real();  // NULL reads as NaN
  std::string col_text();
  int64_t col_id_or_invalid();  // NULL reads as -1

 private:
  Query& bound(int rc) {
    s_.conn().check(rc, "bind " + s_.op());
    return *this;
  }
  Statement& s_;
  int bind_ = 0;
  int col_ = 0;
};

// BEGIN IMMEDIATE takes the write lock up front, so a second writer waits (busy timeout) at the
// start instead of failing at its first write. Rolls back unless committed.
class Transaction {
 public:
  Transaction(const Connection& conn, std::string op);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  const Connection& conn_;
  std::string op_;
  bool committed_ = false;
};

// The first row's first column of `sql` as an integer, 0 when there is no row ("PRAGMA
// user_version", "SELECT count(*) ...").
int64_t query_int(const Connection& c, const std::string& sql, std::string_view op);

}  // namespace offtune::profiler::detail
