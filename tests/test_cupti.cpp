// The CUPTI collector without a GPU: activity buffers are built by hand from the CUPTI structs and
// parsed; the collector itself is started only to check that it steps aside cleanly where there is
// no GPU (or, on a GPU machine, that it starts and stops cleanly).
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "offtune/profiler/cupti.hpp"

namespace {

using namespace offtune;
using namespace offtune::profiler;

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
