// offtune-bench: what activation offloading costs and what it saves, in figures.
//
//   1. hooks: a forward+backward of a chain of cheap elementwise ops (each saves its input),
//      without an offload scope, under a scope that offloads nothing (the saved-tensor hooks alone)
//      and under one that offloads every tensor (the engine's per-tensor cost). Reported as ns per
//      saved tensor over the plain-autograd baseline, with the spread over repetitions; on
//      host-sim also the floor of no-op Python saved_tensors_hooks on the same chain
//      (bench/python_floor.py, run with --python) and the ratios the engine aims at.
//   2. decoder: forward, loss, backward and zeroing grads of the sample Llama at two sizes,
//      without offloading and with it (on host-sim also with a PCIe 4.0 link model): step time,
//      peak device memory, bytes offloaded and forward-window waits per step.
//   3. store: the profiler store's insert rate (timeline events, steps, occupancy samples) in
//      rows/s, SQLite and in-memory, in batches of --batch-events rows (one transaction each), and
//      the SQLite file's bytes per row.
//   4. export: one run of --events timeline events from an SQLite store exported to Chrome Trace
//      JSON and to the Nsight Systems SQLite layout: seconds, MB written, events/s.
//   5. sweep: wall time of the default `offtune sweep` of scripts/run.sh (tiny model, batch 8,
//      seq 128, 5 steps after 1 warmup, 4 x 3 grid and the baseline) on host-sim with the PCIe 4.0
//      link model, into a temporary SQLite store: total seconds, points, seconds per point.
//
// Sections 1-2 run on host-sim by default (no GPU needed); --backend cuda|auto runs them on a GPU.
// Sections 3-5 always run on the host (the sweep on host-sim); their files go to a temporary
// directory (--tmp-dir) that is removed at the end. It prints aligned tables, or one JSON object
// with --json. It measures; it asserts nothing about speed.
//
// Exit status: 0 done; 1 an error (printed as `error: ...`); 2 bad command line.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randn.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "offtune/model_support.hpp"
#include "offtune/offloader.hpp"
#include "offtune/options.hpp"
#include "offtune/samples/cli_validators.hpp"
#include "offtune/samples/llama.hpp"
#include "offtune/samples/workload.hpp"
#include "profiler_bench.hpp"

namespace {

namespace samples = offtune::samples;
using offtune::bench::Clock;
using offtune::bench::fixed;
using offtune::bench::json;
using offtune::bench::kMiB;
using offtune::bench::kNaN;
using offtune::bench::median;
using offtune::bench::ms_since;
using offtune::bench::number_or_null;
using offtune::bench::Table;

// ---- command line ------------------------------------------------------------------------------

struct SizeSpec {
  std::string preset;
  int64_t batch = 0;
  int64_t seq = 0;
  std::string label() const {
    return preset + " " + std::to_string(batch) + "x" + std::to_string(seq);
  }
};

struct Args {
  std::string backend = "host-sim";
  std::string section = "all";
  bool quick = false;
  bool json = false;
  int64_t threads = -1;  // intra-op threads; -1: see resolve_threads(), 0: torch's default
  // Section 1.
  int64_t chain = 2000;
  int64_t tensor_bytes = 4096;
  int64_t repetitions = 15;
  std::string hook_mode = "all";  // or one mode alone, for a profiler (perf stat/record)
  // The Python floor: a Python with torch, and the script that measures no-op saved_tensors_hooks.
  std::string python = OFFTUNE_BENCH_PYTHON;
  std::string python_floor_script = OFFTUNE_BENCH_PYTHON_FLOOR;
  // Section 2.
  std::vector<std::string> sizes = {"tiny:4:128", "small:2:256"};
  std::string dtype = "fp32";
  int64_t steps = 5;
  int64_t warmup = 1;
  uint64_t seed = 42;
  // Engine options (engine defaults).
  int64_t min_offload_size = 1024;
  int64_t max_fwd_stash_size = 5;
  int64_t prefetch = 1;
  // Sections 3-5 (the profiler).
  offtune::bench::ProfilerArgs profiler;
  std::string tmp_dir;  // empty: the system's temporary directory
};

using offtune::samples::at_least;

int64_t parse_positive(std::string_view text, std::string_view what, std::string_view spec) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || value < 1) {
    throw std::invalid_argument("--size '" + std::string(spec) + "': " + std::string(what) +
                                " must be a positive integer, got '" + std::string(text) + "'");
  }
  return value;
}

