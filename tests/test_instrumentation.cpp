// NVTX emission and the CUPTI collector, without Nsight and without a GPU.
//
// NVTX: NVTX_INJECTION64_PATH points NVTX at tests/nvtx_injection's library, which logs every
// domain, string, category, range, mark and counter call; the tests read that log back. Built with
// the workloads (OFFTUNE_TEST_WORKLOADS), they also run host-sim training steps of the built-in
// models and check the ranges the engine, the models' layer hooks and the workloads emit.
// CUPTI: activity buffers are built by hand from the CUPTI structs and parsed; the collector itself
// is started only to check that it steps aside cleanly where there is no GPU (or, on a GPU machine,
// that it starts and stops cleanly).
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "offtune/profiler/cupti.hpp"
#include "offtune/profiler/nvtx.hpp"
#include "offtune/profiler/runner.hpp"

#ifdef OFFTUNE_TEST_WORKLOADS
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <atomic>
#include <mutex>

#include "offtune/offloader.hpp"
#include "offtune/samples/layer_hooks.hpp"
#include "offtune/samples/registry.hpp"
#endif

namespace {

using namespace offtune;
using namespace offtune::profiler;

// ---------------------------------------------------------------------------------------------
// NVTX

#ifdef OFFTUNE_NVTX_INJECTION_PATH
// Before main(): NVTX reads the variable once, on the process's first NVTX call.
const bool kInjectionRequested = [] {
  setenv("NVTX_INJECTION64_PATH", OFFTUNE_NVTX_INJECTION_PATH, 1);
  return true;
}();
#endif

struct NvtxRecord {
  std::string kind;
  std::map<std::string, std::string> fields;
  std::string operator[](const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? std::string("<none>") : it->second;
  }
};

// The injection library's log, parsed. Empty (and a test failure) when NVTX did not load it.
std::vector<NvtxRecord> read_log() {
#ifdef OFFTUNE_NVTX_INJECTION_PATH
  // RTLD_NOLOAD: the handle of the copy NVTX loaded (same path), never a second copy.
  void* lib = dlopen(OFFTUNE_NVTX_INJECTION_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) {
    ADD_FAILURE() << "NVTX did not load the injection library " << OFFTUNE_NVTX_INJECTION_PATH;
    return {};
  }
  using LogFn = const char* (*)();
  auto log_fn = reinterpret_cast<LogFn>(dlsym(lib, "offtune_nvtx_log"));
  std::string text = log_fn != nullptr ? log_fn() : "";
  dlclose(lib);  // drops only the reference taken here
  std::vector<NvtxRecord> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    NvtxRecord r;
    std::istringstream parts(line);
    std::getline(parts, r.kind, '\t');
    for (std::string field; std::getline(parts, field, '\t');) {
      const auto eq = field.find('=');
      r.fields[field.substr(0, eq)] = eq == std::string::npos ? "" : field.substr(eq + 1);
    }
    out.push_back(std::move(r));
  }
  return out;
#else
  return {};
#endif
}

std::vector<NvtxRecord> only(const std::vector<NvtxRecord>& log, const std::string& kind) {
  std::vector<NvtxRecord> out;
  for (const auto& r : log) {
    if (r.kind == kind) out.push_back(r);
  }
  return out;
}

class NvtxEmission : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef OFFTUNE_NVTX_INJECTION_PATH
    GTEST_SKIP() << "built without OFFTUNE_NVTX_INJECTION_PATH";
#endif
    if (!nvtx_compiled_in()) GTEST_SKIP() << "built with OFFTUNE_NVTX=OFF";
    nvtx_initialize();  // the first NVTX call of the process loads the injection library
    cursor_ = read_log().size();
  }

  // Records logged since SetUp, in the offtune domain.
  std::vector<NvtxRecord> since_setup() const {
    auto log = read_log();
    std::vector<NvtxRecord> out;
    for (size_t i = cursor_; i < log.size(); ++i) {
      if (log[i]["domain"] == "offtune") out.push_back(log[i]);
    }
    return out;
  }

  // Counter id by name, from the registrations.
  static std::string counter_id(const std::string& name) {
    for (const auto& r : only(read_log(), "counter_register")) {
      if (r["name"] == name) return r["id"];
    }
    return "<unregistered>";
  }

  size_t cursor_ = 0;
};

