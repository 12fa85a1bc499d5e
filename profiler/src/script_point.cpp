// A sweep point measured by the user's script in a process of its own (script_point.hpp has the
// protocol). The child is started with posix_spawn, never fork alone: this process may have
// libtorch's thread pools, and a forked copy of a multi-threaded process may only call
// async-signal-safe functions before exec. POSIX_SPAWN_SETPGROUP puts it in a group of its own, so
// that a timeout or a cancel stops everything it started (torchrun's ranks, data loader workers)
// and a terminal's Ctrl-C reaches this process only (which then stops the group itself).
#include "offtune/profiler/script_point.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>
#include <variant>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "offtune/profiler/job.hpp"
#include "run_parts.hpp"

extern char** environ;

namespace offtune::profiler {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_running_group{0};
static_assert(std::atomic<int>::is_always_lock_free, "read from a signal handler");

const char* collector_name(Collector c) {
  switch (c) {
    case Collector::Cupti:
      return "cupti";
    case Collector::NvtxOnly:
      return "nvtx-only";
    case Collector::Auto:
      break;
  }
  return "auto";
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t start = 0;
  while (start < s.size() && (s[start] == ' ' || s[start] == '\t')) ++start;
  return s.substr(start);
}

std::string last_line(const std::vector<std::string>& tail) {
  for (auto it = tail.rbegin(); it != tail.rend(); ++it) {
    if (std::string line = trimmed(*it); !line.empty()) return line;
  }
  return {};
}

bool says_out_of_memory(const std::vector<std::string>& tail) {
  for (const std::string& line : tail) {
    for (const char* what : {"CUDA out of memory", "OutOfMemoryError", "out of memory"}) {
      if (line.find(what) != std::string::npos) return true;
    }
  }
  return false;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string seconds_text(double s) {
  std::string text = std::to_string(s);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

// The words of a command line as the shell would split a simple one: blanks separate words,
// quotes group them (no expansion; enough to find a file name).
std::vector<std::string> shell_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < command.size()) {
        word += command[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == ';' || c == '|' || c == '&') {
      break;  // the first command of a list or pipeline is the one that names the script
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

bool regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the script " + path + ": " + std::strerror(errno));
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    XXH3_128bits_update(state, buffer, static_cast<size_t>(in.gcount()));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  char hex[40];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string("xxh3-128:") + hex;
}

// The environment of the child: this one, with OFFTUNE_POINT and either OFFTUNE_RECORD (a point
// measured) or OFFTUNE_TRACE (a step recorded for the predictor) replaced, the other one removed.
std::vector<std::string> child_environment(const std::string& point, const std::string& name,
                                           const std::string& value) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("OFFTUNE_POINT=") || entry.starts_with("OFFTUNE_RECORD=") ||
        entry.starts_with("OFFTUNE_TRACE=")) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("OFFTUNE_POINT=" + point);
  env.push_back(name + "=" + value);
  return env;
}

// The last lines of a stream, kept as it comes in pieces.
class Tail {
 public:
  void add(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (data[i] == '\n') {
        push();
      } else if (partial_.size() < kMaxLine) {
        partial_ += data[i];
      }
    }
  }
  std::vector<std::string> lines() {
    if (!partial_.empty()) push();
    return {lines_.begin(), lines_.end()};
  }

 private:
  // A line longer than this is cut: a progress bar drawn with \r is one endless line.
  static constexpr size_t kMaxLine = 4096;
  void push() {
    if (const auto cr = partial_.rfind('\r'); cr != std::string::npos && cr + 1 < partial_.size()) {
      partial_ = partial_.substr(cr + 1);  // what a terminal would show of a redrawn line
    }
    lines_.push_back(std::move(partial_));
    partial_.clear();
    if (lines_.size() > kStderrTailLines) lines_.pop_front();
  }
  std::string partial_;
  std::deque<std::string> lines_;
};

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // our stderr is gone: the tail is still kept
    data += w;
    n -= static_cast<size_t>(w);
  }
}

