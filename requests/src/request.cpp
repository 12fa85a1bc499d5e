// Defaults, validation and conversion of run and sweep requests: the only place where they live.
#include "offtune/requests/request.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <thread>
#include <utility>

#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/knob_text.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/samples/registry.hpp"

namespace offtune::requests {

namespace {

static_assert(kDefaultInputSpec == samples::kDefaultInputSpec,
              "one default input for TorchScript models");

// Collects the errors of one request, one per field: the first problem a field has is the one
// reported.
class Checker {
 public:
  // Runs `parse`; a std::invalid_argument (ParseError included) becomes the field's message,
  // prefixed with the flag unless the message names it already.
  template <typename Parse>
  void parse(std::string_view field, Parse&& parse) {
    try {
      std::forward<Parse>(parse)();
    } catch (const std::invalid_argument& e) {
      fail(field, e.what());
    }
  }
  void fail(std::string_view field, std::string message) {
    if (has(field)) return;
    if (message.find(field) == std::string::npos) message = std::string(field) + ": " + message;
    errors_.push_back({std::string(field), std::move(message)});
  }
  void range(std::string_view field, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi) {
      fail(field, std::string(field) + " must be between " + std::to_string(lo) + " and " +
                      std::to_string(hi) + ", got " + std::to_string(value));
    }
  }
  bool has(std::string_view field) const {
    return std::any_of(errors_.begin(), errors_.end(),
                       [&](const FieldError& e) { return e.field == field; });
  }
  std::vector<FieldError> take() { return std::move(errors_); }

