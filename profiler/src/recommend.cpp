#include "offtune/profiler/recommend.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <variant>

#include "offtune/knobs.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::profiler {
namespace {

bool dominates(const PointRecord& a, const PointRecord& b, MemoryFigure figure) {
  const auto& x = a.summary;
  const auto& y = b.summary;
  const int64_t mx = device_peak(x, figure), my = device_peak(y, figure);
  return x.step_ms_median <= y.step_ms_median && mx <= my &&
         (x.step_ms_median < y.step_ms_median || mx < my);
}

// "0.33": a ratio of step times.
std::string fmt_ratio(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", ratio);
  return buf;
}

std::string fmt_ms(double ms) {
  std::ostringstream s;
  s.precision(ms < 10 ? 3 : 1);
  s << std::fixed << ms << " ms";
  return s.str();
}

}  // namespace

std::string default_max_slowdown_text() {
  std::ostringstream s;
  s << kDefaultMaxSlowdown;
  return s.str();
}

std::string_view to_string(MemoryFigure figure) {
  switch (figure) {
    case MemoryFigure::Total:
      return "total";
    case MemoryFigure::Reserved:
      return "reserved";
    case MemoryFigure::Allocated:
      return "allocated";
  }
  return "total";
}

MemoryFigure parse_memory_figure(std::string_view text) {
  if (text == "total") return MemoryFigure::Total;
  if (text == "reserved") return MemoryFigure::Reserved;
  if (text == "allocated") return MemoryFigure::Allocated;
  throw std::invalid_argument("unknown memory figure '" + std::string(text) +
                              "' (valid: total, reserved, allocated)");
}

int64_t device_peak(const RunSummary& s, MemoryFigure figure) {
  switch (figure) {
    case MemoryFigure::Total:
      return peak_device_total(s);
    case MemoryFigure::Reserved:
      return s.peak_reserved;
    case MemoryFigure::Allocated:
      return s.peak_allocated;
  }
  return peak_device_total(s);
}

int64_t host_held(const RunSummary& s) {
  return std::max({s.host_rss_peak, s.pinned_bytes, s.host_bytes_peak});
}

std::string describe_memory(const RunSummary& s) {
  std::string out = "peak allocated " + format_size(s.peak_allocated) + ", peak reserved " +
                    format_size(s.peak_reserved);
  if (s.device_outside > 0) {
    out += ", outside the allocator " + format_size(s.device_outside) + " (device total " +
           format_size(peak_device_total(s)) + ")";
  }
  out += ", pinned host " + format_size(s.pinned_bytes) + ", host copies at peak " +
         format_size(s.host_bytes_peak);
  if (s.host_rss_peak > 0) out += ", host peak " + format_size(s.host_rss_peak);
  return out;
}

std::string Constraint::describe() const {
  std::ostringstream s;
  if (memory_budget) {
    s << "memory-budget=" << format_size(*memory_budget);
    if (memory != MemoryFigure::Total) s << " (" << to_string(memory) << ")";
  }
  if (max_slowdown) s << "max-slowdown=" << *max_slowdown;
  if (host_budget) s << (s.tellp() > 0 ? " " : "") << "host-budget=" << format_size(*host_budget);
  return s.str().empty() ? "none" : s.str();
}

double slowdown(const PointRecord& p, const PointRecord& baseline) {
  return baseline.summary.step_ms_median > 0
             ? p.summary.step_ms_median / baseline.summary.step_ms_median
             : 0.0;
}

