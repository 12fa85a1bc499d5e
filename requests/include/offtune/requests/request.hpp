// offtune::requests: what a user asks of offtune, in one place for every front end. A run or sweep
// request holds the values as the user gave them (the CLI's flags, the dashboard's form fields),
// with the defaults both front ends share; check() validates every field and says what is wrong
// with each, in the CLI's terms, or parses the whole request once into a ValidRun or ValidSweep,
// every mode (backend, link, dtype, collector) into enums; the to_*() functions hand its parts to
// the profiler and the samples. execute.hpp runs a valid request.
//
// The engine's knobs are not fields here: a request holds each as the user typed it, by the knob's
// key (offtune/knobs.hpp), and check() reads every one through the knob table. A new knob is a
// row of that table; the front ends present every row.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "offtune/device_model.hpp"
#include "offtune/options.hpp"
#include "offtune/profiler/backend_request.hpp"
#include "offtune/profiler/records.hpp"
#include "offtune/profiler/sweep.hpp"

namespace offtune::profiler {
enum class MemoryFigure : uint8_t;  // offtune/profiler/recommend.hpp
}

namespace offtune::requests {

// --- Errors by kind
// --------------------------------------------------------------------------------

// A value from the user, refused: what a front end reports as bad input (the CLI's exit 2, Python's
// ValueError), with a one-line what() naming the value and what it takes. Every refusal of this
// layer is one (RequestError included), and so is a model the samples cannot build from what was
// asked (prepare()). The lower layers' refusals of a user's text are their own types, of the same
// kind: profiler::ParseError (a size, a list, a shard) and OptionsError (an engine option). Any
// other exception, std::invalid_argument included, thrown while a valid request runs is a fault
// of the work (a model, the predictor, libtorch), not the user's input.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};
// Whether `error` refuses a value the user gave (UsageError, profiler::ParseError, OptionsError):
// the one rule by which every front end tells bad input from a fault of the work.
bool is_refused_input(const std::exception& error);

// --- Modes, parsed once at the edge ------------------------------------------------------------

enum class Dtype : uint8_t { Fp32, Bf16, Fp16 };
// "fp32"/"float32"/"float", "bf16"/"bfloat16", "fp16"/"float16"/"half". Throws UsageError
// listing the valid names.
Dtype parse_dtype(std::string_view text);
std::string_view to_string(Dtype dtype);  // "fp32", "bf16", "fp16": what a run records

// The profiler's enum: parsed here, carried as is to the runner.
using profiler::Collector;
// "auto" | "cupti" | "nvtx-only". Throws UsageError listing them.
Collector parse_collector(std::string_view text);
std::string_view to_string(Collector collector);

// --- Requests, as given --------------------------------------------------------------------------

// The valid range of each whole-number field, for check() and for a form's spin boxes.
struct Range {
  int64_t lo, hi;
};
inline constexpr Range kBatchRange{1, int64_t{1} << 20};
inline constexpr Range kSeqRange{1, int64_t{1} << 24};
inline constexpr Range kStepsRange{1, 100000};
inline constexpr Range kWarmupRange{0, 100000};
// 20 steps give the median a 95.9% interval between the 6th and 15th fastest steps.
inline constexpr int64_t kDefaultRefineSteps = 20;
inline constexpr Range kRefineStepsRange{0, 100000};
inline constexpr Range kRepeatRange{1, 1000};

// What a front end offers in its lists: the samples' built-in models, and the names the parsers
// below take (first the canonical one of each).
std::vector<std::string> model_names();
std::vector<std::string> dtype_names();         // fp32, bf16, fp16
std::vector<std::string> backend_names();       // auto, cuda, host-sim
std::vector<std::string> device_model_names();  // "" (none) and the built-in profiles

// The default input of a TorchScript model (samples/registry.hpp has the grammar).
inline constexpr std::string_view kDefaultInputSpec = "tokens:int64[B,T]:vocab=512";

// The model and the steps measured on it (--model, --batch, --seq, --dtype, --seed, --steps,
// --warmup, --optimizer, --input-spec).
struct WorkloadFields {
  std::string model = "tiny";
  int64_t batch = 4;
  int64_t seq = 128;
  std::string dtype = "fp32";
  uint64_t seed = 0;
  int64_t steps = 3;
  int64_t warmup = 1;
  bool optimizer = false;
  std::string input_spec{kDefaultInputSpec};  // TorchScript models only
  // Built-in decoders only: LoRA adapters of this rank, the base frozen (0 = full fine-tuning).
  int64_t lora_rank = 0;
  // TorchScript models only: the module path of the blocks that --checkpoint runs as regions
  // (empty: found in the model).
  std::string blocks;
};
inline constexpr Range kLoraRankRange{0, 4096};

// Where it is measured (--backend, --device-capacity, --threads, --collector; the link is a knob).
struct BackendFields {
  std::string backend = "auto";  // auto (cuda when a GPU is visible), cuda, host-sim
  // host-sim: time steps as this GPU would (device_model_names() or a JSON file); empty: as this
  // CPU does.
  std::string device_model;
  std::string device_capacity;  // host-sim device memory ("2GiB"); empty: unlimited
  // Intra-op threads: "auto" (cores-1 on host-sim, torch's choice on cuda) or 1..the machine's
  // cores (kMaxThreads()).
  std::string threads = "auto";
  std::string collector = "auto";
};

// The engine's knobs as the user typed them, by knob key (offtune/knobs.hpp): a run takes one value
// of each, a sweep a list of each axis ("0,1,2", "on,off", "1KiB:64MiB:x8"). A knob not in the map
// takes its default text (profiler::default_text): a front end fills in only what it was given.
using KnobTexts = std::map<std::string, std::string, std::less<>>;
// The default bound on a sweep's points (--max-points), and the most it can be raised to.
inline constexpr int64_t kDefaultMaxPoints = 1000;
inline constexpr int64_t kMaxMaxPoints = 1000000;
// The most intra-op threads a run may ask for: the machine's hardware threads (at least 1).
int64_t max_threads();

struct RunRequest {
  std::string db;
  WorkloadFields workload;
  BackendFields backend;
  KnobTexts knobs;
  bool no_offload = false;  // the baseline
  // Record the allocator's history for a memory snapshot (--memory-history; host-sim only:
  // check() refuses it with --backend cuda).
  bool memory_history = false;
  std::string label;
  // A knob's text: the map's, or its default for a run.
  std::string knob_text(std::string_view key) const;
};

struct SweepRequest {
  std::string db;
  std::string name = "sweep";
  WorkloadFields workload;
  BackendFields backend;
  // The grid: a list or range of each axis (profiler/units.hpp has the syntax), one value of the
  // other knobs.
  KnobTexts knobs;
  std::string shard = "1/1";
  // A grid larger than this is refused before anything runs: every point is a separate measured
  // run, and a typo in a range ("1B:1000B:+1") would otherwise queue a sweep that never ends.
  int64_t max_points = kDefaultMaxPoints;
  // When the recommendation (default constraint) cannot tell its choice from other points within
  // noise, those finalists are measured again with this many steps (profiler::refine_finalists)
  // before the sweep ends; 0: never. Only a whole sweep (shard 1/1) refines.
  int64_t refine_steps = kDefaultRefineSteps;
  // Predict every point from one recorded step first (profiler/predict.hpp), then measure only the
  // points that matter (the predicted front and its neighbours). Needs a device model on host-sim.
  bool predict_first = false;
  // Each point measured this many times, in interleaved rounds (profiler::SweepSpec::repeat).
  int64_t repeat = 1;
  // Record each point's allocator history for a memory snapshot (--memory-history, as a run's;
  // host-sim only, and not with --script: check() refuses both).
  bool memory_history = false;
  // Sweep the user's own training script instead of a built-in model (profiler/script_point.hpp):
  // each point runs `/bin/sh -c script` once, in a fresh process. The workload's fields but
  // --warmup do not apply then (nor --checkpoint, --layer-offload, --offload boundaries,
  // --predict-first, --device-capacity): check() refuses each one given.
  std::string script;
  // Seconds a script's point may run before it is stopped with its process group; empty: no
  // bound. Only with --script.
  std::string timeout_per_point;
  // The flags the user gave (as the CLI names them), so that a flag that does not apply is
  // refused even when given its default value. A form leaves it empty: a field that differs from
  // its default counts as given either way.
  std::vector<std::string> flags_given;
  // A knob's text: the map's, or its default for a sweep (the grid pair's default lists).
  std::string knob_text(std::string_view key) const;
};

// The flags a script sweep refuses, in the order check() reports them.
std::vector<std::string> script_refused_flags();

// Looks up an environment variable (nullopt: unset); the process's environment by default.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();
// --shard: "I/N", or "auto": the index and count from the scheduler running this process, in this
// order: Slurm's job array (SLURM_ARRAY_TASK_ID minus SLURM_ARRAY_TASK_MIN, 0 when unset, and
// SLURM_ARRAY_TASK_COUNT), then a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with the count in
// OFFTUNE_SHARD_COUNT: the manifest sets it from .spec.completions). Throws UsageError naming
// the variables when none is set or their values do not make a shard.
profiler::Shard resolve_shard(std::string_view text, const EnvLookup& env = process_environment());

// --- Checking, once
// -------------------------------------------------------------------------------

// One bad field: its flag as the CLI names it ("--prefetch") and a one-line message that names it
// too ("--prefetch must be between 0 and 64, got 65").
struct FieldError {
  std::string field;
  std::string message;
};

// Thrown for an invalid request (Checked::value()); what() is the first message, errors() all of
// them.
class RequestError : public UsageError {
 public:
  explicit RequestError(std::vector<FieldError> errors);
  const std::vector<FieldError>& errors() const { return errors_; }

