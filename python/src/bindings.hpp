// The extension module offtune._offtune: each part binds itself into the module. A thin front end:
// the engine, its options and its stats are core's and requests'; nothing here decides anything.
#pragma once

#include <pybind11/pybind11.h>

namespace offtune {
class ActivationOffloader;
}

namespace offtune::python {

// The per-tensor hooks in plain CPython (hooks.cpp): SavedTensor, Forward, unpack, pack_kept.
void bind_hooks(pybind11::module_& m);
// One forward's pack hook object for `offloader` (Forward.pack).
pybind11::object make_forward(const ActivationOffloader& offloader);

// The engine: offloaders, per-forward hooks for torch's saved_tensors_hooks, layer offloading,
// host-sim (bind_engine.cpp).
void bind_engine(pybind11::module_& m);

}  // namespace offtune::python

// The recorder and its store (bind_record.cpp).
void bind_record(pybind11::module_& m);