struct Child {
  ScriptExit exit;
  std::vector<std::string> tail;
};

// Runs the command to its end (or its timeout, or a cancel), reading its stderr all along so that
// a chatty child never blocks on a full pipe.
Child run_child(const ScriptSpec& spec, const std::vector<std::string>& env,
                const std::atomic<bool>* cancel) {
  Child out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.exit.how = ScriptExit::How::NotStarted;
    out.exit.error =
        std::string("cannot make a pipe for the script's stderr: ") + std::strerror(errno);
    return out;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Its stdout goes with its stderr: this process's stdout is the CLI's own (--json prints one
  // document there), and a script's prints are the log of its point.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A group of its own (0: the child's pid), default signal actions (this process may ignore or
  // catch some: a caught one is reset by exec anyway, an ignored one is not) and no blocked ones.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", command = spec.command;
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    out.exit.how = ScriptExit::How::NotStarted;
    out.exit.error = std::string("cannot start /bin/sh: ") + std::strerror(spawned);
    return out;
  }
  g_running_group.store(pid);

  Tail tail;
  const auto started = Clock::now();
  std::optional<Clock::time_point> term_sent;
  bool pipe_open = true, exited = false;
  int status = 0;
  const auto stop_group = [&](ScriptExit::How why) {
    if (term_sent) return;
    out.exit.how = why;
    ::kill(-pid, SIGTERM);
    term_sent = Clock::now();
  };
  std::optional<Clock::time_point> drain_until;
  char buffer[8192];
  while (pipe_open) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready > 0) {
      const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
      if (n > 0) {
        tail.add(buffer, static_cast<size_t>(n));
        if (spec.pass_stderr) write_all(STDERR_FILENO, buffer, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        pipe_open = false;
      }
    }
    if (!exited) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        exited = true;
        // What the script left behind in its group (a background job, a worker) goes with it:
        // the next point starts with none of this one's processes.
        ::kill(-pid, SIGKILL);
        // Its stderr is read to the end, which comes once the group is gone.
        drain_until = Clock::now() + std::chrono::seconds(2);
      }
    }
    const auto now = Clock::now();
    if (exited) {
      if (drain_until && now > *drain_until) break;
      continue;
    }
    if (cancel != nullptr && cancel->load()) stop_group(ScriptExit::How::Cancelled);
    if (spec.timeout_s > 0 && now - started > std::chrono::duration<double>(spec.timeout_s)) {
      stop_group(ScriptExit::How::TimedOut);
    }
    if (term_sent && now - *term_sent > std::chrono::duration<double>(spec.kill_grace_s)) {
      ::kill(-pid, SIGKILL);
    }
  }
  ::close(fds[0]);
  if (!exited) {
    // The pipe closed first (the script closed its stderr): wait for it as before.
    while (!exited) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        exited = true;
        ::kill(-pid, SIGKILL);
        break;
      }
      const auto now = Clock::now();
      if (cancel != nullptr && cancel->load()) stop_group(ScriptExit::How::Cancelled);
      if (spec.timeout_s > 0 && now - started > std::chrono::duration<double>(spec.timeout_s)) {
        stop_group(ScriptExit::How::TimedOut);
      }
      if (term_sent && now - *term_sent > std::chrono::duration<double>(spec.kill_grace_s)) {
        ::kill(-pid, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  g_running_group.store(0);
  if (!term_sent) {
    if (WIFEXITED(status)) {
      out.exit.how = ScriptExit::How::Exited;
      out.exit.code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      out.exit.how = ScriptExit::How::Signalled;
      out.exit.signal = WTERMSIG(status);
    }
  }
  out.tail = tail.lines();
  return out;
}

}  // namespace

int running_script_group() noexcept { return g_running_group.load(); }

