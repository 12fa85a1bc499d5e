// Flags, thresholds and tables shared by the commands.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli.hpp"
#include "offtune/profiler/knob_text.hpp"
#include "offtune/profiler/units.hpp"
#include "offtune/requests/request.hpp"

namespace offtune::cli {

std::atomic<bool> g_cancel{false};

StoreCommand::StoreCommand(CLI::App& parent, const std::string& name,
                           const std::string& description, StoreUse use) {
  app_ = parent.add_subcommand(name, description);
  app_->add_option("--db", common_.db,
                   use == StoreUse::Writes ? "SQLite store (created if absent)"
                                           : "SQLite store to read (must exist)")
      ->required();
  app_->add_flag("--quiet,-q", common_.quiet, "no progress or text output");
  app_->add_flag("--json", common_.json, "print the result as JSON");
}

namespace {

CLI::Validator text_rule(void (*parse)(std::string_view), const char* name) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
          return {};
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "", name);
}

}  // namespace

void add_value_rules(CLI::App& app) {
  static const CLI::Validator kInt =
      text_rule([](std::string_view t) { pf::parse_int64(t); }, "INT64");
  static const CLI::Validator kUint =
      text_rule([](std::string_view t) { pf::parse_uint64(t); }, "UINT64");
  static const CLI::Validator kText = text_rule(
      [](std::string_view t) {
        if (t.empty()) throw std::invalid_argument("an empty value is not a value");
      },
      "NONEMPTY");
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // a flag
    const std::string type = opt->get_type_name();
    if (type == "INT") {
      opt->check(kInt);
    } else if (type == "UINT") {
      opt->check(kUint);
    } else {
      opt->check(kText);
    }
  }
  for (CLI::App* sub : app.get_subcommands({})) add_value_rules(*sub);
}

bool show_progress(const Common& c) { return !c.quiet && isatty(STDERR_FILENO); }

std::unique_ptr<pf::Store> open_store(const Common& c, bool write) {
  if (c.db.empty()) throw UsageError("--db is required");
  return write ? pf::open_sqlite_store(c.db) : pf::open_sqlite_store_readonly(c.db);
}

void add_workload_flags(CLI::App& app, requests::WorkloadFields& w, requests::BackendFields& b) {
  app.add_option(
         "--model", w.model,
         "tiny, small, 1b (Llama-like), gpt-tiny, gpt-small, mlp, or a TorchScript file (.pt)")
      ->capture_default_str();
  app.add_option("--batch", w.batch, "sequences per batch")->capture_default_str();
  app.add_option("--seq", w.seq, "tokens per sequence")->capture_default_str();
  app.add_option("--dtype", w.dtype, "fp32, bf16 or fp16")->capture_default_str();
  app.add_option("--seed", w.seed, "seed of the model and the batches")->capture_default_str();
  app.add_option("--steps", w.steps, "measured steps per run")->capture_default_str();
  app.add_option("--warmup", w.warmup, "unmeasured steps before them")->capture_default_str();
  app.add_flag("--optimizer", w.optimizer, "include an SGD optimizer step in each step");
  app.add_option("--backend", b.backend, "auto, cuda or host-sim")->capture_default_str();
  app.add_option("--device-model", b.device_model,
                 "host-sim: time each step as this GPU would (h100-sxm, h200, a100-80gb, l4, "
                 "rtx4090, or a JSON file; docs/device-model.md), deterministic; default: as this "
                 "CPU does");
  app.add_option("--device-capacity", b.device_capacity,
                 "host-sim device memory size, e.g. 2GiB (allocations beyond it are out of "
                 "memory); default unlimited");
  app.add_option("--threads", b.threads,
                 "intra-op threads: auto (cores-1 on host-sim) or 1.." +
                     std::to_string(requests::max_threads()) + " (this machine's cores)")
      ->capture_default_str();
  app.add_option("--collector", b.collector,
                 "cuda device activity: auto (CUPTI if available), cupti, nvtx-only (under nsys)")
      ->capture_default_str();
  app.add_option("--input-spec", w.input_spec,
                 "input of a --model PATH.pt TorchScript model: NAME:int64[B,T]:vocab=V (token "
                 "ids) or NAME:float32[B,N] with N a number, e.g. x:float32[B,64] (dense)")
      ->capture_default_str();
  app.add_option("--lora-rank", w.lora_rank,
                 "built-in decoders: LoRA adapters of this rank on every projection, the base "
                 "frozen (what --layer-offload moves); 0 = full fine-tuning")
      ->capture_default_str();
  app.add_option("--blocks", w.blocks,
                 "TorchScript models: the module path of the blocks --checkpoint runs as regions "
                 "(e.g. model.layers); default: found in the model");
}

