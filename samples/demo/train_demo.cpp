// offtune-demo: trains the sample Llama for a few SGD steps twice, without and with activation
// offloading, from the same seed and data, and prints step time, peak device memory and offloaded
// bytes of both runs, and whether their final losses agree (offloading must not change the
// numbers).
//
// Exit status: 0 done; 1 an error (printed as `error: ...`); 2 bad command line.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "offtune/knobs.hpp"
#include "offtune/model_support.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/knob_text.hpp"
#include "offtune/samples/cli_validators.hpp"
#include "offtune/samples/llama.hpp"
#include "offtune/samples/workload.hpp"

namespace {

namespace samples = offtune::samples;

// The engine knobs the demo takes, declared from the knob table (offtune/knobs.hpp): each one's
// flag and help, its text read as every offtune front end reads it ("64KiB"), its range checked.
constexpr std::string_view kEngineKnobs[] = {"link", "min_offload_size", "max_fwd_stash_size"};

struct Args {
  std::string preset = "small";
  int64_t batch = 4;
  int64_t seq = 256;
  std::string dtype = "fp32";
  int64_t steps = 5;
  int64_t warmup = 1;
  std::string backend = "auto";
  // The engine knobs of kEngineKnobs: each one's text as given (its default until then), and the
  // knobs read from them after parsing.
  std::map<std::string, std::string, std::less<>> knob_texts;
  offtune::Knobs knobs;
  uint64_t seed = 42;
  int64_t threads = -1;  // intra-op threads; -1: samples::default_threads()
};

struct RunResult {
  double median_ms = 0.0;
  int64_t peak_bytes = 0;  // largest per-step peak over the measured steps
  double offloaded_bytes_per_step = 0.0;
  double final_loss = 0.0;
  int64_t parameters = 0;
  std::vector<std::string> excluded;  // modules the offloader leaves out (the output head)
};

constexpr double kMiB = 1024.0 * 1024.0;

using offtune::samples::at_least;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// One training run on a freshly built model. The offloader exists in both runs, so that both read
// device memory the same way; `offload` only decides whether forward runs under its scope.
RunResult train(const Args& args, const samples::LlamaConfig& config,
                const offtune::OffloadOptions& options, c10::Device device, bool offload) {
  samples::Llama model(config, args.seed);
  model->to(device);
  // After the move: the factory registers the parameters' storages as never-offload, and moving
  // would replace them.
  offtune::ModelOffloadSetup setup = offtune::make_offloader_for(*model, options);
  offtune::ActivationOffloader& offloader = *setup.offloader;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-3));

  const bool cuda = device.is_cuda();
  // Waits for compute (cuda) and for the offloader's copies, so that a step's time includes both.
  const auto sync = [&] {
    if (cuda) torch::cuda::synchronize();
    offloader.synchronize();
  };

  RunResult result;
  result.parameters = samples::count_parameters(*model);
  result.excluded = setup.excluded;
  std::vector<double> step_ms;
  int64_t offloaded_before = 0;
  const int64_t total = args.warmup + args.steps;
  for (int64_t step = 0; step < total; ++step) {
    const bool measured = step >= args.warmup;
    const samples::Batch batch = samples::make_token_batch(
        args.batch, args.seq, config.vocab_size, args.seed + static_cast<uint64_t>(step), device);
    sync();
    if (step == args.warmup) offloaded_before = offloader.stats().offloaded_bytes;
    offloader.reset_peak_device_memory();
    const auto start = std::chrono::steady_clock::now();

    optimizer.zero_grad();
    const at::Tensor loss = samples::forward_backward(model, batch, offload ? &offloader : nullptr);
    optimizer.step();
    sync();

    const auto end = std::chrono::steady_clock::now();
    const double loss_value = loss.item<double>();
    if (measured) {
      step_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
      result.peak_bytes = std::max(result.peak_bytes, offloader.device_memory().peak_allocated);
    }
    result.final_loss = loss_value;
  }
  result.median_ms = median(step_ms);
  result.offloaded_bytes_per_step =
      static_cast<double>(offloader.stats().offloaded_bytes - offloaded_before) /
      static_cast<double>(args.steps);
  return result;
}

