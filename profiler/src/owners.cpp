// Owners (owners.hpp): processes by /proc, and the owner rows of runs and claims.
#include "owners.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "sqlite_rows.hpp"

namespace offtune::profiler {

namespace {

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

}  // namespace

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

namespace detail {

std::optional<Owner> read_owner(Query& q) {
  const bool present = q.col_bool();
  Owner owner;
  read_row(q, owner_columns(), owner);  // the NULL columns of a missing row are read all the same
  if (!present) return std::nullopt;
  return owner;
}

// No owner: written before schema 2.
std::string interrupted_error(const std::optional<Owner>& owner) {
  if (!owner) return "interrupted: the process recording it ended (recorded by an older offtune)";
  return "interrupted: the process recording it ended (pid " + std::to_string(owner->pid) + " on " +
         owner->host + ")";
}

// One transaction, under the write lock, so that
// it sees every commit; an owner that ended cannot write again, so nothing it decides goes stale.
void interrupt_orphans(const Connection& c) {
  Transaction tx(c, "mark interrupted runs");
  std::vector<std::pair<int64_t, std::string>> ended;
  {
    Statement s(c,
                std::string("SELECT r.id, ") + kOwnerSelect +
                    " FROM runs r LEFT JOIN run_owners o ON o.run = r.id WHERE r.status = ?",
                "read running runs");
    Query q(s);
    q.text(to_string(RunStatus::Running));
    while (q.next()) {
      const int64_t id = q.col_i64();
      const std::optional<Owner> owner = read_owner(q);
      if (!owner || !owner_alive(*owner)) ended.emplace_back(id, interrupted_error(owner));
    }
  }
  if (!ended.empty()) {
    Statement s(c, "UPDATE runs SET status = ?, error = ? WHERE id = ?", "mark run interrupted");
    for (const auto& [id, error] : ended) {
      Query q(s);
      q.text(to_string(RunStatus::Interrupted)).text(error).i64(id).run();
    }
  }
  std::vector<std::pair<int64_t, int64_t>> stale;
  {
    Statement s(c, "SELECT sweep, point_index, " + names(owner_columns()) + " FROM claims",
                "read claims");
    Query q(s);
    while (q.next()) {
      const int64_t sweep = q.col_i64();
      const int64_t index = q.col_i64();
      Owner holder;
      read_row(q, owner_columns(), holder);
      if (!owner_alive(holder)) stale.emplace_back(sweep, index);
    }
  }
  if (!stale.empty()) {
    Statement s(c, "DELETE FROM claims WHERE sweep = ? AND point_index = ?", "drop stale claim");
    for (const auto& [sweep, index] : stale) {
      Query q(s);
      q.i64(sweep).i64(index).run();
    }
  }
  tx.commit();
}

}  // namespace detail

}  // namespace offtune::profiler
