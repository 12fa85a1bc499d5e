// The what-if predictor: from one instrumented run of a workload, the step time, peak device memory
// and hidden-copy share of any engine configuration, without running it.
//
// The recording (record_trace) runs the step with the engine set to see everything and change
// nothing it measures: every tensor it could offload is copied on the compute stream over a link
// that costs no time, so no storage is held for a copy and no op waits. What it keeps is the step
// as the device saw it: each allocation and free of device memory, each saved tensor with its
// storage, span, version and size, when autograd unpacked and released it, and the phase marks.
// Two clocks:
// - a device model's (host-sim with --device-model): the model's kernel times, one step, exact;
// - this CPU's (host-sim without one): the ops' measured wall times, with the engine's own work
//   (its hooks and the recording's inline copies) taken out, the median of several steps gap by
//   gap; the inline copies measure this machine's copy rate each way, and the hooks' bookkeeping
//   is measured per pack and per unpack and put back for the points that offload.
// A step is recorded per (semantics, checkpoint policy, offload set) a grid's points use: those
// change what a step saves and recomputes; everything else a point sets is replayed.
//
// A prediction (predict) replays that step under a configuration's rules, as the engine applies
// them (offloader.cpp): which tensors stay (min_offload_size), which share a copy
// (de-duplication), the forward window (count, bytes, or the reference's id rule), early release
// of finished copies, reloads and prefetch in backward; copies on a copy clock with the link
// model's times (on this CPU's clock, no faster than the copy rate measured), and every wait
// moving the compute clock. A storage lives while the step holds it (its recorded life), a kept
// saved tensor holds it, or a copy in the window does; a reload buffer lives from its reload to
// its release. The figures follow the runner's definitions (runner.cpp, metrics.cpp): the step
// from its start to the drain of the last copy, the peak of bytes allocated, hidden copy time as
// copy time overlapped by the compute thread's busy time.
//
// Limits: host-sim only (on a GPU the recording would need CUPTI's kernel times); one offload
// scope per step; no device capacity (prefetch's out-of-memory guards never trigger), so a
// configuration that would not fit is flagged by comparing its predicted peak with the capacity,
// not replayed; reserved bytes are replayed through the allocator's model from the step's own
// allocations (blocks from before the step that the trace does not know one by one count as one);
// the disk tier and layer offloading are measured.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "offtune/checkpoint_policy.hpp"
#include "offtune/observer.hpp"
#include "offtune/options.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/workload.hpp"

namespace offtune::profiler {

struct Trace {
  enum class Kind : uint8_t {
    Alloc,         // block allocated
    Free,          // block freed by the step (its own references dropped)
    Pack,          // slot saved
    Unpack,        // slot unpacked in backward
    Release,       // slot released (its node ran, or its graph died)
    ForwardBegin,  // phase marks (the workload's)
    ForwardEnd,
    BackwardEnd,
  };
  struct Event {
    Kind kind = Kind::Alloc;
    int64_t time_ns = 0;  // from the step's start, compute time only
    int64_t index = -1;   // Alloc/Free: a block; Pack/Unpack/Release: a slot
  };
  struct Block {
    int64_t bytes = 0;
    bool before_step = false;  // allocated before the step began (counted in base_allocated)
  };
  struct Slot {
    int64_t id = 0;  // the engine's id (every saved tensor takes one, in pack order)
    KeepReason reason = KeepReason::None;  // None: could be offloaded (by the semantics recorded)
    int64_t block = -1;                    // its storage, for reason None
    int64_t storage_bytes = 0;
    int64_t span_lo = 0;
    int64_t bytes = 0;   // span length
    int64_t weight = 0;  // compared with min_offload_size
    int64_t item_bytes = 1;
    uint32_t version = 0;
    uint64_t generation = 0;
  };
  enum class Clock : uint8_t {
    Model,  // a device model's kernel times
    Cpu,    // this CPU's measured op times
  };
  std::vector<Event> events;  // in the order they happened
  std::vector<Block> blocks;
  std::vector<Slot> slots;
  int64_t step_ns = 0;         // the recorded step, compute only
  int64_t base_allocated = 0;  // device bytes allocated when the step began
  // What the step was recorded under: a trace replays only points that share all three.
  Semantics semantics = Semantics::Offtune;
  CheckpointPolicy checkpoint;
  OffloadSet offload_set = OffloadSet::All;
  Clock clock = Clock::Model;
  std::string device_model;  // the model's name (Clock::Model)
  int64_t steps = 1;         // steps recorded: each gap between events is their median
  // Clock::Cpu: bytes per ns this machine copied each way in the recording (a copy takes at least
  // its bytes at this rate, whatever the link model allows), and the engine's bookkeeping per
  // pack and per unpack of an offloading run (median, copies excluded).
  double d2h_bytes_per_ns = 0.0;
  double h2d_bytes_per_ns = 0.0;
  int64_t pack_hook_ns = 0;
  int64_t unpack_hook_ns = 0;
  double record_ms = 0.0;  // wall time the recording took (warm-up included)

