// Sweeps: a grid of engine configs run on one workload, one isolated measured run per point. The
// no-offload baseline is always point 0. A point that fails or runs out of memory is recorded with
// its error and the sweep goes on. Re-running the same sweep (same workload, grid and backend)
// against the same store resumes it: finished points are skipped, so an interrupted sweep loses
// nothing. The same sweep run by several processes at once on one store is shared: each point is
// claimed (Store::claim_point) before it is measured, so it is measured once, and a point whose
// process ended is measured again by another. Shards (i/n) split the points for a CI matrix or a
// cluster; merge_stores() joins their stores.
//
// How a point is measured is a PointMeasurer's business: the built-in workload in this process
// (WorkloadMeasurer), or the user's own training script in a fresh process per point
// (ScriptMeasurer, script_point.hpp). Claims, resume, shards, rounds, progress, cancel and refine
// are the sweep's, the same for both.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/device_model.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::profiler {

struct Grid {
  // The axes, by knob key (offtune/knobs.hpp: the knobs with Knob::nest > 0): each one's values in
  // the order the points cross them. A knob without an axis takes base's value, and the grid's
  // JSON (hence the sweep's key) is what it was before that axis existed. min_offload_size and
  // max_fwd_stash_size always have one (an empty one: no offload point).
  std::map<std::string, std::vector<KnobValue>, std::less<>> axes;
  EngineConfig base;  // every other knob, shared by all points

  // The values the points take of `knob`: its axis, or base's value alone.
  std::vector<KnobValue> values(const Knob& knob) const;
  std::vector<KnobValue> values(std::string_view key) const { return values(offtune::knob(key)); }
  // Sets an axis from typed values (C++ callers and tests; front ends go through knob_text.hpp).
  Grid& set_numbers(std::string_view key, const std::vector<int64_t>& numbers);
  Grid& set_names(std::string_view key, const std::vector<std::string>& names);
  Grid& set_switches(std::string_view key, const std::vector<bool>& switches);
  // A Count's or Size's axis as numbers (values(key) as int64).
  std::vector<int64_t> numbers(std::string_view key) const;
};

// Point 0 is the baseline (offload = false, no checkpointing, no layer offloading: plain training);
// then one point per other pair of checkpoint policy and layer offloading without offloading
// activations (checkpointing alone, layer offloading alone, both); then, per checkpoint policy,
// layer offloading, offload set, tier, semantics, prefetch, link, streams, pinned memory and byte
// window (outer to inner, each in the order given), every (min_offload_size, max_fwd_stash_size)
// pair, sizes outer, windows inner. Without the variant axes this is the grid as it always was.
std::vector<EngineConfig> expand_grid(const Grid& grid);
// How many points expand_grid makes, without making them (a typo in a range must be refused before
// a 10^8-point grid is built to count it).
int64_t grid_size(const Grid& grid);
// The order a sweep measures its points in: the first one (the baseline) first, then the rest
// spread over the grid (bit-reversed positions), so that a drift in machine speed during a sweep
// (another job starting, thermal throttling) falls on points all over the grid rather than on one
// region of it, where it would look like an effect of the knobs. Same indices, another order.
std::vector<int64_t> measurement_order(const std::vector<int64_t>& indices);
// The grid as JSON text (stored with the sweep), and back; parse_grid_json throws
// std::invalid_argument for text that is not a grid this version can read.
std::string grid_json(const Grid& grid);
Grid parse_grid_json(const std::string& text);
// Identity of a sweep: workload, grid and the backend/link it runs on, and the input of a
// TorchScript model when it is not the default one (empty: left out, so that the keys of sweeps
// recorded before it counted stay the same), and the device model host-sim times steps with (every
// figure of it; none: left out, likewise). The workload's LoRA rank, a TorchScript model's block
// path (`blocks`) and host-sim's device capacity in bytes (0: unlimited) count only when set,
// likewise: a point that fits one capacity may run out of memory under another.
// A script sweep's command line and its script file's hash count when given (empty: left out,
// likewise): a changed script is a new sweep.
std::string sweep_key(const Workload& workload, const Grid& grid, const OffloadOptions& base,
                      std::string_view model_input = {}, const DeviceModel* device_model = nullptr,
                      std::string_view blocks = {}, int64_t device_capacity = 0,
                      std::string_view script = {}, std::string_view script_hash = {});

