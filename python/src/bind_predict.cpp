// offtune.predict: the what-if predictor (profiler/predict.hpp) over the caller's own training
// step. The step is a Python callable the recording calls with the engine it made; the grid's
// lists, the options and the device model go through the request layer as the CLI's do; the
// figures come back as dicts. Host-sim only, as the predictor.
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "offtune/device_model.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/knobs.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/json.hpp"
#include "offtune/profiler/knob_text.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/engine_options.hpp"
#include "offtune/requests/request.hpp"
#include "offtune/workload.hpp"

namespace py = pybind11;

namespace offtune::python {
namespace {

namespace pf = profiler;

// The caller's training step: step(engine, index), `engine` the native ActivationOffloader the
// recording made (borrowed for the call; the package wraps it in an Offloader). One phase: the
// step's forward and backward are not told apart.
class PythonStep final : public WorkloadInstance {
 public:
  explicit PythonStep(py::function step) : step_(std::move(step)) {}
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    return std::make_unique<ActivationOffloader>(options, HookCarrier::External);
  }
  void step(ActivationOffloader* offloader, int64_t index, StepPhases& phases) override {
    phases.forward_begin = host_sim::clock_ns();
    step_(py::cast(offloader, py::return_value_policy::reference), index);
    phases.forward_end = phases.backward_end = host_sim::clock_ns();
  }

 private:
  py::function step_;
};

// A value of the grid or the options as the CLI would type it: a list joined by commas.
std::string text_of(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "on" : "off";
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    std::string out;
    for (const py::handle item : value) out += (out.empty() ? "" : ",") + text_of(item);
    return out;
  }
  return py::str(value).cast<std::string>();
}

const Knob* knob_by_python_name(const std::string& name) {
  for (const Knob& k : knob_table()) {
    if (k.python == name || k.key == name) return &k;
  }
  return nullptr;
}

// Puts back the device model that was set before.
class ModelGuard {
 public:
  explicit ModelGuard(const std::optional<DeviceModel>& model)
      : previous_(host_sim::device_model() ? std::optional<DeviceModel>(*host_sim::device_model())
                                           : std::nullopt) {
    host_sim::install();
    host_sim::set_device_model(model ? &*model : nullptr);
  }
  ~ModelGuard() { host_sim::set_device_model(previous_ ? &*previous_ : nullptr); }
  ModelGuard(const ModelGuard&) = delete;
  ModelGuard& operator=(const ModelGuard&) = delete;

 private:
  std::optional<DeviceModel> previous_;
};

