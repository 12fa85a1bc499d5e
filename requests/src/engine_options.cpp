// Engine options by name: one table per options struct, each entry the field's name and how its
// value is read. The only place where a name given from Python (or OFFTUNE_POINT) meets a field.
#include "offtune/requests/engine_options.hpp"

#include <functional>
#include <set>
#include <stdexcept>

#include "offtune/profiler/backend.hpp"
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

// A count: a whole number, or its decimal text.
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

// A window or prefetch depth counts tensors; a size written there most likely meant the byte bound
// beside it.
int64_t as_count(std::string_view name, const OptionValue& v, std::string_view bytes_option) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    try {
      return profiler::parse_int64(*s);
    } catch (const std::invalid_argument&) {
      try {
        (void)profiler::parse_size(*s);
      } catch (const std::invalid_argument&) {
        fail(name, std::string(name) + " takes a whole number, got " + shown(v));
      }
      fail(name, std::string(name) + " counts tensors (a whole number), got the size " + shown(v) +
                     "; for a bound in bytes use " + std::string(bytes_option) + "=" + shown(v));
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

template <typename Options>
using Setter = std::function<void(Options&, std::string_view, const OptionValue&)>;
template <typename Options>
struct Field {
  std::string_view name;
  Setter<Options> set;
};

LinkModel parse_link(const std::string& text) { return profiler::parse_link(text); }

const std::vector<Field<OffloadOptions>>& offload_fields() {
  using O = OffloadOptions;
  using V = OptionValue;
  using N = std::string_view;
  static const std::vector<Field<O>> fields = {
      {"use_pin_memory", [](O& o, N n, const V& v) { o.use_pin_memory = as_bool(n, v); }},
      {"use_streams", [](O& o, N n, const V& v) { o.use_streams = as_bool(n, v); }},
      {"min_offload_size", [](O& o, N n, const V& v) { o.min_offload_size = as_size(n, v); }},
      {"max_fwd_stash_size",
       [](O& o, N n, const V& v) { o.max_fwd_stash_size = as_count(n, v, "max_fwd_stash_bytes"); }},
      {"max_fwd_stash_bytes", [](O& o, N n, const V& v) { o.max_fwd_stash_bytes = as_size(n, v); }},
      {"prefetch",
       [](O& o, N n, const V& v) { o.prefetch = as_count(n, v, "max_prefetch_bytes"); }},
      {"max_prefetch_bytes", [](O& o, N n, const V& v) { o.max_prefetch_bytes = as_size(n, v); }},
      {"backend", [](O& o, N n, const V& v) { o.backend = as_mode(n, v, parse_backend); }},
      {"device_index", [](O& o, N n, const V& v) { o.device_index = as_device_index(n, v); }},
      {"host_ram_warn_percent",
       [](O& o, N n, const V& v) { o.host_ram_warn_percent = as_real(n, v); }},
      {"host_pool_slab_bytes",
       [](O& o, N n, const V& v) { o.host_pool_slab_bytes = as_size(n, v); }},
      {"tier", [](O& o, N n, const V& v) { o.tier = as_mode(n, v, parse_tier); }},
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
      {"link", [](O& o, N n, const V& v) { o.link = as_mode(n, v, parse_link); }},
      {"semantics", [](O& o, N n, const V& v) { o.semantics = as_mode(n, v, parse_semantics); }},
      {"offload", [](O& o, N n, const V& v) { o.offload = as_mode(n, v, parse_offload_set); }},
      {"poison_freed", [](O& o, N n, const V& v) { o.poison_freed = as_bool(n, v); }},
      {"reuse_freed", [](O& o, N n, const V& v) { o.reuse_freed = as_bool(n, v); }},
      {"check_streams", [](O& o, N n, const V& v) { o.check_streams = as_bool(n, v); }},
      {"debug_copy_delay_ns", [](O& o, N n, const V& v) { o.debug_copy_delay_ns = as_int(n, v); }},
      {"verify", [](O& o, N n, const V& v) { o.verify = as_bool(n, v); }},
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
      {"link", [](O& o, N n, const V& v) { o.link = as_mode(n, v, parse_link); }},
      {"debug_copy_delay_ns", [](O& o, N n, const V& v) { o.debug_copy_delay_ns = as_int(n, v); }},
      {"poison_freed", [](O& o, N n, const V& v) { o.poison_freed = as_bool(n, v); }},
      {"reuse_freed", [](O& o, N n, const V& v) { o.reuse_freed = as_bool(n, v); }},
      {"strict", [](O& o, N n, const V& v) { o.strict = as_bool(n, v); }},
  };
  return fields;
}

template <typename Options>
std::vector<std::string> names_of(const std::vector<Field<Options>>& fields) {
  std::vector<std::string> names;
  for (const auto& f : fields) names.emplace_back(f.name);
  return names;
}

template <typename Options>
Options parse(const std::vector<NamedOption>& given, Options options,
              const std::vector<Field<Options>>& fields) {
  std::set<std::string> seen;
  for (const NamedOption& option : given) {
    const Field<Options>* field = nullptr;
    for (const auto& f : fields) {
      if (f.name == option.name) field = &f;
    }
    if (field == nullptr) {
      std::string valid;
      for (const auto& f : fields) valid += (valid.empty() ? "" : ", ") + std::string(f.name);
      throw OptionsError("unknown option '" + option.name + "' (valid: " + valid + ")");
    }
    if (!seen.insert(option.name).second) {
      throw OptionsError(option.name + ": given more than once (give it once)");
    }
    field->set(options, field->name, option.value);
  }
  options.validate();
  return options;
}

}  // namespace

OffloadOptions parse_offload_options(const std::vector<NamedOption>& options,
                                     OffloadOptions defaults) {
  return parse(options, std::move(defaults), offload_fields());
}

LayerOffloadOptions parse_layer_offload_options(const std::vector<NamedOption>& options,
                                                LayerOffloadOptions defaults) {
  return parse(options, std::move(defaults), layer_fields());
}

std::vector<std::string> offload_option_names() { return names_of(offload_fields()); }
std::vector<std::string> layer_offload_option_names() { return names_of(layer_fields()); }

}  // namespace offtune::requests
