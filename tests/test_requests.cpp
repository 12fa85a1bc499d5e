// The request layer both front ends use (offtune/requests): one set of defaults, one message per
// bad field in the CLI's terms, the same checks for run and sweep, and conversions that parse every
// mode once.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "offtune/knobs.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/engine_options.hpp"
#include "offtune/requests/execute.hpp"
#include "offtune/requests/request.hpp"
#include "offtune/samples/registry.hpp"

namespace offtune::requests {
namespace {

std::vector<std::string> fields_of(const std::vector<FieldError>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.field);
  return out;
}
template <typename Valid>
std::vector<std::string> fields_of(const Checked<Valid>& checked) {
  return fields_of(checked.errors);
}

// The request checked and parsed (the conversions take only that); throws RequestError.
template <typename Request>
auto valid(const Request& request) {
  return check(request).value();
}

// A Choice knob's values as a grid's axis holds them.
std::vector<KnobValue> names_of(std::initializer_list<std::string> names) {
  return {names.begin(), names.end()};
}

TEST(Requests, DefaultsAreValidAndShared) {
  // Named, not temporaries: GCC 12 warns (maybe-uninitialized) on the strings of a temporary
  // aggregate destroyed inside EXPECT_*.
  const RunRequest run;
  const SweepRequest sweep;
  EXPECT_TRUE(check(run).ok());
  EXPECT_TRUE(check(sweep).ok());
  // A sweep's points share a run's defaults for every knob the sweep has no field for, so that a
  // sweep's key does not depend on which front end started it.
  const auto grid = to_grid(valid(sweep));
  auto run_config = to_engine_config(valid(run));
  EXPECT_EQ(grid.base, run_config);
  EXPECT_EQ(grid.base.semantics, Semantics::Offtune);
  EXPECT_EQ(grid.numbers("min_offload_size").front(), 1024);
  EXPECT_EQ(grid.numbers("max_fwd_stash_size"), (std::vector<int64_t>{1, 2, 5}));
  EXPECT_EQ(point_count(valid(sweep)),
            1 + static_cast<int64_t>(grid.numbers("min_offload_size").size()) * 3);
}

TEST(Requests, OneMessagePerBadFieldNamingTheFlag) {
  RunRequest r;
  r.workload.batch = 0;
  r.workload.dtype = "fp8";
  r.knobs["link"] = "fast";
  r.knobs["min_offload_size"] = "12 parsecs";
  r.knobs["prefetch"] = "65";
  const auto errors = check(r).errors;
  // The knobs in the table's order, after the workload's and the backend's fields.
  ASSERT_EQ(fields_of(errors), (std::vector<std::string>{"--batch", "--dtype", "--min-offload-size",
                                                         "--prefetch", "--link"}));
  for (const auto& e : errors) {
    EXPECT_NE(e.message.find(e.field), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
  }
  EXPECT_EQ(errors[3].message, "--prefetch must be between 0 and 64, got 65");
}

TEST(Requests, RunAndSweepCheckTheSharedFieldsAlike) {
  // --prefetch used to be checked for run only.
  for (const std::string prefetch : {"-1", "65"}) {
    RunRequest run;
    run.knobs["prefetch"] = prefetch;
    SweepRequest sweep;
    sweep.knobs["prefetch"] = prefetch;
    EXPECT_EQ(fields_of(check(run)), std::vector<std::string>{"--prefetch"});
    EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{"--prefetch"});
    EXPECT_EQ(check(run).errors.front().message, check(sweep).errors.front().message);
  }
  // A window of 0 is refused before anything runs, for run as for sweep.
  RunRequest run;
  run.knobs["max_fwd_stash_size"] = "0";
  EXPECT_EQ(fields_of(check(run)), std::vector<std::string>{"--max-fwd-stash-size"});
  SweepRequest sweep;
  sweep.knobs["max_fwd_stash_size"] = "0,1";
  EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{"--max-fwd-stash-size"});
  EXPECT_EQ(check(run).errors.front().message, "--max-fwd-stash-size must be at least 1, got 0");
  EXPECT_EQ(check(sweep).errors.front().message, check(run).errors.front().message);
}

TEST(Requests, ModelNamesComeFromTheSamplesRegistry) {
  RunRequest r;
  for (const auto& name : samples::builtin_model_names()) {
    r.workload.model = name;
    EXPECT_TRUE(check(r).ok()) << name;
  }
  r.workload.model = "nosuch";
  const auto errors = check(r).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--model"});
  for (const auto& name : samples::builtin_model_names()) {
    EXPECT_NE(errors[0].message.find(name), std::string::npos) << errors[0].message;
  }
  // A TorchScript path is checked when it is loaded; its input spec now.
  r.workload.model = "model.pt";
  EXPECT_TRUE(check(r).ok());
  r.workload.input_spec = "x:float32[B";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--input-spec"});
  // A built-in model takes no input spec.
  r.workload.model = "tiny";
  r.workload.input_spec = "x:float32[B,8]";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--input-spec"});
}

