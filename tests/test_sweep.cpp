// Sweeps on the built-in tiny model (host-sim): baseline always included, points measured spread
// over the grid, failed/out-of-memory points recorded, resume skips finished points, repeats and
// the refinement of tied finalists, shards + merge give the whole sweep, every knob an axis that
// crosses the grid, every point from the same state. Two processes on one store share a sweep: a
// point the other holds is waited for, or measured here once the other is killed. The runner that
// measures one point and the recommender that reads a sweep have suites of their own
// (test_runner.cpp, test_recommend.cpp).
#include <gtest/gtest.h>

#include "child_process.hpp"
#include "sweep_test_util.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#define OFFTUNE_TEST_HAS_SPAWN 1
#endif

#include "offtune/host_sim.hpp"
#include "offtune/profiler/metrics.hpp"
#include "offtune/profiler/predict.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/samples/registry.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune::profiler {
namespace {

using namespace sweep_test;

TEST(Sweep, GridHasBaselineFirst) {
  Grid g;
  g.set_numbers("min_offload_size", {1, 2});
  g.set_numbers("max_fwd_stash_size", {3});
  const auto c = expand_grid(g);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_FALSE(c[0].offload);
  EXPECT_TRUE(c[1].offload);
  EXPECT_EQ(c[1].min_offload_size, 1);
  EXPECT_EQ(c[2].min_offload_size, 2);
  EXPECT_EQ(c[2].max_fwd_stash_size, 3);
}

// Points are measured spread over the grid, baseline first, each exactly once.
TEST(Sweep, PointsAreMeasuredSpreadOverTheGrid) {
  EXPECT_EQ(measurement_order({0, 1, 2, 3, 4}), (std::vector<int64_t>{0, 4, 2, 1, 3}));
  EXPECT_EQ(measurement_order({0, 1, 2, 3, 4, 5, 6, 7}),
            (std::vector<int64_t>{0, 4, 2, 6, 1, 5, 3, 7}));
  EXPECT_EQ(measurement_order({3, 7}), (std::vector<int64_t>{3, 7}));
  EXPECT_TRUE(measurement_order({}).empty());
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    auto order = measurement_order(all);
    ASSERT_EQ(order.front(), 0) << n;
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, all) << "a permutation of the " << n << " points";
  }
  // A real sweep measures in that order.
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  auto store = make_memory_store();
  std::vector<int64_t> measured;
  run_sweep(*workload, spec, *store, [&](const SweepProgress& p) {
    if (p.last != nullptr) measured.push_back(p.last->index);
  });
  EXPECT_EQ(measured, (std::vector<int64_t>{0, 4, 2, 1, 3}));
}

TEST(Sweep, KeyCountsATorchScriptInputOnlyWhenGiven) {
  const auto spec = tiny_spec();
  const auto plain = sweep_key(spec.workload, spec.grid, spec.base);
  EXPECT_EQ(sweep_key(spec.workload, spec.grid, spec.base, ""), plain);
  const auto a = sweep_key(spec.workload, spec.grid, spec.base, "x:float32[B,64]");
  const auto b = sweep_key(spec.workload, spec.grid, spec.base, "x:float32[B,128]");
  EXPECT_NE(a, plain);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, sweep_key(spec.workload, spec.grid, spec.base, "x:float32[B,64]"));
}

TEST(Sweep, RunsRecordsAndResumes) {
  auto store = make_memory_store();
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  const auto first = run_sweep(*workload, spec, *store);
  EXPECT_EQ(first.ran, 5);
  EXPECT_EQ(first.ok, 5);
  const auto points = store->points(first.sweep);
  ASSERT_EQ(points.size(), 5u);
  EXPECT_FALSE(points[0].config.offload);
  for (const auto& p : points) {
    EXPECT_EQ(p.status, PointStatus::Ok) << p.error;
    EXPECT_GT(p.summary.step_ms_median, 0.0);
    EXPECT_GT(p.summary.peak_allocated, 0);
    EXPECT_TRUE(p.run.valid());
  }
  EXPECT_GT(points[1].summary.offloaded_bytes, 0);
  EXPECT_LT(points[1].summary.peak_allocated, points[0].summary.peak_allocated);
  EXPECT_FALSE(store->events(points[1].run).empty());
  // Device memory is traced through the step, not only at its ends: samples rise above the
  // step-boundary value, and none exceeds the step's peak.
  {
    const auto occupancy = store->occupancy(points[1].run);
    ASSERT_FALSE(occupancy.empty());
    int64_t lo = INT64_MAX, hi = -1;
    for (const auto& o : occupancy) {
      ASSERT_GE(o.device_bytes, 0);
      lo = std::min(lo, o.device_bytes);
      hi = std::max(hi, o.device_bytes);
    }
    EXPECT_GT(hi, lo);
    EXPECT_LE(hi, points[1].summary.peak_allocated);
    // Reserved beside allocated, and the host side, over the step: each sample's reserved holds
    // its allocated bytes and stays within the run's peak reserved; host copies come and go in
    // the pinned pool, which stays within the run's pinned bytes (before: allocated alone).
    int64_t host_hi = -1, pool_hi = -1;
    for (const auto& o : occupancy) {
      ASSERT_GE(o.reserved_bytes, 0);
      EXPECT_LE(o.reserved_bytes, points[1].summary.peak_reserved);
      host_hi = std::max(host_hi, o.host_bytes);
      pool_hi = std::max(pool_hi, o.host_pool_bytes);
      if (o.host_bytes >= 0 && o.host_pool_bytes >= 0) {
        EXPECT_LE(o.host_bytes, o.host_pool_bytes);
      }
    }
    EXPECT_GT(host_hi, 0);
    EXPECT_GT(pool_hi, 0);
    EXPECT_LE(pool_hi, points[1].summary.pinned_bytes);
  }
  // The same sweep again: nothing new runs, nothing is duplicated.
  const auto second = run_sweep(*workload, spec, *store);
  EXPECT_EQ(second.sweep, first.sweep);
  EXPECT_EQ(second.ran, 0);
  EXPECT_EQ(second.skipped, 5);
  EXPECT_EQ(store->points(first.sweep).size(), 5u);
  EXPECT_EQ(store->runs().size(), 5u);
}

