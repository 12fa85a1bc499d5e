// A run recorded from a training loop that steps itself (profiler/live_run.hpp), under host-sim:
// the rows it writes are those of a CLI run, `offtune report` and `offtune recommend` read them,
// warm-up is left out as the CLI leaves it out, a device model times the loop, and a loop that
// fails or stops early is recorded as such.
#include "offtune/profiler/live_run.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "offtune/cli/command_line.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/store.hpp"
#include "temp_dir.hpp"

namespace offtune::profiler {
namespace {

using json = nlohmann::json;

// A user's own model and loop: two linear layers, SGD.
struct Loop {
  torch::nn::Sequential model{torch::nn::Linear(64, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 64)};
  torch::optim::SGD opt{model->parameters(), torch::optim::SGDOptions(0.01)};
  torch::Tensor x = torch::randn({32, 64});
  Loop() { torch::manual_seed(7); }
  // One training step; `off` offloads the forward's saved tensors when given.
  double step(ActivationOffloader* off) {
    torch::Tensor loss;
    if (off != nullptr) {
      auto scope = off->scope();
      loss = model->forward(x).pow(2).mean();
    } else {
      loss = model->forward(x).pow(2).mean();
    }
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss.item<double>();
  }
};

OffloadOptions options() {
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.min_offload_size = 0;
  o.max_fwd_stash_size = 2;
  o.link = {};
  return o;
}

LiveRunSpec spec_for(const std::string& sweep, const EngineConfig& config, int64_t warmup) {
  LiveRunSpec s;
  s.workload.model = "Loop";
  s.workload.batch = 32;
  s.workload.dtype = "fp32";
  s.workload.warmup = warmup;
  s.config = config;
  fill_environment(s.env, BackendKind::HostSim, nullptr, "none");
  s.label = "live";
  s.sweep = sweep;
  return s;
}

EngineConfig baseline() {
  EngineConfig c;
  c.offload = false;
  return c;
}

struct Cli {
  int code = -1;
  std::string out, err;
};

Cli offtune_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "offtune");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Cli c;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  c.code = cli::run_command_line(static_cast<int>(args.size()), argv.data());
  std::cout.flush();
  std::fflush(nullptr);
  c.out = testing::internal::GetCapturedStdout();
  c.err = testing::internal::GetCapturedStderr();
  return c;
}