TEST(Requests, BackendFieldsAreParsedOnceIntoEnums) {
  BackendFields f;
  f.backend = "host-sim";
  f.device_capacity = "2MiB";
  f.collector = "nvtx-only";
  RunRequest fr;
  fr.backend = f;
  fr.knobs["link"] = "12:15";  // a knob, parsed into the backend's link as well
  const auto fv = valid(fr);
  const profiler::BackendRequest b = to_backend(fv);
  EXPECT_EQ(b.backend, BackendKind::HostSim);
  EXPECT_DOUBLE_EQ(b.link.model.pinned_gbps, 12.0);
  EXPECT_EQ(b.link.model.latency_ns, 15000);
  EXPECT_EQ(b.link.name, "12:15");
  EXPECT_EQ(b.device_capacity, 2 << 20);
  EXPECT_EQ(fv.collector(), Collector::NvtxOnly);
  // A capacity is host-sim's; with cuda named it is refused before anything runs.
  RunRequest r;
  r.backend.backend = "cuda";
  r.backend.device_capacity = "1GiB";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--device-capacity"});
  r.backend = {};
  r.backend.device_capacity = "0";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--device-capacity"});
  r.backend = {};
  r.backend.collector = "perf";
  r.backend.backend = "tpu";
  EXPECT_EQ(fields_of(check(r)), (std::vector<std::string>{"--backend", "--collector"}));
}

TEST(Requests, DtypesAndCollectorsRoundTrip) {
  for (const auto d : {Dtype::Fp32, Dtype::Bf16, Dtype::Fp16}) {
    EXPECT_EQ(parse_dtype(to_string(d)), d);
  }
  EXPECT_EQ(parse_dtype("bfloat16"), Dtype::Bf16);
  EXPECT_THROW(parse_dtype("fp8"), std::invalid_argument);
  for (const auto c : {Collector::Auto, Collector::Cupti, Collector::NvtxOnly}) {
    EXPECT_EQ(parse_collector(to_string(c)), c);
  }
  // A run records the dtype by its short name, whichever alias was given.
  RunRequest wr;
  wr.workload.dtype = "float16";
  EXPECT_EQ(to_workload(valid(wr)).dtype, "fp16");
}

TEST(Requests, ConversionsRefuseAnInvalidRequestWithEveryMessage) {
  SweepRequest r;
  r.knobs["min_offload_size"] = "1KiB:1MiB:x1";
  r.shard = "3/2";
  try {
    (void)valid(r);
    FAIL() << "check() made a valid sweep of an invalid request";
  } catch (const RequestError& e) {
    EXPECT_EQ(fields_of(e.errors()), (std::vector<std::string>{"--min-offload-size", "--shard"}));
    EXPECT_EQ(std::string(e.what()), e.errors().front().message);
  }
  RunRequest run;
  run.knobs["max_fwd_stash_bytes"] = "-1";
  EXPECT_THROW((void)valid(run), RequestError);
  EXPECT_FALSE(check(run).valid.has_value());
}

TEST(Requests, RunConversionCarriesEveryKnob) {
  RunRequest r;
  r.knobs["min_offload_size"] = "64KiB";
  r.knobs["max_fwd_stash_size"] = "3";
  r.knobs["max_fwd_stash_bytes"] = "1MiB";
  r.knobs["prefetch"] = "2";
  r.knobs["use_streams"] = "off";
  r.knobs["use_pin_memory"] = "off";
  r.knobs["link"] = "none";
  const auto c = to_engine_config(valid(r));
  EXPECT_TRUE(c.offload);
  EXPECT_EQ(c.min_offload_size, 64 << 10);
  EXPECT_EQ(c.max_fwd_stash_size, 3);
  EXPECT_EQ(c.max_fwd_stash_bytes, 1 << 20);
  EXPECT_EQ(c.prefetch, 2);
  EXPECT_FALSE(c.use_streams);
  EXPECT_FALSE(c.use_pin_memory);
  EXPECT_EQ(c.link.name, "none");
  EXPECT_FALSE(c.link.model.enabled());
  r.no_offload = true;
  EXPECT_FALSE(to_engine_config(valid(r)).offload);
}

// --- issue 11: one rule per value, runs that end -------------------------------------------------

TEST(Requests, AGridBeyondMaxPointsIsRefusedWithoutExpandingIt) {
  SweepRequest r;
  r.knobs["min_offload_size"] = "1B:1000B:+1";
  r.knobs["max_fwd_stash_size"] = "1:1000";
  // Before: accepted, and a million points started measuring.
  const auto errors = check(r).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--max-points"});
  EXPECT_NE(errors[0].message.find("1000001 points"), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[0].message.find("steps in all"), std::string::npos) << errors[0].message;
  // Lists of 10,000 values each: 10^8 points are counted, not expanded.
  r.knobs["min_offload_size"] = "1B:10000B:+1";
  r.knobs["max_fwd_stash_size"] = "1:10000";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--max-points"});
  // Asked for explicitly, it is accepted.
  r.knobs["min_offload_size"] = "1KiB:64KiB:x2";
  r.knobs["max_fwd_stash_size"] = "1:200";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--max-points"});
  r.max_points = 2000;
  EXPECT_TRUE(check(r).ok());
  EXPECT_EQ(point_count(valid(r)), 1 + 7 * 200);
  r.max_points = 0;
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--max-points"});
}

TEST(Requests, ThreadsAreAutoOrBoundByTheMachine) {
  RunRequest r;
  EXPECT_EQ(to_backend(valid(r)).threads, -1);
  r.backend.threads = "1";
  EXPECT_EQ(to_backend(valid(r)).threads, 1);
  r.backend.threads = std::to_string(max_threads());
  EXPECT_TRUE(check(r).ok());
  // Before: --threads 999999 created threads until the machine choked; -1 was accepted.
  for (const std::string& bad : std::vector<std::string>{
           "999999", "0", "-1", std::to_string(max_threads() + 1), "two", ""}) {
    r.backend.threads = bad;
    EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--threads"}) << bad;
  }
}

