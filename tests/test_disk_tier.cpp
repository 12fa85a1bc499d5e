// The disk tier: copies that go on from host memory to an arena file and come back bit for bit,
// failures of the file system that fail the step with one clear error and leave the engine at rest,
// a process killed mid-step that leaves nothing behind, file systems without O_DIRECT, and the
// bandwidth check.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "disk_tier.hpp"
#include "test_support.hpp"

extern char** environ;

namespace offtune::build_paths {
extern const char* const disk_tier_child;
}

namespace offtune::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A fresh directory, removed with what is left in it (a test asserts that nothing is).
class TempDir {
 public:
  explicit TempDir(const std::string& parent = "/tmp") {
    std::string pattern = parent + "/offtune-disk-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    path_ = pattern;
  }
  ~TempDir() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  bool empty() const { return fs::is_empty(path_); }
  // Mounts a file system of its own here (needs CAP_SYS_ADMIN); false when not allowed.
  bool mount(const char* type, const char* data) {
    mounted_ = ::mount(type, path_.c_str(), type, 0, data) == 0;
    return mounted_;
  }

 private:
  std::string path_;
  bool mounted_ = false;
};

// Steps whose counts a test asserts synchronize between forward and backward, so that every write
// ran whatever the machine's load (a write that backward overtakes is dropped, by design); the
// first test also runs steps without it, where writes and reads race backward.
constexpr bool kWritten = true;

OffloadOptions disk_options(const std::string& dir, Tier tier = Tier::Disk) {
  OffloadOptions o = host_sim_options(/*min_offload_size=*/0, /*window=*/2);
  o.tier = tier;
  o.disk_dir = dir;
  o.disk_min_gbps = 0.0;  // no bandwidth measurement (the check has tests of its own)
  return o;
}

// A small network whose saved activations (64 KiB each, some of them views and de-duplicated
// storages) go through the tier.
struct Net {
  at::Tensor w1 = torch::randn({128, 128}, torch::requires_grad());
  at::Tensor w2 = torch::randn({128, 128}, torch::requires_grad());
  at::Tensor x = torch::randn({128, 128});
  std::vector<at::Tensor> params() const { return {w1, w2}; }
  at::Tensor forward() const {
    at::Tensor h = x;
    for (int i = 0; i < 3; ++i) {
      h = torch::relu(torch::mm(h, w1));
      h = torch::tanh(torch::mm(h, w2)) * 0.5;
      h = h.t().contiguous().t();  // a strided copy, saved by the next mm
    }
    return (h * h).sum();
  }
};

// Runs one step that is expected to fail: forward, every copy written (synchronize), backward.
// Returns the error's message ("" if none), with the graph dropped and gradients cleared.
std::string failing_step(ActivationOffloader& off, const Net& net) {
  std::string message;
  try {
    at::Tensor loss;
    {
      auto scope = off.scope();
      loss = net.forward();
    }
    off.synchronize();  // every write ran: a failure is known before backward
    loss.backward();
  } catch (const EngineError& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("not an EngineError: ") + e.what();
  }
  take_grads(net.params());
  return message;
}

// Collects libtorch's warnings (TORCH_WARN) on this thread while it lives.
class WarningCapture : public c10::WarningHandler {
 public:
  WarningCapture() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~WarningCapture() override { c10::WarningUtils::set_warning_handler(previous_); }
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;
  void process(const c10::Warning& warning) override { said_.push_back(warning.msg()); }
  int64_t count(const std::string& needle) const {
    return std::count_if(said_.begin(), said_.end(),
                         [&](const std::string& m) { return m.find(needle) != std::string::npos; });
  }
  std::string first(const std::string& needle) const {
    for (const auto& m : said_) {
      if (m.find(needle) != std::string::npos) return m;
    }
    return "";
  }
  std::string all() const {
    std::string out;
    for (const auto& m : said_) out += "\n  " + m;
    return out;
  }

