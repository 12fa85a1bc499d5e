// The correctness sentinel (OffloadOptions::verify): every offloaded copy is checksummed at pack
// and checked at unpack, in every tier; a copy that comes back different is one clear error naming
// the tensor, its size and where it went, never wrong gradients. Off by default.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "test_support.hpp"

namespace offtune::test {
namespace {

using ::testing::HasSubstr;

struct Mlp {
  at::Tensor w1 = torch::randn({64, 64}, torch::requires_grad());
  at::Tensor w2 = torch::randn({64, 64}, torch::requires_grad());
  at::Tensor x = torch::randn({64, 64});
  std::vector<at::Tensor> params() const { return {w1, w2}; }
  at::Tensor forward() const {
    at::Tensor h = torch::relu(torch::mm(x, w1));
    h = torch::tanh(torch::mm(h, w2));
    h = h.t().contiguous().t() * 0.5;  // a strided copy
    return (h * h).sum();
  }
};

// A fresh directory for the disk tier's arena file (the file has no name there).
std::string disk_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "offtune-verify-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
  return pattern;
}

OffloadOptions verify_options(Tier tier, const std::string& dir) {
  OffloadOptions o = host_sim_options(/*min_offload_size=*/0, /*window=*/8);
  o.verify = true;
  o.tier = tier;
  o.disk_dir = dir;
  o.disk_min_gbps = 0.0;
  return o;
}

TEST(Verify, IsOffByDefault) {
  EXPECT_FALSE(OffloadOptions{}.verify);
  torch::manual_seed(1);
  Mlp net;
  ActivationOffloader off(host_sim_options());
  expect_identical_step([&] { return net.forward(); }, net.params(), off);
  EXPECT_GT(off.stats().offloaded, 0);
  EXPECT_EQ(off.stats().verified, 0);
}

// Every unpack of an offloaded copy is checked (whatever it came back from: the forward window, a
// reload, a prefetch, the disk), and the gradients stay bit-identical.
TEST(Verify, ChecksEveryUnpackOfACopyAndChangesNoGradient) {
  const std::string dir = disk_dir();
  torch::manual_seed(2);
  Mlp net;
  for (const Tier tier : {Tier::Host, Tier::Auto, Tier::Disk}) {
    SCOPED_TRACE(std::string(to_string(tier)));
    OffloadOptions o = verify_options(tier, dir);
    o.host_budget_bytes = 2 * 64 * 64 * 4;  // tier auto: the oldest copies spill
    ActivationOffloader off(o);
    auto obs = std::make_shared<RecordingObserver>();
    off.set_observer(obs);
    for (const bool written : {false, true}) {
      expect_identical_step([&] { return net.forward(); }, net.params(), off, written);
    }
    off.set_observer(nullptr);
    int64_t copies = 0;
    for (const auto& u : obs->unpacks) copies += u.source != UnpackSource::Kept ? 1 : 0;
    EXPECT_GT(copies, 0);
    EXPECT_EQ(off.stats().verified, copies);
    if (tier != Tier::Host) {
      EXPECT_GT(off.stats().disk_reads, 0);
    }
  }
  std::filesystem::remove_all(dir);
}

// A saved tensor's bytes changed behind autograd's back (no version bump) after pack and before its
// held-back copy ran: the copy differs from what pack saw, and unpack says so, naming the tensor,
// its size and where its copy went.
TEST(Verify, ACopyThatDiffersFromWhatPackSawIsAClearError) {
  const std::string dir = disk_dir();
  for (const Tier tier : {Tier::Host, Tier::Disk}) {
    SCOPED_TRACE(std::string(to_string(tier)));
    torch::manual_seed(3);
    at::Tensor w = torch::randn({64, 64}, torch::requires_grad());
    at::Tensor x = torch::randn({64, 64});
    OffloadOptions o = verify_options(tier, dir);
    o.debug_copy_delay_ns = 300'000'000;  // the copy runs 300 ms after pack
    ActivationOffloader off(o);
    at::Tensor loss;
    {
      auto scope = off.scope();
      loss = torch::mm(x, w).sum();  // saves x (offloaded) and w (a parameter, kept)
    }
    x.variable_data().narrow(0, 3, 1).add_(
        1.0);           // a version counter of its own: autograd sees none
    off.synchronize();  // the copy (and the disk write) ran, with the changed bytes
    std::string message;
    try {
      loss.backward();
    } catch (const EngineError& e) {
      message = e.what();
    }
    EXPECT_THAT(message, HasSubstr("offtune: verify: saved tensor #"));
    EXPECT_THAT(message, HasSubstr("CPUFloatType [64, 64]"));
    EXPECT_THAT(message, HasSubstr("16384 bytes"));
    EXPECT_THAT(message, HasSubstr(tier == Tier::Disk ? "disk arena file in '" + dir + "'"
                                                      : std::string("host memory")));
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
    loss = at::Tensor();
    w.mutable_grad().reset();
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
  std::filesystem::remove_all(dir);
}

// The same on a GPU: the checksum runs on the device, at pack on the source and at unpack on the
// reloaded buffer. Skipped without one (scripts/gpu-check.sh runs it).
TEST(Verify, CudaCopiesAreCheckedAndACorruptedOneIsAnError) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "No GPU available";
  torch::manual_seed(4);
  Mlp net;
  net.w1 = net.w1.detach().cuda().requires_grad_();
  net.w2 = net.w2.detach().cuda().requires_grad_();
  net.x = net.x.cuda();
  OffloadOptions o;
  o.backend = BackendKind::Cuda;
  o.min_offload_size = 0;
  o.verify = true;
  {
    ActivationOffloader off(o);
    expect_identical_step([&] { return net.forward(); }, net.params(), off, true);
    EXPECT_GT(off.stats().verified, 0);
  }
  o.debug_copy_delay_ns = 200'000'000;
  // Window 1: the next save drops x's forward hold, so that backward must reload x from its host
  // copy. (With x still held, unpack hands back the held tensor itself, no copy is involved and
  // there is nothing for verify to check: the first GPU run of this test, 2026-11-26, changed x
  // after the scope, while x was still held, and so saw no error.)
  o.max_fwd_stash_size = 1;
  ActivationOffloader off(o);
  at::Tensor loss;
  {
    auto scope = off.scope();
    at::Tensor y = torch::mm(net.x, net.w1);          // saves x: its copy waits 200 ms
    net.x.variable_data().narrow(0, 3, 1).add_(1.0);  // on the compute stream, before the copy
    loss = y.sin().sum();                             // saves y: x's hold goes
  }
  off.synchronize();
  try {
    loss.backward();
    ADD_FAILURE() << "a corrupted copy came back without an error";
  } catch (const EngineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("offtune: verify: saved tensor #"));
    EXPECT_THAT(e.what(), HasSubstr("CUDAFloatType [64, 64]"));
  }
}

}  // namespace
}  // namespace offtune::test