// A sweep with memory_history (`sweep --memory-history`) records every point's allocator history,
// which export_memory_snapshot writes; one without records none.
TEST(Sweep, WithMemoryHistoryEveryPointsRunKeepsItsHistory) {
  auto store = make_memory_store();
  auto spec = tiny_spec();
  spec.memory_history = true;
  auto workload = workload_of(spec.workload);
  const auto outcome = run_sweep(*workload, spec, *store);
  ASSERT_EQ(outcome.ok, 5);
  for (const auto& p : store->points(outcome.sweep)) {
    const auto events = store->memory_events(p.run);
    EXPECT_FALSE(events.empty()) << "point " << p.index;
    EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                            [](const MemoryEventRecord& e) { return e.action == "alloc"; }))
        << "point " << p.index;
  }
  auto plain = make_memory_store();
  const auto without = run_sweep(*workload, tiny_spec(), *plain);
  for (const auto& p : plain->points(without.sweep)) {
    EXPECT_TRUE(plain->memory_events(p.run).empty());
  }
}

TEST(Sweep, RepeatMeasuresEveryPointInRoundsAndCombinesTheirSteps) {
  auto store = make_memory_store();
  auto spec = tiny_spec();
  spec.grid.set_numbers("min_offload_size", {1024});  // the baseline and two points
  spec.repeat = 3;
  auto workload = workload_of(spec.workload);
  int64_t last_total = 0, reports = 0;
  const auto first = run_sweep(*workload, spec, *store, [&](const SweepProgress& p) {
    last_total = p.total;
    ++reports;
  });
  EXPECT_EQ(first.ran, 3);
  EXPECT_EQ(first.repeated, 6);
  EXPECT_EQ(last_total, 9);
  EXPECT_EQ(reports, 9);
  const auto runs = store->runs();
  ASSERT_EQ(runs.size(), 9u);
  // Rounds, not repetitions of one point: every first-round run comes before any later one.
  for (size_t i = 0; i < runs.size(); ++i) {
    const bool later = runs[i].label.find("repeat") != std::string::npos;
    EXPECT_EQ(later, i >= 3) << runs[i].label;
  }
  for (const auto& p : store->points(first.sweep)) {
    ASSERT_EQ(p.status, PointStatus::Ok);
    // The point keeps its first run; its step time is the median of its six steps.
    const auto own = store->run(p.run);
    ASSERT_TRUE(own.has_value());
    EXPECT_EQ(own->label.find("repeat"), std::string::npos);
    std::vector<double> ms;
    for (const auto& r : runs) {
      if (r.id != p.run &&
          r.label.rfind(spec.name + " point " + std::to_string(p.index) + " (sweep ", 0) != 0) {
        continue;
      }
      for (const auto& st : store->steps(r.id)) {
        ms.push_back(static_cast<double>(st.end_ns - st.begin_ns) / 1e6);
      }
    }
    ASSERT_EQ(ms.size(), 6u) << p.index;
    const auto stats = step_stats(ms);
    EXPECT_DOUBLE_EQ(p.summary.step_ms_median, stats.median_ms);
    EXPECT_DOUBLE_EQ(p.summary.step_ms_ci_low, stats.ci_low_ms);
    EXPECT_DOUBLE_EQ(p.summary.step_ms_ci_high, stats.ci_high_ms);
  }
  // A larger repeat adds only the missing round; the same again adds nothing.
  spec.repeat = 4;
  const auto more = run_sweep(*workload, spec, *store);
  EXPECT_EQ(more.ran, 0);
  EXPECT_EQ(more.repeated, 3);
  EXPECT_EQ(run_sweep(*workload, spec, *store).repeated, 0);
  EXPECT_EQ(store->runs().size(), 12u);
}

TEST(Sweep, CancelStopsBetweenPointsAndResumeFinishes) {
  auto store = make_memory_store();
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  std::atomic<bool> cancel{false};
  const auto first = run_sweep(
      *workload, spec, *store, [&](const SweepProgress& p) { cancel = p.done >= 2; }, &cancel);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.ran, 2);
  const auto second = run_sweep(*workload, spec, *store);
  EXPECT_EQ(second.skipped, 2);
  EXPECT_EQ(second.ran, 3);
  EXPECT_EQ(store->runs().size(), 5u);
}

TEST(Sweep, OutOfMemoryPointIsAResult) {
  host_sim::install();
  auto store = make_memory_store();
  auto spec = tiny_spec();
  spec.grid.set_numbers("min_offload_size", {1024});
  spec.grid.set_numbers("max_fwd_stash_size", {1});
  // Activations larger than the free tails of the weights' segments (16 x 128 tokens: tens of MiB).
  spec.workload.batch = 16;
  spec.workload.seq = 128;
  auto workload = workload_of(spec.workload);
  // The device holds what the modelled allocator reserved for the model: no new segment fits.
  host_sim::empty_cache();
  host_sim::set_capacity(host_sim::counters().modelled_reserved);
  const auto out = run_sweep(*workload, spec, *store);
  host_sim::set_capacity(0);
  EXPECT_EQ(out.oom, 2);
  for (const auto& p : store->points(out.sweep)) {
    EXPECT_EQ(p.status, PointStatus::OutOfMemory);
    EXPECT_NE(p.error.find("out of memory"), std::string::npos) << p.error;
  }
}

#ifdef OFFTUNE_TEST_HAS_SPAWN
using test::ChildProcess;

SweepRecord record_of(const SweepSpec& spec) {
  SweepRecord rec;
  rec.name = spec.name;
  rec.key = sweep_key(spec.workload, spec.grid, spec.base, spec.model_input);
  rec.workload = spec.workload;
  rec.grid = grid_json(spec.grid);
  return rec;
}