 private:
  std::vector<FieldError> errors_;
};

// `dtype`: the parsed --dtype, when valid.
void check_workload(const WorkloadFields& w, Checker& c, Dtype& dtype) {
  const auto builtin = samples::builtin_model_names();
  const bool is_builtin = std::find(builtin.begin(), builtin.end(), w.model) != builtin.end();
  if (!is_builtin && !samples::is_torchscript_path(w.model)) {
    std::string valid;
    for (const auto& name : builtin) valid += name + ", ";
    c.fail("--model",
           "unknown model '" + w.model + "' (valid: " + valid + "or a .pt TorchScript file)");
  }
  c.range("--batch", w.batch, kBatchRange.lo, kBatchRange.hi);
  c.range("--seq", w.seq, kSeqRange.lo, kSeqRange.hi);
  c.parse("--dtype", [&] { dtype = parse_dtype(w.dtype); });
  c.range("--steps", w.steps, kStepsRange.lo, kStepsRange.hi);
  c.range("--warmup", w.warmup, kWarmupRange.lo, kWarmupRange.hi);
  if (is_builtin && w.input_spec != kDefaultInputSpec) {
    c.fail("--input-spec",
           "--input-spec applies to TorchScript models (--model PATH.pt), not to "
           "the built-in '" +
               w.model + "'");
  } else if (!is_builtin) {
    c.parse("--input-spec", [&] { samples::parse_input_spec(w.input_spec); });
  }
  c.range("--lora-rank", w.lora_rank, kLoraRankRange.lo, kLoraRankRange.hi);
  // The built-in models but mlp are the decoders (Llama and GPT presets), which take LoRA.
  if (w.lora_rank != 0 && (!is_builtin || w.model == "mlp")) {
    c.fail("--lora-rank",
           "--lora-rank applies to the built-in decoders (Llama and GPT presets), "
           "not to '" +
               w.model + "'");
  }
  if (!w.blocks.empty() && is_builtin) {
    c.fail("--blocks", "--blocks applies to TorchScript models (--model PATH.pt): the built-in '" +
                           w.model + "' knows its blocks");
  }
}

// `out` and `collector`: the fields parsed, each where valid; the device model file read here,
// once.
void check_backend(const BackendFields& b, Checker& c, profiler::BackendRequest& out,
                   Collector& collector) {
  BackendKind& kind = out.backend;
  c.parse("--backend", [&] {
    try {
      kind = parse_backend(b.backend);
    } catch (const OptionsError&) {
      throw UsageError("unknown backend '" + b.backend + "' (valid: auto, cuda, host-sim)");
    }
  });
  if (!b.device_model.empty()) {
    c.parse("--device-model",
            [&] { out.device_model = profiler::load_device_model(b.device_model); });
    if (kind == BackendKind::Cuda) {
      c.fail("--device-model", "applies to host-sim only (cuda measures the GPU)");
    }
  }
  if (!b.device_capacity.empty()) {
    c.parse("--device-capacity", [&] {
      out.device_capacity = profiler::parse_size(b.device_capacity);
      if (out.device_capacity <= 0) throw UsageError("--device-capacity must be positive");
    });
    if (kind == BackendKind::Cuda) c.fail("--device-capacity", "applies to host-sim only");
  }
  c.parse("--collector", [&] { collector = parse_collector(b.collector); });
  if (b.threads != "auto") {
    c.parse("--threads", [&] {
      const int64_t n = profiler::parse_int64(b.threads);
      if (n < 1 || n > max_threads()) {
        throw UsageError("--threads must be auto or between 1 and " +
                         std::to_string(max_threads()) + " (this machine's cores), got " +
                         b.threads);
      }
      out.threads = n;
    });
  }
}

// Each knob's values as a request gives them, parsed once (a run: one value; a sweep: a list of
// each axis); a knob whose text was refused is missing (its field error says why).
using KnobLists = std::map<std::string, std::vector<KnobValue>, std::less<>>;

template <typename Request>
KnobLists check_knobs(const Request& r, Checker& c, bool sweep) {
  for (const auto& [key, text] : r.knobs) {
    const auto& table = knob_table();
    if (std::none_of(table.begin(), table.end(),
                     [&](const Knob& k) { return k.key == key && !k.flag.empty(); })) {
      c.fail("--" + key, "unknown knob '" + key + "' (no such flag)");
    }
  }
  KnobLists out;
  for (const Knob& k : knob_table()) {
    if (k.flag.empty()) continue;
    c.parse(k.flag, [&] {
      std::vector<KnobValue> values = profiler::parse_knob_list(k, r.knob_text(k.key));
      if (values.size() != 1 && !(sweep && k.nest > 0)) {
        throw UsageError(
            std::string(k.flag) + " takes one value" +
            (sweep ? " (a sweep does not cross it)" : " for a run (a list is for sweep)"));
      }
      out[std::string(k.key)] = std::move(values);
    });
  }
  return out;
}

// Whether any of `key`'s values (when it was valid) is `name`, or is not.
bool any_is(const KnobLists& lists, std::string_view key, std::string_view name) {
  const auto it = lists.find(key);
  return it != lists.end() &&
         std::any_of(it->second.begin(), it->second.end(),
                     [&](const KnobValue& v) { return std::get<std::string>(v) == name; });
}
bool any_is_not(const KnobLists& lists, std::string_view key, std::string_view name) {
  const auto it = lists.find(key);
  return it != lists.end() &&
         std::any_of(it->second.begin(), it->second.end(),
                     [&](const KnobValue& v) { return std::get<std::string>(v) != name; });
}

// The link's values: a list on host-sim only; the backend is prepared with the first (each point
// of a sweep over links runs over its own).
void check_link(const KnobLists& lists, Checker& c, profiler::BackendRequest& out) {
  const auto it = lists.find("link");
  if (it == lists.end()) return;
  if (it->second.size() > 1 && out.backend == BackendKind::Cuda) {
    c.fail("--link",
           "--link takes a list on host-sim only (cuda copies over the GPU's own link): give one "
           "link, or --backend host-sim");
    return;
  }
  out.link = parse_link(std::get<std::string>(it->second.front()));
}

// Rules between knobs and the workload, each on the values that were valid.
void check_knob_rules(const KnobLists& lists, const WorkloadFields& w, const BackendFields& b,
                      Checker& c) {
  // Offloading only the boundaries of blocks nobody checkpoints would offload nothing.
  if (any_is(lists, "offload_set", "boundaries") && lists.contains("checkpoint") &&
      !any_is_not(lists, "checkpoint", "none")) {
    c.fail("--offload",
           "--offload boundaries offloads the inputs of checkpointed blocks only: give "
           "--checkpoint all or every:K too (without checkpointing nothing would be offloaded)");
  }
  // Layer offloading moves frozen weights: a model without any would measure the same.
  if (any_is_not(lists, "layer_offload", "off") && !c.has("--model") && !c.has("--lora-rank")) {
    const auto builtin = samples::builtin_model_names();
    if (std::find(builtin.begin(), builtin.end(), w.model) == builtin.end() || w.model == "mlp") {
      c.fail("--layer-offload",
             "--layer-offload applies to the built-in decoders (Llama and GPT "
             "presets), not to '" +
                 w.model + "'");
    } else if (w.lora_rank == 0) {
      c.fail("--layer-offload",
             "--layer-offload moves the blocks' frozen weights, and without --lora-rank every "
             "weight trains: give --lora-rank R (LoRA adapters train, the base is frozen)");
    }
  }
  // A device model times ops and the link, not a disk: its step times would leave the disk out.
  if (!b.device_model.empty() && any_is_not(lists, "tier", "host")) {
    c.fail("--tier",
           "--tier disk or auto with --device-model: the device model times the GPU's ops and "
           "the link, not the disk, so its step times would leave the disk out; measure the disk "
           "tier on this machine's clock (no --device-model) or on a GPU");
  }
}

// A script sweep runs the user's model: the flags that describe a built-in one, or change it, do
// not apply. Each is refused when given (flags_given) or when its field is not its default.
void check_script(const SweepRequest& r, Checker& c) {
  const WorkloadFields w;
  const SweepRequest defaults;
  const auto differs = [&](std::string_view key) {
    return r.knob_text(key) != defaults.knob_text(key);
  };
  const auto given = [&](std::string_view flag) {
    return std::find(r.flags_given.begin(), r.flags_given.end(), flag) != r.flags_given.end();
  };
  const std::string model = "the script builds its own model and batches";
  const struct {
    std::string_view flag;
    bool differs;
    std::string why;
  } rules[] = {
      {"--model", r.workload.model != w.model, model},
      {"--batch", r.workload.batch != w.batch, model},
      {"--seq", r.workload.seq != w.seq, model},
      {"--dtype", r.workload.dtype != w.dtype, model},
      {"--seed", r.workload.seed != w.seed, model},
      {"--input-spec", r.workload.input_spec != w.input_spec, model},
      {"--lora-rank", r.workload.lora_rank != w.lora_rank, model},
      {"--blocks", r.workload.blocks != w.blocks, model},
      {"--steps", r.workload.steps != w.steps,
       "the script runs its own steps (--warmup applies: the first W steps it records are "
       "dropped)"},
      {"--optimizer", r.workload.optimizer != w.optimizer, "the script steps its own optimizer"},
      {"--checkpoint", differs("checkpoint"),
       "offtune does not change the script's model: checkpointing is the script's own"},
      {"--layer-offload", differs("layer_offload"),
       "offtune does not change the script's model: layer offloading is the script's own"},
      {"--offload", r.knob_text("offload_set").find("boundaries") != std::string::npos,
       "--offload boundaries needs offtune's checkpointing, which a script does not have"},
      {"--device-capacity", r.backend.device_capacity != BackendFields{}.device_capacity,
       "host-sim's device capacity is set in this process, not in the script's"},
  };
  for (const auto& rule : rules) {
    // --offload all is what a script gets anyway: only boundaries is refused.
    const bool refused = rule.flag == "--offload" ? rule.differs : rule.differs || given(rule.flag);
    if (refused) {
      c.fail(rule.flag, std::string(rule.flag) + " does not apply to --script (" + rule.why +
                            "): leave it out");
    }
  }
  if (r.script.find_first_not_of(" \t\n") == std::string::npos) {
    c.fail("--script",
           "--script takes the command that runs your training, e.g. \"python "
           "train.py --max-steps 8\"");
  }
}

// `timeout_s`: the bound parsed, when given and valid.
void check_timeout(const SweepRequest& r, Checker& c, double& timeout_s) {
  if (r.timeout_per_point.empty()) return;
  if (r.script.empty()) {
    c.fail("--timeout-per-point",
           "--timeout-per-point bounds a script's point (--script); a built-in model runs in "
           "this process");
    return;
  }
  c.parse("--timeout-per-point", [&] {
    try {
      timeout_s = profiler::parse_positive_number(r.timeout_per_point);
    } catch (const std::invalid_argument&) {
      throw UsageError(
          "--timeout-per-point takes seconds, a positive number such as "
          "600, got '" +
          r.timeout_per_point + "'");
    }
  });
}

// What a run records of its workload, from fields check_workload() found valid.
profiler::Workload workload_of(const WorkloadFields& f, Dtype dtype) {
  profiler::Workload w;
  w.model = f.model;
  w.batch = f.batch;
  w.seq = f.seq;
  w.dtype = std::string(to_string(dtype));
  w.seed = f.seed;
  w.steps = f.steps;
  w.warmup = f.warmup;
  w.optimizer = f.optimizer;
  w.lora_rank = f.lora_rank;
  return w;
}

// The grid of a sweep's valid knob lists: each knob with one value sets the points' shared base,
// each with several (and the grid's pair, always) is an axis; the base holds the first value of
// an axis (a run's default for the pair: the grid's JSON, and the sweep's key, as they were).
profiler::Grid grid_of(const KnobLists& lists) {
  profiler::Grid g;
  for (const Knob& k : knob_table()) {
    const auto it = lists.find(k.key);
    if (it == lists.end()) continue;
    if (!k.always_axis) k.set(g.base, it->second.front());
    if (k.nest > 0 && (k.always_axis || it->second.size() > 1))
      g.axes[std::string(k.key)] = it->second;
  }
  return g;
}

// A mode's names: each value's canonical name first, then its aliases.
template <typename Mode>
struct Named {
  Mode mode;
  std::string_view name;
};
constexpr Named<Dtype> kDtypes[] = {{Dtype::Fp32, "fp32"},     {Dtype::Fp32, "float32"},
                                    {Dtype::Fp32, "float"},    {Dtype::Bf16, "bf16"},
                                    {Dtype::Bf16, "bfloat16"}, {Dtype::Fp16, "fp16"},
                                    {Dtype::Fp16, "float16"},  {Dtype::Fp16, "half"}};
constexpr Named<Collector> kCollectors[] = {
    {Collector::Auto, "auto"}, {Collector::Cupti, "cupti"}, {Collector::NvtxOnly, "nvtx-only"}};

template <typename Mode, size_t N>
std::string_view name_of(const Named<Mode> (&names)[N], Mode mode) {
  for (const auto& n : names) {
    if (n.mode == mode) return n.name;
  }
  return "?";
}

// The mode `text` names; a UsageError listing the canonical names otherwise.
template <typename Mode, size_t N>
Mode parse_named(const Named<Mode> (&names)[N], std::string_view what, std::string_view text) {
  std::string valid;
  for (size_t i = 0; i < N; ++i) {
    if (names[i].name == text) return names[i].mode;
    if (i == 0 || names[i].mode != names[i - 1].mode) {
      valid += (valid.empty() ? "" : ", ") + std::string(names[i].name);
    }
  }
  throw UsageError("unknown " + std::string(what) + " '" + std::string(text) +
                   "' (valid: " + valid + ")");
}

}  // namespace