 private:
  c10::WarningHandler* previous_;
  std::vector<std::string> said_;
};

// Flips `count` bytes at `offset` of the arena file that this process holds open in `dir` (it has
// no name there: it is reached through /proc/self/fd, opened anew without O_DIRECT), and syncs
// them to the medium, so that the tier's next read of them sees the change.
void flip_arena_bytes(const std::string& dir, int64_t offset, int64_t count) {
  int arena = -1;
  for (const auto& fd : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind(dir + "/", 0) == 0) {
      arena = ::open(fd.path().c_str(), O_RDWR | O_CLOEXEC);
      break;
    }
  }
  ASSERT_GE(arena, 0) << "no open arena file in " << dir;
  std::vector<unsigned char> bytes(static_cast<size_t>(count));
  ASSERT_EQ(::pread(arena, bytes.data(), bytes.size(), offset), count);
  for (auto& b : bytes) b ^= 0xFF;
  ASSERT_EQ(::pwrite(arena, bytes.data(), bytes.size(), offset), count);
  ASSERT_EQ(::fdatasync(arena), 0);
  ::close(arena);
}

TEST(DiskTier, GradientsAreBitIdenticalToNoOffloadingStepAfterStep) {
  TempDir dir;
  torch::manual_seed(1);
  Net net;
  for (const int64_t read_ahead : {int64_t{0}, int64_t{1} << 20}) {
    SCOPED_TRACE("disk_read_ahead_bytes=" + std::to_string(read_ahead));
    OffloadOptions o = disk_options(dir.path());
    o.disk_read_ahead_bytes = read_ahead;
    ActivationOffloader off(o);
    int64_t arena = 0;
    for (int s = 0; s < 4; ++s) {
      SCOPED_TRACE("step " + std::to_string(s));
      // Steps 0 and 2 written before backward; 1 and 3 racing it.
      expect_identical_step([&] { return net.forward(); }, net.params(), off, s % 2 == 0);
      const ResidentState r = off.resident();
      EXPECT_EQ(r.disk_bytes, 0);
      // One arena, preallocated once and reused: later steps do not grow it.
      if (s == 0) arena = r.disk_arena_bytes;
      EXPECT_EQ(r.disk_arena_bytes, arena);
    }
    EXPECT_GT(arena, 0);
    const OffloadStats st = off.stats();
    EXPECT_GT(st.spilled, 0);
    EXPECT_GT(st.disk_reads, 0);
    EXPECT_EQ(st.disk_written_bytes % (128 * 128 * 4), 0);
    if (read_ahead > 0) {
      EXPECT_GT(st.disk_read_ahead, 0);
    } else {
      EXPECT_EQ(st.disk_read_ahead, 0);
    }
    EXPECT_TRUE(dir.empty()) << "the arena file has a name";
  }
}

// The same on a GPU: pinned staging blocks written with O_DIRECT, read back, copied to the device.
// Skipped without one (scripts/gpu-check.sh runs it).
TEST(DiskTier, CudaGradientsAreBitIdentical) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "No GPU available";
  TempDir dir;
  torch::manual_seed(11);
  Net net;
  net.w1 = net.w1.detach().cuda().requires_grad_();
  net.w2 = net.w2.detach().cuda().requires_grad_();
  net.x = net.x.cuda();
  for (const Tier tier : {Tier::Disk, Tier::Auto}) {
    OffloadOptions o;
    o.backend = BackendKind::Cuda;
    o.min_offload_size = 0;
    o.tier = tier;
    o.host_budget_bytes = tier == Tier::Auto ? 4 * 128 * 128 * 4 : 0;
    o.disk_dir = dir.path();
    o.disk_min_gbps = 0.0;
    ActivationOffloader off(o);
    for (int s = 0; s < 2; ++s) {
      expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
    }
    EXPECT_GT(off.stats().spilled, 0);
    EXPECT_GT(off.stats().disk_reads, 0);
  }
}