// The other process of a shared sweep: creates tiny_spec()'s sweep (with one size and one window if
// the fourth argument says so) and claims point INDEX, keeping its store open; then, with "put",
// waits for go() and records the point with a step time this process would not measure; with
// "never", never measures it. Args: DB INDEX put|never [one-size-one-window].
OFFTUNE_CHILD_ROLE(claim_then_measure)
(const std::vector<std::string>& args, test::ChildControl& control) {
  auto spec = tiny_spec();
  if (args.size() > 3 && args[3] == "one-size-one-window") {
    spec.grid.set_numbers("min_offload_size", {1024});
    spec.grid.set_numbers("max_fwd_stash_size", {1});
  }
  const int64_t index = std::stoll(args.at(1));
  static std::unique_ptr<Store> held;
  held = open_sqlite_store(args.at(0));
  const SweepId sweep = held->create_sweep(record_of(spec));
  control.ready(held->claim_point(sweep, index).status == ClaimStatus::Claimed ? 0 : 1);
  if (args.at(2) != "put" || !control.wait_go()) return 0;
  PointRecord p;
  p.sweep = sweep;
  p.index = index;
  p.config = expand_grid(spec.grid)[static_cast<size_t>(index)];
  p.status = PointStatus::Ok;
  p.summary.step_ms_median = 42.5;
  held->put_point(p);
  held->release_point(sweep, index);
  return 0;
}

TEST(Sweep, APointAnotherProcessMeasuresIsWaitedForNotMeasuredTwice) {
  TempDir dir;
  const std::string db = dir.file("store.db");
  auto spec = tiny_spec();
  ChildProcess other("claim_then_measure", {db, "2", "put"}, ChildProcess::After::Exit);
  auto store = open_sqlite_store(db);
  auto workload = workload_of(spec.workload);
  std::vector<int64_t> done;
  const auto out = run_sweep(*workload, spec, *store, [&](const SweepProgress& p) {
    done.push_back(p.done);
    EXPECT_EQ(p.total, 5);
    if (p.done == 4) other.go();  // every other point is measured: now the other finishes
  });
  EXPECT_EQ(other.wait(), 0);
  EXPECT_EQ(out.ran, 4);
  EXPECT_EQ(out.by_other, 1);
  EXPECT_EQ(out.skipped, 0);
  EXPECT_FALSE(out.interrupted);
  EXPECT_EQ(done, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  const auto points = store->points(out.sweep);
  ASSERT_EQ(points.size(), 5u);
  for (const auto& p : points) EXPECT_EQ(p.status, PointStatus::Ok) << p.index << ": " << p.error;
  EXPECT_EQ(points[2].summary.step_ms_median, 42.5) << "the other process's result, kept";
  EXPECT_FALSE(points[2].run.valid());
  EXPECT_EQ(store->runs().size(), 4u);
}

TEST(Sweep, APointOfAKilledProcessIsMeasuredHere) {
  TempDir dir;
  const std::string db = dir.file("store.db");
  auto spec = tiny_spec();
  ChildProcess other("claim_then_measure", {db, "2", "never"}, ChildProcess::After::Linger);
  auto store = open_sqlite_store(db);
  auto workload = workload_of(spec.workload);
  const auto out = run_sweep(*workload, spec, *store, [&](const SweepProgress& p) {
    if (p.done == 4) other.kill_now();  // it never measures its point
  });
  EXPECT_EQ(out.ran, 5);
  EXPECT_EQ(out.by_other, 0);
  EXPECT_EQ(out.ok, 5);
  const auto points = store->points(out.sweep);
  ASSERT_EQ(points.size(), 5u);
  for (const auto& p : points) {
    EXPECT_EQ(p.status, PointStatus::Ok) << p.index << ": " << p.error;
    EXPECT_TRUE(p.run.valid());
  }
}

TEST(Sweep, CancelStopsWaitingForAnotherProcess) {
  TempDir dir;
  const std::string db = dir.file("store.db");
  auto spec = tiny_spec();
  spec.grid.set_numbers("min_offload_size", {1024});
  spec.grid.set_numbers("max_fwd_stash_size", {1});
  ChildProcess other("claim_then_measure", {db, "1", "never", "one-size-one-window"},
                     ChildProcess::After::Linger);
  auto store = open_sqlite_store(db);
  auto workload = workload_of(spec.workload);
  std::atomic<bool> cancel{false};
  std::thread canceller;
  const auto start = std::chrono::steady_clock::now();
  auto waited = std::chrono::steady_clock::duration{};
  const auto out = run_sweep(
      *workload, spec, *store,
      [&](const SweepProgress&) {
        // After the baseline: by the time this fires the sweep is waiting for point 1.
        canceller = std::thread([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(400));
          waited = std::chrono::steady_clock::now() - start;
          cancel = true;
        });
      },
      &cancel);
  const auto returned = std::chrono::steady_clock::now() - start;
  canceller.join();
  EXPECT_GE(returned, waited) << "it waited for point 1 until cancelled";
  EXPECT_TRUE(out.interrupted);
  EXPECT_EQ(out.ran, 1);
  EXPECT_EQ(out.by_other, 0);
}
#endif

