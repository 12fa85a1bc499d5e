// JSON forms of the records that several places print or store (the CLI's --json output, the Chrome
// trace's metadata, the nsys-layout export, a sweep's stored grid): one definition each.
#pragma once

#include <nlohmann/json.hpp>

#include "offtune/profiler/records.hpp"

namespace offtune::profiler {

nlohmann::json to_json(const EngineConfig& config);
nlohmann::json to_json(const RunSummary& summary);
// A sweep point: index, status, config, summary, error. Every front end prints points this way.
nlohmann::json to_json(const PointRecord& point);
// A workload as a run or sweep records it.
nlohmann::json to_json(const Workload& workload);

}  // namespace offtune::profiler
