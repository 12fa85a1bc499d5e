// The cuda backend on a real GPU (skipped elsewhere): same gradients, resting state, device memory
// from the caching allocator, copies on the side stream. Run by scripts/gpu-check.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <chrono>
#include <thread>

#include "offtune/model_support.hpp"
#include "offtune/requests/execute.hpp"
#include "offtune/samples/llama.hpp"
#include "offtune/samples/workload.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

OffloadOptions cuda_options(int64_t window = 2, bool streams = true, bool pinned = true) {
  OffloadOptions o;
  o.backend = BackendKind::Cuda;
  o.min_offload_size = 0;
  o.max_fwd_stash_size = window;
  o.use_streams = streams;
  o.use_pin_memory = pinned;
  return o;
}

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "No GPU available";
  }
};

TEST_F(Cuda, MlpGradientsIdenticalAcrossModes) {
  for (bool streams : {true, false}) {
    for (bool pinned : {true, false}) {
      for (int64_t window : {1, 5}) {
        for (int64_t delay_ns : {int64_t{0}, int64_t{2'000'000}}) {
          OffloadOptions opts = cuda_options(window, streams, pinned);
          opts.debug_copy_delay_ns = delay_ns;  // a missing wait has 2 ms to show
          opts.prefetch = window == 1 ? 0 : 2;
          ActivationOffloader off(opts);
          ASSERT_EQ(off.backend(), BackendKind::Cuda);
          torch::manual_seed(0);
          const auto o = torch::TensorOptions().device(torch::kCUDA);
          auto w1 = torch::randn({256, 512}, o.requires_grad(true));
          auto w2 = torch::randn({512, 256}, o.requires_grad(true));
          auto x = torch::randn({128, 256}, o);
          SCOPED_TRACE(testing::Message() << "streams=" << streams << " pinned=" << pinned
                                          << " window=" << window << " delay_ns=" << delay_ns);
          expect_identical_step(
              [&] { return torch::gelu(x.matmul(w1)).matmul(w2).sin().pow(2).mean(); }, {w1, w2},
              off);
          EXPECT_GT(off.stats().offloaded, 0);
          EXPECT_EQ(off.stats().pageable_fallbacks, 0);
        }
      }
    }
  }
}

TEST_F(Cuda, DecoderStepsMatchAndPeakDrops) {
  samples::LlamaConfig c = samples::LlamaConfig::preset("small");
  samples::Llama model(c, 1);
  model->to(torch::kCUDA);
  OffloadOptions o;
  o.backend = BackendKind::Cuda;
  auto setup = make_offloader_for(*model, o);
  ActivationOffloader& off = *setup.offloader;
  const auto batch = samples::make_token_batch(4, 256, c.vocab_size, 2, torch::kCUDA);
  auto run = [&](bool offload, int64_t& peak) {
    torch::cuda::synchronize();
    off.reset_peak_device_memory();
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (offload) scope.emplace(off.scope());
      loss = samples::lm_loss(model->forward(batch.tokens), batch.targets);
    }
    loss.backward();
    torch::cuda::synchronize();
    peak = off.device_memory().peak_allocated;
    std::vector<at::Tensor> grads;
    for (auto& p : model->parameters()) grads.push_back(p.grad().clone());
    model->zero_grad();
    return std::make_pair(loss.detach(), grads);
  };
  int64_t base_peak = 0, off_peak = 0;
  run(false, base_peak);
  auto ref = run(false, base_peak);
  auto got = run(true, off_peak);
  // Attention kernels may pick different (non-deterministic) backward paths: compare closely, not
  // bitwise.
  EXPECT_TRUE(torch::allclose(ref.first, got.first, 1e-4, 1e-5));
  for (size_t i = 0; i < ref.second.size(); ++i) {
    EXPECT_TRUE(torch::allclose(ref.second[i], got.second[i], 1e-3, 1e-5)) << "grad " << i;
  }
  std::cout << "decoder small b4 s256: peak " << base_peak / (1 << 20) << " MiB -> "
            << off_peak / (1 << 20) << " MiB\n";
  EXPECT_LT(off_peak, base_peak);
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

TEST_F(Cuda, ComputeStreamResolvedAtEachUse) {
  ActivationOffloader off(cuda_options());
  torch::manual_seed(1);
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  auto w = torch::randn({256, 256}, o.requires_grad(true));
  auto x = torch::randn({64, 256}, o);
  auto side = c10::cuda::getStreamFromPool();
  {
    // Forward on a user stream: the engine must order its copies after *that* stream's work.
    c10::cuda::CUDAStreamGuard guard(side);
    expect_identical_step([&] { return x.matmul(w).tanh().matmul(w).sin().sum(); }, {w}, off);
  }
  EXPECT_GT(off.stats().offloaded, 0);
}