struct SweepSpec {
  std::string name;
  Workload workload;
  Grid grid;
  OffloadOptions base;
  Environment env;
  Shard shard{1, 1};
  // A TorchScript model's input spec when it differs from the default (see sweep_key); the same
  // model with another input is another sweep.
  std::string model_input;
  // A TorchScript model's block path when given (WorkloadSpec::blocks; see sweep_key).
  std::string blocks;
  // The device model the backend was prepared with (prepare_backend), for the sweep's identity.
  std::optional<DeviceModel> device_model;
  // The host-sim device capacity the backend was prepared with (0: unlimited), likewise.
  int64_t device_capacity = 0;
  Collector collector = Collector::Auto;
  // Record each point's allocator history (RunSpec::memory_history; host-sim).
  bool memory_history = false;
  // A predict-first sweep's prediction of every grid point (sweep left invalid: run_sweep fills it
  // in), stored with the sweep once it is found or created, before any point is measured, so that a
  // front end shows them while the measurements come in. Empty: nothing predicted.
  std::vector<PointPrediction> predictions;
  // Empty: every point of the shard. Else only these grid indices are measured (a predict-first
  // sweep's points that matter, predict.hpp); the others stay unmeasured, and the same sweep run
  // again without the list measures them.
  std::vector<int64_t> only;
  // Each point is measured this many times, in rounds: every point once, then every point again,
  // so that a drift in machine speed falls on all of them alike. The rounds after the first are
  // runs labelled "NAME point I (sweep S, repeat K of N)"; the point keeps its first run and its
  // step time becomes the median (with its interval) over the steps of all its runs. Not part of
  // the sweep's identity: the same sweep run again with a larger N adds the missing rounds.
  int64_t repeat = 1;
  // A script sweep (script_point.hpp): the command line, and the hash of its script file (empty:
  // no file found, the command alone is the identity). Both are part of the sweep's key. Empty
  // for a built-in workload.
  std::string script;
  std::string script_hash;
};

// The key run_sweep finds or creates the sweep of `spec` by.
std::string sweep_key(const SweepSpec& spec);

// One measurement of one sweep point, as run_sweep and refine_finalists ask for it.
struct PointRun {
  SweepId sweep;
  int64_t index = 0;
  EngineConfig config;
  std::string label;  // the run's label: "NAME point I", "... (sweep S, repeat K of N)", ...
  int64_t steps = 0;  // measured steps wanted (refine); 0: as the sweep's workload says
};

// Measures sweep points, one run each. Implementations: WorkloadMeasurer (a built-in workload, in
// this process) and ScriptMeasurer (script_point.hpp: the user's script, a process per point).
class PointMeasurer {
 public:
  virtual ~PointMeasurer() = default;
  // Measures `run` as one run written to `store` and returns that run as it finished (id, status,
  // error, summary). A point that fails or runs out of memory is a result, not an exception;
  // exceptions are for a store that cannot be written. A measurer that can stop in the middle of
  // a point when *cancel becomes true returns the run Interrupted: the sweep then leaves the point
  // pending (measured again on resume) and stops.
  virtual RunRecord measure(const PointRun& run, Store& store, const std::atomic<bool>* cancel) = 0;
  // Whether measure() honours PointRun::steps. One that cannot (a script runs the steps it runs)
  // is refined by measuring each finalist once more and pooling the steps of its runs.
  virtual bool sets_steps() const { return true; }
};

// A built-in (or TorchScript) workload measured in this process by run_measured (runner.hpp), with
// the spec's workload, base options, environment and collector. Both must outlive it. A point in
// progress always completes (cancel is looked at between points).
class WorkloadMeasurer final : public PointMeasurer {
 public:
  WorkloadMeasurer(WorkloadInstance& workload, const SweepSpec& spec)
      : workload_(workload), spec_(spec) {}
  RunRecord measure(const PointRun& run, Store& store, const std::atomic<bool>* cancel) override;

 private:
  WorkloadInstance& workload_;
  const SweepSpec& spec_;
};