namespace {

// How the chosen point checkpoints, in each tool's terms.
struct CheckpointText {
  std::string cpp;      // C++ lines (empty: none)
  std::string trl;      // Python comment lines for TRL / Transformers
  std::string axolotl;  // the gradient_checkpointing line (and a note where Axolotl differs)
};

CheckpointText checkpoint_text(const EngineConfig& c) {
  CheckpointText t;
  const std::string policy = to_string(c.checkpoint);
  if (!c.checkpoint.enabled()) {
    t.axolotl = "gradient_checkpointing: false\n";
    return t;
  }
  t.cpp =
      "// Gradient checkpointing: the built-in models take a policy; in your own forward, wrap\n"
      "// each block in offtune::checkpoint([block](const at::Tensor& x) { ... }, x).\n"
      "model->set_checkpoint(offtune::parse_checkpoint_policy(\"" +
      policy + "\"));\n";
  t.trl =
      "# Gradient checkpointing: TrainingArguments(gradient_checkpointing=True), or\n"
      "# model.gradient_checkpointing_enable()";
  const bool all = c.checkpoint == CheckpointPolicy::all();
  t.trl += all ? ".\n"
               : "; Transformers checkpoints every block, not " + policy +
                     ": this point measured fewer.\n";
  t.axolotl = "gradient_checkpointing: true\n";
  if (!all) {
    t.axolotl += "# Axolotl checkpoints every block, not " + policy +
                 " as measured here: expect a lower peak and a slower step.\n";
  }
  return t;
}

// How the chosen point offloads its blocks' frozen weights, in each tool's terms (empty when off).
struct LayerText {
  std::string cpp;      // after the offloader's setup (`setup.offloader`)
  std::string trl;      // TRL has none: a note
  std::string axolotl;  // the layer_offloading line
};

LayerText layer_text(const EngineConfig& c) {
  LayerText t;
  const int64_t depth = c.layer_offload;
  if (depth == 0) return t;
  t.cpp = "// Layer offloading: the blocks' frozen weights stream from pinned host memory, " +
          std::to_string(depth) +
          " block(s)\n"
          "// ahead, on the offloader's copy stream (the built-in models; in your own model, call\n"
          "// add_block() per block and block(i) on entering it: offtune/layer_offload.hpp).\n"
          "offtune::LayerOffloadOptions layer_opts;\n"
          "layer_opts.depth = " +
          std::to_string(depth) +
          ";\n"
          "model->set_layer_offload(\n"
          "    std::make_shared<offtune::LayerOffloader>(*setup.offloader, layer_opts));\n";
  t.trl =
      "# Layer offloading of frozen weights has no TRL argument (Axolotl's layer_offloading\n"
      "# does it).\n";
  t.axolotl = "layer_offloading: true\n";
  if (depth != 1) {
    t.axolotl += "# Axolotl streams one layer ahead, not " + std::to_string(depth) +
                 " as measured here: expect a lower peak and less copy time hidden.\n";
  }
  return t;
}

// The engine's numbers and switches as C++ assignments, in the table's order: each knob the
// engine takes (a Python keyword, which is its OffloadOptions field's name), and one that is off by
// default (no byte window, no verify) only when it is on. The modes (the Choice knobs) are not
// values to copy: each has its own line in make_snippets, or none (the link is host-sim's).
void option_lines(std::ostream& cpp, const EngineConfig& c) {
  static const EngineConfig defaults;
  for (const Knob& k : knob_table()) {
    if (k.python.empty() || k.kind == KnobKind::Choice) continue;
    const KnobValue v = k.get(c);
    if (v == k.get(defaults) && (v == KnobValue(false) || v == KnobValue(int64_t{0}))) continue;
    cpp << "opts." << k.python << " = ";
    if (const bool* on = std::get_if<bool>(&v)) {
      cpp << (*on ? "true" : "false") << ";\n";
      continue;
    }
    const int64_t n = std::get<int64_t>(v);
    cpp << n << ";";
    if (k.kind == KnobKind::Size) cpp << "  // " << format_size(n);
    cpp << "\n";
  }
}

}  // namespace