ScriptVerdict classify_script_point(const std::optional<RunRecord>& run, const ScriptExit& exit,
                                    const std::vector<std::string>& tail, double timeout_s) {
  const bool recorded = run && run->status != RunStatus::Running;
  const std::string last = last_line(tail);
  const auto with_last = [&](std::string what) { return last.empty() ? what : what + ": " + last; };
  switch (exit.how) {
    case ScriptExit::How::Cancelled:
      return {RunStatus::Interrupted,
              "interrupted: the script was stopped with its process group; run the same "
              "command again to measure this point"};
    case ScriptExit::How::NotStarted:
      return {RunStatus::Failed, exit.error};
    case ScriptExit::How::TimedOut:
      return {RunStatus::Failed,
              with_last("script timed out after " + seconds_text(timeout_s) +
                        " s (--timeout-per-point): stopped with its process group")};
    case ScriptExit::How::Exited:
      if (exit.code == 0) {
        if (!recorded) {
          return {RunStatus::Failed,
                  "the script recorded no step: run it with offtune's drop-in "
                  "(offtune.get_act_offloading_ctx_manager), an Offloader.from_env() scope, "
                  "offtune.record or offtune.OfftuneCallback"};
        }
        // Interrupted is the child's word for a run it did not finish: not a result.
        if (run->status == RunStatus::Interrupted) return {RunStatus::Failed, run->error};
        return {run->status, run->error};
      }
      break;
    case ScriptExit::How::Signalled:
      break;
  }
  // It ended badly. What the child recorded of its own failure says more than the exit status.
  if (recorded && (run->status == RunStatus::Failed || run->status == RunStatus::OutOfMemory) &&
      !run->error.empty()) {
    return {run->status, run->error};
  }
  if (exit.how == ScriptExit::How::Signalled) {
    if (exit.signal == SIGKILL && !recorded) {
      return {RunStatus::OutOfMemory,
              with_last("script killed (SIGKILL: the kernel's OOM killer?)")};
    }
    return {says_out_of_memory(tail) ? RunStatus::OutOfMemory : RunStatus::Failed,
            with_last("script killed by " + signal_name(exit.signal))};
  }
  // A shell reports a command killed by signal N as status 128+N: a python under `sh -c` killed by
  // the OOM killer exits 137.
  if (exit.code == 128 + SIGKILL && !recorded) {
    return {RunStatus::OutOfMemory,
            with_last("script exited with status 137 (killed by SIGKILL: the kernel's OOM "
                      "killer?)")};
  }
  return {says_out_of_memory(tail) ? RunStatus::OutOfMemory : RunStatus::Failed,
          with_last("script exited with status " + std::to_string(exit.code))};
}

std::string point_json(const EngineConfig& c, const ScriptSpec& spec) {
  nlohmann::json j;
  if (!c.offload) {
    j["offload"] = false;
    return j.dump();
  }
  // Every knob Offloader takes, by its keyword, at its default too: the point's options are taken
  // over the script's own arguments (offtune.trl's drop-in defaults to TRL's semantics), so that
  // each point runs what its run records. The link is host-sim's, named with the backend below.
  const Knob& link = knob("link");
  for (const Knob& k : knob_table()) {
    if (k.python.empty() || &k == &link) continue;
    std::visit([&](const auto& v) { j[std::string(k.python)] = v; }, k.get(c));
  }
  if (spec.backend != BackendKind::Auto) {
    j["backend"] = spec.backend == BackendKind::Cuda ? "cuda" : "host-sim";
    // The point's own link where its config names one (a sweep over links), else the sweep's.
    const std::string& name = c.link.name.empty() ? spec.link : c.link.name;
    if (spec.backend == BackendKind::HostSim && !name.empty()) j[std::string(link.python)] = name;
  }
  return j.dump();
}

std::string record_json(const std::string& db, RunId run, const ScriptSpec& spec) {
  nlohmann::json j{{"db", db},
                   {"run", run.value},
                   {"warmup", spec.workload.warmup},
                   {"timeline", spec.record_timeline},
                   {"collector", collector_name(spec.collector)}};
  if (!spec.device_model.empty()) j["device_model"] = spec.device_model;
  return j.dump();
}

