// Engine options by name. A knob's keyword (knob_table(), offtune/knobs.hpp) is read into the
// value its kind takes and set through the table; the options that are not knobs (the backend,
// the disk tier's sizes, the debug switches) have one row each below. The only place where a name
// given from Python (or OFFTUNE_POINT) meets a field.
#include "offtune/requests/engine_options.hpp"

#include <functional>
#include <set>
#include <stdexcept>

#include "offtune/knobs.hpp"
#include "offtune/profiler/units.hpp"

namespace offtune::requests {

namespace {

std::string shown(const OptionValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return std::to_string(*d);
  return "'" + std::get<std::string>(v) + "'";
}

[[noreturn]] void fail(std::string_view name, const std::string& message) {
  // Every message opens with the option's name ("link: bad link 'fast' ...").
  const std::string prefix = std::string(name) + ": ";
  throw OptionsError(message.rfind(name, 0) == 0 ? message : prefix + message);
}

bool as_bool(std::string_view name, const OptionValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  fail(name, std::string(name) + " takes True or False, got " + shown(v));
}

// A number given as one, or as text that `parse` reads; else a refusal saying what it takes.
template <typename Parse>
int64_t as_number(std::string_view name, const OptionValue& v, Parse parse,
                  std::string_view takes) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* s = std::get_if<std::string>(&v)) {
    try {
      return parse(*s);
    } catch (const std::invalid_argument& e) {
      fail(name, e.what());
    }
  }
  fail(name, std::string(name) + " takes " + std::string(takes) + ", got " + shown(v));
}

// A whole number, or its decimal text.
int64_t as_int(std::string_view name, const OptionValue& v) {
  return as_number(
      name, v, [](const std::string& s) { return profiler::parse_int64(s); }, "a whole number");
}

// A GPU's index, or -1 for the current one.
int as_device_index(std::string_view name, const OptionValue& v) {
  const int64_t i = as_int(name, v);
  if (i < -1 || i > 1024) fail(name, "device_index must be -1 (current) or a GPU index");
  return static_cast<int>(i);
}

// A count (of tensors, of blocks): a whole number. A size written there most likely meant the
// byte bound beside it, `bytes_bound`, when the count has one.
int64_t as_count(std::string_view name, const OptionValue& v, std::string_view bytes_bound) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    try {
      return profiler::parse_int64(*s);
    } catch (const std::invalid_argument&) {
      bool is_size = true;
      try {
        (void)profiler::parse_size(*s);
      } catch (const std::invalid_argument&) {
        is_size = false;
      }
      if (!is_size || bytes_bound.empty()) {
        fail(name, std::string(name) + " takes a whole number, got " + shown(v));
      }
      fail(name, std::string(name) + " counts tensors (a whole number), got the size " + shown(v) +
                     "; for a bound in bytes use " + std::string(bytes_bound) + "=" + shown(v));
    }
  }
  return as_int(name, v);
}

// Bytes: a whole number, or a size as the CLI writes it ("64KiB").
int64_t as_size(std::string_view name, const OptionValue& v) {
  return as_number(
      name, v, [](const std::string& s) { return profiler::parse_size(s); },
      "a size in bytes (a whole number, or text such as '64KiB')");
}

double as_real(std::string_view name, const OptionValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  fail(name, std::string(name) + " takes a number, got " + shown(v));
}

std::string as_text(std::string_view name, const OptionValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  fail(name, std::string(name) + " takes text, got " + shown(v));
}

// A mode's text through its parser, whose error becomes the option's.
template <typename Parse>
auto as_mode(std::string_view name, const OptionValue& v, Parse&& parse) {
  const std::string text = as_text(name, v);
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    fail(name, e.what());
  }
}

// ---- knobs -------------------------------------------------------------------------------------