Snippets make_snippets(const EngineConfig& c) {
  Snippets s;
  const CheckpointText ckpt = checkpoint_text(c);
  const LayerText layers = layer_text(c);
  if (!c.offload && !layers.cpp.empty()) {
    // Layer offloading without activation offloading: an offloader's hooks must still see what
    // autograd saves (the frozen weights), and it moves no activation.
    s.cpp =
        "// Weights only: an offloader that moves no activation (its hooks keep the saved frozen\n"
        "// weights as references to the layer offloader's copies); step under its scope.\n"
        "offtune::OffloadOptions opts;\n"
        "opts.min_offload_size = std::numeric_limits<int64_t>::max();\n"
        "auto setup = offtune::make_offloader_for(*model, opts);\n" +
        layers.cpp + ckpt.cpp;
    s.trl =
        ckpt.trl + layers.trl + "# No activation offloading (no get_act_offloading_ctx_manager).\n";
    s.axolotl = ckpt.axolotl + layers.axolotl + "activation_offloading: false\n";
    return s;
  }
  if (!c.offload) {
    // The baseline won, or checkpointing alone: offloading costs more time than the constraint
    // allows for what it saves.
    s.cpp = "// No offloading: run forward without an offtune::OffloadScope.\n" + ckpt.cpp;
    s.trl =
        ckpt.trl +
        "# No offloading: leave activation offloading off (no get_act_offloading_ctx_manager).\n";
    s.axolotl = ckpt.axolotl + "activation_offloading: false\n";
    return s;
  }
  const auto py = [](bool v) { return v ? "True" : "False"; };
  std::ostringstream cpp;
  cpp << "offtune::OffloadOptions opts;\n";
  option_lines(cpp, c);
  if (c.offload_set == OffloadSet::Boundaries) {
    cpp << "opts.offload = offtune::OffloadSet::Boundaries;  // only checkpointed blocks' inputs\n";
  }
  if (c.tier != Tier::Host) {
    cpp << "opts.tier = offtune::parse_tier(\"" << to_string(c.tier) << "\");\n";
  }
  cpp << "auto setup = offtune::make_offloader_for(*model, opts);\n" << layers.cpp << ckpt.cpp;
  if (c.semantics == Semantics::Trl) {
    cpp << "// Measured under TRL's semantics (--semantics trl). offtune's own engine releases\n"
        << "// finished copies early and prefetches: measure with --semantics offtune for its\n"
        << "// figures.\n";
  }
  s.cpp = cpp.str();
  // The reference's window counts every saved tensor and keeps finished copies until it moves
  // past them: the same knobs hold more memory there than in offtune's engine.
  const std::string caveat =
      c.semantics == Semantics::Trl
          ? ""
          : "# Measured under offtune's semantics. TRL's window counts every saved tensor and\n"
            "# holds finished copies longer, so these knobs may use more memory there: sweep with\n"
            "# --semantics trl for TRL's own figures.\n";
  std::ostringstream trl;
  trl << caveat << ckpt.trl;
  if (c.offload_set == OffloadSet::Boundaries) {
    trl << "# TRL's context manager offloads every saved tensor, not only the checkpoints' inputs\n"
        << "# as measured here (Axolotl's activation_offloading does that).\n";
  }
  if (c.tier != Tier::Host) {
    trl << "# TRL offloads to host memory only; this point used the " << to_string(c.tier)
        << " tier.\n";
  }
  trl << layers.trl;
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
  // Axolotl offloads with gradient checkpointing only (its doc: "required for activation
  // offloading"): its offloader wraps a checkpointed forward, so it sees the blocks' inputs and
  // what is saved outside the blocks, which is offtune's --checkpoint all --offload all.
  ax << caveat;
  if (!c.checkpoint.enabled()) {
    ax << "# Axolotl offloads activations only with gradient checkpointing on; this point\n"
       << "# offloaded without it (TRL's or torchtune's OffloadActivations does that).\n"
       << "gradient_checkpointing: true\n";
  } else {
    ax << ckpt.axolotl;
    if (c.offload_set == OffloadSet::Boundaries) {
      ax << "# Axolotl also offloads what is saved outside the checkpointed blocks (offtune's\n"
         << "# --offload all); this point offloaded the blocks' inputs only.\n";
    }
  }
  ax << layers.axolotl;
  ax << "activation_offloading: "
     << (c.tier == Tier::Disk ? "disk"
         : c.use_streams      ? "true"
                              : "legacy")
     << "\n";
  if (c.tier == Tier::Auto)
    ax << "# (tier auto: host memory first, spilling to disk; Axolotl has disk)\n";
  ax << "# The thresholds are not YAML keys: pass them to\n"
     << "# ActivationOffloadingMixin.get_lora_act_offloading_ctx_manager(model,\n"
     << "#     use_pin_memory=" << py(c.use_pin_memory) << ", use_streams=" << py(c.use_streams)
     << ", min_offload_size=" << c.min_offload_size
     << ", max_fwd_stash_size=" << c.max_fwd_stash_size << ")\n";
  s.axolotl = ax.str();
  return s;
}

bool equal_in_memory(int64_t a, int64_t b, double tolerance) {
  const int64_t lo = std::min(a, b), hi = std::max(a, b);
  return static_cast<double>(hi - lo) <= tolerance * static_cast<double>(lo);
}

namespace {

// A point that does the baseline's work: offloading on, yet it moved no tensor (its thresholds
// keep every one), with nothing recomputed and no weights moved (weight copies are work).
bool does_baseline_work(const PointRecord& p) {
  return p.config.offload && p.summary.offloaded_bytes == 0 && !p.config.checkpoint.enabled() &&
         p.config.layer_offload == 0;
}

}  // namespace