ScriptIdentity script_identity(const std::string& command) {
  std::vector<std::string> words = shell_words(command);
  // Assignments before the program (CUDA_VISIBLE_DEVICES=0 python train.py) are not it.
  size_t program = 0;
  while (program < words.size() && words[program].find('=') != std::string::npos &&
         words[program].front() != '-') {
    ++program;
  }
  if (program >= words.size()) return {};
  for (size_t i = program + 1; i < words.size(); ++i) {
    if (words[i].empty() || words[i].front() == '-') continue;  // an option, not the script
    if (regular_file(words[i])) return {words[i], file_hash(words[i])};
  }
  // ./train.sh: the program is the script.
  if (words[program].find('/') != std::string::npos && regular_file(words[program])) {
    return {words[program], file_hash(words[program])};
  }
  return {};
}

std::optional<SweepRecord> changed_script_sweep(Store& store, const std::string& command,
                                                const std::string& hash) {
  std::optional<SweepRecord> found;
  for (SweepRecord& s : store.sweeps()) {
    const auto key = nlohmann::json::parse(s.key, nullptr, /*allow_exceptions=*/false);
    if (!key.is_object() || key.value("script", std::string()) != command) continue;
    if (key.value("script_hash", std::string()) != hash) found = std::move(s);
  }
  return found;
}

RunRecord job_point_run(Store& store, RunRecord rank0) {
  const std::vector<RunRecord> runs = job_runs(store, rank0.id);
  if (runs.size() < 2) return rank0;
  const JobSummary job = job_summary(runs);
  const RunRecord* slowest = &runs.front();
  for (const RunRecord& r : runs) {
    if (r.status == RunStatus::Ok && r.summary.step_ms_median > slowest->summary.step_ms_median) {
      slowest = &r;
    }
  }
  RunSummary& s = rank0.summary;
  const RunSummary& t = slowest->summary;
  s.step_ms_median = t.step_ms_median;
  s.step_ms_min = t.step_ms_min;
  s.step_ms_max = t.step_ms_max;
  s.step_ms_stddev = t.step_ms_stddev;
  s.step_ms_ci_low = t.step_ms_ci_low;
  s.step_ms_ci_high = t.step_ms_ci_high;
  s.step_ms_ci_level = t.step_ms_ci_level;
  s.peak_allocated = job.peak_allocated;
  s.peak_reserved = job.peak_reserved;
  if (rank0.status == RunStatus::Ok && job.status != RunStatus::Ok) {
    for (const RunRecord& r : runs) {
      if (r.status != RunStatus::Ok) {
        rank0.status = r.status == RunStatus::Running ? RunStatus::Failed : r.status;
        rank0.error = "rank " + std::to_string(r.rank) + ": " +
                      (r.error.empty() ? std::string("did not finish its run") : r.error);
        break;
      }
    }
  }
  return rank0;
}

RunRecord ScriptMeasurer::measure(const PointRun& point, Store& store,
                                  const std::atomic<bool>* cancel) {
  RunRecord rec;
  rec.status = RunStatus::Running;
  rec.label = point.label;
  rec.env = spec_.env;
  rec.workload = spec_.workload;
  rec.config = point.config;
  rec.started_unix_ns = detail::unix_now_ns();
  rec.id = store.begin_run(rec);

  const std::string db = store.path().empty() ? "" : fs::absolute(store.path()).string();
  const Child child = run_child(spec_,
                                child_environment(point_json(point.config, spec_), "OFFTUNE_RECORD",
                                                  record_json(db, rec.id, spec_)),
                                cancel);
  last_exit_ = child.exit;
  last_tail_ = child.tail;

  const std::optional<RunRecord> after = store.run(rec.id);
  const ScriptVerdict verdict =
      classify_script_point(after, child.exit, child.tail, spec_.timeout_s);
  const bool child_finished = after && after->status != RunStatus::Running;
  if (!child_finished) {
    store.finish_run(rec.id, verdict.status, verdict.error, {}, detail::unix_now_ns());
  } else if (after->status != verdict.status || after->error != verdict.error) {
    // The child finished its run, but how the process ended overrules it (a non-zero exit after
    // the last step): the run says what the point says, with the figures it recorded.
    store.finish_run(rec.id, verdict.status, verdict.error, after->summary,
                     after->finished_unix_ns > 0 ? after->finished_unix_ns : detail::unix_now_ns());
  }
  // The tail beside the store, for a point that did not measure: its error has the last line.
  if (!db.empty() && verdict.status != RunStatus::Ok && !child.tail.empty()) {
    std::error_code ec;
    const fs::path dir = db + ".logs";
    fs::create_directories(dir, ec);
    std::ofstream log(dir / ("run-" + std::to_string(rec.id.value) + ".stderr"));
    for (const std::string& line : child.tail) log << line << "\n";
  }
  if (auto done = store.run(rec.id)) return job_point_run(store, *done);
  rec.status = verdict.status;
  rec.error = verdict.error;
  return rec;
}