// Text with every run of spaces as one: rows compared without their column padding.
std::string squeeze(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

class LiveRunTest : public testing::Test {
 protected:
  void SetUp() override { host_sim::install(); }
  test::TempDir dir_{"offtune-live-run"};
};

TEST_F(LiveRunTest, ARecordedLoopWritesTheRowsOfACliRun) {
  const std::string db = dir_.file("runs.db");
  auto store = std::shared_ptr<Store>(open_sqlite_store(db));
  Loop loop;
  ActivationOffloader off(options());
  std::vector<double> losses;
  int64_t measured_bytes = 0;
  {
    LiveRun run(store, spec_for("", knobs_of(off.options()), /*warmup=*/1));
    run.attach(off);
    for (int i = 0; i < 5; ++i) {
      const int64_t before = off.stats().offloaded_bytes;
      const double loss = loop.step(&off);
      if (i >= 1) measured_bytes += off.stats().offloaded_bytes - before;
      losses.push_back(loss);
      run.step(loss);
    }
    const auto& rec = run.finish();
    EXPECT_EQ(rec.status, RunStatus::Ok) << rec.error;
    // 5 steps ended, the first is warm-up; warm-up until stable may drop more on a busy machine.
    EXPECT_EQ(run.steps_measured() + run.warmup_added(), 4);
    EXPECT_EQ(static_cast<int64_t>(store->steps(rec.id).size()) + run.warmup_added(), 4);
  }
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  const RunRecord& r = runs[0];
  EXPECT_EQ(r.status, RunStatus::Ok);
  EXPECT_EQ(r.env.backend, "host-sim");
  EXPECT_FALSE(r.env.offtune_version.empty());
  EXPECT_FALSE(r.env.torch_version.empty());
  EXPECT_EQ(r.workload.model, "Loop");
  EXPECT_EQ(r.workload.warmup, 1);
  EXPECT_TRUE(r.config.offload);
  EXPECT_EQ(r.config.min_offload_size, 0);
  EXPECT_EQ(r.config.max_fwd_stash_size, 2);
  EXPECT_EQ(r.config.link.name, "none");
  EXPECT_GT(r.finished_unix_ns, r.started_unix_ns);

  const auto steps = store->steps(r.id);
  ASSERT_FALSE(steps.empty());
  int64_t peak = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto& s = steps[k];
    EXPECT_EQ(s.step, static_cast<int64_t>(k));
    EXPECT_LT(s.begin_ns, s.end_ns);
    EXPECT_GT(s.peak_allocated, 0);
    EXPECT_GE(s.peak_reserved, s.peak_allocated);
    EXPECT_GT(s.offloaded_bytes, 0);
    // Reloads: what the forward window no longer held when backward came.
    EXPECT_GT(s.reloaded_bytes, 0);
    EXPECT_LE(s.reloaded_bytes, s.offloaded_bytes);
    peak = std::max(peak, s.peak_allocated);
  }
  // The loss the loop reported, for the last step kept.
  EXPECT_EQ(steps.back().loss, losses.back());
  EXPECT_EQ(r.summary.final_loss, losses.back());
  EXPECT_EQ(r.summary.peak_allocated, peak);
  EXPECT_GT(r.summary.step_ms_median, 0.0);
  EXPECT_GT(r.summary.offloaded_bytes, 0);
  if (steps.size() == 4) {
    EXPECT_EQ(r.summary.offloaded_bytes * 4, measured_bytes);
  }

  // The timeline of the steps kept, and nothing of the warm-up: a step mark per step, the copies,
  // compute derived from the steps (the loop marked no phases), pack and unpack instants.
  const auto events = store->events(r.id);
  std::set<EventKind> kinds;
  int64_t step_marks = 0;
  for (const auto& e : events) {
    kinds.insert(e.kind);
    step_marks += e.kind == EventKind::Step;
    EXPECT_GE(e.start_ns, steps.front().begin_ns) << to_string(e.kind);
    EXPECT_EQ(e.run, r.id);
  }
  EXPECT_EQ(step_marks, static_cast<int64_t>(steps.size()));
  for (auto k : {EventKind::Step, EventKind::Compute, EventKind::CopyD2H, EventKind::CopyH2D,
                 EventKind::Pack, EventKind::Unpack}) {
    EXPECT_TRUE(kinds.count(k)) << to_string(k);
  }
  EXPECT_FALSE(kinds.count(EventKind::Forward));
  const auto occupancy = store->occupancy(r.id);
  ASSERT_FALSE(occupancy.empty());
  EXPECT_TRUE(std::any_of(occupancy.begin(), occupancy.end(),
                          [](const OccupancySample& o) { return o.fwd_bytes > 0; }));
  EXPECT_TRUE(std::any_of(occupancy.begin(), occupancy.end(),
                          [](const OccupancySample& o) { return o.device_bytes > 0; }));
  store.reset();

  // `offtune report` lists it as any run; export writes its timeline.
  const Cli report = offtune_cli({"report", "--db", db, "--json"});
  ASSERT_EQ(report.code, 0) << report.err;
  const json j = json::parse(report.out);
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["status"], "ok");
  EXPECT_EQ(j["runs"][0]["label"], "live");
  const Cli exported =
      offtune_cli({"export", "--db", db, "--format", "chrome", "-o", dir_.file("t.json")});
  EXPECT_EQ(exported.code, 0) << exported.err;
}