// Hardening on a real GPU: the cases host-sim's emulator checks, here with real streams and copies
// held back on the copy stream so that a missing wait shows as wrong values.
TEST_F(Cuda, WindowReleaseOnAnotherStreamKeepsTheBlockUntilTheCopyReadIt) {
  OffloadOptions o = cuda_options(/*window=*/1);
  o.debug_copy_delay_ns = 5'000'000;
  ActivationOffloader off(o);
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::randn({512, 512}, opts.requires_grad(true));
  auto s1 = c10::cuda::getStreamFromPool(), s2 = c10::cuda::getStreamFromPool();
  auto forward = [&] {
    at::Tensor b, c;
    {
      c10::cuda::CUDAStreamGuard on(s1);
      b = x.mul(2).sin();
    }
    c10::cuda::CUDAEvent b_ready;
    b_ready.record(s1);
    b_ready.block(s2);  // b crosses streams: the user's part of the bargain
    {
      c10::cuda::CUDAStreamGuard on(s2);
      c = b.cos();  // saves b: the window lets x*2 (stream 1's block) go while stream 2 is current
    }
    c10::cuda::CUDAEvent c_ready;
    c_ready.record(s2);
    c_ready.block(s1);
    {
      c10::cuda::CUDAStreamGuard on(s1);
      auto reuse = torch::full({512, 512}, 7.0, opts);
      c = c + reuse.sum() * 0;
    }
    torch::cuda::synchronize();
    return c.sum();
  };
  expect_identical_step(forward, {x}, off);
}

