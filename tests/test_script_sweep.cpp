// Sweeping the user's own script (profiler/script_point.hpp): every point runs a command in a
// process of its own. The scripts here are small `sh` scripts written by the tests: they check
// what each point is given (OFFTUNE_POINT, OFFTUNE_RECORD), end in every way a training script can
// (exit status, signal, hang, a chatty stderr, a background job) and are classified; the sweep's
// identity follows the script file; --shard auto reads the schedulers' variables.
#include <gtest/gtest.h>

#include "temp_dir.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "offtune/host_sim.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/script_point.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/engine_options.hpp"
#include "offtune/requests/execute.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::profiler {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A script file in `dir` with `body`, and the command that runs it.
std::string script(const test::TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.file(name);
  std::ofstream(path) << body << "\n";
  return "sh " + path;
}

SweepSpec script_sweep(const std::string& command) {
  SweepSpec s;
  s.name = "script";
  s.workload.model = "script";
  s.workload.warmup = 1;
  s.grid.set_numbers("min_offload_size", {1024, 1 << 20});
  s.grid.set_numbers("max_fwd_stash_size", {2});
  s.base.backend = BackendKind::HostSim;
  s.env.backend = "host-sim";
  s.script = command;
  s.script_hash = script_identity(command).hash;
  return s;
}

ScriptSpec quiet(const std::string& command) {
  ScriptSpec s;
  s.command = command;
  s.pass_stderr = false;
  s.workload.model = "script";
  s.workload.warmup = 1;
  return s;
}

// Whether a process is gone (a zombie that nobody reaps counts as gone: it runs nothing).
bool gone(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

TEST(ScriptSweep, EveryPointGetsItsOptionsAndTheBaselineOffloadsNothing) {
  test::TempDir dir("offtune-script-test");
  const std::string seen = dir.file("seen.txt");
  const std::string cmd = script(
      dir, "train.sh", "printf '%s %s\\n' \"$OFFTUNE_POINT\" \"$OFFTUNE_RECORD\" >> " + seen);
  auto store = open_sqlite_store(dir.file("s.db"));
  const SweepSpec spec = script_sweep(cmd);
  ScriptSpec how = quiet(cmd);
  how.backend = BackendKind::HostSim;
  how.link = "none";
  ScriptMeasurer measurer(how);
  const SweepOutcome out = run_sweep(measurer, spec, *store);
  EXPECT_EQ(out.ran, 3);
  EXPECT_EQ(out.failed, 3);  // the script records no step: each point fails, the sweep goes on

  std::map<int64_t, PointRecord> by_run;
  for (const auto& p : store->points(out.sweep)) by_run[p.run.value] = p;
  const auto seen_lines = lines_of(seen);
  ASSERT_EQ(seen_lines.size(), 3u);
  const std::string db = fs::absolute(dir.file("s.db")).string();
  for (const std::string& line : seen_lines) {
    const auto space = line.find(' ');
    const auto point = nlohmann::json::parse(line.substr(0, space));
    const auto record = nlohmann::json::parse(line.substr(space + 1));
    EXPECT_EQ(record.at("db"), db);
    EXPECT_EQ(record.at("warmup"), 1);
    EXPECT_EQ(record.at("timeline"), true);
    EXPECT_EQ(record.at("collector"), "auto");
    EXPECT_FALSE(record.contains("device_model"));
    const int64_t run = record.at("run").get<int64_t>();
    ASSERT_TRUE(by_run.contains(run)) << line;
    const PointRecord& p = by_run[run];
    const auto rec = store->run(p.run);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->workload.model, "script");
    EXPECT_EQ(rec->label, "script point " + std::to_string(p.index));
    if (!p.config.offload) {
      EXPECT_EQ(point, nlohmann::json({{"offload", false}}));
      continue;
    }
    // Every other point's options are offtune.Offloader's, by name, and mean this point's config.
    std::vector<requests::NamedOption> named;
    for (const auto& [name, value] : point.items()) {
      if (value.is_boolean()) {
        named.push_back({name, value.get<bool>()});
      } else if (value.is_number_integer()) {
        named.push_back({name, value.get<int64_t>()});
      } else {
        named.push_back({name, value.get<std::string>()});
      }
    }
    OffloadOptions base;
    base.backend = BackendKind::HostSim;
    base.link = LinkModel{};  // "none"
    const OffloadOptions given = requests::parse_offload_options(named);
    const OffloadOptions meant = options_of(p.config, base);
    EXPECT_EQ(given.min_offload_size, meant.min_offload_size) << line;
    EXPECT_EQ(given.max_fwd_stash_size, meant.max_fwd_stash_size) << line;
    EXPECT_EQ(given.prefetch, meant.prefetch);
    EXPECT_EQ(given.use_streams, meant.use_streams);
    EXPECT_EQ(given.use_pin_memory, meant.use_pin_memory);
    EXPECT_EQ(given.semantics, meant.semantics);
    EXPECT_EQ(given.tier, meant.tier);
    EXPECT_EQ(given.backend, BackendKind::HostSim);
    EXPECT_EQ(point.at("link"), "none");
  }
  for (const auto& [run, p] : by_run) {
    EXPECT_EQ(p.status, PointStatus::Failed);
    EXPECT_EQ(p.error.rfind("the script recorded no step: run it with offtune's drop-in", 0), 0u)
        << p.error;
    EXPECT_EQ(store->run(p.run)->status, RunStatus::Failed);  // finished by the sweep
  }
  // No --backend given: the child picks its own, and OFFTUNE_POINT does not name one.
  EXPECT_EQ(point_json(expand_grid(spec.grid)[1], quiet(cmd)).find("backend"), std::string::npos);
}

