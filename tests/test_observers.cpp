// What a run's events pass through on their way to the store: TeeObserver hands each to every
// target (spans end in reverse order, also when a begin throws), the Recorder turns them into
// timeline events (weight copies named apart from activation copies), and the models' layer hooks
// pair every backward begin with one end.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "offtune/profiler/recorder.hpp"
#include "offtune/profiler/runner.hpp"

#ifdef OFFTUNE_TEST_WORKLOADS
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <mutex>

#include "offtune/samples/layer_hooks.hpp"
#endif

namespace {

using namespace offtune;
using namespace offtune::profiler;

// ---------------------------------------------------------------------------------------------
// TeeObserver: spans reach every target, and end in reverse order

struct SpanLog : Observer {
  SpanLog(std::vector<std::string>& out, std::string name, bool throw_on_begin = false)
      : out_(out), name_(std::move(name)), throw_on_begin_(throw_on_begin) {}
  void on_span_begin(Span span) override {
    if (throw_on_begin_) throw std::runtime_error("begin failed");
    out_.push_back(name_ + " begin " + std::to_string(static_cast<int>(span.kind)));
  }
  void on_span_end(Span span) override {
    out_.push_back(name_ + " end " + std::to_string(static_cast<int>(span.kind)));
  }
  std::vector<std::string>& out_;
  std::string name_;
  bool throw_on_begin_;
};

TEST(TeeObserver, SpansBeginInOrderAndEndInReverse) {
  std::vector<std::string> calls;
  TeeObserver tee({std::make_shared<SpanLog>(calls, "a"), std::make_shared<SpanLog>(calls, "b")});
  tee.on_span_begin({SpanKind::Unpack});
  tee.on_span_end({SpanKind::Unpack});
  EXPECT_EQ(calls, (std::vector<std::string>{"a begin 1", "b begin 1", "b end 1", "a end 1"}));
}

TEST(TeeObserver, ABeginThatThrowsEndsTheTargetsAlreadyBegun) {
  // The engine ends no span whose begin threw, so the tee must not leave "a" open.
  std::vector<std::string> calls;
  TeeObserver tee({std::make_shared<SpanLog>(calls, "a"),
                   std::make_shared<SpanLog>(calls, "b", /*throw_on_begin=*/true)});
  EXPECT_THROW(tee.on_span_begin({SpanKind::Pack}), std::runtime_error);
  EXPECT_EQ(calls, (std::vector<std::string>{"a begin 0", "a end 0"}));
}

// Layer offloading's weight copies share the copy stream with the activations' and are recorded
// apart: named "weights", with no tensor id (theirs is a block index).
TEST(Recorder, WeightCopiesAreNamedApartFromActivationCopies) {
  Recorder rec(/*host_sim_compute=*/false);
  CopyEvent activation;
  activation.id = TensorId(3);
  activation.direction = CopyDirection::HostToDevice;
  activation.bytes = 100;
  activation.time_ns = 20;
  activation.issued_ns = 10;
  CopyEvent weights = activation;
  weights.weights = true;
  weights.prefetch = true;
  weights.bytes = 4000;
  weights.time_ns = 40;
  weights.issued_ns = 30;
  rec.on_copy_completed(activation);
  rec.on_copy_completed(weights);
  rec.on_wait(WaitEvent{WaitKind::Weights, TensorId(3), 35, 40});
  const auto events = rec.take().events;
  int copies = 0;
  for (const TimelineEvent& e : events) {
    if (e.kind == EventKind::CopyH2D) {
      ++copies;
      if (e.bytes == 4000) {
        EXPECT_EQ(e.name, "weights prefetch");
        EXPECT_EQ(e.tensor, -1);
      } else {
        EXPECT_EQ(e.name, std::string(to_string(CopyDirection::HostToDevice)));
        EXPECT_EQ(e.tensor, 3);
      }
    } else if (e.kind == EventKind::Wait) {
      EXPECT_EQ(e.name, "weights");
      EXPECT_EQ(e.tensor, -1);
    }
  }
  EXPECT_EQ(copies, 2);
}

#ifdef OFFTUNE_TEST_WORKLOADS
// The layer hooks' backward bookkeeping on its own: every begin gets exactly one end with its
// token, also when backward stops short of a block (autograd::grad to an inner tensor).
TEST(LayerHooks, EveryBackwardBeginGetsOneEndWithItsToken) {
  struct Calls {
    std::mutex mutex;
    std::vector<std::string> seen;
    uint64_t next = 100;
  };
  auto calls = std::make_shared<Calls>();
  samples::LayerHooks hooks;
  hooks.forward_begin = [calls](int64_t i) {
    std::lock_guard<std::mutex> lock(calls->mutex);
    calls->seen.push_back("fwd begin " + std::to_string(i));
  };
  hooks.forward_end = [calls](int64_t i) {
    std::lock_guard<std::mutex> lock(calls->mutex);
    calls->seen.push_back("fwd end " + std::to_string(i));
  };
  hooks.backward_begin = [calls](int64_t i) {
    std::lock_guard<std::mutex> lock(calls->mutex);
    calls->seen.push_back("bwd begin " + std::to_string(i) + " #" + std::to_string(calls->next));
    return calls->next++;
  };
  hooks.backward_end = [calls](int64_t i, uint64_t token) {
    std::lock_guard<std::mutex> lock(calls->mutex);
    calls->seen.push_back("bwd end " + std::to_string(i) + " #" + std::to_string(token));
  };

  const at::Tensor leaf = at::ones({4}).requires_grad_();
  const auto three_blocks = [&](at::Tensor& x1) {
    samples::detail::LayerTrace trace(hooks, 3);
    at::Tensor h = leaf * 3;  // the first block's input must be computed, as an embedding's is
    for (int64_t i = 0; i < 3; ++i) {
      const auto traced = trace.block(i, h);
      h = (h * 2).sin();
      if (i == 0) x1 = h;
    }
    trace.finish(h);
    return h.sum();
  };

  at::Tensor x1;
  three_blocks(x1).backward();
  EXPECT_EQ(calls->seen, (std::vector<std::string>{
                             "fwd begin 0", "fwd end 0", "fwd begin 1", "fwd end 1", "fwd begin 2",
                             "fwd end 2", "bwd begin 2 #100", "bwd end 2 #100", "bwd begin 1 #101",
                             "bwd end 1 #101", "bwd begin 0 #102", "bwd end 0 #102"}));

  // Backward to x1 only: block 0 begins (x1's gradient is its output's) but is never reached; its
  // end comes when the graph is freed.
  calls->seen.clear();
  {
    at::Tensor loss = three_blocks(x1);
    torch::autograd::grad({loss}, {x1});
    loss = at::Tensor();
    x1 = at::Tensor();
  }
  std::map<std::string, int> begins, ends;
  for (const auto& c : calls->seen) {
    if (c.starts_with("bwd begin")) ++begins[c.substr(10)];
    if (c.starts_with("bwd end")) ++ends[c.substr(8)];
  }
  EXPECT_EQ(begins, ends);
  EXPECT_FALSE(begins.empty());
}
#endif  // OFFTUNE_TEST_WORKLOADS

}  // namespace