TEST_F(Cuda, InPlaceChangeOfASavedTensorRaises) {
  for (const int64_t threshold : {int64_t{0}, int64_t{1} << 40}) {
    OffloadOptions o = cuda_options();
    o.min_offload_size = threshold;
    ActivationOffloader off(o);
    auto x =
        torch::randn({64, 64}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
    at::Tensor y;
    {
      auto scope = off.scope();
      auto h = x.mul(2);
      y = h.sin();
      h.add_(1);
    }
    EXPECT_THROW(y.sum().backward(), c10::Error);
    x.mutable_grad().reset();
  }
}

TEST_F(Cuda, TensorsSavedDuringBackwardOnDeviceThreadsAreOffloaded) {
  // Backward runs on autograd's device thread on cuda: its saves (create_graph) must still reach
  // the graph's offloader, as on host-sim.
  ActivationOffloader off(cuda_options(/*window=*/2));
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(3);
  auto w = torch::randn({256, 256}, opts.requires_grad(true));
  auto x = torch::randn({128, 256}, opts);
  auto run = [&](ActivationOffloader* o) {
    at::Tensor loss;
    {
      std::optional<OffloadScope> scope;
      if (o) scope.emplace(o->scope());
      loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();
    }
    auto g = torch::autograd::grad({loss}, {w}, {}, true, true)[0];
    auto total = loss + g.pow(2).sum();
    total.backward();
    auto out = w.grad().clone();
    w.mutable_grad().reset();
    return out;
  };
  const auto reference = run(nullptr);
  int64_t forward_packs = 0;
  {
    auto scope = off.scope();
    auto loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();
    forward_packs = off.stats().packed;
  }
  const auto got = run(&off);
  EXPECT_TRUE(torch::allclose(reference, got, 1e-4, 1e-5));
  EXPECT_GT(off.stats().packed, 2 * forward_packs);
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

TEST_F(Cuda, TensorsOnAnotherGpuStayWhereTheyAre) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  OffloadOptions o = cuda_options();
  o.device_index = 0;
  ActivationOffloader off(o);
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  auto x =
      torch::randn({64, 64}, torch::TensorOptions().device(torch::kCUDA, 1).requires_grad(true));
  expect_identical_step([&] { return x.mul(2).sin().sum(); }, {x}, off);
  EXPECT_EQ(off.stats().offloaded, 0);
  bool other = false;
  for (const auto& p : obs->packs) other = other || p.reason == KeepReason::OtherDevice;
  EXPECT_TRUE(other);
}

// The race tests rely on debug_copy_delay_ns really holding each side-stream copy back: a copy
// issued with a 50 ms delay completes no sooner than 50 ms after it was issued.
TEST_F(Cuda, TheCopyDelayHoldsEachCopyBack) {
  OffloadOptions o = cuda_options(/*window=*/100);
  o.debug_copy_delay_ns = 50'000'000;
  ActivationOffloader off(o);
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  auto x =
      torch::randn({256, 256}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = x.mul(1).sin().sum();
  }
  off.synchronize();
  {
    std::lock_guard<std::mutex> l(obs->mutex);
    ASSERT_FALSE(obs->completed.empty());
    for (const auto& c : obs->completed) EXPECT_GE(c.time_ns - c.issued_ns, 45'000'000);
  }
  loss.backward();
}

TEST_F(Cuda, CopyCompletionsCarryTheTimeTheCopyFinished) {
  OffloadOptions o = cuda_options(/*window=*/100);
  ActivationOffloader off(o);
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  auto x =
      torch::randn({4096, 4096}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = x.mul(1).sin().sum();  // one 64 MiB copy: a few ms on any link
  }
  torch::cuda::synchronize();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t noticed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
  off.synchronize();
  {
    std::lock_guard<std::mutex> l(obs->mutex);
    ASSERT_FALSE(obs->completed.empty());
    for (const auto& c : obs->completed) {
      EXPECT_GT(c.time_ns, c.issued_ns);
      EXPECT_LT(c.time_ns, noticed - 100'000'000) << "stamped when noticed, not when done";
    }
  }
  loss.backward();
  x.mutable_grad().reset();
}

// Layer offloading: a block's device copies are prefetched on one stream (the one current when the
// block before it was entered) and read on another; when the block is left, its blocks must not go
// back to the first stream's pool while the second still reads them.
TEST_F(Cuda, LayerOffloadKeepsABlockUntilEveryStreamThatReadItIsDone) {
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(5);
  std::vector<at::Tensor> w, values;
  for (int i = 0; i < 3; ++i) {
    w.push_back(torch::randn({1024, 1024}, opts));  // 4 MiB a block
    values.push_back(w.back().clone());
  }
  LayerOffloadOptions lo;
  lo.backend = BackendKind::Cuda;
  LayerOffloader layers(lo);
  for (const at::Tensor& t : w) layers.add_block({t});
  c10::cuda::CUDACachingAllocator::emptyCache();
  const auto side = c10::cuda::getStreamFromPool();
  at::Tensor read;
  layers.enter(0);  // on the default stream: prefetches block 1 there
  layers.exit(0);
  {
    c10::cuda::CUDAStreamGuard on(side);
    layers.enter(1);
    at::cuda::sleep(int64_t{200'000'000});  // ~100 ms: block 1 is read well after it is left
    read = w[1].clone();
    layers.exit(1);  // block 1's device copy goes
  }
  // The default stream takes every free block of its pool and overwrites it.
  std::vector<at::Tensor> reuse;
  for (int k = 0; k < 12; ++k) reuse.push_back(torch::full({1024, 1024}, 7.0, opts));
  torch::cuda::synchronize();
  EXPECT_TRUE(torch::equal(read, values[1]));
  layers.release();
}

// Outside its block a frozen weight reads and writes its pinned host copy (mapped into the GPU's
// address space); with a pageable host copy, which the GPU cannot reach, it throws a named error.
TEST_F(Cuda, LayerOffloadWeightsOutsideTheirBlockUseTheirHostCopy) {
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(6);
  for (bool pinned : {true, false}) {
    SCOPED_TRACE(pinned ? "pinned" : "pageable");
    at::Tensor w = torch::randn({256, 256}, opts);
    const at::Tensor value = w.clone();
    LayerOffloadOptions lo;
    lo.backend = BackendKind::Cuda;
    lo.use_pin_memory = pinned;
    LayerOffloader layers(lo);
    layers.add_block({w}, {"w"});
    if (pinned) {
      EXPECT_TRUE(torch::equal(w.sum(), value.sum()));
      w.mul_(2);
      EXPECT_TRUE(torch::equal(w.cpu(), (value * 2).cpu()));
    } else {
      try {
        w.mul_(2);
        torch::cuda::synchronize();
        ADD_FAILURE() << "a pageable host copy was written from the GPU";
      } catch (const c10::Error& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("'w' of block 0"));
      }
    }
    {
      auto resident = layers.block(0);
      EXPECT_TRUE(torch::equal(w, pinned ? value * 2 : value));
      w.add_(1);
    }
    layers.release();
    {
      auto resident = layers.block(0);
      EXPECT_TRUE(torch::equal(w, (pinned ? value * 2 : value) + 1));
    }
  }
}

// ---- gradient checkpointing on the GPU --------------------------------------------------------