// A script sweep over streams, pinned memory, the byte window and host-sim's links tells each
// point its own values in OFFTUNE_POINT, by the names the Python package's Offloader takes (the
// link was the sweep's for every point).
TEST(ScriptSweep, EachPointIsToldItsOwnStreamsPinnedMemoryByteWindowAndLink) {
  Grid grid;
  grid.set_numbers("min_offload_size", {1024});
  grid.set_numbers("max_fwd_stash_size", {1});
  grid.base.link = parse_link("pcie4");
  grid.set_names("link", {"none", "pcie5"});
  grid.set_switches("use_streams", {true, false});
  grid.set_switches("use_pin_memory", {false});
  grid.set_numbers("max_fwd_stash_bytes", {64 << 10});
  ScriptSpec how = quiet("true");
  how.backend = BackendKind::HostSim;
  how.link = "pcie4";
  int offload_points = 0;
  for (const EngineConfig& c : expand_grid(grid)) {
    if (!c.offload) continue;
    ++offload_points;
    const auto point = nlohmann::json::parse(point_json(c, how));
    EXPECT_EQ(point.at("link"), c.link.name);
    EXPECT_EQ(point.at("use_streams"), c.use_streams);
    EXPECT_EQ(point.at("use_pin_memory"), false);
    EXPECT_EQ(point.at("max_fwd_stash_bytes"), 64 << 10);
    const OffloadOptions given =
        requests::parse_offload_options({{"link", point.at("link").get<std::string>()},
                                         {"use_streams", point.at("use_streams").get<bool>()}});
    EXPECT_EQ(given.link.pinned_gbps, parse_link(c.link.name).model.pinned_gbps);
    EXPECT_EQ(given.link.latency_ns, parse_link(c.link.name).model.latency_ns);
    EXPECT_EQ(given.use_streams, c.use_streams);
  }
  EXPECT_EQ(offload_points, 4);
}

