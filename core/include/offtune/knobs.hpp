// The engine's knobs, each defined once: a typed field of Knobs (the settings of one run or sweep
// point) and one row of knob_table() that says everything else about it: its name in JSON, in the
// store, in CSV and in a sweep's grid (key), its keyword in Python and in OFFTUNE_POINT, its CLI
// flag and help, how its text is read (kind), whether a sweep takes a list of it (an axis), the
// store schema that added its column, and how a point's description names its value.
//
// Every front end, the request layer, the grid, the store, the JSON and CSV writers and the
// snippets iterate the table; none of them names a knob. Adding a knob is a field of Knobs (its
// default from OffloadOptions when the engine has it), one row in knobs.cpp, and the engine's use
// of it; docs/architecture.md, "Adding a knob", says what else (a store schema step).
//
// Texts are read once, at the edge (profiler/knob_text.hpp reads the CLI's "64KiB", lists and
// ranges into KnobValues; Python's keywords arrive as KnobValues), and set() turns a KnobValue
// into the typed field, refusing a value of the wrong kind or out of range with one OptionsError
// naming the knob. Nothing after that parses a mode again.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "offtune/checkpoint_policy.hpp"
#include "offtune/options.hpp"

namespace offtune {

// The engine's defaults, the one place they are written (OffloadOptions' initializers).
const OffloadOptions& engine_defaults() noexcept;

// A host-sim link model and the name it was given by: "pcie4", "pcie5", "nvlink-c2c", "none" or
// "GBPS:LATENCY_US" (e.g. "12:15"). An empty name is "the backend's own link" (a run that does not
// record one); two links are the same when their names are.
struct Link {
  std::string name;
  LinkModel model;
  bool operator==(const Link& other) const { return name == other.name; }
};
// The link a name stands for; throws OptionsError naming the valid forms.
Link parse_link(std::string_view name);
// A model's link by name: one of link_names() when it is one (a disabled model is "none"), else
// "GBPS:LATENCY_US" (what parse_link reads back, pageable then half of pinned).
Link link_of(const LinkModel& model);
// The named links a front end offers (first the default).
std::vector<std::string> link_names();

// The most blocks layer offloading may copy ahead (a model has fewer; more is a typo).
inline constexpr int64_t kMaxLayerOffloadDepth = 64;
// The deepest backward prefetch a run may ask for.
inline constexpr int64_t kMaxPrefetch = 64;

// The settings of one run or sweep point, typed. offload = false is a point that offloads no
// activation: the baseline, or checkpointing or layer offloading alone.
struct Knobs {
  bool offload = true;
  int64_t min_offload_size = engine_defaults().min_offload_size;
  int64_t max_fwd_stash_size = engine_defaults().max_fwd_stash_size;
  int64_t max_fwd_stash_bytes = engine_defaults().max_fwd_stash_bytes;
  int64_t prefetch = engine_defaults().prefetch;
  bool use_streams = engine_defaults().use_streams;
  bool use_pin_memory = engine_defaults().use_pin_memory;
  bool verify = engine_defaults().verify;
  Link link;  // host-sim's link model; empty name: the backend's own
  Semantics semantics = engine_defaults().semantics;
  CheckpointPolicy checkpoint;  // gradient checkpointing of the model's blocks
  OffloadSet offload_set = engine_defaults().offload;
  Tier tier = engine_defaults().tier;
  AllocSegments alloc_segments = engine_defaults().alloc_segments;
  int64_t layer_offload = 0;  // layer offloading of frozen weights: blocks copied ahead; 0 = off

