// The knob table (offtune/knobs.hpp): one row per knob. A knob's name, flag, help, kind, range,
// axis place and words are written here and nowhere else.
#include "offtune/knobs.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace offtune {

const OffloadOptions& engine_defaults() noexcept {
  static const OffloadOptions defaults{};
  return defaults;
}

namespace {

// A strict decimal number: digits with an optional fraction and exponent ("12.5", "1e+06", as
// link_of writes them), nothing else (no sign, spaces, inf or nan).
bool read_number(std::string_view text, double& out) {
  if (text.empty() || !(text.front() >= '0' && text.front() <= '9')) return false;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), out, std::chars_format::general);
  return ec == std::errc{} && end == text.data() + text.size() && std::isfinite(out);
}

}  // namespace

Link parse_link(std::string_view name) {
  const std::string text(name);
  if (name == "none") return {text, {}};
  if (name == "pcie4") return {text, LinkModel::pcie4()};
  if (name == "pcie5") return {text, LinkModel::pcie5()};
  if (name == "nvlink-c2c") return {text, LinkModel::nvlink_c2c()};
  if (const auto colon = name.find(':'); colon != std::string_view::npos) {
    // A bandwidth must be positive and finite, a latency may be 0; either beyond 10^6 is a typo.
    double gbps = 0, us = 0;
    if (read_number(name.substr(0, colon), gbps) && read_number(name.substr(colon + 1), us) &&
        gbps > 0 && gbps <= 1e6 && us <= 1e6) {
      return {text, LinkModel{gbps, 0.0, static_cast<int64_t>(us * 1000)}};
    }
  }
  throw OptionsError("bad link '" + text +
                     "' (valid: none, pcie4, pcie5, nvlink-c2c, GBPS:LATENCY_US)");
}

Link link_of(const LinkModel& model) {
  if (!model.enabled()) return parse_link("none");  // copies cost only their memcpy
  for (const std::string& name : link_names()) {
    Link link = parse_link(name);
    const LinkModel& m = link.model;
    if (m.pinned_gbps == model.pinned_gbps && m.pageable_gbps == model.pageable_gbps &&
        m.latency_ns == model.latency_ns) {
      return link;
    }
  }
  // parse_link's form keeps bandwidth and latency only (pageable is then half of pinned).
  char text[64];
  std::snprintf(text, sizeof text, "%g:%g", model.pinned_gbps,
                static_cast<double>(model.latency_ns) / 1000.0);
  return {text, model};
}

std::vector<std::string> link_names() { return {"pcie4", "pcie5", "nvlink-c2c", "none"}; }

OffloadOptions options_of(const Knobs& k, OffloadOptions o) {
  o.min_offload_size = k.min_offload_size;
  o.max_fwd_stash_size = k.max_fwd_stash_size;
  o.max_fwd_stash_bytes = k.max_fwd_stash_bytes;
  o.prefetch = k.prefetch;
  o.use_streams = k.use_streams;
  o.use_pin_memory = k.use_pin_memory;
  o.verify = k.verify;
  if (!k.link.name.empty()) o.link = k.link.model;
  o.semantics = k.semantics;
  o.offload = k.offload_set;
  o.tier = k.tier;
  o.alloc_segments = k.alloc_segments;
  return o;
}

Knobs knobs_of(const OffloadOptions& o) {
  Knobs k;
  k.min_offload_size = o.min_offload_size;
  k.max_fwd_stash_size = o.max_fwd_stash_size;
  k.max_fwd_stash_bytes = o.max_fwd_stash_bytes;
  k.prefetch = o.prefetch;
  k.use_streams = o.use_streams;
  k.use_pin_memory = o.use_pin_memory;
  k.verify = o.verify;
  k.link = link_of(o.link);
  k.semantics = o.semantics;
  k.offload_set = o.offload;
  k.tier = o.tier;
  k.alloc_segments = o.alloc_segments;
  return k;
}