TEST(ScriptSweep, AFailingScriptIsRecordedWithItsStderrAndTheSweepGoesOn) {
  test::TempDir dir("offtune-script-test");
  // 30 numbered lines and a megabyte of noise before them: the pipe (64 KiB) is read all along,
  // so the child never blocks on it.
  const std::string cmd = script(dir, "fail.sh",
                                 "head -c 1000000 /dev/zero | tr '\\0' 'x' >&2\n"
                                 "echo >&2\n"
                                 "i=1; while [ $i -le 30 ]; do echo \"line $i\" >&2; "
                                 "i=$((i+1)); done\nexit 3");
  auto store = open_sqlite_store(dir.file("s.db"));
  ScriptMeasurer measurer(quiet(cmd));
  const auto started = Clock::now();
  const SweepOutcome out = run_sweep(measurer, script_sweep(cmd), *store);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(30));
  EXPECT_EQ(out.ran, 3);
  EXPECT_EQ(out.failed, 3);
  for (const auto& p : store->points(out.sweep)) {
    EXPECT_EQ(p.status, PointStatus::Failed);
    EXPECT_EQ(p.error, "script exited with status 3: line 30");
    EXPECT_EQ(store->run(p.run)->error, p.error);
    // The whole tail beside the store.
    const auto log =
        lines_of(dir.file("s.db") + ".logs/run-" + std::to_string(p.run.value) + ".stderr");
    ASSERT_EQ(log.size(), kStderrTailLines);
    EXPECT_EQ(log.front(), "line 11");
  }
  const auto& tail = measurer.last_stderr_tail();
  ASSERT_EQ(tail.size(), kStderrTailLines);
  EXPECT_EQ(tail.front(), "line 11");
  EXPECT_EQ(tail.back(), "line 30");
  EXPECT_EQ(measurer.last_exit().how, ScriptExit::How::Exited);
  EXPECT_EQ(measurer.last_exit().code, 3);
}

// The script's standard output is not the CLI's: `offtune sweep --json` prints one JSON document
// on stdout, so the child's prints go where its stderr goes (before, they were mixed into the
// JSON, which no reader could parse: tests/cli_script_sweep.sh failed so).
TEST(ScriptSweep, TheScriptsStdoutGoesWithItsStderrNotToTheCallersStdout) {
  test::TempDir dir("offtune-script-test");
  const std::string cmd = script(dir, "chatty.sh", "echo on-stdout\necho on-stderr >&2\nexit 4");
  auto store = open_sqlite_store(dir.file("s.db"));
  ScriptMeasurer measurer(quiet(cmd));
  SweepSpec spec = script_sweep(cmd);
  spec.grid.set_numbers("min_offload_size", {1024});
  spec.grid.set_numbers("max_fwd_stash_size", {1});
  testing::internal::CaptureStdout();
  run_sweep(measurer, spec, *store);
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed.find("on-stdout"), std::string::npos) << printed;
  const auto& tail = measurer.last_stderr_tail();
  EXPECT_NE(std::find(tail.begin(), tail.end(), "on-stdout"), tail.end());
  EXPECT_EQ(tail.back(), "on-stderr");
}

TEST(ScriptSweep, ATimeoutStopsTheScriptWithItsProcessGroup) {
  test::TempDir dir("offtune-script-test");
  const std::string pidfile = dir.file("grandchild.pid");
  // The command ignores SIGTERM (and so does its background job): SIGKILL must follow. (As a
  // script file run by `sh FILE`, the outer shell would end on SIGTERM, and its group with it.)
  const std::string cmd = "trap '' TERM; sleep 1000 & echo $! > " + pidfile +
                          "; echo 'loading the model' >&2; wait; wait";
  auto store = make_memory_store();
  ScriptSpec how = quiet(cmd);
  how.timeout_s = 1;
  how.kill_grace_s = 1;
  ScriptMeasurer measurer(how);
  PointRun run;
  run.label = "hang";
  const auto started = Clock::now();
  const RunRecord rec = measurer.measure(run, *store, nullptr);
  const auto took = Clock::now() - started;
  EXPECT_GE(took, std::chrono::seconds(2));   // the timeout, then the grace period
  EXPECT_LT(took, std::chrono::seconds(10));  // not the sleep
  EXPECT_EQ(rec.status, RunStatus::Failed);
  EXPECT_EQ(rec.error,
            "script timed out after 1 s (--timeout-per-point): stopped with its process group: "
            "loading the model");
  EXPECT_EQ(measurer.last_exit().how, ScriptExit::How::TimedOut);
  const pid_t grandchild = std::stoi(read_file(pidfile));
  for (int i = 0; i < 50 && !gone(grandchild); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone(grandchild)) << "the background sleep outlived its point";
}