TEST_F(NvtxEmission, DomainStringsCategoriesAndCountersAreRegisteredOnce) {
  const auto log = read_log();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(only(log, "init").size(), 1u);

  const auto domains = only(log, "domain_create");
  ASSERT_EQ(domains.size(), 1u);
  EXPECT_EQ(domains[0]["name"], "offtune");

  std::vector<std::string> strings;
  for (const auto& r : only(log, "register_string")) {
    EXPECT_EQ(r["domain"], "offtune");
    strings.push_back(r["text"]);
  }
  std::vector<std::string> expected = {"step",    "forward", "backward", "pack", "unpack",
                                       "offload", "reload",  "wait",     "layer"};
  for (int i = 0; i < 128; ++i) expected.push_back("layer " + std::to_string(i));
  EXPECT_EQ(strings, expected);

  std::map<std::string, std::string> categories;
  for (const auto& r : only(log, "name_category")) categories[r["id"]] = r["name"];
  EXPECT_EQ(categories["1"], "phase");
  EXPECT_EQ(categories["10"], "pack: offloaded");
  EXPECT_EQ(categories["12"], "pack: kept");
  EXPECT_EQ(categories["20"], "copy: d2h");
  EXPECT_EQ(categories["22"], "copy: h2d prefetch");
  EXPECT_EQ(categories["32"], "unpack: reloaded");
  EXPECT_EQ(categories["40"], "wait: forward-window");
  EXPECT_EQ(categories["42"], "wait: drain");
  EXPECT_EQ(categories["50"], "hook: pack");
  EXPECT_EQ(categories["51"], "hook: unpack");
  EXPECT_EQ(categories["60"], "layer: forward");
  EXPECT_EQ(categories["61"], "layer: backward");
  EXPECT_EQ(categories.size(), 18u);  // phase, 3 pack, 3 copy, 4 unpack, 3 wait, 2 hook, 2 layer

  // The counters extension found the tool, and the three counters are int64 byte levels with the
  // static ids offtune feeds forward.
  bool counters_module = false;
  for (const auto& r : only(log, "ext_init")) {
    counters_module |= r["module"] == "4";  // NVTX_EXT_COUNTERS_MODULEID
  }
  EXPECT_TRUE(counters_module);
  const auto counters = only(log, "counter_register");
  ASSERT_EQ(counters.size(), 3u);
  const std::vector<std::string> names = {"stash forward bytes", "stash backward bytes",
                                          "device bytes"};
  for (size_t i = 0; i < counters.size(); ++i) {
    EXPECT_EQ(counters[i]["name"], names[i]);
    EXPECT_EQ(counters[i]["id"], std::to_string((1 << 24) + static_cast<int>(i) + 1));
    EXPECT_EQ(counters[i]["schema"], "17");  // NVTX_PAYLOAD_ENTRY_TYPE_INT64
    EXPECT_EQ(counters[i]["unit"], "bytes");
  }

  // Observers and ranges made later register nothing more.
  NvtxObserver again;
  { NvtxRange r(NvtxPhase::Step); }
  const auto after = read_log();
  EXPECT_EQ(only(after, "domain_create").size(), 1u);
  EXPECT_EQ(only(after, "register_string").size(), 9u + 128u);
  EXPECT_EQ(only(after, "counter_register").size(), 3u);
}

TEST_F(NvtxEmission, StepForwardBackwardRangesPushAndPop) {
  {
    NvtxRange step(NvtxPhase::Step, 7);
    { NvtxRange forward(NvtxPhase::Forward); }
    { NvtxRange backward(NvtxPhase::Backward, 7); }
  }
  const auto got = since_setup();
  ASSERT_EQ(got.size(), 6u);
  const std::vector<std::string> kinds = {"push", "push", "pop", "push", "pop", "pop"};
  const std::vector<std::string> messages = {"step",     "forward", "<none>",
                                             "backward", "<none>",  "<none>"};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].kind, kinds[i]) << i;
    EXPECT_EQ(got[i]["message"], messages[i]) << i;
    if (got[i].kind == "push") {
      EXPECT_EQ(got[i]["message_type"], "registered");
      EXPECT_EQ(got[i]["category"], "1");
    }
  }
  EXPECT_EQ(got[0]["payload_type"], "int64");
  EXPECT_EQ(got[0]["payload"], "7");
  EXPECT_EQ(got[1]["payload"], "<none>");  // no step index given
  EXPECT_EQ(got[3]["payload"], "7");
}

TEST_F(NvtxEmission, PackMarksCarryBytesAndDecision) {
  NvtxObserver obs;
  obs.on_pack({TensorId{3}, 4096, PackDecision::Offloaded, KeepReason::None, 100});
  obs.on_pack({TensorId{4}, 4096, PackDecision::Deduplicated, KeepReason::None, 110});
  obs.on_pack({TensorId{5}, 512, PackDecision::Kept, KeepReason::BelowThreshold, 120});
  const auto got = since_setup();
  ASSERT_EQ(got.size(), 3u);
  const std::vector<std::string> categories = {"10", "11", "12"};
  const std::vector<std::string> payloads = {"4096", "4096", "512"};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].kind, "mark");
    EXPECT_EQ(got[i]["message"], "pack");
    EXPECT_EQ(got[i]["message_type"], "registered");
    EXPECT_EQ(got[i]["category"], categories[i]);
    EXPECT_EQ(got[i]["payload_type"], "int64");
    EXPECT_EQ(got[i]["payload"], payloads[i]);
  }
}

TEST_F(NvtxEmission, IssuedCopiesAreMarksColouredByPinnedness) {
  NvtxObserver obs;
  obs.on_copy_issued({TensorId{1}, CopyDirection::DeviceToHost, 1 << 20, true, true, false, 5, 0});
  obs.on_copy_issued({TensorId{1}, CopyDirection::HostToDevice, 1 << 20, false, true, true, 9, 0});
  obs.on_copy_issued({TensorId{2}, CopyDirection::HostToDevice, 2048, true, true, false, 12, 0});
  // Completions are Nsight's to show (the copies themselves), not marks.
  obs.on_copy_completed(
      {TensorId{1}, CopyDirection::DeviceToHost, 1 << 20, true, true, false, 7, 5});
  const auto got = since_setup();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].kind, "mark");
  EXPECT_EQ(got[0]["message"], "offload");
  EXPECT_EQ(got[0]["category"], "20");
  EXPECT_EQ(got[0]["payload"], std::to_string(1 << 20));
  EXPECT_EQ(got[0]["color"], "0xff2ea043");  // pinned: green
  EXPECT_EQ(got[1]["message"], "reload");
  EXPECT_EQ(got[1]["category"], "22");       // prefetch
  EXPECT_EQ(got[1]["color"], "0xffd03030");  // pageable: red
  EXPECT_EQ(got[2]["message"], "reload");
  EXPECT_EQ(got[2]["category"], "21");
  EXPECT_EQ(got[2]["payload"], "2048");
}