struct SweepProgress {
  int64_t done = 0;   // points finished in this invocation or earlier (this shard), anywhere
  int64_t total = 0;  // points in this shard, times SweepSpec::repeat
  // The point just finished, here or by another process; null for points found finished already.
  const PointRecord* last = nullptr;
};

struct SweepOutcome {
  SweepId sweep;
  int64_t ran = 0;       // measured here
  int64_t skipped = 0;   // already finished when this sweep came to them (resume)
  int64_t by_other = 0;  // measured by another process while this one waited for them
  int64_t ok = 0, failed = 0, oom = 0;  // of the points measured here
  int64_t repeated = 0;                 // runs of later rounds (SweepSpec::repeat) made here
  bool interrupted = false;
};

// Runs the points of `spec.shard` not yet finished in `store`. The sweep is found or created by its
// key (Store::create_sweep). Each point is claimed first: a finished one is skipped, one that
// another live process holds is left for later, and the rest are measured here. Then the sweep
// waits for the points it left, looking every ~150 ms: each is either finished by its holder
// (by_other) or, when the holder ended, measured here. A holder on another host cannot be checked
// and is waited for. Stops between points, and while waiting, when *cancel becomes true (the point
// in progress completes first, unless the measurer stops it: then it stays pending), with
// outcome.interrupted set.
SweepOutcome run_sweep(PointMeasurer& measurer, const SweepSpec& spec, Store& store,
                       const std::function<void(const SweepProgress&)>& progress = {},
                       const std::atomic<bool>* cancel = nullptr);
// The same with a WorkloadMeasurer of `workload`.
SweepOutcome run_sweep(WorkloadInstance& workload, const SweepSpec& spec, Store& store,
                       const std::function<void(const SweepProgress&)>& progress = {},
                       const std::atomic<bool>* cancel = nullptr);

// What refine_finalists did.
struct RefineOutcome {
  std::vector<int64_t> remeasured;  // point indices measured again (baseline first)
  int64_t steps = 0;                // measured steps asked of each point, over all its rounds
  bool interrupted = false;
};

// At most this many points are measured again: the chosen one and its ties nearest in step time.
constexpr size_t kMaxFinalists = 8;
// The rounds a refinement interleaves: in each, the baseline and every finalist once.
constexpr int64_t kRefineRounds = 3;

// Measures again the points that the recommendation under `constraint` cannot tell apart (the
// chosen point and its ties, recommend.hpp), and the baseline they are compared with (first, and
// beyond kMaxFinalists), interleaved (A/B): kRefineRounds rounds, each measuring the baseline and
// every finalist once, so that all meet the machine in the same state rather than minutes apart.
// A measurer that sets the steps gives each round ceil(steps / kRefineRounds) of them; one that
// cannot (PointMeasurer::sets_steps: a script) runs as it runs. Each round's run is labelled
// "NAME point I (sweep S, re-measured, round R of N)"; a point's new figure pools the steps of its
// rounds (its run becomes the last round's; its first run stays in the store, outside the figure:
// it was measured at another time). A round already in the store is not measured again (a resumed
// sweep goes on where it stopped); a point whose every round failed keeps its first result.
// Nothing happens when the choice is clear of the noise, when `steps` <= 0, or when *cancel is true
// (checked before each run).
RefineOutcome refine_finalists(PointMeasurer& measurer, const SweepSpec& spec, Store& store,
                               SweepId sweep, const Constraint& constraint, int64_t steps,
                               const std::atomic<bool>* cancel = nullptr);
// The same with a WorkloadMeasurer of `workload`.
RefineOutcome refine_finalists(WorkloadInstance& workload, const SweepSpec& spec, Store& store,
                               SweepId sweep, const Constraint& constraint, int64_t steps,
                               const std::atomic<bool>* cancel = nullptr);

// Copies every sweep, point and run (with steps, events, occupancy) of `src` into `dst`. Sweeps are
// matched by key (create_sweep finds dst's sweep or creates it); a point already finished in dst is
// kept, a pending one is replaced. A sweep's predictions (predict-first) come along where dst has
// none for that point (the same key, so the same device model: the same figures). Returns the
// number of points copied.
int64_t merge_stores(Store& dst, Store& src);

}  // namespace offtune::profiler
