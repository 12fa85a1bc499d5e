// The engine, bound: an ActivationOffloader made for Python's hooks (HookCarrier::External), one
// Forward per `with` block whose pack and unpack torch's saved_tensors_hooks calls (hooks.cpp),
// layer offloading, and host-sim's switches. Options arrive as Python passed them and are parsed by
// requests/ (engine_options.hpp); OptionsError becomes offtune.InputError, EngineError
// offtune.EngineFault (module.cpp).
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "offtune/host_sim.hpp"
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

py::dict to_dict(const OffloadStats& s) {
  py::dict d;
  d["packed"] = s.packed;
  d["offloaded"] = s.offloaded;
  d["deduplicated"] = s.deduplicated;
  d["kept"] = s.kept;
  d["offloaded_bytes"] = s.offloaded_bytes;
  d["reloaded"] = s.reloaded;
  d["reloaded_bytes"] = s.reloaded_bytes;
  d["prefetched"] = s.prefetched;
  d["prefetch_skipped"] = s.prefetch_skipped;
  d["prefetch_dropped"] = s.prefetch_dropped;
  d["from_fwd_stash"] = s.from_fwd_stash;
  d["window_waits"] = s.window_waits;
  d["record_streams"] = s.record_streams;
  d["pageable_fallbacks"] = s.pageable_fallbacks;
  d["spilled"] = s.spilled;
  d["disk_written_bytes"] = s.disk_written_bytes;
  d["disk_reads"] = s.disk_reads;
  d["disk_read_bytes"] = s.disk_read_bytes;
  d["disk_read_ahead"] = s.disk_read_ahead;
  d["spill_waits"] = s.spill_waits;
  d["disk_write_failures"] = s.disk_write_failures;
  d["verified"] = s.verified;
  return d;
}

py::dict to_dict(const ResidentState& r) {
  py::dict d;
  d["tracked"] = r.tracked;
  d["host_bytes"] = r.host_bytes;
  d["fwd_stash_count"] = r.fwd_stash_count;
  d["fwd_stash_bytes"] = r.fwd_stash_bytes;
  d["bwd_stash_count"] = r.bwd_stash_count;
  d["bwd_stash_bytes"] = r.bwd_stash_bytes;
  d["pending_host_frees"] = r.pending_host_frees;
  d["host_pool_in_use_bytes"] = r.host_pool_in_use_bytes;
  d["host_pool_reserved_bytes"] = r.host_pool_reserved_bytes;
  d["disk_bytes"] = r.disk_bytes;
  d["disk_io_in_flight"] = r.disk_io_in_flight;
  d["disk_arena_bytes"] = r.disk_arena_bytes;
  d["resting"] = r.resting();
  return d;
}

py::dict to_dict(const DeviceMemory& m) {
  py::dict d;
  d["allocated"] = m.allocated;
  d["peak_allocated"] = m.peak_allocated;
  d["reserved"] = m.reserved;
  d["peak_reserved"] = m.peak_reserved;
  return d;
}

py::dict to_dict(const LayerOffloadStats& s) {
  py::dict d;
  d["blocks"] = s.blocks;
  d["parameters"] = s.parameters;
  d["frozen_bytes"] = s.frozen_bytes;
  d["max_block_bytes"] = s.max_block_bytes;
  d["loads"] = s.loads;
  d["loaded_bytes"] = s.loaded_bytes;
  d["prefetched"] = s.prefetched;
  d["demand_loads"] = s.demand_loads;
  d["waits"] = s.waits;
  d["kept_on_device"] = s.kept_on_device;
  d["device_to_host"] = s.device_to_host;
  d["refreshed"] = s.refreshed;
  d["prefetch_skipped"] = s.prefetch_skipped;
  return d;
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
        py::dict d;
        d["min_offload_size"] = o.min_offload_size;
        d["max_fwd_stash_size"] = o.max_fwd_stash_size;
        d["max_fwd_stash_bytes"] = o.max_fwd_stash_bytes;
        d["prefetch"] = o.prefetch;
        d["semantics"] = std::string(to_string(o.semantics));
        d["backend"] = std::string(to_string(o.backend));
        return d;
      },
      "Validates options as Offloader would (ValueError naming a bad one); returns the main ones "
      "parsed.");

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
      .def("release_cached_memory", &ActivationOffloader::release_cached_memory)
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
    py::dict d;
    d["allocated"] = c.allocated;
    d["peak"] = c.peak;
    d["allocations"] = c.allocations;
    d["reserved"] = c.reserved;
    d["peak_reserved"] = c.peak_reserved;
    return d;
  });
  sim.def("reset_peak", &host_sim::reset_peak);
  sim.def("take_stream_races", &host_sim::take_stream_races);
  sim.def("default_threads", &host_sim::default_threads, py::arg("requested"), py::arg("host_sim"));
}

}  // namespace offtune::python