  // Whether `config` can be replayed from this trace (replayable, and recorded under its
  // semantics, checkpoint policy and offload set; the baseline needs only the checkpoint policy).
  bool replays(const EngineConfig& config) const;
  // What a prediction from it rests on, one line: "host-sim modelling h100-sxm, 1 step recorded"
  // or "this CPU's clock (host-sim), median of 5 recorded steps, copies at >= 9.1 GB/s".
  std::string source() const;
};

// Records `workload` (after spec.workload.warmup unmeasured steps) under the semantics,
// checkpoint policy and offload set of `like` (its other knobs do not matter): one step on a
// device model's clock, kCpuSteps on this CPU's. `base` gives the backend (must be host-sim) and
// the pool settings; its knobs are replaced. Throws std::invalid_argument (one line) when the
// backend is not host-sim or `like` is not replayable.
inline constexpr int64_t kCpuSteps = 5;
// The engine settings a recording runs under, for a step of `like`'s semantics and offload set:
// every tensor it may offload copied on the compute stream over a free link, one at a time.
OffloadOptions recording_options(OffloadOptions base, const EngineConfig& like);
Trace record_trace(WorkloadInstance& workload, const Workload& spec, const OffloadOptions& base,
                   const EngineConfig& like);
// The same under `semantics`, without checkpointing, every saved tensor offloadable.
Trace record_trace(WorkloadInstance& workload, const Workload& spec, const OffloadOptions& base,
                   Semantics semantics);

// Records steps of an offloader its caller drives (a training loop of its own, such as a script's
// under `offtune predict --script`): from construction to destruction it observes the offloader and
// host-sim's allocations; each begin_step/end_step pair is a recorded step, and finish() is the
// trace (the median of the steps, as record_trace's). The offloader must run on host-sim with
// recording_options() and outlive the session; the step's phases are one (its start to its end)
// unless end_step is given them. One session at a time (host-sim has one allocation listener).
class TraceSession {
 public:
  explicit TraceSession(ActivationOffloader& offloader);
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;
  void begin_step();
  // std::logic_error without a step begun.
  void end_step(const StepPhases* phases = nullptr);
  int64_t steps() const;
  // std::logic_error when no step was recorded.
  Trace finish(const CheckpointPolicy& checkpoint = CheckpointPolicy::none());

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A trace in a file of its own (JSON), written through a temporary file renamed into place, and
// read back: std::invalid_argument (one line naming the file) for a file that is not a trace.
void save_trace(const Trace& trace, const std::string& path);
Trace load_trace(const std::string& path);

struct Prediction {
  int64_t step_ns = 0;
  int64_t peak_allocated = 0;
  // The step's allocations and frees (reload buffers included) replayed through CUDA's caching
  // allocator as host-sim models it (offtune/allocator_model.hpp), after the blocks from before
  // the step and one warm-up step: what it would reserve at the peak.
  int64_t peak_reserved = 0;
  double hidden_copy_pct = 0.0;  // 0 when nothing was copied
  int64_t offloaded_bytes = 0;
  int64_t reloaded_bytes = 0;
  int64_t copies = 0;
  int64_t window_waits = 0;
  int64_t stalled_ns = 0;  // compute time spent waiting for copies
  // The physical limit: no schedule of these copies over this link finishes the step sooner. The
  // compute (with the hooks' bookkeeping) cannot shrink, and every copy runs on the one copy
  // stream after the first tensor is saved and before the step ends; in single-stream mode every
  // copy is on the compute stream. bound_ns - the compute is the least exposed copy time.
  int64_t bound_ns = 0;
  int64_t compute_ns = 0;  // the step's compute, hooks included, no waits
  double step_ms() const { return static_cast<double>(step_ns) / 1e6; }
  double bound_ms() const { return static_cast<double>(bound_ns) / 1e6; }
};

// The figures of `config` (offload false: the baseline) over `link`. The trace must have been
// recorded under config.semantics (std::invalid_argument otherwise).
// Whether the predictor can replay `config`: the host tier and no layer offloading (the disk tier
// and streamed weights move what a recording does not see: they are measured). Checkpointing and
// --offload boundaries are replayed from a step recorded under them.
inline bool replayable(const EngineConfig& config) {
  return config.tier == Tier::Host && config.layer_offload == 0;
}

Prediction predict(const Trace& trace, const EngineConfig& config, const LinkModel& link);

// Every point of `configs` predicted, points[i] over links[i]: one trace recorded per semantics,
// checkpoint policy and offload set the points use, then each point replayed. Wall times of the
// two phases, for the user to weigh against measuring. Throws as record_trace does.
struct GridPrediction {
  std::vector<Prediction> points;
  size_t traces = 0;   // traces recorded
  std::string source;  // what the predictions rest on (Trace::source of the first trace)
  double record_ms = 0.0;
  double predict_ms = 0.0;
};
GridPrediction predict_grid(WorkloadInstance& workload, const Workload& spec,
                            const OffloadOptions& base, const std::vector<EngineConfig>& configs,
                            const std::vector<LinkModel>& links);
// The same with the traces from `record`, called once per semantics, checkpoint policy and offload
// set the points use, with a point of them (a script's steps: script_point.hpp).
GridPrediction predict_grid(const std::function<Trace(const EngineConfig& like)>& record,
                            const std::vector<EngineConfig>& configs,
                            const std::vector<LinkModel>& links);

// A prediction as a sweep point (status ok, every step the same), so that the recommender and the
// points table take it as they take a measured one.
PointRecord as_point(int64_t index, const EngineConfig& config, const Prediction& prediction);

// A prediction as the store keeps it (Store::put_predictions): its figures, "what-if (SOURCE),
// offtune VERSION" as the predictor (the trace's source, when given), stamped now; the sweep is
// left for the caller.
PointPrediction as_prediction_record(int64_t index, const Prediction& prediction,
                                     const std::string& source = {});

// Which points are on the predicted front of peak memory against step time: no other point is at
// least as good in both and better in one, and of points predicted exactly alike only the first.
std::vector<bool> predicted_front(const std::vector<Prediction>& predicted);

// The points of a grid worth measuring after predicting all of them: the baseline, the predicted
// front (predicted_front), and each front point's neighbours in the grid (the next
// min_offload_size or max_fwd_stash_size up or down, every other knob the same), which is where a
// prediction that is off would move the front. Grid indices, ascending. `predicted[i]` is
// configs[i]'s.
std::vector<int64_t> points_that_matter(const std::vector<EngineConfig>& configs,
                                        const std::vector<Prediction>& predicted);

}  // namespace offtune::profiler