// "preset:batch:seq", e.g. "small:2:256".
SizeSpec parse_size(const std::string& spec) {
  const size_t a = spec.find(':');
  const size_t b = a == std::string::npos ? std::string::npos : spec.find(':', a + 1);
  if (a == std::string::npos || b == std::string::npos ||
      spec.find(':', b + 1) != std::string::npos) {
    throw std::invalid_argument("--size '" + spec +
                                "': expected PRESET:BATCH:SEQ (e.g. small:2:256)");
  }
  SizeSpec size;
  size.preset = spec.substr(0, a);
  const std::string_view view(spec);
  size.batch = parse_positive(view.substr(a + 1, b - a - 1), "batch", spec);
  size.seq = parse_positive(view.substr(b + 1), "seq", spec);
  const samples::LlamaConfig config =
      samples::LlamaConfig::preset(size.preset);  // names valid ones
  if (size.seq > config.max_seq_len) {
    throw std::invalid_argument("--size '" + spec + "': seq exceeds the max_seq_len " +
                                std::to_string(config.max_seq_len) + " of preset " + size.preset);
  }
  return size;
}

// ---- helpers -----------------------------------------------------------------------------------

struct Env {
  offtune::BackendKind backend = offtune::BackendKind::HostSim;
  c10::Device device{c10::kCPU};
  offtune::OffloadOptions options;  // the engine options every offloader here starts from

  bool cuda() const { return device.is_cuda(); }
  // Waits for compute (cuda) and for the offloader's copies, so that a timing covers both.
  void sync(offtune::ActivationOffloader* offloader) const {
    if (cuda()) torch::cuda::synchronize();
    if (offloader != nullptr) offloader->synchronize();
  }
};

// ---- section 1: hook overhead ------------------------------------------------------------------

struct HookMode {
  std::string name;
  double median_pass_ms = kNaN;
  double saved_per_pass = kNaN;  // from the offloader's stats (no offloader: not counted)
  double offloaded_per_pass = kNaN;
  double window_waits_per_pass = kNaN;
  double ns_per_saved_tensor = kNaN;    // median over repetitions of (pass - baseline pass) / saved
  double ns_min = kNaN, ns_max = kNaN;  // the spread of that figure over the repetitions
  // (fastest pass - fastest baseline pass) / saved: noise only ever adds time, so the fastest
  // passes are the least disturbed ones.
  double ns_best = kNaN;
  bool resting = true;  // engine back at rest after every pass
};

// No-op Python saved_tensors_hooks on the same chain (bench/python_floor.py).
struct PythonFloor {
  bool measured = false;
  std::string why_not;  // when not measured
  std::string torch_version;
  double ns_per_saved_tensor = kNaN, ns_min = kNaN, ns_max = kNaN, ns_best = kNaN;
};

struct HookResult {
  int64_t chain = 0;
  int64_t tensor_bytes = 0;
  int64_t repetitions = 0;
  std::vector<HookMode> modes;  // baseline, hooks only, all offloaded
  PythonFloor python;
};

// Runs bench/python_floor.py with the Python that has torch; parses its one JSON line.
PythonFloor measure_python_floor(const Args& args) {
  PythonFloor floor;
  if (args.python.empty() || args.python_floor_script.empty()) {
    floor.why_not = "no Python with torch configured (--python)";
    return floor;
  }
  const std::string command =
      fmt::format("'{}' '{}' --chain {} --tensor-bytes {} --repetitions {} 2>&1", args.python,
                  args.python_floor_script, args.chain, args.tensor_bytes, args.repetitions);
  std::string output;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    if (::pclose(pipe) != 0) {
      floor.why_not = "the Python floor script failed: " + output.substr(0, 200);
      return floor;
    }
  } else {
    floor.why_not = "could not run " + args.python;
    return floor;
  }
  try {
    const json j = json::parse(output.substr(output.rfind('{')));
    floor.torch_version = j.at("torch").get<std::string>();
    floor.ns_per_saved_tensor = j.at("ns_per_saved_tensor").get<double>();
    floor.ns_min = j.at("ns_per_saved_tensor_min").get<double>();
    floor.ns_max = j.at("ns_per_saved_tensor_max").get<double>();
    floor.ns_best = j.at("ns_per_saved_tensor_best").get<double>();
    floor.measured = true;
  } catch (const std::exception& e) {
    floor.why_not = std::string("unreadable output from the Python floor script: ") + e.what();
  }
  return floor;
}

// One forward+backward of `chain` x sin on x, under the offloader's scope when one is given.
// Returns milliseconds, copies and compute included.
double chain_pass(at::Tensor& x, int64_t chain, offtune::ActivationOffloader* offloader,
                  const Env& env) {
  env.sync(offloader);
  const auto start = Clock::now();
  {
    at::Tensor y = x;
    {
      std::optional<offtune::OffloadScope> scope;
      if (offloader != nullptr) scope.emplace(offloader->scope());
      for (int64_t i = 0; i < chain; ++i) y = y.sin();  // each sin saves its input
    }
    y.sum().backward();
  }
  env.sync(offloader);
  const double ms = ms_since(start);
  x.mutable_grad() = at::Tensor();  // no accumulation across passes
  return ms;
}