TEST(DiskTier, AutoSpillsBeyondTheHostBudgetOnly) {
  TempDir dir;
  torch::manual_seed(2);
  Net net;
  OffloadOptions o = disk_options(dir.path(), Tier::Auto);
  o.host_budget_bytes = 4 * 128 * 128 * 4;  // four activations
  ActivationOffloader off(o);
  for (int s = 0; s < 2; ++s) {
    expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
  }
  const OffloadStats st = off.stats();
  EXPECT_GT(st.spilled, 0);
  EXPECT_LT(st.spilled, st.offloaded) << "copies within the budget stay in host memory";
  // With a budget above the step's copies nothing goes to disk.
  o.host_budget_bytes = int64_t{1} << 30;
  ActivationOffloader roomy(o);
  expect_identical_step([&] { return net.forward(); }, net.params(), roomy, kWritten);
  EXPECT_EQ(roomy.stats().spilled, 0);
}

TEST(DiskTier, RetainedGraphReadsTheFileAgain) {
  TempDir dir;
  torch::manual_seed(3);
  Net net;
  auto twice = [&](ActivationOffloader* off) {
    at::Tensor loss;
    if (off) {
      auto scope = off->scope();
      loss = net.forward();
      off->synchronize();
    } else {
      loss = net.forward();
    }
    loss.backward({}, /*retain_graph=*/true);
    loss.backward();
    return take_grads(net.params());
  };
  ActivationOffloader off(disk_options(dir.path()));
  const auto ref = twice(nullptr);
  const auto got = twice(&off);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << i;
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
  EXPECT_GE(off.stats().disk_reads, 2 * off.stats().spilled);
}

// A reload that goes ahead from a host copy whose write to the file is still running: another
// thread's pump may finish that write and free the host copy before the reload is issued. The
// test makes that happen every time (writes held 300 ms; when the unpacking thread is between the
// two, a second thread's synchronize() waits for the write and pumps). Before: "offtune: internal
// error: reload of a copy not in host memory". Now the copy is read back from the file.
TEST(DiskTier, AReloadRacingAWriteThatFinishesMeanwhileReadsTheFile) {
  static ActivationOffloader* racing = nullptr;
  static int raced = 0;
  TempDir dir;
  torch::manual_seed(4);
  auto w = torch::randn({256, 256}, torch::requires_grad());
  const at::Tensor x = torch::randn({256, 256});
  // Saved in order: x (by matmul, for w's gradient), h1, a and c (exp saves its output), 256 KiB
  // each; with a window of 1 each save sends the one before on to the host and the file. The one
  // writer thread takes x's write first and holds it 300 ms; the later writes queue behind it and
  // are withdrawn at their unpacks. Backward reaches x last, its write still running.
  auto forward = [&] {
    using std::chrono::milliseconds;
    at::Tensor h1 = x.matmul(w);
    at::Tensor a = h1.sin();
    std::this_thread::sleep_for(milliseconds(20));  // the offload copies are done
    at::Tensor b = a.cos();                         // this pack's pump starts the writes
    std::this_thread::sleep_for(milliseconds(20));
    at::Tensor c = b.exp();
    std::this_thread::sleep_for(milliseconds(50));  // x's write is running
    return c.sum();
  };
  const auto ref = step(forward, {w}, nullptr);

  detail::DiskTestHooks& hooks = detail::disk_test_hooks();
  hooks.write_delay_ns = 300'000'000;
  hooks.after_await_while_writing = +[] {
    ++raced;
    std::thread([] { racing->synchronize(); }).join();  // the write finishes, the host copy goes
  };
  OffloadOptions o = disk_options(dir.path(), Tier::Disk);
  o.max_fwd_stash_size = 1;  // each save leaves the window at the next: backward reloads it
  o.prefetch = 0;            // on demand, at its unpack (a prefetch decides under the lock)
  ActivationOffloader off(o);
  racing = &off;
  raced = 0;
  const auto got = step(forward, {w}, &off);
  hooks.after_await_while_writing = nullptr;
  hooks.write_delay_ns = 0;
  racing = nullptr;
  EXPECT_GE(raced, 1) << "the test did not set the race up";
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << i;
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
  EXPECT_GE(off.stats().disk_reads, 1);
}

