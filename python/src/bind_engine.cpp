// The engine, bound: an ActivationOffloader made for Python's hooks (HookCarrier::External), one
// Forward per `with` block whose pack and unpack torch's saved_tensors_hooks calls (hooks.cpp),
// layer offloading, and host-sim's switches. Options arrive as Python passed them and are parsed by
// requests/ (engine_options.hpp); OptionsError becomes offtune.InputError, EngineError
// offtune.EngineFault (module.cpp).
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/knobs.hpp"
#include "offtune/layer_offload.hpp"
#include "offtune/offloader.hpp"
#include "offtune/options.hpp"
#include "offtune/requests/engine_options.hpp"

namespace py = pybind11;

namespace offtune::python {

namespace {

// ---- options -----------------------------------------------------------------------------------

// A keyword argument's value, as given: bool before int (a Python bool is an int).
requests::OptionValue value_of(const std::string& name, py::handle value) {
  PyObject* v = value.ptr();
  if (PyBool_Check(v)) return v == Py_True;
  if (PyLong_Check(v)) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0)
      throw OptionsError(name + ": " + py::str(value).cast<std::string>() + " is out of range");
    return static_cast<int64_t>(x);
  }
  if (PyFloat_Check(v)) return PyFloat_AsDouble(v);
  if (PyUnicode_Check(v)) return value.cast<std::string>();
  throw OptionsError(name + " takes a bool, a number or text, got " +
                     py::str(py::type::of(value).attr("__name__")).cast<std::string>());
}

}  // namespace

std::vector<requests::NamedOption> named_options(const py::dict& options) {
  std::vector<requests::NamedOption> out;
  for (const auto& [key, value] : options) {
    if (!PyUnicode_Check(key.ptr())) throw OptionsError("option names are text");
    std::string name = key.cast<std::string>();
    requests::OptionValue parsed = value_of(name, value);
    out.push_back({std::move(name), std::move(parsed)});
  }
  return out;
}

namespace {

// The knobs Offloader takes, by keyword, in the table's order: a switch as a bool, a count or a
// size as a number, a mode by name.
py::dict knob_dict(const Knobs& knobs) {
  py::dict d;
  for (const Knob& knob : knob_table()) {
    if (knob.python.empty()) continue;
    d[py::str(knob.python.data(), knob.python.size())] =
        std::visit([](const auto& value) { return py::cast(value); }, knob.get(knobs));
  }
  return d;
}

py::dict to_dict(const OffloadStats& s) {
  using S = OffloadStats;
  return dict_of(
      s, field("packed", &S::packed), field("offloaded", &S::offloaded),
      field("deduplicated", &S::deduplicated), field("kept", &S::kept),
      field("offloaded_bytes", &S::offloaded_bytes), field("reloaded", &S::reloaded),
      field("reloaded_bytes", &S::reloaded_bytes), field("prefetched", &S::prefetched),
      field("prefetch_skipped", &S::prefetch_skipped),
      field("prefetch_dropped", &S::prefetch_dropped), field("from_fwd_stash", &S::from_fwd_stash),
      field("window_waits", &S::window_waits), field("record_streams", &S::record_streams),
      field("pageable_fallbacks", &S::pageable_fallbacks), field("spilled", &S::spilled),
      field("disk_written_bytes", &S::disk_written_bytes), field("disk_reads", &S::disk_reads),
      field("disk_read_bytes", &S::disk_read_bytes), field("disk_read_ahead", &S::disk_read_ahead),
      field("spill_waits", &S::spill_waits), field("disk_write_failures", &S::disk_write_failures),
      field("verified", &S::verified));
}

py::dict to_dict(const ResidentState& r) {
  using R = ResidentState;
  py::dict d = dict_of(
      r, field("tracked", &R::tracked), field("host_bytes", &R::host_bytes),
      field("fwd_stash_count", &R::fwd_stash_count), field("fwd_stash_bytes", &R::fwd_stash_bytes),
      field("bwd_stash_count", &R::bwd_stash_count), field("bwd_stash_bytes", &R::bwd_stash_bytes),
      field("pending_host_frees", &R::pending_host_frees),
      field("host_pool_in_use_bytes", &R::host_pool_in_use_bytes),
      field("host_pool_reserved_bytes", &R::host_pool_reserved_bytes),
      field("disk_bytes", &R::disk_bytes), field("disk_io_in_flight", &R::disk_io_in_flight),
      field("disk_arena_bytes", &R::disk_arena_bytes));
  d["resting"] = r.resting();
  return d;
}

py::dict to_dict(const DeviceMemory& m) {
  using M = DeviceMemory;
  return dict_of(m, field("allocated", &M::allocated), field("peak_allocated", &M::peak_allocated),
                 field("reserved", &M::reserved), field("peak_reserved", &M::peak_reserved));
}

py::dict to_dict(const LayerOffloadStats& s) {
  using S = LayerOffloadStats;
  return dict_of(s, field("blocks", &S::blocks), field("parameters", &S::parameters),
                 field("frozen_bytes", &S::frozen_bytes),
                 field("max_block_bytes", &S::max_block_bytes), field("loads", &S::loads),
                 field("loaded_bytes", &S::loaded_bytes), field("prefetched", &S::prefetched),
                 field("demand_loads", &S::demand_loads), field("waits", &S::waits),
                 field("kept_on_device", &S::kept_on_device),
                 field("device_to_host", &S::device_to_host), field("refreshed", &S::refreshed),
                 field("prefetch_skipped", &S::prefetch_skipped));
}

}  // namespace

