// The extension module offtune._offtune: each part binds itself into the module. A thin front end:
// the engine, its options and its stats are core's and requests'; nothing here decides anything.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <utility>
#include <vector>

#include "offtune/requests/engine_options.hpp"

namespace offtune {
class ActivationOffloader;
}

namespace offtune::python {

// One field of a core or profiler struct as Python sees it: the dict key and the member it reads.
template <class T, class M>
struct Field {
  const char* name;
  M T::*member;
};
template <class T, class M>
Field<T, M> field(const char* name, M T::*member) {
  return {name, member};
}

// Puts `fields` of `object` into `d` under their names, in order: the field-by-field views of the
// engine's stats and the store's records (to_dict in bind_engine.cpp, bind_record.cpp).
template <class T, class... M>
void put_fields(pybind11::dict& d, const T& object, const Field<T, M>&... fields) {
  ((d[fields.name] = object.*(fields.member)), ...);
}
template <class T, class... M>
pybind11::dict dict_of(const T& object, const Field<T, M>&... fields) {
  pybind11::dict d;
  put_fields(d, object, fields...);
  return d;
}

// Sets the Python error for `p` when it is one of offtune's kinds (docs/python.md, "Errors":
// InputError, EngineFault, OSError for a store's system error) and says so; false for any other
// exception, which the caller translates as it would (pybind11's or torch's rules). The bindings'
// translator and the plain-CPython hooks (whose faults pybind11 never sees) share it.
bool set_offtune_error(std::exception_ptr p);

// The per-tensor hooks in plain CPython (hooks.cpp): SavedTensor, Forward, unpack, pack_kept.
void bind_hooks(pybind11::module_& m);
// One forward's pack hook object for `offloader` (Forward.pack).
pybind11::object make_forward(const ActivationOffloader& offloader);

// The engine: offloaders, per-forward hooks for torch's saved_tensors_hooks, layer offloading,
// host-sim (bind_engine.cpp).
void bind_engine(pybind11::module_& m);
// Offloader's keyword options as the request layer takes them (bind_engine.cpp): OptionsError for
// a name that is not text or a value of no kind an option takes.
std::vector<requests::NamedOption> named_options(const pybind11::dict& options);

// offtune.predict: the what-if predictor over the caller's own step (bind_predict.cpp).
void bind_predict(pybind11::module_& m);

}  // namespace offtune::python

// The recorder and its store (bind_record.cpp).
void bind_record(pybind11::module_& m);
