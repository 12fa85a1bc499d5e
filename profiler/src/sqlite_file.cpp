// The store file (sqlite_file.hpp): inspection before trust, creation, and tidying up.
#include "sqlite_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace offtune::profiler::detail {

namespace {

namespace fs = std::filesystem;
using Kind = StoreError::Kind;

// The first problem of a quick_check report, without its "*** in database main ***" heading.
std::string first_problem(const std::string& report) {
  size_t pos = 0;
  while (pos < report.size()) {
    size_t end = report.find('\n', pos);
    if (end == std::string::npos) end = report.size();
    const std::string line = report.substr(pos, end - pos);
    if (!line.empty() && line.rfind("***", 0) != 0) return single_line(line);
    pos = end + 1;
  }
  return single_line(report);
}

}  // namespace

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

// Checks an existing SQLite file through a connection that cannot write it. Without a -wal file
// nobody has the database open for writing, and immutable=1 reads the main file alone: SQLite then
// creates no -wal/-shm files, so a refused file leaves no trace. With a -wal file, a writer may be
// active or may have crashed; its committed frames matter, so a normal read-only connection reads
// them (the side files exist already).
Identity inspect_existing(const std::string& path, bool writable) {
  std::error_code ec;
  const bool has_wal = fs::exists(path + "-wal", ec);
  try {
    Connection c(path, Access::ReadOnly, {.uri_query = has_wal ? "mode=ro" : "immutable=1"});
    {
      // quick_check(1): one problem is enough to refuse the file, and stops early on a bad one.
      Statement s(c, "PRAGMA quick_check(1)", "quick_check");
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
    if (!empty) {
      try {
        // No busy timeout: a write lock held by somebody else is the answer, not a wait.
        Connection c(path, Access::ReadWrite, {.busy_timeout_ms = 0});
        Transaction tx(c, "look into an unfinished store");
        keep = query_int(c, "SELECT count(*) FROM sqlite_master", "read schema") != 0;
      } catch (const StoreError& e) {
        keep = e.kind() == Kind::Busy;
      }
    }
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
    const Connection c(path, Access::ReadWrite);
    if (!c.read_only()) c.try_exec("SELECT count(*) FROM sqlite_master");
  } catch (...) {
    // Called from a destructor: side files left behind are untidy, not wrong.
  }
}

}  // namespace offtune::profiler::detail
