#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "offtune/host_sim.hpp"

namespace offtune::test {

at::Tensor sin_chain(const at::Tensor& x, int n) {
  at::Tensor h = x;
  for (int i = 0; i < n; ++i) h = h.sin();
  return h;
}

OffloadOptions host_sim_options(int64_t min_offload_size, int64_t window) {
  OffloadOptions o;
  o.backend = BackendKind::HostSim;
  o.min_offload_size = min_offload_size;
  o.max_fwd_stash_size = window;
  o.poison_freed = true;   // a buffer freed too early shows up as NaNs...
  o.reuse_freed = true;    // ...or as another tensor's values, when its block is reused at once
  o.check_streams = true;  // and stream-order violations are reported, whether or not they bit
  return o;
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor ca = a.contiguous().cpu(), cb = b.contiguous().cpu();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

std::vector<at::Tensor> step(const std::function<at::Tensor()>& forward,
                             const std::vector<at::Tensor>& params, ActivationOffloader* offloader,
                             bool sync_before_backward) {
  at::Tensor loss;
  if (offloader) {
    {
      auto scope = offloader->scope();
      loss = forward();
    }
    if (sync_before_backward) offloader->synchronize();
  } else {
    loss = forward();
  }
  loss.backward();
  std::vector<at::Tensor> out{loss.detach().clone()};
  for (auto& g : take_grads(params)) out.push_back(std::move(g));
  return out;
}

std::vector<at::Tensor> take_grads(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) {
    at::Tensor g = p.grad();
    out.push_back(g.defined() ? g.clone() : at::Tensor());
    if (g.defined()) p.mutable_grad().reset();
  }
  return out;
}

void expect_identical_step(const std::function<at::Tensor()>& forward,
                           const std::vector<at::Tensor>& params, ActivationOffloader& offloader,
                           bool sync_before_backward) {
  auto ref = step(forward, params, nullptr);
  auto got = step(forward, params, &offloader, sync_before_backward);
  ASSERT_EQ(ref.size(), got.size());
  EXPECT_TRUE(bitwise_equal(ref[0], got[0])) << "loss differs: " << ref[0] << " vs " << got[0];
  for (size_t i = 1; i < ref.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(ref[i], got[i])) << "gradient " << (i - 1) << " differs";
  }
  offloader.synchronize();
  EXPECT_TRUE(offloader.resident().resting());
  expect_no_stream_races();
}

void expect_no_stream_races() {
  std::string text;
  for (const auto& r : host_sim::take_stream_races()) text += "\n  " + r;
  EXPECT_TRUE(text.empty()) << "stream-order violations (host-sim):" << text;
}

void RecordingObserver::on_pack(const PackEvent& e) {
  std::lock_guard<std::mutex> l(mutex);
  packs.push_back(e);
}
void RecordingObserver::on_copy_issued(const CopyEvent& e) {
  std::lock_guard<std::mutex> l(mutex);
  issued.push_back(e);
}
void RecordingObserver::on_copy_completed(const CopyEvent& e) {
  std::lock_guard<std::mutex> l(mutex);
  completed.push_back(e);
}
void RecordingObserver::on_unpack(const UnpackEvent& e) {
  std::lock_guard<std::mutex> l(mutex);
  unpacks.push_back(e);
}
void RecordingObserver::on_wait(const WaitEvent& e) {
  std::lock_guard<std::mutex> l(mutex);
  waits.push_back(e);
}
void RecordingObserver::on_stash(const StashEvent& e) {
  std::lock_guard<std::mutex> l(mutex);
  stashes.push_back(e);
}
int64_t RecordingObserver::count(PackDecision d) {
  std::lock_guard<std::mutex> l(mutex);
  int64_t n = 0;
  for (auto& p : packs) n += p.decision == d;
  return n;
}

}  // namespace offtune::test
