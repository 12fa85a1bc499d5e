// Engine options from name/value pairs: what a front end that takes options by name (the Python
// package's keyword arguments, the JSON object of OFFTUNE_POINT) hands over as given. Names are
// the knobs' Python keywords (knob_table(), offtune/knobs.hpp: min_offload_size, prefetch, link,
// offload, ...), the other fields of OffloadOptions (backend, disk_dir, ...) and those of
// LayerOffloadOptions; sizes may be written as the CLI writes them ("64KiB", profiler/units.hpp)
// or given as numbers; modes as the CLI names them (backend "host-sim", semantics "trl", link
// "pcie4"). Parsed once, here, into the engine's typed options (a knob through its row of the
// table), and validated by the engine's own validate().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "offtune/layer_offload.hpp"
#include "offtune/options.hpp"

namespace offtune::requests {

// A value as a front end passes it through: a bool, a whole number, a real number or text.
using OptionValue = std::variant<bool, int64_t, double, std::string>;
struct NamedOption {
  std::string name;
  OptionValue value;
};

// Every bad input is one OptionsError (a std::invalid_argument) whose one-line message names the
// option and says what it takes: an unknown name (with the valid ones), a value of the wrong kind
// ("use_streams takes True or False, got '3'"), a bad size ("min_offload_size: ..."), a value
// out of range (a knob's range in the table, else the engine's validate()), or a name given twice.
OffloadOptions parse_offload_options(const std::vector<NamedOption>& options,
                                     OffloadOptions defaults = {});
LayerOffloadOptions parse_layer_offload_options(const std::vector<NamedOption>& options,
                                                LayerOffloadOptions defaults = {});

// The names each parser takes (for help and errors): the knobs' keywords in the table's order, then
// the other fields of OffloadOptions in theirs; LayerOffloadOptions' fields in theirs.
std::vector<std::string> offload_option_names();
std::vector<std::string> layer_offload_option_names();

}  // namespace offtune::requests
