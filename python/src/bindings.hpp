// The extension module offtune._offtune: each part binds itself into the module. A thin front end:
// the engine, its options and its stats are core's and requests'; nothing here decides anything.
#pragma once

#include <pybind11/pybind11.h>

namespace offtune::python {

// The engine: offloaders, per-forward hooks for torch's saved_tensors_hooks, layer offloading,
// host-sim (bind_engine.cpp).
void bind_engine(pybind11::module_& m);

}  // namespace offtune::python

// The recorder and its store (bind_record.cpp).
void bind_record(pybind11::module_& m);