std::vector<std::string> model_names() { return samples::builtin_model_names(); }
std::vector<std::string> dtype_names() { return {"fp32", "bf16", "fp16"}; }
std::vector<std::string> backend_names() { return {"auto", "cuda", "host-sim"}; }

std::string RunRequest::knob_text(std::string_view key) const {
  const auto it = knobs.find(key);
  return it != knobs.end() ? it->second : profiler::default_text(knob(key), /*sweep=*/false);
}

std::string SweepRequest::knob_text(std::string_view key) const {
  const auto it = knobs.find(key);
  return it != knobs.end() ? it->second : profiler::default_text(knob(key), /*sweep=*/true);
}

std::vector<std::string> device_model_names() {
  std::vector<std::string> out{""};
  for (auto& n : offtune::device_model_names()) out.push_back(std::move(n));
  return out;
}

Dtype parse_dtype(std::string_view text) { return parse_named(kDtypes, "dtype", text); }
std::string_view to_string(Dtype dtype) { return name_of(kDtypes, dtype); }

Collector parse_collector(std::string_view text) {
  return parse_named(kCollectors, "collector", text);
}
std::string_view to_string(Collector collector) { return name_of(kCollectors, collector); }

bool is_refused_input(const std::exception& error) {
  return dynamic_cast<const UsageError*>(&error) != nullptr ||
         dynamic_cast<const profiler::ParseError*>(&error) != nullptr ||
         dynamic_cast<const OptionsError*>(&error) != nullptr;
}

