// Knobs from the text users type (knob_text.hpp).
#include "offtune/profiler/knob_text.hpp"

#include <algorithm>

#include "offtune/profiler/units.hpp"

namespace offtune::profiler {

namespace {

// The knob's message with its flag in place of its name: "--prefetch must be ...".
[[noreturn]] void refuse(const Knob& k, const std::string& what) {
  const std::string name(k.key);
  const std::string flag = k.flag.empty() ? name : std::string(k.flag);
  if (what.rfind(name + ": ", 0) == 0) throw ParseError(flag + ": " + what.substr(name.size() + 2));
  if (what.rfind(name + " ", 0) == 0) throw ParseError(flag + what.substr(name.size()));
  throw ParseError(flag + ": " + what);
}

// The value checked (and made canonical) by the knob's own set().
KnobValue checked(const Knob& k, KnobValue value) {
  Knobs scratch;
  try {
    k.set(scratch, value);
  } catch (const std::invalid_argument& e) {
    refuse(k, e.what());
  }
  return k.get(scratch);
}

KnobValue read_one(const Knob& k, std::string_view text) {
  // An empty text is no value, whatever the knob (the link's empty name is the backend's own link
  // in a record, never something a user types).
  if (text.empty()) {
    refuse(k, std::string(k.key) + " takes a value, e.g. " +
                  (k.examples != nullptr ? k.examples().front() : std::string("on")));
  }
  switch (k.kind) {
    case KnobKind::Switch:
      if (text == "on") return true;
      if (text == "off") return false;
      refuse(k, "'" + std::string(text) + "' is not on or off" +
                    (k.nest > 0 ? std::string(" (a list: on,off)") : std::string()));
    case KnobKind::Count:
      try {
        return parse_int64(text);
      } catch (const ParseError& e) {
        refuse(k, e.what());
      }
    case KnobKind::Size:
      try {
        return parse_size(text);
      } catch (const ParseError& e) {
        refuse(k, e.what());
      }
    case KnobKind::Choice:
      return std::string(text);
  }
  refuse(k, "unknown kind");
}

}  // namespace

KnobValue parse_knob_text(const Knob& k, std::string_view text) {
  return checked(k, read_one(k, text));
}

std::vector<KnobValue> parse_knob_list(const Knob& k, std::string_view text) {
  std::vector<KnobValue> out;
  if (k.kind == KnobKind::Size || k.kind == KnobKind::Count) {
    std::vector<int64_t> numbers;
    try {
      numbers = k.kind == KnobKind::Size ? parse_size_list(text) : parse_int_list(text);
    } catch (const ParseError& e) {
      refuse(k, e.what());
    }
    if (numbers.empty()) refuse(k, "takes a value, e.g. " + k.examples().front());
    for (const int64_t n : numbers) out.push_back(checked(k, n));
    return out;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    KnobValue value = parse_knob_text(k, item);
    if (std::find(out.begin(), out.end(), value) != out.end()) {
      refuse(k, std::string(k.key) + " names '" + plain_text(value, k.kind) + "' twice");
    }
    out.push_back(std::move(value));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

Knobs parse_knobs(const std::map<std::string, std::string, std::less<>>& texts, Knobs base) {
  for (const auto& [key, text] : texts) {
    const Knob& k = knob(key);
    k.set(base, parse_knob_text(k, text));
  }
  return base;
}

std::string knob_text(const Knob& k, const KnobValue& value) {
  if (k.kind == KnobKind::Size) {
    // format_size's exact form without its space: "64 KiB" -> "64KiB" (parse_size takes both).
    std::string text = format_size(std::get<int64_t>(value));
    if (text.find('.') != std::string::npos) return std::to_string(std::get<int64_t>(value));
    text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
    return text == "0B" ? "0" : text;
  }
  return plain_text(value, k.kind);
}

std::string varied_words(const Knob& k, const Knobs& knobs) {
  std::string words = k.words(knobs);
  if (std::string_view(k.key) == "prefetch" && knobs.prefetch > 0) {
    if (knobs.semantics == Semantics::Trl) return words + " (unused: TRL's rules prefetch nothing)";
    if (!knobs.use_streams) return words + " (unused: no streams, no prefetch)";
  }
  return words;
}

std::string knob_help(const Knob& k, bool sweep) {
  const std::string help(k.help);
  const size_t last = help.rfind("; ");
  if (sweep || last == std::string::npos || help.find("sweep", last) == std::string::npos) {
    return help;
  }
  return help.substr(0, last);
}

std::string default_text(const Knob& k, bool sweep) {
  if (sweep && !k.sweep_default.empty()) return std::string(k.sweep_default);
  if (!k.request_default.empty()) return std::string(k.request_default);
  return knob_text(k, default_value(k));
}

}  // namespace offtune::profiler