// Finalists the recommendation cannot tell apart are measured again with more steps, and only
// they and the baseline they are compared with (before: not the baseline, so a finalist's
// slowdown compared a long measurement with a short one), interleaved round by round (before: one
// after the other, minutes apart, so that a change of load passed for a difference); a second call
// finds them measured and does nothing.
TEST(Sweep, RefineMeasuresTheTiedFinalistsAgainWithMoreSteps) {
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  auto store = make_memory_store();
  const SweepOutcome outcome = run_sweep(*workload, spec, *store);
  ASSERT_EQ(outcome.ok, 5);
  // Make points 1 and 2 indistinguishable (same peak, overlapping intervals) and the best under
  // the default constraint; points 3 and 4 clearly worse in memory.
  auto points = store->points(outcome.sweep);
  const int64_t base_peak = points[0].summary.peak_allocated;
  for (auto& p : points) {
    if (p.index == 0) continue;
    p.summary.step_ms_median = points[0].summary.step_ms_median;
    p.summary.step_ms_ci_low = p.summary.step_ms_median * 0.9;
    p.summary.step_ms_ci_high = p.summary.step_ms_median * 1.1;
    p.summary.step_ms_ci_level = 0.9;
    p.summary.peak_allocated = p.index <= 2 ? base_peak / 2 : base_peak;
    p.summary.peak_reserved = p.summary.peak_allocated;
    store->put_point(p);
  }
  const auto before = store->points(outcome.sweep);
  const size_t runs_before = store->runs().size();
  const RefineOutcome refined =
      refine_finalists(*workload, spec, *store, outcome.sweep, Constraint{}, 6);
  EXPECT_EQ(refined.steps, 6);
  std::vector<int64_t> got = refined.remeasured;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(refined.remeasured.front(), 0) << "the baseline first";
  // Interleaved (A/B): round after round, the baseline and each finalist once, 2 steps each.
  const auto all = store->runs();
  ASSERT_EQ(all.size(), runs_before + 9);
  std::vector<std::string> order;
  for (size_t i = runs_before; i < all.size(); ++i) order.push_back(all[i].label);
  const std::string sweep_tag = " (sweep " + std::to_string(outcome.sweep.value) + ", re-measured";
  for (int64_t round = 1; round <= 3; ++round) {
    for (int64_t point = 0; point <= 2; ++point) {
      EXPECT_EQ(order[static_cast<size_t>((round - 1) * 3 + point)],
                spec.name + " point " + std::to_string(point) + sweep_tag + ", round " +
                    std::to_string(round) + " of 3)");
    }
  }
  const auto after = store->points(outcome.sweep);
  for (size_t i = 0; i < after.size(); ++i) {
    const bool finalist = after[i].index <= 2;
    EXPECT_EQ(after[i].run != before[i].run, finalist) << "point " << after[i].index;
    EXPECT_EQ(store->run(after[i].run)->workload.steps, finalist ? 2 : spec.workload.steps);
    EXPECT_EQ(after[i].status, PointStatus::Ok);
  }
  EXPECT_EQ(store->steps(after[1].run).size(), 2u);
  EXPECT_TRUE(store->run(before[1].run).has_value()) << "the first measurement stays in the store";
  // Tied again (their new runs kept): both already have 6 steps, so nothing is measured.
  for (auto p : after) {
    if (p.index != 1 && p.index != 2) continue;
    p.summary = before[static_cast<size_t>(p.index)].summary;
    store->put_point(p);
  }
  EXPECT_TRUE(
      refine_finalists(*workload, spec, *store, outcome.sweep, Constraint{}, 6).remeasured.empty());
  // Cancelled before it starts: nothing is measured.
  std::atomic<bool> cancel{true};
  const auto none =
      refine_finalists(*workload, spec, *store, outcome.sweep, Constraint{}, 50, &cancel);
  EXPECT_TRUE(none.remeasured.empty());
}

// A measurer without a workload: each run has 3 steps (or the steps asked for, when it can set
// them), of 10, 11 and 12 ms plus 10 ms per earlier run of the same point.
class FakeMeasurer final : public PointMeasurer {
 public:
  explicit FakeMeasurer(bool sets_steps) : sets_steps_(sets_steps) {}
  RunRecord measure(const PointRun& run, Store& store, const std::atomic<bool>*) override {
    labels.push_back(run.label);
    RunRecord rec;
    rec.label = run.label;
    rec.config = run.config;
    rec.workload.model = "fake";
    rec.workload.steps = run.steps > 0 ? run.steps : 3;
    rec.id = store.begin_run(rec);
    const int64_t offset_ms = 10 * runs_of_[run.index]++;
    std::vector<StepRecord> steps;
    for (int64_t i = 0; i < rec.workload.steps; ++i) {
      StepRecord s;
      s.run = rec.id;
      s.step = i;
      s.begin_ns = i * 1'000'000'000;
      s.end_ns = s.begin_ns + (10 + offset_ms + i % 3) * 1'000'000;
      steps.push_back(s);
    }
    store.add_steps(steps);
    rec.status = RunStatus::Ok;
    rec.summary.step_ms_median = static_cast<double>(11 + offset_ms);
    rec.summary.peak_allocated = run.config.offload ? 500 : 1000;
    rec.summary.peak_reserved = rec.summary.peak_allocated;
    store.finish_run(rec.id, rec.status, "", rec.summary, 1);
    return rec;
  }
  bool sets_steps() const override { return sets_steps_; }
  std::vector<std::string> labels;

 private:
  bool sets_steps_;
  std::map<int64_t, int64_t> runs_of_;
};