HookResult bench_hooks(const Args& args, const Env& env) {
  HookResult result;
  const int64_t numel = std::max<int64_t>(1, args.tensor_bytes / 4);  // float32
  result.chain = args.chain;
  result.tensor_bytes = numel * 4;
  result.repetitions = args.repetitions;

  at::Tensor x = at::randn({numel}, at::TensorOptions().dtype(c10::kFloat).device(env.device))
                     .requires_grad_();

  offtune::OffloadOptions hook_only = env.options;
  hook_only.min_offload_size = std::numeric_limits<int64_t>::max();
  offtune::OffloadOptions offload_all = env.options;
  offload_all.min_offload_size = 0;
  offtune::ActivationOffloader hook_offloader(hook_only);
  offtune::ActivationOffloader all_offloader(offload_all);

  struct Mode {
    std::string name;
    offtune::ActivationOffloader* offloader;
    std::vector<double> ms;
    std::vector<double> saved, offloaded, waits;
    bool resting = true;
  };
  std::vector<Mode> modes;
  if (args.hook_mode == "all" || args.hook_mode == "baseline") {
    modes.push_back({"no scope (baseline)", nullptr, {}, {}, {}, {}, true});
  }
  if (args.hook_mode == "all" || args.hook_mode == "nothing") {
    modes.push_back({"scope, nothing offloaded", &hook_offloader, {}, {}, {}, {}, true});
  }
  if (args.hook_mode == "all" || args.hook_mode == "everything") {
    modes.push_back({"scope, all offloaded", &all_offloader, {}, {}, {}, {}, true});
  }

  // One unmeasured pass each (allocator, thread pools, host pool slabs), then interleaved
  // repetitions, so that drift in machine speed hits every mode alike.
  for (Mode& mode : modes) chain_pass(x, args.chain, mode.offloader, env);
  for (int64_t rep = 0; rep < args.repetitions; ++rep) {
    for (Mode& mode : modes) {
      offtune::OffloadStats before;
      if (mode.offloader != nullptr) before = mode.offloader->stats();
      mode.ms.push_back(chain_pass(x, args.chain, mode.offloader, env));
      if (mode.offloader != nullptr) {
        const offtune::OffloadStats after = mode.offloader->stats();
        mode.saved.push_back(static_cast<double>(after.packed - before.packed));
        mode.offloaded.push_back(static_cast<double>(after.offloaded - before.offloaded));
        mode.waits.push_back(static_cast<double>(after.window_waits - before.window_waits));
        mode.resting = mode.resting && mode.offloader->resident().resting();
      }
    }
  }

  const Mode& base = modes.front();
  const bool has_baseline = base.offloader == nullptr;
  for (const Mode& mode : modes) {
    HookMode out;
    out.name = mode.name;
    out.median_pass_ms = median(mode.ms);
    out.resting = mode.resting;
    if (mode.offloader != nullptr) {
      out.saved_per_pass = median(mode.saved);
      out.offloaded_per_pass = median(mode.offloaded);
      out.window_waits_per_pass = median(mode.waits);
      std::vector<double> per_tensor;
      for (size_t i = 0; has_baseline && i < mode.ms.size(); ++i) {
        if (mode.saved[i] > 0)
          per_tensor.push_back((mode.ms[i] - base.ms[i]) * 1e6 / mode.saved[i]);
      }
      out.ns_per_saved_tensor = median(per_tensor);
      if (!per_tensor.empty()) {
        out.ns_min = *std::min_element(per_tensor.begin(), per_tensor.end());
        out.ns_max = *std::max_element(per_tensor.begin(), per_tensor.end());
        out.ns_best = (*std::min_element(mode.ms.begin(), mode.ms.end()) -
                       *std::min_element(base.ms.begin(), base.ms.end())) *
                      1e6 / median(mode.saved);
      }
    }
    result.modes.push_back(out);
  }
  if (env.backend == offtune::BackendKind::HostSim && args.hook_mode == "all") {
    result.python = measure_python_floor(args);
  }
  return result;
}