TEST(ScriptSweep, WhatAScriptLeavesRunningGoesWithItsPoint) {
  test::TempDir dir("offtune-script-test");
  const std::string pidfile = dir.file("worker.pid");
  const std::string cmd =
      script(dir, "leak.sh", "sleep 1000 >/dev/null 2>&1 &\necho $! > " + pidfile + "\nexit 0");
  auto store = make_memory_store();
  ScriptMeasurer measurer(quiet(cmd));
  // A named point, not PointRun{}: GCC 12 warns (maybe-uninitialized, an error here) on the
  // destruction of a temporary whose Knobs take their defaults from engine_defaults().
  const PointRun run;
  const auto started = Clock::now();
  (void)measurer.measure(run, *store, nullptr);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
  const pid_t worker = std::stoi(read_file(pidfile));
  for (int i = 0; i < 50 && !gone(worker); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone(worker));
}

TEST(ScriptSweep, CancelStopsTheScriptAndLeavesItsPointForAResume) {
  test::TempDir dir("offtune-script-test");
  const std::string cmd = script(dir, "slow.sh", "sleep 1000");
  auto store = make_memory_store();
  ScriptSpec how = quiet(cmd);
  how.kill_grace_s = 1;
  ScriptMeasurer measurer(how);
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  const auto started = Clock::now();
  const SweepOutcome out = run_sweep(measurer, script_sweep(cmd), *store, {}, &cancel);
  stopper.join();
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(out.interrupted);
  EXPECT_EQ(out.ran, 0);
  for (const auto& p : store->points(out.sweep)) {
    EXPECT_EQ(p.status, PointStatus::Pending) << p.index;
  }
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Interrupted);
  EXPECT_EQ(measurer.last_exit().how, ScriptExit::How::Cancelled);
}

// A point whose script ran under torchrun is its job: the slowest rank's step time, the highest
// rank's peak, and a failed rank fails it (the ranks' runs as the Python package records them).
TEST(ScriptSweep, APointOfADistributedJobIsItsSlowestRankAndItsHighestPeak) {
  auto store = make_memory_store();
  auto rank_run = [&](int64_t rank, std::optional<RunId> job, RunStatus status, double ms,
                      int64_t peak) {
    RunRecord r;
    r.status = RunStatus::Running;
    r.label = "sweep point 1";
    r.rank = rank;
    r.world_size = 2;
    r.job_run = job;
    r.id = store->begin_run(r);
    RunSummary s;
    s.step_ms_median = s.step_ms_min = s.step_ms_max = ms;
    s.peak_allocated = peak;
    s.peak_reserved = 2 * peak;
    store->finish_run(r.id, status, status == RunStatus::Ok ? "" : "ValueError: boom", s, 1);
    return *store->run(r.id);
  };
  const RunRecord rank0 = rank_run(0, std::nullopt, RunStatus::Ok, 10.0, 300);
  rank_run(1, rank0.id, RunStatus::Ok, 12.5, 100);
  RunRecord point = job_point_run(*store, rank0);
  EXPECT_EQ(point.id, rank0.id);
  EXPECT_EQ(point.status, RunStatus::Ok);
  EXPECT_DOUBLE_EQ(point.summary.step_ms_median, 12.5);
  EXPECT_DOUBLE_EQ(point.summary.step_ms_max, 12.5);
  EXPECT_EQ(point.summary.peak_allocated, 300);
  EXPECT_EQ(point.summary.peak_reserved, 600);
  EXPECT_DOUBLE_EQ(store->run(rank0.id)->summary.step_ms_median, 10.0);  // rank 0's own stays

  const RunRecord other0 = rank_run(0, std::nullopt, RunStatus::Ok, 10.0, 300);
  rank_run(1, other0.id, RunStatus::Failed, 0.0, 0);
  point = job_point_run(*store, other0);
  EXPECT_EQ(point.status, RunStatus::Failed);
  EXPECT_EQ(point.error, "rank 1: ValueError: boom");

  const RunRecord single = rank_run(0, std::nullopt, RunStatus::Ok, 7.0, 50);
  EXPECT_DOUBLE_EQ(job_point_run(*store, single).summary.step_ms_median, 7.0);
}