  friend bool operator==(const Knobs&, const Knobs&) = default;
};

// The engine's options for a point: `base` (the options a run or sweep shares: backend, disk,
// debug settings) with every knob the engine has taken from `knobs`. The link only when `knobs`
// names one.
OffloadOptions options_of(const Knobs& knobs, OffloadOptions base = {});
// The knobs the engine's options set (offload on, no checkpointing, no layer offloading; the link
// by link_of).
Knobs knobs_of(const OffloadOptions& options);

// Plain training, what slowdowns are measured against: no offloading (of activations or weights)
// and no checkpointing.
inline bool is_baseline(const Knobs& k) {
  return !k.offload && !k.checkpoint.enabled() && k.layer_offload == 0;
}

// --- The table ----------------------------------------------------------------------------------

// How a knob's value is written as text (the CLI, a form) and carried (JSON, the store, Python).
enum class KnobKind : uint8_t {
  Switch,  // on/off as text, true/false in JSON and Python, 0/1 in the store
  Count,   // a whole number of things (tensors, blocks)
  Size,    // bytes; text takes "64KiB"
  Choice,  // one of a list of names (modes, policies, links); text everywhere
};
// A value as JSON, the store and Python carry it: a Switch's bool, a Count's or a Size's number, a
// Choice's name.
using KnobValue = std::variant<bool, int64_t, std::string>;

struct Knob {
  // JSON key, store column, CSV column and grid axis name ("min_offload_size").
  std::string_view key;
  // Keyword of offtune.Offloader and name in OFFTUNE_POINT; empty: not an Offloader keyword.
  std::string_view python;
  // The CLI flag ("--min-offload-size"), and for a Switch that is an axis its "off" flag
  // ("--no-streams") or empty.
  std::string_view flag;
  std::string_view off_flag;
  // One line for --help and the form's tooltip.
  std::string_view help;
  KnobKind kind;
  // Counts and sizes: the valid range; a count's bound in bytes beside it (a size given to the
  // count most likely meant that one), if any.
  int64_t lo = 0, hi = 0;
  std::string_view bytes_bound;
  // A sweep takes a list of it: its place among the grid's axes, outer first (1 the outermost);
  // 0: one value per sweep.
  int nest = 0;
  // The grid's pair (min_offload_size x max_fwd_stash_size): a sweep always crosses it, whatever
  // its length, and the grid's JSON always lists it.
  bool always_axis = false;
  // Its value means nothing at a point that offloads no activation (the point shows "-").
  bool offload_only = true;
  // Named in a point's variant whenever it differs from its default ("checkpoint all"); else only
  // where the points of a sweep differ by it ("prefetch 2").
  bool variant = false;
  // The store schema that added its column (1: the first), and whether the JSON of a config writes
  // it at its default value (keys added later do not: the JSON of older configs, and so the key of
  // a sweep recorded before they existed, stays the same).
  int since_schema = 1;
  bool json_at_default = false;
  // Its value in a config, and into one; set() throws OptionsError (naming key) for a value of
  // another kind, out of range, or an unknown name.
  KnobValue (*get)(const Knobs&) = nullptr;
  void (*set)(Knobs&, const KnobValue&) = nullptr;
  // Its value in words, as a point's description names it: "prefetch 2", "pageable", "tier disk".
  std::string (*words)(const Knobs&) = nullptr;
  // Choice: the valid names, the canonical one of each (a form's list); others: example values.
  std::vector<std::string> (*examples)() = nullptr;
  // What a request holds until the user gives a value, when it is not the default value's text
  // (the link a front end assumes: pcie4); and a sweep's default list when it differs from a
  // run's one value (the grid pair's). Empty: the default value's text.
  std::string_view request_default;
  std::string_view sweep_default;
  // Whether a Switch is given as a plain flag (--verify) rather than on/off.
  bool plain_flag() const { return kind == KnobKind::Switch && nest == 0; }
};

// Every knob, in the order a person reads them (a point's figures, CSV columns, --help).
std::span<const Knob> knob_table();
// The row of `key`; throws OptionsError listing the keys for an unknown one.
const Knob& knob(std::string_view key);
// The row whose Python keyword is `name`, or null.
const Knob* knob_by_python_name(std::string_view name);
// A knob's default value (its value in Knobs{}).
KnobValue default_value(const Knob& knob);
// A value's canonical text: on/off, the number, the name. Sizes in bytes ("65536").
std::string plain_text(const KnobValue& value, KnobKind kind);
// The knobs a sweep takes as axes, outermost first.
std::vector<const Knob*> axis_knobs();

}  // namespace offtune
