// The recommender's memory figures: a budget is judged on the peak device total (peak reserved
// plus what the process holds outside the allocator: what a GPU runs out of) unless told to use
// peak reserved or peak allocated, the front is drawn on the same figure, a host budget
// leaves out the points that hold more host memory for their copies, and every sentence names the
// figure it used.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "offtune/profiler/recommend.hpp"

namespace offtune::profiler {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;

// A measured point with every memory figure given (a step time known exactly).
PointRecord measured(int64_t index, bool offload, double ms, int64_t allocated, int64_t reserved,
                     int64_t pinned = 0, int64_t host_peak = 0) {
  PointRecord p;
  p.index = index;
  p.config.offload = offload;
  p.config.min_offload_size = 1024 * (index + 1);
  p.status = PointStatus::Ok;
  p.summary.step_ms_median = ms;
  p.summary.step_ms_min = ms;
  p.summary.step_ms_max = ms;
  p.summary.peak_allocated = allocated;
  p.summary.peak_reserved = reserved;
  p.summary.pinned_bytes = pinned;
  p.summary.host_bytes_peak = host_peak;
  p.summary.offloaded_bytes = offload ? MiB : 0;
  return p;
}

bool says(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Point 1 is faster and allocates less, but its blocks fragment: it reserves more than point 2.
const std::vector<PointRecord> kFragmenting{
    measured(0, false, 100, 400 * MiB, 420 * MiB),  // the baseline
    measured(1, true, 105, 150 * MiB, 300 * MiB),   // fast, fragmented
    measured(2, true, 110, 180 * MiB, 200 * MiB),   // slower, compact
};

TEST(RecommendMemory, ABudgetIsJudgedOnPeakReservedUnlessToldAllocated) {
  Constraint c;
  c.memory_budget = 250 * MiB;
  c.memory = MemoryFigure::Reserved;
  auto r = recommend(kFragmenting, c);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 2) << "point 1 reserves 300 MiB: it would run out of memory";
  EXPECT_TRUE(says(r.rationale, "peak reserved device memory (200 MiB)")) << r.rationale;

  c.memory = MemoryFigure::Allocated;
  r = recommend(kFragmenting, c);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 1);
  EXPECT_TRUE(says(r.rationale, "peak allocated device memory (150 MiB)")) << r.rationale;

  c.memory = MemoryFigure::Reserved;
  c.memory_budget = 150 * MiB;
  r = recommend(kFragmenting, c);
  EXPECT_FALSE(r.chosen);
  EXPECT_TRUE(says(r.rationale, "no measured point's peak reserved device memory fits"))
      << r.rationale;
}

TEST(RecommendMemory, TheFrontAndTheLowestPeakUseTheConstraintsFigure) {
  // On reserved memory point 1 (105 ms, 300 MiB) is dominated by nothing (faster than 2) and point
  // 2 (110 ms, 200 MiB) has the lowest peak; on allocated memory point 1 dominates point 2.
  Constraint c;
  auto front = [](const Recommendation& r) {
    std::vector<int64_t> out;
    for (const auto& p : r.front) out.push_back(p.index);
    return out;
  };
  auto r = recommend(kFragmenting, c);  // the default: lowest peak within 1.25x
  EXPECT_EQ(front(r), (std::vector<int64_t>{0, 1, 2}));
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 2);
  // Nothing outside the allocator here: the device total is peak reserved.
  EXPECT_TRUE(says(r.rationale, "lowest peak device total (200 MiB, baseline 420 MiB)"))
      << r.rationale;
  c.memory = MemoryFigure::Allocated;
  r = recommend(kFragmenting, c);
  EXPECT_EQ(front(r), (std::vector<int64_t>{0, 1}));
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 1);
}

TEST(RecommendMemory, AHostBudgetLeavesOutThePointsThatHoldMoreHostMemory) {
  const std::vector<PointRecord> pts{
      measured(0, false, 100, 400 * MiB, 420 * MiB),
      // Offloads much: little device memory, 3 GiB pinned.
      measured(1, true, 120, 100 * MiB, 110 * MiB, 3072 * MiB, 3000 * MiB),
      // Offloads less; its pageable copies at their peak exceed its pinned pool.
      measured(2, true, 110, 200 * MiB, 210 * MiB, 512 * MiB, 900 * MiB),
  };
  EXPECT_EQ(host_held(pts[1].summary), 3072 * MiB);
  EXPECT_EQ(host_held(pts[2].summary), 900 * MiB);
  Constraint c;
  c.memory_budget = 300 * MiB;
  auto r = recommend(pts, c);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 2) << "the fastest under 300 MiB";

  c.memory_budget = 150 * MiB;
  c.host_budget = 2048 * MiB;
  r = recommend(pts, c);
  EXPECT_FALSE(r.chosen) << "point 1 fits the device but not the host";
  EXPECT_TRUE(says(r.rationale, "Host budget 2 GiB")) << r.rationale;
  EXPECT_TRUE(says(r.rationale, "1 point holds more and was left out")) << r.rationale;

  // With a slowdown bound: the baseline (no host copies) stays, point 1 is left out.
  c.memory_budget.reset();
  c.max_slowdown = 1.5;
  c.host_budget = 1024 * MiB;
  r = recommend(pts, c);
  ASSERT_TRUE(r.baseline);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 2);
  EXPECT_TRUE(says(r.rationale, "this point holds 900 MiB")) << r.rationale;
  for (const auto& p : r.front) EXPECT_NE(p.index, 1) << "left out of the front too";
  c.host_budget = 0;
  EXPECT_THROW(recommend(pts, c), std::invalid_argument);
}

