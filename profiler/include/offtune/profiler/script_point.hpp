// Sweeping the user's own training script: each point of the grid runs the script once, in a
// fresh process, with the point's engine options in the environment; the script (offtune's Python
// package inside it) records its steps into the run this side began. The protocol, in order:
//
//   1. the sweep begins the point's run (status running, the point's config, workload.model
//      "script") and has claimed the point (sweep.hpp);
//   2. `/bin/sh -c COMMAND` starts in a process group of its own, in this working directory, with
//      this environment plus OFFTUNE_POINT (point_json: the engine options by the names
//      offtune.Offloader takes; the baseline is {"offload": false}) and OFFTUNE_RECORD
//      (record_json: the store, the run id, warm-up steps, timeline, collector, device model);
//   3. its stderr is passed through (unless told not to) and its last kStderrTailLines lines kept;
//      a point that runs past its timeout gets SIGTERM to the group and SIGKILL after a grace
//      period; a cancel (Ctrl-C) stops the group the same way and leaves the point pending;
//   4. the run is read back and classified (classify_script_point): what the child recorded, or
//      the exit status, signal, timeout or "recorded no step", with one clear error line. This
//      side finishes the run when the child did not.
//
// docs/script-sweeps.md is the user's description of all this.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "offtune/options.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"

namespace offtune::profiler {

// How a script point is run.
struct ScriptSpec {
  std::string command;  // run as /bin/sh -c COMMAND
  // Seconds a point may run before its process group is stopped; 0: no bound.
  double timeout_s = 0.0;
  // Seconds between SIGTERM and SIGKILL when a point is stopped (timeout, cancel).
  double kill_grace_s = 10.0;
  // The child's output (its stderr, and its stdout with it: this process's stdout is the CLI's
  // own) is copied to this process's stderr as it comes (a CLI without --quiet or --json); its
  // tail is kept either way.
  bool pass_stderr = true;
  // What the point's run records before the child adds its own: workload.model "script", the
  // warm-up steps the child drops (OFFTUNE_RECORD's "warmup"), and where it ran.
  Workload workload;
  Environment env;
  bool record_timeline = true;
  Collector collector = Collector::Auto;
  // The device model as the user named it (a built-in name, or a file made absolute); empty: none.
  std::string device_model;
  // The backend when the user chose one (cuda or host-sim): OFFTUNE_POINT then names it; with
  // host-sim, the link model too. Auto: left to the child.
  BackendKind backend = BackendKind::Auto;
  std::string link;
};

// The lines of the child's stderr kept for a point's error and log.
inline constexpr size_t kStderrTailLines = 20;

// How the child ended.
struct ScriptExit {
  enum class How { Exited, Signalled, TimedOut, Cancelled, NotStarted };
  How how = How::Exited;
  int code = 0;       // Exited: the exit status
  int signal = 0;     // Signalled: the signal
  std::string error;  // NotStarted: why
};

// A point's result from what the child left in its run (nullopt: the run is gone), how it ended
// and its stderr's tail. The run's status wins where the child finished it and exited 0; a child
// that exited non-zero or by a signal makes the point failed, or out of memory when its stderr's
// tail says so ("CUDA out of memory", "OutOfMemoryError", "out of memory") or it was killed by
// SIGKILL without finishing its run (the kernel's OOM killer, most likely); a run the child left
// running is "the script recorded no step" when it exited 0. A cancelled child is Interrupted.
// The error is one line.
struct ScriptVerdict {
  RunStatus status = RunStatus::Failed;
  std::string error;
};
ScriptVerdict classify_script_point(const std::optional<RunRecord>& run, const ScriptExit& exit,
                                    const std::vector<std::string>& stderr_tail, double timeout_s);

// OFFTUNE_POINT for a point: {"offload": false} for a point that offloads nothing, else every
// knob that offtune.Offloader takes (the knob table's `python` keywords), at its default too, as
// true/false, a number (sizes in bytes) or a name; the backend when `spec` names one, and with
// host-sim the link (the point's, else the sweep's).
std::string point_json(const EngineConfig& config, const ScriptSpec& spec);
// OFFTUNE_RECORD for a run: the store (absolute path; empty for a store without a file), the run,
// the warm-up, timeline, collector and device model.
std::string record_json(const std::string& db, RunId run, const ScriptSpec& spec);

// The point's result from its run, rank 0's: where the script ran a distributed job (torchrun:
// the other ranks recorded runs naming rank 0's as their job_run), the job's, whose step time and
// step statistics are the slowest rank's and whose peaks are the highest rank's (job.hpp), and a
// rank that failed fails the point ("rank R: its error"). Rank 0's run itself keeps its own
// figures (`offtune report --ranks` shows each rank's). A run of one process is returned as it is.
RunRecord job_point_run(Store& store, RunRecord rank0);

// What identifies a script sweep besides its command: the script file (the first word after the
// program, and after its options, that names an existing regular file; else the program itself
// when it is a path to one) and a hash of its bytes (XXH3-128, hex). Both empty when the command
// names no file: the command alone is then the identity.
struct ScriptIdentity {
  std::string file;
  std::string hash;
};
ScriptIdentity script_identity(const std::string& command);

// The latest sweep in `store` of the same command whose script hash differs from `hash`: the
// script changed since it (a new sweep starts). nullopt when there is none.
std::optional<SweepRecord> changed_script_sweep(Store& store, const std::string& command,
                                                const std::string& hash);

// Runs the script once per point (see the top of this file).
class ScriptMeasurer final : public PointMeasurer {
 public:
  explicit ScriptMeasurer(ScriptSpec spec) : spec_(std::move(spec)) {}
  RunRecord measure(const PointRun& run, Store& store, const std::atomic<bool>* cancel) override;
  bool sets_steps() const override { return false; }

  // Of the last point measured: how the child ended, and its stderr's last lines.
  const ScriptExit& last_exit() const { return last_exit_; }
  const std::vector<std::string>& last_stderr_tail() const { return last_tail_; }

 private:
  ScriptSpec spec_;
  ScriptExit last_exit_;
  std::vector<std::string> last_tail_;
};

// The process group of the script point running now (0: none), for a signal handler that must
// stop it when this process exits at once (a second Ctrl-C). Async-signal-safe.
int running_script_group() noexcept;

// `offtune predict --script`: runs the script once on host-sim under the recording's options
// (recording_options, for `like`'s semantics and offload set) with OFFTUNE_TRACE set to {"path",
// "warmup", "steps"}: offtune's Python package in it records `steps` steps after the warm-up ones
// (its scope or drop-in entries mark them, as a sweep's) and writes the trace there. Returns that
// trace; std::runtime_error (one line: how the script ended, its last line) when it wrote none,
// std::invalid_argument for a `like` the script cannot be recorded under (checkpointing: the
// script does its own).
Trace record_script_trace(const ScriptSpec& spec, const EngineConfig& like, int64_t steps,
                          const std::atomic<bool>* cancel);
// Every point of `configs` predicted from the script's steps, points[i] over links[i], as
// predict_grid does for a workload: a run of the script per semantics and offload set the points
// use (kCpuSteps steps recorded on this CPU's clock, 1 under spec.device_model); the source says
// "your script, ...".
GridPrediction predict_script_grid(const ScriptSpec& spec, const std::vector<EngineConfig>& configs,
                                   const std::vector<LinkModel>& links,
                                   const std::atomic<bool>* cancel);

}  // namespace offtune::profiler