TEST_F(NvtxEmission, UnpacksAreMarksAndWaitEventsAddNothing) {
  NvtxObserver obs;
  obs.on_unpack({TensorId{3}, UnpackSource::Reloaded, 2048, 500});
  obs.on_unpack({TensorId{4}, UnpackSource::Kept, 64, 510});
  // The wait range (a span) is the wait; the after-the-fact event would only repeat it.
  obs.on_wait({WaitKind::Reload, TensorId{3}, 100, 350});
  const auto got = since_setup();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].kind, "mark");
  EXPECT_EQ(got[0]["message"], "unpack");
  EXPECT_EQ(got[0]["category"], "32");
  EXPECT_EQ(got[0]["payload"], "2048");
  EXPECT_EQ(got[1]["category"], "30");
}

TEST_F(NvtxEmission, EngineSpansArePushPopRangesAroundTheirMarks) {
  NvtxObserver obs;
  obs.on_span_begin({SpanKind::Pack});
  obs.on_span_begin({SpanKind::Wait, WaitKind::ForwardWindow});
  obs.on_span_end({SpanKind::Wait, WaitKind::ForwardWindow});
  obs.on_pack({TensorId{1}, 4096, PackDecision::Offloaded, KeepReason::None, 10});
  obs.on_span_end({SpanKind::Pack});
  obs.on_span_begin({SpanKind::Unpack});
  obs.on_span_begin({SpanKind::Wait, WaitKind::Reload});
  obs.on_span_end({SpanKind::Wait, WaitKind::Reload});
  obs.on_unpack({TensorId{1}, UnpackSource::Reloaded, 4096, 20});
  obs.on_span_end({SpanKind::Unpack});
  obs.on_span_begin({SpanKind::Wait, WaitKind::Drain});
  obs.on_span_end({SpanKind::Wait, WaitKind::Drain});

  const auto got = since_setup();
  const std::vector<std::string> kinds = {"push", "push", "pop",  "mark", "pop",  "push",
                                          "push", "pop",  "mark", "pop",  "push", "pop"};
  const std::vector<std::string> messages = {"pack",   "wait",   "<none>", "pack",
                                             "<none>", "unpack", "wait",   "<none>",
                                             "unpack", "<none>", "wait",   "<none>"};
  const std::vector<std::string> categories = {"50",     "40", "<none>", "10", "<none>", "51", "41",
                                               "<none>", "32", "<none>", "42", "<none>"};
  const std::vector<std::string> depths = {"0", "1", "1",      "<none>", "0", "0",
                                           "1", "1", "<none>", "0",      "0", "0"};
  ASSERT_EQ(got.size(), kinds.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].kind, kinds[i]) << i;
    EXPECT_EQ(got[i]["message"], messages[i]) << i;
    EXPECT_EQ(got[i]["category"], categories[i]) << i;
    EXPECT_EQ(got[i]["depth"], depths[i]) << i;
    if (got[i].kind == "push") {
      EXPECT_EQ(got[i]["message_type"], "registered") << i;
      EXPECT_EQ(got[i]["payload"], "<none>") << i;  // the outcome is the mark's
    }
  }
  EXPECT_EQ(got[3]["payload"], "4096");
}

TEST_F(NvtxEmission, LayerRangesAreNamedByIndexWithItAsPayload) {
  nvtx_layer_forward_begin(3);
  nvtx_layer_forward_end();
  const uint64_t id = nvtx_layer_backward_begin(5);
  nvtx_layer_backward_end(id);
  nvtx_layer_forward_begin(500);  // beyond the named layers: the generic name
  nvtx_layer_forward_end();

  const auto got = since_setup();
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].kind, "push");
  EXPECT_EQ(got[0]["message"], "layer 3");
  EXPECT_EQ(got[0]["message_type"], "registered");
  EXPECT_EQ(got[0]["category"], "60");
  EXPECT_EQ(got[0]["payload_type"], "int64");
  EXPECT_EQ(got[0]["payload"], "3");
  EXPECT_EQ(got[1].kind, "pop");
  EXPECT_EQ(got[1]["depth"], "0");
  // Backward: a start/end range, ended by the id start handed out.
  EXPECT_EQ(got[2].kind, "start");
  EXPECT_EQ(got[2]["message"], "layer 5");
  EXPECT_EQ(got[2]["category"], "61");
  EXPECT_EQ(got[2]["payload"], "5");
  EXPECT_EQ(got[2]["id"], std::to_string(id));
  EXPECT_NE(id, 0u);
  EXPECT_EQ(got[3].kind, "end");
  EXPECT_EQ(got[3]["id"], std::to_string(id));
  EXPECT_EQ(got[4]["message"], "layer");
  EXPECT_EQ(got[4]["payload"], "500");
  EXPECT_EQ(got[5].kind, "pop");
}