NoiseFigure noise_figure(const std::vector<PointRecord>& points) {
  NoiseFigure f;
  const PointRecord* baseline = nullptr;
  for (const auto& p : points) {
    if (p.status == PointStatus::Ok && is_baseline(p.config)) {
      baseline = &p;
      break;
    }
  }
  f.deterministic = std::any_of(points.begin(), points.end(),
                                [](const PointRecord& p) { return p.status == PointStatus::Ok; });
  for (const auto& p : points) {
    if (p.status != PointStatus::Ok) continue;
    const auto& s = p.summary;
    // Two or more steps (an interval with a level) that all measured the same.
    if (!(s.step_ms_ci_high > 0) || !(s.step_ms_ci_level > 0) ||
        s.step_ms_ci_low != s.step_ms_ci_high || s.step_ms_median != s.step_ms_ci_low) {
      f.deterministic = false;
    }
  }
  if (baseline == nullptr || !(baseline->summary.step_ms_median > 0)) return f;
  for (const auto& p : points) {
    if (p.status != PointStatus::Ok || !does_baseline_work(p)) continue;
    const double ratio = slowdown(p, *baseline);
    f.min_ratio = f.points == 0 ? ratio : std::min(f.min_ratio, ratio);
    f.max_ratio = f.points == 0 ? ratio : std::max(f.max_ratio, ratio);
    ++f.points;
  }
  return f;
}

std::string NoiseFigure::describe() const {
  if (deterministic) {
    return "none: every point's steps took the same modelled time (a device model timed the "
           "sweep), so every difference in step time is real";
  }
  if (points == 0) return "no point offloaded nothing, so the sweep has no noise figure";
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << points
    << (points == 1 ? " point that offloads nothing (the baseline's work) measured "
                    : " points that offload nothing (the baseline's work) measured ")
    << min_ratio << "x";
  if (points > 1) s << ".." << max_ratio << "x";
  s << " of the baseline: differences in step time of that order are noise";
  return s.str();
}

namespace {

// A point's snippets. One whose settings offload but moved no tensor here (its thresholds exceed
// every saved tensor: the baseline's peak) is "no offloading" in every tool's terms: a snippet that
// turns offloading on with thresholds that move nothing would only add the hooks' cost.
Snippets snippets_for(const PointRecord& p) {
  if (!p.config.offload || p.summary.offloaded_bytes != 0 || p.config.layer_offload != 0) {
    return make_snippets(p.config);
  }
  EngineConfig none = p.config;
  none.offload = false;
  Snippets s = make_snippets(none);
  const std::string why = " The chosen point (min_offload_size " +
                          format_size(p.config.min_offload_size) +
                          ") moved no tensor in this workload: it is no offloading.\n";
  s.cpp = "//" + why + s.cpp;
  s.trl = "#" + why + s.trl;
  s.axolotl = "#" + why + s.axolotl;
  return s;
}

// Whether an offloading point measured faster than the baseline beyond noise: its step-time
// interval lies below the baseline's, and its ratio below what points doing the baseline's work
// measured (the noise figure, when the sweep has one). Offloading only adds work (copies, hooks,
// waits), so such a time measures the machine (load, clocks), not the settings.
bool impossibly_fast(const PointRecord& p, const PointRecord& baseline, const NoiseFigure& noise) {
  if (!p.config.offload || p.summary.offloaded_bytes == 0) return false;
  if (!(p.summary.step_ms_ci_high < baseline.summary.step_ms_ci_low)) return false;
  return noise.points == 0 || slowdown(p, baseline) < noise.min_ratio;
}

// "x0.95", "x0.90..x1.10": what the points doing the baseline's work measured.
std::string noise_text(const NoiseFigure& noise) {
  std::string out = "x" + fmt_ratio(noise.min_ratio);
  if (noise.max_ratio != noise.min_ratio) out += "..x" + fmt_ratio(noise.max_ratio);
  return out;
}

// The sweep's noise as a band of step-time ratios: [lo, hi] holds 1.0 and every ratio the points
// doing the baseline's work measured against it. A point measured at ratio s truly takes between
// s / hi and s / lo; two medians whose ratio is within hi / lo cannot be told apart. The band is
// empty (1..1) without a noise figure, or when a device model timed the sweep (no noise).
struct NoiseBand {
  double lo = 1.0;
  double hi = 1.0;
  bool wide() const { return hi > lo; }
  double spread() const { return hi / lo; }
};

NoiseBand noise_band(const NoiseFigure& noise) {
  NoiseBand band;
  if (noise.deterministic || noise.points == 0 || !(noise.min_ratio > 0.0)) return band;
  band.lo = std::min(1.0, noise.min_ratio);
  band.hi = std::max(1.0, noise.max_ratio);
  return band;
}

// "point 2", "points 2 and 3", "points 2, 3 and 5".
std::string name_points(const std::vector<PointRecord>& set) {
  std::string out = set.size() == 1 ? "point " : "points ";
  for (size_t i = 0; i < set.size(); ++i) {
    if (i > 0) out += i + 1 == set.size() ? " and " : ", ";
    out += std::to_string(set[i].index);
  }
  return out;
}

constexpr const char* kMeasureAgain =
    "measure again on a quiet machine, with more --steps or --repeat, or under a device model";

}  // namespace

