// What the profiler records, as plain structs shared by the store, the exporters, the sweep runner
// and the front ends (CLI, GUI). Times are nanoseconds on one monotonic clock per run (time_ns
// fields) or Unix epoch nanoseconds (wall-clock fields, named *_unix_ns). Sizes are bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/ids.hpp"
#include "offtune/knobs.hpp"

namespace offtune::profiler {

struct RunIdTag {};
struct SweepIdTag {};
struct PointIdTag {};
using RunId = Id<RunIdTag>;
using SweepId = Id<SweepIdTag>;
using PointId = Id<PointIdTag>;

// Where a run happened.
struct Environment {
  std::string offtune_version;
  std::string torch_version;
  std::string backend;  // "cuda" | "host-sim"
  std::string device;   // GPU name, or "host-sim (<cpu>)"
  std::string git_revision;
  std::string host;
};

// What was run: the model and the batches.
struct Workload {
  std::string model;  // built-in preset ("tiny", "small", "1b", "gpt-tiny", "mlp") or a .pt path
  int64_t batch = 0;
  int64_t seq = 0;
  std::string dtype;  // "fp32" | "bf16" | "fp16"
  uint64_t seed = 0;
  int64_t steps = 0;   // measured steps
  int64_t warmup = 0;  // unmeasured steps before them
  bool optimizer = false;
  // Built-in decoders: LoRA adapters of this rank on every projection, the base frozen; 0 = none
  // (full fine-tuning). Frozen weights are what layer offloading moves.
  int64_t lora_rank = 0;
};

// The engine settings of one run or sweep point, typed (offtune/knobs.hpp: every knob and its
// row in the knob table). offload = false is a point that offloads no activation.
using EngineConfig = Knobs;

// The engine variant of a config in words, "" for plain offloading to host memory without
// checkpointing: "checkpoint all", "checkpoint every:2, offload boundaries", "tier disk", ... (the
// knob table's variant knobs that differ from their defaults).
std::string describe_variant(const EngineConfig& config);

enum class RunStatus { Running, Ok, Failed, OutOfMemory, Interrupted };
const char* to_string(RunStatus s);
RunStatus parse_run_status(const std::string& s);  // throws std::invalid_argument

// Summary figures of a run (medians over measured steps unless said otherwise).
struct RunSummary {
  double step_ms_median = 0.0;
  double step_ms_min = 0.0;
  double step_ms_max = 0.0;
  double step_ms_stddev = 0.0;
  // Confidence interval of the median step time (metrics.hpp, StepStats) and its coverage, 0..1.
  // A level of 0 with low = high = 0: not known (written before schema 3); use min..max.
  double step_ms_ci_low = 0.0;
  double step_ms_ci_high = 0.0;
  double step_ms_ci_level = 0.0;
  int64_t peak_allocated = 0;  // max over measured steps, backward included
  int64_t peak_reserved = 0;   // held by the caching allocator, at most
  // Device memory outside the caching allocator (DeviceMemory::outside_allocator): the CUDA
  // context and libraries; the peak device total is peak_reserved plus this.
  int64_t device_outside = 0;
  int64_t host_bytes_peak = 0;  // host copies alive at most
  int64_t pinned_bytes = 0;     // pinned host memory reserved by the pool
  // The process's resident host memory at its peak during the run (VmHWM, reset when the run
  // began); 0: not measured (host-sim, whose device memory is host memory, or a kernel without
  // /proc/self/clear_refs).
  int64_t host_rss_peak = 0;
  int64_t offloaded_bytes = 0;   // per measured step
  int64_t reloaded_bytes = 0;    // per measured step
  double hidden_copy_pct = 0.0;  // share of copy time under compute, D2H and H2D together
  double hidden_d2h_pct = 0.0;
  double hidden_h2d_pct = 0.0;
  int64_t exposed_copy_ns = 0;  // per measured step
  int64_t pageable_copies = 0;  // per measured step
  double final_loss = 0.0;
};

// What a run took of the device at its peak: peak reserved plus what lies outside the allocator.
inline int64_t peak_device_total(const RunSummary& s) { return s.peak_reserved + s.device_outside; }

// Whether a run or point copied anything over the link: activations offloaded or reloaded, or
// (layer offloading) frozen weights, which the summary counts in its overlap figures but not in
// offloaded_bytes. Without copies, hidden-copy shares are not applicable ("n/a"), not 0 % (the
// worst).
inline bool copied_anything(const EngineConfig& config, const RunSummary& s) {
  return s.offloaded_bytes > 0 || s.reloaded_bytes > 0 || config.layer_offload > 0;
}

// The step-time interval that comparisons use: the median's confidence interval, or min..max for
// a summary without one (level 0), or the median alone when neither was recorded.
struct StepInterval {
  double low = 0.0;
  double high = 0.0;
  double level = 0.0;  // coverage, 0..1; 0 when not known
};
inline StepInterval step_interval(const RunSummary& s) {
  if (s.step_ms_ci_level > 0 || s.step_ms_ci_low > 0 || s.step_ms_ci_high > 0) {
    return {s.step_ms_ci_low, s.step_ms_ci_high, s.step_ms_ci_level};
  }
  if (s.step_ms_min > 0 || s.step_ms_max > 0) return {s.step_ms_min, s.step_ms_max, 0.0};
  return {s.step_ms_median, s.step_ms_median, 0.0};
}
// Whether two step times are equal within measurement noise: their intervals overlap.
inline bool equal_in_time(const RunSummary& a, const RunSummary& b) {
  const StepInterval x = step_interval(a), y = step_interval(b);
  return x.low <= y.high && y.low <= x.high;
}

struct RunRecord {
  RunId id;
  RunStatus status = RunStatus::Running;
  std::string error;  // one line, for Failed / OutOfMemory
  std::string label;  // free text
  Environment env;
  Workload workload;
  EngineConfig config;
  int64_t started_unix_ns = 0;
  int64_t finished_unix_ns = 0;
  RunSummary summary;
  // Its place in a distributed job (torchrun; schema 7): this process's rank among world_size, and
  // the run of rank 0 in the same store. No job_run: the run is its own job (rank 0, or a single
  // process). Older rows read rank 0 of 1.
  int64_t rank = 0;
  int64_t world_size = 1;
  std::optional<RunId> job_run;
};

// What a process that continues a run begun by another (Store::describe_run: a sweep's script
// point, begun by `offtune sweep --script`, recorded by the script) may write over it: how the
// workload and where it ran are described, and its place in a job. The status, config, label and
// figures stay the begun run's until it finishes.
struct RunDescription {
  Workload workload;
  Environment env;
  int64_t rank = 0;
  int64_t world_size = 1;
  std::optional<RunId> job_run;
};

struct StepRecord {
  RunId run;
  int64_t step = 0;  // 0-based among measured steps
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t offloaded_bytes = 0;
  int64_t reloaded_bytes = 0;
  double hidden_copy_pct = 0.0;
  int64_t exposed_copy_ns = 0;
  double loss = 0.0;
};

// Timeline: one row per interval or instant on a stream.
enum class EventKind {
  Step,      // a measured step (stream 0)
  Forward,   // forward pass (stream 0)
  Backward,  // backward pass (stream 0)
  Compute,   // a kernel or a host-sim compute span (stream 0 or a CUDA stream id)
  CopyD2H,   // offload copy (copy stream)
  CopyH2D,   // reload copy (copy stream)
  Pack,      // instant: a pack decision (bytes, tensor id, name = decision/reason)
  Unpack,    // instant: an unpack (name = source)
  Wait,      // a wait (name = kind)
  // Disk tier traffic, apart from the link's copies (not in copy/compute overlap): on stream
  // kDiskStream, name "disk-write" / "disk-read" / "read-ahead".
  DiskWrite,  // a host copy written to the arena file
  DiskRead,   // a copy read back from it into host memory
  Recompute,  // a checkpointed region rerun in backward (bytes = what it saved, tensor = how many);
              // the last kind (gui/timeline.hpp counts kinds up to it)
};
// The stream of disk events: not a device stream (CUDA's ids are >= 0).
inline constexpr int64_t kDiskStream = -1;
inline bool is_disk(EventKind k) { return k == EventKind::DiskWrite || k == EventKind::DiskRead; }
const char* to_string(EventKind k);
EventKind parse_event_kind(const std::string& s);  // throws std::invalid_argument

struct TimelineEvent {
  RunId run;
  EventKind kind = EventKind::Compute;
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // == start_ns for instants
  int64_t stream = 0;  // 0 = compute, 1 = copy (host-sim); CUDA stream ids on cuda
  int64_t bytes = 0;
  int64_t tensor = -1;  // engine tensor id, -1 when none
  bool pinned = true;
  bool prefetch = false;
  std::string name;
};

// A block's frozen weights copied to the device (layer offloading), apart from the activations'
// reloads: an H2D copy named "weights" or "weights prefetch" by the recorder (tensor -1). On cuda
// CUPTI's copies replace the recorder's and carry no such name.
inline constexpr std::string_view kWeightCopyName = "weights";
inline bool is_weight_copy(const TimelineEvent& e) {
  return e.kind == EventKind::CopyH2D && std::string_view(e.name).starts_with(kWeightCopyName);
}

// An event of `kind` over [start_ns, end_ns], its other fields from `fields` written with
// designated initialisers (kind and times in `fields` are replaced):
//   event_span(EventKind::CopyD2H, 20, 80, {.stream = 1, .bytes = 4096})
inline TimelineEvent event_span(EventKind kind, int64_t start_ns, int64_t end_ns,
                                TimelineEvent fields = {}) {
  fields.kind = kind;
  fields.start_ns = start_ns;
  fields.end_ns = end_ns;
  return fields;
}

struct OccupancySample {
  RunId run;
  int64_t time_ns = 0;
  int64_t fwd_count = 0;
  int64_t fwd_bytes = 0;
  int64_t bwd_count = 0;
  int64_t bwd_bytes = 0;
  int64_t device_bytes = -1;  // allocated device bytes at that time, -1 when unknown
  // Since schema 11; -1 when unknown (older stores, a sample no figure was taken for).
  int64_t reserved_bytes = -1;   // reserved by the caching allocator at that time
  int64_t host_bytes = -1;       // bytes of offtune's host copies alive
  int64_t host_pool_bytes = -1;  // pinned host bytes offtune's pool reserves (what it holds)
};

// A run's memory history (`--memory-history`; host-sim's allocator model, memory_history.hpp): each
// change to device memory as torch's allocator history records it, for a memory snapshot
// (export.hpp). Ordered by `seq`.
struct MemoryEventRecord {
  RunId run;
  int64_t seq = 0;
  int64_t time_ns = 0;  // the engine's clock, as the timeline's
  // torch's names: alloc, free_requested, free_completed, segment_alloc, segment_free,
  // segment_map, segment_unmap, oom, and annotate (offtune's note on a live block, at the pack
  // that offloaded its tensor or the reload that filled it).
  std::string action;
  int64_t addr = 0;
  int64_t size = 0;        // a block's: the bytes asked for; a segment's: its bytes
  int64_t block_size = 0;  // alloc, free_requested: the block's bytes (rounded)
  int64_t stream = 0;
  int64_t device_free = 0;  // oom: what the device had free
  // What offtune knows of the block's tensor: "offloaded by offtune: tensor 12 (step 0)",
  // "reloaded by offtune: tensor 12 (step 0)", else "step 0"; empty for segment events.
  std::string note;
  bool operator==(const MemoryEventRecord&) const = default;
};

// The allocator's segments and blocks where the history ends, one row per block.
struct MemoryBlockRecord {
  RunId run;
  int64_t segment_addr = 0;
  int64_t segment_size = 0;
  int64_t stream = 0;
  bool small_pool = false;
  bool expandable = false;
  int64_t addr = 0;
  int64_t size = 0;
  int64_t requested = 0;
  std::string state;  // torch's: active_allocated, inactive, active_awaiting_free
  std::string note;   // as the block's last alloc event's
  bool operator==(const MemoryBlockRecord&) const = default;
};

struct SweepRecord {
  SweepId id;
  std::string name;
  std::string key;  // identity of (workload, grid): re-running the same sweep resumes it
  Workload workload;
  std::string grid;  // the grid as given (JSON text)
  int64_t created_unix_ns = 0;
};

enum class PointStatus { Pending, Ok, Failed, OutOfMemory };
const char* to_string(PointStatus s);
PointStatus parse_point_status(const std::string& s);  // throws std::invalid_argument

struct PointRecord {
  PointId id;
  SweepId sweep;
  int64_t index = 0;  // position in the grid (stable across shards and resumes)
  EngineConfig config;
  PointStatus status = PointStatus::Pending;
  std::string error;
  RunId run;  // the run that measured it (invalid while pending)
  RunSummary summary;
};

// What the what-if predictor (predict.hpp) said of a grid point, kept with the sweep so that a
// predicted point can be shown beside its measurement, or instead of it where a predict-first sweep
// did not measure it. One per (sweep, index); predicting again replaces it. The device model the
// figures are for is part of the sweep's key.
struct PointPrediction {
  SweepId sweep;
  int64_t index = 0;  // the grid point (PointRecord::index)
  int64_t step_ns = 0;
  int64_t peak_allocated = 0;
  double hidden_copy_pct = 0.0;  // 0 when nothing is copied (see offloaded_bytes)
  int64_t offloaded_bytes = 0;
  std::string predictor;  // what predicted it: "what-if, offtune VERSION"
  int64_t created_unix_ns = 0;
  // What the caching allocator would reserve at the peak (replayed through its model); 0: not
  // predicted (stores before schema 11).
  int64_t peak_reserved = 0;
  double step_ms() const { return static_cast<double>(step_ns) / 1e6; }
  bool operator==(const PointPrediction&) const = default;
};

struct RecommendationRecord {
  SweepId sweep;
  std::string constraint;    // e.g. "memory-budget=8GiB", "max-slowdown=1.2", "none"
  int64_t point_index = -1;  // chosen point, -1 when nothing satisfies the constraint
  std::string rationale;
  std::string snippets_json;  // {"cpp": ..., "trl": ..., "axolotl": ...}
  int64_t created_unix_ns = 0;
};

}  // namespace offtune::profiler
