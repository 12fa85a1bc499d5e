// Engine hardening: autograd's safety nets kept under offloading, prefetch that never causes an
// out-of-memory, state that stays per scope and per backward, observers that may call back into
// the engine, and tensors saved on autograd's own threads reaching the right offloader.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <map>
#include <thread>

#include "offtune/host_sim.hpp"
#include "test_support.hpp"

namespace offtune::test {
namespace {

using ::testing::HasSubstr;

// Runs `fn` on a helper thread and fails the test (ending the process: a deadlocked thread cannot
// be joined) when it does not finish within `limit`.
void within(std::chrono::seconds limit, const std::function<void()>& fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto result = done->get_future();
  std::thread([done, fn] {
    try {
      fn();
      done->set_value();
    } catch (...) {
      done->set_exception(std::current_exception());
    }
  }).detach();
  if (result.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "did not finish within " << limit.count() << " s (deadlock?)";
    std::fflush(stdout);
    std::_Exit(1);
  }
  result.get();
}

// Host-sim's device capacity is process-wide: restore "unlimited" whatever the test does.
struct CapacityGuard {
  explicit CapacityGuard(int64_t bytes) { host_sim::set_capacity(bytes); }
  ~CapacityGuard() { host_sim::set_capacity(0); }
};

// ---- 1. autograd's version check ------------------------------------------------------------

std::string backward_error(const at::Tensor& loss) {
  try {
    loss.backward();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return {};
}

// Runs `forward` (which changes a saved tensor in place and returns the loss) without offtune and
// under an offloader that offloads every tensor, then one that keeps every tensor: backward raises
// autograd's own error in all three, and the offloader is left at rest.
void expect_in_place_change_raises(const std::function<at::Tensor(const at::Tensor& x)>& forward) {
  for (const int64_t threshold : {int64_t{0}, int64_t{1} << 40}) {
    SCOPED_TRACE("min_offload_size=" + std::to_string(threshold));
    ActivationOffloader off(host_sim_options(threshold));
    auto x = torch::randn({16, 32}, torch::requires_grad());
    auto run = [&](ActivationOffloader* o) {
      at::Tensor loss;
      {
        std::optional<OffloadScope> scope;
        if (o) scope.emplace(o->scope());
        loss = forward(x);
      }
      auto message = backward_error(loss);
      x.mutable_grad().reset();
      return message;
    };
    const std::string reference = run(nullptr);
    ASSERT_THAT(reference, HasSubstr("modified by an inplace operation"));
    const std::string got = run(&off);
    EXPECT_THAT(got, HasSubstr("modified by an inplace operation"));
    EXPECT_THAT(got, HasSubstr("is at version 1; expected version 0 instead"));
    EXPECT_GT(off.stats().packed, 0);
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
}

TEST(Hardening, InPlaceChangeOfASavedTensorRaisesAutogradsError) {
  expect_in_place_change_raises([](const at::Tensor& x) {
    auto h = x.mul(2);
    auto y = h.sin();  // saves h at version 0
    h.add_(1);         // h is now at version 1: sin's backward would use the wrong values
    return y.sum();
  });
}

TEST(Hardening, InPlaceChangeOfAnOutputSavedByItsOwnNodeRaises) {
  // exp saves its own result: kept, the engine holds it as its storage and geometry (holding the
  // tensor would close a reference cycle), and rebuilds it at unpack; offloaded, as any other.
  expect_in_place_change_raises([](const at::Tensor& x) {
    auto y = x.mul(2).exp();  // exp saves y at version 0
    auto loss = y.sum();
    torch::NoGradGuard no_grad;
    y.add_(1);  // y is now at version 1: exp's backward would use the wrong values
    return loss;
  });
}

TEST(Hardening, InPlaceChangeBetweenTwoBackwardsOfARetainedGraphRaises) {
  ActivationOffloader off(host_sim_options());
  auto x = torch::randn({16, 32}, torch::requires_grad());
  at::Tensor h, loss;
  {
    auto scope = off.scope();
    h = x.mul(3);
    loss = h.sin().sum();  // sin saves h
  }
  loss.backward({}, /*retain_graph=*/true);  // fine: nothing changed yet
  {
    torch::NoGradGuard no_grad;
    h.mul_(2);
  }
  EXPECT_THAT(backward_error(loss), HasSubstr("modified by an inplace operation"));
  h = at::Tensor();
  loss = at::Tensor();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

TEST(Hardening, InPlaceChangeBeforeTheSaveIsFine) {
  ActivationOffloader off(host_sim_options());
  auto x = torch::randn({16, 32}, torch::requires_grad());
  expect_identical_step(
      [&] {
        auto h = x.mul(2);
        h.add_(1);  // before anything saves h
        return h.sin().sum();
      },
      {x}, off);
}

// ---- 2. prefetch under memory pressure -------------------------------------------------------

struct Chain {
  std::vector<at::Tensor> weights;
  at::Tensor input;
  Chain() {
    torch::manual_seed(21);
    for (int i = 0; i < 6; ++i) {
      weights.push_back((torch::randn({128, 128}) / 12).requires_grad_());
    }
    input = torch::randn({64, 128});
  }
  at::Tensor forward() const {
    at::Tensor h = input;
    for (const auto& w : weights) h = torch::tanh(h.matmul(w)) * h.sigmoid();
    return h.pow(2).mean();
  }
};

int64_t step_peak(ActivationOffloader& off, const Chain& net) {
  off.synchronize();
  off.reset_peak_device_memory();
  step([&] { return net.forward(); }, net.weights, &off);
  off.synchronize();
  return off.device_memory().peak_allocated;
}

TEST(Hardening, PrefetchNeverTurnsAStepThatFitsIntoOutOfMemory) {
  Chain net;
  const auto reference = step([&] { return net.forward(); }, net.weights, nullptr);
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.prefetch = 0;
  int64_t peak0 = 0;
  {
    ActivationOffloader off(o);
    step_peak(off, net);  // warm: host-pool slabs, first-use allocations
    peak0 = step_peak(off, net);
  }
  ASSERT_GT(peak0, 0);
  for (const int64_t prefetch : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{4}}) {
    SCOPED_TRACE("prefetch=" + std::to_string(prefetch));
    o.prefetch = prefetch;
    ActivationOffloader off(o);
    step_peak(off, net);  // warm, unlimited
    std::vector<at::Tensor> got;
    {
      CapacityGuard capacity(peak0);  // exactly what prefetch 0 needs
      EXPECT_NO_THROW(got = step([&] { return net.forward(); }, net.weights, &off));
    }
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(reference[i], got[i])) << i;
    const auto st = off.stats();
    if (prefetch > 0) {
      // Prefetch still worked where there was room, and gave way where there was none.
      EXPECT_GT(st.prefetched, 0);
      EXPECT_GT(st.prefetch_skipped + st.prefetch_dropped, 0);
    }
    off.synchronize();
    EXPECT_TRUE(off.resident().resting());
  }
}

TEST(Hardening, PrefetchRespectsItsByteBound) {
  Chain net;
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.prefetch = 4;
  ActivationOffloader unbounded(o);
  expect_identical_step([&] { return net.forward(); }, net.weights, unbounded);
  EXPECT_EQ(unbounded.stats().prefetch_skipped, 0);  // unlimited device: nothing in the way
  o.max_prefetch_bytes = 64 * 128 * 4;               // one activation's worth
  ActivationOffloader bounded(o);
  expect_identical_step([&] { return net.forward(); }, net.weights, bounded);
  EXPECT_GT(bounded.stats().prefetched, 0);
  EXPECT_GT(bounded.stats().prefetch_skipped, 0);
  EXPECT_LT(bounded.stats().prefetched, unbounded.stats().prefetched);
}

// ---- 7. observers, scopes, windows, failed backwards ----------------------------------------

// Completions are reported when the engine notices them, with the time the copy finished.
TEST(Hardening, CopyCompletionsCarryTheTimeTheCopyFinished) {
  OffloadOptions o = host_sim_options(0, /*window=*/100);
  o.link = LinkModel{0.0, 0.0, 10'000'000};  // 10 ms per copy
  ActivationOffloader off(o);
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = x.sin().cos().exp().sum();  // two copies (x is a leaf), done within ~20 ms
  }
  // The copies are done ~20 ms after issue; the margins below allow the copy thread to be
  // descheduled for 150 ms on a loaded machine.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t noticed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count();
  off.synchronize();  // the engine notices them here
  {
    std::lock_guard<std::mutex> l(obs->mutex);
    ASSERT_EQ(obs->completed.size(), 2u);
    for (const auto& c : obs->completed) {
      // The issue time is taken before the copy is enqueued: no copy looks shorter than it was.
      EXPECT_GE(c.time_ns, c.issued_ns + 10'000'000);
      EXPECT_LT(c.time_ns, noticed - 130'000'000) << "stamped when noticed, not when done";
    }
  }
  loss.backward();
  loss = at::Tensor();
  x.mutable_grad().reset();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

// An observer that asks the engine for its figures from inside every event.
struct ReentrantObserver : Observer {
  ActivationOffloader* offloader = nullptr;
  std::atomic<int64_t> calls{0};
  void poke() {
    (void)offloader->stats();
    (void)offloader->resident();
    ++calls;
  }
  void on_pack(const PackEvent&) override { poke(); }
  void on_copy_issued(const CopyEvent&) override { poke(); }
  void on_copy_completed(const CopyEvent&) override { poke(); }
  void on_unpack(const UnpackEvent&) override { poke(); }
  void on_wait(const WaitEvent&) override { poke(); }
  void on_stash(const StashEvent&) override { poke(); }
};

TEST(Hardening, ObserverMayCallBackIntoTheEngine) {
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.prefetch = 2;
  o.link = LinkModel{2.0, 0.0, 200'000};  // copies outlast ops: waits happen
  ActivationOffloader off(o);
  auto obs = std::make_shared<ReentrantObserver>();
  obs->offloader = &off;
  off.set_observer(obs);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  within(std::chrono::seconds(60),
         [&] { expect_identical_step([&] { return sin_chain(x, 6).sum(); }, {x}, off); });
  EXPECT_GT(obs->calls.load(), 0);
}

TEST(Hardening, ScopeDestroyedOutOfOrderLeavesTheOtherScopeActive) {
  ActivationOffloader a(host_sim_options()), b(host_sim_options());
  auto x = torch::randn({8, 8}, torch::requires_grad());
  std::optional<OffloadScope> sa(a.scope());
  std::optional<OffloadScope> sb(b.scope());
  sa.reset();  // the outer scope ends first (it was moved into an optional, say)
  ASSERT_TRUE(offloading_active());
  auto y = x.mul(2).sin().sum();
  EXPECT_EQ(a.stats().packed, 0);
  EXPECT_GT(b.stats().packed, 0);
  sb.reset();
  EXPECT_FALSE(offloading_active());
  y.backward();
  a.synchronize();
  b.synchronize();
  EXPECT_TRUE(a.resident().resting());
  EXPECT_TRUE(b.resident().resting());
}

// A scope moved to another thread and destroyed there ends on the thread that made it: that thread
// saves normally from then on (before: its frame stayed, and once the offloader was gone the next
// saved tensor used the freed context), and the destroying thread keeps its own scope.
TEST(Hardening, ScopeDestroyedOnAnotherThreadEndsOnTheThreadThatMadeIt) {
  auto x = torch::randn({8, 8}, torch::requires_grad());
  auto off = std::make_unique<ActivationOffloader>(host_sim_options());
  ActivationOffloader other(host_sim_options());
  std::optional<OffloadScope> moved(off->scope());
  ASSERT_TRUE(offloading_active());
  std::thread([&] {
    auto own = other.scope();  // this thread's own frame
    moved.reset();             // made on the main thread, destroyed here
    EXPECT_TRUE(offloading_active());
    auto y = x.mul(2).sin().sum();
    EXPECT_GT(other.stats().packed, 0);
    y.backward();
  }).join();
  EXPECT_FALSE(offloading_active());
  const int64_t packed = off->stats().packed;
  auto z = x.mul(3).sin().sum();
  EXPECT_EQ(off->stats().packed, packed);
  off.reset();  // the offloader goes: a frame left behind would now point at freed memory
  auto w = x.mul(4).cos().sum();
  (z + w).backward();
  EXPECT_TRUE(x.grad().defined());

  // A scope whose thread has ended: its frames ended with the thread, and the pop is a no-op.
  std::optional<OffloadScope> orphan;
  std::thread([&] { orphan.emplace(other.scope()); }).join();
  orphan.reset();
  EXPECT_FALSE(offloading_active());
}

// Events that a reclaim collects (on the thread whose allocation asked for memory) reach the
// observer that was attached then, and never one detached since: set_observer(nullptr) returns
// only after deliveries in flight, and later ones are dropped. Before, such events waited in the
// allocating thread's queue with a raw pointer to the observer and reached it (or the memory it
// had been freed from) at that thread's next engine call.
TEST(Hardening, ReclaimEventsNeverReachADetachedObserver) {
  OffloadOptions o = host_sim_options(0, /*window=*/64);
  o.prefetch = 4;
  auto off = std::make_unique<ActivationOffloader>(o);
  struct Gate : RecordingObserver {
    std::mutex m;
    std::condition_variable cv;
    bool prefetch_seen = false, released = false;
    std::atomic<bool> detached{false};
    std::atomic<int> after_detach{0};
    void on_copy_issued(const CopyEvent& e) override {
      if (detached) ++after_detach;
      if (e.direction != CopyDirection::HostToDevice || !e.prefetch) return;
      std::unique_lock<std::mutex> l(m);
      if (released || prefetch_seen) return;
      prefetch_seen = true;
      cv.notify_all();
      cv.wait(l, [&] { return released; });  // backward pauses with prefetched buffers held
    }
    void on_stash(const StashEvent& e) override {
      if (detached) ++after_detach;
      RecordingObserver::on_stash(e);
    }
  };
  auto gate = std::make_shared<Gate>();
  off->set_observer(gate);
  auto x = torch::randn({64, 64}, torch::requires_grad());
  at::Tensor loss;
  {
    auto scope = off->scope();
    auto h = x;
    for (int i = 0; i < 8; ++i) h = h.sin();
    loss = h.sum();
  }
  // Every copy done and the forward window empty: backward reloads, and prefetches, every tensor
  // (else, on a loaded machine, copies still in flight are served from the window, unprefetched).
  off->synchronize();
  std::thread backward([&] { loss.backward(); });
  struct Release {  // whatever happens below, the backward goes on and is joined
    Gate& gate;
    std::thread& thread;
    ~Release() {
      {
        std::lock_guard<std::mutex> l(gate.m);
        gate.released = true;
      }
      gate.cv.notify_all();
      if (thread.joinable()) thread.join();
    }
  } release{*gate, backward};
  {
    std::unique_lock<std::mutex> l(gate->m);
    ASSERT_TRUE(
        gate->cv.wait_for(l, std::chrono::seconds(60), [&] { return gate->prefetch_seen; }));
  }
  {
    // An allocation on this thread, outside any engine call, that does not fit (on a stream of
    // its own, no cached block serves it, and the device holds no new segment): the allocator
    // asks the offloaders for their prefetched buffers.
    host_sim::StreamGuard own(host_sim::new_stream());
    CapacityGuard capacity(host_sim::counters().modelled_reserved);
    try {
      auto big = torch::empty({1 << 16});
    } catch (const c10::OutOfMemoryError&) {
    }
  }
  EXPECT_GT(off->stats().prefetch_dropped, 0);
  {
    std::lock_guard<std::mutex> l(gate->m);
    gate->released = true;
  }
  gate->cv.notify_all();
  backward.join();
  x.mutable_grad().reset();
  off->set_observer(nullptr);  // no scope or backward of `off` is running
  gate->detached = true;
  // This thread's next engine calls, with another offloader: nothing may reach `gate` now.
  ActivationOffloader second(host_sim_options());
  expect_identical_step([&] { return x.sin().cos().sum(); }, {x}, second);
  EXPECT_EQ(gate->after_detach.load(), 0);
}

// Which thread packed each tensor id, and the ids reloaded while a given thread ran backward.
struct ThreadObserver : Observer {
  std::mutex mutex;
  std::map<int64_t, std::thread::id> packed_by;
  std::vector<std::pair<int64_t, std::thread::id>> reloads;  // (id, thread that issued it)
  void on_pack(const PackEvent& e) override {
    std::lock_guard<std::mutex> l(mutex);
    packed_by[e.id.value] = std::this_thread::get_id();
  }
  void on_copy_issued(const CopyEvent& e) override {
    if (e.direction != CopyDirection::HostToDevice) return;
    std::lock_guard<std::mutex> l(mutex);
    reloads.emplace_back(e.id.value, std::this_thread::get_id());
  }
};

TEST(Hardening, ConcurrentScopesPrefetchOnlyTheirOwnGraph) {
  OffloadOptions o = host_sim_options(0, /*window=*/64);
  o.prefetch = 3;
  ActivationOffloader off(o);
  auto obs = std::make_shared<ThreadObserver>();
  off.set_observer(obs);
  auto x1 = torch::randn({32, 32}, torch::requires_grad());
  auto x2 = torch::randn({32, 32}, torch::requires_grad());
  // The two forwards alternate op by op, so that the engine sees their packs interleaved.
  std::mutex m;
  std::condition_variable cv;
  int turn = 0;
  constexpr int kOps = 8;
  auto take_turn = [&](int me, const std::function<void()>& op) {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return turn % 2 == me; });
    op();
    ++turn;
    cv.notify_all();
  };
  at::Tensor loss1, loss2;
  std::thread t1([&] {
    auto scope = off.scope();
    at::Tensor h = x1;
    for (int i = 0; i < kOps; ++i) take_turn(0, [&] { h = h.sin(); });
    loss1 = h.sum();
  });
  std::thread t2([&] {
    auto scope = off.scope();
    at::Tensor h = x2;
    for (int i = 0; i < kOps; ++i) take_turn(1, [&] { h = h.cos(); });
    loss2 = h.sum();
  });
  t1.join();
  t2.join();
  off.synchronize();  // every copy done and out of the window: backward reloads (and prefetches)
  std::thread::id backward_thread;
  std::thread b1([&] {
    backward_thread = std::this_thread::get_id();
    loss1.backward();
  });
  b1.join();
  SCOPED_TRACE("reloaded=" + std::to_string(off.stats().reloaded) +
               " from_fwd_stash=" + std::to_string(off.stats().from_fwd_stash) +
               " offloaded=" + std::to_string(off.stats().offloaded));
  {
    std::lock_guard<std::mutex> l(obs->mutex);
    ASSERT_FALSE(obs->reloads.empty());
    const auto owner = obs->packed_by.at(obs->reloads.front().first);
    for (const auto& [id, issuer] : obs->reloads) {
      EXPECT_EQ(obs->packed_by.at(id), owner) << "tensor " << id << " of the other graph reloaded";
    }
  }
  loss2.backward();
  loss1 = loss2 = at::Tensor();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

// The byte bound of the forward window counts what the window keeps alive: whole storages.
TEST(Hardening, ByteWindowCountsTheStorageAHoldKeepsAlive) {
  const ModelledTime modelled;  // the waits below must not depend on this machine's load
  OffloadOptions o = host_sim_options(0, /*window=*/100);
  o.max_fwd_stash_bytes = 64 << 10;
  o.link = LinkModel{0.5, 0.0, 20'000'000};  // 20 ms per copy: every copy is still in flight
  ActivationOffloader off(o);
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  auto x = torch::randn({1024, 256}, torch::requires_grad());  // 1 MiB
  expect_identical_step(
      [&] {
        at::Tensor big = x.mul(1);                    // a 1 MiB activation
        at::Tensor part = big.narrow(0, 0, 4).sin();  // saves a 4 KiB view of it
        big = at::Tensor();                           // only the window keeps it alive now
        return part.cos().sum() + part.exp().sum();   // more saves: the window must wait
      },
      {x}, off);
  int64_t max_fwd = 0;
  for (const auto& s : obs->stashes) max_fwd = std::max(max_fwd, s.fwd_bytes);
  EXPECT_GE(max_fwd, int64_t{1024} * 256 * 4);  // the whole storage is held, and counted
  EXPECT_GT(off.stats().window_waits, 0);
}

TEST(Hardening, FailedBackwardReleasesWhatItBroughtBack) {
  OffloadOptions o = host_sim_options(0, /*window=*/1);
  o.prefetch = 2;
  ActivationOffloader off(o);
  auto x = torch::randn({32, 32}, torch::requires_grad());
  at::Tensor loss;
  {
    auto scope = off.scope();
    auto h = x;
    for (int i = 0; i < 4; ++i) h = h.sin();
    auto mid = h.tanh();
    // Thrown after the later nodes have unpacked (and prefetched) their tensors.
    mid.register_hook([](at::Tensor) -> at::Tensor { throw std::runtime_error("boom"); });
    loss = mid.exp().cos().sum();
  }
  EXPECT_ANY_THROW(loss.backward({}, /*retain_graph=*/true));
  off.synchronize();
  // The graph is retained (its host copies stay), but no device buffer outlives the backward.
  const auto r = off.resident();
  EXPECT_GT(r.tracked, 0);
  EXPECT_EQ(r.bwd_stash_count, 0);
  EXPECT_EQ(r.bwd_stash_bytes, 0);
  loss = at::Tensor();
  x.mutable_grad().reset();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

// ---- section 2: tensors saved while autograd runs backward --------------------------------

// A gradient penalty: the first backward records a graph (create_graph), saving tensors as it goes.
std::vector<at::Tensor> penalty_step(const at::Tensor& w, const at::Tensor& x,
                                     ActivationOffloader* off) {
  at::Tensor loss;
  {
    std::optional<OffloadScope> scope;
    if (off) scope.emplace(off->scope());
    loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();
  }
  // Outside the scope, as a training loop writes it.
  auto g = torch::autograd::grad({loss}, {w}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  auto total = loss + g.pow(2).sum();
  total.backward();
  std::vector<at::Tensor> out{total.detach().clone(), w.grad().clone()};
  w.mutable_grad().reset();
  return out;
}

TEST(Hardening, TensorsSavedDuringBackwardGoToTheGraphsOffloader) {
  torch::manual_seed(5);
  auto w = torch::randn({64, 64}, torch::requires_grad());
  auto x = torch::randn({32, 64});
  ActivationOffloader off(host_sim_options());
  auto obs = std::make_shared<RecordingObserver>();
  off.set_observer(obs);
  const auto reference = penalty_step(w, x, nullptr);
  int64_t forward_packs = 0;
  {
    auto scope = off.scope();
    auto loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();  // the same forward, dropped
    forward_packs = off.stats().packed;
  }
  const auto got = penalty_step(w, x, &off);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(reference[i], got[i])) << i;
  // The create_graph backward saves tensors too, and they go through the same offloader.
  EXPECT_GT(off.stats().packed, 2 * forward_packs);
  EXPECT_GT(obs->count(PackDecision::Offloaded), 2 * forward_packs);
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

TEST(Hardening, BackwardOfAGraphWithOnlyKeptTensorsStillFindsItsOffloader) {
  torch::manual_seed(8);
  auto w = torch::randn({64, 64}, torch::requires_grad());
  auto x = torch::randn({32, 64});
  ActivationOffloader off(host_sim_options(/*min_offload_size=*/int64_t{1} << 40));
  const auto reference = penalty_step(w, x, nullptr);
  int64_t forward_packs = 0;
  {
    auto scope = off.scope();
    auto loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();
    forward_packs = off.stats().packed;
  }
  const auto got = penalty_step(w, x, &off);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(reference[i], got[i])) << i;
  EXPECT_GT(off.stats().packed, 2 * forward_packs);
  EXPECT_EQ(off.stats().offloaded, 0);
}

TEST(Hardening, BackwardOnAnotherThreadUsesTheGraphsOffloader) {
  torch::manual_seed(6);
  auto w = torch::randn({64, 64}, torch::requires_grad());
  auto x = torch::randn({32, 64});
  ActivationOffloader off(host_sim_options());
  const auto reference = penalty_step(w, x, nullptr);
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();
  }
  const int64_t packed_in_forward = off.stats().packed;
  std::vector<at::Tensor> got;
  std::thread([&] {
    // No scope on this thread: the graph's offloader is found through the graph.
    auto g =
        torch::autograd::grad({loss}, {w}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    auto total = loss + g.pow(2).sum();
    total.backward();
    got = {total.detach().clone(), w.grad().clone()};
  }).join();
  w.mutable_grad().reset();
  EXPECT_GT(off.stats().packed, packed_in_forward);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(reference[i], got[i])) << i;
  loss = at::Tensor();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

TEST(Hardening, BackwardInsideANoOffloadRegionSavesNormally) {
  torch::manual_seed(7);
  auto w = torch::randn({64, 64}, torch::requires_grad());
  auto x = torch::randn({32, 64});
  ActivationOffloader off(host_sim_options());
  at::Tensor loss;
  {
    auto scope = off.scope();
    loss = torch::tanh(x.matmul(w)).sin().pow(2).mean();
  }
  const int64_t packed_in_forward = off.stats().packed;
  {
    NoOffloadRegion none;  // the caller opts the backward's own saves out
    auto g = torch::autograd::grad({loss}, {w}, {}, true, true)[0];
    (loss + g.pow(2).sum()).backward();
  }
  EXPECT_EQ(off.stats().packed, packed_in_forward);
  w.mutable_grad().reset();
  loss = at::Tensor();
  off.synchronize();
  EXPECT_TRUE(off.resident().resting());
}

}  // namespace
}  // namespace offtune::test