RequestError::RequestError(std::vector<FieldError> errors)
    : UsageError(errors.empty() ? "invalid request" : errors.front().message),
      errors_(std::move(errors)) {}

namespace {

// --memory-history: host-sim's modelled allocator only (a run's or a sweep's).
void check_memory_history(bool on, const BackendFields& backend, Checker& c) {
  if (on && backend.backend == "cuda") {
    c.fail("--memory-history",
           "--memory-history records host-sim's modelled allocator; on cuda record torch's own "
           "(torch.cuda.memory._record_memory_history()) or use --backend host-sim");
  }
}

}  // namespace

Checked<ValidRun> check(const RunRequest& r) {
  Checker c;
  ValidRun v;
  check_workload(r.workload, c, v.dtype_);
  check_backend(r.backend, c, v.backend_, v.collector_);
  const KnobLists lists = check_knobs(r, c, /*sweep=*/false);
  check_link(lists, c, v.backend_);
  check_knob_rules(lists, r.workload, r.backend, c);
  check_memory_history(r.memory_history, r.backend, c);
  Checked<ValidRun> out;
  out.errors = c.take();
  if (!out.errors.empty()) return out;
  for (const auto& [key, values] : lists) knob(key).set(v.config_, values.front());
  v.config_.offload = !r.no_offload;
  v.workload_ = workload_of(r.workload, v.dtype_);
  v.request_ = r;
  out.valid = std::move(v);
  return out;
}

