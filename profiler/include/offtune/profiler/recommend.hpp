// The recommender: from a sweep's measured points, the Pareto front of (step time, peak device
// memory), the point chosen under a constraint, why, and ready-to-paste settings for the C++ API,
// TRL and Axolotl.
//
// Memory, as a run fails on it. "Peak device memory" here is the constraint's MemoryFigure: by
// default the peak device total, what the process takes of the GPU: peak reserved (the bytes the
// caching allocator holds from the device, fragmentation included, what an out-of-memory is
// decided on) plus what it holds outside the allocator (the CUDA context and libraries: measured on
// cuda, the device model's on host-sim). When asked: peak reserved alone, or peak allocated (the
// bytes of live tensors). A host budget is checked against host_held: the process's resident
// peak when it was measured (cuda), else the host memory offtune holds for copies.
//
// Rules. Only points with status ok count; under a host budget, only those whose host_held fits
// it. A point is on the front when no other point is at least as good on both axes and better on
// one (medians and exact peaks). Constraint memory_budget: the fastest point whose peak fits.
// Constraint max_slowdown: the point with the lowest peak whose median step time is within that
// factor of the baseline's. Neither given: max_slowdown kDefaultMaxSlowdown.
//
// Noise. Two step times are equal when their intervals overlap (the median's confidence interval,
// records.hpp: equal_in_time), and two peaks are equal when they differ by at most
// memory_tolerance of the smaller (default 1%). Under a memory budget, every fitting point equal in
// time to the fastest one is a finalist and the lowest peak among them wins; under a slowdown
// bound, every eligible point equal in memory to the lowest peak is a finalist and the one with
// the fastest median among them wins. Remaining ties go to the lower index. The ties of the chosen
// point are the points that satisfy the constraint and cannot be told apart from it (equal in time
// and in memory): a non-empty list means the choice is within noise, and the rationale says so.
// Deterministic sweeps (host-sim with a device model: every point's steps measured the same) have
// no noise: equal times are exactly equal, ties are real ties, and the rationale says that instead.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

// The slowdown bound when a constraint gives neither a budget nor a bound. Front ends show it from
// here (default_max_slowdown_text), never as a copy of the number.
inline constexpr double kDefaultMaxSlowdown = 1.25;
std::string default_max_slowdown_text();  // "1.25"

// Which device-memory figure a budget is checked against and the front is drawn on.
enum class MemoryFigure : uint8_t {
  Total,      // peak device total: peak reserved plus the memory outside the allocator
  Reserved,   // peak reserved: what the caching allocator holds; what torch runs out of
  Allocated,  // peak allocated: the bytes of live tensors (below reserved by fragmentation)
};
std::string_view to_string(MemoryFigure figure);  // "total", "reserved", "allocated"
// Accepts "total", "reserved", "allocated"; throws std::invalid_argument otherwise.
MemoryFigure parse_memory_figure(std::string_view text);
// A summary's peak of that figure.
int64_t device_peak(const RunSummary& s, MemoryFigure figure);
// The host memory a run held: the process's resident peak when measured (it includes the pinned
// pool), else offtune's pinned pool, or its host copies at their peak when more (pageable copies
// are outside the pool).
int64_t host_held(const RunSummary& s);
// Every memory figure of a summary, each named as what it is: "peak allocated 123.2 MiB, peak
// reserved 188.0 MiB, outside the allocator 512.0 MiB (device total 700.0 MiB), pinned host
// 64.0 MiB, host copies at peak 8.0 MiB, host peak 3.1 GiB". Figures that are 0 because they were
// not measured (outside the allocator, host peak) are left out.
std::string describe_memory(const RunSummary& s);

struct Constraint {
  std::optional<int64_t> memory_budget;       // bytes of peak device memory (of `memory`)
  std::optional<double> max_slowdown;         // step time / baseline step time
  double memory_tolerance = 0.01;             // peaks within this fraction are equal (0 = exact)
  MemoryFigure memory = MemoryFigure::Total;  // the peak budgets and the front are judged on
  std::optional<int64_t> host_budget;         // bytes of host memory per process (host_held)
  // "memory-budget=8 GiB", "memory-budget=8 GiB (reserved)", "max-slowdown=1.25
  // host-budget=64 GiB"
  std::string describe() const;
};

struct Snippets {
  std::string cpp;
  std::string trl;
  std::string axolotl;
};

// How much step times vary between points that do the same work: the points that offloaded
// nothing (their thresholds keep every tensor) against the baseline. Their true slowdown is about
// 1.0x (only the hooks' cost), so the spread of their ratios is the run's measurement noise.
struct NoiseFigure {
  int64_t points = 0;      // points that offloaded nothing (0: no figure)
  double min_ratio = 0.0;  // their median step time / the baseline's
  double max_ratio = 0.0;
  // Every ok point's steps (two or more) measured the same time (zero-width intervals): a device
  // model, not a clock, timed the sweep.
  bool deterministic = false;
  std::string describe() const;  // "3 points that offload nothing measured 0.93x..1.12x ..."
};

struct Recommendation {
  std::vector<PointRecord> front;  // by step time
  std::optional<PointRecord> baseline;
  std::optional<PointRecord> chosen;
  std::vector<PointRecord> ties;  // equal to the chosen point within noise (see the rules above)
  Constraint constraint;
  std::string rationale;  // one or two sentences, and whether the choice is within noise
  Snippets snippets;      // empty when nothing was chosen
  NoiseFigure noise;
  // A sweep with semantics as an axis (points measured under offtune's and under TRL's rules): the
  // same constraint applied to each set of points (with the baseline). The C++ snippet comes from
  // offtune_choice, the TRL and Axolotl snippets from trl_choice: each tool's knobs as measured
  // under its own rules. Unset in other sweeps (the snippets come from `chosen`).
  std::optional<PointRecord> offtune_choice;
  std::optional<PointRecord> trl_choice;
  bool mixed_semantics = false;
};

// Whether two peaks are equal within `tolerance` (a fraction of the smaller one).
bool equal_in_memory(int64_t a, int64_t b, double tolerance);
NoiseFigure noise_figure(const std::vector<PointRecord>& points);

// Throws std::invalid_argument for a constraint with both bounds, or non-positive ones.
Recommendation recommend(const std::vector<PointRecord>& points, Constraint constraint);
Snippets make_snippets(const EngineConfig& config);
double slowdown(const PointRecord& point, const PointRecord& baseline);

}  // namespace offtune::profiler