void print_hooks(const HookResult& r) {
  fmt::print("== Hook overhead per saved tensor ==\n");
  fmt::print(
      "chain of {} x sin on {} B float32 tensors ({} elements), forward+backward, "
      "{} repetitions (median), link model: none\n",
      r.chain, r.tensor_bytes, r.tensor_bytes / 4, r.repetitions);
  Table table({"mode", "pass ms", "saved/pass", "offloaded/pass", "window waits/pass",
               "ns/saved tensor vs baseline", "min..max", "best passes"},
              1);
  for (const HookMode& m : r.modes) {
    const bool has = std::isfinite(m.ns_per_saved_tensor);
    table.add({m.name, fixed(m.median_pass_ms, 3), fixed(m.saved_per_pass, 0),
               fixed(m.offloaded_per_pass, 0), fixed(m.window_waits_per_pass, 0),
               has ? fmt::format("{:+.0f}", m.ns_per_saved_tensor) : std::string("-"),
               has ? fmt::format("{:+.0f}..{:+.0f}", m.ns_min, m.ns_max) : std::string("-"),
               has ? fmt::format("{:+.0f}", m.ns_best) : std::string("-")});
  }
  if (r.python.measured) {
    table.add({"python: no-op saved_tensors_hooks", "-", "-", "-", "-",
               fmt::format("{:+.0f}", r.python.ns_per_saved_tensor),
               fmt::format("{:+.0f}..{:+.0f}", r.python.ns_min, r.python.ns_max),
               fmt::format("{:+.0f}", r.python.ns_best)});
  }
  table.print();
  for (const HookMode& m : r.modes) {
    if (!m.resting) fmt::print("note: '{}': engine not at rest after a pass\n", m.name);
  }
  if (r.modes.size() == 3) {
    const HookMode& nothing = r.modes[1];
    const HookMode& all = r.modes[2];
    // A ratio over a cost that the noise can make zero or negative says nothing: print why instead.
    const auto ratio = [](double num, double den, double den_min) -> std::string {
      if (!std::isfinite(num) || !std::isfinite(den) || den <= 0) {
        return "not measurable (the denominator is within the baseline's noise)";
      }
      std::string text = fmt::format("{:.1f}x", num / den);
      if (den_min <= 0) text += " (uncertain: the denominator's spread includes 0)";
      return text;
    };
    if (r.python.measured) {
      fmt::print(
          "python floor (torch {}): {:.0f} ns; Python / nothing offloaded: {} (target >= 5x)\n",
          r.python.torch_version, r.python.ns_per_saved_tensor,
          ratio(r.python.ns_per_saved_tensor, nothing.ns_per_saved_tensor, nothing.ns_min));
    } else if (!r.python.why_not.empty()) {
      fmt::print("python floor: not measured ({})\n", r.python.why_not);
    }
    fmt::print("everything offloaded / nothing offloaded: {} (target <= 3x)\n",
               ratio(all.ns_per_saved_tensor, nothing.ns_per_saved_tensor, nothing.ns_min));
    if (r.python.measured) {
      fmt::print(
          "best passes: python {:.0f} ns, nothing {:.0f} ns (python / nothing: {}), everything "
          "{:.0f} ns (everything / nothing: {})\n",
          r.python.ns_best, nothing.ns_best, ratio(r.python.ns_best, nothing.ns_best, 1.0),
          all.ns_best, ratio(all.ns_best, nothing.ns_best, 1.0));
    }
    fmt::print(
        "(medians over interleaved repetitions; on a shared machine one figure is noise: compare "
        "the spreads)\n");
  }
  fmt::print("\n");
}

json hooks_json(const HookResult& r) {
  json modes = json::array();
  for (const HookMode& m : r.modes) {
    modes.push_back({{"mode", m.name},
                     {"median_pass_ms", number_or_null(m.median_pass_ms)},
                     {"saved_per_pass", number_or_null(m.saved_per_pass)},
                     {"offloaded_per_pass", number_or_null(m.offloaded_per_pass)},
                     {"window_waits_per_pass", number_or_null(m.window_waits_per_pass)},
                     {"ns_per_saved_tensor", number_or_null(m.ns_per_saved_tensor)},
                     {"ns_per_saved_tensor_min", number_or_null(m.ns_min)},
                     {"ns_per_saved_tensor_max", number_or_null(m.ns_max)},
                     {"ns_per_saved_tensor_best_passes", number_or_null(m.ns_best)},
                     {"resting", m.resting}});
  }
  json python = nullptr;
  if (r.python.measured) {
    python = {{"torch", r.python.torch_version},
              {"ns_per_saved_tensor", r.python.ns_per_saved_tensor},
              {"ns_per_saved_tensor_min", r.python.ns_min},
              {"ns_per_saved_tensor_max", r.python.ns_max},
              {"ns_per_saved_tensor_best_passes", r.python.ns_best}};
  }
  return {{"chain", r.chain},
          {"tensor_bytes", r.tensor_bytes},
          {"repetitions", r.repetitions},
          {"modes", modes},
          {"python_floor", python}};
}

// ---- section 2: decoder step -------------------------------------------------------------------

struct StepRow {
  std::string variant;
  std::string link;  // "-" (no offloading), "none", "pcie4"
  bool offload = false;
  double median_ms = kNaN;
  int64_t peak_bytes = 0;  // largest per-step peak over the measured steps
  double offloaded_bytes_per_step = 0.0;
  double offloaded_tensors_per_step = 0.0;
  double window_waits_per_step = 0.0;
  double peak_reduction_pct = kNaN;  // vs the no-offload row
  double time_ratio = kNaN;          // step time / no-offload step time
  double final_loss = kNaN;
  bool resting = true;
};