Checked<ValidSweep> check(const SweepRequest& r) {
  Checker c;
  ValidSweep v;
  if (r.name.empty()) c.fail("--name", "--name must not be empty");
  if (r.script.empty()) {
    check_workload(r.workload, c, v.dtype_);
  } else {
    check_script(r, c);
    c.range("--warmup", r.workload.warmup, kWarmupRange.lo, kWarmupRange.hi);
  }
  check_backend(r.backend, c, v.backend_, v.collector_);
  const KnobLists lists = check_knobs(r, c, /*sweep=*/true);
  check_link(lists, c, v.backend_);
  check_knob_rules(lists, r.workload, r.backend, c);
  c.parse("--shard", [&] { v.shard_ = resolve_shard(r.shard); });
  check_timeout(r, c, v.timeout_s_);
  c.range("--max-points", r.max_points, 1, kMaxMaxPoints);
  c.range("--refine-steps", r.refine_steps, kRefineStepsRange.lo, kRefineStepsRange.hi);
  c.range("--repeat", r.repeat, kRepeatRange.lo, kRepeatRange.hi);
  check_memory_history(r.memory_history, r.backend, c);
  if (r.memory_history && !r.script.empty()) {
    c.fail("--memory-history",
           "--memory-history records the built-in workloads' points; a script records its own "
           "with offtune.record(..., memory_history=True)");
  }
  if (r.predict_first && r.script.empty() && r.backend.backend == "cuda") {
    c.fail("--predict-first",
           "--predict-first replays a step recorded on host-sim (on a --device-model's clock, or "
           "on this CPU's): on a GPU, measure every point");
  }
  // A script's steps are recorded on host-sim: its points must be measured there too.
  if (r.predict_first && !r.script.empty() && r.backend.device_model.empty() &&
      r.backend.backend != "host-sim") {
    c.fail("--predict-first",
           "--predict-first with --script records the script on host-sim: give --device-model "
           "or --backend host-sim, so that its points are measured there too");
  }
  // The grid, from the lists once: its size, the predict-first rule and the sweep's grid. Only
  // with every list valid: a refused list is its own field error.
  const bool lists_ok = std::all_of(knob_table().begin(), knob_table().end(), [&](const Knob& k) {
    return k.flag.empty() || lists.contains(k.key);
  });
  std::optional<profiler::Grid> grid;
  if (lists_ok) grid = grid_of(lists);
  if (r.predict_first && grid) {
    // Checkpointing and what is offloaded are recorded and replayed; the other variants move
    // what a recording does not see.
    const bool other_variant_axis =
        std::any_of(knob_table().begin(), knob_table().end(), [&](const Knob& k) {
          return k.variant && k.key != "checkpoint" && k.key != "offload_set" &&
                 grid->axes.contains(k.key);
        });
    if (other_variant_axis || !profiler::replayable(grid->base)) {
      c.fail("--predict-first",
             "--predict-first replays the host tier without layer offloading: it cannot predict "
             "points with --tier disk or --layer-offload, or lists of --verify or the allocator's "
             "segments (measure those)");
    }
  }
  // The grid's size from the lists' lengths: expanding a 10^8-point grid to count it would be the
  // very problem the bound prevents.
  const int64_t points = grid ? profiler::grid_size(*grid) : 0;
  if (grid && !c.has("--max-points") && points > r.max_points) {
    const int64_t steps = r.workload.warmup + r.workload.steps;
    const auto pairs = static_cast<int64_t>(grid->values("min_offload_size").size() *
                                            grid->values("max_fwd_stash_size").size());
    c.fail("--max-points",
           "the grid has " + std::to_string(points) + " points (the baseline and " +
               std::to_string(points - 1) +
               (points - 1 > pairs ? " variant x --min-offload-size x --max-fwd-stash-size points"
                                   : " --min-offload-size x --max-fwd-stash-size pairs") +
               "), more than --max-points " + std::to_string(r.max_points) +
               (r.script.empty()
                    ? "; each point is a separate run of " + std::to_string(steps) + " steps of " +
                          r.workload.model + ", " + std::to_string(points * steps) + " steps in all"
                    : "; each point is a separate run of the script") +
               ": narrow the lists, or raise --max-points if you mean it");
  }
  Checked<ValidSweep> out;
  out.errors = c.take();
  if (!out.errors.empty()) return out;
  v.grid_ = std::move(*grid);
  v.points_ = points;
  if (r.script.empty()) {
    v.workload_ = workload_of(r.workload, v.dtype_);
  } else {
    v.workload_.model = "script";
    v.workload_.warmup = r.workload.warmup;
  }
  v.request_ = r;
  out.valid = std::move(v);
  return out;
}

