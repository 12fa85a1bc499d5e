#include "offtune/profiler/json.hpp"

namespace offtune::profiler {

nlohmann::json to_json(const EngineConfig& c) {
  nlohmann::json j{{"offload", c.offload},
                   {"min_offload_size", c.min_offload_size},
                   {"max_fwd_stash_size", c.max_fwd_stash_size},
                   {"max_fwd_stash_bytes", c.max_fwd_stash_bytes},
                   {"prefetch", c.prefetch},
                   {"use_streams", c.use_streams},
                   {"use_pin_memory", c.use_pin_memory},
                   {"link", c.link}};
  // Only when not offtune's own: a sweep's key embeds this object, and the keys of sweeps
  // recorded before semantics existed must not change (absent means "offtune").
  if (c.semantics != "offtune") j["semantics"] = c.semantics;
  // Likewise for the engine variants (schema 4): absent means the default.
  if (c.checkpoint != "none") j["checkpoint"] = c.checkpoint;
  if (c.offload_set != "all") j["offload_set"] = c.offload_set;
  if (c.tier != "host") j["tier"] = c.tier;
  if (c.layer_offload != "off") j["layer_offload"] = c.layer_offload;  // schema 5
  if (c.verify) j["verify"] = true;
  return j;
}

nlohmann::json to_json(const RunSummary& s) {
  const StepInterval ci = step_interval(s);
  return {{"step_ms_median", s.step_ms_median},
          {"step_ms_min", s.step_ms_min},
          {"step_ms_max", s.step_ms_max},
          {"step_ms_stddev", s.step_ms_stddev},
          {"step_ms_ci_low", ci.low},
          {"step_ms_ci_high", ci.high},
          // null: written before confidence intervals were recorded (the interval is min..max)
          {"step_ms_ci_level", ci.level > 0 ? nlohmann::json(ci.level) : nlohmann::json()},
          {"peak_allocated", s.peak_allocated},
          {"peak_reserved", s.peak_reserved},
          {"host_bytes_peak", s.host_bytes_peak},
          {"pinned_bytes", s.pinned_bytes},
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