struct SizeResult {
  SizeSpec size;
  int64_t parameters = 0;
  std::vector<std::string> excluded;
  std::vector<StepRow> rows;
};

// One measured unit: forward (under the offloader's scope when `offload`), loss, backward, zeroing
// grads; returns milliseconds, copies included.
struct StepOutcome {
  double ms = 0.0;
  double loss = 0.0;
};

StepOutcome run_step(samples::Llama& model, const samples::Batch& batch,
                     offtune::ActivationOffloader& offloader, bool offload, const Env& env) {
  env.sync(&offloader);
  offloader.reset_peak_device_memory();
  const auto start = Clock::now();
  const at::Tensor loss = samples::forward_backward(model, batch, offload ? &offloader : nullptr);
  model->zero_grad();
  env.sync(&offloader);
  const double ms = ms_since(start);
  return {ms, loss.item<double>()};
}

SizeResult bench_size(const Args& args, const SizeSpec& size, const Env& env) {
  samples::LlamaConfig config = samples::LlamaConfig::preset(size.preset);
  config.dtype = samples::parse_dtype(args.dtype);
  samples::Llama model(config, args.seed);
  model->to(env.device);

  SizeResult result;
  result.size = size;
  result.parameters = samples::count_parameters(*model);

  struct Variant {
    StepRow row;
    offtune::ModelOffloadSetup setup;
    std::vector<double> ms;
    offtune::OffloadStats before;
  };
  std::vector<Variant> variants;
  const auto add = [&](std::string name, std::string link, bool offload,
                       offtune::LinkModel model_link) {
    offtune::OffloadOptions options = env.options;
    options.link = model_link;
    Variant v;
    v.row.variant = std::move(name);
    v.row.link = std::move(link);
    v.row.offload = offload;
    // After the move to the device: the factory registers the parameters' storages. The no-offload
    // variant has an offloader too, only to read device memory the same way.
    v.setup = offtune::make_offloader_for(*model, options);
    variants.push_back(std::move(v));
  };
  add("no offload", "-", false, {});
  if (env.cuda()) {
    add("offload", "real", true, {});  // the link model is a host-sim knob
  } else {
    add("offload", "none", true, {});
    add("offload", "pcie4", true, offtune::LinkModel::pcie4());
  }
  result.excluded = variants.back().setup.excluded;

  // Variants take turns step by step, so that drift in machine speed hits them alike; every variant
  // sees the same batches (the seed depends on the step only).
  const int64_t total = args.warmup + args.steps;
  for (int64_t step = 0; step < total; ++step) {
    const bool measured = step >= args.warmup;
    const samples::Batch batch =
        samples::make_token_batch(size.batch, size.seq, config.vocab_size,
                                  args.seed + static_cast<uint64_t>(step), env.device);
    for (Variant& v : variants) {
      offtune::ActivationOffloader& offloader = *v.setup.offloader;
      if (step == args.warmup) v.before = offloader.stats();
      const StepOutcome outcome = run_step(model, batch, offloader, v.row.offload, env);
      v.row.final_loss = outcome.loss;
      if (measured) {
        v.ms.push_back(outcome.ms);
        v.row.peak_bytes = std::max(v.row.peak_bytes, offloader.device_memory().peak_allocated);
        v.row.resting = v.row.resting && offloader.resident().resting();
      }
    }
  }

  const auto steps = static_cast<double>(args.steps);
  for (Variant& v : variants) {
    const offtune::OffloadStats after = v.setup.offloader->stats();
    StepRow& row = v.row;
    row.median_ms = median(v.ms);
    row.offloaded_bytes_per_step =
        static_cast<double>(after.offloaded_bytes - v.before.offloaded_bytes) / steps;
    row.offloaded_tensors_per_step =
        static_cast<double>(after.offloaded - v.before.offloaded) / steps;
    row.window_waits_per_step =
        static_cast<double>(after.window_waits - v.before.window_waits) / steps;
    result.rows.push_back(row);
  }

  const StepRow& base = result.rows.front();
  for (StepRow& row : result.rows) {
    if (base.peak_bytes > 0) {
      row.peak_reduction_pct = 100.0 * static_cast<double>(base.peak_bytes - row.peak_bytes) /
                               static_cast<double>(base.peak_bytes);
    }
    if (base.median_ms > 0.0) row.time_ratio = row.median_ms / base.median_ms;
  }
  return result;
}