// The sweep's logic is the measurer's caller, whatever measures: a measurer that cannot set the
// steps (a script) is refined by one more run of each finalist, pooled with the first.
TEST(Sweep, AMeasurerThatCannotSetTheStepsIsRefinedByPoolingAnotherRun) {
  auto spec = tiny_spec();
  auto store = make_memory_store();
  FakeMeasurer measurer(/*sets_steps=*/false);
  const SweepOutcome outcome = run_sweep(measurer, spec, *store);
  ASSERT_EQ(outcome.ok, 5);
  EXPECT_EQ(measurer.labels.front(), "test point 0");
  // Points 1 and 2 tied and best, as in RefineMeasuresTheTiedFinalistsAgainWithMoreSteps.
  const auto tie = [&] {
    for (auto p : store->points(outcome.sweep)) {
      if (p.index == 0) continue;
      p.summary.step_ms_median = 11;
      p.summary.step_ms_ci_low = 10;
      p.summary.step_ms_ci_high = 12;
      p.summary.step_ms_ci_level = 0.9;
      p.summary.peak_allocated = p.index <= 2 ? 500 : 1000;
      p.summary.peak_reserved = p.summary.peak_allocated;
      store->put_point(p);
    }
  };
  tie();
  const RefineOutcome refined =
      refine_finalists(measurer, spec, *store, outcome.sweep, Constraint{}, 20);
  std::vector<int64_t> got = refined.remeasured;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ(measurer.labels.size(), 14u) << "3 rounds of the 3 finalists";
  const std::string tag =
      " (sweep " + std::to_string(outcome.sweep.value) + ", re-measured, round ";
  EXPECT_EQ(measurer.labels[5], "test point 0" + tag + "1 of 3)");
  EXPECT_EQ(measurer.labels[6], "test point 1" + tag + "1 of 3)") << "interleaved, not in a row";
  EXPECT_EQ(measurer.labels[8], "test point 0" + tag + "2 of 3)");
  for (const auto& p : store->points(outcome.sweep)) {
    if (p.index > 2) continue;
    // Its rounds only, 3 steps each of 20..22, 30..32 and 40..42 ms (the first run, 10..12 ms,
    // was measured at another time): the median of nine.
    EXPECT_EQ(store->steps(p.run).size(), 3u);
    EXPECT_DOUBLE_EQ(p.summary.step_ms_median, 31.0) << p.index;
  }
  // Run again (tied again): each finalist has its re-measured run, so nothing is measured.
  tie();
  EXPECT_TRUE(
      refine_finalists(measurer, spec, *store, outcome.sweep, Constraint{}, 20).remeasured.empty());
  EXPECT_EQ(measurer.labels.size(), 14u);
}

TEST(Sweep, ShardsMergeIntoTheWholeSweep) {
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  auto a = make_memory_store(), b = make_memory_store(), merged = make_memory_store();
  spec.shard = {1, 2};
  EXPECT_EQ(run_sweep(*workload, spec, *a).ran, 3);  // indices 0, 2, 4
  spec.shard = {2, 2};
  EXPECT_EQ(run_sweep(*workload, spec, *b).ran, 2);  // indices 1, 3
  EXPECT_EQ(merge_stores(*merged, *a), 3);
  EXPECT_EQ(merge_stores(*merged, *b), 2);
  EXPECT_EQ(merge_stores(*merged, *b), 0);  // idempotent
  const auto sweeps = merged->sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  const auto points = merged->points(sweeps[0].id);
  ASSERT_EQ(points.size(), 5u);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(points[static_cast<size_t>(i)].index, i);
    EXPECT_FALSE(merged->steps(points[static_cast<size_t>(i)].run).empty());
  }
}

// Predictions given with a sweep go into the store with it (a shard's too: every grid point's), and
// merging carries them where the destination has none for that point.
TEST(Sweep, PredictionsGoInWithTheSweepAndMergeCarriesThem) {
  auto spec = tiny_spec();
  auto workload = workload_of(spec.workload);
  for (int64_t i = 0; i < 5; ++i) {
    PointPrediction p;
    p.index = i;
    p.step_ns = 1'000'000 * (i + 1);
    p.peak_allocated = 1000 * (i + 1);
    p.predictor = "test";
    spec.predictions.push_back(p);
  }
  auto a = make_memory_store(), merged = make_memory_store();
  spec.shard = {1, 2};
  const SweepOutcome out = run_sweep(*workload, spec, *a);
  const auto stored = a->predictions(out.sweep);
  ASSERT_EQ(stored.size(), 5u);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(stored[static_cast<size_t>(i)].sweep, out.sweep);
    EXPECT_EQ(stored[static_cast<size_t>(i)].index, i);
    EXPECT_EQ(stored[static_cast<size_t>(i)].step_ns, 1'000'000 * (i + 1));
  }

  // The destination's own prediction of point 0 stays; the others come over.
  const SweepId target = merged->create_sweep(*a->sweep(out.sweep));
  PointPrediction own = stored[0];
  own.sweep = target;
  own.step_ns = 42;
  merged->put_predictions({own});
  EXPECT_EQ(merge_stores(*merged, *a), 3);
  const auto carried = merged->predictions(target);
  ASSERT_EQ(carried.size(), 5u);
  EXPECT_EQ(carried[0].step_ns, 42);
  EXPECT_EQ(carried[4].step_ns, 5'000'000);
  EXPECT_EQ(carried[4].sweep, target);
}

// A sweep under TRL's semantics is another sweep; one under offtune's keeps the key it always had.
TEST(Sweep, SemanticsChangeTheKeyOnlyWhenNotOfftunes) {
  const auto spec = tiny_spec();
  const std::string key = sweep_key(spec.workload, spec.grid, spec.base);
  EXPECT_EQ(key.find("semantics"), std::string::npos);
  auto trl = spec.grid;
  trl.base.semantics = Semantics::Trl;
  EXPECT_NE(sweep_key(spec.workload, trl, spec.base), key);
  EXPECT_EQ(options_of(trl.base, spec.base).semantics, Semantics::Trl);
}

// Semantics as an axis: every pair once per semantics, in the order given; the key says so, and a
// grid with one semantics keeps the key it had before the axis existed.
TEST(Sweep, SemanticsAsAnAxisCrossTheGrid) {
  auto spec = tiny_spec();  // 2 sizes x 2 windows
  const std::string key = sweep_key(spec.workload, spec.grid, spec.base);
  spec.grid.set_names("semantics", {"trl", "offtune"});
  const auto points = expand_grid(spec.grid);
  ASSERT_EQ(points.size(), 9u);
  EXPECT_FALSE(points[0].offload);
  for (size_t i = 1; i < points.size(); ++i) {
    EXPECT_EQ(points[i].semantics, i <= 4 ? Semantics::Trl : Semantics::Offtune) << i;
    EXPECT_EQ(points[i].min_offload_size, points[(i - 1) % 4 + 1].min_offload_size);
    EXPECT_EQ(points[i].max_fwd_stash_size, points[(i - 1) % 4 + 1].max_fwd_stash_size);
  }
  EXPECT_NE(sweep_key(spec.workload, spec.grid, spec.base), key);
  EXPECT_NE(grid_json(spec.grid).find("\"semantics\":[\"trl\",\"offtune\"]"), std::string::npos);
  spec.grid.axes.erase("semantics");
  EXPECT_EQ(sweep_key(spec.workload, spec.grid, spec.base), key);
}

