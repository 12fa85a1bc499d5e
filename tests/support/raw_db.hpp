// A raw SQLite connection, for what a test must see without the profiler's own code in between:
// hand-made files, PRAGMAs, crashes (test_store), the rows an export wrote (test_export). A failing
// call is a test failure, not an exception.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace offtune::test {

using Rows = std::vector<std::vector<std::string>>;

class RawDb {
 public:
  explicit RawDb(const std::string& path, int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) ADD_FAILURE() << "raw open " << path << ": " << sqlite3_errstr(rc);
  }
  ~RawDb() { sqlite3_close_v2(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* handle() { return db_; }

  int exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (err != nullptr) sqlite3_free(err);
    return rc;
  }
  void must(const std::string& sql) {
    const int rc = exec(sql);
    ASSERT_EQ(rc, SQLITE_OK) << sql << ": " << sqlite3_errmsg(db_);
  }

  // Every row of a query, each column as text ("NULL" for NULL).
  Rows query(const std::string& sql) {
    Rows rows;
    each_row(sql, [&](sqlite3_stmt* stmt) {
      std::vector<std::string>& r = rows.emplace_back();
      for (int i = 0; i < sqlite3_column_count(stmt); ++i)
        r.push_back(column(stmt, i).value_or("NULL"));
    });
    return rows;
  }
  // The first column of the first row; a failure when there is none, or it is NULL.
  std::string text(const std::string& sql) {
    std::optional<std::string> first;
    bool any = false;
    each_row(sql, [&](sqlite3_stmt* stmt) {
      if (!any) first = column(stmt, 0);
      any = true;
    });
    if (!first) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
    return first.value_or("");
  }
  int64_t integer(const std::string& sql) { return std::stoll(text(sql)); }
  // Column `col` of every row, joined with " | ".
  std::string column_concat(const std::string& sql, int col) {
    std::string out;
    each_row(sql, [&](sqlite3_stmt* stmt) {
      if (!out.empty()) out += " | ";
      out += column(stmt, col).value_or("");
    });
    return out;
  }

 private:
  template <typename F>
  void each_row(const std::string& sql, F on_row) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return;
    }
    while (sqlite3_step(stmt) == SQLITE_ROW) on_row(stmt);
    sqlite3_finalize(stmt);
  }
  static std::optional<std::string> column(sqlite3_stmt* stmt, int i) {
    const unsigned char* t = sqlite3_column_text(stmt, i);
    if (t == nullptr) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(t));
  }

  sqlite3* db_ = nullptr;
};

}  // namespace offtune::test
