// The request layer both front ends use (offtune/requests): one set of defaults, one message per
// bad field in the CLI's terms, the same checks for run and sweep, and conversions that parse every
// mode once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "offtune/profiler/sweep.hpp"
#include "offtune/requests/request.hpp"
#include "offtune/samples/registry.hpp"

namespace offtune::requests {
namespace {

std::vector<std::string> fields_of(const std::vector<FieldError>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.field);
  return out;
}

TEST(Requests, DefaultsAreValidAndShared) {
  EXPECT_TRUE(check(RunRequest{}).empty());
  EXPECT_TRUE(check(SweepRequest{}).empty());
  // A sweep's points share a run's defaults for every knob the sweep has no field for, so that a
  // sweep's key does not depend on which front end started it.
  const auto grid = to_grid(SweepRequest{});
  auto run_config = to_engine_config(RunRequest{});
  EXPECT_EQ(grid.base, run_config);
  EXPECT_EQ(grid.min_offload_sizes.front(), 1024);
  EXPECT_EQ(grid.max_fwd_stash_sizes, (std::vector<int64_t>{1, 2, 5}));
  EXPECT_EQ(point_count(SweepRequest{}),
            1 + static_cast<int64_t>(grid.min_offload_sizes.size()) * 3);
}

TEST(Requests, OneMessagePerBadFieldNamingTheFlag) {
  RunRequest r;
  r.workload.batch = 0;
  r.workload.dtype = "fp8";
  r.backend.link = "fast";
  r.min_offload_size = "12 parsecs";
  r.engine.prefetch = 65;
  const auto errors = check(r);
  EXPECT_EQ(fields_of(errors), (std::vector<std::string>{"--batch", "--dtype", "--link",
                                                         "--min-offload-size", "--prefetch"}));
  for (const auto& e : errors) {
    EXPECT_NE(e.message.find(e.field), std::string::npos) << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
  }
  EXPECT_NE(errors.back().message.find("between 0 and 64"), std::string::npos);
}

TEST(Requests, RunAndSweepCheckTheSharedFieldsAlike) {
  // --prefetch used to be checked for run only.
  for (const int64_t prefetch : {int64_t{-1}, int64_t{65}}) {
    RunRequest run;
    run.engine.prefetch = prefetch;
    SweepRequest sweep;
    sweep.engine.prefetch = prefetch;
    EXPECT_EQ(fields_of(check(run)), std::vector<std::string>{"--prefetch"});
    EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{"--prefetch"});
    EXPECT_EQ(check(run).front().message, check(sweep).front().message);
  }
  // A window of 0 is refused before anything runs, for run as for sweep.
  RunRequest run;
  run.max_fwd_stash_size = "0";
  EXPECT_EQ(fields_of(check(run)), std::vector<std::string>{"--max-fwd-stash-size"});
  SweepRequest sweep;
  sweep.max_fwd_stash_sizes = "0,1";
  EXPECT_EQ(fields_of(check(sweep)), std::vector<std::string>{"--max-fwd-stash-size"});
}

TEST(Requests, ModelNamesComeFromTheSamplesRegistry) {
  RunRequest r;
  for (const auto& name : samples::builtin_model_names()) {
    r.workload.model = name;
    EXPECT_TRUE(check(r).empty()) << name;
  }
  r.workload.model = "nosuch";
  const auto errors = check(r);
  ASSERT_EQ(fields_of(errors), std::vector<std::string>{"--model"});
  for (const auto& name : samples::builtin_model_names()) {
    EXPECT_NE(errors[0].message.find(name), std::string::npos) << errors[0].message;
  }
  // A TorchScript path is checked when it is loaded; its input spec now.
  r.workload.model = "model.pt";
  EXPECT_TRUE(check(r).empty());
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
  f.link = "12:15";
  f.device_capacity = "2MiB";
  f.collector = "nvtx-only";
  const Backend b = to_backend(f);
  EXPECT_EQ(b.kind, BackendKind::HostSim);
  EXPECT_DOUBLE_EQ(b.link.pinned_gbps, 12.0);
  EXPECT_EQ(b.link.latency_ns, 15000);
  EXPECT_EQ(b.link_name, "12:15");
  EXPECT_EQ(b.device_capacity, 2 << 20);
  EXPECT_EQ(b.collector, Collector::NvtxOnly);
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
  WorkloadFields w;
  w.dtype = "float16";
  EXPECT_EQ(to_workload(w).dtype, "fp16");
}

TEST(Requests, ConversionsRefuseAnInvalidRequestWithEveryMessage) {
  SweepRequest r;
  r.min_offload_sizes = "1KiB:1MiB:x1";
  r.shard = "3/2";
  try {
    to_grid(r);
    FAIL() << "to_grid accepted an invalid request";
  } catch (const RequestError& e) {
    EXPECT_EQ(fields_of(e.errors()), (std::vector<std::string>{"--min-offload-size", "--shard"}));
    EXPECT_EQ(std::string(e.what()), e.errors().front().message);
  }
  RunRequest run;
  run.max_fwd_stash_bytes = "-1";
  EXPECT_THROW(to_engine_config(run), RequestError);
}

TEST(Requests, RunConversionCarriesEveryKnob) {
  RunRequest r;
  r.min_offload_size = "64KiB";
  r.max_fwd_stash_size = "3";
  r.max_fwd_stash_bytes = "1MiB";
  r.engine.prefetch = 2;
  r.engine.no_streams = true;
  r.engine.no_pin_memory = true;
  r.backend.link = "none";
  const auto c = to_engine_config(r);
  EXPECT_TRUE(c.offload);
  EXPECT_EQ(c.min_offload_size, 64 << 10);
  EXPECT_EQ(c.max_fwd_stash_size, 3);
  EXPECT_EQ(c.max_fwd_stash_bytes, 1 << 20);
  EXPECT_EQ(c.prefetch, 2);
  EXPECT_FALSE(c.use_streams);
  EXPECT_FALSE(c.use_pin_memory);
  EXPECT_EQ(c.link, "none");
  r.no_offload = true;
  EXPECT_FALSE(to_engine_config(r).offload);
}

}  // namespace
}  // namespace offtune::requests