// The engine variants as axes: the baseline first, then checkpointing alone, then each variant's
// grid; boundaries only where a point checkpoints; grid_size counts what expand_grid makes; the
// JSON round-trips; a grid without the axes keeps its key.
TEST(Sweep, VariantsAsAxesCrossTheGrid) {
  auto spec = tiny_spec();  // 2 sizes x 2 windows
  const std::string key = sweep_key(spec.workload, spec.grid, spec.base);
  spec.grid.set_names("checkpoint", {"none", "all"});
  spec.grid.set_names("offload_set", {"all", "boundaries"});
  const auto points = expand_grid(spec.grid);
  // baseline, "all" alone, then (none, all), (all, all), (all, boundaries): 3 x 4 pairs.
  ASSERT_EQ(points.size(), 2u + 3u * 4u);
  EXPECT_EQ(grid_size(spec.grid), static_cast<int64_t>(points.size()));
  EXPECT_TRUE(is_baseline(points[0]));
  EXPECT_FALSE(points[1].offload);
  EXPECT_EQ(points[1].checkpoint, CheckpointPolicy::all());
  EXPECT_FALSE(is_baseline(points[1]));
  for (size_t i = 2; i < points.size(); ++i) {
    const size_t variant = (i - 2) / 4;
    SCOPED_TRACE(i);
    EXPECT_TRUE(points[i].offload);
    EXPECT_EQ(points[i].checkpoint,
              variant == 0 ? CheckpointPolicy::none() : CheckpointPolicy::all());
    EXPECT_EQ(points[i].offload_set, variant == 2 ? OffloadSet::Boundaries : OffloadSet::All);
    EXPECT_EQ(points[i].min_offload_size, points[(i - 2) % 4 + 2].min_offload_size);
  }
  EXPECT_EQ(describe_variant(points[13]), "checkpoint all, offload boundaries");
  EXPECT_EQ(describe_variant(points[2]), "");
  // Round trip through the stored text.
  spec.grid.set_names("tier", {"host", "disk"});
  spec.grid.base.prefetch = 3;
  const Grid back = parse_grid_json(grid_json(spec.grid));
  EXPECT_EQ(expand_grid(back), expand_grid(spec.grid));
  EXPECT_EQ(grid_size(back), 2 + 2 * 3 * 4);
  EXPECT_THROW(parse_grid_json("{\"min_offload_size\": 3}"), std::invalid_argument);
  EXPECT_NE(sweep_key(spec.workload, spec.grid, spec.base), key);
  spec.grid.axes.erase("checkpoint");
  spec.grid.axes.erase("offload_set");
  spec.grid.axes.erase("tier");
  spec.grid.base.prefetch = tiny_spec().grid.base.prefetch;
  EXPECT_EQ(sweep_key(spec.workload, spec.grid, spec.base), key);
}

// Streams, pinned memory, the byte window and host-sim's link as axes: each crosses every offload
// point (outside the sizes and windows), grid_size counts what expand_grid makes, the JSON
// round-trips, and a grid without them keeps its key. A sweep of two offload points over each
// records both configs, its runs each with its own link.
TEST(Sweep, StreamsPinMemoryByteWindowAndLinkAsAxesCrossTheGridAndAreRecorded) {
  const auto spec0 = tiny_spec();  // 2 sizes x 2 windows
  const std::string key = sweep_key(spec0.workload, spec0.grid, spec0.base);
  const struct {
    const char* name;
    void (*set)(Grid&);
    std::string (*value)(const EngineConfig&);
    std::vector<std::string> values;
  } axes[] = {
      {"streams",
       [](Grid& g) {
         g.set_switches("use_streams", {true, false});
       },
       [](const EngineConfig& c) { return std::string(c.use_streams ? "on" : "off"); },
       {"on", "off"}},
      {"pin memory",
       [](Grid& g) {
         g.set_switches("use_pin_memory", {false, true});
       },
       [](const EngineConfig& c) { return std::string(c.use_pin_memory ? "on" : "off"); },
       {"off", "on"}},
      {"byte window",
       [](Grid& g) {
         g.set_numbers("max_fwd_stash_bytes", {0, 64 << 10});
       },
       [](const EngineConfig& c) { return std::to_string(c.max_fwd_stash_bytes); },
       {"0", "65536"}},
      {"link",
       [](Grid& g) {
         g.set_names("link", {"none", "pcie5"});
       },
       [](const EngineConfig& c) { return c.link.name; },
       {"none", "pcie5"}},
  };
  for (const auto& axis : axes) {
    SCOPED_TRACE(axis.name);
    auto spec = tiny_spec();
    axis.set(spec.grid);
    const auto points = expand_grid(spec.grid);
    ASSERT_EQ(points.size(), 1u + 2u * 4u);
    EXPECT_EQ(grid_size(spec.grid), static_cast<int64_t>(points.size()));
    for (size_t i = 1; i < points.size(); ++i) {
      EXPECT_EQ(axis.value(points[i]), axis.values[(i - 1) / 4]) << i;
      EXPECT_EQ(points[i].min_offload_size, points[(i - 1) % 4 + 1].min_offload_size);
    }
    EXPECT_EQ(expand_grid(parse_grid_json(grid_json(spec.grid))), points);
    EXPECT_NE(sweep_key(spec.workload, spec.grid, spec.base), key);
    EXPECT_EQ(sweep_key(spec.workload, Grid{tiny_spec().grid}, spec.base), key);

    // Two offload points, each measured under its own value, and recorded so.
    spec.grid.set_numbers("min_offload_size", {1024});
    spec.grid.set_numbers("max_fwd_stash_size", {2});
    spec.env.device =
        "host-sim (link " +
        (spec.grid.axes.contains("link") ? std::get<std::string>(spec.grid.values("link")[0])
                                         : std::string("pcie4")) +
        ")";
    auto workload = workload_of(spec.workload);
    auto store = make_memory_store();
    const auto out = run_sweep(*workload, spec, *store);
    const auto recorded = store->points(out.sweep);
    ASSERT_EQ(recorded.size(), 3u);
    for (size_t i = 1; i < 3; ++i) {
      EXPECT_EQ(recorded[i].status, PointStatus::Ok) << recorded[i].error;
      EXPECT_EQ(axis.value(recorded[i].config), axis.values[i - 1]);
      const auto run = store->run(recorded[i].run);
      ASSERT_TRUE(run);
      EXPECT_EQ(run->config, recorded[i].config);
      if (spec.grid.axes.contains("link")) {
        EXPECT_EQ(run->env.device, "host-sim (link " + axis.values[i - 1] + ")");
      }
    }
  }
}