TEST(ScriptSweep, AScriptKilledBySigkillIsTakenForTheOomKiller) {
  test::TempDir dir("offtune-script-test");
  auto store = make_memory_store();
  ScriptMeasurer killed(quiet("echo 'step 3' >&2; kill -9 $$"));
  const PointRun run;  // named: see WhatAScriptLeavesRunningGoesWithItsPoint
  RunRecord rec = killed.measure(run, *store, nullptr);
  EXPECT_EQ(rec.status, RunStatus::OutOfMemory);
  EXPECT_EQ(rec.error, "script killed (SIGKILL: the kernel's OOM killer?): step 3");
  // A script run by a shell that reports it: status 137.
  ScriptMeasurer through_shell(quiet(script(dir, "killed.sh", "echo 'step 3' >&2\nkill -9 $$")));
  rec = through_shell.measure(run, *store, nullptr);
  EXPECT_EQ(rec.status, RunStatus::OutOfMemory);
  EXPECT_EQ(rec.error.rfind(
                "script exited with status 137 (killed by SIGKILL: the kernel's OOM killer?)", 0),
            0u)
      << rec.error;
}

// What a run finished by the child looks like, for the classification.
RunRecord finished(RunStatus status, std::string error = {}) {
  RunRecord r;
  r.status = status;
  r.error = std::move(error);
  return r;
}

TEST(ScriptSweep, ClassifiesEachWayAScriptEnds) {
  const auto exited = [](int code) {
    ScriptExit e;
    e.code = code;
    return e;
  };
  const auto signalled = [](int sig) {
    ScriptExit e;
    e.how = ScriptExit::How::Signalled;
    e.signal = sig;
    return e;
  };
  const std::vector<std::string> tail{"Traceback (most recent call last):", "ValueError: bad shape",
                                      ""};
  const std::optional<RunRecord> running = finished(RunStatus::Running);
  // The child recorded and exited 0: its result.
  auto v = classify_script_point(finished(RunStatus::Ok), exited(0), {}, 0);
  EXPECT_EQ(v.status, RunStatus::Ok);
  v = classify_script_point(finished(RunStatus::OutOfMemory, "CUDA out of memory"), exited(0), {},
                            0);
  EXPECT_EQ(v.status, RunStatus::OutOfMemory);
  EXPECT_EQ(v.error, "CUDA out of memory");
  // Recorded nothing and exited 0.
  v = classify_script_point(running, exited(0), {}, 0);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_NE(v.error.find("the script recorded no step"), std::string::npos);
  EXPECT_NE(v.error.find("offtune.OfftuneCallback"), std::string::npos);
  // A non-zero exit fails the point, even after a recorded run, with the last line said.
  v = classify_script_point(running, exited(1), tail, 0);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.error, "script exited with status 1: ValueError: bad shape");
  v = classify_script_point(finished(RunStatus::Ok), exited(2), tail, 0);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.error, "script exited with status 2: ValueError: bad shape");
  // The child's own failure says more than its exit status.
  v = classify_script_point(finished(RunStatus::Failed, "RuntimeError: boom"), exited(1), tail, 0);
  EXPECT_EQ(v.error, "RuntimeError: boom");
  // Out of memory, as each framework says it.
  for (const char* said : {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
                           "torch.cuda.OutOfMemoryError: oops", "RuntimeError: out of memory"}) {
    v = classify_script_point(running, exited(1), {said}, 0);
    EXPECT_EQ(v.status, RunStatus::OutOfMemory) << said;
    EXPECT_EQ(v.error, std::string("script exited with status 1: ") + said);
  }
  // Killed: by SIGKILL without a finished run (the OOM killer, most likely), or by another.
  v = classify_script_point(running, signalled(SIGKILL), {}, 0);
  EXPECT_EQ(v.status, RunStatus::OutOfMemory);
  EXPECT_EQ(v.error, "script killed (SIGKILL: the kernel's OOM killer?)");
  v = classify_script_point(running, exited(137), {}, 0);  // the same seen through a shell
  EXPECT_EQ(v.status, RunStatus::OutOfMemory);
  v = classify_script_point(running, signalled(SIGSEGV), tail, 0);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.error, "script killed by SIGSEGV: ValueError: bad shape");
  // Timed out, cancelled.
  ScriptExit timed_out;
  timed_out.how = ScriptExit::How::TimedOut;
  v = classify_script_point(running, timed_out, {}, 2.5);
  EXPECT_EQ(v.status, RunStatus::Failed);
  EXPECT_EQ(v.error,
            "script timed out after 2.5 s (--timeout-per-point): stopped with its "
            "process group");
  ScriptExit cancelled;
  cancelled.how = ScriptExit::How::Cancelled;
  EXPECT_EQ(classify_script_point(running, cancelled, {}, 0).status, RunStatus::Interrupted);
  // Every error is one line.
  for (const auto& e : {exited(1), signalled(SIGKILL), signalled(SIGTERM), timed_out}) {
    const auto verdict = classify_script_point(running, e, tail, 1);
    EXPECT_EQ(verdict.error.find('\n'), std::string::npos) << verdict.error;
  }
}

