#include "offtune/profiler/json.hpp"

#include <string>
#include <variant>

namespace offtune::profiler {

namespace {

nlohmann::json json_of(const KnobValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

}  // namespace

nlohmann::json to_json(const EngineConfig& c) {
  // A knob added after the first store schema is written only where it differs from its default
  // (json_at_default false): a sweep's key embeds this object, and the keys of sweeps recorded
  // before the knob existed must not change (absent means the default).
  const EngineConfig defaults;
  nlohmann::json j = nlohmann::json::object();
  for (const Knob& k : knob_table()) {
    const KnobValue v = k.get(c);
    if (k.json_at_default || v != k.get(defaults)) j[std::string(k.key)] = json_of(v);
  }
  return j;
}

EngineConfig config_from_json(const nlohmann::json& j, EngineConfig config) {
  if (!j.is_object()) {
    throw OptionsError("engine settings must be a JSON object, got " + std::string(j.type_name()));
  }
  for (const Knob& k : knob_table()) {
    const auto it = j.find(k.key);
    if (it == j.end()) continue;
    // The value as the knob carries it; set() refuses one of another kind or out of range.
    if (it->is_boolean()) {
      k.set(config, it->get<bool>());
    } else if (it->is_number_integer()) {
      k.set(config, it->get<int64_t>());
    } else if (it->is_string()) {
      k.set(config, it->get<std::string>());
    } else {
      throw OptionsError(std::string(k.key) + " takes " +
                         (k.kind == KnobKind::Switch   ? "true or false"
                          : k.kind == KnobKind::Choice ? "a name"
                                                       : "a whole number") +
                         ", got " + it->dump());
    }
  }
  return config;
}

nlohmann::json to_json(const RunSummary& s) {
  const StepInterval ci = step_interval(s);
  return {
      {"step_ms_median", s.step_ms_median},
      {"step_ms_min", s.step_ms_min},
      {"step_ms_max", s.step_ms_max},
      {"step_ms_stddev", s.step_ms_stddev},
      {"step_ms_ci_low", ci.low},
      {"step_ms_ci_high", ci.high},
      // null: written before confidence intervals were recorded (the interval is min..max)
      {"step_ms_ci_level", ci.level > 0 ? nlohmann::json(ci.level) : nlohmann::json()},
      {"peak_allocated", s.peak_allocated},
      {"peak_reserved", s.peak_reserved},
      {"device_outside", s.device_outside},
      {"peak_device_total", peak_device_total(s)},
      {"host_bytes_peak", s.host_bytes_peak},
      {"pinned_bytes", s.pinned_bytes},
      // null: not measured (host-sim, or no per-run reset of the high-water mark)
      {"host_rss_peak", s.host_rss_peak > 0 ? nlohmann::json(s.host_rss_peak) : nlohmann::json()},
      {"offloaded_bytes", s.offloaded_bytes},
      {"reloaded_bytes", s.reloaded_bytes},
      {"hidden_copy_pct", s.hidden_copy_pct},
      {"hidden_d2h_pct", s.hidden_d2h_pct},
      {"hidden_h2d_pct", s.hidden_h2d_pct},
      {"exposed_copy_ns", s.exposed_copy_ns},
      {"pageable_copies", s.pageable_copies},
      {"final_loss", s.final_loss}};
}

nlohmann::json to_json(const PointRecord& p) {
  return {{"index", p.index},
          {"status", to_string(p.status)},
          {"config", to_json(p.config)},
          {"summary", to_json(p.summary)},
          {"error", p.error}};
}

nlohmann::json to_json(const Workload& w) {
  return {{"model", w.model},   {"batch", w.batch},         {"seq", w.seq},
          {"dtype", w.dtype},   {"seed", w.seed},           {"steps", w.steps},
          {"warmup", w.warmup}, {"optimizer", w.optimizer}, {"lora_rank", w.lora_rank}};
}

}  // namespace offtune::profiler