TEST(DiskTier, ObserversSeeDiskTrafficApartFromTheLink) {
  TempDir dir;
  torch::manual_seed(4);
  Net net;
  ActivationOffloader off(disk_options(dir.path()));
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
  off.set_observer(nullptr);
  std::map<CopyDirection, int64_t> issued, completed;
  for (const auto& c : obs->issued) ++issued[c.direction];
  for (const auto& c : obs->completed) {
    ++completed[c.direction];
    EXPECT_LE(c.issued_ns, c.time_ns);
  }
  const OffloadStats st = off.stats();
  EXPECT_EQ(completed[CopyDirection::HostToDisk], st.spilled);
  EXPECT_EQ(completed[CopyDirection::DiskToHost], st.disk_reads);
  EXPECT_GE(issued[CopyDirection::HostToDisk], st.spilled);
  EXPECT_EQ(issued[CopyDirection::DeviceToHost], st.offloaded);
  EXPECT_EQ(to_string(CopyDirection::HostToDisk), "disk-write");
  EXPECT_EQ(to_string(CopyDirection::DiskToHost), "disk-read");
}

// A write that fails (full disk, I/O error) leaves the host copy intact: the step goes on from it,
// bit for bit, under tier auto and tier disk alike (there the staging block is kept); the copy is
// counted and the failure said once per offloader. Only a copy with no host copy left fails.
TEST(DiskTier, FailedWriteKeepsTheHostCopyAndTheStepGoesOn) {
  TempDir dir;
  torch::manual_seed(5);
  Net net;
  for (const Tier tier : {Tier::Disk, Tier::Auto}) {
    for (const int error : {ENOSPC, EIO}) {
      SCOPED_TRACE(std::string(to_string(tier)) + ": " + std::strerror(error));
      OffloadOptions o = disk_options(dir.path(), tier);
      if (tier == Tier::Auto) o.host_budget_bytes = 4 * 128 * 128 * 4;
      o.debug_disk_faults.fail_write = 3;
      o.debug_disk_faults.error = error;
      ActivationOffloader off(o);
      WarningCapture warnings;
      expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
      EXPECT_EQ(off.stats().disk_write_failures, 1);
      EXPECT_GT(off.stats().spilled, 0);
      ASSERT_EQ(warnings.count("disk tier: writing"), 1) << warnings.all();
      const std::string said = warnings.first("disk tier: writing");
      EXPECT_THAT(said, HasSubstr(dir.path()));
      EXPECT_THAT(said, HasSubstr(std::strerror(error)));
      EXPECT_THAT(said, HasSubstr("stays in host memory"));
      off.synchronize();
      const ResidentState r = off.resident();
      EXPECT_TRUE(r.resting()) << "tracked=" << r.tracked << " host=" << r.host_bytes
                               << " disk=" << r.disk_bytes << " io=" << r.disk_io_in_flight
                               << " pending=" << r.pending_host_frees;
      // The next step writes again, bit for bit.
      expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
      EXPECT_EQ(off.stats().disk_write_failures, 1);
    }
  }
}