// A knob's value as Python gave it, read by the knob's kind, set into `knobs`. Range and names are
// the table's to check (set()); a refusal names the keyword the user wrote (the table's message
// names the knob's key, which for the offload set is not its keyword).
void set_knob(const Knob& knob, Knobs& knobs, const OptionValue& v) {
  const std::string_view name = knob.python;
  KnobValue value;
  switch (knob.kind) {
    case KnobKind::Switch:
      value = as_bool(name, v);
      break;
    case KnobKind::Count:
      value = as_count(name, v, knob.bytes_bound);
      break;
    case KnobKind::Size:
      value = as_size(name, v);
      break;
    case KnobKind::Choice:
      value = as_text(name, v);
      break;
  }
  try {
    knob.set(knobs, value);
  } catch (const OptionsError& e) {
    std::string what = e.what();
    if (knob.key != name && what.starts_with(knob.key)) what.replace(0, knob.key.size(), name);
    throw OptionsError(what);
  }
}

// ---- the options that are not knobs ------------------------------------------------------------

template <typename Options>
using Setter = std::function<void(Options&, std::string_view, const OptionValue&)>;
template <typename Options>
struct Field {
  std::string_view name;
  Setter<Options> set;
};

// OffloadOptions' fields that are no knob, in the order of the struct.
const std::vector<Field<OffloadOptions>>& offload_fields() {
  using O = OffloadOptions;
  using V = OptionValue;
  using N = std::string_view;
  static const std::vector<Field<O>> fields = {
      {"max_prefetch_bytes", [](O& o, N n, const V& v) { o.max_prefetch_bytes = as_size(n, v); }},
      {"backend", [](O& o, N n, const V& v) { o.backend = as_mode(n, v, parse_backend); }},
      {"device_index", [](O& o, N n, const V& v) { o.device_index = as_device_index(n, v); }},
      {"host_ram_warn_percent",
       [](O& o, N n, const V& v) { o.host_ram_warn_percent = as_real(n, v); }},
      {"host_pool_slab_bytes",
       [](O& o, N n, const V& v) { o.host_pool_slab_bytes = as_size(n, v); }},
      {"host_budget_bytes", [](O& o, N n, const V& v) { o.host_budget_bytes = as_size(n, v); }},
      {"disk_dir", [](O& o, N n, const V& v) { o.disk_dir = as_text(n, v); }},
      {"disk_arena_bytes", [](O& o, N n, const V& v) { o.disk_arena_bytes = as_size(n, v); }},
      {"disk_read_ahead_bytes",
       [](O& o, N n, const V& v) { o.disk_read_ahead_bytes = as_size(n, v); }},
      {"disk_min_gbps", [](O& o, N n, const V& v) { o.disk_min_gbps = as_real(n, v); }},
      {"debug_disk_fail_write",
       [](O& o, N n, const V& v) { o.debug_disk_faults.fail_write = as_int(n, v); }},
      {"debug_disk_fail_read",
       [](O& o, N n, const V& v) { o.debug_disk_faults.fail_read = as_int(n, v); }},
      {"debug_disk_error",
       [](O& o, N n, const V& v) { o.debug_disk_faults.error = static_cast<int>(as_int(n, v)); }},
      {"debug_disk_refuse_direct",
       [](O& o, N n, const V& v) { o.debug_disk_faults.refuse_direct = as_bool(n, v); }},
      {"poison_freed", [](O& o, N n, const V& v) { o.poison_freed = as_bool(n, v); }},
      {"reuse_freed", [](O& o, N n, const V& v) { o.reuse_freed = as_bool(n, v); }},
      {"check_streams", [](O& o, N n, const V& v) { o.check_streams = as_bool(n, v); }},
      {"debug_copy_delay_ns", [](O& o, N n, const V& v) { o.debug_copy_delay_ns = as_int(n, v); }},
  };
  return fields;
}

