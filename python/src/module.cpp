// offtune._offtune: the C++ side of `import offtune`. The package's __init__.py checks that the
// torch it runs with is the one this module was built against before it imports this module.
#include <torch/csrc/utils/pybind.h>

#include "bindings.hpp"

PYBIND11_MODULE(_offtune, m) {
  m.doc() = "offtune's engine, bound for Python (use the offtune package, not this module)";
  offtune::python::bind_engine(m);
  bind_record(m);
}