void print_decoder(const std::vector<SizeResult>& results, const Args& args, const Env& env) {
  fmt::print("== Decoder step (sample Llama, {}) ==\n", offtune::to_string(env.backend));
  fmt::print(
      "forward + lm_loss + backward + zero_grad; {} measured steps after {} warmup (median); "
      "dtype {}; min_offload_size {} B, max_fwd_stash_size {}, prefetch {}\n",
      args.steps, args.warmup, args.dtype, env.options.min_offload_size,
      env.options.max_fwd_stash_size, env.options.prefetch);
  Table table({"model", "variant", "link", "step ms", "x base", "peak MiB", "peak cut %",
               "offloaded MiB/step", "offloaded/step", "window waits/step"},
              3);
  for (const SizeResult& r : results) {
    for (const StepRow& row : r.rows) {
      table.add({r.size.label(), row.variant, row.link, fixed(row.median_ms, 2),
                 fixed(row.time_ratio, 2), fixed(static_cast<double>(row.peak_bytes) / kMiB, 2),
                 row.offload ? fixed(row.peak_reduction_pct, 1) : std::string("-"),
                 row.offload ? fixed(row.offloaded_bytes_per_step / kMiB, 2) : std::string("-"),
                 row.offload ? fixed(row.offloaded_tensors_per_step, 0) : std::string("-"),
                 row.offload ? fixed(row.window_waits_per_step, 1) : std::string("-")});
    }
  }
  table.print();
  for (const SizeResult& r : results) {
    std::string excluded;
    for (const std::string& name : r.excluded) excluded += (excluded.empty() ? "" : ", ") + name;
    bool same_loss = true;
    for (const StepRow& row : r.rows) {
      same_loss = same_loss && row.final_loss == r.rows.front().final_loss;
    }
    fmt::print("{}: {:.2f}M parameters, excluded from offloading: {}, last losses {}\n",
               r.size.label(), static_cast<double>(r.parameters) / 1e6,
               excluded.empty() ? "none" : excluded,
               same_loss ? fmt::format("equal ({:.6f})", r.rows.front().final_loss)
                         : std::string("DIFFER"));
    for (const StepRow& row : r.rows) {
      if (!same_loss) fmt::print("  {} / {}: loss {:.9g}\n", row.variant, row.link, row.final_loss);
      if (!row.resting) {
        fmt::print("  note: {} / {}: engine not at rest after a step\n", row.variant, row.link);
      }
    }
  }
  fmt::print("\n");
}

json decoder_json(const std::vector<SizeResult>& results) {
  json sizes = json::array();
  for (const SizeResult& r : results) {
    json rows = json::array();
    for (const StepRow& row : r.rows) {
      rows.push_back({{"variant", row.variant},
                      {"link", row.link},
                      {"offload", row.offload},
                      {"median_step_ms", number_or_null(row.median_ms)},
                      {"time_ratio_vs_baseline", number_or_null(row.time_ratio)},
                      {"peak_device_bytes", row.peak_bytes},
                      {"peak_device_mib", static_cast<double>(row.peak_bytes) / kMiB},
                      {"peak_reduction_pct", number_or_null(row.peak_reduction_pct)},
                      {"offloaded_bytes_per_step", row.offloaded_bytes_per_step},
                      {"offloaded_tensors_per_step", row.offloaded_tensors_per_step},
                      {"window_waits_per_step", row.window_waits_per_step},
                      {"final_loss", number_or_null(row.final_loss)},
                      {"resting", row.resting}});
    }
    sizes.push_back({{"preset", r.size.preset},
                     {"batch", r.size.batch},
                     {"seq", r.size.seq},
                     {"parameters", r.parameters},
                     {"excluded", r.excluded},
                     {"rows", rows}});
  }
  return sizes;
}

// ---- main --------------------------------------------------------------------------------------

// The flags of sections 3-5; --quick changes the defaults of those not given.
struct ProfilerArgsFlags {
  CLI::Option* events = nullptr;
  CLI::Option* sizes = nullptr;
  CLI::Option* windows = nullptr;
  CLI::Option* steps = nullptr;
  CLI::Option* warmup = nullptr;
};

ProfilerArgsFlags add_profiler_flags(CLI::App& app, Args& args) {
  offtune::bench::ProfilerArgs& p = args.profiler;
  ProfilerArgsFlags flags;
  flags.events = app.add_option("--events", p.events,
                                "store and export sections: timeline events inserted and exported "
                                "(steps and occupancy rows: a tenth of it each)")
                     ->check(at_least(1))
                     ->capture_default_str();
  app.add_option("--batch-events", p.batch_events,
                 "store section: rows per add_* call (each call is one transaction)")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--tmp-dir", args.tmp_dir,
                 "store/export/sweep sections: where their temporary directory goes (default: "
                 "the system's temporary directory)");
  flags.sizes = app.add_option("--sweep-min-offload-size", p.sweep_sizes,
                               "sweep section: min_offload_size list or range")
                    ->capture_default_str();
  flags.windows = app.add_option("--sweep-max-fwd-stash-size", p.sweep_windows,
                                 "sweep section: max_fwd_stash_size list or range")
                      ->capture_default_str();
  flags.steps = app.add_option("--sweep-steps", p.sweep_steps, "sweep section: measured steps")
                    ->check(at_least(1))
                    ->capture_default_str();
  flags.warmup = app.add_option("--sweep-warmup", p.sweep_warmup, "sweep section: unmeasured steps")
                     ->check(at_least(0))
                     ->capture_default_str();
  return flags;
}