TEST_F(LiveRunTest, RunsRecordedUnderOneNameAreASweepThatRecommendPicksFrom) {
  const std::string db = dir_.file("runs.db");
  auto store = std::shared_ptr<Store>(open_sqlite_store(db));
  Loop loop;
  ActivationOffloader off(options());
  {
    // The baseline: no offloader attached, yet its peak device memory is measured.
    LiveRun run(store, spec_for("tune", baseline(), 0));
    for (int i = 0; i < 3; ++i) run.step(loop.step(nullptr));
    const auto& rec = run.finish();
    ASSERT_EQ(rec.status, RunStatus::Ok) << rec.error;
    EXPECT_GT(rec.summary.peak_allocated, 0);
    EXPECT_EQ(rec.summary.offloaded_bytes, 0);
  }
  {
    LiveRun run(store, spec_for("tune", knobs_of(off.options()), 0));
    run.attach(off);
    for (int i = 0; i < 3; ++i) run.step(loop.step(&off));
    ASSERT_EQ(run.finish().status, RunStatus::Ok);
  }
  const auto sweeps = store->sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0].name, "tune");
  const auto points = store->points(sweeps[0].id);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].index, 0);
  EXPECT_EQ(points[1].index, 1);
  EXPECT_FALSE(points[0].config.offload);
  EXPECT_TRUE(points[1].config.offload);
  EXPECT_EQ(points[1].status, PointStatus::Ok);
  EXPECT_EQ(points[1].run, store->runs()[1].id);
  store.reset();

  const Cli rec = offtune_cli({"recommend", "--db", db, "--json", "--max-slowdown", "1000"});
  ASSERT_EQ(rec.code, 0) << rec.err << rec.out;
  const json j = json::parse(rec.out);
  EXPECT_TRUE(j.contains("point")) << rec.out;
  EXPECT_TRUE(j.contains("slowdown")) << rec.out;  // the baseline was found
  const Cli report = offtune_cli({"report", "--db", db, "--sweep", "1"});
  EXPECT_EQ(report.code, 0) << report.err;
}

TEST_F(LiveRunTest, ADeviceModelTimesTheLoopAsThatGpuAndIsPutBackAfter) {
  auto store = std::shared_ptr<Store>(make_memory_store());
  Loop loop;
  ActivationOffloader off(options());
  auto spec = spec_for("", knobs_of(off.options()), 1);
  spec.device_model = load_device_model("h100-sxm");
  fill_environment(spec.env, BackendKind::HostSim, &*spec.device_model, "none");
  ASSERT_EQ(host_sim::device_model(), nullptr);
  {
    LiveRun run(store, spec);
    run.attach(off);
    ASSERT_NE(host_sim::device_model(), nullptr);
    EXPECT_EQ(host_sim::device_model()->name, "h100-sxm");
    for (int i = 0; i < 4; ++i) run.step(loop.step(&off));
    const auto& rec = run.finish();
    ASSERT_EQ(rec.status, RunStatus::Ok) << rec.error;
    // The model times every step alike: none dropped as warm-up, an exact interval.
    EXPECT_EQ(run.warmup_added(), 0);
    EXPECT_EQ(rec.summary.step_ms_min, rec.summary.step_ms_max);
    EXPECT_EQ(rec.summary.step_ms_ci_level, 1.0);
    EXPECT_NE(run.collector_status().find("h100-sxm"), std::string::npos);
  }
  EXPECT_EQ(host_sim::device_model(), nullptr);
  EXPECT_NE(store->runs()[0].env.device.find("modelling"), std::string::npos);
}

TEST_F(LiveRunTest, MarkedPhasesAreTheTimelinesForwardAndBackward) {
  auto store = std::shared_ptr<Store>(make_memory_store());
  Loop loop;
  ActivationOffloader off(options());
  LiveRun run(store, spec_for("", knobs_of(off.options()), 0));
  run.attach(off);
  for (int i = 0; i < 2; ++i) {
    torch::Tensor loss;
    run.begin_phase(StepPhase::Forward);
    {
      auto scope = off.scope();
      loss = loop.model->forward(loop.x).pow(2).mean();
    }
    run.end_phase(StepPhase::Forward);
    run.begin_phase(StepPhase::Backward);
    loss.backward();
    run.end_phase(StepPhase::Backward);
    run.step(loss.item<double>());
  }
  const auto id = run.finish().id;
  int64_t forward = 0, backward = 0;
  for (const auto& e : store->events(id)) {
    forward += e.kind == EventKind::Forward;
    backward += e.kind == EventKind::Backward;
  }
  EXPECT_EQ(forward, 2);
  EXPECT_EQ(backward, 2);
}