ValidRun require_valid(const RunRequest& request) { return check(request).value(); }
ValidSweep require_valid(const SweepRequest& request) { return check(request).value(); }

profiler::Workload to_workload(const ValidRequest& request) { return request.workload_; }
profiler::BackendRequest to_backend(const ValidRequest& request) { return request.backend_; }
profiler::EngineConfig to_engine_config(const ValidRun& run) { return run.config_; }
profiler::Grid to_grid(const ValidSweep& sweep) { return sweep.grid_; }
int64_t point_count(const ValidSweep& sweep) { return sweep.points_; }

std::vector<std::string> script_refused_flags() {
  return {"--model",      "--batch",         "--seq",     "--dtype",          "--seed",
          "--input-spec", "--lora-rank",     "--blocks",  "--steps",          "--optimizer",
          "--checkpoint", "--layer-offload", "--offload", "--device-capacity"};
}

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

profiler::Shard resolve_shard(std::string_view text, const EnvLookup& env) {
  if (text != "auto") return profiler::parse_shard(text);
  // A variable's value as a whole number, or a one-line refusal naming it.
  const auto number = [&](const std::string& name) -> std::optional<int64_t> {
    const auto value = env(name);
    if (!value) return std::nullopt;
    try {
      return profiler::parse_int64(*value);
    } catch (const std::invalid_argument&) {
      throw UsageError("--shard auto: " + name + "='" + *value + "' is not a whole number");
    }
  };
  // index is 0-based, as the schedulers count; shards are 1-based.
  const auto shard = [](int64_t index, int64_t count, const std::string& from) {
    if (count < 1 || index < 0 || index >= count) {
      throw UsageError("--shard auto: " + from + " give index " + std::to_string(index) + " of " +
                       std::to_string(count) + " shards (expected 0 <= index < count)");
    }
    return profiler::parse_shard(std::to_string(index + 1) + "/" + std::to_string(count));
  };
  if (const auto id = number("SLURM_ARRAY_TASK_ID")) {
    const auto count = number("SLURM_ARRAY_TASK_COUNT");
    if (!count) {
      throw UsageError(
          "--shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (run "
          "under sbatch --array)");
    }
    return shard(*id - number("SLURM_ARRAY_TASK_MIN").value_or(0), *count,
                 "SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT");
  }
  if (const auto index = number("JOB_COMPLETION_INDEX")) {
    const auto count = number("OFFTUNE_SHARD_COUNT");
    if (!count) {
      throw UsageError(
          "--shard auto: JOB_COMPLETION_INDEX is set but OFFTUNE_SHARD_COUNT is not (set it "
          "in the Job's manifest to .spec.completions; docs/script-sweeps.md)");
    }
    return shard(*index, *count, "JOB_COMPLETION_INDEX and OFFTUNE_SHARD_COUNT");
  }
  throw UsageError(
      "--shard auto reads the shard from the scheduler, and none is set: SLURM_ARRAY_TASK_ID "
      "with SLURM_ARRAY_TASK_COUNT (a Slurm job array), or JOB_COMPLETION_INDEX with "
      "OFFTUNE_SHARD_COUNT (a Kubernetes Indexed Job); elsewhere give --shard I/N");
}

