// offtune refuses to install its autograd engine where another one (Python's, in a process that
// loaded torch from Python) is already the default. Its own executable: the install is once per
// process.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/engine.h>

#include "offtune/core.hpp"

namespace {

// Stands in for Python's engine: a subclass installed as the default before offtune asks.
struct ForeignEngine : torch::autograd::Engine {
  ~ForeignEngine() override { stop(); }
};

torch::autograd::Engine& foreign() {
  static auto* engine = new ForeignEngine();
  return *engine;
}

TEST(ForeignEngine, OfftuneRefusesClearly) {
  torch::autograd::set_default_engine_stub(&foreign);
  offtune::OffloadOptions o;
  o.backend = offtune::BackendKind::HostSim;
  try {
    offtune::ActivationOffloader off(o);
    FAIL() << "expected EngineError";
  } catch (const offtune::EngineError& e) {
    EXPECT_NE(std::string(e.what()).find("another autograd engine"), std::string::npos) << e.what();
  }
  // The foreign engine stays the default: nothing was replaced.
  EXPECT_EQ(&torch::autograd::Engine::get_default_engine(), &foreign());
}

}  // namespace