// A sweep across variants runs end to end on the built-in model, and its points differ the way the
// variants should: checkpointing lowers the peak, checkpointing alone offloads nothing.
TEST(Sweep, AcrossVariantsRunsAndRecordsEachPointsVariant) {
  auto spec = tiny_spec();
  spec.grid.set_numbers("min_offload_size", {1024});
  spec.grid.set_numbers("max_fwd_stash_size", {2});
  spec.grid.set_names("checkpoint", {"none", "all"});
  spec.grid.set_names("offload_set", {"all", "boundaries"});
  auto workload = workload_of(spec.workload);
  auto store = make_memory_store();
  const auto out = run_sweep(*workload, spec, *store);
  const auto points = store->points(out.sweep);
  ASSERT_EQ(points.size(), 5u);
  for (const auto& p : points) {
    EXPECT_EQ(p.status, PointStatus::Ok) << p.index << ": " << p.error;
    EXPECT_EQ(store->run(p.run)->config, p.config) << "the run records the point's variant";
  }
  EXPECT_EQ(points[1].config.checkpoint, CheckpointPolicy::all());
  EXPECT_LT(points[1].summary.peak_allocated, points[0].summary.peak_allocated);
  EXPECT_EQ(points[1].summary.offloaded_bytes, 0);
  // Offloading only the boundaries moves less than offloading everything outside the blocks too.
  EXPECT_GT(points[4].summary.offloaded_bytes, 0);
  EXPECT_LE(points[4].summary.offloaded_bytes, points[3].summary.offloaded_bytes);
  // Recomputes are recorded in the timeline of a checkpointed, offloading point.
  const auto events = store->events(points[4].run);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                          [](const TimelineEvent& e) { return e.kind == EventKind::Recompute; }));
}

// Layer offloading as an axis: alone (with and without checkpointing) among the no-offload points,
// then crossed with the rest; the JSON round-trips; LoRA and a TorchScript block path change the
// key only when set.
TEST(Sweep, LayerOffloadingIsAnAxisAndLoraAndBlocksAreInTheKeyWhenSet) {
  auto spec = tiny_spec();  // 2 sizes x 2 windows
  const std::string key = sweep_key(spec.workload, spec.grid, spec.base);
  EXPECT_EQ(sweep_key(spec.workload, spec.grid, spec.base, {}, nullptr, {}), key);
  spec.grid.set_names("checkpoint", {"none", "all"});
  spec.grid.set_names("layer_offload", {"off", "on:1"});
  const auto points = expand_grid(spec.grid);
  // baseline; alone: (none, on:1), (all, off), (all, on:1); then 4 variants x 4 pairs.
  ASSERT_EQ(points.size(), 4u + 4u * 4u);
  EXPECT_EQ(grid_size(spec.grid), static_cast<int64_t>(points.size()));
  EXPECT_TRUE(is_baseline(points[0]));
  EXPECT_EQ(points[0].layer_offload, 0);
  EXPECT_FALSE(points[1].offload);
  EXPECT_EQ(points[1].layer_offload, 1);
  EXPECT_EQ(points[1].checkpoint, CheckpointPolicy::none());
  EXPECT_FALSE(is_baseline(points[1])) << "layer offloading alone is a variant, not the baseline";
  EXPECT_EQ(describe_variant(points[1]), "layers on:1");
  EXPECT_EQ(points[3].checkpoint, CheckpointPolicy::all());
  EXPECT_EQ(points[3].layer_offload, 1);
  for (size_t i = 4; i < points.size(); ++i) {
    SCOPED_TRACE(i);
    const size_t variant = (i - 4) / 4;  // (none, off), (none, on:1), (all, off), (all, on:1)
    EXPECT_TRUE(points[i].offload);
    EXPECT_EQ(points[i].checkpoint,
              variant < 2 ? CheckpointPolicy::none() : CheckpointPolicy::all());
    EXPECT_EQ(points[i].layer_offload, variant % 2 == 0 ? 0 : 1);
  }
  EXPECT_EQ(describe_variant(points.back()), "checkpoint all, layers on:1");
  EXPECT_FALSE(replayable(points[8])) << "the predictor does not replay layer offloading";
  const Grid back = parse_grid_json(grid_json(spec.grid));
  EXPECT_EQ(back.values("layer_offload"), spec.grid.values("layer_offload"));
  EXPECT_EQ(expand_grid(back), points);
  EXPECT_NE(sweep_key(spec.workload, spec.grid, spec.base), key);
  spec.grid.axes.erase("checkpoint");
  spec.grid.axes.erase("layer_offload");
  EXPECT_EQ(sweep_key(spec.workload, spec.grid, spec.base), key);
  spec.workload.lora_rank = 4;
  EXPECT_NE(sweep_key(spec.workload, spec.grid, spec.base), key);
  spec.workload.lora_rank = 0;
  EXPECT_NE(sweep_key(spec.workload, spec.grid, spec.base, {}, nullptr, "model.layers"), key);
}

