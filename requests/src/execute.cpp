// Requests to measurements: the only file of offtune::requests that includes libtorch (through the
// samples' registry).
#include "offtune/requests/execute.hpp"

#include <c10/core/ScalarType.h>

#include <filesystem>
#include <utility>

#include "offtune/profiler/backend.hpp"
#include "offtune/samples/registry.hpp"

namespace offtune::requests {

namespace {

c10::ScalarType scalar_type(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bf16:
      return c10::kBFloat16;
    case Dtype::Fp16:
      return c10::kHalf;
    case Dtype::Fp32:
      break;
  }
  return c10::kFloat;
}

struct Bound {
  OffloadOptions base;
  std::unique_ptr<WorkloadInstance> workload;
};

// Runs `build`, the building of what the user asked for (the backend, the model): its
// std::invalid_argument is a refusal of the user's input, as the samples and the backend word
// theirs, and becomes one of this layer's (a fault while the request later runs does not).
template <typename Build>
auto as_refusal(Build&& build) {
  try {
    return std::forward<Build>(build)();
  } catch (const UsageError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// Prepares the backend (filling `env`) and builds the workload on its device.
Bound bind(const WorkloadFields& fields, Dtype dtype, const profiler::BackendRequest& b,
           profiler::Environment& env) {
  const auto prepared = as_refusal([&] { return profiler::prepare_backend(b, env); });
  samples::WorkloadSpec spec;
  spec.model = fields.model;
  spec.batch = fields.batch;
  spec.seq = fields.seq;
  spec.dtype = scalar_type(dtype);
  spec.seed = fields.seed;
  spec.optimizer = fields.optimizer;
  spec.input_spec = fields.input_spec;
  spec.lora_rank = fields.lora_rank;
  spec.blocks = fields.blocks;
  return {prepared.base, as_refusal([&] { return samples::make_workload(spec, prepared.device); })};
}

// A link model is host-sim's: on cuda the GPU's own link carries the copies, and a list of links
// would measure the same points again under other names. check() refuses it for --backend cuda;
// this, for auto resolved to cuda.
void refuse_links_on_cuda(const profiler::SweepSpec& spec) {
  if (spec.grid.axes.contains("link") && spec.base.backend == BackendKind::Cuda) {
    throw RequestError(
        std::vector<FieldError>{{"--link",
                                 "--link takes a list on host-sim only (cuda copies over the "
                                 "GPU's own link): give one link, or --backend host-sim"}});
  }
}

}  // namespace

PreparedRun prepare(const ValidRun& valid) {
  const RunRequest& request = valid.request();
  PreparedRun out;
  out.spec.workload = to_workload(valid);
  out.spec.config = to_engine_config(valid);
  out.spec.collector = valid.collector();
  out.spec.memory_history = request.memory_history;
  out.spec.label = request.label;
  auto bound = bind(request.workload, valid.dtype(), to_backend(valid), out.spec.env);
  out.spec.base = bound.base;
  out.workload = std::move(bound.workload);
  if (const auto w = samples::head_warning(request.workload.model);
      !w.empty() && out.spec.config.offload) {
    out.warnings.emplace_back(w);
  }
  return out;
}

// A script sweep: the backend is prepared for the runs' environment only (the script builds its
// model in its own process), and the script file's hash joins the sweep's identity.
PreparedSweep prepare_script(const ValidSweep& valid) {
  const SweepRequest& request = valid.request();
  PreparedSweep out;
  out.spec.name = request.name;
  out.spec.grid = to_grid(valid);
  out.spec.shard = valid.shard();
  out.spec.repeat = request.repeat;
  out.refine_steps = request.refine_steps;
  out.spec.workload = to_workload(valid);  // "script", with its --warmup
  const profiler::Workload& w = out.spec.workload;
  out.spec.collector = valid.collector();
  profiler::BackendRequest b = to_backend(valid);
  out.spec.device_model = b.device_model;
  // The script's process has its own device memory: no capacity here (check() refuses one).
  b.device_capacity = 0;
  out.spec.base = as_refusal([&] { return profiler::prepare_backend(b, out.spec.env); }).base;
  const profiler::ScriptIdentity identity = profiler::script_identity(request.script);
  out.spec.script = request.script;
  out.spec.script_hash = identity.hash;
  out.script_file = identity.file;

  profiler::ScriptSpec script;
  script.command = request.script;
  script.timeout_s = valid.timeout_s();
  script.workload = w;
  script.env = out.spec.env;
  script.collector = valid.collector();
  // A device model file is named absolutely: the script may change its working directory.
  script.device_model = request.backend.device_model;
  if (std::error_code ec;
      !script.device_model.empty() && std::filesystem::is_regular_file(script.device_model, ec)) {
    script.device_model = std::filesystem::absolute(script.device_model).string();
  }
  refuse_links_on_cuda(out.spec);
  // A sweep over links, or under a device model (host-sim only), tells each point's script its
  // backend and link, so the script runs on the backend this process resolved (host-sim) rather
  // than leaving it to the child, and its copies take the link's time: without a link the child's
  // offloader would copy for free under the device model, and every point would time alike.
  if (request.backend.backend != "auto" || !request.backend.device_model.empty() ||
      out.spec.grid.axes.contains("link")) {
    script.backend = out.spec.base.backend;
    script.link = b.link.name;
  }
  out.script = std::move(script);
  out.predict_first = request.predict_first;
  return out;
}

PreparedSweep prepare(const ValidSweep& valid) {
  const SweepRequest& request = valid.request();
  if (!request.script.empty()) return prepare_script(valid);
  PreparedSweep out;
  out.spec.name = request.name;
  out.spec.workload = to_workload(valid);
  out.spec.grid = to_grid(valid);
  out.spec.shard = valid.shard();
  const profiler::BackendRequest backend = to_backend(valid);
  out.spec.collector = valid.collector();
  out.spec.memory_history = request.memory_history;
  out.spec.device_model = backend.device_model;
  out.spec.device_capacity = backend.device_capacity;
  // The sweep key leaves the default input out, so that keys of sweeps of built-in models do not
  // change.
  if (request.workload.input_spec != kDefaultInputSpec) {
    out.spec.model_input = request.workload.input_spec;
  }
  out.spec.blocks = request.workload.blocks;
  auto bound = bind(request.workload, valid.dtype(), backend, out.spec.env);
  out.spec.base = bound.base;
  refuse_links_on_cuda(out.spec);
  out.workload = std::move(bound.workload);
  out.refine_steps = request.refine_steps;
  out.predict_first = request.predict_first;
  out.spec.repeat = request.repeat;
  if (const auto w = samples::head_warning(request.workload.model); !w.empty()) {
    out.warnings.emplace_back(w);
  }
  return out;
}

std::string script_identity_note(const PreparedSweep& sweep, profiler::Store& store) {
  if (!sweep.script) return {};
  if (sweep.script_file.empty()) {
    return "note: the command names no script file, so the sweep's identity is the command "
           "alone: a changed script would resume the same sweep";
  }
  if (store.find_sweep(profiler::sweep_key(sweep.spec))) return {};  // resumed
  if (const auto old =
          profiler::changed_script_sweep(store, sweep.spec.script, sweep.spec.script_hash)) {
    return "script changed since sweep " + std::to_string(old->id.value) + ": starting a new sweep";
  }
  return {};
}

profiler::RunOutcome execute(PreparedRun& run, profiler::Store& store) {
  return profiler::run_measured(*run.workload, run.spec, store);
}

std::unique_ptr<profiler::PointMeasurer> make_measurer(PreparedSweep& sweep) {
  if (sweep.script) return std::make_unique<profiler::ScriptMeasurer>(*sweep.script);
  return std::make_unique<profiler::WorkloadMeasurer>(*sweep.workload, sweep.spec);
}

SweepPredictions predict_sweep(PreparedSweep& sweep, const std::atomic<bool>* cancel) {
  const auto configs = profiler::expand_grid(sweep.spec.grid);
  // Each point over its own link where the sweep has a link axis (the configs name it).
  std::vector<LinkModel> links;
  for (const auto& c : configs) {
    links.push_back(sweep.spec.grid.axes.contains("link") ? c.link.model : sweep.spec.base.link);
  }
  // A script's steps are recorded by running it (host-sim's), a built-in model's in this process.
  auto grid = sweep.script ? profiler::predict_script_grid(*sweep.script, configs, links, cancel)
                           : profiler::predict_grid(*sweep.workload, sweep.spec.workload,
                                                    sweep.spec.base, configs, links);
  SweepPredictions out;
  out.points = std::move(grid.points);
  out.chosen = profiler::points_that_matter(configs, out.points);
  out.record_ms = grid.record_ms;
  out.predict_ms = grid.predict_ms;
  out.source = grid.source;
  return out;
}

profiler::SweepOutcome execute(PreparedSweep& sweep, profiler::Store& store,
                               const std::function<void(const profiler::SweepProgress&)>& progress,
                               const std::atomic<bool>* cancel, profiler::RefineOutcome* refined) {
  if (sweep.predict_first && !sweep.predictions) {
    sweep.predictions = predict_sweep(sweep, cancel);
    sweep.spec.only = sweep.predictions->chosen;
  }
  // Every grid point's prediction goes into the store with the sweep (run_sweep writes them once
  // the sweep exists), so that a dashboard shows the points that were not measured too.
  if (sweep.predictions && sweep.spec.predictions.empty()) {
    const auto& points = sweep.predictions->points;
    for (size_t i = 0; i < points.size(); ++i) {
      sweep.spec.predictions.push_back(profiler::as_prediction_record(
          static_cast<int64_t>(i), points[i], sweep.predictions->source));
    }
  }
  const auto measurer = make_measurer(sweep);
  auto outcome = profiler::run_sweep(*measurer, sweep.spec, store, progress, cancel);
  const bool whole = sweep.spec.shard.count == 1;
  // A device model times every step the same: measuring finalists again cannot narrow anything.
  const bool deterministic = sweep.spec.device_model.has_value();
  if (!outcome.interrupted && whole && sweep.refine_steps > 0 && !deterministic) {
    auto r = profiler::refine_finalists(*measurer, sweep.spec, store, outcome.sweep,
                                        profiler::Constraint{}, sweep.refine_steps, cancel);
    outcome.interrupted = r.interrupted;
    if (refined != nullptr) *refined = std::move(r);
  }
  return outcome;
}

std::string sweep_summary(const profiler::SweepOutcome& outcome, int64_t repeat) {
  std::string out = "sweep " + std::to_string(outcome.sweep.value) + ": ran " +
                    std::to_string(outcome.ran) + ", skipped " + std::to_string(outcome.skipped) +
                    " (already measured), ok " + std::to_string(outcome.ok) + ", failed " +
                    std::to_string(outcome.failed) + ", out of memory " +
                    std::to_string(outcome.oom);
  if (outcome.by_other > 0) {
    out += ", measured by another offtune process " + std::to_string(outcome.by_other);
  }
  if (outcome.repeated > 0) {
    out += ", runs of later rounds (--repeat " + std::to_string(repeat) + ") " +
           std::to_string(outcome.repeated);
  }
  return out;
}

}  // namespace offtune::requests
