// The runner (profiler/runner.hpp), which measures one run of a workload: warm-up goes on until the
// steps settle, the memory curve reaches the peak the run reports, dropout gives the same losses
// from run to run, and a TorchScript model run in another dtype fails saying why and what to do.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "run_parts.hpp"  // internal header: the host peak's measurement
#include "sweep_test_util.hpp"

namespace offtune::profiler {
namespace {

using namespace sweep_test;

// A workload whose first `slow` steps take 150 ms and the rest 15 ms: warm-up the requested
// --warmup does not cover. (Long enough that a loaded machine's oversleeping, a few ms and now and
// then tens, cannot turn a fast step into a slow one: with 40 and 4 ms it did, under a build.)
class SettlingWorkload final : public WorkloadInstance {
 public:
  explicit SettlingWorkload(int64_t slow) : slow_(slow) {}
  std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& options) override {
    return std::make_unique<ActivationOffloader>(options);
  }
  void step(ActivationOffloader*, int64_t index, StepPhases&) override {
    // Fast steps long enough that a loaded machine's oversleeping (a few ms, 15 under four
    // parallel compile jobs on two cores) stays under the 25% that counts a step as unsettled:
    // with 15 ms steps this test failed so (warmup_added 3, expected 2).
    std::this_thread::sleep_for(std::chrono::milliseconds(index < slow_ ? 400 : 80));
  }

