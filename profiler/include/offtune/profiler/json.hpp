// JSON forms of the records that several places print or store (the CLI's --json output, the Chrome
// trace's metadata, the nsys-layout export, a sweep's stored grid): one definition each.
#pragma once

#include <nlohmann/json.hpp>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

// The knobs by their keys (knob_table()): each as a JSON bool, number or name; a knob whose row
// says json_at_default false only where it differs from its default.
nlohmann::json to_json(const EngineConfig& config);
// `defaults` with each knob that `j` names (by key) set from it, as to_json writes it; other keys
// are ignored. A value the knob refuses (of another kind, out of range, an unknown name), or `j`
// not an object, throws OptionsError (a std::invalid_argument) naming the knob.
EngineConfig config_from_json(const nlohmann::json& j, EngineConfig defaults);
nlohmann::json to_json(const RunSummary& summary);
// A sweep point: index, status, config, summary, error. Every front end prints points this way.
nlohmann::json to_json(const PointRecord& point);
// A workload as a run or sweep records it.
nlohmann::json to_json(const Workload& workload);

}  // namespace offtune::profiler