// Python's `with torch.autocast("cuda", dtype=...)` (the cast cache cleared when the outermost
// one ends).
class CudaAutocast {
 public:
  explicit CudaAutocast(at::ScalarType dtype)
      : was_enabled_(at::autocast::is_autocast_enabled(c10::kCUDA)),
        was_dtype_(at::autocast::get_autocast_dtype(c10::kCUDA)) {
    at::autocast::set_autocast_enabled(c10::kCUDA, true);
    at::autocast::set_autocast_dtype(c10::kCUDA, dtype);
    at::autocast::increment_nesting();
  }
  ~CudaAutocast() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(c10::kCUDA, was_enabled_);
    at::autocast::set_autocast_dtype(c10::kCUDA, was_dtype_);
  }
  CudaAutocast(const CudaAutocast&) = delete;
  CudaAutocast& operator=(const CudaAutocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

void expect_bitwise(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(got[i], want[i]))
        << (i == 0 ? "loss" : "gradient " + std::to_string(i));
  }
}

// Dropout in a checkpointed region on the GPU draws the forward's mask in the recompute: the CUDA
// generator's state is restored, for a region whose input is on the GPU and for one whose input is
// on the host and moved there inside it (no input on the GPU). The caller's CUDA RNG stream is
// left as it was. Alone and with offloading.
TEST_F(Cuda, CheckpointedDropoutDrawsTheForwardsMask) {
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(0);
  auto w1 = torch::randn({256, 512}, o.requires_grad(true));
  auto w2 = torch::randn({512, 256}, o.requires_grad(true));
  const at::Tensor x_gpu = torch::randn({128, 256}, o);
  const at::Tensor x_host = x_gpu.cpu();
  auto body = [w1, w2](const at::Tensor& x) {
    at::Tensor h = torch::dropout(torch::gelu(x.to(torch::kCUDA).matmul(w1)), 0.5, true);
    return h.matmul(w2);
  };
  for (const bool on_host : {false, true}) {
    const at::Tensor& x = on_host ? x_host : x_gpu;
    auto forward = [&](bool ckpt) {
      const at::Tensor y = ckpt ? checkpoint(body, x) : body(x);
      return body(y).pow(2).mean();  // a second dropout after the region moves the RNG on
    };
    auto run = [&](bool ckpt, ActivationOffloader* off) {
      torch::manual_seed(1234);
      auto out = step([&] { return forward(ckpt); }, {w1, w2}, off);
      out.push_back(torch::rand({4}, o));  // the next draw after the step
      return out;
    };
    SCOPED_TRACE(on_host ? "input on the host" : "input on the GPU");
    const auto reference = run(false, nullptr);
    expect_bitwise(run(true, nullptr), reference);
    ActivationOffloader off(cuda_options());
    expect_bitwise(run(true, &off), reference);
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
}

// The recompute runs under the forward's CUDA autocast state when backward is called outside it:
// gradients are plain autograd's under the same autocast, alone and with offloading.
TEST_F(Cuda, CheckpointRecomputeRunsUnderTheForwardsAutocast) {
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  torch::manual_seed(0);
  auto w1 = torch::randn({256, 512}, o.requires_grad(true));
  auto w2 = torch::randn({512, 256}, o.requires_grad(true));
  const at::Tensor x = torch::randn({128, 256}, o);
  auto body = [w1, w2](const at::Tensor& in) {
    return torch::dropout(torch::gelu(in.matmul(w1)), 0.25, true).matmul(w2).tanh();
  };
  auto run = [&](bool ckpt, bool check, ActivationOffloader* off) {
    CheckpointOptions options;
    options.check_recompute = check;
    torch::manual_seed(1234);
    return step(
        [&] {
          CudaAutocast autocast(at::kBFloat16);
          const at::Tensor y = ckpt ? checkpoint(body, x, options) : body(x);
          return y.to(at::kFloat).pow(2).mean();
        },
        {w1, w2}, off);
  };
  const auto reference = run(false, true, nullptr);
  for (const bool check : {true, false}) {
    SCOPED_TRACE(check ? "checked" : "unchecked");
    expect_bitwise(run(true, check, nullptr), reference);
    ActivationOffloader off(cuda_options());
    expect_bitwise(run(true, check, &off), reference);
    expect_bitwise(run(false, check, &off), reference);  // offloading alone
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::kCUDA));
}

// ---- the engine's ordering on cuda ----------------------------------------------------------