// A child that finishes its run itself (as the Python package does), written here with the sqlite3
// shell: the run's status is the point's, unless the process then exits non-zero.
TEST(ScriptSweep, TheRunTheChildFinishedIsThePointsResult) {
  if (std::system("command -v sqlite3 >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs the sqlite3 shell";
  }
  test::TempDir dir("offtune-script-test");
  const std::string finish =
      "run=$(printf %s \"$OFFTUNE_RECORD\" | sed 's/.*\"run\":\\([0-9]*\\).*/\\1/')\n"
      "db=$(printf %s \"$OFFTUNE_RECORD\" | sed 's/.*\"db\":\"\\([^\"]*\\)\".*/\\1/')\n"
      "sqlite3 \"$db\" \"PRAGMA busy_timeout=5000; UPDATE runs SET status='ok' WHERE id=$run\" "
      ">/dev/null\n";
  auto store = open_sqlite_store(dir.file("s.db"));
  ScriptMeasurer ok(quiet(script(dir, "ok.sh", finish + "exit 0")));
  PointRun run;
  EXPECT_EQ(ok.measure(run, *store, nullptr).status, RunStatus::Ok);
  ScriptMeasurer then_fails(
      quiet(script(dir, "late.sh", finish + "echo 'Segmentation fault at exit' >&2\nexit 4")));
  const RunRecord rec = then_fails.measure(run, *store, nullptr);
  EXPECT_EQ(rec.status, RunStatus::Failed);
  EXPECT_EQ(rec.error, "script exited with status 4: Segmentation fault at exit");
}

TEST(ScriptSweep, TheIdentityFollowsTheScriptFile) {
  test::TempDir dir("offtune-script-test");
  const std::string train = dir.file("train.py");
  std::ofstream(train) << "print('v1')\n";
  const ScriptIdentity a = script_identity("python3 " + train + " --max-steps 8");
  EXPECT_EQ(a.file, train);
  EXPECT_FALSE(a.hash.empty());
  // After the options of python or torchrun, and after assignments before the program.
  EXPECT_EQ(script_identity("torchrun --nproc-per-node 2 " + train).hash, a.hash);
  EXPECT_EQ(script_identity("CUDA_VISIBLE_DEVICES=0 python3 -u '" + train + "' --lr 1e-4").file,
            train);
  // The program itself when it is a path to a file and nothing after it is.
  const std::string sh = dir.file("run.sh");
  std::ofstream(sh) << "exit 0\n";
  EXPECT_EQ(script_identity(sh + " --fast").file, sh);
  // No file: the command alone.
  EXPECT_TRUE(script_identity("python3 -c 'print(1)'").file.empty());
  EXPECT_TRUE(script_identity("true").hash.empty());

  // A changed script is another sweep, and the old one is found as "changed since".
  const std::string command = "python3 " + train;
  auto store = make_memory_store();
  const SweepSpec first = script_sweep(command);
  SweepRecord rec;
  rec.name = "script";
  rec.key = sweep_key(first);
  const SweepId old = store->create_sweep(rec);
  std::ofstream(train) << "print('v2')\n";
  const SweepSpec second = script_sweep(command);
  EXPECT_NE(second.script_hash, first.script_hash);
  EXPECT_NE(sweep_key(second), sweep_key(first));
  const auto changed = changed_script_sweep(*store, command, second.script_hash);
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->id, old);
  EXPECT_FALSE(changed_script_sweep(*store, command, first.script_hash).has_value());
  EXPECT_FALSE(changed_script_sweep(*store, "python3 other.py", "x").has_value());
  // A built-in sweep's key does not change.
  SweepSpec builtin = first;
  builtin.script.clear();
  builtin.script_hash.clear();
  EXPECT_EQ(sweep_key(builtin), sweep_key(builtin.workload, builtin.grid, builtin.base));
}

}  // namespace
}  // namespace offtune::profiler