// Bytes changed in the arena file between forward and backward (a bad disk, a stray write) are
// caught by the checksum of their extent: the unpack that needs the copy fails with one clear
// error naming the tensor, never wrong gradients. A real corruption of the (nameless) file,
// reached through /proc/self/fd.
TEST(DiskTier, CorruptedFileIsAClearErrorNamingTheTensor) {
  TempDir dir;
  torch::manual_seed(12);
  Net net;
  const auto ref = step([&] { return net.forward(); }, net.params(), nullptr);
  ActivationOffloader off(disk_options(dir.path()));
  std::string message;
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = net.forward();
  }
  off.synchronize();  // every copy is in the file, no host copy left
  ASSERT_GT(off.resident().disk_bytes, 0);
  flip_arena_bytes(dir.path(), /*offset=*/64, /*count=*/8);
  try {
    loss.backward();
  } catch (const EngineError& e) {
    message = e.what();
  }
  const auto got = take_grads(net.params());
  if (message.empty()) {
    double worst = 0.0;
    for (size_t i = 0; i < ref.size() - 1; ++i) {
      worst = std::max(worst, (ref[i + 1] - got[i]).abs().max().item<double>());
    }
    FAIL() << "backward read a corrupted file without an error; gradients off by up to " << worst;
  }
  EXPECT_THAT(message, HasSubstr("offtune: disk tier: the copy of saved tensor #"));
  EXPECT_THAT(message, HasSubstr("CPUFloatType [128, 128]"));
  EXPECT_THAT(message, HasSubstr("65536 bytes"));
  EXPECT_THAT(message, HasSubstr("checksum"));
  EXPECT_THAT(message, HasSubstr(dir.path()));
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
  loss = at::Tensor();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
  // The extent is written anew by the next step.
  expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
}

TEST(DiskTier, InjectedReadFailureFailsTheUnpackThatNeedsIt) {
  TempDir dir;
  torch::manual_seed(6);
  Net net;
  OffloadOptions o = disk_options(dir.path());
  o.debug_disk_faults.fail_read = 2;
  o.debug_disk_faults.error = EIO;
  ActivationOffloader off(o);
  const std::string message = failing_step(off, net);
  EXPECT_THAT(message, HasSubstr("offtune: disk tier: reading"));
  EXPECT_THAT(message, HasSubstr(dir.path()));
  EXPECT_THAT(message, HasSubstr(std::strerror(EIO)));
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
  expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
}

TEST(DiskTier, ArenaLimitIsAClearError) {
  TempDir dir;
  torch::manual_seed(7);
  Net net;
  OffloadOptions o = disk_options(dir.path());
  o.disk_arena_bytes = 3 * 128 * 128 * 4;
  ActivationOffloader off(o);
  const std::string message = failing_step(off, net);
  EXPECT_THAT(message, HasSubstr("is full"));
  EXPECT_THAT(message, HasSubstr("disk_arena_bytes 196608 bytes"));
  EXPECT_THAT(message, HasSubstr(dir.path()));
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
  EXPECT_LE(off.resident().disk_arena_bytes, o.disk_arena_bytes);
  // A step that fits: the tier is tied to a forward, not to the offloader.
  OffloadOptions roomy = o;
  roomy.disk_arena_bytes = 0;
  ActivationOffloader ok(roomy);
  expect_identical_step([&] { return net.forward(); }, net.params(), ok, kWritten);
}

