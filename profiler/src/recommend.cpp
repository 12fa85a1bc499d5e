#include "offtune/profiler/recommend.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "offtune/profiler/units.hpp"

namespace offtune::profiler {
namespace {

bool dominates(const PointRecord& a, const PointRecord& b) {
  const auto& x = a.summary;
  const auto& y = b.summary;
  return x.step_ms_median <= y.step_ms_median && x.peak_allocated <= y.peak_allocated &&
         (x.step_ms_median < y.step_ms_median || x.peak_allocated < y.peak_allocated);
}

std::string fmt_ms(double ms) {
  std::ostringstream s;
  s.precision(ms < 10 ? 3 : 1);
  s << std::fixed << ms << " ms";
  return s.str();
}

}  // namespace

std::string Constraint::describe() const {
  std::ostringstream s;
  if (memory_budget) s << "memory-budget=" << format_size(*memory_budget);
  if (max_slowdown) s << "max-slowdown=" << *max_slowdown;
  return s.str().empty() ? "none" : s.str();
}

double slowdown(const PointRecord& p, const PointRecord& baseline) {
  return baseline.summary.step_ms_median > 0
             ? p.summary.step_ms_median / baseline.summary.step_ms_median
             : 0.0;
}

Snippets make_snippets(const EngineConfig& c) {
  Snippets s;
  if (!c.offload) {
    // The baseline won: offloading costs more time than the constraint allows for what it saves.
    s.cpp = "// No offloading: run forward without an offtune::OffloadScope.\n";
    s.trl =
        "# No offloading: leave activation offloading off (no get_act_offloading_ctx_manager).\n";
    s.axolotl = "activation_offloading: false\n";
    return s;
  }
  const auto b = [](bool v) { return v ? "true" : "false"; };
  const auto py = [](bool v) { return v ? "True" : "False"; };
  std::ostringstream cpp;
  cpp << "offtune::OffloadOptions opts;\n"
      << "opts.use_pin_memory = " << b(c.use_pin_memory) << ";\n"
      << "opts.use_streams = " << b(c.use_streams) << ";\n"
      << "opts.min_offload_size = " << c.min_offload_size << ";  // "
      << format_size(c.min_offload_size) << "\n"
      << "opts.max_fwd_stash_size = " << c.max_fwd_stash_size << ";\n";
  if (c.max_fwd_stash_bytes > 0)
    cpp << "opts.max_fwd_stash_bytes = " << c.max_fwd_stash_bytes << ";\n";
  cpp << "opts.prefetch = " << c.prefetch << ";\n"
      << "auto setup = offtune::make_offloader_for(*model, opts);\n";
  s.cpp = cpp.str();
  std::ostringstream trl;
  trl << "from trl.models.activation_offloading import get_act_offloading_ctx_manager\n\n"
      << "ctx = get_act_offloading_ctx_manager(\n"
      << "    model,\n"
      << "    use_pin_memory=" << py(c.use_pin_memory) << ",\n"
      << "    use_streams=" << py(c.use_streams) << ",\n"
      << "    min_offload_size=" << c.min_offload_size << ",\n"
      << "    max_fwd_stash_size=" << c.max_fwd_stash_size << ",\n"
      << ")\n";
  s.trl = trl.str();
  std::ostringstream ax;
  // Axolotl's YAML selects the variant only; the knobs are arguments of its mixin's
  // get_lora_act_offloading_ctx_manager (same names as TRL's).
  ax << "gradient_checkpointing: true\n"
     << "activation_offloading: " << (c.use_streams ? "true" : "legacy") << "\n"
     << "# The thresholds are not YAML keys: pass them to\n"
     << "# ActivationOffloadingMixin.get_lora_act_offloading_ctx_manager(model,\n"
     << "#     use_pin_memory=" << py(c.use_pin_memory) << ", use_streams=" << py(c.use_streams)
     << ", min_offload_size=" << c.min_offload_size
     << ", max_fwd_stash_size=" << c.max_fwd_stash_size << ")\n";
  s.axolotl = ax.str();
  return s;
}

Recommendation recommend(const std::vector<PointRecord>& points, Constraint constraint) {
  if (constraint.memory_budget && constraint.max_slowdown) {
    throw std::invalid_argument("give either a memory budget or a maximum slowdown, not both");
  }
  if (constraint.memory_budget && *constraint.memory_budget <= 0) {
    throw std::invalid_argument("the memory budget must be positive");
  }
  if (constraint.max_slowdown && !(*constraint.max_slowdown > 0.0)) {
    throw std::invalid_argument("the maximum slowdown must be a positive factor, e.g. 1.2");
  }
  if (!constraint.memory_budget && !constraint.max_slowdown) constraint.max_slowdown = 1.25;

  Recommendation r;
  r.constraint = constraint;
  std::vector<PointRecord> ok;
  for (const auto& p : points) {
    if (p.status != PointStatus::Ok) continue;
    ok.push_back(p);
    if (!p.config.offload && !r.baseline) r.baseline = p;
  }
  for (const auto& p : ok) {
    bool dominated = false;
    for (const auto& q : ok) dominated = dominated || dominates(q, p);
    if (!dominated) r.front.push_back(p);
  }
  std::sort(r.front.begin(), r.front.end(), [](const PointRecord& a, const PointRecord& b) {
    return a.summary.step_ms_median < b.summary.step_ms_median;
  });

  const auto better = [](const PointRecord& a, const PointRecord& b, bool by_time) {
    const auto& x = a.summary;
    const auto& y = b.summary;
    if (by_time && x.step_ms_median != y.step_ms_median) return x.step_ms_median < y.step_ms_median;
    if (x.peak_allocated != y.peak_allocated) return x.peak_allocated < y.peak_allocated;
    if (!by_time && x.step_ms_median != y.step_ms_median)
      return x.step_ms_median < y.step_ms_median;
    return a.index < b.index;
  };
  std::ostringstream why;
  if (constraint.memory_budget) {
    for (const auto& p : ok) {
      if (p.summary.peak_allocated > *constraint.memory_budget) continue;
      if (!r.chosen || better(p, *r.chosen, /*by_time=*/true)) r.chosen = p;
    }
    if (r.chosen) {
      why << "fastest point whose peak device memory ("
          << format_size(r.chosen->summary.peak_allocated) << ") fits the budget of "
          << format_size(*constraint.memory_budget) << ": "
          << fmt_ms(r.chosen->summary.step_ms_median) << " per step";
    } else {
      why << "no measured point fits the budget of " << format_size(*constraint.memory_budget);
    }
  } else {
    if (!r.baseline) {
      why << "no baseline (no-offload point) finished, so slowdown cannot be judged";
    } else {
      for (const auto& p : ok) {
        if (slowdown(p, *r.baseline) > *constraint.max_slowdown) continue;
        if (!r.chosen || better(p, *r.chosen, /*by_time=*/false)) r.chosen = p;
      }
      if (r.chosen) {
        why << "lowest peak device memory (" << format_size(r.chosen->summary.peak_allocated)
            << ", baseline " << format_size(r.baseline->summary.peak_allocated)
            << ") within a slowdown of " << *constraint.max_slowdown
            << "x: " << fmt_ms(r.chosen->summary.step_ms_median) << " per step, x" << std::fixed
            << std::setprecision(2) << slowdown(*r.chosen, *r.baseline) << " the baseline";
      } else {
        why << "no point is within a slowdown of " << *constraint.max_slowdown << "x";
      }
    }
  }
  r.rationale = why.str();
  if (r.chosen) r.snippets = make_snippets(r.chosen->config);
  return r;
}

}  // namespace offtune::profiler