TEST_F(NvtxEmission, StashAndDeviceBytesAreCounters) {
  NvtxObserver obs;
  obs.on_stash({2, 1000, 1, 2000, 77});
  obs.sample_device_bytes(5000);
  const auto got = since_setup();
  ASSERT_EQ(got.size(), 3u);
  for (const auto& r : got) EXPECT_EQ(r.kind, "counter_int64");
  EXPECT_EQ(got[0]["id"], counter_id("stash forward bytes"));
  EXPECT_EQ(got[0]["value"], "1000");
  EXPECT_EQ(got[1]["id"], counter_id("stash backward bytes"));
  EXPECT_EQ(got[1]["value"], "2000");
  EXPECT_EQ(got[2]["id"], counter_id("device bytes"));
  EXPECT_EQ(got[2]["value"], "5000");
}

TEST_F(NvtxEmission, EventsFromSeveralThreadsAllArrive) {
  NvtxObserver obs;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&obs, t] {
      for (int i = 0; i < 100; ++i) {
        obs.on_pack({TensorId{t * 100 + i}, 4096, PackDecision::Offloaded, KeepReason::None, i});
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(only(since_setup(), "mark").size(), 400u);
}

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

#ifdef OFFTUNE_TEST_WORKLOADS
// ---------------------------------------------------------------------------------------------
// NVTX in a training step: the engine's spans, the models' layers, the workloads' phases

// The log's ranges rebuilt: push/pop per thread (a pop closes the thread's innermost push),
// start/end by id. `problems` lists whatever does not balance.
struct RangeTree {
  struct Range {
    NvtxRecord open;
    bool pushed = true;  // false: a start/end range
    size_t begin = 0;    // positions in the log
    size_t end = 0;
    int parent = -1;  // the enclosing push range on the same thread (push ranges and marks)
  };
  std::vector<Range> ranges;
  std::vector<std::pair<NvtxRecord, int>> marks;  // with their enclosing push range
  std::vector<std::string> problems;

  explicit RangeTree(const std::vector<NvtxRecord>& log) {
    std::map<std::string, std::vector<int>> stacks;  // by thread
    std::map<std::string, int> started;              // by id
    for (size_t i = 0; i < log.size(); ++i) {
      const NvtxRecord& r = log[i];
      std::vector<int>& stack = stacks[r["thread"]];
      const int top = stack.empty() ? -1 : stack.back();
      if (r.kind == "push" || r.kind == "start") {
        ranges.push_back({r, r.kind == "push", i, 0, r.kind == "push" ? top : -1});
        const int index = static_cast<int>(ranges.size()) - 1;
        if (r.kind == "push") {
          stack.push_back(index);
        } else {
          started[r["id"]] = index;
        }
      } else if (r.kind == "pop") {
        if (stack.empty()) {
          problems.push_back("pop without push at " + std::to_string(i));
          continue;
        }
        ranges[static_cast<size_t>(stack.back())].end = i;
        stack.pop_back();
      } else if (r.kind == "end") {
        auto it = started.find(r["id"]);
        if (it == started.end()) {
          problems.push_back("end of an unknown range " + r["id"]);
          continue;
        }
        ranges[static_cast<size_t>(it->second)].end = i;
        started.erase(it);
      } else if (r.kind == "mark") {
        marks.emplace_back(r, top);
      }
    }
    for (const auto& [thread, stack] : stacks) {
      for (int open : stack) {
        problems.push_back("never popped: " + ranges[static_cast<size_t>(open)].open["message"]);
      }
    }
    for (const auto& [id, open] : started) problems.push_back("never ended: range " + id);
  }

  // Indices of the ranges with this category.
  std::vector<int> with_category(const std::string& category) const {
    std::vector<int> out;
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].open["category"] == category) out.push_back(static_cast<int>(i));
    }
    return out;
  }
  int first(const std::string& message, const std::string& category) const {
    for (size_t i = 0; i < ranges.size(); ++i) {
      if (ranges[i].open["message"] == message && ranges[i].open["category"] == category) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  const Range& at(int i) const { return ranges[static_cast<size_t>(i)]; }
  // Marks directly inside range i (not inside a range nested in it).
  std::vector<NvtxRecord> marks_in(int i) const {
    std::vector<NvtxRecord> out;
    for (const auto& [mark, parent] : marks) {
      if (parent == i) out.push_back(mark);
    }
    return out;
  }
  bool within(int inner, int outer) const {
    return at(outer).begin < at(inner).begin && at(inner).end < at(outer).end;
  }
};

// The engine's after-the-fact events, counted, to compare with the ranges.
struct CountingObserver : Observer {
  void on_pack(const PackEvent&) override { ++packs; }
  void on_unpack(const UnpackEvent&) override { ++unpacks; }
  void on_wait(const WaitEvent& e) override {
    if (e.kind == WaitKind::ForwardWindow) ++window_waits;
    if (e.kind == WaitKind::Reload) ++reload_waits;
  }
  std::atomic<int64_t> packs{0}, unpacks{0}, window_waits{0}, reload_waits{0};
};

class NvtxTrainingStep : public NvtxEmission {
 protected:
  struct Step {
    std::vector<NvtxRecord> log;
    OffloadStats stats;
    std::shared_ptr<CountingObserver> counts = std::make_shared<CountingObserver>();
  };

  // One training step of a built-in model on host-sim, as the runner runs it (step range around
  // the workload's step, the engine drained inside it), under NvtxObserver when `observe`. A very
  // slow link (10 ms a copy, longer than any op here even on a loaded machine) and a window of one
  // make forward wait for copies, so that every kind of range shows up.
  Step run_step(const std::string& model, bool observe) {
    samples::WorkloadSpec w;
    w.model = model;
    w.batch = 2;
    w.seq = 16;
    w.seed = 3;
    auto workload = samples::make_workload(w, c10::Device(c10::kCPU));
    // The marks the runner sets: NVTX phase and layer ranges.
    workload->set_marks(nvtx_step_marks());
    OffloadOptions options;
    options.backend = BackendKind::HostSim;
    options.min_offload_size = 1024;
    options.max_fwd_stash_size = 1;
    options.link.pinned_gbps = 0.5;
    options.link.latency_ns = 10'000'000;
    auto offloader = workload->make_offloader(options);
    Step out;
    if (observe) {
      offloader->set_observer(std::make_shared<TeeObserver>(
          std::vector<std::shared_ptr<Observer>>{out.counts, std::make_shared<NvtxObserver>()}));
    }
    cursor_ = read_log().size();
    {
      NvtxRange step(NvtxPhase::Step, 0);
      StepPhases phases;
      workload->step(offloader.get(), 0, phases);
      offloader->synchronize();
    }
    out.log = since_setup();
    out.stats = offloader->stats();
    return out;
  }
};

struct ModelLayers {
  std::string model;
  int forward_layers;
  int first_backward_layer;  // layers from here up get a backward range
};

// Test names and failure messages show the model, not the struct's bytes.
void PrintTo(const ModelLayers& m, std::ostream* os) { *os << m.model; }

class NvtxModelStep : public NvtxTrainingStep, public ::testing::WithParamInterface<ModelLayers> {};

TEST_P(NvtxModelStep, EngineAndLayerRangesBalanceAndNest) {
  const ModelLayers& param = GetParam();
  const Step step = run_step(param.model, /*observe=*/true);
  const RangeTree tree(step.log);
  EXPECT_TRUE(tree.problems.empty()) << ::testing::PrintToString(tree.problems);

  const int step_range = tree.first("step", "1");
  const int forward = tree.first("forward", "1");
  const int backward = tree.first("backward", "1");
  ASSERT_GE(step_range, 0);
  ASSERT_GE(forward, 0);
  ASSERT_GE(backward, 0);
  EXPECT_EQ(tree.at(forward).parent, step_range);
  EXPECT_EQ(tree.at(backward).parent, step_range);

  // Forward layers: "layer i" in order, payload i, directly inside "forward".
  const auto fwd_layers = tree.with_category("60");
  ASSERT_EQ(fwd_layers.size(), static_cast<size_t>(param.forward_layers));
  for (int i = 0; i < param.forward_layers; ++i) {
    const auto& r = tree.at(fwd_layers[static_cast<size_t>(i)]);
    EXPECT_TRUE(r.pushed);
    EXPECT_EQ(r.open["message"], "layer " + std::to_string(i));
    EXPECT_EQ(r.open["payload"], std::to_string(i));
    EXPECT_EQ(r.parent, forward);
  }

  // One pack range per saved tensor, each with its decision mark inside, all in forward; some of
  // them inside a layer.
  const auto packs = tree.with_category("50");
  EXPECT_EQ(static_cast<int64_t>(packs.size()), step.stats.packed);
  EXPECT_EQ(static_cast<int64_t>(packs.size()), step.counts->packs.load());
  std::set<int> pack_set(packs.begin(), packs.end());
  int packs_in_layers = 0;
  for (int p : packs) {
    EXPECT_EQ(tree.at(p).open["message"], "pack");
    const auto marks = tree.marks_in(p);
    ASSERT_EQ(marks.size() >= 1 ? marks[0]["message"] : "<no mark>", "pack");
    int decisions = 0;
    for (const auto& m : marks) decisions += m["message"] == "pack" ? 1 : 0;
    EXPECT_EQ(decisions, 1);
    EXPECT_TRUE(tree.within(p, forward));
    const int parent = tree.at(p).parent;
    EXPECT_TRUE(parent == forward || (parent >= 0 && tree.at(parent).open["category"] == "60"));
    packs_in_layers += parent != forward ? 1 : 0;
  }
  EXPECT_GT(packs_in_layers, 0);

  // One unpack range per unpack, each with its source mark inside, all during backward.
  const auto unpacks = tree.with_category("51");
  EXPECT_EQ(static_cast<int64_t>(unpacks.size()), step.counts->unpacks.load());
  EXPECT_GT(unpacks.size(), 0u);
  std::set<int> unpack_set(unpacks.begin(), unpacks.end());
  for (int u : unpacks) {
    EXPECT_EQ(tree.at(u).open["message"], "unpack");
    int sources = 0;
    for (const auto& m : tree.marks_in(u)) sources += m["message"] == "unpack" ? 1 : 0;
    EXPECT_EQ(sources, 1);
    EXPECT_TRUE(tree.within(u, backward));
  }

  // Waits: forward-window waits inside packs, reload waits inside unpacks, as many as the
  // engine's wait events; drains (no event) at least the one of synchronize().
  const auto window = tree.with_category("40");
  const auto reload = tree.with_category("41");
  const auto drain = tree.with_category("42");
  EXPECT_GT(window.size(), 0u);
  EXPECT_EQ(static_cast<int64_t>(window.size()), step.counts->window_waits.load());
  EXPECT_EQ(static_cast<int64_t>(window.size()), step.stats.window_waits);
  EXPECT_EQ(static_cast<int64_t>(reload.size()), step.counts->reload_waits.load());
  EXPECT_GE(drain.size(), 1u);
  for (int w : window) {
    EXPECT_EQ(tree.at(w).open["message"], "wait");
    EXPECT_EQ(pack_set.count(tree.at(w).parent), 1u);
  }
  for (int w : reload) EXPECT_EQ(unpack_set.count(tree.at(w).parent), 1u);

  // Backward layers: start/end ranges, last layer first, each ended before the one below begins,
  // all during backward, each with unpacks of its own inside.
  const auto bwd_layers = tree.with_category("61");
  ASSERT_EQ(bwd_layers.size(),
            static_cast<size_t>(param.forward_layers - param.first_backward_layer));
  size_t previous_end = tree.at(backward).begin;
  for (size_t k = 0; k < bwd_layers.size(); ++k) {
    const int layer = param.forward_layers - 1 - static_cast<int>(k);
    const auto& r = tree.at(bwd_layers[k]);
    EXPECT_FALSE(r.pushed);
    EXPECT_EQ(r.open["message"], "layer " + std::to_string(layer));
    EXPECT_EQ(r.open["payload"], std::to_string(layer));
    EXPECT_GT(r.begin, previous_end) << "layer " << layer;
    EXPECT_TRUE(tree.within(bwd_layers[k], backward)) << "layer " << layer;
    previous_end = r.end;
    int inside = 0;
    for (int u : unpacks) inside += tree.within(u, bwd_layers[k]) ? 1 : 0;
    EXPECT_GT(inside, 0) << "layer " << layer;
  }
}

INSTANTIATE_TEST_SUITE_P(BuiltInModels, NvtxModelStep,
                         ::testing::Values(ModelLayers{"tiny", 2, 0}, ModelLayers{"gpt-tiny", 2, 0},
                                           // the MLP's first layer reads the data, which needs no
                                           // gradient: no backward range for it
                                           ModelLayers{"mlp", 4, 1}),
                         [](const auto& test_info) {
                           std::string name = test_info.param.model;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST_F(NvtxTrainingStep, WithoutTheObserverTheEngineEmitsNothing) {
  const Step step = run_step("tiny", /*observe=*/false);
  EXPECT_GT(step.stats.packed, 0);
  const RangeTree tree(step.log);
  EXPECT_TRUE(tree.problems.empty()) << ::testing::PrintToString(tree.problems);
  for (const auto& r : step.log) {
    EXPECT_NE(r.kind, "mark") << r["message"];
    EXPECT_NE(r.kind, "counter_int64");
    if (r.kind == "push" || r.kind == "start") {
      // Phases and layers only: the workload's and the model's, not the engine's.
      EXPECT_TRUE(r["category"] == "1" || r["category"] == "60" || r["category"] == "61")
          << r["message"] << " " << r["category"];
    }
  }
  EXPECT_EQ(tree.with_category("60").size(), 2u);
  EXPECT_EQ(tree.with_category("61").size(), 2u);
}

// An observer that fails on every pack and unpack event (after NvtxObserver, in the tee, has seen
// it).
struct FailingObserver : Observer {
  void on_pack(const PackEvent&) override { throw std::runtime_error("observer failed in pack"); }
  void on_unpack(const UnpackEvent&) override {
    throw std::runtime_error("observer failed in unpack");
  }
};

TEST_F(NvtxTrainingStep, AFailingObserverOrHookStillClosesItsRange) {
  OffloadOptions options;
  options.backend = BackendKind::HostSim;
  options.min_offload_size = 0;
  ActivationOffloader offloader(options);
  offloader.set_observer(std::make_shared<TeeObserver>(std::vector<std::shared_ptr<Observer>>{
      std::make_shared<NvtxObserver>(), std::make_shared<FailingObserver>()}));
  const at::Tensor x = at::ones({256}).requires_grad_();

  // An observer's exception is the observer's problem: the engine warns and training goes on.
  at::Tensor loss;
  {
    auto scope = offloader.scope();
    loss = (x * 2).sin().sum();  // sin saves its input
  }
  EXPECT_NO_THROW(loss.backward());
  // A hook that fails (here autograd's version check in unpack) still closes its range.
  at::Tensor h;
  {
    auto scope = offloader.scope();
    h = x * 3;
    loss = h.sin().sum();
  }
  {
    torch::autograd::AutoGradMode no_grad(false);
    h.add_(1);
  }
  EXPECT_ANY_THROW(loss.backward());
  loss = at::Tensor();
  h = at::Tensor();
  offloader.synchronize();

  const auto log = since_setup();
  const RangeTree tree(log);
  EXPECT_TRUE(tree.problems.empty()) << ::testing::PrintToString(tree.problems);
  const auto packs = tree.with_category("50");
  const auto unpacks = tree.with_category("51");
  ASSERT_EQ(packs.size(), 2u);
  ASSERT_EQ(unpacks.size(), 2u);
  // Each pack's range holds the mark NvtxObserver made, though the observer after it failed.
  for (const auto& p : packs) EXPECT_GE(tree.marks_in(p).size(), 1u);
  EXPECT_EQ(tree.marks_in(unpacks[0]).size(), 1u);  // served
  EXPECT_EQ(tree.marks_in(unpacks[1]).size(), 0u);  // refused before anything was served
}

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

// ---------------------------------------------------------------------------------------------
// CUPTI: parsing

// A byte buffer of activity records laid out as CUPTI lays them out (each record its struct's
// size, 8-byte aligned), built with the same headers the parser is built with.
class ActivityBuffer {
 public:
  template <typename Record>
  void add(const Record& r) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof r);
    std::memcpy(bytes_.data() + at, &r, sizeof r);
  }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

CUpti_ActivityMemcpy6 memcpy_record(CUpti_ActivityMemcpyKind kind, CUpti_ActivityMemoryKind src,
                                    CUpti_ActivityMemoryKind dst, uint64_t bytes, uint64_t start,
                                    uint64_t end, uint32_t stream) {
  CUpti_ActivityMemcpy6 r;
  std::memset(&r, 0, sizeof r);
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.copyKind = static_cast<uint8_t>(kind);
  r.srcKind = static_cast<uint8_t>(src);
  r.dstKind = static_cast<uint8_t>(dst);
  r.bytes = bytes;
  r.start = start;
  r.end = end;
  r.deviceId = 0;
  r.streamId = stream;
  r.correlationId = 42;
  r.copyCount = 1;
  return r;
}

CUpti_ActivityKernel10 kernel_record(CUpti_ActivityKind kind, const char* name, uint64_t start,
                                     uint64_t end, uint32_t stream) {
  CUpti_ActivityKernel10 r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  r.name = name;
  r.start = start;
  r.end = end;
  r.streamId = stream;
  r.gridX = r.gridY = r.gridZ = 1;
  r.blockX = 256;
  r.blockY = r.blockZ = 1;
  return r;
}

void expect_same(const TimelineEvent& got, const TimelineEvent& want) {
  EXPECT_EQ(got.run.value, want.run.value);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.start_ns, want.start_ns);
  EXPECT_EQ(got.end_ns, want.end_ns);
  EXPECT_EQ(got.stream, want.stream);
  EXPECT_EQ(got.bytes, want.bytes);
  EXPECT_EQ(got.tensor, want.tensor);
  EXPECT_EQ(got.pinned, want.pinned);
  EXPECT_EQ(got.prefetch, want.prefetch);
  EXPECT_EQ(got.name, want.name);
}

TEST(CuptiParse, CopiesAndKernelsBecomeTimelineEvents) {
  ActivityBuffer buf;
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1 << 20, 1000, 3000, 7));
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096, 500, 900, 7));
  buf.add(kernel_record(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "ampere_sgemm_128x64_nn", 800, 5000,
                        13));
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 8192, 6000, 6100, 7));
  buf.add(kernel_record(CUPTI_ACTIVITY_KIND_KERNEL, "legacy_kernel", 7000, 7500, 0));
  // Not offload traffic, and a record a forced flush handed over unfinished: both skipped.
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 2000, 2100, 13));
  buf.add(kernel_record(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "unfinished", 0, 0, 13));

  ActivityParseStats stats;
  const auto events = parse_activity_buffer(buf.data(), buf.size(), 10, &stats);
  ASSERT_EQ(events.size(), 5u);
  // Sorted by start time, offset by the clock offset.
  expect_same(events[0], event_span(EventKind::CopyH2D, 510, 910,
                                    {.stream = 7, .bytes = 4096, .pinned = false, .name = "h2d"}));
  expect_same(events[1], event_span(EventKind::Compute, 810, 5010,
                                    {.stream = 13, .name = "ampere_sgemm_128x64_nn"}));
  expect_same(events[2], event_span(EventKind::CopyD2H, 1010, 3010,
                                    {.stream = 7, .bytes = 1 << 20, .name = "d2h"}));
  expect_same(events[3], event_span(EventKind::CopyH2D, 6010, 6110,
                                    {.stream = 7, .bytes = 8192, .name = "h2d"}));
  expect_same(events[4], event_span(EventKind::Compute, 7010, 7510, {.name = "legacy_kernel"}));
  EXPECT_EQ(stats.records, 7);
  EXPECT_EQ(stats.events, 5);
  EXPECT_EQ(stats.skipped, 2);
  EXPECT_EQ(stats.unparsed_bytes, 0u);
}