std::string plain_text(const KnobValue& value, KnobKind kind) {
  if (const auto* b = std::get_if<bool>(&value)) {
    return kind == KnobKind::Switch ? (*b ? "on" : "off") : (*b ? "true" : "false");
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  return std::get<std::string>(value);
}

namespace {

// The knobs' ranges are the engine's (OffloadOptions::validate()): a lower bound, no upper one, so
// that whatever the engine ran with is recorded and read back (a store holds what ran); prefetch
// alone keeps a typo guard (kMaxPrefetch), as the CLI always had.
constexpr int64_t kNoBound = std::numeric_limits<int64_t>::max();

// "prefetch must be at least 0, got -1": the knob's name first, as every message here.
[[noreturn]] void refuse(std::string_view key, const std::string& what) {
  throw OptionsError(std::string(key) + " " + what);
}

std::string shown(const KnobValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return "'" + std::get<std::string>(v) + "'";
}

// A value of the kind a knob takes, else one OptionsError naming the knob.
bool as_bool(std::string_view key, const KnobValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  refuse(key, "takes on or off (true or false), got " + shown(v));
}
int64_t as_int(std::string_view key, const KnobValue& v, int64_t lo, int64_t hi) {
  const auto* i = std::get_if<int64_t>(&v);
  if (i == nullptr) refuse(key, "takes a whole number, got " + shown(v));
  if (*i < lo || *i > hi) {
    refuse(key, (hi == kNoBound
                     ? "must be at least " + std::to_string(lo)
                     : "must be between " + std::to_string(lo) + " and " + std::to_string(hi)) +
                    ", got " + std::to_string(*i));
  }
  return *i;
}
std::string as_name(std::string_view key, const KnobValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  refuse(key, "takes a name, got " + shown(v));
}
// A Choice's name through its parser, whose message (naming the valid values) becomes the knob's.
template <typename Parse>
auto named(std::string_view key, const KnobValue& v, Parse parse) {
  const std::string name = as_name(key, v);
  try {
    return parse(name);
  } catch (const OptionsError& e) {
    const std::string what = e.what();
    throw OptionsError(what.rfind(std::string(key), 0) == 0 ? what
                                                            : std::string(key) + ": " + what);
  }
}

std::string size_words(int64_t bytes) {
  // The engine's figures are bytes; words use binary units where they divide exactly.
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

int64_t parse_layer_offload(std::string_view text) {
  if (text == "off") return 0;
  if (text == "on") return 1;
  if (text.starts_with("on:")) {
    const std::string_view digits = text.substr(3);
    int64_t depth = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), depth);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
        depth >= 1 && depth <= kMaxLayerOffloadDepth) {
      return depth;
    }
  }
  throw OptionsError("unknown layer offloading '" + std::string(text) +
                     "' (valid: off, or on:DEPTH with DEPTH the blocks copied ahead, 1.." +
                     std::to_string(kMaxLayerOffloadDepth) + "; on is on:1)");
}
std::string layer_offload_text(int64_t depth) {
  return depth == 0 ? "off" : "on:" + std::to_string(depth);
}

