// offtune._offtune: the C++ side of `import offtune`. The package's __init__.py checks that the
// torch it runs with is the one this module was built against before it imports this module.
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>
#include <string>

#include "bindings.hpp"
#include "offtune/options.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"

namespace {

namespace pf = offtune::profiler;

// Errors by kind (docs/python.md, "Errors"), the CLI's rule (exit 2 only for the user's input):
// a value from the user, refused at any layer, is InputError (a ValueError); a fault inside the
// work on valid input, a std::invalid_argument thrown deep in a model or the predictor included, is
// EngineFault (a RuntimeError). Created once with the module, which keeps them alive.
PyObject* g_input_error = nullptr;
PyObject* g_engine_fault = nullptr;

}  // namespace

bool offtune::python::set_offtune_error(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const pf::StoreError& e) {
    switch (e.kind()) {
      // A file that is not an offtune store: the user named the wrong file.
      case pf::StoreError::Kind::NotADatabase:
      case pf::StoreError::Kind::Corrupt:
      case pf::StoreError::Kind::NewerSchema:
      case pf::StoreError::Kind::Invalid:
        PyErr_SetString(g_input_error, e.what());
        break;
      default:  // a directory, a disk, a lock: the system's
        PyErr_SetString(PyExc_OSError, e.what());
    }
  } catch (const std::out_of_range&) {
    return false;  // not offtune's kinds: pybind11's own translation (IndexError)
  } catch (const std::length_error&) {
    return false;  // likewise (ValueError)
  } catch (const std::domain_error&) {
    return false;  // likewise (ValueError)
  } catch (const std::logic_error& e) {
    // std::invalid_argument is a logic_error, ValueError by pybind11's own rule: here only where it
    // came from the user (requests::is_refused_input, the CLI's rule); a step call out of order is
    // a logic_error too.
    PyErr_SetString(offtune::requests::is_refused_input(e) ? g_input_error : g_engine_fault,
                    e.what());
  } catch (const offtune::EngineError& e) {
    PyErr_SetString(g_engine_fault, e.what());
  } catch (...) {
    return false;
  }
  return true;
}

namespace {

void translate_errors(std::exception_ptr p) {
  if (p && !offtune::python::set_offtune_error(p)) std::rethrow_exception(p);
}

}  // namespace

PYBIND11_MODULE(_offtune, m) {
  m.doc() = "offtune's engine, bound for Python (use the offtune package, not this module)";
  g_input_error = PyErr_NewExceptionWithDoc(
      "offtune.InputError",
      "A value you gave, refused (an option, a size, a device model, a file that is not an "
      "offtune store): fix the value.",
      PyExc_ValueError, nullptr);
  g_engine_fault = PyErr_NewExceptionWithDoc(
      "offtune.EngineFault",
      "offtune could not do the work on valid input (the engine, a model, the predictor, a call "
      "out of order): not a bad value.",
      PyExc_RuntimeError, nullptr);
  m.add_object("InputError", py::handle(g_input_error));
  m.add_object("EngineFault", py::handle(g_engine_fault));
  offtune::python::bind_engine(m);
  offtune::python::bind_predict(m);
  bind_record(m);
  // The one translation of offtune's errors, for this module's functions only: a global
  // translator would re-type the errors of every other pybind11 extension in the process.
  py::register_local_exception_translator(&translate_errors);
  // Throws the C++ error that `kind` names, as the engine, the profiler or the request layer would:
  // for the tests of how each kind reaches Python (tests/python/test_errors.py), since a fault deep
  // in a model has no input that provokes it on purpose.
  m.def("_throw_for_test", [](const std::string& kind) {
    namespace pf = offtune::profiler;
    if (kind == "usage") throw offtune::requests::UsageError("usage: --db is required");
    if (kind == "parse") throw pf::ParseError("parse: invalid size 'x'");
    if (kind == "options") throw offtune::OptionsError("options: max_fwd_stash_size must be >= 1");
    if (kind == "not-a-store")
      throw pf::StoreError(pf::StoreError::Kind::NotADatabase, "not-a-store: a text file");
    if (kind == "fault") throw std::invalid_argument("fault: a trace cannot predict this point");
    if (kind == "engine") throw offtune::EngineError("engine: no GPU for backend cuda");
    if (kind == "logic") throw std::logic_error("logic: end_step with no step open");
    throw std::out_of_range("unknown kind " + kind);
  });
}