TEST(RecommendMemory, TheConstraintAndTheFiguresAreNamedAsWhatTheyAre) {
  Constraint c;
  c.memory_budget = 8 * 1024 * MiB;
  EXPECT_EQ(c.describe(), "memory-budget=8 GiB");
  c.memory = MemoryFigure::Allocated;
  EXPECT_EQ(c.describe(), "memory-budget=8 GiB (allocated)");
  c.host_budget = 64 * 1024 * MiB;
  EXPECT_EQ(c.describe(), "memory-budget=8 GiB (allocated) host-budget=64 GiB");
  c.memory = MemoryFigure::Reserved;
  EXPECT_EQ(c.describe(), "memory-budget=8 GiB (reserved) host-budget=64 GiB");
  EXPECT_EQ(parse_memory_figure("total"), MemoryFigure::Total);
  EXPECT_EQ(parse_memory_figure("reserved"), MemoryFigure::Reserved);
  EXPECT_EQ(parse_memory_figure("allocated"), MemoryFigure::Allocated);
  EXPECT_THROW(parse_memory_figure("device"), std::invalid_argument);
  EXPECT_EQ(to_string(MemoryFigure::Reserved), "reserved");
  EXPECT_EQ(to_string(MemoryFigure::Total), "total");
  const PointRecord p = measured(1, true, 100, 123 * MiB, 188 * MiB, 64 * MiB, 8 * MiB);
  EXPECT_EQ(describe_memory(p.summary),
            "peak allocated 123 MiB, peak reserved 188 MiB, pinned host 64 MiB, host "
            "copies at peak 8 MiB");
  // Measured on cuda: what lies outside the allocator and the process's host peak.
  PointRecord q = p;
  q.summary.device_outside = 500 * MiB;
  q.summary.host_rss_peak = 3 * 1024 * MiB;
  EXPECT_EQ(describe_memory(q.summary),
            "peak allocated 123 MiB, peak reserved 188 MiB, outside the allocator 500 MiB (device "
            "total 688 MiB), pinned host 64 MiB, host copies at peak 8 MiB, host peak 3 GiB");
}

// The CUDA context and libraries take memory that torch's counters never see: a budget on the
// device total counts it, so a point whose reserved memory fits but whose total does not is not
// chosen; on reserved alone it would be.
TEST(RecommendMemory, TheDeviceTotalCountsWhatLiesOutsideTheAllocator) {
  std::vector<PointRecord> pts = kFragmenting;
  for (auto& p : pts) p.summary.device_outside = 512 * MiB;
  Constraint c;
  c.memory_budget = 250 * MiB + 512 * MiB;
  EXPECT_EQ(c.memory, MemoryFigure::Total) << "the default";
  EXPECT_EQ(device_peak(pts[2].summary, MemoryFigure::Total), 712 * MiB);
  auto r = recommend(pts, c);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 2);
  EXPECT_TRUE(says(r.rationale, "peak device total (712 MiB)")) << r.rationale;
  c.memory_budget = 300 * MiB;
  r = recommend(pts, c);
  EXPECT_FALSE(r.chosen) << "every point takes more than 512 MiB of the device";
  c.memory = MemoryFigure::Reserved;
  c.memory_budget = 250 * MiB;
  r = recommend(pts, c);
  ASSERT_TRUE(r.chosen) << "on reserved alone point 2 (200 MiB) would seem to fit";
  EXPECT_EQ(r.chosen->index, 2);
}

// Where the process's host peak was measured (cuda), a host budget is checked against it: it holds
// the pinned pool and everything else the process keeps on the host.
TEST(RecommendMemory, AHostBudgetUsesTheProcessPeakWhereItWasMeasured) {
  std::vector<PointRecord> pts{
      measured(0, false, 100, 400 * MiB, 420 * MiB),
      measured(1, true, 110, 200 * MiB, 210 * MiB, 512 * MiB, 400 * MiB),
  };
  EXPECT_EQ(host_held(pts[1].summary), 512 * MiB);
  pts[1].summary.host_rss_peak = 6 * 1024 * MiB;
  EXPECT_EQ(host_held(pts[1].summary), 6 * 1024 * MiB);
  Constraint c;
  c.memory_budget = 300 * MiB;
  c.host_budget = 4 * 1024 * MiB;
  const auto r = recommend(pts, c);
  EXPECT_FALSE(r.chosen) << "its process peaked at 6 GiB of host memory";
}

}  // namespace
}  // namespace offtune::profiler