const std::vector<Field<LayerOffloadOptions>>& layer_fields() {
  using O = LayerOffloadOptions;
  using V = OptionValue;
  using N = std::string_view;
  static const std::vector<Field<O>> fields = {
      {"depth", [](O& o, N n, const V& v) { o.depth = as_int(n, v); }},
      {"backend", [](O& o, N n, const V& v) { o.backend = as_mode(n, v, parse_backend); }},
      {"device_index", [](O& o, N n, const V& v) { o.device_index = as_device_index(n, v); }},
      {"use_pin_memory", [](O& o, N n, const V& v) { o.use_pin_memory = as_bool(n, v); }},
      {"link",
       [](O& o, N n, const V& v) {
         o.link = as_mode(n, v, [](std::string_view t) { return parse_link(t).model; });
       }},
      {"debug_copy_delay_ns", [](O& o, N n, const V& v) { o.debug_copy_delay_ns = as_int(n, v); }},
      {"poison_freed", [](O& o, N n, const V& v) { o.poison_freed = as_bool(n, v); }},
      {"reuse_freed", [](O& o, N n, const V& v) { o.reuse_freed = as_bool(n, v); }},
      {"strict", [](O& o, N n, const V& v) { o.strict = as_bool(n, v); }},
  };
  return fields;
}

template <typename Options>
const Field<Options>* field_named(const std::vector<Field<Options>>& fields,
                                  std::string_view name) {
  for (const auto& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

template <typename Options>
std::vector<std::string> names_of(const std::vector<Field<Options>>& fields) {
  std::vector<std::string> names;
  for (const auto& f : fields) names.emplace_back(f.name);
  return names;
}

// Refuses a name that is no option (listing `valid`), or one given a second time.
void check_name(std::set<std::string>& seen, const std::string& name, bool known,
                const std::vector<std::string>& valid) {
  if (!known) {
    std::string listed;
    for (const std::string& v : valid) listed += (listed.empty() ? "" : ", ") + v;
    throw OptionsError("unknown option '" + name + "' (valid: " + listed + ")");
  }
  if (!seen.insert(name).second) throw OptionsError(name + ": given more than once (give it once)");
}

}  // namespace

OffloadOptions parse_offload_options(const std::vector<NamedOption>& given,
                                     OffloadOptions defaults) {
  OffloadOptions options = std::move(defaults);
  // The knobs start from the defaults' own values, except the link: it is written back only when
  // given (link_of's name keeps a model's bandwidth and latency, not its pageable rate).
  Knobs knobs = knobs_of(options);
  knobs.link = {};
  std::set<std::string> seen;
  for (const NamedOption& option : given) {
    const Knob* knob = knob_by_python_name(option.name);
    const Field<OffloadOptions>* field =
        knob != nullptr ? nullptr : field_named(offload_fields(), option.name);
    check_name(seen, option.name, knob != nullptr || field != nullptr, offload_option_names());
    if (knob != nullptr) {
      set_knob(*knob, knobs, option.value);
    } else {
      field->set(options, field->name, option.value);
    }
  }
  options = options_of(knobs, std::move(options));
  options.validate();
  return options;
}

LayerOffloadOptions parse_layer_offload_options(const std::vector<NamedOption>& given,
                                                LayerOffloadOptions defaults) {
  LayerOffloadOptions options = std::move(defaults);
  std::set<std::string> seen;
  for (const NamedOption& option : given) {
    const Field<LayerOffloadOptions>* field = field_named(layer_fields(), option.name);
    check_name(seen, option.name, field != nullptr, layer_offload_option_names());
    field->set(options, field->name, option.value);
  }
  options.validate();
  return options;
}

std::vector<std::string> offload_option_names() {
  std::vector<std::string> names;
  for (const Knob& k : knob_table()) {
    if (!k.python.empty()) names.emplace_back(k.python);
  }
  for (std::string& name : names_of(offload_fields())) names.push_back(std::move(name));
  return names;
}

std::vector<std::string> layer_offload_option_names() { return names_of(layer_fields()); }

}  // namespace offtune::requests
