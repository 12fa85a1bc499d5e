// The SQLite seam (sqlite_db.hpp): connection, statements, transactions, and the one error path.
#include "sqlite_db.hpp"

#include <limits>
#include <utility>

namespace offtune::profiler::detail {

namespace {

using Kind = StoreError::Kind;

// By the primary code; extended codes are on for the messages. A row the schema refuses
// (SQLITE_CONSTRAINT: an unknown run or sweep id, a duplicate key) is the caller's bad argument,
// the same thing the memory store reports as Invalid.
Kind kind_for(int rc) {
  static constexpr std::pair<int, Kind> kKinds[] = {
      {SQLITE_NOTADB, Kind::NotADatabase}, {SQLITE_CORRUPT, Kind::Corrupt},
      {SQLITE_FULL, Kind::Full},           {SQLITE_BUSY, Kind::Busy},
      {SQLITE_LOCKED, Kind::Busy},         {SQLITE_CANTOPEN, Kind::CannotOpen},
      {SQLITE_CONSTRAINT, Kind::Invalid}};
  for (const auto& [code, kind] : kKinds) {
    if ((rc & 0xff) == code) return kind;
  }
  return Kind::Io;  // any other SQLite error
}

int open_flags(Access access) {
  if (access == Access::ReadOnly) return SQLITE_OPEN_READONLY;
  return SQLITE_OPEN_READWRITE | (access == Access::Create ? SQLITE_OPEN_CREATE : 0);
}

// SQLITE_TRANSIENT is an old-style cast in a macro; this is the same value, spelled for -Werror.
const sqlite3_destructor_type kTransient =
    reinterpret_cast<sqlite3_destructor_type>(static_cast<std::intptr_t>(-1));

// Percent-encodes a file name into an SQLite URI, so that any name (with '?', '#', '%') opens as
// itself and query parameters (immutable, mode) can be added.
std::string file_uri(const std::string& path) {
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

}  // namespace

std::string single_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

Connection::Connection(std::string path, Access access, OpenOptions options)
    : path_(std::move(path)), on_error_(std::move(options.on_error)) {
  std::string uri = file_uri(path_);
  if (!options.uri_query.empty()) uri += "?" + std::string(options.uri_query);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(uri.c_str(), &raw, open_flags(access) | SQLITE_OPEN_URI, nullptr);
  db_.reset(raw);  // even on failure: the handle must be closed
  if (rc != SQLITE_OK) fail(rc, "open");
  sqlite3_extended_result_codes(db_.get(), 1);
  sqlite3_busy_timeout(db_.get(), options.busy_timeout_ms);
}

void Connection::fail(int rc, std::string_view op) const {
  SqliteFailure f{kind_for(rc), rc, std::string(op),
                  db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc)};
  if (on_error_) on_error_(f);
  // SQLite does not say which reference failed; every foreign key of the store is a run or sweep
  // id.
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) f.sqlite_message += " (unknown run or sweep id)";
  throw StoreError(f.kind, single_line(path_ + ": " + f.op + ": " + f.sqlite_message));
}

void Connection::exec(const std::string& sql, std::string_view op) const {
  check(sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, nullptr), op);
}

int Connection::try_exec(const char* sql) const noexcept {
  return sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr);
}

void Connection::close() {
  const int rc = sqlite3_close(db_.get());
  if (rc != SQLITE_OK) fail(rc, "close");
  (void)db_.release();  // closed above
}

Statement::Statement(const Connection& conn, const std::string& sql, std::string op,
                     bool persistent)
    : conn_(conn), op_(std::move(op)) {
  sqlite3_stmt* raw = nullptr;
  const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
  const int rc = sqlite3_prepare_v3(conn.get(), sql.c_str(), static_cast<int>(sql.size()), flags,
                                    &raw, nullptr);
  stmt_.reset(raw);
  conn_.check(rc, "prepare " + op_);
}

Query& Query::text(std::string_view v) {
  return bound(sqlite3_bind_text64(s_.get(), ++bind_, v.data(), v.size(), kTransient, SQLITE_UTF8));
}

double Query::col_real() {
  const int c = col_++;
  if (sqlite3_column_type(s_.get(), c) == SQLITE_NULL) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return sqlite3_column_double(s_.get(), c);
}

std::string Query::col_text() {
  const int c = col_++;
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_.get(), c));
  const int n = sqlite3_column_bytes(s_.get(), c);  // after column_text, per the SQLite docs
  return p ? std::string(p, static_cast<size_t>(n)) : std::string();
}

int64_t Query::col_id_or_invalid() {
  if (sqlite3_column_type(s_.get(), col_) == SQLITE_NULL) {
    ++col_;
    return -1;
  }
  return col_i64();
}

Transaction::Transaction(const Connection& conn, std::string op) : conn_(conn), op_(std::move(op)) {
  conn_.exec("BEGIN IMMEDIATE", "begin " + op_);
}

Transaction::~Transaction() {
  // SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR): only roll back an
  // open transaction, and never throw from here.
  if (!committed_ && conn_.in_transaction()) conn_.try_exec("ROLLBACK");
}

void Transaction::commit() {
  conn_.exec("COMMIT", "commit " + op_);
  committed_ = true;
}

int64_t query_int(const Connection& c, const std::string& sql, std::string_view op) {
  Statement s(c, sql, std::string(op));
  Query q(s);
  return q.next() ? q.col_i64() : 0;
}

}  // namespace offtune::profiler::detail