int run(const Args& args) {
  samples::LlamaConfig config = samples::LlamaConfig::preset(args.preset);
  config.dtype = samples::parse_dtype(args.dtype);
  if (args.seq > config.max_seq_len) {
    throw std::invalid_argument("--seq " + std::to_string(args.seq) + " exceeds the max_seq_len " +
                                std::to_string(config.max_seq_len) + " of preset " + args.preset);
  }

  offtune::OffloadOptions options = offtune::options_of(args.knobs);
  options.backend = offtune::parse_backend(args.backend);
  {
    // Resolve the backend (and fail on bad options) before building a model that may be large. On
    // host-sim this also installs the accounting allocator, so that parameter bytes count from the
    // start.
    offtune::ActivationOffloader probe(options);
    options.backend = probe.backend();
  }
  const bool cuda = options.backend == offtune::BackendKind::Cuda;
  if (const int64_t threads = samples::default_threads(args.threads, !cuda); threads > 0) {
    at::set_num_threads(static_cast<int>(threads));
  }
  const c10::Device device =
      cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(options.device_index))
           : c10::Device(c10::kCPU);

  fmt::print("offtune demo: preset {}, batch {}, seq {}, dtype {}, {} steps (+{} warmup)\n",
             args.preset, args.batch, args.seq, samples::dtype_name(config.dtype), args.steps,
             args.warmup);
  fmt::print("backend: {}{}\n", offtune::to_string(options.backend),
             cuda ? "" : fmt::format(" (link: {})", args.knobs.link.name));
  std::fflush(stdout);

  const RunResult base = train(args, config, options, device, /*offload=*/false);
  const RunResult off = train(args, config, options, device, /*offload=*/true);

  std::string excluded;
  for (const std::string& name : off.excluded) excluded += (excluded.empty() ? "" : ", ") + name;
  fmt::print("model: {:.1f}M parameters; excluded from offloading: {}\n",
             static_cast<double>(off.parameters) / 1e6, excluded.empty() ? "none" : excluded);
  fmt::print("\n{:<12} {:>14} {:>16} {:>20} {:>14}\n", "config", "median step ms",
             "peak device MiB", "offloaded MiB/step", "final loss");
  const auto row = [](const char* name, const RunResult& r) {
    fmt::print("{:<12} {:>14.2f} {:>16.1f} {:>20.1f} {:>14.6f}\n", name, r.median_ms,
               static_cast<double>(r.peak_bytes) / kMiB, r.offloaded_bytes_per_step / kMiB,
               r.final_loss);
  };
  row("no offload", base);
  row("offload", off);
  if (base.peak_bytes > 0) {
    const double saved = static_cast<double>(base.peak_bytes - off.peak_bytes);
    fmt::print("peak memory saved: {:.1f} MiB ({:.1f}%), step time x{:.2f}\n", saved / kMiB,
               100.0 * saved / static_cast<double>(base.peak_bytes),
               base.median_ms > 0.0 ? off.median_ms / base.median_ms : 0.0);
  }
  // Offloading moves bytes, never changes them: the losses must be bitwise equal.
  if (base.final_loss == off.final_loss) {
    fmt::print("losses match: yes\n");
  } else {
    fmt::print("losses match: no ({:.9g} vs {:.9g})\n", base.final_loss, off.final_loss);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{
      "Train the sample Llama with and without activation offloading and compare step time, "
      "peak device memory and losses.",
      "offtune-demo"};
  app.add_option("--preset", args.preset, "model size")
      ->check(CLI::IsMember({"tiny", "small", "1b"}))
      ->capture_default_str();
  app.add_option("--batch", args.batch, "sequences per batch")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--seq", args.seq, "tokens per sequence")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--dtype", args.dtype, "parameter and activation dtype")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--steps", args.steps, "measured training steps")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--warmup", args.warmup, "unmeasured steps before them")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--backend", args.backend,
                 "where the model runs; auto picks cuda when a GPU is usable")
      ->check(CLI::IsMember({"auto", "cuda", "host-sim"}))
      ->capture_default_str();
  for (const std::string_view key : kEngineKnobs) {
    const offtune::Knob& k = offtune::knob(key);
    std::string& text = args.knob_texts[std::string(key)];
    text = offtune::profiler::default_text(k, /*sweep=*/false);
    app.add_option(std::string(k.flag), text, offtune::profiler::knob_help(k, /*sweep=*/false))
        ->capture_default_str();
  }
  app.add_option("--threads", args.threads,
                 "intra-op compute threads (default: all cores but one on host-sim, which leaves "
                 "one to the copy thread; torch's default on cuda)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  app.add_option("--seed", args.seed, "seed of the model's parameters and of the batches")
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help (stdout) or the error (stderr)
    return e.get_exit_code() == 0 ? code : 2;
  }
  try {
    args.knobs = offtune::profiler::parse_knobs(args.knob_texts, args.knobs);
  } catch (const std::invalid_argument& e) {  // "--min-offload-size: bad size 'x' ..."
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }

  try {
    return run(args);
  } catch (const c10::Error& e) {
    // c10's what() carries a C++ backtrace; the message alone is what a user can act on.
    fmt::print(stderr, "error: {}\n", e.what_without_backtrace());
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
  }
  return 1;
}
