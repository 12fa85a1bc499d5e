// The knobs as users type them (offtune/knobs.hpp has the table): one value or a sweep's list of
// a knob from the CLI's or a form's text, and back. The only place where a knob's text is read.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/knobs.hpp"

namespace offtune::profiler {

// One value: a Switch's on/off, a Size as parse_size reads it ("64KiB"), a Count's whole number, a
// Choice's name (canonical afterwards: every:1 is all, on is on:1). Checked by the knob's set():
// throws ParseError, one line naming the knob's flag ("--prefetch must be between 0 and 64, got
// 65").
KnobValue parse_knob_text(const Knob& knob, std::string_view text);
// A sweep's list of a knob: sizes and counts as parse_size_list and parse_int_list take them (lists
// and ranges, ascending, each once), switches and names comma-separated in the order given, each
// once (a name given twice, even as another spelling of it, is refused). Each value as
// parse_knob_text checks it; throws ParseError naming the flag.
std::vector<KnobValue> parse_knob_list(const Knob& knob, std::string_view text);
// Knobs from texts by knob key (one value each, as parse_knob_text reads them) over `base`: what
// a program that takes a few knobs as flags (offtune-demo, offtune-bench) runs with. Throws
// ParseError naming the flag, or OptionsError for an unknown key.
Knobs parse_knobs(const std::map<std::string, std::string, std::less<>>& texts, Knobs base = {});
// A value as the CLI writes it: on/off, a size in the shortest exact form ("64KiB"), the number,
// the name.
std::string knob_text(const Knob& knob, const KnobValue& value);
// A knob's words for a point where a sweep varies the knob: Knob::words, and for a value the engine
// does not use under the point's other knobs, why ("prefetch 1 (unused: TRL's rules prefetch
// nothing)": under TRL's rules or without streams nothing is prefetched, offloader.cpp). Issue 43:
// a TRL x prefetch sweep showed "trl semantics, prefetch 1" as a setting of its own.
std::string varied_words(const Knob& knob, const Knobs& knobs);
// A knob's help for a flag that takes one value (sweep false: without the help's sentence on what a
// sweep takes) or a sweep's list.
std::string knob_help(const Knob& knob, bool sweep);
// The text a request holds for a knob until the user gives one: its default value, or for a sweep
// the knob's sweep default when it has one.
std::string default_text(const Knob& knob, bool sweep);

}  // namespace offtune::profiler