Trace record_script_trace(const ScriptSpec& spec, const EngineConfig& like, int64_t steps,
                          const std::atomic<bool>* cancel) {
  if (!replayable(like) || like.checkpoint.enabled()) {
    throw std::invalid_argument(
        "offtune predict --script replays the script's own steps: no --checkpoint, --tier disk "
        "or --layer-offload (the script does its own checkpointing)");
  }
  ScriptSpec s = spec;
  s.backend = BackendKind::HostSim;  // the recording is host-sim's
  s.link = "none";
  const OffloadOptions o = recording_options(OffloadOptions{}, like);
  EngineConfig c = knobs_of(o);
  c.offload = true;
  c.link = parse_link("none");
  static std::atomic<int> counter{0};
  const fs::path path =
      fs::temp_directory_path() / ("offtune-trace-" + std::to_string(::getpid()) + "-" +
                                   std::to_string(counter.fetch_add(1)) + ".json");
  const nlohmann::json target{{"path", path.string()},
                              {"warmup", spec.workload.warmup},
                              {"steps", steps},
                              {"device_model", spec.device_model}};
  const Child child =
      run_child(s, child_environment(point_json(c, s), "OFFTUNE_TRACE", target.dump()), cancel);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::string why;
    switch (child.exit.how) {
      case ScriptExit::How::NotStarted:
        why = child.exit.error;
        break;
      case ScriptExit::How::TimedOut:
        why = "it ran past --timeout-per-point " + seconds_text(spec.timeout_s);
        break;
      case ScriptExit::How::Cancelled:
        why = "interrupted";
        break;
      case ScriptExit::How::Signalled:
        why = "it was killed by " + signal_name(child.exit.signal);
        break;
      case ScriptExit::How::Exited:
        why = child.exit.code == 0
                  ? "it exited 0 after fewer than " + std::to_string(spec.workload.warmup + 2) +
                        " steps (--warmup + 2 scope or drop-in entries), or without offtune's "
                        "package"
                  : "it exited " + std::to_string(child.exit.code);
        break;
    }
    const std::string last = last_line(child.tail);
    throw std::runtime_error("the script recorded no step for the predictor: " + why +
                             (last.empty() ? "" : " (its last line: " + last + ")"));
  }
  Trace trace;
  try {
    trace = load_trace(path.string());
  } catch (...) {
    fs::remove(path, ec);
    throw;
  }
  fs::remove(path, ec);
  return trace;
}

GridPrediction predict_script_grid(const ScriptSpec& spec, const std::vector<EngineConfig>& configs,
                                   const std::vector<LinkModel>& links,
                                   const std::atomic<bool>* cancel) {
  const int64_t steps = spec.device_model.empty() ? kCpuSteps : 1;
  GridPrediction out = predict_grid(
      [&](const EngineConfig& like) { return record_script_trace(spec, like, steps, cancel); },
      configs, links);
  if (!out.source.empty()) out.source = "your script, " + out.source;
  return out;
}

}  // namespace offtune::profiler