namespace offtune::requests {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ShardAuto, ReadsSlurmsJobArrayAndKubernetesIndexedJobs) {
  // Slurm: --array=0-3 gives ids 0..3 and a count of 4; --array=5-7 starts at 5.
  auto s = resolve_shard("auto",
                         env_of({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}}));
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 4);
  s = resolve_shard("auto", env_of({{"SLURM_ARRAY_TASK_ID", "7"},
                                    {"SLURM_ARRAY_TASK_MIN", "5"},
                                    {"SLURM_ARRAY_TASK_COUNT", "3"}}));
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.count, 3);
  // Kubernetes: JOB_COMPLETION_INDEX from 0, the count set by the manifest.
  s = resolve_shard("auto", env_of({{"JOB_COMPLETION_INDEX", "0"}, {"OFFTUNE_SHARD_COUNT", "5"}}));
  EXPECT_EQ(s.index, 1);
  EXPECT_EQ(s.count, 5);
  // I/N as before, whatever the environment.
  s = resolve_shard("2/3", env_of({{"SLURM_ARRAY_TASK_ID", "0"}}));
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  // Nothing set, or not enough: one line naming the variables.
  const auto refusal = [](const std::map<std::string, std::string>& vars) {
    try {
      (void)resolve_shard("auto", env_of(vars));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  for (const auto& vars : std::vector<std::map<std::string, std::string>>{
           {},
           {{"SLURM_ARRAY_TASK_ID", "1"}},
           {{"JOB_COMPLETION_INDEX", "1"}},
           {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
           {{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
           {{"JOB_COMPLETION_INDEX", "0"}, {"OFFTUNE_SHARD_COUNT", "0"}}}) {
    const std::string said = refusal(vars);
    EXPECT_EQ(said.rfind("--shard auto", 0), 0u) << said;
    EXPECT_EQ(said.find('\n'), std::string::npos) << said;
  }
  const std::string none = refusal({});
  for (const char* name : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "JOB_COMPLETION_INDEX",
                           "OFFTUNE_SHARD_COUNT"}) {
    EXPECT_NE(none.find(name), std::string::npos) << none;
  }
  EXPECT_NE(refusal({{"JOB_COMPLETION_INDEX", "1"}}).find(".spec.completions"), std::string::npos);
}

TEST(ScriptRequest, RefusesTheFlagsOfABuiltInModelOneMessageEach) {
  SweepRequest r;
  r.db = "x.db";
  r.script = "python train.py";
  EXPECT_TRUE(check(r).ok());
  r.flags_given = {"--warmup", "--collector", "--backend", "--device-model", "--prefetch"};
  EXPECT_TRUE(check(r).ok());
  // Given, even at its default value: refused.
  r.flags_given = {"--model", "--steps"};
  auto errors = check(r).errors;
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "--model");
  EXPECT_EQ(errors[0].message,
            "--model does not apply to --script (the script builds its own model and batches): "
            "leave it out");
  EXPECT_EQ(errors[1].field, "--steps");
  // Not its default (a form that sets fields): refused the same.
  r.flags_given.clear();
  r.workload.batch = 8;
  r.knobs["checkpoint"] = "all";
  r.knobs["offload_set"] = "boundaries";
  r.predict_first = true;
  errors = check(r).errors;
  std::vector<std::string> fields;
  for (const auto& e : errors) fields.push_back(e.field);
  // --predict-first records the script on host-sim: it needs a device model or host-sim.
  EXPECT_EQ(fields,
            (std::vector<std::string>{"--batch", "--checkpoint", "--offload", "--predict-first"}));
  r.workload.batch = WorkloadFields{}.batch;
  r.knobs["checkpoint"] = "none";
  r.knobs["offload_set"] = "all";
  const auto why = check(r).errors;
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].message.find("give --device-model or --backend host-sim"), std::string::npos)
      << why[0].message;
  r.backend.backend = "host-sim";
  EXPECT_TRUE(check(r).ok());
  r.backend.backend = "auto";
  r.backend.device_model = "h100-sxm";
  EXPECT_TRUE(check(r).ok());
  r.predict_first = false;
  r.backend.device_model.clear();
  // --timeout-per-point: seconds, and only with a script.
  SweepRequest t;
  t.db = "x.db";
  t.timeout_per_point = "60";
  ASSERT_EQ(check(t).errors.size(), 1u);
  EXPECT_EQ(check(t).errors[0].field, "--timeout-per-point");
  t.script = "python train.py";
  EXPECT_TRUE(check(t).ok());
  t.timeout_per_point = "-1";
  ASSERT_EQ(check(t).errors.size(), 1u);
  EXPECT_NE(check(t).errors[0].message.find("seconds"), std::string::npos);
}