TEST(CuptiParse, PinnedIsJudgedOnTheHostSide) {
  ActivityBuffer buf;
  // D2H into pageable memory (the device side is the source), H2D from pinned.
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 100, 1, 2, 3));
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 100, 3, 4, 3));
  const auto events = parse_activity_buffer(buf.data(), buf.size());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::CopyD2H);
  EXPECT_FALSE(events[0].pinned);
  EXPECT_EQ(events[1].kind, EventKind::CopyH2D);
  EXPECT_TRUE(events[1].pinned);
}

TEST(CuptiParse, AnUnknownOrTruncatedRecordEndsTheWalk) {
  ActivityBuffer buf;
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 100, 1, 2, 3));
  const size_t first = buf.size();
  CUpti_ActivityOverhead3 overhead;
  std::memset(&overhead, 0, sizeof overhead);
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  buf.add(overhead);
  buf.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 100, 5, 6, 3));

  ActivityParseStats stats;
  EXPECT_EQ(parse_activity_buffer(buf.data(), buf.size(), 0, &stats).size(), 1u);
  EXPECT_EQ(stats.unparsed_bytes, buf.size() - first);

  // valid_bytes ending inside the second memcpy: the first only.
  ActivityBuffer two;
  two.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 100, 1, 2, 3));
  two.add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                        CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 100, 5, 6, 3));
  EXPECT_EQ(parse_activity_buffer(two.data(), two.size() - 8, 0, &stats).size(), 1u);
  EXPECT_EQ(stats.unparsed_bytes, first - 8);

  EXPECT_TRUE(parse_activity_buffer(nullptr, 0).empty());
}