py::dict predict(py::function step, const py::dict& grid, const py::dict& options, int64_t warmup,
                 const std::string& device_model) {
  requests::SweepRequest r;
  // A knob the caller does not name takes its one default value, not the CLI's default list.
  for (const Knob& k : knob_table()) {
    if (!k.flag.empty()) r.knobs[std::string(k.key)] = pf::default_text(k, /*sweep=*/false);
  }
  r.workload.warmup = warmup;
  r.backend.backend = "host-sim";
  r.backend.device_model = device_model;
  // The options: the engine's knobs as the grid's base (one value each), the rest as the
  // offloader's (the backend, the host pool, ...).
  py::dict rest;
  const auto put = [&](const py::handle& key, const py::handle& value, bool list) {
    const std::string name = py::str(key).cast<std::string>();
    const Knob* k = knob_by_python_name(name);
    if (k == nullptr || k->flag.empty()) {
      if (list) {
        throw requests::UsageError("offtune.predict: '" + name +
                                   "' is not an engine knob a grid can vary (valid: "
                                   "min_offload_size, max_fwd_stash_size, prefetch, link, ...)");
      }
      rest[key] = value;
      return;
    }
    if (k->variant) {
      throw requests::UsageError(
          "offtune.predict: '" + name +
          "' changes what the step saves: your step does its own checkpointing; the grid "
          "varies the offloading knobs");
    }
    r.knobs[std::string(k->key)] = text_of(value);
  };
  for (const auto& [key, value] : options) put(key, value, false);
  for (const auto& [key, value] : grid) put(key, value, true);
  OffloadOptions base = requests::parse_offload_options(named_options(rest));
  if (base.backend == BackendKind::Cuda) {
    throw requests::UsageError(
        "offtune.predict records the step on host-sim (device tensors are CPU tensors there): "
        "on a GPU, measure the points");
  }
  base.backend = BackendKind::HostSim;
  const requests::ValidSweep valid = requests::require_valid(r);
  const pf::Grid g = requests::to_grid(valid);
  std::optional<DeviceModel> model;
  if (!device_model.empty()) model = pf::load_device_model(device_model);
  const auto configs = pf::expand_grid(g);
  std::vector<LinkModel> links;
  for (const auto& c : configs) links.push_back(c.link.model);
  base.link = g.base.link.model;
  pf::Workload w;
  w.model = "python";
  w.warmup = warmup;
  w.steps = 1;
  PythonStep workload(std::move(step));
  pf::GridPrediction predicted;
  {
    ModelGuard guard(model);
    predicted = pf::predict_grid(workload, w, base, configs, links);
  }
  const std::vector<bool> front = pf::predicted_front(predicted.points);
  const py::object loads = py::module_::import("json").attr("loads");
  py::list points;
  for (size_t i = 0; i < configs.size(); ++i) {
    const pf::Prediction& p = predicted.points[i];
    py::dict d;
    d["index"] = i;
    d["config"] = loads(pf::to_json(configs[i]).dump());
    d["step_ms"] = p.step_ms();
    d["bound_ms"] = p.bound_ms();
    d["compute_ms"] = static_cast<double>(p.compute_ns) / 1e6;
    d["peak_allocated"] = p.peak_allocated;
    d["peak_reserved"] = p.peak_reserved;
    d["hidden_copy_pct"] = p.hidden_copy_pct;
    d["offloaded_bytes"] = p.offloaded_bytes;
    d["reloaded_bytes"] = p.reloaded_bytes;
    d["window_waits"] = p.window_waits;
    d["stalled_ms"] = static_cast<double>(p.stalled_ns) / 1e6;
    d["front"] = static_cast<bool>(front[i]);
    points.append(d);
  }
  py::dict out;
  out["source"] = predicted.source;
  out["traces"] = predicted.traces;
  out["record_ms"] = predicted.record_ms;
  out["predict_ms"] = predicted.predict_ms;
  out["points"] = points;
  return out;
}

}  // namespace

void bind_predict(py::module_& m) {
  m.def("predict", &predict, py::arg("step"), py::arg("grid"), py::arg("options"),
        py::arg("warmup"), py::arg("device_model"),
        "The what-if predictor over step(engine, index) (offtune.predict wraps it).");
  // `offtune predict --script`'s child (offtune/_child.py): the device model the script's steps
  // are timed by (a name or a file; empty: this CPU's clock), before its first step.
  m.def("_use_device_model", [](const std::string& name) {
    host_sim::install();
    if (name.empty()) {
      host_sim::set_device_model(nullptr);
      return;
    }
    const DeviceModel model = pf::load_device_model(name);
    host_sim::set_device_model(&model);
  });
  // Steps of the script's own loop recorded for the predictor, written to the file the CLI reads.
  py::class_<pf::TraceSession>(m, "TraceSession")
      .def(py::init([](ActivationOffloader& engine) {
             return std::make_unique<pf::TraceSession>(engine);
           }),
           py::arg("engine"), py::keep_alive<1, 2>())
      .def("begin_step", &pf::TraceSession::begin_step)
      .def("end_step", [](pf::TraceSession& s) { s.end_step(); })
      .def("steps", &pf::TraceSession::steps)
      .def(
          "save",
          [](pf::TraceSession& s, const std::string& path) { pf::save_trace(s.finish(), path); },
          py::arg("path"), "The steps recorded, as one trace, to `path` (profiler::save_trace).");
}

}  // namespace offtune::python