 private:
  std::vector<FieldError> errors_;
};

// What check() says of a request: every bad field, or the request parsed.
template <typename Valid>
struct Checked {
  // Every bad field, in the order the CLI's help lists them; empty when the request is valid.
  std::vector<FieldError> errors;
  // The request, parsed: set exactly when errors is empty.
  std::optional<Valid> valid;

  bool ok() const { return valid.has_value(); }
  // The valid request; throws RequestError with every error when there is none.
  const Valid& value() const& {
    if (!valid) throw RequestError(errors);
    return *valid;
  }
  Valid value() && {
    if (!valid) throw RequestError(errors);
    return std::move(*valid);
  }
};

// A request that check() found valid, every field parsed once into the profiler's and the
// samples' typed values. Only check() makes one, so holding one means the request was valid; the
// conversions below and prepare() (execute.hpp) take only this, and nothing after check() checks,
// parses or reads a file again (a device model file is read once, by check(): a file changed or
// removed after it changes nothing). A front end checks once and hands this inward. What a run
// and a sweep share:
class ValidRequest {
 public:
  Dtype dtype() const { return dtype_; }
  Collector collector() const { return collector_; }

 protected:
  ValidRequest() = default;
  friend profiler::Workload to_workload(const ValidRequest& request);
  friend profiler::BackendRequest to_backend(const ValidRequest& request);