// ---------------------------------------------------------------------------------------------
// CUPTI: the collector

bool driver_present() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) return false;
  dlclose(cuda);
  return true;
}

TEST(CuptiCollector, BufferSizeOutsideOneToTenMiBThrows) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, (int64_t{1} << 20) - 1, (int64_t{10} << 20) + 1}) {
    CollectorOptions o;
    o.buffer_bytes = bad;
    EXPECT_THROW(make_cupti_collector(o), std::invalid_argument) << bad;
  }
  try {
    CollectorOptions o;
    o.buffer_bytes = 512 << 10;
    make_cupti_collector(o);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("buffer_bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("524288"), std::string::npos) << e.what();
  }
  for (int64_t good : {int64_t{1} << 20, int64_t{4} << 20, int64_t{10} << 20}) {
    CollectorOptions o;
    o.buffer_bytes = good;
    EXPECT_NO_THROW(make_cupti_collector(o)) << good;
  }
}

TEST(CuptiCollector, StepsAsideCleanlyWithoutGpuOrDriver) {
  auto collector = make_cupti_collector();
  EXPECT_FALSE(collector->active());
  ASSERT_NO_THROW(collector->start());
  if (driver_present() && collector->active()) {
    // A GPU machine: it collects; stopping is clean and says what it got.
    collector->flush();
    collector->stop();
    EXPECT_FALSE(collector->active());
    EXPECT_NE(collector->status().find("stopped"), std::string::npos) << collector->status();
    return;
  }
  EXPECT_FALSE(collector->active());
  const std::string status = collector->status();
  EXPECT_NE(status.find("stepped aside"), std::string::npos) << status;
  if (!driver_present()) {
    EXPECT_NE(status.find("no GPU or no NVIDIA driver"), std::string::npos) << status;
    EXPECT_NE(status.find("libcuda.so.1"), std::string::npos) << status;
  }
  // Everything else stays a harmless no-op.
  ASSERT_NO_THROW(collector->start());
  ASSERT_NO_THROW(collector->flush());
  ASSERT_NO_THROW(collector->stop());
  EXPECT_TRUE(collector->take().empty());
  EXPECT_EQ(collector->dropped_records(), 0);
  EXPECT_EQ(collector->status(), status);
}