TEST(Requests, ALinkIsAFiniteBandwidthAndLatency) {
  RunRequest r;
  for (const char* good : {"none", "pcie4", "12:15", "25.5:0"}) {
    r.knobs["link"] = good;
    EXPECT_TRUE(check(r).ok()) << good;
  }
  // Before: "inf:0" passed the request and every run failed (exit 1, a failed run stored).
  for (const char* bad : {"inf:0", "nan:1", "0:1", "-5:1", "12:-1", "12:inf", " 12:15", "12:"}) {
    r.knobs["link"] = bad;
    EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--link"}) << bad;
  }
}

TEST(Requests, SizesAreWholeBytesWithoutSpaces) {
  RunRequest r;
  for (const char* bad : {"0.5", " 1KiB", "1KiB ", ""}) {
    r.knobs["min_offload_size"] = bad;
    EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--min-offload-size"}) << bad;
  }
  SweepRequest s;
  s.knobs["min_offload_size"] = "1KiB, 4KiB";
  EXPECT_EQ(fields_of(check(s)), std::vector<std::string>{"--min-offload-size"});
}

TEST(Requests, SingleValuesOutsideRequests) {
  EXPECT_EQ(parse_id("--sweep", "3"), 3);
  EXPECT_EQ(parse_memory_budget("--memory-budget", "6GiB"), int64_t{6} << 30);
  EXPECT_DOUBLE_EQ(parse_positive("--max-slowdown", "1.2"), 1.2);
  const auto message = [](auto&& parse) {
    try {
      parse();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // Before: --sweep -1 printed everything, nan became 1.25, an empty budget was ignored.
  for (const char* bad : {"-1", "0", "", "1.5", "x"}) {
    EXPECT_EQ(message([&] { parse_id("--sweep", bad); }).rfind("--sweep: ", 0), 0U) << bad;
  }
  for (const char* bad : {"nan", "inf", "0", "-1", ""}) {
    EXPECT_EQ(message([&] { parse_positive("--max-slowdown", bad); }).rfind("--max-slowdown: ", 0),
              0U)
        << bad;
  }
  for (const char* bad : {"", "0", "-1GiB", "0.5"}) {
    EXPECT_EQ(
        message([&] { parse_memory_budget("--memory-budget", bad); }).rfind("--memory-budget: ", 0),
        0U)
        << bad;
  }
  EXPECT_DOUBLE_EQ(parse_tolerance_percent("--memory-tolerance", "1"), 0.01);
  EXPECT_DOUBLE_EQ(parse_tolerance_percent("--memory-tolerance", "2.5%"), 0.025);
  EXPECT_EQ(parse_tolerance_percent("--memory-tolerance", "0"), 0.0);
  EXPECT_EQ(parse_tolerance_percent("--memory-tolerance", "0%"), 0.0);
  for (const char* bad : {"", "%", "-1", "100", "150%", "nan", "1 %", "x"}) {
    EXPECT_EQ(message([&] {
                parse_tolerance_percent("--memory-tolerance", bad);
              }).rfind("--memory-tolerance: ", 0),
              0U)
        << bad;
  }
}

// --verify (the correctness sentinel) reaches the engine from a run and from every point of a
// sweep, and a sweep with it is told from one without (its grid, stored with it, says so).
TEST(Requests, VerifyReachesTheEngineFromARunAndEveryPointOfASweep) {
  RunRequest r;
  EXPECT_FALSE(to_engine_config(valid(r)).verify);
  EXPECT_FALSE(offtune::options_of(to_engine_config(valid(r)), OffloadOptions{}).verify);
  r.knobs["verify"] = "on";
  const auto c = to_engine_config(valid(r));
  EXPECT_TRUE(c.verify);
  EXPECT_TRUE(offtune::options_of(c, OffloadOptions{}).verify);
  EXPECT_EQ(profiler::describe_variant(c), "verify");
  SweepRequest s;
  s.knobs["min_offload_size"] = "1KiB,1MiB";
  s.knobs["max_fwd_stash_size"] = "1,2";
  s.knobs["verify"] = "on";
  const auto grid = to_grid(valid(s));
  for (const auto& point : profiler::expand_grid(grid)) EXPECT_TRUE(point.verify);
  const auto again = profiler::parse_grid_json(profiler::grid_json(grid));
  EXPECT_TRUE(again.base.verify);
  s.knobs["verify"] = "off";
  EXPECT_NE(profiler::grid_json(to_grid(valid(s))), profiler::grid_json(grid));
}

// A sweep takes semantics as an axis (comma-separated, each once); a run takes one.
TEST(Requests, SemanticsAreAnAxisOfASweepAndOneValueForARun) {
  SweepRequest s;
  s.knobs["min_offload_size"] = "1KiB,1MiB";
  s.knobs["max_fwd_stash_size"] = "1,2,5";
  EXPECT_EQ(point_count(valid(s)), 7);
  s.knobs["semantics"] = "trl,offtune";
  EXPECT_EQ(point_count(valid(s)), 13);
  const auto grid = to_grid(valid(s));
  EXPECT_EQ(grid.values("semantics"), names_of({"trl", "offtune"}));
  EXPECT_EQ(grid.base.semantics, Semantics::Trl);
  s.knobs["semantics"] = "trl";
  // One semantics: no axis, the key unchanged.
  EXPECT_FALSE(to_grid(valid(s)).axes.contains("semantics"));
  EXPECT_EQ(to_grid(valid(s)).base.semantics, Semantics::Trl);
  for (const std::string bad : {"trl,trl", "trl,", "trl,bogus", ",offtune", ""}) {
    s.knobs["semantics"] = bad;
    EXPECT_EQ(fields_of(check(s)), std::vector<std::string>{"--semantics"}) << bad;
  }
  s.knobs["semantics"] = "trl,trl";
  EXPECT_EQ(check(s).errors.front().message, "--semantics names 'trl' twice");
  s.knobs["semantics"] = "trl,bogus";
  EXPECT_EQ(check(s).errors.front().message,
            "--semantics: unknown semantics 'bogus' (valid: offtune, trl)");
  RunRequest r;
  r.knobs["semantics"] = "trl,offtune";
  const auto errors = check(r).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--semantics"});
  EXPECT_EQ(errors[0].message, "--semantics takes one value for a run (a list is for sweep)");
}

// The engine variants: lists (axes) for a sweep, one value for a run; boundaries need
// checkpointing; every:1 is all; --predict-first cannot predict them.
TEST(Requests, VariantsAreAxesOfASweepAndOneValueForARun) {
  SweepRequest s;
  s.knobs["min_offload_size"] = "1KiB,1MiB";
  s.knobs["max_fwd_stash_size"] = "1,2,5";
  s.knobs["checkpoint"] = "none,every:1";
  s.knobs["offload_set"] = "all,boundaries";
  // baseline + checkpointing alone + (none, all) + (all, all) + (all, boundaries) x 6 pairs.
  EXPECT_EQ(point_count(valid(s)), 2 + 3 * 6);
  const auto grid = to_grid(valid(s));
  EXPECT_EQ(grid.values("checkpoint"), names_of({"none", "all"}));
  EXPECT_EQ(grid.values("offload_set"), names_of({"all", "boundaries"}));
  EXPECT_EQ(static_cast<int64_t>(profiler::expand_grid(grid).size()), point_count(valid(s)));
  s.knobs["offload_set"] = "boundaries";
  s.knobs["checkpoint"] = "none";
  auto errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--offload"});
  EXPECT_NE(errors[0].message.find("--checkpoint all or every:K"), std::string::npos);
  for (const std::string bad : {"all,all", "every:0", "some", "every:1,all"}) {
    s.knobs["checkpoint"] = bad;
    s.knobs["offload_set"] = "all";
    EXPECT_EQ(fields_of(check(s)), std::vector<std::string>{"--checkpoint"}) << bad;
  }
  s.knobs["checkpoint"] = "all";
  s.knobs["tier"] = "tape";
  errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--tier"});
  EXPECT_EQ(errors[0].message, "--tier: unknown tier 'tape' (valid: host, disk, auto)");
  // A device model does not time the disk.
  s.knobs["tier"] = "host,disk";
  s.backend.device_model = "h100-sxm";
  errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--tier"});
  EXPECT_NE(errors[0].message.find("not the disk"), std::string::npos) << errors[0].message;
  s.backend.device_model.clear();
  EXPECT_TRUE(check(s).ok());
  // --predict-first records checkpointing and what is offloaded, on a device model's clock or
  // on this CPU's; the disk tier is measured.
  s.knobs["tier"] = "host";
  s.predict_first = true;
  s.backend.device_model = "h100-sxm";
  EXPECT_TRUE(check(s).ok());
  s.backend.device_model.clear();
  EXPECT_TRUE(check(s).ok());
  s.knobs["tier"] = "host,disk";
  errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--predict-first"});
  EXPECT_NE(errors[0].message.find("--tier disk"), std::string::npos) << errors[0].message;
  s.backend.backend = "cuda";
  s.knobs["tier"] = "host";
  ASSERT_EQ(fields_of(check(s).errors), std::vector<std::string>{"--predict-first"});
  RunRequest r;
  r.knobs["checkpoint"] = "none,all";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--checkpoint"});
  r.knobs["checkpoint"] = "every:3";
  r.knobs["offload_set"] = "boundaries";
  const auto config = to_engine_config(valid(r));
  EXPECT_EQ(offtune::to_string(config.checkpoint), "every:3");
  EXPECT_EQ(config.checkpoint, offtune::parse_checkpoint_policy("every:3"));
  EXPECT_EQ(config.offload_set, OffloadSet::Boundaries);
}

// Layer offloading: off or on:DEPTH (on is on:1), a list for a sweep; it needs frozen weights (a
// built-in decoder with --lora-rank); --lora-rank and --blocks apply to their own kinds of model.
TEST(Requests, LayerOffloadingNeedsLoraOnABuiltInDecoder) {
  SweepRequest s;
  s.knobs["min_offload_size"] = "1KiB";
  s.knobs["max_fwd_stash_size"] = "2";
  s.knobs["layer_offload"] = "off,on";
  auto errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--layer-offload"});
  EXPECT_NE(errors[0].message.find("--lora-rank R"), std::string::npos) << errors[0].message;
  s.workload.lora_rank = 8;
  EXPECT_TRUE(check(s).ok());
  const auto grid = to_grid(valid(s));
  EXPECT_EQ(grid.values("layer_offload"), names_of({"off", "on:1"}));
  EXPECT_EQ(point_count(valid(s)), 2 + 2);  // baseline, layers alone, then 2 variants x 1 pair
  EXPECT_EQ(to_workload(valid(s)).lora_rank, 8);
  for (const std::string bad : {"on:0", "on:x", "yes", "on:1,on", "on:65", "on:", "off,off"}) {
    s.knobs["layer_offload"] = bad;
    EXPECT_EQ(fields_of(check(s)), std::vector<std::string>{"--layer-offload"}) << bad;
  }
  s.knobs["layer_offload"] = "on:2";
  s.workload.model = "mlp";
  errors = check(s).errors;
  EXPECT_EQ(fields_of(errors), (std::vector<std::string>{"--lora-rank"}));
  s.workload.lora_rank = 0;
  errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--layer-offload"});
  EXPECT_NE(errors[0].message.find("built-in decoders"), std::string::npos) << errors[0].message;
  s.workload.model = "gpt-tiny";
  s.workload.lora_rank = -1;
  EXPECT_EQ(fields_of(check(s)), std::vector<std::string>{"--lora-rank"});
  s.workload.lora_rank = 4;
  s.predict_first = true;
  s.backend.device_model = "h100-sxm";
  errors = check(s).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--predict-first"});
  EXPECT_NE(errors[0].message.find("--layer-offload"), std::string::npos) << errors[0].message;
  // --blocks: TorchScript only.
  SweepRequest b;
  b.workload.blocks = "layers";
  EXPECT_EQ(fields_of(check(b)), std::vector<std::string>{"--blocks"});
  b.workload.model = "model.pt";
  EXPECT_TRUE(check(b).ok());
  // A run takes one value.
  RunRequest r;
  r.workload.lora_rank = 2;
  r.knobs["layer_offload"] = "off,on:1";
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--layer-offload"});
  r.knobs["layer_offload"] = "on";  // on is on:1: one block copied ahead
  EXPECT_EQ(to_engine_config(valid(r)).layer_offload, 1);
}

// --memory-history: a run's and a sweep's alike on host-sim, refused on cuda (both) and with a
// script (a sweep's); the sweep's reaches the spec that measures each point.
TEST(Requests, MemoryHistoryIsHostSimsForARunAndEveryPointOfASweep) {
  RunRequest run;
  run.memory_history = true;
  EXPECT_TRUE(check(run).ok());
  run.backend.backend = "cuda";
  EXPECT_EQ(fields_of(check(run)), std::vector<std::string>{"--memory-history"});
  SweepRequest sweep;
  sweep.memory_history = true;
  EXPECT_TRUE(check(sweep).ok());
  EXPECT_TRUE(prepare(valid(sweep)).spec.memory_history);
  sweep.backend.backend = "cuda";
  EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{"--memory-history"});
  sweep.backend.backend = "auto";
  sweep.script = "python train.py";
  const auto errors = check(sweep).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--memory-history"});
  EXPECT_NE(errors[0].message.find("memory_history=True"), std::string::npos) << errors[0].message;
}

TEST(Requests, RefineStepsAreZeroOrAStepCount) {
  SweepRequest r;
  EXPECT_EQ(r.refine_steps, kDefaultRefineSteps);
  r.refine_steps = 0;  // never
  EXPECT_TRUE(check(r).ok());
  r.refine_steps = -1;
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--refine-steps"});
  r.refine_steps = kRefineStepsRange.hi + 1;
  EXPECT_EQ(fields_of(check(r)), std::vector<std::string>{"--refine-steps"});
}

TEST(Requests, TheInputSpecFormsTheMessagesShowAreAccepted) {
  // Before: the help and the error both showed x:float32[B,F], which was refused.
  try {
    samples::parse_input_spec("x:float32[B,F]");
    FAIL() << "F is no dimension";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const auto at = what.find("x:float32[B,64]");
    ASSERT_NE(at, std::string::npos) << what;
    EXPECT_NO_THROW(samples::parse_input_spec("x:float32[B,64]"));
    EXPECT_NO_THROW(samples::parse_input_spec("tokens:int64[B,T]:vocab=512"));
  }
}

// A sweep of the default model on host-sim timed as an H100, one step per point: quick, and every
// figure exact.
SweepRequest modelled_sweep(const std::string& min_offload_sizes,
                            const std::string& max_fwd_stash_sizes) {
  SweepRequest r;
  r.backend.backend = "host-sim";
  r.backend.device_model = "h100";
  r.backend.threads = "1";
  r.workload.batch = 2;
  r.workload.seq = 64;
  r.workload.steps = 1;
  r.workload.warmup = 0;
  r.knobs["min_offload_size"] = min_offload_sizes;
  r.knobs["max_fwd_stash_size"] = max_fwd_stash_sizes;
  r.refine_steps = 0;
  return r;
}

// A predict-first sweep (the path both front ends run) keeps every grid point's prediction with
// the sweep, measured or not, by grid index; running the same sweep again on without predicting
// leaves them as they are.
TEST(Requests, APredictFirstSweepStoresEveryGridPointsPrediction) {
  SweepRequest r = modelled_sweep("1KiB:4MiB:x2", "1,2");
  r.predict_first = true;
  auto prepared = prepare(valid(r));
  auto store = profiler::make_memory_store();
  const auto outcome = execute(prepared, *store, {}, nullptr);
  ASSERT_FALSE(outcome.interrupted);
  ASSERT_TRUE(prepared.predictions.has_value());
  const auto& predicted = prepared.predictions->points;
  ASSERT_EQ(predicted.size(), 27u);

  const auto stored = store->predictions(outcome.sweep);
  ASSERT_EQ(stored.size(), predicted.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(stored[i].sweep, outcome.sweep);
    EXPECT_EQ(stored[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(stored[i].step_ns, predicted[i].step_ns) << i;
    EXPECT_EQ(stored[i].peak_allocated, predicted[i].peak_allocated) << i;
    EXPECT_EQ(stored[i].offloaded_bytes, predicted[i].offloaded_bytes) << i;
    EXPECT_EQ(stored[i].hidden_copy_pct, predicted[i].hidden_copy_pct) << i;
    // The predictor names what the prediction rests on.
    EXPECT_EQ(stored[i].predictor.rfind("what-if (host-sim modelling h100-sxm, 1 step recorded), "
                                        "offtune ",
                                        0),
              0u)
        << stored[i].predictor;
    EXPECT_GT(stored[i].created_unix_ns, 0);
  }
  // Fewer points measured than predicted: the predictions are all there is of the rest.
  const auto points = store->points(outcome.sweep);
  EXPECT_EQ(points.size(), prepared.predictions->chosen.size());
  EXPECT_LT(points.size(), stored.size());

  // The same sweep again without predicting measures the rest and keeps the predictions.
  SweepRequest rest = r;
  rest.predict_first = false;
  auto again = prepare(valid(rest));
  const auto second = execute(again, *store, {}, nullptr);
  EXPECT_EQ(second.sweep, outcome.sweep);
  EXPECT_EQ(store->points(outcome.sweep).size(), 27u);
  EXPECT_EQ(store->predictions(outcome.sweep), stored);
}

// Before the fix, the same sweep run again with another --device-capacity resumed the first one
// ("ran 0, skipped N (already measured)") and showed points measured under the other capacity.
TEST(Requests, TheDeviceCapacityIsPartOfTheSweepsIdentity) {
  const SweepRequest r = modelled_sweep("1KiB", "1");
  auto store = profiler::make_memory_store();
  const auto sweep_with = [&](const std::string& capacity) {
    SweepRequest c = r;
    c.backend.device_capacity = capacity;
    auto prepared = prepare(valid(c));
    const auto outcome = execute(prepared, *store, {}, nullptr);
    EXPECT_FALSE(outcome.interrupted);
    return outcome.sweep;
  };
  const auto large = sweep_with("1GiB");
  const auto small = sweep_with("512MiB");
  const auto unlimited = sweep_with("");  // also leaves host-sim unlimited for the next tests
  EXPECT_NE(large, small);
  EXPECT_NE(large, unlimited);
  EXPECT_NE(small, unlimited);
  EXPECT_EQ(sweep_with("1GiB"), large);  // the same capacity resumes the same sweep
  EXPECT_EQ(sweep_with(""), unlimited);
  EXPECT_EQ(store->sweeps().size(), 3u);
}

}  // namespace
}  // namespace offtune::requests

namespace offtune::requests {

// Engine options by name (the Python front end's keyword arguments, OFFTUNE_POINT): every field,
// sizes as the CLI writes them, one OptionsError naming a bad option.
namespace {
OffloadOptions engine_options(std::vector<requests::NamedOption> options) {
  return requests::parse_offload_options(options);
}
std::string engine_error(std::vector<requests::NamedOption> options) {
  try {
    (void)requests::parse_offload_options(options);
  } catch (const OptionsError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(Requests, EngineOptionsByNameTakeEveryFieldAndSizesAsTheCliWritesThem) {
  const auto names = requests::offload_option_names();
  for (const char* name :
       {"use_pin_memory", "min_offload_size", "max_fwd_stash_size", "max_fwd_stash_bytes",
        "prefetch", "backend", "tier", "link", "semantics", "offload", "poison_freed",
        "debug_copy_delay_ns", "verify"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  const OffloadOptions o = engine_options({{"min_offload_size", std::string("64KiB")},
                                           {"max_fwd_stash_size", int64_t{3}},
                                           {"max_fwd_stash_bytes", std::string("1.5MiB")},
                                           {"use_streams", false},
                                           {"host_ram_warn_percent", int64_t{70}},
                                           {"backend", std::string("host-sim")},
                                           {"semantics", std::string("trl")},
                                           {"link", std::string("pcie5")},
                                           {"verify", true}});
  EXPECT_EQ(o.min_offload_size, 64 * 1024);
  EXPECT_EQ(o.max_fwd_stash_size, 3);
  EXPECT_EQ(o.max_fwd_stash_bytes, 1536 * 1024);
  EXPECT_FALSE(o.use_streams);
  EXPECT_EQ(o.host_ram_warn_percent, 70.0);
  EXPECT_EQ(o.backend, BackendKind::HostSim);
  EXPECT_EQ(o.semantics, Semantics::Trl);
  EXPECT_EQ(o.link.pinned_gbps, LinkModel::pcie5().pinned_gbps);
  EXPECT_TRUE(o.verify);
  const auto layer = requests::parse_layer_offload_options({{"depth", int64_t{2}}});
  EXPECT_EQ(layer.depth, 2);
}

TEST(Requests, ABadEngineOptionIsOneLineNamingIt) {
  EXPECT_EQ(engine_error({{"min_offload_sise", int64_t{1}}})
                .rfind("unknown option 'min_offload_sise' (valid: min_offload_size, "
                       "max_fwd_stash_size,",
                       0),
            0u);
  EXPECT_EQ(
      engine_error({{"min_offload_size", std::string("64 KiBB")}}).rfind("min_offload_size: ", 0),
      0u);
  EXPECT_EQ(engine_error({{"max_fwd_stash_size", std::string("256MiB")}}),
            "max_fwd_stash_size counts tensors (a whole number), got the size '256MiB'; for a "
            "bound in bytes use max_fwd_stash_bytes='256MiB'");
  EXPECT_EQ(engine_error({{"use_streams", int64_t{1}}}), "use_streams takes True or False, got 1");
  EXPECT_EQ(engine_error({{"max_fwd_stash_size", int64_t{0}}}),
            "max_fwd_stash_size must be at least 1, got 0");
  EXPECT_EQ(engine_error({{"prefetch", int64_t{1}}, {"prefetch", int64_t{2}}}),
            "prefetch: given more than once (give it once)");
  EXPECT_EQ(engine_error({{"link", std::string("fast")}}).rfind("link: bad link 'fast'", 0), 0u);
  for (const auto& message :
       {engine_error({{"tier", std::string("tape")}}), engine_error({{"semantics", int64_t{3}}})}) {
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace offtune::requests

namespace offtune::requests {
namespace {

// Prefetch is an axis of a sweep as predict takes it: "0,1,2" crosses every offload point with
// each depth; one depth keeps the grid's JSON (hence the sweep's key) what it always was, so old
// sweeps resume. A run takes one depth.
TEST(Requests, PrefetchIsASweepAxisAndOneDepthKeepsTheGridAsItWas) {
  SweepRequest sweep;
  sweep.knobs["min_offload_size"] = "1KiB,1MiB";
  sweep.knobs["max_fwd_stash_size"] = "1,2";
  const auto plain = to_grid(valid(sweep));
  sweep.knobs["prefetch"] = "0,1,2";
  EXPECT_TRUE(check(sweep).ok()) << check(sweep).errors.front().message;
  const auto grid = to_grid(valid(sweep));
  EXPECT_EQ(grid.numbers("prefetch"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(point_count(valid(sweep)), 1 + 4 * 3);
  const auto configs = profiler::expand_grid(grid);
  ASSERT_EQ(static_cast<int64_t>(configs.size()), profiler::grid_size(grid));
  std::vector<int64_t> seen;
  for (const auto& c : configs) {
    if (c.offload && std::find(seen.begin(), seen.end(), c.prefetch) == seen.end()) {
      seen.push_back(c.prefetch);
    }
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
  // The grid's JSON round-trips the axis; without it the JSON has no such key.
  EXPECT_EQ(profiler::parse_grid_json(profiler::grid_json(grid)).numbers("prefetch"),
            grid.numbers("prefetch"));
  EXPECT_EQ(profiler::grid_json(plain).find("\"prefetch\":["), std::string::npos);
  sweep.knobs["prefetch"] = "1";
  EXPECT_EQ(profiler::grid_json(to_grid(valid(sweep))), profiler::grid_json(plain));
  // Bad lists name the flag; a run takes one depth.
  for (const std::string bad : {"0,65", "-1", "x"}) {
    sweep.knobs["prefetch"] = bad;
    EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{"--prefetch"}) << bad;
  }
  RunRequest run;
  run.knobs["prefetch"] = "0,1";
  EXPECT_EQ(fields_of(check(run)), std::vector<std::string>{"--prefetch"});
  run.knobs["prefetch"] = "2";
  EXPECT_EQ(to_engine_config(valid(run)).prefetch, 2);
}

}  // namespace
}  // namespace offtune::requests

namespace offtune::requests {
namespace {

// Parse once (issue 35 item 1): check() reads a device model file once; what it read is what the
// run and the sweep measure with, so that a file changed or removed after the check changes
// nothing (before, each conversion read the file again: up to 4 reads of one file per run).
TEST(Requests, ADeviceModelFileIsReadOnceByCheck) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("offtune_read_once_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = (dir / "gpu.json").string();
  {
    std::ofstream out(file);
    out << R"({"base": "h100-sxm", "title": "Read Once GPU", "memory_gbps": 2000})";
  }
  RunRequest run;
  run.workload.batch = 1;
  run.workload.seq = 16;
  run.backend.backend = "host-sim";
  run.backend.device_model = file;
  SweepRequest sweep;
  sweep.workload = run.workload;
  sweep.backend = run.backend;
  sweep.knobs["min_offload_size"] = "1KiB";
  sweep.knobs["max_fwd_stash_size"] = "1";
  const ValidRun checked_run = valid(run);
  const ValidSweep checked_sweep = valid(sweep);
  std::filesystem::remove_all(dir);  // after the check: nothing downstream may read it again
  const PreparedRun prepared = prepare(checked_run);
  EXPECT_NE(prepared.spec.env.device.find("modelling Read Once GPU"), std::string::npos)
      << prepared.spec.env.device;
  const PreparedSweep prepared_sweep = prepare(checked_sweep);
  ASSERT_TRUE(prepared_sweep.spec.device_model.has_value());
  EXPECT_EQ(prepared_sweep.spec.device_model->title, "Read Once GPU");
}

}  // namespace
}  // namespace offtune::requests

namespace offtune::requests {
namespace {

// Every engine knob is an axis of a sweep, as prefetch is: streams, pinned memory, the byte window
// and host-sim's link each take a list (crossed with every offload point), one value keeps the
// grid's JSON (hence the sweep's key) what it always was, a bad list names its flag, and a run
// takes one value. Before, the request had one bool per switch, one byte window for runs only and
// one link.
struct KnobAxis {
  std::string key;   // the request's knob (offtune/knobs.hpp)
  std::string flag;  // as the CLI names it in a message
  std::string list, one, bad;
  std::vector<std::string> seen;                        // the offload points' values, in order
  std::string (*value)(const profiler::EngineConfig&);  // a point's value as text
};

std::vector<KnobAxis> knob_axes() {
  return {
      {"use_streams",
       "--streams",
       "on,off",
       "on",
       "on,maybe",
       {"on", "off"},
       [](const profiler::EngineConfig& c) { return std::string(c.use_streams ? "on" : "off"); }},
      {"use_pin_memory",
       "--pin-memory",
       "off,on",
       "on",
       "on,on",
       {"off", "on"},
       [](const profiler::EngineConfig& c) {
         return std::string(c.use_pin_memory ? "on" : "off");
       }},
      {"max_fwd_stash_bytes",
       "--max-fwd-stash-bytes",
       "0,64KiB",
       "0",
       "0,12 parsecs",
       {"0", "65536"},
       [](const profiler::EngineConfig& c) { return std::to_string(c.max_fwd_stash_bytes); }},
      {"link",
       "--link",
       "pcie4,pcie5",
       "pcie4",
       "pcie4,fast",
       {"pcie4", "pcie5"},
       [](const profiler::EngineConfig& c) { return c.link.name; }},
  };
}

TEST(Requests, StreamsPinMemoryByteWindowAndLinkAreSweepAxesAndOneValueKeepsTheGridAsItWas) {
  for (const KnobAxis& axis : knob_axes()) {
    SCOPED_TRACE(axis.flag);
    SweepRequest sweep;
    sweep.knobs["min_offload_size"] = "1KiB,1MiB";
    sweep.knobs["max_fwd_stash_size"] = "1,2";
    const std::string plain = profiler::grid_json(to_grid(valid(sweep)));
    sweep.knobs[axis.key] = axis.list;
    ASSERT_TRUE(check(sweep).ok()) << check(sweep).errors.front().message;
    const auto grid = to_grid(valid(sweep));
    EXPECT_EQ(point_count(valid(sweep)), 1 + 4 * 2);
    const auto configs = profiler::expand_grid(grid);
    ASSERT_EQ(static_cast<int64_t>(configs.size()), profiler::grid_size(grid));
    // The axis is outside the sizes and windows: the first four offload points have the first
    // value, the next four the second.
    std::vector<std::string> seen;
    for (const auto& c : configs) {
      if (c.offload && (seen.empty() || seen.back() != axis.value(c))) {
        seen.push_back(axis.value(c));
      }
    }
    EXPECT_EQ(seen, axis.seen);
    // The grid's JSON round-trips the axis; one value leaves it as it was.
    const auto back = profiler::parse_grid_json(profiler::grid_json(grid));
    EXPECT_EQ(profiler::expand_grid(back), configs);
    sweep.knobs[axis.key] = axis.one;
    EXPECT_EQ(profiler::grid_json(to_grid(valid(sweep))), plain);
    sweep.knobs[axis.key] = axis.bad;
    EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{axis.flag});
    // A run takes one value.
    RunRequest run;
    run.knobs[axis.key] = axis.list;
    const auto errors = check(run).errors;
    ASSERT_EQ(fields_of(errors), std::vector<std::string>{axis.flag});
    EXPECT_EQ(errors.front().message,
              axis.flag + " takes one value for a run (a list is for sweep)");
  }
}

// A link model is host-sim's: a list of links on cuda is refused in one line naming --link, and a
// run over one link records it as before.
TEST(Requests, AListOfLinksIsRefusedOnCuda) {
  SweepRequest sweep;
  sweep.knobs["link"] = "pcie4,pcie5";
  sweep.backend.backend = "cuda";
  const auto errors = check(sweep).errors;
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--link"});
  EXPECT_NE(errors.front().message.find("host-sim only"), std::string::npos)
      << errors.front().message;
  sweep.knobs["link"] = "pcie5";
  EXPECT_TRUE(check(sweep).ok());
  RunRequest run;
  run.knobs["link"] = "pcie5";
  EXPECT_EQ(to_engine_config(valid(run)).link.name, "pcie5");
  EXPECT_EQ(to_backend(valid(run)).link.name, "pcie5");
}

}  // namespace
}  // namespace offtune::requests

namespace offtune::requests {
namespace {

// The line both front ends print of a finished sweep is one function's: the CLI and the dashboard
// used to write it each in its own words.
TEST(Requests, TheSweepSummaryIsOneLineForEveryFrontEnd) {
  profiler::SweepOutcome o;
  o.sweep = profiler::SweepId(3);
  o.ran = 4;
  o.skipped = 1;
  o.ok = 3;
  o.oom = 1;
  EXPECT_EQ(sweep_summary(o, 1),
            "sweep 3: ran 4, skipped 1 (already measured), ok 3, failed 0, out of memory 1");
  o.by_other = 2;
  o.repeated = 5;
  EXPECT_EQ(sweep_summary(o, 2),
            "sweep 3: ran 4, skipped 1 (already measured), ok 3, failed 0, out of memory 1, "
            "measured by another offtune process 2, runs of later rounds (--repeat 2) 5");
  // A bad request is refused by the one check both call, with every bad field.
  SweepRequest bad;
  bad.knobs["min_offload_size"] = "12 parsecs";
  bad.knobs["use_streams"] = "maybe";
  try {
    require_valid(bad);
    FAIL() << "require_valid accepted a bad request";
  } catch (const RequestError& e) {
    EXPECT_EQ(fields_of(e.errors()), (std::vector<std::string>{"--min-offload-size", "--streams"}));
  }
}

}  // namespace
}  // namespace offtune::requests

namespace offtune::requests {
namespace {

// --predict-first with a bad size list is one more bad field, not an exception out of check()
// (its rule expanded the grid from the lists even when a list had been refused).
TEST(Requests, PredictFirstWithABadSizeListIsAFieldError) {
  SweepRequest s;
  s.predict_first = true;
  s.backend.device_model = "h100-sxm";
  s.knobs["min_offload_size"] = "12 parsecs";
  Checked<ValidSweep> checked;
  ASSERT_NO_THROW(checked = check(s));
  EXPECT_EQ(fields_of(checked), std::vector<std::string>{"--min-offload-size"});
}

}  // namespace
}  // namespace offtune::requests