// The rows. Lambdas without captures are the function pointers of Knob.
const Knob kKnobs[] = {
    {.key = "offload",
     .help = "offload activations (off: a point that offloads none: the baseline, or "
             "checkpointing or layer offloading alone)",
     .kind = KnobKind::Switch,
     .offload_only = false,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.offload; },
     .set = [](Knobs& k, const KnobValue& v) { k.offload = as_bool("offload", v); },
     .words = [](const Knobs& k) -> std::string { return k.offload ? "offload" : "no offload"; }},
    {.key = "min_offload_size",
     .python = "min_offload_size",
     .flag = "--min-offload-size",
     .help = "tensors smaller than this stay on the device (bytes of the storage span they "
             "occupy); a sweep takes a list or range: 1KiB,1MiB or 1KiB:64MiB:x4",
     .kind = KnobKind::Size,
     .lo = 0,
     .hi = kNoBound,
     .nest = 12,
     .always_axis = true,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.min_offload_size; },
     .set =
         [](Knobs& k, const KnobValue& v) {
           k.min_offload_size = as_int("min_offload_size", v, 0, kNoBound);
         },
     .words = [](const Knobs& k) { return "min_offload_size " + size_words(k.min_offload_size); },
     .examples =
         [] {
           return std::vector<std::string>{"1KiB", "64KiB", "1MiB"};
         },
     .sweep_default = "1KiB:64MiB:x8"},
    {.key = "max_fwd_stash_size",
     .python = "max_fwd_stash_size",
     .flag = "--max-fwd-stash-size",
     .help = "forward window: offloaded tensors still in flight before forward waits for the "
             "oldest (>= 1); a sweep takes a list or range: 1,4 or 1:8",
     .kind = KnobKind::Count,
     .lo = 1,
     .hi = kNoBound,
     .bytes_bound = "max_fwd_stash_bytes",
     .nest = 13,
     .always_axis = true,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.max_fwd_stash_size; },
     .set =
         [](Knobs& k, const KnobValue& v) {
           k.max_fwd_stash_size = as_int("max_fwd_stash_size", v, 1, kNoBound);
         },
     .words = [](const Knobs& k) { return "window " + std::to_string(k.max_fwd_stash_size); },
     .examples =
         [] {
           return std::vector<std::string>{"1", "2", "5"};
         },
     .sweep_default = "1,2,5"},
    {.key = "max_fwd_stash_bytes",
     .python = "max_fwd_stash_bytes",
     .flag = "--max-fwd-stash-bytes",
     .help = "byte bound on the forward window (0: none); a sweep takes a list as an axis: "
             "0,64MiB",
     .kind = KnobKind::Size,
     .lo = 0,
     .hi = kNoBound,
     .nest = 11,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.max_fwd_stash_bytes; },
     .set =
         [](Knobs& k, const KnobValue& v) {
           k.max_fwd_stash_bytes = as_int("max_fwd_stash_bytes", v, 0, kNoBound);
         },
     .words =
         [](const Knobs& k) {
           return k.max_fwd_stash_bytes > 0 ? "window bytes " + size_words(k.max_fwd_stash_bytes)
                                            : std::string("no byte window");
         },
     .examples =
         [] {
           return std::vector<std::string>{"0", "64MiB", "0,64MiB"};
         }},
    {.key = "prefetch",
     .python = "prefetch",
     .flag = "--prefetch",
     .help = "backward reloads ahead of use (0..64); a sweep takes a list as an axis: 0,1,2",
     .kind = KnobKind::Count,
     .lo = 0,
     .hi = kMaxPrefetch,
     .bytes_bound = "max_prefetch_bytes",
     .nest = 6,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.prefetch; },
     .set = [](Knobs& k,
               const KnobValue& v) { k.prefetch = as_int("prefetch", v, 0, kMaxPrefetch); },
     .words = [](const Knobs& k) { return "prefetch " + std::to_string(k.prefetch); },
     .examples =
         [] {
           return std::vector<std::string>{"0", "1", "2", "0,1,2"};
         }},
    {.key = "use_streams",
     .python = "use_streams",
     .flag = "--streams",
     .off_flag = "--no-streams",
     .help = "copies on a side stream (on) or on the compute stream (off: single-stream, "
             "legacy); a sweep takes on,off as an axis",
     .kind = KnobKind::Switch,
     .nest = 8,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.use_streams; },
     .set = [](Knobs& k, const KnobValue& v) { k.use_streams = as_bool("use_streams", v); },
     .words =
         [](const Knobs& k) { return std::string(k.use_streams ? "streams" : "single stream"); },
     .examples =
         [] {
           return std::vector<std::string>{"on", "off", "on,off"};
         }},
    {.key = "use_pin_memory",
     .python = "use_pin_memory",
     .flag = "--pin-memory",
     .off_flag = "--no-pin-memory",
     .help = "pinned (on) or pageable (off) host memory; a sweep takes on,off as an axis",
     .kind = KnobKind::Switch,
     .nest = 9,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.use_pin_memory; },
     .set = [](Knobs& k, const KnobValue& v) { k.use_pin_memory = as_bool("use_pin_memory", v); },
     .words = [](const Knobs& k) { return std::string(k.use_pin_memory ? "pinned" : "pageable"); },
     .examples =
         [] {
           return std::vector<std::string>{"on", "off", "on,off"};
         }},
    {.key = "link",
     .python = "link",
     .flag = "--link",
     .help = "host-sim link model: pcie4, pcie5, nvlink-c2c, none, or GBPS:LATENCY_US (e.g. "
             "12:15); a host-sim sweep takes a list as an axis: pcie4,pcie5",
     .kind = KnobKind::Choice,
     .nest = 7,
     .json_at_default = true,
     .get = [](const Knobs& k) -> KnobValue { return k.link.name; },
     .set =
         [](Knobs& k, const KnobValue& v) {
           const std::string name = as_name("link", v);
           k.link = name.empty() ? Link{} : named("link", v, parse_link);
         },
     .words = [](const Knobs& k) { return "link " + (k.link.name.empty() ? "-" : k.link.name); },
     .examples = [] { return link_names(); },
     .request_default = "pcie4"},
    {.key = "semantics",
     .python = "semantics",
     .flag = "--semantics",
     .help = "whose rules the engine follows: offtune, or trl (the reference's window, no "
             "prefetch, no de-duplication: what TRL's knobs mean); a sweep takes both as an "
             "axis: trl,offtune",
     .kind = KnobKind::Choice,
     .nest = 5,
     .since_schema = 3,
     .get = [](const Knobs& k) -> KnobValue { return std::string(to_string(k.semantics)); },
     .set = [](Knobs& k,
               const KnobValue& v) { k.semantics = named("semantics", v, parse_semantics); },
     .words = [](const Knobs& k) { return std::string(to_string(k.semantics)) + " semantics"; },
     .examples =
         [] {
           return std::vector<std::string>{"offtune", "trl"};
         }},
    {.key = "checkpoint",
     .flag = "--checkpoint",
     .help = "gradient checkpointing of the model's blocks: none, all, or every:K (blocks 0, K, "
             "2K, ...); a sweep takes a list as an axis: none,all,every:2",
     .kind = KnobKind::Choice,
     .nest = 1,
     .offload_only = false,
     .variant = true,
     .since_schema = 4,
     .get = [](const Knobs& k) -> KnobValue { return to_string(k.checkpoint); },
     .set =
         [](Knobs& k, const KnobValue& v) {
           k.checkpoint = named("checkpoint", v, parse_checkpoint_policy);
         },
     .words =
         [](const Knobs& k) {
           return k.checkpoint.enabled() ? "checkpoint " + to_string(k.checkpoint)
                                         : std::string("no checkpointing");
         },
     .examples =
         [] {
           return std::vector<std::string>{"none", "all", "every:2"};
         }},
    {.key = "offload_set",
     .python = "offload",
     .flag = "--offload",
     .help = "what may be offloaded: all (every saved tensor over --min-offload-size), or "
             "boundaries (only checkpointed blocks' inputs: Axolotl's offloaded gradient "
             "checkpointing; with --no-streams its 'legacy'); a sweep takes a list",
     .kind = KnobKind::Choice,
     .nest = 3,
     .variant = true,
     .since_schema = 4,
     .get = [](const Knobs& k) -> KnobValue { return std::string(to_string(k.offload_set)); },
     .set = [](Knobs& k,
               const KnobValue& v) { k.offload_set = named("offload_set", v, parse_offload_set); },
     .words = [](const Knobs& k) { return "offload " + std::string(to_string(k.offload_set)); },
     .examples =
         [] {
           return std::vector<std::string>{"all", "boundaries"};
         }},
    {.key = "tier",
     .python = "tier",
     .flag = "--tier",
     .help = "where offloaded copies live: host (pinned memory), disk, or auto (host, spilling "
             "to disk); a sweep takes a list",
     .kind = KnobKind::Choice,
     .nest = 4,
     .variant = true,
     .since_schema = 4,
     .get = [](const Knobs& k) -> KnobValue { return std::string(to_string(k.tier)); },
     .set = [](Knobs& k, const KnobValue& v) { k.tier = named("tier", v, parse_tier); },
     .words = [](const Knobs& k) { return "tier " + std::string(to_string(k.tier)); },
     .examples =
         [] {
           return std::vector<std::string>{"host", "disk", "auto"};
         }},
    {.key = "layer_offload",
     .flag = "--layer-offload",
     .help = "layer offloading of the blocks' frozen weights (with --lora-rank): off, or "
             "on:DEPTH (blocks copied ahead; Axolotl's layer_offloading streams one: on:1); a "
             "sweep takes a list: off,on:1",
     .kind = KnobKind::Choice,
     .nest = 2,
     .offload_only = false,
     .variant = true,
     .since_schema = 5,
     .get = [](const Knobs& k) -> KnobValue { return layer_offload_text(k.layer_offload); },
     .set =
         [](Knobs& k, const KnobValue& v) {
           k.layer_offload = named("layer_offload", v, parse_layer_offload);
         },
     .words = [](const Knobs& k) { return "layers " + layer_offload_text(k.layer_offload); },
     .examples =
         [] {
           return std::vector<std::string>{"off", "on:1", "on:2"};
         }},
    {.key = "verify",
     .python = "verify",
     .flag = "--verify",
     .help = "check every offloaded copy: a checksum at pack, checked at unpack, in every tier; "
             "a copy that comes back different fails the run naming the tensor (costs a hash of "
             "every offloaded byte, twice: offtune-bench prints how much)",
     .kind = KnobKind::Switch,
     .variant = true,
     .since_schema = 6,
     .get = [](const Knobs& k) -> KnobValue { return k.verify; },
     .set = [](Knobs& k, const KnobValue& v) { k.verify = as_bool("verify", v); },
     .words = [](const Knobs& k) { return std::string(k.verify ? "verify" : "no verify"); }},
    {.key = "alloc_segments",
     .python = "alloc_segments",
     .flag = "--alloc-segments",
     .help =
         "the device allocator's segments (PYTORCH_CUDA_ALLOC_CONF's expandable_segments): "
         "env (as the environment sets it), fixed or expandable; set for the run and put back "
         "after it; host-sim's allocator model follows it; a sweep takes a list: fixed,expandable",
     .kind = KnobKind::Choice,
     .nest = 10,
     .offload_only = false,
     .variant = true,
     .since_schema = 8,
     .get = [](const Knobs& k) -> KnobValue { return std::string(to_string(k.alloc_segments)); },
     .set =
         [](Knobs& k, const KnobValue& v) {
           k.alloc_segments = named("alloc_segments", v, parse_alloc_segments);
         },
     .words = [](const Knobs& k) { return "segments " + std::string(to_string(k.alloc_segments)); },
     .examples =
         [] {
           return std::vector<std::string>{"env", "fixed", "expandable"};
         }},
};

}  // namespace

std::span<const Knob> knob_table() { return kKnobs; }

const Knob& knob(std::string_view key) {
  for (const Knob& k : kKnobs) {
    if (k.key == key) return k;
  }
  std::string valid;
  for (const Knob& k : kKnobs) valid += (valid.empty() ? "" : ", ") + std::string(k.key);
  throw OptionsError("unknown knob '" + std::string(key) + "' (valid: " + valid + ")");
}

const Knob* knob_by_python_name(std::string_view name) {
  for (const Knob& k : kKnobs) {
    if (!k.python.empty() && k.python == name) return &k;
  }
  return nullptr;
}

KnobValue default_value(const Knob& knob) {
  static const Knobs defaults;
  return knob.get(defaults);
}

std::vector<const Knob*> axis_knobs() {
  std::vector<const Knob*> out;
  for (const Knob& k : kKnobs) {
    if (k.nest > 0) out.push_back(&k);
  }
  std::sort(out.begin(), out.end(), [](const Knob* a, const Knob* b) { return a->nest < b->nest; });
  return out;
}

}  // namespace offtune