TEST(CuptiCollector, NullCollectorSaysWhyAndDoesNothing) {
  auto collector = make_null_collector("--collector nvtx-only");
  collector->start();
  EXPECT_FALSE(collector->active());
  collector->flush();
  collector->stop();
  EXPECT_TRUE(collector->take().empty());
  EXPECT_EQ(collector->dropped_records(), 0);
  EXPECT_EQ(collector->status(), "CUPTI collection off: --collector nvtx-only");
}

TEST(CuptiCollector, StepAsideReasonsNameTheWayOut) {
  const auto other = cupti_step_aside_reason(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->find("another CUPTI client (Nsight Systems/Compute, or torch's profiler) is "
                        "active; use --collector nvtx-only"),
            std::string::npos)
      << *other;
  EXPECT_NE(other->find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos);

  for (CUptiResult no_gpu : {CUPTI_ERROR_NOT_INITIALIZED, CUPTI_ERROR_UNKNOWN}) {
    const auto reason = cupti_step_aside_reason(no_gpu);
    ASSERT_TRUE(reason.has_value()) << no_gpu;
    EXPECT_NE(reason->find("no GPU"), std::string::npos) << *reason;
  }
  ASSERT_TRUE(cupti_step_aside_reason(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES).has_value());
  // Not environmental: a bug to be reported, not stepped around.
  EXPECT_FALSE(cupti_step_aside_reason(CUPTI_ERROR_INVALID_PARAMETER).has_value());
  EXPECT_FALSE(cupti_step_aside_reason(CUPTI_SUCCESS).has_value());

  EXPECT_EQ(cupti_result_name(CUPTI_ERROR_NOT_INITIALIZED), "CUPTI_ERROR_NOT_INITIALIZED");
  EXPECT_EQ(cupti_result_name(12345), "CUPTI_ERROR_12345");
}

}  // namespace