 private:
  int64_t slow_;
};

TEST(Runner, WarmUpGoesOnUntilTheStepsSettle) {
  RunSpec spec;
  spec.workload.model = "settling";
  spec.workload.steps = 3;
  spec.workload.warmup = 1;
  spec.config.offload = false;
  spec.base.backend = BackendKind::HostSim;
  auto store = make_memory_store();
  // Steps 0 (warm-up), 1 and 2 are slow: the first two measured ones are dropped as warm-up and
  // two more are measured.
  SettlingWorkload settling(3);
  const auto out = run_measured(settling, spec, *store);
  ASSERT_EQ(out.record.status, RunStatus::Ok) << out.record.error;
  EXPECT_EQ(out.warmup_added, 2);
  ASSERT_EQ(out.steps.size(), 3u);
  for (size_t k = 0; k < out.steps.size(); ++k) {
    EXPECT_EQ(out.steps[k].step, static_cast<int64_t>(k));
    EXPECT_LT(out.steps[k].end_ns - out.steps[k].begin_ns, 250'000'000) << "a slow step was kept";
  }
  EXPECT_LT(out.record.summary.step_ms_max, 250.0);
  int64_t marks = 0;
  for (const auto& e : store->events(out.record.id)) {
    if (e.kind != EventKind::Step) continue;
    EXPECT_EQ(e.name, "step " + std::to_string(marks));
    EXPECT_GE(e.start_ns, out.steps.front().begin_ns);
    ++marks;
  }
  EXPECT_EQ(marks, 3);
  // Steps steady from the start, slow or fast, are measured as asked.
  SettlingWorkload fast(0), slow(1000);
  EXPECT_EQ(run_measured(fast, spec, *store).warmup_added, 0);
  EXPECT_EQ(run_measured(slow, spec, *store).warmup_added, 0);
  // A workload that never settles (each step 30% faster than the one before) gives up after
  // kMaxExtraWarmup steps and keeps what it has. The steps stay long enough (the last ones about
  // 14 ms) that a loaded machine's oversleeping (a few ms) cannot make them look settled: with a
  // base of 250 ms the last ones slept 3-5 ms and failed one run in four under a parallel build.
  class Speeding final : public WorkloadInstance {
   public:
    std::unique_ptr<ActivationOffloader> make_offloader(const OffloadOptions& o) override {
      return std::make_unique<ActivationOffloader>(o);
    }
    void step(ActivationOffloader*, int64_t index, StepPhases&) override {
      std::this_thread::sleep_for(std::chrono::microseconds(
          static_cast<int64_t>(1000000.0 * std::pow(0.7, static_cast<double>(index)))));
    }
  } speeding;
  const auto gave_up = run_measured(speeding, spec, *store);
  EXPECT_EQ(gave_up.warmup_added, kMaxExtraWarmup);
  EXPECT_EQ(gave_up.steps.size(), 3u);
}

// The memory curve is sampled where device memory changes, so it reaches the peak the run
// reports, with or without offloading (the baseline has no engine events at all).
TEST(Runner, TheMemoryCurveReachesThePeak) {
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  for (const bool offload : {false, true}) {
    RunSpec run;
    run.workload = spec.workload;
    run.config.offload = offload;
    run.config.min_offload_size = 1024;
    run.base = spec.base;
    auto store = make_memory_store();
    const auto out = run_measured(*workload, run, *store);
    ASSERT_EQ(out.record.status, RunStatus::Ok) << out.record.error;
    int64_t highest = 0;
    size_t samples = 0;
    for (const auto& o : store->occupancy(out.record.id)) {
      highest = std::max(highest, o.device_bytes);
      ++samples;
    }
    EXPECT_EQ(highest, out.record.summary.peak_allocated) << "offload " << offload;
    // Thinned, not one sample per allocation: at most a few hundred a step, and the stash's own.
    EXPECT_LT(samples, static_cast<size_t>(spec.workload.steps) * 1000) << "offload " << offload;
    EXPECT_GT(samples, static_cast<size_t>(spec.workload.steps) * 20) << "offload " << offload;
  }
}

// Dropout draws from torch's default generator, which each step seeds from --seed and the step:
// the same command gives the same losses, in one process or two (before: the generator ran on
// from wherever the process had left it, so the losses differed from run to run).
TEST(Runner, DropoutGivesTheSameLossesFromRunToRun) {
  TempDir dir;
  save_dropout_model(dir.file("drop.pt"));
  auto store = make_memory_store();
  std::vector<std::vector<double>> losses;
  for (int i = 0; i < 2; ++i) {
    auto w = dropout_workload(dir.file("drop.pt"));
    const auto out = run_measured(*w, dropout_run(dir.file("drop.pt")), *store);
    ASSERT_EQ(out.record.status, RunStatus::Ok) << out.record.error;
    losses.emplace_back();
    for (const auto& s : out.steps) losses.back().push_back(s.loss);
    torch::rand({1000});  // whatever else the process draws in between changes nothing
  }
  ASSERT_EQ(losses[0].size(), 2u);
  EXPECT_EQ(losses[0], losses[1]);
  // Dropout is on: the masks differ from step to step (the steps are not all alike).
  EXPECT_NE(losses[0][0], losses[0][1]);
}

// A model traced in fp32 run with --dtype bf16 fails in the TorchScript interpreter: the failure
// names the cause (not only the interpreter's first line) and what to do, on one line.
TEST(Runner, ATorchScriptModelInAnotherDtypeFailsWithTheCauseAndWhatToDo) {
  TempDir dir;
  save_dropout_model(dir.file("drop.pt"));
  auto store = make_memory_store();
  auto w = dropout_workload(dir.file("drop.pt"), "bf16");
  auto run = dropout_run(dir.file("drop.pt"));
  run.workload.dtype = "bf16";
  const auto out = run_measured(*w, run, *store);
  ASSERT_EQ(out.record.status, RunStatus::Failed);
  const std::string& e = out.record.error;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("dtype"), std::string::npos) << e;
  EXPECT_NE(e.find("export_torchscript.py --dtype bf16"), std::string::npos) << e;
}

// The process's host peak over a run (cuda runs; docs/memory.md): the kernel's high-water mark,
// reset when the run begins, so that a run's figure is its own and not an earlier run's.
TEST(HostPeak, IsTheProcessesResidentPeakSinceTheRunBegan) {
  constexpr int64_t kBig = int64_t{256} << 20;
  int64_t first_peak = 0;
  {
    const detail::HostPeak first(true);
    const int64_t resident = first.peak();
    if (resident == 0) GTEST_SKIP() << "this kernel does not reset VmHWM (/proc/self/clear_refs)";
    std::vector<char> touched(static_cast<size_t>(kBig), 1);  // resident: every page written
    first_peak = first.peak();
    EXPECT_GE(first_peak, resident + kBig) << "the 256 MiB it touched";
    EXPECT_EQ(touched[static_cast<size_t>(kBig) - 1], 1);
  }
  const detail::HostPeak second(true);  // after the 256 MiB went back
  EXPECT_GT(second.peak(), 0);
  EXPECT_LE(second.peak(), first_peak - kBig / 2) << "an earlier run's peak is not this one's";
  EXPECT_EQ(detail::HostPeak(false).peak(), 0) << "off: not measured";
}

}  // namespace
}  // namespace offtune::profiler
