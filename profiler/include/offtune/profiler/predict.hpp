// The what-if predictor: from one instrumented run of a workload, the step time, peak device memory
// and hidden-copy share of any engine configuration, without running it.
//
// The recording (record_trace) runs one step with the engine set to see everything and change
// nothing it measures: every tensor it could offload is copied on the compute stream over a link
// that costs no time, so no storage is held for a copy and no op waits. What it keeps is the step
// as the device saw it: each allocation and free of device memory, each saved tensor with its
// storage, span, version and size, when autograd unpacked and released it, and the phase marks,
// all on the device model's compute clock.
//
// A prediction (predict) replays that step under a configuration's rules, as the engine applies
// them (offloader.cpp): which tensors stay (min_offload_size), which share a copy
// (de-duplication), the forward window (count, bytes, or the reference's id rule), early release
// of finished copies, reloads and prefetch in backward; copies on a copy clock with the link
// model's times, and every wait moving the compute clock. A storage lives while the step holds it
// (its recorded life), a kept saved tensor holds it, or a copy in the window does; a reload buffer
// lives from its reload to its release. The figures follow the runner's definitions (runner.cpp,
// metrics.cpp): the step from its start to the drain of the last copy, the peak of bytes allocated,
// hidden copy time as copy time overlapped by the compute thread's busy time.
//
// Limits: host-sim with a device model only (on a GPU or on this CPU's clock an op's duration is
// not known in advance of running it); one offload scope per step; no device capacity (prefetch's
// out-of-memory guards never trigger), so a configuration that would not fit is flagged by
// comparing its predicted peak with the capacity, not replayed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  std::vector<Event> events;  // in the order they happened
  std::vector<Block> blocks;
  std::vector<Slot> slots;
  int64_t step_ns = 0;         // the recorded step, compute only
  int64_t base_allocated = 0;  // device bytes allocated when the step began
  Semantics semantics = Semantics::Offtune;
  std::string device_model;  // the model's name
  double record_ms = 0.0;    // wall time the recording took (warm-up included)
};

// Records one step of `workload` (after spec.workload.warmup unmeasured ones) under `semantics`.
// `base` gives the backend (must be host-sim) and the pool settings; its knobs are replaced. Throws
// std::invalid_argument (one line) when there is no device model or the backend is not host-sim.
Trace record_trace(WorkloadInstance& workload, const Workload& spec, const OffloadOptions& base,
                   Semantics semantics);

struct Prediction {
  int64_t step_ns = 0;
  int64_t peak_allocated = 0;
  double hidden_copy_pct = 0.0;  // 0 when nothing was copied
  int64_t offloaded_bytes = 0;
  int64_t reloaded_bytes = 0;
  int64_t copies = 0;
  int64_t window_waits = 0;
  int64_t stalled_ns = 0;  // compute time spent waiting for copies
  double step_ms() const { return static_cast<double>(step_ns) / 1e6; }
};

// The figures of `config` (offload false: the baseline) over `link`. The trace must have been
// recorded under config.semantics (std::invalid_argument otherwise).
// Whether the predictor can replay `config`: no checkpointing, every saved tensor offloadable, the
// host tier, no layer offloading (the engine variants change what a step saves and moves: they are
// measured).
inline bool plain_offloading(const EngineConfig& config) {
  return !config.checkpoint.enabled() && config.offload_set == OffloadSet::All &&
         config.tier == Tier::Host && config.layer_offload == 0;
}

Prediction predict(const Trace& trace, const EngineConfig& config, const LinkModel& link);

// Every point of `configs` predicted, points[i] over links[i]: one step recorded per semantics the
// points use (offtune's when there is only the baseline), then each point replayed. Wall times of
// the two phases, for the user to weigh against measuring. Throws as record_trace does.
struct GridPrediction {
  std::vector<Prediction> points;
  size_t traces = 0;  // steps recorded
  double record_ms = 0.0;
  double predict_ms = 0.0;
};
GridPrediction predict_grid(WorkloadInstance& workload, const Workload& spec,
                            const OffloadOptions& base, const std::vector<EngineConfig>& configs,
                            const std::vector<LinkModel>& links);

// A prediction as a sweep point (status ok, every step the same), so that the recommender and the
// points table take it as they take a measured one.
PointRecord as_point(int64_t index, const EngineConfig& config, const Prediction& prediction);

// A prediction as the store keeps it (Store::put_predictions): its figures, "what-if, offtune
// VERSION" as the predictor, stamped now; the sweep is left for the caller.
PointPrediction as_prediction_record(int64_t index, const Prediction& prediction);

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
