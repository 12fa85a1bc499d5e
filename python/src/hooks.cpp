// The per-tensor path, in plain CPython: torch's saved_tensors_hooks calls pack for every tensor
// autograd saves and unpack when backward needs it, so these run hundreds of times per step.
// pybind11's dispatch and its registry of instances cost about 3.5 us per saved tensor here
// (bench/python_hooks.py: its keep-as-is hook 6.1 us against 2.6 us for Python's no-op hooks, a
// third of TRL's whole cost); METH_O functions and a plain object without a registry cost what
// Python's own calls cost.
//
// A SavedTensor owns one saved tensor's hooks object (core's ExternalHooks); Python's
// saved-tensors machinery holds it until autograd drops the saved tensor, and its deallocation is
// the engine's "node finished" signal. A Forward is one `with` block's pack hook.
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>
#include <torch/csrc/utils/pybind.h>

#include <exception>
#include <memory>

#include "bindings.hpp"
#include "offtune/external_hooks.hpp"
#include "offtune/offloader.hpp"

namespace py = pybind11;

namespace offtune::python {

namespace {

using Hooks = torch::autograd::SavedVariableHooks;

struct SavedTensor {
  PyObject_HEAD Hooks* hooks;  // owned; null only for an object made from Python (refused)
};

struct Forward {
  PyObject_HEAD ExternalHooks* hooks;  // owned
};

PyTypeObject* g_saved_type = nullptr;
PyTypeObject* g_forward_type = nullptr;

// Heap types: an instance holds a reference to its type, given back after it is freed.
void saved_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  delete reinterpret_cast<SavedTensor*>(self)->hooks;  // may give engine memory back; never throws
  type->tp_free(self);
  Py_DECREF(type);
}

void forward_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  delete reinterpret_cast<Forward*>(self)->hooks;
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* wrap_packed(std::unique_ptr<Hooks> hooks, PyObject* arg) {
  if (!THPVariable_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "offtune: a pack hook takes a tensor, got %s",
                 Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  hooks->call_pack_hook(THPVariable_Unpack(arg));
  auto* saved = PyObject_New(SavedTensor, g_saved_type);
  if (saved == nullptr) return nullptr;
  saved->hooks = hooks.release();
  return reinterpret_cast<PyObject*>(saved);
}

// A hook's fault as Python sees it: offtune's own kinds as the bindings raise them (a full disk
// arena is an offtune.EngineFault here too, not a bare RuntimeError), anything else by torch's
// rules (a c10::Error, autograd's in-place check, a Python error from inside). Thrown on as torch's
// python_error, so that HANDLE_TH_ERRORS around the hook restores it and keeps the hook's buffered
// warnings (TORCH_WARN) in order.
[[noreturn]] void rethrow_for_python(std::exception_ptr p) {
  if (set_offtune_error(p)) {
    python_error e;
    e.persist();
    throw e;
  }
  std::rethrow_exception(p);
}

PyObject* forward_pack(PyObject* self, PyObject* arg) {
  HANDLE_TH_ERRORS
  try {
    return wrap_packed(reinterpret_cast<Forward*>(self)->hooks->make(), arg);
  } catch (...) {
    rethrow_for_python(std::current_exception());
  }
  END_HANDLE_TH_ERRORS
}

PyObject* unpack(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  if (Py_TYPE(arg) != g_saved_type || reinterpret_cast<SavedTensor*>(arg)->hooks == nullptr) {
    PyErr_Format(PyExc_TypeError, "offtune: unpack takes what offtune's pack returned, got %s",
                 Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  try {
    return THPVariable_Wrap(reinterpret_cast<SavedTensor*>(arg)->hooks->call_unpack_hook());
  } catch (...) {
    rethrow_for_python(std::current_exception());
  }
  END_HANDLE_TH_ERRORS
}

PyObject* pack_kept(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  try {
    return wrap_packed(ExternalHooks::make_kept(), arg);
  } catch (...) {
    rethrow_for_python(std::current_exception());
  }
  END_HANDLE_TH_ERRORS
}

PyObject* pack_floor_copy(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  return wrap_packed(ExternalHooks::make_floor(HookFloor::Copy), arg);
  END_HANDLE_TH_ERRORS
}

PyMethodDef g_forward_methods[] = {
    {"pack", forward_pack, METH_O, "This forward's pack hook."},
    {nullptr, nullptr, 0, nullptr},
};

PyMethodDef g_functions[] = {
    {"unpack", unpack, METH_O, "The unpack hook of every pack hook here."},
    {"pack_kept", pack_kept, METH_O,
     "A pack hook that keeps the tensor as autograd would (a no-offload region)."},
    {"pack_floor_copy", pack_floor_copy, METH_O,
     "Benchmarks: a pack hook that copies the tensor to host memory and back, nothing else."},
    {nullptr, nullptr, 0, nullptr},
};

#ifdef Py_TPFLAGS_DISALLOW_INSTANTIATION
constexpr unsigned long kFlags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION;
#else
constexpr unsigned long kFlags = Py_TPFLAGS_DEFAULT;
#endif

PyTypeObject* make_type(const char* name, int size, destructor dealloc, const char* doc,
                        PyMethodDef* methods) {
  PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(dealloc)},
      {Py_tp_doc, const_cast<char*>(doc)},
      {Py_tp_methods, methods},
      {0, nullptr},
  };
  PyType_Spec spec{name, size, 0, static_cast<unsigned int>(kFlags), slots};
  auto* type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (type == nullptr) throw py::error_already_set();
  return type;
}

}  // namespace

py::object make_forward(const ActivationOffloader& offloader) {
  auto hooks = std::make_unique<ExternalHooks>(offloader);
  auto* forward = PyObject_New(Forward, g_forward_type);
  if (forward == nullptr) throw py::error_already_set();
  forward->hooks = hooks.release();
  return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(forward));
}

void bind_hooks(py::module_& m) {
  static PyMethodDef no_methods[] = {{nullptr, nullptr, 0, nullptr}};
  g_saved_type = make_type("offtune._offtune.SavedTensor", sizeof(SavedTensor), saved_dealloc,
                           "One saved tensor held by the engine.", no_methods);
  g_forward_type =
      make_type("offtune._offtune.Forward", sizeof(Forward), forward_dealloc,
                "One forward's pack hook: saved_tensors_hooks(f.pack, unpack).", g_forward_methods);
  m.add_object("SavedTensor",
               py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(g_saved_type)));
  m.add_object("Forward",
               py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(g_forward_type)));
  for (PyMethodDef* def = g_functions; def->ml_name != nullptr; ++def) {
    PyObject* fn = PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr());
    if (fn == nullptr) throw py::error_already_set();
    m.add_object(def->ml_name, py::reinterpret_steal<py::object>(fn));
  }
}

}  // namespace offtune::python
