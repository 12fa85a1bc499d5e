// host-sim's device model: the per-op formulas against hand-computed values, the roofline, the
// profiles and model files, the simulated clock as ATen ops and the engine's copies and waits drive
// it, and whole measured runs that give the same step time every time.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "offtune/device_model.hpp"
#include "offtune/host_sim.hpp"
#include "offtune/offloader.hpp"
#include "offtune/profiler/backend.hpp"
#include "offtune/profiler/recommend.hpp"
#include "offtune/profiler/runner.hpp"
#include "offtune/profiler/store.hpp"
#include "offtune/profiler/sweep.hpp"
#include "offtune/samples/registry.hpp"
#include "offtune/samples/workload.hpp"

namespace offtune {
namespace {

OpTensor f32(std::vector<int64_t> sizes) {
  OpTensor t;
  t.sizes = std::move(sizes);
  t.itemsize = 4;
  return t;
}

OpCall call(std::string name, std::vector<OpTensor> in, std::vector<OpTensor> out,
            bool flag = false) {
  OpCall c;
  c.name = std::move(name);
  c.inputs = std::move(in);
  c.outputs = std::move(out);
  c.flag = flag;
  return c;
}

// ---- formulas
// ------------------------------------------------------------------------------------

TEST(DeviceModelFormulas, MatmulsCountTwiceTheOutputTimesTheInnerDimension) {
  // [64,128] x [128,32]: 2 * 64 * 32 * 128 FLOPs; both operands read, the output written.
  const OpCost mm = op_cost(call("aten::mm", {f32({64, 128}), f32({128, 32})}, {f32({64, 32})}));
  EXPECT_EQ(mm.cls, OpClass::Matmul);
  EXPECT_DOUBLE_EQ(mm.flops, 524288.0);
  EXPECT_DOUBLE_EQ(mm.bytes, (64 * 128 + 128 * 32 + 64 * 32) * 4.0);
  EXPECT_FALSE(mm.low_precision);

  // addmm takes the bias first: K comes from the first matrix after it.
  const OpCost addmm =
      op_cost(call("aten::addmm", {f32({32}), f32({64, 128}), f32({128, 32})}, {f32({64, 32})}));
  EXPECT_DOUBLE_EQ(addmm.flops, 524288.0);
  EXPECT_DOUBLE_EQ(addmm.bytes, (32 + 64 * 128 + 128 * 32 + 64 * 32) * 4.0);

  const OpCost bmm =
      op_cost(call("aten::bmm", {f32({4, 64, 128}), f32({4, 128, 32})}, {f32({4, 64, 32})}));
  EXPECT_DOUBLE_EQ(bmm.flops, 4 * 524288.0);

  // linear on [2,10,128] with a [32,128] weight: 2 * (2*10*32) * 128.
  const OpCost linear = op_cost(
      call("aten::linear", {f32({2, 10, 128}), f32({32, 128}), f32({32})}, {f32({2, 10, 32})}));
  EXPECT_EQ(linear.cls, OpClass::Matmul);
  EXPECT_DOUBLE_EQ(linear.flops, 2.0 * 640 * 128);

  // addbmm sums a batch of 4 products into one [64,32] matrix: every product counts.
  const OpCost addbmm = op_cost(
      call("aten::addbmm", {f32({64, 32}), f32({4, 64, 128}), f32({4, 128, 32})}, {f32({64, 32})}));
  EXPECT_DOUBLE_EQ(addbmm.flops, 4 * 524288.0);

  OpTensor half = f32({64, 128});
  half.itemsize = 2;
  half.low_precision = true;
  EXPECT_TRUE(op_cost(call("aten::mm", {half, half}, {half})).low_precision);
}

TEST(DeviceModelFormulas, AttentionCountsBothProductsHalvedWhenCausal) {
  // q, k, v [B=2, H=4, L=128, E=64]: Q.K^T and P.V, 2*B*H*L*S*E each.
  const double full = 2.0 * (2.0 * 2 * 4 * 128 * 128 * 64);
  const auto q = f32({2, 4, 128, 64});
  const OpCost fwd = op_cost(
      call("aten::_scaled_dot_product_flash_attention_for_cpu", {q, q, q}, {q}, /*causal=*/false));
  EXPECT_EQ(fwd.cls, OpClass::Attention);
  EXPECT_DOUBLE_EQ(fwd.flops, full);
  const OpCost causal = op_cost(
      call("aten::_scaled_dot_product_flash_attention_for_cpu", {q, q, q}, {q}, /*causal=*/true));
  EXPECT_DOUBLE_EQ(causal.flops, full / 2);
  // The backward takes the output's gradient first, and costs 2.5 forwards.
  const OpCost bwd = op_cost(call("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                                  {q, q, q, q, q}, {q, q, q}, /*causal=*/true));
  EXPECT_DOUBLE_EQ(bwd.flops, 2.5 * full / 2);
  // Keys longer than queries (S = 256): the products grow with S.
  const OpCost cross = op_cost(call("aten::scaled_dot_product_attention",
                                    {q, f32({2, 4, 256, 64}), f32({2, 4, 256, 64})}, {q}));
  EXPECT_DOUBLE_EQ(cross.flops, 2 * full);
}

TEST(DeviceModelFormulas, MemoryOpsMoveWhatTheyReadAndWrite) {
  const OpCost add = op_cost(call("aten::add", {f32({1000}), f32({1000})}, {f32({1000})}));
  EXPECT_EQ(add.cls, OpClass::Memory);
  EXPECT_DOUBLE_EQ(add.flops, 1000.0);
  EXPECT_DOUBLE_EQ(add.bytes, 12000.0);

  // A broadcast operand (a scalar expanded to 1000 elements) reads its 4-byte storage once.
  OpTensor scalar = f32({1000});
  int storage = 0;
  scalar.storage = &storage;
  scalar.storage_bytes = 4;
  EXPECT_DOUBLE_EQ(op_cost(call("aten::mul", {f32({1000}), scalar}, {f32({1000})})).bytes,
                   4000.0 + 4.0 + 4000.0);

  // An embedding lookup reads the rows it returns and its indices, not the whole table.
  OpTensor ids;
  ids.sizes = {8, 128};
  ids.itemsize = 8;
  const OpCost emb =
      op_cost(call("aten::embedding", {f32({50000, 512}), ids}, {f32({8, 128, 512})}));
  EXPECT_DOUBLE_EQ(emb.bytes, 2.0 * 8 * 128 * 512 * 4 + 8 * 128 * 8);

  // Fills only write.
  OpTensor buf = f32({1000});
  buf.storage = &storage;
  EXPECT_DOUBLE_EQ(op_cost(call("aten::zero_", {buf}, {buf})).bytes, 4000.0);
}

TEST(DeviceModelFormulas, ViewsAndAliasesTakeNoTimeButInPlaceOpsDo) {
  EXPECT_EQ(op_cost(call("aten::view", {f32({4, 4})}, {f32({16})})).cls, OpClass::NoKernel);
  EXPECT_EQ(op_class_by_name("aten::transpose"), OpClass::NoKernel);
  EXPECT_EQ(op_class_by_name("aten::empty"), OpClass::NoKernel);
  int storage = 0;
  OpTensor in = f32({4, 4});
  in.storage = &storage;
  OpTensor out = f32({16});
  out.storage = &storage;
  // Not on the list of views, but its output is its input's storage: a view all the same.
  EXPECT_EQ(op_cost(call("aten::some_new_view", {in}, {out})).cls, OpClass::NoKernel);
  // An in-place op writes its input's storage: a kernel.
  const OpCost add_ = op_cost(call("aten::add_", {in, f32({4, 4})}, {in}));
  EXPECT_EQ(add_.cls, OpClass::Memory);
  EXPECT_DOUBLE_EQ(add_.bytes, 3 * 64.0);
}

TEST(DeviceModelFormulas, KernelTimeIsTheRooflinePlusTheKernelCost) {
  const DeviceModel h100 = device_model_named("h100");
  EXPECT_EQ(h100.name, "h100-sxm");
  // A 4096^3 fp32 matmul is compute-bound: 2*4096^3 FLOPs at 67 TFLOPS * 0.7.
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double bytes = 3.0 * 4096 * 4096 * 4;
  EXPECT_EQ(h100.kernel_ns(OpClass::Matmul, flops, bytes, false),
            2000 + std::llround(flops / (67.0 * 1e3 * 0.7)));
  // The same in bf16 runs on the tensor cores: 989 TFLOPS.
  EXPECT_EQ(h100.kernel_ns(OpClass::Matmul, flops, bytes / 2, true),
            2000 + std::llround(flops / (989.0 * 1e3 * 0.7)));
  // An elementwise op over 1 GiB in and out is bandwidth-bound: 2 GiB at 3350 GB/s * 0.8.
  const double gib = 1024.0 * 1024 * 1024;
  EXPECT_EQ(h100.kernel_ns(OpClass::Memory, gib / 4, 2 * gib, false),
            2000 + std::llround(2 * gib / (3350.0 * 0.8)));
  EXPECT_EQ(h100.kernel_ns(OpClass::NoKernel, flops, bytes, false), 0);
  // A slower part takes longer for the same work.
  EXPECT_GT(device_model_named("l4").kernel_ns(OpClass::Memory, 0, 2 * gib, false),
            h100.kernel_ns(OpClass::Memory, 0, 2 * gib, false));
}

TEST(DeviceModelProfiles, EveryProfileIsValidAndUnknownNamesListThem) {
  for (const auto& name : device_model_names()) {
    const DeviceModel m = device_model_named(name);
    EXPECT_NO_THROW(m.validate()) << name;
    EXPECT_FALSE(m.title.empty()) << name;
    EXPECT_FALSE(m.source.empty()) << name;
    EXPECT_GT(m.bf16_tflops, m.fp32_tflops) << name;
  }
  EXPECT_EQ(device_model_names().size(), 5u);
  try {
    device_model_named("h800");
    FAIL() << "expected OptionsError";
  } catch (const OptionsError& e) {
    EXPECT_NE(std::string(e.what()).find("h100-sxm, h200, a100-80gb, l4, rtx4090"),
              std::string::npos)
        << e.what();
  }
  DeviceModel bad = device_model_named("l4");
  bad.memory_efficiency = 0.0;
  EXPECT_THROW(bad.validate(), OptionsError);
  bad = device_model_named("l4");
  bad.fp32_tflops = -1;
  EXPECT_THROW(bad.validate(), OptionsError);
}

// ---- model files
// ---------------------------------------------------------------------------------

class DeviceModelFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const auto path =
        std::filesystem::temp_directory_path() /
        ("offtune-dm-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++) + ".json");
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path.string();
  }
  void TearDown() override {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  std::string error_of(const std::string& spec) {
    try {
      profiler::load_device_model(spec);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }

 private:
  int counter_ = 0;
  std::vector<std::filesystem::path> paths_;
};

TEST_F(DeviceModelFile, ABaseProfileWithChangedFieldsOrAFullModel) {
  const DeviceModel m = profiler::load_device_model(
      write(R"({"base": "h100", "memory_gbps": 2000, "title": "capped H100"})"));
  EXPECT_EQ(m.title, "capped H100");
  EXPECT_DOUBLE_EQ(m.memory_gbps, 2000);
  EXPECT_DOUBLE_EQ(m.bf16_tflops, 989);  // from the base
  const DeviceModel full = profiler::load_device_model(write(
      R"({"fp32_tflops": 10, "bf16_tflops": 80, "memory_gbps": 500, "kernel_overhead_ns": 5000,
          "memory_efficiency": 0.9})"));
  EXPECT_DOUBLE_EQ(full.fp32_tflops, 10);
  EXPECT_EQ(full.kernel_overhead_ns, 5000);
  EXPECT_DOUBLE_EQ(full.memory_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(full.matmul_efficiency, 0.7);  // the default
  EXPECT_EQ(profiler::load_device_model("a100").name, "a100-80gb");
  // What the process holds besides its tensors: the profile's, or the file's.
  EXPECT_EQ(m.context_bytes, device_model_named("h100").context_bytes);
  EXPECT_EQ(m.blas_workspace_bytes, 32 << 20);
  const DeviceModel measured = profiler::load_device_model(
      write(R"({"base": "h100", "context_bytes": 536870912, "blas_workspace_bytes": 0})"));
  EXPECT_EQ(measured.context_bytes, 536870912);
  EXPECT_EQ(measured.blas_workspace_bytes, 0);
  EXPECT_NE(error_of(write(R"({"base": "h100", "context_bytes": -1})")).find("context_bytes"),
            std::string::npos);
}

// torch's default cuBLAS workspace per (handle, stream) by compute capability, and its reading of
// CUBLAS_WORKSPACE_CONFIG (CublasHandlePool.cpp of the pinned torch): the sum of SIZE KiB x COUNT
// over ":SIZE:COUNT" pairs, anything else in the value skipped.
TEST(DeviceModelWorkspace, TorchsDefaultsAndItsReadingOfCublasWorkspaceConfig) {
  EXPECT_EQ(device_model_named("h100").blas_workspace_bytes, 32 << 20);  // sm 9.0
  EXPECT_EQ(device_model_named("h200").blas_workspace_bytes, 32 << 20);  // sm 9.0
  EXPECT_EQ(device_model_named("a100").blas_workspace_bytes, 8519680);   // :4096:2:16:8
  EXPECT_EQ(device_model_named("l4").blas_workspace_bytes, 8519680);     // sm 8.9
  EXPECT_EQ(device_model_named("rtx4090").blas_workspace_bytes, 8519680);
  for (const auto& name : device_model_names()) {
    EXPECT_GT(device_model_named(name).context_bytes, 0) << name;
  }
  EXPECT_EQ(parse_cublas_workspace_config(":4096:8"), 4096 * 1024 * 8);
  EXPECT_EQ(parse_cublas_workspace_config(":4096:2:16:8"), 8519680);
  EXPECT_EQ(parse_cublas_workspace_config(":16:8"), 16 * 1024 * 8);
  EXPECT_EQ(parse_cublas_workspace_config("x:16:8y:4096:1"), 16 * 1024 * 8 + 4096 * 1024);
  EXPECT_EQ(parse_cublas_workspace_config(":0:0"), 0);
  EXPECT_EQ(parse_cublas_workspace_config("4096:8"), -1);
  EXPECT_EQ(parse_cublas_workspace_config(":4096"), -1);
  EXPECT_EQ(parse_cublas_workspace_config(""), -1);
  EXPECT_EQ(parse_cublas_workspace_config(":99999999999:1"), -1) << "absurd: not taken";
}

TEST_F(DeviceModelFile, BadFilesAreOneLineNamingTheFileAndTheField) {
  EXPECT_NE(
      error_of(write(R"({"base": "h100", "memory_gbs": 1})")).find("unknown field 'memory_gbs'"),
      std::string::npos);
  EXPECT_NE(
      error_of(write(R"({"fp32_tflops": 10, "memory_gbps": 500})")).find("bf16_tflops is missing"),
      std::string::npos);
  EXPECT_NE(error_of(write(R"({"base": "h100", "memory_gbps": "fast"})")).find("must be a number"),
            std::string::npos);
  EXPECT_NE(
      error_of(write(R"({"base": "h100", "matmul_efficiency": 1.5})")).find("matmul_efficiency"),
      std::string::npos);
  EXPECT_NE(error_of(write("not json")).find("not JSON"), std::string::npos);
  EXPECT_NE(error_of(write("[1, 2]")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/dir/m.json").find("cannot read device model file"),
            std::string::npos);
  EXPECT_NE(error_of("h800").find("unknown device model 'h800'"), std::string::npos);
  for (const auto& spec : {write(R"({"base": "h100", "memory_gbs": 1})"), std::string("h800")}) {
    EXPECT_EQ(error_of(spec).find('\n'), std::string::npos);
  }
}

// ---- the clock
// -----------------------------------------------------------------------------------

class DeviceModelClock : public ::testing::Test {
 protected:
  void SetUp() override {
    host_sim::install();
    model_ = device_model_named("h100");
    host_sim::set_device_model(&model_);
  }
  void TearDown() override { host_sim::set_device_model(nullptr); }
  DeviceModel model_;
};

TEST_F(DeviceModelClock, EachOpAdvancesTheClockByItsModelledTimeAndViewsByNothing) {
  const at::Tensor a = at::ones({64, 128});
  const at::Tensor b = at::ones({128, 32});
  const at::Tensor w = at::ones({32, 128});
  const at::Tensor bias = at::ones({32});

  int64_t t0 = host_sim::clock_ns();
  auto k0 = host_sim::model_counters().kernels;
  const at::Tensor c = at::mm(a, b);
  EXPECT_EQ(
      host_sim::clock_ns() - t0,
      model_.kernel_ns(OpClass::Matmul, 524288.0, (64 * 128 + 128 * 32 + 64 * 32) * 4.0, false));
  EXPECT_EQ(host_sim::model_counters().kernels - k0, 1);

  // A view launches nothing.
  t0 = host_sim::clock_ns();
  const at::Tensor v = c.view({-1}).t().unsqueeze(0);
  EXPECT_EQ(host_sim::clock_ns(), t0);

  // linear calls addmm (and views) inside: one matmul kernel, as cuBLAS would run it.
  t0 = host_sim::clock_ns();
  k0 = host_sim::model_counters().kernels;
  const at::Tensor y = at::linear(a, w, bias);
  EXPECT_EQ(host_sim::model_counters().kernels - k0, 1);
  EXPECT_EQ(host_sim::clock_ns() - t0,
            model_.kernel_ns(OpClass::Matmul, 2.0 * 64 * 32 * 128,
                             (64 * 128 + 32 * 128 + 32 + 64 * 32) * 4.0, false));

  // zeros is empty + zero_: one write-only kernel.
  t0 = host_sim::clock_ns();
  k0 = host_sim::model_counters().kernels;
  const at::Tensor z = at::zeros({1000});
  EXPECT_EQ(host_sim::model_counters().kernels - k0, 1);
  EXPECT_EQ(host_sim::clock_ns() - t0, model_.kernel_ns(OpClass::Memory, 1000.0, 4000.0, false));
  EXPECT_EQ(y.size(1), 32);
  EXPECT_EQ(v.dim(), 2);
}

TEST_F(DeviceModelClock, ReservedMemoryIsWhatCudasCachingAllocatorWouldHold) {
  host_sim::empty_cache();
  const auto before = host_sim::counters();
  {
    // On a stream of their own, so that no block cached by an earlier test can serve them. 400
    // bytes: one 2 MiB small segment; 3 MiB: a 20 MiB large segment.
    host_sim::StreamGuard stream(host_sim::new_stream());
    const at::Tensor a = at::empty({100});
    const at::Tensor b = at::empty({3 << 18});
    const auto c = host_sim::counters();
    EXPECT_EQ(c.modelled_reserved - before.modelled_reserved, (2 << 20) + (20 << 20));
    EXPECT_EQ(c.allocated - before.allocated, 400 + (3 << 20));
  }
  // Freed tensors stay cached, as on a GPU, until empty_cache.
  EXPECT_EQ(host_sim::counters().modelled_reserved - before.modelled_reserved, 22 << 20);
  host_sim::empty_cache();
  EXPECT_LE(host_sim::counters().modelled_reserved, before.modelled_reserved);
}

TEST_F(DeviceModelClock, WithoutAModelTheClockIsTheSteadyClock) {
  host_sim::set_device_model(nullptr);
  EXPECT_EQ(host_sim::device_model(), nullptr);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  EXPECT_LT(std::llabs(host_sim::clock_ns() - now), int64_t{1'000'000'000});
  const auto k0 = host_sim::model_counters().kernels;
  (void)at::ones({10}).add(1);
  EXPECT_EQ(host_sim::model_counters().kernels, k0);  // nothing timed
}

// A chain of sin under an offloader: step time on the simulated clock.
struct ChainResult {
  int64_t step_ns = 0;
  int64_t kernel_ns = 0;
  int64_t stalled_ns = 0;
  int64_t offloaded_bytes = 0;
  int64_t copied_bytes = 0;  // both ways
  at::Tensor grad;
};
ChainResult run_chain(const LinkModel& link, int64_t window) {
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.min_offload_size = 0;
  o.max_fwd_stash_size = window;
  o.prefetch = 1;
  o.link = link;
  ActivationOffloader off(o);
  at::Tensor x = at::linspace(0, 1, 4096).requires_grad_(true);
  off.synchronize();
  const auto before = host_sim::model_counters();
  const int64_t t0 = host_sim::clock_ns();
  at::Tensor loss;
  {
    auto scope = off.scope();
    at::Tensor h = x * 2;
    for (int i = 0; i < 16; ++i) h = h.sin();
    loss = h.sum();
  }
  loss.backward();
  off.synchronize();
  const auto after = host_sim::model_counters();
  return {host_sim::clock_ns() - t0,
          after.kernel_ns - before.kernel_ns,
          after.stalled_ns - before.stalled_ns,
          off.stats().offloaded_bytes,
          off.stats().offloaded_bytes + off.stats().reloaded_bytes,
          x.grad().clone()};
}

TEST_F(DeviceModelClock, CopiesAndWaitsJoinTheComputeAndCopyClocks) {
  // No link cost: copies take no time, the step is its kernels.
  const ChainResult free = run_chain(LinkModel{}, 1);
  EXPECT_GT(free.offloaded_bytes, 16 * 16384 - 1);
  EXPECT_EQ(free.stalled_ns, 0);
  EXPECT_EQ(free.step_ns, free.kernel_ns);

  // A 1 GB/s link (a byte a nanosecond): every copy goes through one copy stream, D2H and H2D, so
  // the step lasts at least as long as they do, and every nanosecond beyond the kernels is a
  // wait on a copy.
  const ChainResult slow = run_chain(LinkModel{1.0, 0.0, 0}, 1);
  EXPECT_EQ(slow.kernel_ns, free.kernel_ns);
  EXPECT_GT(slow.copied_bytes, slow.offloaded_bytes);
  EXPECT_GE(slow.step_ns, slow.copied_bytes);
  EXPECT_GT(slow.stalled_ns, 0);
  EXPECT_EQ(slow.step_ns, slow.kernel_ns + slow.stalled_ns);
  EXPECT_TRUE(at::equal(slow.grad, free.grad));  // time is modelled; values are real

  // A wider window lets forward run ahead of the copies: never slower.
  const ChainResult wide = run_chain(LinkModel{1.0, 0.0, 0}, 8);
  EXPECT_LE(wide.step_ns, slow.step_ns);

  // The same again: the same simulated time to the nanosecond.
  EXPECT_EQ(run_chain(LinkModel{1.0, 0.0, 0}, 1).step_ns, slow.step_ns);
}

// ---- measured runs
// -------------------------------------------------------------------------------

profiler::RunSpec tiny_run(int64_t min_offload_size) {
  profiler::RunSpec spec;
  spec.workload.model = "tiny";
  spec.workload.batch = 2;
  spec.workload.seq = 32;
  spec.workload.dtype = "fp32";
  spec.workload.steps = 3;
  spec.workload.warmup = 1;
  spec.config.offload = true;
  spec.config.min_offload_size = min_offload_size;
  spec.config.max_fwd_stash_size = 2;
  spec.base.backend = BackendKind::HostSim;
  spec.base.link = LinkModel::pcie4();
  spec.env.backend = "host-sim";
  return spec;
}

profiler::RunSummary measure(const profiler::RunSpec& spec, int threads) {
  at::set_num_threads(threads);
  samples::WorkloadSpec w;
  w.model = spec.workload.model;
  w.batch = spec.workload.batch;
  w.seq = spec.workload.seq;
  auto workload = samples::make_workload(w, c10::kCPU);
  auto store = profiler::make_memory_store();
  const auto out = profiler::run_measured(*workload, spec, *store);
  EXPECT_EQ(out.record.status, profiler::RunStatus::Ok) << out.record.error;
  return out.record.summary;
}

TEST_F(DeviceModelClock, AMeasuredRunTakesTheSameTimeEveryTimeAndOnAnyThreadCount) {
  const auto spec = tiny_run(1024);
  const auto a = measure(spec, 1);
  const auto b = measure(spec, 2);
  const auto c = measure(spec, 1);
  EXPECT_GT(a.step_ms_median, 0.0);
  EXPECT_EQ(a.step_ms_median, b.step_ms_median);
  EXPECT_EQ(a.step_ms_median, c.step_ms_median);
  EXPECT_EQ(a.step_ms_ci_low, a.step_ms_ci_high);  // every step the same
  EXPECT_EQ(a.hidden_copy_pct, b.hidden_copy_pct);
  // Reserved is CUDA's caching allocator's: whole segments, at least the peak allocated.
  EXPECT_GE(a.peak_reserved, a.peak_allocated);
  EXPECT_EQ(a.peak_reserved % 512, 0);
  EXPECT_EQ(a.peak_reserved, c.peak_reserved);
  // Peak memory is exact for one thread count; CPU kernels' scratch buffers (a parallel
  // reduction's partial sums) count as device memory on host-sim, so another count may move it by
  // a few hundred bytes.
  EXPECT_EQ(a.peak_allocated, c.peak_allocated);
  EXPECT_LT(std::llabs(a.peak_allocated - b.peak_allocated), int64_t{16384});
  // Offloading over PCIe 4 costs time on a GPU this fast; keeping everything does not.
  const auto kept = measure(tiny_run(int64_t{1} << 40), 1);
  EXPECT_LT(kept.step_ms_median, a.step_ms_median);
  // Each run starts from an empty allocator cache: what a bigger run before it left cached does
  // not count.
  auto big = tiny_run(int64_t{1} << 40);
  big.workload.batch = 8;
  big.workload.seq = 128;
  EXPECT_GT(measure(big, 1).peak_reserved, a.peak_reserved);
  EXPECT_EQ(measure(spec, 1).peak_reserved, a.peak_reserved);
  // Another GPU, another time.
  const DeviceModel l4 = device_model_named("l4");
  host_sim::set_device_model(&l4);
  EXPECT_NE(measure(spec, 1).step_ms_median, a.step_ms_median);
}

TEST(DeviceModelSweep, TheModelIsPartOfTheSweepsIdentity) {
  profiler::Workload w;
  w.model = "tiny";
  profiler::Grid g;
  g.set_numbers("min_offload_size", {1024});
  g.set_numbers("max_fwd_stash_size", {1});
  OffloadOptions base;
  const DeviceModel h100 = device_model_named("h100");
  DeviceModel other = h100;
  other.memory_gbps = 1000;
  const auto none = profiler::sweep_key(w, g, base);
  EXPECT_EQ(profiler::sweep_key(w, g, base, {}, nullptr), none);  // keys without a model unchanged
  EXPECT_NE(profiler::sweep_key(w, g, base, {}, &h100), none);
  EXPECT_NE(profiler::sweep_key(w, g, base, {}, &other),
            profiler::sweep_key(w, g, base, {}, &h100));
}

profiler::PointRecord exact_point(int64_t index, bool offload, double ms, int64_t peak) {
  profiler::PointRecord p;
  p.index = index;
  p.config.offload = offload;
  p.config.min_offload_size = 1024 * index;
  p.config.max_fwd_stash_size = 1;
  p.status = profiler::PointStatus::Ok;
  p.summary.step_ms_median = p.summary.step_ms_min = p.summary.step_ms_max = ms;
  p.summary.step_ms_ci_low = p.summary.step_ms_ci_high = ms;
  p.summary.step_ms_ci_level = 0.75;
  p.summary.peak_allocated = peak;
  p.summary.peak_reserved = peak;
  p.summary.offloaded_bytes = offload && peak < 100 ? 1 << 20 : 0;
  return p;
}

TEST(DeviceModelSweep, ADeterministicSweepHasNoNoiseOnlyTies) {
  // Modelled: every interval has zero width.
  std::vector<profiler::PointRecord> points = {
      exact_point(0, false, 10.0, 100), exact_point(1, true, 11.0, 50),
      exact_point(2, true, 11.0, 50), exact_point(3, true, 10.0, 100)};
  const auto r = profiler::recommend(points, profiler::Constraint{});
  EXPECT_TRUE(r.noise.deterministic);
  EXPECT_NE(r.noise.describe().find("every difference in step time is real"), std::string::npos);
  ASSERT_TRUE(r.chosen);
  EXPECT_EQ(r.chosen->index, 1);
  ASSERT_EQ(r.ties.size(), 1u);  // point 2: exactly the same
  EXPECT_NE(r.rationale.find("A tie: 1 other point takes exactly the same modelled time"),
            std::string::npos)
      << r.rationale;
  EXPECT_EQ(r.rationale.find("noise"), std::string::npos) << r.rationale;

  // One point measured by a clock (a real interval): not deterministic.
  points[1].summary.step_ms_ci_low = 10.5;
  EXPECT_FALSE(profiler::recommend(points, profiler::Constraint{}).noise.deterministic);
}

}  // namespace
}  // namespace offtune