void add_knob_flags(CLI::App& app, requests::KnobTexts& knobs, bool sweep) {
  for (const Knob& k : knob_table()) {
    if (k.flag.empty()) continue;
    const std::string key(k.key), flag(k.flag);
    if (k.plain_flag()) {
      app.add_flag_callback(
          flag, [&knobs, key] { knobs[key] = "on"; }, pf::knob_help(k, sweep));
      continue;
    }
    // The request holds the text only when the flag is given: the defaults stay the table's.
    auto* option = app.add_option_function<std::string>(
                          flag, [&knobs, key](const std::string& text) { knobs[key] = text; },
                          pf::knob_help(k, sweep))
                       ->default_str(profiler::default_text(k, sweep));
    option->type_name("TEXT");
    // --no-streams is --streams off, as it always was; given with the value form, one would
    // silently override the other: refused.
    if (!k.off_flag.empty()) {
      app.add_flag_callback(
             std::string(k.off_flag), [&knobs, key] { knobs[key] = "off"; },
             "the same as " + flag + " off")
          ->excludes(option);
    }
  }
}

std::vector<Threshold> parse_thresholds(const std::vector<std::string>& specs,
                                        bool allow_slowdown) {
  const std::string forms = allow_slowdown
                                ? "peak>SIZE (allocated), reserved>SIZE, total>SIZE (device), "
                                  "step-ms>MS or slowdown>F"
                                : "peak>SIZE (allocated), reserved>SIZE, total>SIZE (device) or "
                                  "step-ms>MS";
  std::vector<Threshold> out;
  for (const auto& s : specs) {
    const auto gt = s.find('>');
    if (gt == std::string::npos)
      throw UsageError("bad --fail-if '" + s + "' (form: " + forms + ")");
    Threshold t;
    t.metric = s.substr(0, gt);
    const std::string v = s.substr(gt + 1);
    const std::string flag = "--fail-if " + t.metric;
    try {
      if (t.metric == "peak" || t.metric == "reserved" || t.metric == "total") {
        t.value = static_cast<double>(requests::parse_memory_budget(flag, v));
      } else if (t.metric == "step-ms" || (t.metric == "slowdown" && allow_slowdown)) {
        t.value = requests::parse_positive(flag, v);
      } else if (t.metric == "slowdown") {
        throw UsageError(
            "--fail-if slowdown needs a baseline to compare with: use it with offtune sweep");
      } else {
        throw UsageError("unknown --fail-if metric '" + t.metric + "' (valid: " + forms + ")");
      }
    } catch (const UsageError&) {
      throw;
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> check_thresholds(const std::vector<Threshold>& ts, const pf::RunSummary& s,
                                          double slowdown) {
  std::vector<std::string> crossed;
  for (const auto& t : ts) {
    double actual = 0;
    if (t.metric == "peak") actual = static_cast<double>(s.peak_allocated);
    if (t.metric == "reserved") actual = static_cast<double>(s.peak_reserved);
    if (t.metric == "total") actual = static_cast<double>(pf::peak_device_total(s));
    if (t.metric == "step-ms") actual = s.step_ms_median;
    if (t.metric == "slowdown") actual = slowdown;
    // A figure that cannot be had (a slowdown without a baseline) fails the gate: it was not met.
    if (std::isnan(actual)) {
      crossed.push_back(t.metric + " cannot be checked: no baseline (no-offload point) finished");
    } else if (actual > t.value) {
      const auto say = [&](double v) -> std::string {
        if (t.metric == "peak" || t.metric == "reserved" || t.metric == "total") {
          return pf::format_size(static_cast<int64_t>(v));
        }
        char text[64];
        std::snprintf(text, sizeof text, t.metric == "step-ms" ? "%.3f ms" : "x%.3f", v);
        return text;
      };
      crossed.push_back(t.metric + " " + say(actual) + " > " + say(t.value));
    }
  }
  return crossed;
}

std::optional<pf::SweepRecord> pick_sweep(pf::Store& store, int64_t id) {
  if (id >= 0) return store.sweep(pf::SweepId(id));
  auto all = store.sweeps();
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::string join_indices(std::vector<int64_t> indices) {
  std::sort(indices.begin(), indices.end());
  std::string out;
  for (int64_t i : indices) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out;
}

std::vector<std::string> variant_texts(const std::vector<pf::PointRecord>& points) {
  // The knobs describe_variant leaves out (a run's plain settings) that the sweep's offload points
  // differ by, but those the table has columns for: the grid's pair, and semantics (its rules
  // column).
  std::vector<const Knob*> varied;
  for (const Knob& k : knob_table()) {
    if (k.variant || k.always_axis || !k.offload_only || k.key == "semantics") continue;
    const pf::PointRecord* first = nullptr;
    for (const auto& p : points) {
      if (!p.config.offload) continue;
      if (first == nullptr) {
        first = &p;
      } else if (k.get(p.config) != k.get(first->config)) {
        varied.push_back(&k);
        break;
      }
    }
  }
  std::vector<std::string> out;
  for (const auto& p : points) {
    std::string text = pf::describe_variant(p.config);
    if (p.config.offload) {
      for (const Knob* k : varied) {
        text += (text.empty() ? "" : ", ") + pf::varied_words(*k, p.config);
      }
    }
    out.push_back(std::move(text));
  }
  return out;
}

void print_points(const std::vector<pf::PointRecord>& points) {
  // The step time with its interval (records.hpp: step_interval), and the peak in exact bytes
  // beside the rounded size: two peaks that round alike may still differ.
  // Whose rules a point was measured under, when a sweep has other than offtune's.
  const bool rules = std::any_of(points.begin(), points.end(), [](const pf::PointRecord& p) {
    return p.config.offload && p.config.semantics != Semantics::Offtune;
  });
  // The engine variant (checkpointing, what is offloaded, the tier, and the knobs the sweep
  // varies besides), when a sweep has any.
  const std::vector<std::string> variants = variant_texts(points);
  size_t variant_width = 0;
  for (const auto& v : variants) variant_width = std::max(variant_width, v.size());
  if (variant_width > 0) variant_width = std::max<size_t>(variant_width, 7);
  const auto variant = [&](const std::string& text) {
    if (variant_width == 0) return std::string();
    return " " + text + std::string(variant_width - std::min(variant_width, text.size()), ' ');
  };
  // Peak allocated (with its exact bytes, for ties) and peak reserved: what a GPU runs out of.
  std::printf("%5s %-8s %-8s%s%s %14s %7s %10s %-21s %14s %12s %13s %13s\n", "index", "status",
              "offload", rules ? " rules  " : "", variant("variant").c_str(), "min_offload",
              "window", "step ms", "interval (level)", "peak allocated", "bytes", "peak reserved",
              "hidden copy %");
  for (size_t i = 0; i < points.size(); ++i) {
    const pf::PointRecord& p = points[i];
    const pf::StepInterval ci = pf::step_interval(p.summary);
    char interval[64];
    if (ci.level > 0 && ci.low == ci.high && ci.low == p.summary.step_ms_median) {
      // Every step took the same time: a device model timed it (host_sim::set_device_model).
      std::snprintf(interval, sizeof interval, "exact (modelled)");
    } else if (ci.level == 0 && ci.low == ci.high) {
      // One measured step (or one value): no spread to show, and none to trust.
      std::snprintf(interval, sizeof interval, "none (one step)");
    } else {
      std::snprintf(interval, sizeof interval, "%.2f..%.2f (%s)", ci.low, ci.high,
                    ci.level > 0
                        ? (std::to_string(static_cast<int>(ci.level * 100 + 0.5)) + "%").c_str()
                        : "min..max");
    }
    const bool measured = p.status == pf::PointStatus::Ok;
    char rule[16] = "";
    if (rules) {
      std::snprintf(rule, sizeof rule, " %-7s",
                    p.config.offload ? std::string(to_string(p.config.semantics)).c_str() : "-");
    }
    // A point that copied nothing has no overlap to speak of: n/a, not 0 % (the worst).
    char hidden[16] = "n/a";
    if (pf::copied_anything(p.config, p.summary)) {
      std::snprintf(hidden, sizeof hidden, "%.1f", p.summary.hidden_copy_pct);
    }
    // A point that did not finish (out of memory, failed, pending) has no figures: "-", not 0.
    std::string step_ms = "-", peak = "-", bytes = "-", reserved = "-";
    if (measured) {
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", p.summary.step_ms_median);
      step_ms = text;
      peak = pf::format_size(p.summary.peak_allocated);
      bytes = std::to_string(p.summary.peak_allocated);
      reserved = pf::format_size(p.summary.peak_reserved);
    } else {
      std::snprintf(hidden, sizeof hidden, "-");
    }
    const std::string& v = variants[i];
    std::printf("%5lld %-8s %-8s%s%s %14s %7lld %10s %-21s %14s %12s %13s %13s%s%s\n",
                static_cast<long long>(p.index), pf::to_string(p.status),
                p.config.offload ? "yes" : "no", rule, variant(v.empty() ? "-" : v).c_str(),
                p.config.offload ? pf::format_size(p.config.min_offload_size).c_str() : "-",
                static_cast<long long>(p.config.offload ? p.config.max_fwd_stash_size : 0),
                step_ms.c_str(), measured ? interval : "-", peak.c_str(), bytes.c_str(),
                reserved.c_str(), hidden, p.error.empty() ? "" : "  ", p.error.c_str());
  }
}

}  // namespace offtune::cli