// Layer offloading runs end to end on a LoRA model: alone (weights only, no activation moved) and
// with activation offloading; the weight copies are recorded apart, and the peak drops. (The
// 4-block "small": with depth 1, two blocks' frozen weights are on the device at a time; tiny's two
// blocks would all be.)
TEST(Sweep, LayerOffloadingRunsOnALoraModelAndRecordsItsWeightCopies) {
  auto spec = tiny_spec();
  spec.workload.model = "small";
  spec.workload.lora_rank = 4;
  spec.grid.set_numbers("min_offload_size", {1024});
  spec.grid.set_numbers("max_fwd_stash_size", {2});
  spec.grid.set_names("layer_offload", {"off", "on:1"});
  // The model's weights on host-sim's device from the start, as the CLI has them: the peak counts
  // them, and the layer offloader's device copies.
  host_sim::install();
  auto workload = workload_of(spec.workload);
  auto store = make_memory_store();
  const auto out = run_sweep(*workload, spec, *store);
  const auto points = store->points(out.sweep);
  ASSERT_EQ(points.size(), 4u);  // baseline, layers alone, offload, offload + layers
  for (const auto& p : points) {
    EXPECT_EQ(p.status, PointStatus::Ok) << p.index << ": " << p.error;
    EXPECT_EQ(store->run(p.run)->config, p.config);
    EXPECT_EQ(store->run(p.run)->workload.lora_rank, 4);
  }
  ASSERT_EQ(points[1].config.layer_offload, 1);
  EXPECT_EQ(points[1].summary.offloaded_bytes, 0) << "weights only: no activation moved";
  // Its overlap figures are about the weight copies: applicable, where the baseline's are not.
  EXPECT_TRUE(copied_anything(points[1].config, points[1].summary));
  EXPECT_FALSE(copied_anything(points[0].config, points[0].summary));
  EXPECT_LT(points[1].summary.peak_allocated, points[0].summary.peak_allocated);
  EXPECT_LT(points[3].summary.peak_allocated, points[2].summary.peak_allocated);
  const auto weight_copies = [&](const PointRecord& p) {
    const auto events = store->events(p.run);
    return std::count_if(events.begin(), events.end(),
                         [](const TimelineEvent& e) { return is_weight_copy(e); });
  };
  EXPECT_GT(weight_copies(points[1]), 0);
  EXPECT_GT(weight_copies(points[3]), 0);
  EXPECT_EQ(weight_copies(points[2]), 0);
  // The point's run with the layers off again gives its weights back: the next run is plain.
  EXPECT_EQ(weight_copies(points[0]), 0);
}

// ---- every point from the same state -----------------------------------------------------------

// The step-0 loss of every run of a sweep, by run label.
std::map<std::string, double> step0_losses(Store& store) {
  std::map<std::string, double> out;
  for (const RunRecord& r : store.runs()) {
    const auto steps = store.steps(r.id);
    if (!steps.empty()) out[r.label] = steps.front().loss;
  }
  return out;
}

// With an optimizer every point (and every repeat) starts from the weights the model was built
// with: before, each point trained on from the previous one's, so the step-0 loss fell point after
// point in execution order and the points measured different work.
TEST(Sweep, WithAnOptimizerEveryPointAndRepeatStartsFromTheSameWeights) {
  for (const char* model : {"tiny", "gpt-tiny"}) {
    auto store = make_memory_store();
    auto spec = tiny_spec();
    spec.workload.model = model;
    spec.workload.optimizer = true;
    spec.grid.set_numbers("min_offload_size", {1024});
    spec.repeat = 2;
    auto workload = workload_of(spec.workload);
    const auto out = run_sweep(*workload, spec, *store);
    ASSERT_EQ(out.ok, 3) << model;
    const auto losses = step0_losses(*store);
    ASSERT_EQ(losses.size(), 6u) << model;
    const double baseline = losses.at("test point 0");
    for (const auto& [label, loss] : losses) {
      // Bit for bit: the same weights, batch and dropout masks give the same loss.
      EXPECT_EQ(loss, baseline) << model << ": " << label;
    }
    // The steps inside a run still train: the second step's loss is another.
    const auto steps = store->steps(store->points(out.sweep)[0].run);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_NE(steps[1].loss, steps[0].loss) << model;
  }
}

// A TorchScript model's executor profiles and optimises its graph on its first calls, which a
// device model times as other work: the baseline, measured first, showed an interval instead of
// an exact time. Every point is exact now.
TEST(Sweep, EveryPointOfATorchScriptSweepUnderADeviceModelIsExact) {
  TempDir dir;
  save_dropout_model(dir.file("drop.pt"));
  const DeviceModel h100 = device_model_named("h100-sxm");
  host_sim::set_device_model(&h100);
  auto store = make_memory_store();
  SweepSpec spec;
  spec.name = "ts";
  spec.workload = dropout_run(dir.file("drop.pt")).workload;
  spec.workload.steps = 3;
  spec.workload.warmup = 0;
  spec.grid.set_numbers("min_offload_size", {1024});
  spec.grid.set_numbers("max_fwd_stash_size", {1});
  spec.base.backend = BackendKind::HostSim;
  spec.env.backend = "host-sim";
  auto w = dropout_workload(dir.file("drop.pt"));
  const auto out = run_sweep(*w, spec, *store);
  host_sim::set_device_model(nullptr);
  ASSERT_EQ(out.ok, 2);
  for (const auto& p : store->points(out.sweep)) {
    EXPECT_EQ(p.summary.step_ms_ci_level, 1.0) << "point " << p.index;
    EXPECT_EQ(p.summary.step_ms_ci_low, p.summary.step_ms_ci_high) << "point " << p.index;
    std::vector<int64_t> ns;
    for (const auto& s : store->steps(p.run)) ns.push_back(s.end_ns - s.begin_ns);
    ASSERT_EQ(ns.size(), 3u);
    EXPECT_EQ(ns[0], ns[2]) << "point " << p.index;
  }
}

}  // namespace
}  // namespace offtune::profiler
