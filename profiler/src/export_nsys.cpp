// The Nsight-Systems-shaped SQLite exporter. Table and column names, column order, enum numbering
// and the GlobalId encoding follow Nsight Systems' documented SQLite export schema (3.28.1), so
// that queries and scripts written against `nsys export --type sqlite` output, and readers such as
// nsys-tui, run unchanged: kernels and copies join their CUDA runtime calls by correlationId, NVTX
// text is registered in StringIds. What offtune cannot know (grid sizes, when a launch call really
// ran) is NULL, 0 or placed, and docs/export.md lists every such deviation. Rows are inserted as
// each run's events are read, inside one transaction.
#include "offtune/profiler/export.hpp"
#include "offtune/profiler/json.hpp"
#include "sqlite_db.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <nlohmann/json.hpp>

namespace offtune::profiler {

namespace {

using nlohmann::json;

// The value Nsight writes in META_DATA_EXPORT for the schema whose layout this file follows: the
// one documented in Nsight Systems' "SQLite Schema Reference" (2026.4). The column lists of the
// tables below are checked against it (tests/data/export/nsys_schema.txt, ExportTest).
constexpr const char* kSchemaVersion = "3.28.1";

// Nsight's ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND values.
constexpr int64_t kCopyHtoD = 1;
constexpr int64_t kCopyDtoH = 2;
constexpr int64_t kMemPageable = 0;
constexpr int64_t kMemPinned = 1;
constexpr int64_t kMemDevice = 2;
// ENUM_NSYS_EVENT_CLASS of a CUDA runtime API call (CUPTI_ACTIVITY_KIND_RUNTIME.eventClass):
// TRACE_PROCESS_EVENT_CUDA_RUNTIME, 0 in Nsight's numbering (1 is the driver API's; before, issue
// 44, offtune wrote 1, and readers that pick runtime calls by class found none).
constexpr int64_t kEventClassCudaRuntime = 0;
// ENUM_NSYS_EVENT_TYPE values of the NVTX rows.
constexpr int64_t kNvtxMark = 34;
constexpr int64_t kNvtxPushPopRange = 59;

struct EnumRow {
  int64_t id;
  const char* name;
  const char* label;
};

constexpr EnumRow kMemcpyOper[] = {
    {0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"},
    {1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"},
    {2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"},
    {3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"},
    {4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"},
    {5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"},
    {6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"},
    {7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"},
    {8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"},
    {9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"},
    {10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"},
    {11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"},
    {12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"},
    {13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"},
};

constexpr EnumRow kMemKind[] = {
    {0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"},
    {1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"},
    {2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"},
    {3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"},
    {4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"},
    {5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"},
    {6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"},
    {7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"},
};

constexpr EnumRow kEventClass[] = {
    {0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"},
    {1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"},
};

// Every ENUM_* table of the schema, each (id, name, label): Nsight writes them all whatever the
// capture holds. offtune fills those its rows refer to (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND,
// ENUM_NSYS_EVENT_TYPE, ENUM_NSYS_EVENT_CLASS: the values above) and leaves the others empty,
// since none of its columns holds their values.
constexpr const char* kEnumTables[] = {
    "ENUM_NSYS_EVENT_TYPE",
    "ENUM_NSYS_EVENT_CLASS",
    "ENUM_NSYS_GENERIC_EVENT_SOURCE",
    "ENUM_NSYS_GENERIC_EVENT_GROUP",
    "ENUM_NSYS_GENERIC_EVENT_FIELD_TYPE",
    "ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_PROPERTY",
    "ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_TYPE",
    "ENUM_NSYS_GENERIC_EVENT_FIELD_ETW_FLAGS",
    "ENUM_GPU_CTX_SWITCH",
    "ENUM_CUDA_MEMCPY_OPER",
    "ENUM_CUDA_MEM_KIND",
    "ENUM_CUDA_MEMPOOL_TYPE",
    "ENUM_CUDA_MEMPOOL_OPER",
    "ENUM_CUDA_DEV_MEM_EVENT_OPER",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE",
    "ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG",
    "ENUM_CUDA_UNIF_MEM_MIGRATION",
    "ENUM_CUDA_UNIF_MEM_ACCESS_TYPE",
    "ENUM_CUDA_FUNC_CACHE_CONFIG",
    "ENUM_CUPTI_STREAM_TYPE",
    "ENUM_CUPTI_SYNC_TYPE",
    "ENUM_CUPTI_OVERHEAD_TYPE",
    "ENUM_CUPTI_JIT_ENTRY_TYPE",
    "ENUM_CUPTI_JIT_OPERATION_TYPE",
    "ENUM_STACK_UNWIND_METHOD",
    "ENUM_SAMPLING_THREAD_STATE",
    "ENUM_SCHEDULING_THREAD_BLOCK",
    "ENUM_OPENGL_DEBUG_SOURCE",
    "ENUM_OPENGL_DEBUG_TYPE",
    "ENUM_OPENGL_DEBUG_SEVERITY",
    "ENUM_VULKAN_PIPELINE_CREATION_FLAGS",
    "ENUM_VULKAN_HEAP_TYPE",
    "ENUM_VULKAN_HEAP_FLAGS",
    "ENUM_VULKAN_MEMORY_PROPERTY_FLAGS",
    "ENUM_D3D12_HEAP_TYPE",
    "ENUM_D3D12_PAGE_PROPERTY",
    "ENUM_D3D12_HEAP_FLAGS",
    "ENUM_D3D12_CMD_LIST_TYPE",
    "ENUM_OPENACC_DEVICE",
    "ENUM_OPENACC_EVENT_KIND",
    "ENUM_OPENMP_EVENT_KIND",
    "ENUM_OPENMP_THREAD",
    "ENUM_OPENMP_DISPATCH",
    "ENUM_OPENMP_SYNC_REGION",
    "ENUM_OPENMP_WORK",
    "ENUM_OPENMP_MUTEX",
    "ENUM_OPENMP_TASK_FLAG",
    "ENUM_OPENMP_TASK_STATUS",
    "ENUM_NVDRIVER_EVENT_ID",
    "ENUM_WDDM_PAGING_QUEUE_TYPE",
    "ENUM_WDDM_PACKET_TYPE",
    "ENUM_WDDM_ENGINE_TYPE",
    "ENUM_WDDM_INTERRUPT_TYPE",
    "ENUM_WDDM_VIDMM_OP_TYPE",
    "ENUM_NET_LINK_TYPE",
    "ENUM_NET_DEVICE_ID",
    "ENUM_NET_VENDOR_ID",
    "ENUM_ETW_MEMORY_TRANSFER_TYPE",
    "ENUM_PMU_EVENT_SOURCE",
    "ENUM_PMU_UNIT_TYPE",
    "ENUM_VIDEO_ENGINE_TYPE",
    "ENUM_VIDEO_ENGINE_CODEC",
    "ENUM_DIAGNOSTIC_SEVERITY_LEVEL",
    "ENUM_DIAGNOSTIC_SOURCE_TYPE",
    "ENUM_DIAGNOSTIC_TIMESTAMP_SOURCE",
    "ENUM_NET_IB_DEVICE_TYPE",
    "ENUM_NET_IB_CONGESTION_EVENT_TYPE",
    "ENUM_OSRT_FILE_ACCESS_EVENT_TYPE",
};

constexpr EnumRow kEventType[] = {
    {34, "NvtxMark", "NvtxMark"},
    {59, "NvtxPushPopRange", "NvtxPushPopRange"},
    {60, "NvtxStartEndRange", "NvtxStartEndRange"},
};

// The layout: Nsight's tables (columns in Nsight's order, so that SELECT * lines up too), then
// offtune's own OFFTUNE_* tables for what Nsight has no place for. Beside the tables offtune fills,
// every table a real export of a CUDA + NVTX + OS-runtime capture carries (readers open some
// unconditionally: "no such table: ProcessStreams"), empty where offtune records nothing of the
// kind (memsets, synchronisations, CUDA events, graphs, OS runtime calls, call chains, overhead,
// diagnostics, NICs); the ENUM_* tables are made from kEnumTables.
constexpr const char* kSchema = R"sql(
CREATE TABLE StringIds (
  id INTEGER NOT NULL PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE ThreadNames (
  nameId INTEGER NOT NULL,
  priority INTEGER,
  globalTid INTEGER);
CREATE TABLE PROCESSES (
  globalPid INTEGER,
  pid INTEGER,
  name TEXT);
CREATE TABLE ANALYSIS_DETAILS (
  globalVid INTEGER NOT NULL,
  duration INTEGER NOT NULL,
  startTime INTEGER NOT NULL,
  stopTime INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
  utcEpochNs INTEGER,
  utcTime TEXT,
  localTime TEXT,
  systemClockNs INTEGER,
  sessionStartCntVctNs INTEGER);
CREATE TABLE TARGET_INFO_GPU (
  vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
  l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
  smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER,
  ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER, constantMemory INTEGER,
  maxIPC INTEGER, maxRegistersPerBlock INTEGER, maxShmemPerBlock INTEGER,
  maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER, maxRegistersPerSm INTEGER,
  threadsPerWarp INTEGER, asyncEngines INTEGER, maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER,
  maxThreadsPerBlock INTEGER, maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER,
  maxGridDimX INTEGER, maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER,
  computeMinor INTEGER, smMajor INTEGER, smMinor INTEGER, numaNodeId INTEGER);
CREATE TABLE TARGET_INFO_CUDA_DEVICE (
  gpuId INTEGER,
  cudaId INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  uuid TEXT,
  numMultiprocessors INTEGER);
CREATE TABLE TARGET_INFO_CUDA_STREAM (
  streamId INTEGER NOT NULL,
  hwId INTEGER NOT NULL,
  vmId INTEGER NOT NULL,
  processId INTEGER NOT NULL,
  contextId INTEGER NOT NULL,
  priority INTEGER NOT NULL,
  flag INTEGER NOT NULL);
CREATE TABLE META_DATA_EXPORT (
  name TEXT NOT NULL,
  value TEXT);
CREATE TABLE META_DATA_CAPTURE (
  name TEXT NOT NULL,
  value TEXT);
CREATE TABLE ANALYSIS_FILE (
  id INTEGER NOT NULL PRIMARY KEY,
  filename TEXT,
  contentId INTEGER,
  globalPid INTEGER NOT NULL);
CREATE TABLE ProcessStreams (
  globalPid INTEGER NOT NULL,
  filenameId INTEGER NOT NULL,
  contentId INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_SYSTEM_ENV (
  globalVid INTEGER,
  devStateName TEXT NOT NULL,
  name TEXT NOT NULL,
  nameEnum INTEGER NOT NULL,
  value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_NIC_INFO (
  GUID INTEGER NOT NULL, stateName TEXT NOT NULL, nicId INTEGER NOT NULL, name TEXT NOT NULL,
  deviceId INTEGER NOT NULL, vendorId INTEGER NOT NULL, linkLayer INTEGER NOT NULL);
CREATE TABLE TARGET_INFO_CUDA_CONTEXT_INFO (
  nullStreamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL,
  processId INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  parentContextId INTEGER, isGreenContext INTEGER, numMultiprocessors INTEGER, numTpcs INTEGER,
  tpcMask TEXT, workqueueResourceId INTEGER, workqueueConcurrencyLimit INTEGER,
  workqueueSharingScope INTEGER, workqueueChannelCount INTEGER, workqueueChannelIds TEXT);
CREATE TABLE PROFILER_OVERHEAD (
  start INTEGER NOT NULL, end INTEGER, globalTid INTEGER, nameId INTEGER NOT NULL,
  overheadType INTEGER);
CREATE TABLE DIAGNOSTIC_EVENT (
  timestamp INTEGER NOT NULL, timestampType INTEGER NOT NULL, source INTEGER NOT NULL,
  severity INTEGER NOT NULL, text TEXT NOT NULL, globalPid INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,
  graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, deprecatedSyncType INTEGER, syncType INTEGER NOT NULL,
  eventId INTEGER NOT NULL, eventSyncId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT (
  timestamp INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
  greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  eventId INTEGER NOT NULL, eventSyncId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (
  start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER, overheadType INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (
  start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER);
CREATE TABLE CUDA_CALLCHAINS (
  id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, unresolved INTEGER,
  originalIP INTEGER, stackDepth INTEGER NOT NULL);
CREATE TABLE OSRT_API (
  start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
  nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER,
  callchainId INTEGER, argumentsId INTEGER);
CREATE TABLE OSRT_CALLCHAINS (
  id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER NOT NULL, kernelMode INTEGER,
  thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, originalIP INTEGER,
  unwindMethod INTEGER, stackDepth INTEGER NOT NULL);
CREATE TABLE OSRT_ARGUMENTS (
  id INTEGER NOT NULL, value TEXT NOT NULL, argumentIndex INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL,
  greenContextId INTEGER,
  streamId INTEGER NOT NULL,
  correlationId INTEGER,
  globalPid INTEGER,
  bytes INTEGER NOT NULL,
  copyKind INTEGER NOT NULL,
  deprecatedSrcId INTEGER,
  srcKind INTEGER,
  dstKind INTEGER,
  srcDeviceId INTEGER,
  srcContextId INTEGER,
  dstDeviceId INTEGER,
  dstContextId INTEGER,
  migrationCause INTEGER,
  graphNodeId INTEGER,
  virtualAddress INTEGER,
  copyCount INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL,
  greenContextId INTEGER,
  streamId INTEGER NOT NULL,
  correlationId INTEGER,
  globalPid INTEGER,
  demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL,
  mangledName INTEGER,
  launchType INTEGER,
  cacheConfig INTEGER,
  registersPerThread INTEGER NOT NULL,
  gridX INTEGER NOT NULL,
  gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL,
  blockX INTEGER NOT NULL,
  blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL,
  gridId INTEGER NOT NULL,
  sharedMemoryExecuted INTEGER,
  graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER,
  qmdBulkReleaseDone INTEGER,
  qmdPreexitDone INTEGER,
  qmdLastCtaDone INTEGER,
  graphId INTEGER,
  clusterX INTEGER,
  clusterY INTEGER,
  clusterZ INTEGER,
  clusterSchedulingPolicy INTEGER,
  maxPotentialClusterSize INTEGER,
  maxActiveClusters INTEGER,
  sharedMemoryRequestedPercentage INTEGER,
  tensorSizeMinusOneElements TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL,
  globalTid INTEGER,
  correlationId INTEGER,
  nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL,
  callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (
  start INTEGER NOT NULL,
  end INTEGER,
  eventType INTEGER NOT NULL,
  rangeId INTEGER,
  category INTEGER,
  color INTEGER,
  text TEXT,
  globalTid INTEGER,
  endGlobalTid INTEGER,
  textId INTEGER,
  domainId INTEGER,
  uint64Value INTEGER,
  int64Value INTEGER,
  doubleValue REAL,
  uint32Value INTEGER,
  int32Value INTEGER,
  floatValue REAL,
  jsonTextId INTEGER,
  jsonText TEXT,
  binaryData TEXT,
  eventId INTEGER NOT NULL PRIMARY KEY);
CREATE TABLE OFFTUNE_RUNS (
  globalPid INTEGER NOT NULL PRIMARY KEY,
  runId INTEGER NOT NULL,
  title TEXT NOT NULL,
  model TEXT,
  config TEXT,
  status TEXT,
  error TEXT,
  label TEXT,
  deviceId INTEGER,
  startedUnixNs INTEGER,
  finishedUnixNs INTEGER,
  timeOriginNs INTEGER);
CREATE TABLE OFFTUNE_COPY_INFO (
  correlationId INTEGER NOT NULL PRIMARY KEY,
  tensor INTEGER,
  pinned INTEGER,
  prefetch INTEGER,
  name TEXT);
CREATE TABLE OFFTUNE_STASH_OCCUPANCY (
  start INTEGER NOT NULL,
  globalPid INTEGER NOT NULL,
  fwdCount INTEGER,
  fwdBytes INTEGER,
  bwdCount INTEGER,
  bwdBytes INTEGER,
  deviceBytes INTEGER);
)sql";

// A value bound to a statement parameter; monostate binds NULL.
using Value = std::variant<std::monostate, int64_t, double, std::string>;

Value opt(bool present, int64_t v) { return present ? Value(v) : Value(); }

// Text as readers of the file expect it (Python's sqlite3 refuses to decode anything else): invalid
// UTF-8 bytes, say from a model path, become U+FFFD. Names are nearly always ASCII, so that is
// checked first and the round trip through nlohmann's validating dump is the rare path.
std::string valid_utf8(const std::string& s) {
  if (std::all_of(s.begin(), s.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return s;
  }
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

using detail::Access;
using detail::Connection;
using detail::Query;
using detail::Statement;

// Binds the values in order and inserts one row; text as valid_utf8 makes it.
void insert(Statement& s, std::initializer_list<Value> values) {
  Query q(s);
  for (const Value& v : values) {
    if (const auto* i = std::get_if<int64_t>(&v)) {
      q.i64(*i);
    } else if (const auto* d = std::get_if<double>(&v)) {
      q.real(*d);
    } else if (const auto* t = std::get_if<std::string>(&v)) {
      q.text(valid_utf8(*t));
    } else {
      q.null();
    }
  }
  q.run();
}

// Nsight's serialized GlobalId: (hardware id << 56) | (vm id << 48) | (pid << 24) | tid, with
// hardware and vm 0. The run id stands in for the process id; the one thread is the main thread
// (tid == pid, as on Linux).
int64_t global_pid(RunId run) { return run.value << 24; }
int64_t global_tid(RunId run) { return global_pid(run) | (run.value & 0xFFFFFF); }

std::string iso_time(int64_t unix_ns, bool utc) {
  const std::time_t secs = static_cast<std::time_t>(unix_ns / 1000000000);
  std::tm tm{};
  if (utc) {
    gmtime_r(&secs, &tm);
  } else {
    localtime_r(&secs, &tm);
  }
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string s(buf, n);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%09lld", static_cast<long long>(unix_ns % 1000000000));
  s += frac;
  if (utc) s += 'Z';
  return s;
}

// JSON text; a name that is not valid UTF-8 gets replacement characters rather than an exception.
std::string text_of(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string nvtx_text(const TimelineEvent& e) {
  const std::string suffix = e.name.empty() ? "" : " " + e.name;
  switch (e.kind) {
    case EventKind::Step:
      return "offtune:" + (e.name.empty() ? std::string("step") : e.name);
    case EventKind::Forward:
      return "offtune:forward";
    case EventKind::Backward:
      return "offtune:backward";
    case EventKind::Wait:
      return "offtune:wait" + suffix;
    case EventKind::Recompute:
      return "offtune:recompute";
    case EventKind::Pack:
      return "offtune:pack" + suffix;
    case EventKind::Unpack:
      return "offtune:unpack" + suffix;
    case EventKind::DiskWrite:
      return "offtune:disk write";
    case EventKind::DiskRead:
      return std::string("offtune:disk read") + (e.prefetch ? " ahead" : "");
    default:
      return "offtune:" + e.name;
  }
}

class NsysWriter {
 public:
  explicit NsysWriter(const Connection& db)
      : string_(db, "INSERT INTO StringIds VALUES (?,?)"),
        memcpy_(db,
                "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,"
                "correlationId,globalPid,bytes,copyKind,srcKind,dstKind,srcDeviceId,srcContextId,"
                "dstDeviceId,dstContextId,copyCount) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,1)"),
        copy_info_(db, "INSERT INTO OFFTUNE_COPY_INFO VALUES (?,?,?,?,?)"),
        kernel_(db,
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,deviceId,contextId,streamId,"
                "correlationId,globalPid,demangledName,shortName,mangledName,registersPerThread,"
                "gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,dynamicSharedMemory,"
                "localMemoryPerThread,localMemoryTotal,gridId,tensorSizeMinusOneElements) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,0,0,0,0,0,0,0,0,0,0,0,?,'')"),
        runtime_(db,
                 "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start,end,eventClass,globalTid,"
                 "correlationId,nameId,returnValue) VALUES (?,?,?,?,?,?,0)"),
        nvtx_(db,
              "INSERT INTO NVTX_EVENTS (start,end,eventType,text,globalTid,endGlobalTid,textId,"
              "domainId,int64Value,jsonText) VALUES (?,?,?,?,?,?,?,0,?,?)"),
        occupancy_(db, "INSERT INTO OFFTUNE_STASH_OCCUPANCY VALUES (?,?,?,?,?,?,?)") {}

  int64_t intern(const std::string& s) {
    auto [it, inserted] = strings_.try_emplace(s, static_cast<int64_t>(strings_.size()) + 1);
    if (inserted) insert(string_, {it->second, s});
    return it->second;
  }

  // Writes one run's rows; returns (time origin, last end relative to it).
  std::pair<int64_t, int64_t> write_run(Store& store, const RunRecord& run, int64_t device) {
    std::vector<TimelineEvent> events;
    std::vector<OccupancySample> occupancy;
    try {
      events = store.events(run.id);
      occupancy = store.occupancy(run.id);
    } catch (const StoreError& e) {
      throw ExportError("cannot read run " + std::to_string(run.id.value) + ": " + e.what());
    }
    std::optional<int64_t> first;
    for (const auto& e : events) first = std::min(first.value_or(e.start_ns), e.start_ns);
    for (const auto& s : occupancy) first = std::min(first.value_or(s.time_ns), s.time_ns);
    const int64_t origin = first.value_or(0);
    int64_t last = 0;

    const int64_t gpid = global_pid(run.id);
    const int64_t gtid = global_tid(run.id);
    constexpr int64_t kContext = 1;
    for (const auto& e : events) {
      const int64_t start = e.start_ns - origin;
      const int64_t end = std::max(e.end_ns, e.start_ns) - origin;
      last = std::max(last, end);
      switch (e.kind) {
        case EventKind::CopyD2H:
        case EventKind::CopyH2D: {
          const bool d2h = e.kind == EventKind::CopyD2H;
          const int64_t host_kind = e.pinned ? kMemPinned : kMemPageable;
          const int64_t corr = ++correlation_;
          insert(memcpy_, {start, end, device, kContext, e.stream, corr, gpid, e.bytes,
                           d2h ? kCopyDtoH : kCopyHtoD, d2h ? kMemDevice : host_kind,
                           d2h ? host_kind : kMemDevice, opt(d2h, device), opt(d2h, kContext),
                           opt(!d2h, device), opt(!d2h, kContext)});
          insert(copy_info_, {corr, opt(e.tensor >= 0, e.tensor), int64_t{e.pinned},
                              int64_t{e.prefetch}, e.name});
          launch(start, gtid, corr, "cudaMemcpyAsync");
          streams_.insert({gpid, e.stream});
          break;
        }
        case EventKind::Compute: {
          const int64_t name = intern(e.name.empty() ? "compute" : e.name);
          const int64_t corr = ++correlation_;
          insert(kernel_,
                 {start, end, device, kContext, e.stream, corr, gpid, name, name, name, corr});
          launch(start, gtid, corr, "cudaLaunchKernel");
          streams_.insert({gpid, e.stream});
          break;
        }
        case EventKind::Step:
        case EventKind::Forward:
        case EventKind::Backward:
          nvtx(start, end, kNvtxPushPopRange, nvtx_text(e), gtid, gtid, Value(), Value());
          break;
        case EventKind::Wait:
          nvtx(start, end, kNvtxPushPopRange, nvtx_text(e), gtid, gtid, Value(),
               text_of(json({{"tensor", e.tensor}, {"kind", e.name}})));
          break;
        case EventKind::Recompute:
          nvtx(start, end, kNvtxPushPopRange, nvtx_text(e), gtid, gtid, e.bytes,
               text_of(json({{"bytes", e.bytes}, {"tensors", e.tensor}})));
          break;
        case EventKind::DiskWrite:
        case EventKind::DiskRead:
          // Not a CUDA copy: an NVTX range, as Nsight Systems shows the engine's own work.
          nvtx(start, end, kNvtxPushPopRange, nvtx_text(e), gtid, gtid, e.bytes,
               text_of(json({{"tensor", e.tensor}, {"bytes", e.bytes}})));
          break;
        case EventKind::Pack:
        case EventKind::Unpack: {
          const bool pack = e.kind == EventKind::Pack;
          const json payload = {
              {"bytes", e.bytes}, {"tensor", e.tensor}, {pack ? "decision" : "source", e.name}};
          nvtx(start, Value(), kNvtxMark, nvtx_text(e), gtid, Value(), e.bytes, text_of(payload));
          break;
        }
      }
    }
    for (const auto& s : occupancy) {
      last = std::max(last, s.time_ns - origin);
      insert(occupancy_, {s.time_ns - origin, gpid, s.fwd_count, s.fwd_bytes, s.bwd_count,
                          s.bwd_bytes, opt(s.device_bytes >= 0, s.device_bytes)});
    }
    return {origin, last};
  }

 private:
  // An NVTX row: the text inline (`text`, what most scripts read) and registered (`textId`, what
  // Nsight writes for registered strings and what joins through StringIds read).
  void nvtx(int64_t start, Value end, int64_t type, const std::string& text, int64_t gtid,
            Value end_gtid, Value int64_value, Value json_text) {
    insert(nvtx_, {start, std::move(end), type, text, gtid, std::move(end_gtid), intern(text),
                   std::move(int64_value), std::move(json_text)});
  }
  // The CUDA API call that launched an activity, on the run's thread with the activity's
  // correlationId: readers (nsys-tui's tree, nsys's cuda_api_gpu_sum) find a kernel's or copy's
  // NVTX range through it. offtune does not record launches, so the call is placed at the
  // activity's start and lasts no time; it lies in the ranges open when the activity began.
  void launch(int64_t start, int64_t gtid, int64_t corr, const char* api) {
    insert(runtime_, {start, start, kEventClassCudaRuntime, gtid, corr, intern(api)});
  }

  Statement string_, memcpy_, copy_info_, kernel_, runtime_, nvtx_, occupancy_;
  std::unordered_map<std::string, int64_t> strings_;
  int64_t correlation_ = 0;
  std::set<std::pair<int64_t, int64_t>> streams_;  // (globalPid, streamId) with activity

 public:
  const std::set<std::pair<int64_t, int64_t>>& streams() const { return streams_; }
};

void write_enum(const Connection& db, const char* table, const EnumRow* rows, size_t count) {
  Statement row(db, std::string("INSERT INTO ") + table + " VALUES (?,?,?)");
  for (size_t i = 0; i < count; ++i) {
    insert(row, {rows[i].id, std::string(rows[i].name), std::string(rows[i].label)});
  }
}

}  // namespace

void export_nsys_sqlite(Store& store, const std::vector<RunId>& runs, const std::string& path) {
  detail::PendingFile file(path, store.path());  // a target that must not be written: refused first
  const std::vector<RunRecord> records = detail::load_runs(store, runs);

  {
    // The one SQLite error path, phrased as an export's: "cannot write <target>: <SQLite's words>".
    Connection db(file.path(), Access::Create,
                  {.on_error = [&path](const detail::SqliteFailure& f) {
                    throw ExportError("cannot write " + path + ": " + f.sqlite_message);
                  }});
    // No journal and no syncs: a failed export deletes the file anyway, so there is nothing to
    // recover, and the final close writes every page out before the rename.
    db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;", "begin");
    db.exec(kSchema, "create the tables");
    for (const char* table : kEnumTables) {
      db.exec(std::string("CREATE TABLE ") + table +
                  " (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);",
              "create the enum tables");
    }
    write_enum(db, "ENUM_CUDA_MEMCPY_OPER", kMemcpyOper, std::size(kMemcpyOper));
    write_enum(db, "ENUM_CUDA_MEM_KIND", kMemKind, std::size(kMemKind));
    write_enum(db, "ENUM_NSYS_EVENT_TYPE", kEventType, std::size(kEventType));
    write_enum(db, "ENUM_NSYS_EVENT_CLASS", kEventClass, std::size(kEventClass));
    {
      NsysWriter writer(db);
      Statement process(db, "INSERT INTO PROCESSES VALUES (?,?,?)");
      Statement thread(db, "INSERT INTO ThreadNames VALUES (?,0,?)");
      Statement run_row(db, "INSERT INTO OFFTUNE_RUNS VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
      // On host-sim the "GPU" is the modelled device: its name says so (env.device), and so does
      // busLocation, which readers show beside it (nsys-tui's info: "PCI=host-sim").
      Statement gpu(db, "INSERT INTO TARGET_INFO_GPU (vmId,id,name,busLocation) VALUES (0,?,?,?)");
      Statement cuda_device(db,
                            "INSERT INTO TARGET_INFO_CUDA_DEVICE (gpuId,cudaId,pid) "
                            "VALUES (?,?,?)");
      // The run's CUDA context on its device, as TARGET_INFO_CUDA_STREAM names it (context 1,
      // hardware and VM 0); its null stream is stream 0, offtune's compute stream.
      Statement context(db,
                        "INSERT INTO TARGET_INFO_CUDA_CONTEXT_INFO (nullStreamId,hwId,vmId,"
                        "processId,deviceId,contextId,isGreenContext) VALUES (0,0,0,?,?,1,0)");
      // A launched process's standard output and error, which a real export keeps (and readers
      // look up by file name): offtune does not capture them, and says so in the name.
      Statement streams(db, "INSERT INTO ProcessStreams VALUES (?,?,?)");

      // One device id per distinct device name, in order of first appearance.
      std::map<std::string, int64_t> devices;
      int64_t stop = 0;
      std::optional<int64_t> session_start;
      for (const RunRecord& r : records) {
        auto [dev, added] = devices.try_emplace(r.env.device, static_cast<int64_t>(devices.size()));
        if (added) {
          insert(gpu, {dev->second, r.env.device,
                       r.env.backend == "host-sim" ? Value(std::string("host-sim")) : Value()});
        }
        // The device as the run's process saw it: Nsight joins activity (deviceId = CUDA device
        // id) to TARGET_INFO_GPU through this table.
        insert(cuda_device, {dev->second, dev->second, r.id.value});
        insert(context, {r.id.value, dev->second});
        for (const char* stream : {"stdout", "stderr"}) {
          const std::string name = "offtune run " + std::to_string(r.id.value) + " " + stream +
                                   " (not captured by offtune)";
          insert(streams, {global_pid(r.id), writer.intern(name), writer.intern("")});
        }
        const std::string title = run_title(r);
        insert(process, {global_pid(r.id), r.id.value, title});
        insert(thread, {writer.intern(title), global_tid(r.id)});
        const auto [origin, last] = writer.write_run(store, r, dev->second);
        stop = std::max(stop, last);
        insert(run_row, {global_pid(r.id), r.id.value, title, r.workload.model,
                         text_of(to_json(r.config)), std::string(to_string(r.status)), r.error,
                         r.label, dev->second, r.started_unix_ns, r.finished_unix_ns, origin});
        if (r.started_unix_ns > 0) {
          session_start = std::min(session_start.value_or(r.started_unix_ns), r.started_unix_ns);
        }
      }

      // Every stream that ran a kernel or a copy; priority and flag (CUPTI's default stream
      // flag, 0) are not recorded by offtune.
      Statement stream(db, "INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (?,0,0,?,1,0,0)");
      for (const auto& [gpid, id] : writer.streams()) insert(stream, {id, gpid >> 24});

      Statement details(db, "INSERT INTO ANALYSIS_DETAILS VALUES (0,?,0,?)");
      insert(details, {stop, stop});
      if (session_start) {
        Statement start(db,
                        "INSERT INTO TARGET_INFO_SESSION_START_TIME (utcEpochNs,utcTime,"
                        "localTime) VALUES (?,?,?)");
        insert(start,
               {*session_start, iso_time(*session_start, true), iso_time(*session_start, false)});
      }
      Statement meta(db, "INSERT INTO META_DATA_EXPORT VALUES (?,?)");
      insert(meta, {std::string("EXPORT_SCHEMA_VERSION"), std::string(kSchemaVersion)});
      // The same in parts, as Nsight writes it too (readers compare the minor version).
      const std::string_view version(kSchemaVersion);
      const size_t dot1 = version.find('.');
      const size_t dot2 = version.find('.', dot1 + 1);
      insert(meta,
             {std::string("EXPORT_SCHEMA_VERSION_MAJOR"), std::string(version.substr(0, dot1))});
      insert(meta, {std::string("EXPORT_SCHEMA_VERSION_MINOR"),
                    std::string(version.substr(dot1 + 1, dot2 - dot1 - 1))});
      insert(meta,
             {std::string("EXPORT_SCHEMA_VERSION_MICRO"), std::string(version.substr(dot2 + 1))});
      insert(meta, {std::string("OFFTUNE_EXPORTER"), std::string("offtune nsys-layout export")});
      insert(meta, {std::string("OFFTUNE_TIME_ORIGIN"),
                    std::string("per run: 0 = the run's first event (OFFTUNE_RUNS.timeOriginNs)")});
      if (!records.empty() && !records.front().env.offtune_version.empty()) {
        insert(meta, {std::string("OFFTUNE_VERSION"), records.front().env.offtune_version});
      }
    }
    db.exec("COMMIT;", "commit");
    db.close();
  }
  file.commit();
}

}  // namespace offtune::profiler
