// Helpers shared by the sweep and runner suites (test_sweep.cpp, test_runner.cpp): a small sweep of
// the built-in tiny model on host-sim, the samples' workload a spec names, a temporary directory,
// and a TorchScript model with dropout built in the test.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>

#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/samples/registry.hpp"
#include "offtune/samples/workload.hpp"
#include "temp_dir.hpp"

namespace offtune::profiler::sweep_test {

// The tiny model, batch 2 x 32 tokens, 2 steps after 1 of warm-up, over min_offload_size {1 KiB,
// 1 MiB} x max_fwd_stash_size {1, 4} and the baseline, on host-sim.
inline SweepSpec tiny_spec() {
  SweepSpec s;
  s.name = "test";
  s.workload.model = "tiny";
  s.workload.batch = 2;
  s.workload.seq = 32;
  s.workload.dtype = "fp32";
  s.workload.steps = 2;
  s.workload.warmup = 1;
  s.grid.set_numbers("min_offload_size", {1024, 1 << 20});
  s.grid.set_numbers("max_fwd_stash_size", {1, 4});
  s.base.backend = BackendKind::HostSim;
  s.env.backend = "host-sim";
  return s;
}

// The samples' workload a spec names.
inline std::unique_ptr<WorkloadInstance> workload_of(const Workload& w) {
  samples::WorkloadSpec spec;
  spec.model = w.model;
  spec.batch = w.batch;
  spec.seq = w.seq;
  spec.dtype = samples::parse_dtype(w.dtype);
  spec.seed = w.seed;
  spec.optimizer = w.optimizer;
  spec.lora_rank = w.lora_rank;
  return samples::make_workload(spec, c10::kCPU);
}

// A fresh directory, removed afterwards.
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("offtune-sweep-test") {}
};

// A TorchScript model with dropout, built here (x [B, 16] -> dropout(tanh(x w1)) w2), saved at
// `path`.
inline void save_dropout_model(const std::string& path) {
  torch::manual_seed(3);
  torch::jit::Module m("__torch__.DropNet");
  m.register_parameter("w1", (torch::randn({16, 64}) * 0.2).requires_grad_(true), false);
  m.register_parameter("w2", (torch::randn({64, 8}) * 0.2).requires_grad_(true), false);
  m.register_attribute("training", c10::BoolType::get(), true);
  m.define(
      "def forward(self, x):\n"
      "    h = torch.dropout(torch.tanh(torch.matmul(x, self.w1)), 0.3, self.training)\n"
      "    return torch.matmul(h, self.w2)\n");
  m.save(path);
}

inline std::unique_ptr<WorkloadInstance> dropout_workload(const std::string& path,
                                                          const std::string& dtype = "fp32") {
  samples::WorkloadSpec w;
  w.model = path;
  w.batch = 4;
  w.seq = 8;
  w.dtype = samples::parse_dtype(dtype);
  w.seed = 5;
  w.input_spec = "x:float32[B,T,16]";
  return samples::make_workload(w, c10::kCPU);
}

inline RunSpec dropout_run(const std::string& path) {
  RunSpec run;
  run.workload.model = path;
  run.workload.batch = 4;
  run.workload.seq = 8;
  run.workload.dtype = "fp32";
  run.workload.seed = 5;
  // Two steps: three would let warm-up until stable drop a slow first one (wall time).
  run.workload.steps = 2;
  run.workload.warmup = 1;
  run.base.backend = BackendKind::HostSim;
  run.env.backend = "host-sim";
  return run;
}

}  // namespace offtune::profiler::sweep_test
