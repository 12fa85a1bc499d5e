// The recommender: from a sweep's measured points, the Pareto front of (step time, peak device
// memory), the point chosen under a constraint, why, and ready-to-paste settings for the C++ API,
// TRL and Axolotl.
//
// Rules. Only points with status ok count. A point is on the front when no other point is at least
// as good on both axes and better on one. Constraint memory_budget: the fastest point whose peak
// fits. Constraint max_slowdown: the point with the lowest peak whose step time is within that
// factor of the baseline's. Neither given: max_slowdown 1.25. Ties go to the lower peak, then the
// lower index.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

struct Constraint {
  std::optional<int64_t> memory_budget;  // bytes of peak device memory
  std::optional<double> max_slowdown;    // step time / baseline step time
  std::string describe() const;          // "memory-budget=8 GiB", "max-slowdown=1.25"
};

struct Snippets {
  std::string cpp;
  std::string trl;
  std::string axolotl;
};

struct Recommendation {
  std::vector<PointRecord> front;  // by step time
  std::optional<PointRecord> baseline;
  std::optional<PointRecord> chosen;
  Constraint constraint;
  std::string rationale;  // one or two sentences
  Snippets snippets;      // empty when nothing was chosen
};

// Throws std::invalid_argument for a constraint with both bounds, or non-positive ones.
Recommendation recommend(const std::vector<PointRecord>& points, Constraint constraint);
Snippets make_snippets(const EngineConfig& config);
double slowdown(const PointRecord& point, const PointRecord& baseline);

}  // namespace offtune::profiler