TEST_F(LiveRunTest, ALoopThatFailsOrStopsEarlyIsRecordedSo) {
  auto store = std::shared_ptr<Store>(make_memory_store());
  Loop loop;
  ActivationOffloader off(options());
  RunId failed, interrupted, empty;
  {
    LiveRun run(store, spec_for("named", knobs_of(off.options()), 0));
    run.attach(off);
    run.step(loop.step(&off));
    const auto& rec = run.fail(RunStatus::Failed, "RuntimeError: boom\nTraceback ...");
    failed = rec.id;
    EXPECT_THROW(run.step(), std::logic_error);
    EXPECT_THROW(run.finish(), std::logic_error);
  }
  {
    LiveRun run(store, spec_for("named", knobs_of(off.options()), 0));
    run.attach(off);
    run.step(loop.step(&off));
    interrupted = run.id();
  }  // never finished
  {
    LiveRun run(store, spec_for("", baseline(), 2));
    run.step(loop.step(nullptr));
    empty = run.finish().id;
  }
  const auto f = store->run(failed);
  EXPECT_EQ(f->status, RunStatus::Failed);
  EXPECT_EQ(f->error, "RuntimeError: boom");
  EXPECT_EQ(store->steps(failed).size(), 1u);  // what was measured before is kept
  EXPECT_EQ(store->run(interrupted)->status, RunStatus::Interrupted);
  const auto e = store->run(empty);
  EXPECT_EQ(e->status, RunStatus::Failed);
  EXPECT_NE(e->error.find("no step was measured"), std::string::npos) << e->error;
  // The failed run is a failed point of its sweep; the interrupted one is no point.
  const auto sweeps = store->sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  const auto points = store->points(sweeps[0].id);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].status, PointStatus::Failed);
  EXPECT_EQ(points[0].run, failed);
  // The offloader has no observer left: a later run can attach it again.
  LiveRun again(store, spec_for("", knobs_of(off.options()), 0));
  again.attach(off);
  again.step(loop.step(&off));
  EXPECT_EQ(again.finish().status, RunStatus::Ok);
}