int64_t max_threads() {
  return std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
}

namespace {

// A value's parser with its flag in front of the message, as check() words them.
template <typename Parse>
auto with_flag(std::string_view flag, Parse&& parse) {
  try {
    return std::forward<Parse>(parse)();
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(flag) + ": " + e.what());
  }
}

}  // namespace

int64_t parse_id(std::string_view flag, std::string_view text) {
  return with_flag(flag, [&] {
    const int64_t id = profiler::parse_int64(text);
    if (id < 1) throw UsageError("ids start at 1, got " + std::string(text));
    return id;
  });
}

int64_t parse_memory_budget(std::string_view flag, std::string_view text) {
  return with_flag(flag, [&] {
    const int64_t bytes = profiler::parse_size(text);
    if (bytes < 1) throw UsageError("a memory budget must be at least 1 byte");
    return bytes;
  });
}

profiler::MemoryFigure parse_memory_figure(std::string_view flag, std::string_view text) {
  return with_flag(flag, [&] { return profiler::parse_memory_figure(text); });
}

double parse_positive(std::string_view flag, std::string_view text) {
  return with_flag(flag, [&] { return profiler::parse_positive_number(text); });
}

double parse_tolerance_percent(std::string_view flag, std::string_view text) {
  return with_flag(flag, [&] {
    std::string_view number = text;
    if (!number.empty() && number.back() == '%') number.remove_suffix(1);
    if (number == "0") return 0.0;  // exact peaks
    double pct = 0;
    try {
      pct = profiler::parse_positive_number(number);
    } catch (const std::invalid_argument&) {
      pct = -1;
    }
    if (!(pct > 0 && pct < 100)) {
      throw UsageError("invalid tolerance '" + std::string(text) +
                       "': expected a percentage from 0 to below 100, such as 1%");
    }
    return pct / 100.0;
  });
}

}  // namespace offtune::requests