void bind_engine(py::module_& m) {
  m.def("offload_option_names", &requests::offload_option_names,
        "The options Offloader takes, in OffloadOptions' order.");
  m.def("layer_offload_option_names", &requests::layer_offload_option_names,
        "The options LayerOffloader takes, in LayerOffloadOptions' order.");
  m.def(
      "parse_offload_options",
      [](const py::dict& options) {
        const OffloadOptions o = requests::parse_offload_options(named_options(options));
        py::dict d = knob_dict(knobs_of(o));
        d["backend"] = std::string(to_string(o.backend));
        return d;
      },
      "Validates options as Offloader would (ValueError naming a bad one); returns the knobs "
      "parsed, by keyword (sizes in bytes, modes by name), and the backend.");

  bind_hooks(m);

  py::class_<ActivationOffloader, std::shared_ptr<ActivationOffloader>>(m, "ActivationOffloader")
      .def(py::init([](const py::dict& options) {
             return std::make_shared<ActivationOffloader>(
                 requests::parse_offload_options(named_options(options)), HookCarrier::External);
           }),
           py::arg("options"))
      .def("backend",
           [](const ActivationOffloader& o) { return std::string(to_string(o.backend())); })
      .def("semantics",
           [](const ActivationOffloader& o) {
             return std::string(to_string(o.options().semantics));
           })
      .def("stats", [](const ActivationOffloader& o) { return to_dict(o.stats()); })
      .def("resident", [](const ActivationOffloader& o) { return to_dict(o.resident()); })
      .def("device_memory", [](const ActivationOffloader& o) { return to_dict(o.device_memory()); })
      .def("reset_peak_device_memory", &ActivationOffloader::reset_peak_device_memory)
      .def("synchronize", &ActivationOffloader::synchronize,
           py::call_guard<py::gil_scoped_release>())
      .def("release_cached_memory", &ActivationOffloader::release_cached_memory,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "knobs",
          [](const ActivationOffloader& o) {
            py::dict d = knob_dict(knobs_of(o.options()));
            d["backend"] = std::string(to_string(o.backend()));
            return d;
          },
          "The knobs this engine runs with, as parse_offload_options gives them, and its "
          "resolved backend.")
      .def("never_offload", &ActivationOffloader::never_offload, py::arg("tensor"))
      .def("forward", &make_forward,
           "A new forward's pack hook: saved_tensors_hooks(offloader.forward().pack, unpack).");

  py::class_<LayerOffloader, std::shared_ptr<LayerOffloader>>(m, "LayerOffloader")
      .def(py::init([](const std::shared_ptr<ActivationOffloader>& activations,
                       const py::dict& options) {
             return std::make_shared<LayerOffloader>(
                 *activations, requests::parse_layer_offload_options(named_options(options)));
           }),
           py::arg("activations"), py::arg("options"), py::keep_alive<1, 2>())
      .def("add_block", &LayerOffloader::add_block, py::arg("frozen"),
           py::arg("names") = std::vector<std::string>{})
      .def("enter", &LayerOffloader::enter, py::arg("block"))
      .def("exit", &LayerOffloader::exit, py::arg("block"))
      .def("release", &LayerOffloader::release)
      .def("synchronize", &LayerOffloader::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("blocks", &LayerOffloader::blocks)
      .def("resident_blocks", &LayerOffloader::resident_blocks)
      .def("stats", [](const LayerOffloader& l) { return to_dict(l.stats()); })
      .def("device_memory", [](const LayerOffloader& l) { return to_dict(l.device_memory()); });

  py::module_ sim = m.def_submodule("host_sim", "host-sim, the emulated device on the CPU");
  sim.def("install", &host_sim::install);
  sim.def("installed", &host_sim::installed);
  sim.def("counters", [] {
    const auto c = host_sim::counters();
    using C = host_sim::Counters;
    return dict_of(c, field("allocated", &C::allocated), field("peak", &C::peak),
                   field("allocations", &C::allocations), field("reserved", &C::reserved),
                   field("peak_reserved", &C::peak_reserved));
  });
  sim.def("reset_peak", &host_sim::reset_peak);
  sim.def("take_stream_races", &host_sim::take_stream_races);
  sim.def("default_threads", &host_sim::default_threads, py::arg("requested"), py::arg("host_sim"));
}

}  // namespace offtune::python