// `offtune sweep --script` begins each point's run and the script records it: the run is continued
// (its id, label, config and start kept; the workload and env the loop's), and a second rank
// begins a run of its own naming it as its job.
TEST_F(LiveRunTest, ARunBegunElsewhereIsContinuedAndOtherRanksNameItAsTheirJob) {
  auto store = std::shared_ptr<Store>(open_sqlite_store(dir_.file("sweep.db")));
  Loop loop;
  ActivationOffloader off(options());
  RunRecord begun;  // what the sweep writes before it starts the script
  begun.status = RunStatus::Running;
  begun.label = "s point 3 (sweep 1)";
  begun.workload.model = "script";
  begun.config = knobs_of(off.options());
  begun.config.prefetch = 2;  // the point's, whatever the loop's offloader says
  begun.started_unix_ns = 1234;
  const RunId id = store->begin_run(begun);
  LiveRunSpec spec = spec_for("", knobs_of(off.options()), 1);
  spec.workload.model = "LlamaForCausalLM";
  spec.continue_run = id;
  spec.world_size = 2;
  LiveRunSpec rank1 = spec_for("", knobs_of(off.options()), 1);
  rank1.label = begun.label + " rank 1";
  rank1.rank = 1;
  rank1.world_size = 2;
  rank1.job_run = id;
  RunId other;
  // One after the other: host-sim's allocation listener is one per process (ranks are processes).
  for (LiveRunSpec* s : {&spec, &rank1}) {
    LiveRun run(store, *s);
    if (s == &spec) {
      EXPECT_EQ(run.id(), id);
    }
    other = run.id();
    run.attach(off);
    for (int i = 0; i < 4; ++i) run.step(loop.step(&off));
    EXPECT_EQ(run.finish().status, RunStatus::Ok);
  }
  ASSERT_EQ(store->runs().size(), 2u) << "one run continued, one begun";
  const RunRecord r = *store->run(id);
  EXPECT_EQ(r.status, RunStatus::Ok) << r.error;
  EXPECT_EQ(r.label, begun.label);
  EXPECT_EQ(r.config, begun.config);
  EXPECT_EQ(r.started_unix_ns, 1234);
  EXPECT_EQ(r.workload.model, "LlamaForCausalLM");
  EXPECT_EQ(r.env.backend, "host-sim");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_FALSE(r.job_run.has_value());
  EXPECT_GE(store->steps(id).size(), 1u);
  const RunRecord o = *store->run(other);
  EXPECT_EQ(o.label, "s point 3 (sweep 1) rank 1");
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 2);
  EXPECT_EQ(o.job_run, id);
  EXPECT_EQ(o.status, RunStatus::Ok) << o.error;
  // Finished now: it cannot be continued again, nor can a run that is not there.
  try {
    LiveRun again(store, spec);
    ADD_FAILURE() << "a finished run was continued";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is ok, not running"), std::string::npos) << e.what();
  }
  spec.continue_run = RunId(999);
  try {
    LiveRun again(store, spec);
    ADD_FAILURE() << "a missing run was continued";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("run 999 to continue is not in"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(store->runs().size(), 2u);
}

// `offtune report`: a job is one row (its slowest rank's step time, its highest peak); --ranks
// lists each rank's figures under it. A single-process run is a row as before.
TEST_F(LiveRunTest, ReportShowsAJobAsOneRowAndEachRankOnRequest) {
  const std::string db = dir_.file("job.db");
  {
    auto store = open_sqlite_store(db);
    const auto put = [&](const std::string& label, int64_t rank, int64_t world,
                         std::optional<RunId> job, double ms, int64_t peak) {
      RunRecord r;
      r.label = label;
      r.rank = rank;
      r.world_size = world;
      r.job_run = job;
      const RunId id = store->begin_run(r);
      RunSummary s;
      s.step_ms_median = ms;
      s.peak_allocated = peak;
      s.peak_reserved = peak;
      store->finish_run(id, RunStatus::Ok, "", s, 1);
      return id;
    };
    put("alone", 0, 1, std::nullopt, 5.0, 1 << 20);
    const RunId zero = put("s point 1 (sweep 1)", 0, 2, std::nullopt, 10.0, 3 << 20);
    put("s point 1 (sweep 1) rank 1", 1, 2, zero, 12.5, 2 << 20);
  }
  const Cli plain = offtune_cli({"report", "--db", db});
  ASSERT_EQ(plain.code, 0) << plain.err;
  const std::string rows = squeeze(plain.out);
  EXPECT_NE(rows.find("3 run(s)"), std::string::npos) << rows;
  EXPECT_NE(rows.find("run 1 ok 5.00 ms peak 1 MiB alone"), std::string::npos) << rows;
  EXPECT_NE(rows.find("run 2 ok 12.50 ms peak 3 MiB s point 1 (sweep 1) "
                      "(job of 2 ranks, 2 recorded"),
            std::string::npos)
      << rows;
  EXPECT_EQ(rows.find("run 3 "), std::string::npos) << "rank 1 is in its job's row";
  EXPECT_EQ(rows.find("rank 1"), std::string::npos) << rows;
  const Cli ranks = offtune_cli({"report", "--db", db, "--ranks"});
  ASSERT_EQ(ranks.code, 0) << ranks.err;
  const std::string rank_rows = squeeze(ranks.out);
  EXPECT_NE(rank_rows.find(" rank 0 run 2 ok 10.00 ms peak 3 MiB"), std::string::npos) << rank_rows;
  EXPECT_NE(rank_rows.find(" rank 1 run 3 ok 12.50 ms peak 2 MiB"), std::string::npos) << rank_rows;
  const Cli js = offtune_cli({"report", "--db", db, "--json", "--ranks"});
  ASSERT_EQ(js.code, 0) << js.err;
  const json out = json::parse(js.out);
  ASSERT_EQ(out["runs"].size(), 2u);
  const json& job = out["runs"][1]["job"];
  EXPECT_EQ(job["step_ms_median"], 12.5);
  EXPECT_EQ(job["peak_allocated"], 3 << 20);
  ASSERT_EQ(job["ranks"].size(), 2u);
  EXPECT_EQ(job["ranks"][1]["run"], 3);
}

TEST_F(LiveRunTest, StepCallsOutOfOrderAreRefusedWithTheCallNamed) {
  auto store = std::shared_ptr<Store>(make_memory_store());
  LiveRun run(store, spec_for("", baseline(), 0));
  EXPECT_THROW(run.begin_step(), std::logic_error);  // the first step is open already
  run.end_step();
  try {
    run.end_step();
    FAIL() << "end_step with no step open";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("end_step"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run.begin_phase(StepPhase::Forward), std::logic_error);
  run.begin_step();
  EXPECT_THROW(run.end_phase(StepPhase::Backward), std::logic_error);
  auto spec = spec_for("", baseline(), 0);
  spec.env.backend = "tpu";
  EXPECT_THROW(LiveRun(store, spec), std::invalid_argument);
}

TEST_F(LiveRunTest, ARunToldWhereStepsBeginMeasuresOnlyBetweenBeginAndEnd) {
  auto store = std::shared_ptr<Store>(make_memory_store());
  Loop loop;
  auto spec = spec_for("", baseline(), 0);
  spec.begin_first_step = false;
  LiveRun run(store, spec);
  EXPECT_FALSE(run.step_open());
  loop.step(nullptr);  // before the first step: not measured
  for (int i = 0; i < 2; ++i) {
    run.begin_step();
    EXPECT_TRUE(run.step_open());
    loop.step(nullptr);
    run.end_step();
  }
  const auto& rec = run.finish();
  EXPECT_EQ(rec.status, RunStatus::Ok) << rec.error;
  EXPECT_EQ(run.steps_begun(), 2);
  EXPECT_EQ(store->steps(rec.id).size(), 2u);
}

// A loop that gives no loss (a script under a sweep, record() without one) records none: NaN in
// the summary, a NULL in the store, a blank in the points CSV. Before: 0, which reads as a loss.
TEST_F(LiveRunTest, AStepWithoutALossRecordsNoLossNotZero) {
  auto store = std::shared_ptr<Store>(open_sqlite_store((dir_.path() / "loss.db").string()));
  Loop loop;
  LiveRun run(store, spec_for("noloss", baseline(), 0));
  for (int i = 0; i < 3; ++i) {
    loop.step(nullptr);
    run.step();  // no loss given
  }
  const auto& rec = run.finish();
  ASSERT_EQ(rec.status, RunStatus::Ok) << rec.error;
  EXPECT_TRUE(std::isnan(rec.summary.final_loss));
  const auto stored = store->run(rec.id);
  ASSERT_TRUE(stored);
  EXPECT_TRUE(std::isnan(stored->summary.final_loss));
  for (const auto& s : store->steps(rec.id)) EXPECT_TRUE(std::isnan(s.loss));
  const auto sweeps = store->sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  const std::string csv = (dir_.path() / "points.csv").string();
  export_points_csv(*store, sweeps.front().id, csv);
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  auto split = [](std::string line) {  // no field before final_loss is quoted here
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> out;
    std::stringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) out.push_back(f);
    if (!line.empty() && line.back() == ',') out.emplace_back();
    return out;
  };
  const auto names = split(header), values = split(row);
  const auto column = std::find(names.begin(), names.end(), "final_loss") - names.begin();
  ASSERT_LT(static_cast<size_t>(column), values.size()) << header << "\n" << row;
  EXPECT_EQ(values[static_cast<size_t>(column)], "") << row;
}

TEST(LiveRunConfig, AnOffloadersOptionsAreTheConfigARunRecords) {
  OffloadOptions o;
  o.min_offload_size = 65536;
  o.max_fwd_stash_size = 3;
  o.max_fwd_stash_bytes = 1 << 20;
  o.prefetch = 2;
  o.use_streams = false;
  o.use_pin_memory = false;
  o.semantics = Semantics::Trl;
  o.link = LinkModel::pcie5();
  const EngineConfig c = knobs_of(o);
  EXPECT_TRUE(c.offload);
  EXPECT_EQ(c.min_offload_size, 65536);
  EXPECT_EQ(c.max_fwd_stash_size, 3);
  EXPECT_EQ(c.max_fwd_stash_bytes, 1 << 20);
  EXPECT_EQ(c.prefetch, 2);
  EXPECT_FALSE(c.use_streams);
  EXPECT_FALSE(c.use_pin_memory);
  EXPECT_EQ(c.semantics, Semantics::Trl);
  EXPECT_EQ(c.link.name, "pcie5");
  // And back: the engine options the CLI would run the recorded config with.
  const OffloadOptions back = options_of(c, OffloadOptions{});
  EXPECT_EQ(back.min_offload_size, o.min_offload_size);
  EXPECT_EQ(back.semantics, o.semantics);
  EXPECT_EQ(link_of(parse_link("12.5:15").model).name, "12.5:15");
  EXPECT_EQ(link_of(LinkModel{}).name, "none");
}

}  // namespace
}  // namespace offtune::profiler
