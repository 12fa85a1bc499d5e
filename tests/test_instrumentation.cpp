// NVTX emission and the CUPTI collector, without Nsight and without a GPU.
//
// NVTX: NVTX_INJECTION64_PATH points NVTX at tests/nvtx_injection's library, which logs every
// domain, string, category, range, mark and counter call; the tests read that log back.
// CUPTI: activity buffers are built by hand from the CUPTI structs and parsed; the collector itself
// is started only to check that it steps aside cleanly where there is no GPU (or, on a GPU machine,
// that it starts and stops cleanly).
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "offtune/profiler/cupti.hpp"
#include "offtune/profiler/nvtx.hpp"

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
  EXPECT_EQ(strings, (std::vector<std::string>{"step", "forward", "backward", "pack", "unpack",
                                               "offload", "reload", "wait"}));

  std::map<std::string, std::string> categories;
  for (const auto& r : only(log, "name_category")) categories[r["id"]] = r["name"];
  EXPECT_EQ(categories["1"], "phase");
  EXPECT_EQ(categories["10"], "pack: offloaded");
  EXPECT_EQ(categories["12"], "pack: kept");
  EXPECT_EQ(categories["20"], "copy: d2h");
  EXPECT_EQ(categories["22"], "copy: h2d prefetch");
  EXPECT_EQ(categories["32"], "unpack: reloaded");
  EXPECT_EQ(categories["42"], "wait: drain");
  EXPECT_EQ(categories.size(), 14u);  // phase, 3 pack, 3 copy, 4 unpack, 3 wait

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
  EXPECT_EQ(only(after, "register_string").size(), 8u);
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

TEST_F(NvtxEmission, UnpacksAndWaitsAreMarks) {
  NvtxObserver obs;
  obs.on_unpack({TensorId{3}, UnpackSource::Reloaded, 2048, 500});
  obs.on_unpack({TensorId{4}, UnpackSource::Kept, 64, 510});
  obs.on_wait({WaitKind::Reload, TensorId{3}, 100, 350});
  obs.on_wait({WaitKind::Drain, TensorId{}, 400, 390});  // clock noise: never a negative length
  const auto got = since_setup();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0]["message"], "unpack");
  EXPECT_EQ(got[0]["category"], "32");
  EXPECT_EQ(got[0]["payload"], "2048");
  EXPECT_EQ(got[1]["category"], "30");
  EXPECT_EQ(got[2].kind, "mark");
  EXPECT_EQ(got[2]["message"], "wait");
  EXPECT_EQ(got[2]["category"], "41");
  EXPECT_EQ(got[2]["payload"], "250");  // its length in ns
  EXPECT_EQ(got[3]["category"], "42");
  EXPECT_EQ(got[3]["payload"], "0");
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

TimelineEvent expected(EventKind kind, int64_t start, int64_t end, int64_t stream, int64_t bytes,
                       bool pinned, std::string name) {
  TimelineEvent e;
  e.kind = kind;
  e.start_ns = start;
  e.end_ns = end;
  e.stream = stream;
  e.bytes = bytes;
  e.pinned = pinned;
  e.name = std::move(name);
  return e;
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
  expect_same(events[0], expected(EventKind::CopyH2D, 510, 910, 7, 4096, false, "h2d"));
  expect_same(events[1],
              expected(EventKind::Compute, 810, 5010, 13, 0, true, "ampere_sgemm_128x64_nn"));
  expect_same(events[2], expected(EventKind::CopyD2H, 1010, 3010, 7, 1 << 20, true, "d2h"));
  expect_same(events[3], expected(EventKind::CopyH2D, 6010, 6110, 7, 8192, true, "h2d"));
  expect_same(events[4], expected(EventKind::Compute, 7010, 7510, 0, 0, true, "legacy_kernel"));
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