int run(const Args& args, const std::vector<SizeSpec>& sizes) {
  Env env;
  env.options.backend = offtune::parse_backend(args.backend);
  env.options.min_offload_size = args.min_offload_size;
  env.options.max_fwd_stash_size = args.max_fwd_stash_size;
  env.options.prefetch = args.prefetch;
  {
    // Resolve the backend and validate the options before anything is built; on host-sim this also
    // installs the accounting allocator, so that parameter bytes count from the start.
    offtune::ActivationOffloader probe(env.options);
    env.backend = probe.backend();
  }
  env.options.backend = env.backend;
  const int64_t threads =
      offtune::samples::default_threads(args.threads, env.backend == offtune::BackendKind::HostSim);
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));
  if (env.backend == offtune::BackendKind::Cuda) {
    env.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.options.device_index));
  }

  const auto section = [&](std::string_view name) {
    return args.section == "all" || args.section == name;
  };
  const bool do_hooks = section("hooks");
  const bool do_decoder = section("decoder");
  const bool do_store = section("store");
  const bool do_export = section("export");
  const bool do_sweep = section("sweep");
  const auto start = Clock::now();

  if (!args.json) {
    fmt::print("offtune-bench: backend {}, intra-op threads {}{}\n\n",
               offtune::to_string(env.backend), at::get_num_threads(),
               args.quick ? ", quick run" : "");
    std::fflush(stdout);
  }

  std::optional<HookResult> hooks;
  if (do_hooks) {
    hooks = bench_hooks(args, env);
    if (!args.json) {
      print_hooks(*hooks);
      std::fflush(stdout);
    }
  }
  std::vector<SizeResult> decoder;
  if (do_decoder) {
    for (const SizeSpec& size : sizes) decoder.push_back(bench_size(args, size, env));
    if (!args.json) {
      print_decoder(decoder, args, env);
      std::fflush(stdout);
    }
  }

  // The profiler sections share one temporary directory: export reads the store section's file.
  std::optional<offtune::bench::TempDir> tmp;
  if (do_store || do_export || do_sweep) tmp.emplace(args.tmp_dir);
  offtune::bench::ProfilerArgs profiler = args.profiler;
  profiler.sweep_threads = offtune::samples::default_threads(args.threads, /*host_sim=*/true);
  std::optional<offtune::bench::StoreResult> store;
  if (do_store) {
    store = offtune::bench::bench_store(profiler, tmp->path());
    if (!args.json) {
      offtune::bench::print_store(*store);
      std::fflush(stdout);
    }
  }
  std::optional<offtune::bench::ExportResult> exported;
  if (do_export) {
    exported = offtune::bench::bench_export(profiler, tmp->path());
    if (!args.json) {
      offtune::bench::print_export(*exported);
      std::fflush(stdout);
    }
  }
  std::optional<offtune::bench::SweepResult> sweep;
  if (do_sweep) {
    sweep = offtune::bench::bench_sweep(profiler, tmp->path());
    if (!args.json) offtune::bench::print_sweep(*sweep);
  }
  tmp.reset();
  const double total_s = ms_since(start) / 1e3;

  if (args.json) {
    json out = {{"program", "offtune-bench"},
                {"backend", std::string(offtune::to_string(env.backend))},
                {"intra_op_threads", at::get_num_threads()},
                {"quick", args.quick},
                {"options",
                 {{"min_offload_size", env.options.min_offload_size},
                  {"max_fwd_stash_size", env.options.max_fwd_stash_size},
                  {"prefetch", env.options.prefetch}}},
                {"total_seconds", total_s}};
    if (hooks) out["hook_overhead"] = hooks_json(*hooks);
    if (do_decoder) {
      out["decoder_step"] = {{"dtype", args.dtype},
                             {"steps", args.steps},
                             {"warmup", args.warmup},
                             {"sizes", decoder_json(decoder)}};
    }
    if (store) {
      json section_json = offtune::bench::store_json(*store);
      out["store_insert"] = {{"events", profiler.events},
                             {"batch_events", profiler.batch_events},
                             {"events_per_step", section_json["events_per_step"]},
                             {"rows", section_json["rows"]}};
    }
    if (exported) out["export"] = offtune::bench::export_json(*exported);
    if (sweep) out["sweep"] = offtune::bench::sweep_json(*sweep);
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("total: {:.1f} s\n", total_s);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{
      "Measure activation offloading and its profiler: saved-tensor hook overhead; step time / "
      "peak device memory of the sample Llama with and without offloading; the store's insert "
      "rate; trace export time; the wall time of the default sweep.",
      "offtune-bench"};
  app.add_option("--backend", args.backend,
                 "where tensors live; auto picks cuda when a GPU is usable")
      ->check(CLI::IsMember({"auto", "cuda", "host-sim"}))
      ->capture_default_str();
  app.add_option("--section", args.section, "which sections to run")
      ->check(CLI::IsMember({"all", "hooks", "decoder", "store", "export", "sweep"}))
      ->capture_default_str();
  app.add_flag("--quick", args.quick,
               "smoke run: few repetitions and steps, 100,000 events, a 2x2 sweep of 1 step "
               "(explicit --repetitions/--steps/--warmup/--events/--sweep-* win)");
  app.add_flag("--json", args.json, "print one JSON object instead of tables");
  app.add_option("--threads", args.threads,
                 "intra-op (compute) threads; 0 keeps torch's default; by default host-sim leaves "
                 "one core to its copy thread (cores - 1, at least 1), cuda keeps torch's default")
      ->check(at_least(0));
  app.add_option("--chain", args.chain, "hook section: sin ops in the chain")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--tensor-bytes", args.tensor_bytes, "hook section: bytes of each saved tensor")
      ->check(at_least(4))
      ->capture_default_str();
  app.add_option("--hook-mode", args.hook_mode,
                 "hook section: every mode, interleaved, or one alone (for a profiler: perf "
                 "stat/record); one alone reports pass times only")
      ->check(CLI::IsMember({"all", "baseline", "nothing", "everything"}))
      ->capture_default_str();
  app.add_option("--python", args.python,
                 "hook section (host-sim): the Python with torch that measures the floor of no-op "
                 "saved_tensors_hooks (empty: skip it)")
      ->capture_default_str();
  auto* reps =
      app.add_option("--repetitions", args.repetitions, "hook section: measured passes per mode")
          ->check(at_least(1))
          ->capture_default_str();
  app.add_option("--size", args.sizes,
                 "decoder section: PRESET:BATCH:SEQ, repeatable (presets: tiny, small, 1b)")
      ->capture_default_str();
  app.add_option("--dtype", args.dtype, "decoder section: parameter and activation dtype")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  auto* steps = app.add_option("--steps", args.steps, "decoder section: measured steps")
                    ->check(at_least(1))
                    ->capture_default_str();
  auto* warmup =
      app.add_option("--warmup", args.warmup, "decoder section: unmeasured steps before them")
          ->check(at_least(0))
          ->capture_default_str();
  app.add_option("--seed", args.seed, "seed of the model's parameters and of the batches")
      ->capture_default_str();
  app.add_option("--min-offload-size", args.min_offload_size,
                 "decoder section: saved tensors smaller than this many bytes stay on the device")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--max-fwd-stash-size", args.max_fwd_stash_size,
                 "offload copies in flight before forward waits")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--prefetch", args.prefetch, "offloaded tensors brought back ahead of use")
      ->check(at_least(0))
      ->capture_default_str();

  ProfilerArgsFlags profiler_flags = add_profiler_flags(app, args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help (stdout) or the error (stderr)
    return e.get_exit_code() == 0 ? code : 2;
  }
  if (args.quick) {
    if (reps->count() == 0) args.repetitions = 3;
    if (steps->count() == 0) args.steps = 2;
    if (warmup->count() == 0) args.warmup = 1;
    offtune::bench::ProfilerArgs& p = args.profiler;
    if (profiler_flags.events->count() == 0) p.events = 100'000;
    if (profiler_flags.sizes->count() == 0) p.sweep_sizes = "1KiB,4MiB";
    if (profiler_flags.windows->count() == 0) p.sweep_windows = "1,5";
    if (profiler_flags.steps->count() == 0) p.sweep_steps = 1;
    if (profiler_flags.warmup->count() == 0) p.sweep_warmup = 0;
  }

  std::vector<SizeSpec> sizes;
  try {
    for (const std::string& spec : args.sizes) sizes.push_back(parse_size(spec));
    offtune::bench::validate(args.profiler);
  } catch (const std::exception& e) {  // a bad --size or sweep grid is a command-line error
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }

  try {
    return run(args, sizes);
  } catch (const c10::Error& e) {
    // c10's what() carries a C++ backtrace; the message alone is what a user can act on.
    std::fprintf(stderr, "error: %s\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 1;
}