TEST(DiskTier, FullFileSystemKeepsCopiesInHostMemoryAndSaysSoOnce) {
  TempDir dir;
  if (!dir.mount("tmpfs", "size=512k")) GTEST_SKIP() << "cannot mount a small tmpfs here (root)";
  torch::manual_seed(8);
  Net net;  // about 1 MiB of activations: more than the file system holds
  {
    ActivationOffloader off(disk_options(dir.path()));
    EXPECT_EQ(off.disk_tier().file_system, "tmpfs");
    WarningCapture warnings;
    for (int s = 0; s < 2; ++s) {
      expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
    }
    EXPECT_GT(off.stats().disk_write_failures, 1) << "every write past the free space failed";
    ASSERT_EQ(warnings.count("disk tier: writing"), 1) << "said once: " << warnings.all();
    const std::string said = warnings.first("disk tier: writing");
    EXPECT_THAT(said, HasSubstr(dir.path()));
    EXPECT_THAT(said, HasSubstr("tmpfs"));
    EXPECT_THAT(said, HasSubstr(std::strerror(ENOSPC)));
    EXPECT_THAT(said, HasSubstr("this step needs"));
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
  // The arena file (preallocated, kept while its offloader lives) went with the offloader. Tier
  // auto with a budget that keeps most copies in host memory fits the same file system.
  OffloadOptions a = disk_options(dir.path(), Tier::Auto);
  a.host_budget_bytes = 8 * 128 * 128 * 4;
  ActivationOffloader autotier(a);
  expect_identical_step([&] { return net.forward(); }, net.params(), autotier, kWritten);
  EXPECT_GT(autotier.stats().spilled, 0);
  EXPECT_EQ(autotier.stats().disk_write_failures, 0);
}

TEST(DiskTier, WorksWithoutODirect) {
  torch::manual_seed(9);
  Net net;
  {
    SCOPED_TRACE("O_DIRECT refused (debug hook)");
    TempDir dir;
    OffloadOptions o = disk_options(dir.path());
    o.debug_disk_faults.refuse_direct = true;
    ActivationOffloader off(o);
    EXPECT_FALSE(off.disk_tier().direct_io);
    expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
    EXPECT_GT(off.stats().spilled, 0);
  }
  {
    SCOPED_TRACE("tmpfs (/dev/shm)");
    if (fs::is_directory("/dev/shm")) {
      TempDir dir("/dev/shm");
      ActivationOffloader off(disk_options(dir.path()));
      EXPECT_TRUE(off.disk_tier().enabled);
      expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
      EXPECT_TRUE(dir.empty());
    }
  }
  {
    SCOPED_TRACE("ramfs (no O_DIRECT at all)");
    TempDir dir;
    if (dir.mount("ramfs", "")) {
      ActivationOffloader off(disk_options(dir.path()));
      EXPECT_FALSE(off.disk_tier().direct_io);
      EXPECT_EQ(off.disk_tier().file_system, "ramfs");
      expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
    }
  }
}

TEST(DiskTier, BandwidthCheckMeasuresAndRefusesASlowDisk) {
  // The figures, for the log (docs/disk-tier.md quotes them): the test directory's disk, and
  // memory (tmpfs) for comparison.
  for (const char* parent : {"/tmp", "/dev/shm"}) {
    if (!fs::is_directory(parent)) continue;
    TempDir where(parent);
    OffloadOptions m = disk_options(where.path());
    m.disk_min_gbps = 0.001;
    ActivationOffloader off(m);
    const DiskTierInfo info = off.disk_tier();
    EXPECT_TRUE(info.enabled);
    EXPECT_GT(info.write_gbps, 0.0);
    EXPECT_GT(info.read_gbps, 0.0);
    std::cout << "[ disk     ] " << parent << " (" << info.file_system
              << (info.direct_io ? ", O_DIRECT" : ", buffered") << "): write " << info.write_gbps
              << " GB/s, read " << info.read_gbps << " GB/s\n";
  }
  TempDir dir;
  OffloadOptions o = disk_options(dir.path());
  o.disk_min_gbps = 1e9;  // no disk is that fast
  try {
    ActivationOffloader off(o);
    FAIL() << "a disk below disk_min_gbps was accepted for tier disk";
  } catch (const EngineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("below disk_min_gbps"));
    EXPECT_THAT(e.what(), HasSubstr(dir.path()));
  }
  o.tier = Tier::Auto;
  ActivationOffloader off(o);  // tier auto: warns and keeps copies in host memory
  EXPECT_FALSE(off.disk_tier().enabled);
  EXPECT_GT(off.disk_tier().write_gbps, 0.0);
  torch::manual_seed(10);
  Net net;
  expect_identical_step([&] { return net.forward(); }, net.params(), off, kWritten);
  EXPECT_EQ(off.stats().spilled, 0);
  EXPECT_TRUE(dir.empty());
}