// What a backward brought in is given back before backward() returns: on cuda the graph task ends
// on an autograd device thread, which woke backward()'s caller before running the future's
// callbacks (the engine's end-of-backward cleanup ran after backward() had returned).
TEST_F(Cuda, EndOfBackwardCleanupIsDoneWhenBackwardReturns) {
  OffloadOptions o = cuda_options(/*window=*/64);
  o.prefetch = 4;
  ActivationOffloader off(o);
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::randn({512, 512}, opts.requires_grad(true));
  for (int i = 0; i < 50; ++i) {
    at::Tensor loss, mid;
    {
      auto scope = off.scope();
      auto h = x;
      for (int k = 0; k < 8; ++k) {
        h = h.sin().mul(1.5);
        if (k == 3) mid = h;
      }
      loss = h.sum();
    }
    // A gradient to `mid` runs only the nodes after it: what was prefetched for the nodes before
    // it is never used, and only the end-of-backward cleanup gives it back.
    auto g = torch::autograd::grad({loss}, {mid});
    ASSERT_EQ(off.resident().bwd_stash_count, 0) << "step " << i;
  }
  EXPECT_GT(off.stats().prefetched, 0);
}

// Copies issued from two threads, each on its own compute stream, each wait for their own stream:
// the backend's ordering event was shared without a lock, so one thread's copy could be ordered
// after the other thread's stream and read its tensor before the kernel that wrote it ran.
TEST_F(Cuda, CopiesFromTwoThreadsWaitForTheirOwnStreams) {
  OffloadOptions o = cuda_options(/*window=*/4);
  ActivationOffloader off(o);
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto run = [&](int seed, std::vector<at::Tensor>& out) {
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
    torch::manual_seed(seed);
    auto w = torch::randn({256, 256}, opts.requires_grad(true));
    auto x = torch::randn({256, 256}, opts);
    for (int i = 0; i < 40; ++i) {
      auto forward = [&] {
        at::cuda::sleep(200'000);  // the kernel that produces `h` starts late on this stream
        auto h = x.matmul(w);
        return h.sin().mul(h).sum();
      };
      auto reference = step(forward, {w}, nullptr);
      auto got = step(forward, {w}, &off);
      for (size_t k = 0; k < got.size(); ++k) {
        if (!bitwise_equal(reference[k], got[k])) out.push_back(got[k]);
      }
    }
  };
  std::vector<at::Tensor> wrong_a, wrong_b;
  std::thread a([&] { run(1, wrong_a); });
  std::thread b([&] { run(2, wrong_b); });
  a.join();
  b.join();
  EXPECT_TRUE(wrong_a.empty() && wrong_b.empty()) << wrong_a.size() + wrong_b.size() << " wrong";
}

// On a GPU with room to spare, prefetched buffers stay until backward uses them: the caching
// allocator asks offloaders for memory at every cache miss (not only when the GPU is full), and
// the engine gave its prefetches back every time.
TEST_F(Cuda, PrefetchIsNotDroppedOnARoomyGpu) {
  OffloadOptions o = cuda_options(/*window=*/8);
  o.prefetch = 2;
  ActivationOffloader off(o);
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  auto w = torch::randn({1024, 1024}, opts.requires_grad(true));
  auto x = torch::randn({1024, 1024}, opts);
  for (int i = 0; i < 3; ++i) {
    c10::cuda::CUDACachingAllocator::emptyCache();  // every allocation below misses the cache
    const auto before =
        c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    step(
        [&] {
          auto h = x;
          for (int k = 0; k < 6; ++k) h = torch::tanh(h.matmul(w)).mul(1.1);
          return h.sum();
        },
        {w}, &off);
    const auto after = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
    EXPECT_GT(after.segment[0].allocated, before.segment[0].allocated) << "no cache miss";
  }
  EXPECT_GT(off.stats().prefetched, 0);
  EXPECT_EQ(off.stats().prefetch_dropped, 0);
}

// A link model is host-sim's: a sweep over links whose --backend auto resolves to cuda is refused
// in one line naming --link before anything is measured (check() refuses --backend cuda alone).
TEST_F(Cuda, ASweepOverLinksThatResolvesToCudaIsRefused) {
  requests::SweepRequest r;
  r.workload.model = "mlp";
  r.knobs["min_offload_size"] = "1KiB";
  r.knobs["max_fwd_stash_size"] = "1";
  r.knobs["link"] = "pcie4,pcie5";
  ASSERT_TRUE(requests::check(r).ok());
  try {
    (void)requests::prepare(requests::require_valid(r));
    FAIL() << "a sweep over links was prepared on cuda";
  } catch (const requests::RequestError& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors().front().field, "--link");
    EXPECT_NE(std::string(e.what()).find("host-sim only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace offtune::test