// A script sweep under a device model (host-sim's) without --backend: each point is told host-sim
// and the sweep's link (pcie4 unless --link), as a built-in model's point is. Before, the child was
// told neither, its offloader had no link model, and every copy took no time under the device
// model: every point timed alike (issue 41, item 6).
TEST(ScriptRequest, ADeviceModelWithoutBackendTellsEachPointItsLink) {
  SweepRequest r;
  r.db = "x.db";
  r.script = "true";
  r.backend.device_model = "h100-sxm";
  r.knobs["min_offload_size"] = "1KiB";
  r.knobs["max_fwd_stash_size"] = "1,2";
  PreparedSweep prepared;
  try {
    prepared = prepare(require_valid(r));
  } catch (const std::exception& e) {
    host_sim::set_device_model(nullptr);
    GTEST_SKIP() << "a device model needs host-sim here: " << e.what();  // a GPU machine's auto
  }
  host_sim::set_device_model(nullptr);  // prepare set it for the process
  ASSERT_TRUE(prepared.script);
  EXPECT_EQ(prepared.script->backend, BackendKind::HostSim);
  EXPECT_EQ(prepared.script->link, "pcie4");
  int offload_points = 0;
  for (const profiler::EngineConfig& c : profiler::expand_grid(prepared.spec.grid)) {
    if (!c.offload) continue;
    ++offload_points;
    const auto point = nlohmann::json::parse(profiler::point_json(c, *prepared.script));
    ASSERT_TRUE(point.contains("link")) << point.dump();
    EXPECT_EQ(point.at("link"), "pcie4");
    EXPECT_EQ(point.at("backend"), "host-sim");
    const OffloadOptions given =
        parse_offload_options({{"link", point.at("link").get<std::string>()}});
    EXPECT_TRUE(given.link.enabled()) << "copies take the link's time";
  }
  EXPECT_EQ(offload_points, 2);
}

}  // namespace
}  // namespace offtune::requests