// The check writes and reads 64 MiB: done once per process and directory, so that making
// another offloader there costs nothing (no measurement, no arena preallocated for it).
TEST(DiskTier, BandwidthIsMeasuredOncePerDirectory) {
  TempDir dir;
  OffloadOptions o = disk_options(dir.path());
  o.disk_min_gbps = 0.001;
  ActivationOffloader first(o);
  const DiskTierInfo measured = first.disk_tier();
  ASSERT_GT(measured.write_gbps, 0.0);
  EXPECT_GE(first.resident().disk_arena_bytes, int64_t{64} << 20) << "the check's 64 MiB";
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("offloader " + std::to_string(i + 2));
    ActivationOffloader next(o);
    EXPECT_EQ(next.disk_tier().write_gbps, measured.write_gbps);
    EXPECT_EQ(next.disk_tier().read_gbps, measured.read_gbps);
    EXPECT_EQ(next.resident().disk_arena_bytes, 0) << "measured again";
  }
  // The threshold is checked against the figures of the first measurement.
  o.disk_min_gbps = 1e9;
  EXPECT_THROW(ActivationOffloader slow(o), EngineError);
  // Another directory is measured on its own.
  TempDir other;
  OffloadOptions p = disk_options(other.path());
  p.disk_min_gbps = 0.001;
  ActivationOffloader elsewhere(p);
  EXPECT_GE(elsewhere.resident().disk_arena_bytes, int64_t{64} << 20);
}

TEST(DiskTier, BadDirectoryIsAClearError) {
  OffloadOptions o = disk_options("/nonexistent/offtune");
  try {
    ActivationOffloader off(o);
    FAIL() << "expected EngineError";
  } catch (const EngineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'/nonexistent/offtune' is not a usable directory"));
  }
}

TEST(DiskTier, OptionsAreValidated) {
  EXPECT_EQ(parse_tier("disk"), Tier::Disk);
  EXPECT_EQ(parse_tier("auto"), Tier::Auto);
  EXPECT_EQ(to_string(Tier::Host), "host");
  EXPECT_THROW(parse_tier("ssd"), OptionsError);
  auto expect_error = [](OffloadOptions o, const std::string& needle) {
    try {
      o.validate();
      ADD_FAILURE() << "expected OptionsError mentioning " << needle;
    } catch (const OptionsError& e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  OffloadOptions o;
  o.host_budget_bytes = -1;
  expect_error(o, "host_budget_bytes");
  o = {};
  o.disk_arena_bytes = -1;
  expect_error(o, "disk_arena_bytes");
  o = {};
  o.disk_read_ahead_bytes = -1;
  expect_error(o, "disk_read_ahead_bytes");
  o = {};
  o.disk_min_gbps = -1;
  expect_error(o, "disk_min_gbps");
  o = {};
  o.debug_disk_faults.error = 0;
  expect_error(o, "debug_disk_faults");
}

// SIGKILL mid-step: no handler runs, yet nothing is left in the directory, because the arena file
// never had a name there.
TEST(DiskTier, NothingIsLeftBehindAfterSigkill) {
  TempDir dir;
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string program = build_paths::disk_tier_child;
  std::vector<char*> argv{program.data(), const_cast<char*>(dir.path().c_str()), nullptr};
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string line;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  std::istringstream words(line);
  std::string ready;
  long long spilled = 0, disk_bytes = 0;
  words >> ready >> spilled >> disk_bytes;
  ASSERT_EQ(ready, "ready") << "the child did not get mid-step: '" << line << "'";
  EXPECT_GT(spilled, 0);
  EXPECT_GT(disk_bytes, 0);
  // Mid-step: the child holds the arena open, and the directory shows nothing.
  bool holds_arena = false;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind(dir.path() + "/", 0) == 0) {
      holds_arena = true;
      EXPECT_THAT(target, HasSubstr("(deleted)"));
    }
  }
  EXPECT_TRUE(holds_arena) << "no open file of the child's in " << dir.path();
  EXPECT_TRUE(dir.empty());
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(dir.empty());
}

}  // namespace
}  // namespace offtune::test