Recommendation recommend(const std::vector<PointRecord>& points, Constraint constraint) {
  if (constraint.memory_budget && constraint.max_slowdown) {
    throw std::invalid_argument("give either a memory budget or a maximum slowdown, not both");
  }
  if (constraint.memory_budget && *constraint.memory_budget <= 0) {
    throw std::invalid_argument("the memory budget must be positive");
  }
  if (constraint.host_budget && *constraint.host_budget <= 0) {
    throw std::invalid_argument("the host budget must be positive");
  }
  if (constraint.max_slowdown && !(*constraint.max_slowdown > 0.0)) {
    throw std::invalid_argument("the maximum slowdown must be a positive factor, e.g. 1.2");
  }
  if (!(constraint.memory_tolerance >= 0.0 && constraint.memory_tolerance < 1.0)) {
    throw std::invalid_argument("the memory tolerance must be a fraction in [0, 1), e.g. 0.01");
  }
  if (!constraint.memory_budget && !constraint.max_slowdown)
    constraint.max_slowdown = kDefaultMaxSlowdown;
  const double tol = constraint.memory_tolerance;
  const MemoryFigure figure = constraint.memory;
  const auto peak = [figure](const PointRecord& p) { return device_peak(p.summary, figure); };
  // "peak device total", "peak reserved device memory": which figure every sentence names.
  const std::string peak_words = figure == MemoryFigure::Total
                                     ? std::string("peak device total")
                                     : "peak " + std::string(to_string(figure)) + " device memory";

  Recommendation r;
  r.constraint = constraint;
  r.noise = noise_figure(points);
  std::vector<PointRecord> ok;
  int64_t over_host = 0;  // ok points the host budget rules out
  for (const auto& p : points) {
    if (p.status != PointStatus::Ok) continue;
    // Plain training: checkpointing alone is a candidate, not the baseline. The baseline is the
    // reference for slowdowns even when the host budget rules it out (its process peak, on cuda).
    if (is_baseline(p.config) && !r.baseline) r.baseline = p;
    if (constraint.host_budget && host_held(p.summary) > *constraint.host_budget) {
      ++over_host;
      continue;
    }
    ok.push_back(p);
  }
  // Points that moved no tensor do the baseline's work: beside the baseline they are not options of
  // their own (the same run, give or take noise), so neither the front nor the choice lists them
  // (before, the front listed "the baseline" three times and the rationale called them ties).
  // They still give the noise figure above. Without the baseline among the candidates (a host
  // budget left it out), they stand for plain training.
  // (A point is taken at its word only with the baseline's peak: a summary without its offloaded
  // bytes, from a measurer that does not count them, must not lose its point.)
  if (r.baseline && std::any_of(ok.begin(), ok.end(), [&](const PointRecord& p) {
        return p.index == r.baseline->index;
      })) {
    std::erase_if(ok, [&](const PointRecord& p) {
      return does_baseline_work(p) &&
             equal_in_memory(device_peak(p.summary, figure),
                             device_peak(r.baseline->summary, figure), constraint.memory_tolerance);
    });
  }
  // Timed by a clock (not a device model): offloading points faster than the baseline beyond noise
  // are left out, and the rationale says so first.
  std::vector<PointRecord> impossible;
  if (r.baseline && !r.noise.deterministic) {
    std::erase_if(ok, [&](const PointRecord& p) {
      if (!impossibly_fast(p, *r.baseline, r.noise)) return false;
      impossible.push_back(p);
      return true;
    });
  }
  for (const auto& p : ok) {
    bool dominated = false;
    for (const auto& q : ok) dominated = dominated || dominates(q, p, figure);
    if (!dominated) r.front.push_back(p);
  }
  std::sort(r.front.begin(), r.front.end(), [](const PointRecord& a, const PointRecord& b) {
    return a.summary.step_ms_median < b.summary.step_ms_median;
  });

  // Exact orders, used within a set of finalists.
  const auto faster = [](const PointRecord& a, const PointRecord& b) {
    if (a.summary.step_ms_median != b.summary.step_ms_median) {
      return a.summary.step_ms_median < b.summary.step_ms_median;
    }
    return a.index < b.index;
  };
  const auto smaller = [&peak](const PointRecord& a, const PointRecord& b) {
    if (peak(a) != peak(b)) return peak(a) < peak(b);
    return a.index < b.index;
  };
  // The best of `set` by `order`, or nullopt for an empty set.
  const auto best = [](const std::vector<PointRecord>& set, auto order) {
    std::optional<PointRecord> out;
    for (const auto& p : set) {
      if (!out || order(p, *out)) out = p;
    }
    return out;
  };
  // Equal in time: overlapping intervals, or medians within the sweep's own noise band (points
  // doing the same work measured that far apart, so no difference inside it is a result).
  const NoiseBand band = noise_band(r.noise);
  const auto within_band = [&band](const PointRecord& p, const PointRecord& ref) {
    const double a = p.summary.step_ms_median, b = ref.summary.step_ms_median;
    return band.wide() && a > 0 && b > 0 && std::max(a, b) / std::min(a, b) <= band.spread();
  };
  const auto same_time = [&within_band](const PointRecord& p, const PointRecord& ref) {
    return equal_in_time(p.summary, ref.summary) || within_band(p, ref);
  };
  const auto lowest_then_fastest = [&](const std::vector<PointRecord>& set) {
    std::optional<PointRecord> out;
    if (const auto lowest = best(set, smaller)) {
      std::vector<PointRecord> same_memory;
      for (const auto& p : set) {
        if (equal_in_memory(peak(p), peak(*lowest), tol)) same_memory.push_back(p);
      }
      // Equal in memory: the faster wins (by median; the ties below say whether by more than the
      // noise).
      out = best(same_memory, faster);
    }
    return out;
  };

  std::vector<PointRecord> finalists;
  std::vector<PointRecord> allowed;  // the points that satisfy the constraint
  std::ostringstream first;          // what the reader must know before the choice: noise
  std::ostringstream why;
  if (!impossible.empty()) {
    double lo = slowdown(impossible.front(), *r.baseline), hi = lo;
    for (const auto& p : impossible) {
      lo = std::min(lo, slowdown(p, *r.baseline));
      hi = std::max(hi, slowdown(p, *r.baseline));
    }
    first << "Noise first: " << name_points(impossible)
          << (impossible.size() == 1 ? " offloads" : " offload")
          << " yet measured faster than the baseline beyond noise (x" << fmt_ratio(lo)
          << (impossible.size() > 1 ? "..x" + fmt_ratio(hi) : std::string()) << " its step time)";
    if (r.noise.points > 0) {
      first << ", below the " << noise_text(r.noise)
            << " of the points that do the baseline's work";
    }
    first << ". Offloading only adds copies, so these times measure the machine (load, clocks), "
             "not the settings: those points are left out, and the choice below rests on timings "
             "as noisy; "
          << kMeasureAgain << ". ";
  }
  const auto noise_first = [&first]() -> std::ostream& {
    return first << (first.tellp() > 0 ? "Also: " : "Noise first: ");
  };
  const std::string spread_words =
      "the points that do the baseline's work measured " + noise_text(r.noise) + " its step time";
  if (constraint.memory_budget) {
    std::vector<PointRecord> fits;
    for (const auto& p : ok) {
      if (peak(p) <= *constraint.memory_budget) fits.push_back(p);
    }
    allowed = fits;
    if (const auto fastest = best(fits, faster)) {
      std::vector<PointRecord> by_band;  // finalists only the noise band makes equal
      for (const auto& p : fits) {
        if (!same_time(p, *fastest)) continue;
        finalists.push_back(p);
        if (!equal_in_time(p.summary, fastest->summary)) by_band.push_back(p);
      }
      r.chosen = best(finalists, smaller);
      if (!by_band.empty()) {
        double widest = 1.0;
        for (const auto& p : finalists) {
          widest = std::max(widest, p.summary.step_ms_median / fastest->summary.step_ms_median);
        }
        noise_first() << spread_words << ", wider than the differences between "
                      << name_points(finalists) << " (within " << std::fixed << std::setprecision(1)
                      << (widest - 1.0) * 100
                      << "% of the fastest that fits): their step times cannot be told apart, so "
                         "the choice among them rests on peak memory alone. ";
      }
      if (finalists.size() == 1) {
        why << "fastest point whose " << peak_words << " (" << format_size(peak(*r.chosen))
            << ") fits the budget of " << format_size(*constraint.memory_budget) << ": "
            << fmt_ms(r.chosen->summary.step_ms_median) << " per step";
      } else {
        why << "under the budget of " << format_size(*constraint.memory_budget)
            << ", the fastest median step is " << fmt_ms(fastest->summary.step_ms_median)
            << " (point " << fastest->index << "), and " << finalists.size() - 1
            << (finalists.size() == 2 ? " other point is" : " other points are")
            << (r.noise.deterministic ? " exactly as fast; of these, this one has the lowest "
                : by_band.empty()
                    ? " as fast within noise (overlapping step-time intervals); of these, this "
                      "one has the lowest "
                    : " as fast within noise (overlapping step-time intervals, or within the "
                      "noise of the points that do the baseline's work); of these, this one has "
                      "the lowest ")
            << peak_words << " (" << format_size(peak(*r.chosen))
            << "): " << fmt_ms(r.chosen->summary.step_ms_median) << " per step";
      }
    } else {
      why << "no measured point's " << peak_words << " fits the budget of "
          << format_size(*constraint.memory_budget);
    }
  } else if (!r.baseline) {
    why << "no baseline (no-offload point) finished, so slowdown cannot be judged";
  } else {
    const double bound = *constraint.max_slowdown;
    std::vector<PointRecord> eligible;
    for (const auto& p : ok) {
      if (slowdown(p, *r.baseline) <= bound) eligible.push_back(p);
    }
    bool surely = false;  // the choice is among the points within the bound at the noise's worst
    if (band.wide()) {
      // Within the bound however the noise fell (the baseline is the reference: always within),
      // and possibly within it.
      const auto surely_within = [&](const PointRecord& p) {
        return is_baseline(p.config) || slowdown(p, *r.baseline) / band.lo <= bound;
      };
      const auto maybe_within = [&](const PointRecord& p) {
        return is_baseline(p.config) || slowdown(p, *r.baseline) / band.hi <= bound;
      };
      const auto measured = lowest_then_fastest(eligible);
      // The points the noise leaves in doubt that matter: the measured choice when it is not
      // surely within, and every lower peak that may be within.
      std::vector<PointRecord> doubtful;
      for (const auto& p : ok) {
        if (!maybe_within(p) || surely_within(p)) continue;
        const bool is_choice = measured && p.index == measured->index;
        if (is_choice || !measured ||
            (peak(p) < peak(*measured) && !equal_in_memory(peak(p), peak(*measured), tol))) {
          doubtful.push_back(p);
        }
      }
      if (!doubtful.empty()) {
        std::sort(doubtful.begin(), doubtful.end(),
                  [](const PointRecord& a, const PointRecord& b) { return a.index < b.index; });
        std::vector<PointRecord> sure;
        for (const auto& p : ok) {
          if (surely_within(p)) sure.push_back(p);
        }
        noise_first() << spread_words << ", so a slowdown measured as s lies anywhere in s/"
                      << fmt_ratio(band.hi) << "..s/" << fmt_ratio(band.lo) << ": "
                      << name_points(doubtful) << " (x";
        for (size_t i = 0; i < doubtful.size(); ++i) {
          first << (i > 0 ? ", x" : "") << fmt_ratio(slowdown(doubtful[i], *r.baseline));
        }
        first << ") cannot be told within or beyond the bound of x" << fmt_ratio(bound) << ". ";
        if (!sure.empty()) first << "The choice below is the lowest peak surely within the bound. ";
        eligible = std::move(sure);
        surely = true;
      }
    }
    allowed = eligible;
    r.chosen = lowest_then_fastest(eligible);
    if (r.chosen) {
      std::vector<PointRecord> same_memory;
      for (const auto& p : eligible) {
        if (equal_in_memory(peak(p), peak(*r.chosen), tol)) same_memory.push_back(p);
      }
      const auto lowest = best(eligible, smaller);
      why << "lowest " << peak_words << " (" << format_size(peak(*r.chosen)) << ", baseline "
          << format_size(peak(*r.baseline)) << ") " << (surely ? "surely within" : "within")
          << " a slowdown of " << bound << "x: " << fmt_ms(r.chosen->summary.step_ms_median)
          << " per step, x" << std::fixed << std::setprecision(2)
          << slowdown(*r.chosen, *r.baseline) << " the baseline";
      if (same_memory.size() > 1) {
        why << "; " << same_memory.size() - 1
            << (same_memory.size() == 2 ? " other point has" : " other points have")
            << " the same peak within " << std::setprecision(1) << tol * 100 << "% (the lowest is "
            << format_size(peak(*lowest)) << "), and this one has the fastest median step of them";
      }
    } else if (surely) {
      why << "no point is surely within a slowdown of " << bound
          << "x, so no choice is made: " << kMeasureAgain;
    } else {
      why << "no point is within a slowdown of " << bound << "x";
    }
  }
  if (r.chosen) {
    // Points that cannot be told apart from the chosen one: the same time within noise and the
    // same peak within the tolerance.
    for (const auto& p : allowed) {
      if (p.index != r.chosen->index && same_time(p, *r.chosen) &&
          equal_in_memory(peak(p), peak(*r.chosen), tol)) {
        r.ties.push_back(p);
      }
    }
    if (r.ties.empty()) {
      why << (r.noise.deterministic ? ". No other point is as good."
                                    : ". No other point is as good within noise.");
    } else if (r.noise.deterministic) {
      why << ". A tie: " << r.ties.size()
          << (r.ties.size() == 1 ? " other point takes" : " other points take")
          << " exactly the same modelled time with the same peak within " << std::fixed
          << std::setprecision(1) << tol * 100 << "%.";
    } else {
      why << ". The choice is within noise: " << r.ties.size()
          << (r.ties.size() == 1 ? " other point is" : " other points are")
          << " as fast within noise with the same peak within " << std::fixed
          << std::setprecision(1) << tol * 100 << "%.";
    }
  }
  if (constraint.host_budget) {
    if (!r.chosen) why << ".";
    why << " Host budget " << format_size(*constraint.host_budget) << " (offtune's pinned pool and "
        << "host copies)";
    if (r.chosen) why << ": this point holds " << format_size(host_held(r.chosen->summary));
    if (over_host > 0) {
      why << "; " << over_host << (over_host == 1 ? " point holds" : " points hold") << " more and "
          << (over_host == 1 ? "was" : "were") << " left out";
    }
    why << ".";
  }
  // After what comes first, the choice's own sentence starts as one.
  std::string choice = why.str();
  if (first.tellp() > 0 && !choice.empty()) {
    choice[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(choice[0])));
  }
  r.rationale = first.str() + choice;
  if (r.chosen) r.snippets = snippets_for(*r.chosen);

  // Semantics as an axis: each tool's snippet from the points measured under its own rules.
  const auto measured_under = [&](Semantics rules) {
    return std::any_of(ok.begin(), ok.end(), [&](const PointRecord& p) {
      return p.config.offload && p.config.semantics == rules;
    });
  };
  if (measured_under(Semantics::Trl) && measured_under(Semantics::Offtune)) {
    r.mixed_semantics = true;
    const auto choose = [&](Semantics rules) {
      std::vector<PointRecord> subset;
      for (const auto& p : points) {
        if (!p.config.offload || p.config.semantics == rules) subset.push_back(p);
      }
      return recommend(subset, r.constraint).chosen;
    };
    r.offtune_choice = choose(Semantics::Offtune);
    r.trl_choice = choose(Semantics::Trl);
    const auto from = [](const std::optional<PointRecord>& p, const char* comment,
                         const char* rules) {
      std::ostringstream s;
      if (p) {
        s << comment << " From point " << p->index << ", the recommendation among the points "
          << "measured under " << rules << " semantics.\n";
      } else {
        s << comment << " No point measured under " << rules
          << " semantics satisfies the constraint.\n";
      }
      return s.str();
    };
    r.snippets.cpp = from(r.offtune_choice, "//", "offtune's") +
                     (r.offtune_choice ? snippets_for(*r.offtune_choice).cpp : "");
    const Snippets trl = r.trl_choice ? snippets_for(*r.trl_choice) : Snippets{};
    r.snippets.trl = from(r.trl_choice, "#", "TRL's") + trl.trl;
    r.snippets.axolotl = from(r.trl_choice, "#", "TRL's") + trl.axolotl;
  }
  return r;
}

}  // namespace offtune::profiler