  Dtype dtype_ = Dtype::Fp32;
  Collector collector_ = Collector::Auto;
  profiler::Workload workload_;
  profiler::BackendRequest backend_;
};

class ValidRun : public ValidRequest {
 public:
  const RunRequest& request() const { return request_; }  // as given: db, label, the model's fields

 private:
  friend Checked<ValidRun> check(const RunRequest& request);
  friend profiler::EngineConfig to_engine_config(const ValidRun& run);
  ValidRun() = default;

  RunRequest request_;
  profiler::EngineConfig config_;
};

class ValidSweep : public ValidRequest {
 public:
  const SweepRequest& request() const { return request_; }
  profiler::Shard shard() const { return shard_; }  // --shard resolved (auto: the scheduler's)
  // A script's point's bound in seconds (--timeout-per-point); 0: none.
  double timeout_s() const { return timeout_s_; }

 private:
  friend Checked<ValidSweep> check(const SweepRequest& request);
  friend profiler::Grid to_grid(const ValidSweep& sweep);
  friend int64_t point_count(const ValidSweep& sweep);
  ValidSweep() = default;

  SweepRequest request_;
  profiler::Grid grid_;
  profiler::Shard shard_;
  int64_t points_ = 0;
  double timeout_s_ = 0.0;
};

// Checks every field of a request and, when all are valid, parses it. Reads nothing but a device
// model file (--device-model), once; touches no device and no libtorch state: a TorchScript path is
// checked when it is loaded (prepare()).
Checked<ValidRun> check(const RunRequest& request);
Checked<ValidSweep> check(const SweepRequest& request);
// check(request).value(): the request parsed, or RequestError naming every bad field. What each
// front end calls, once, before it runs a request.
ValidRun require_valid(const RunRequest& request);
ValidSweep require_valid(const SweepRequest& request);

// --- Conversion of a valid request
// ----------------------------------------------------------------

// What a run records of its workload (dtype by its short name). A script sweep's is "script" with
// its --warmup.
profiler::Workload to_workload(const ValidRequest& request);
// The backend as prepare_backend() takes it (profiler/backend_request.hpp), its device model read.
profiler::BackendRequest to_backend(const ValidRequest& request);
// A run's engine settings (link recorded by name).
profiler::EngineConfig to_engine_config(const ValidRun& run);
// A sweep's grid: the points' shared knobs are the run's defaults but for the sweep's own fields,
// so that a sweep's key (and resuming) does not depend on the front end that started it.
profiler::Grid to_grid(const ValidSweep& sweep);
// The number of points a sweep request measures, the baseline included (all shards). Counted from
// the lists' lengths, without expanding the grid.
int64_t point_count(const ValidSweep& sweep);

// --- Single values that are not part of a run or sweep request
// ------------------------------------ Each throws UsageError with one line naming
// `flag`; the CLI's recommend, report, export and --fail-if, and the dashboard's constraint fields
// use them.

// A store id (a sweep's or a run's): a whole number, at least 1.
int64_t parse_id(std::string_view flag, std::string_view text);
// A memory budget: a size, at least 1 byte.
int64_t parse_memory_budget(std::string_view flag, std::string_view text);
// The figure a memory budget is checked against: "reserved" or "allocated".
profiler::MemoryFigure parse_memory_figure(std::string_view flag, std::string_view text);
// A slowdown factor or a time in milliseconds: a positive finite number.
double parse_positive(std::string_view flag, std::string_view text);
// A tolerance in percent, "1" or "1%" or "0.5%": returned as a fraction in [0, 1) (0.01).
double parse_tolerance_percent(std::string_view flag, std::string_view text);

}  // namespace offtune::requests
