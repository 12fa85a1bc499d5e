#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <utility>

#include "offtune/profiler/cupti.hpp"

namespace offtune::profiler {

namespace {

// ---- calling CUPTI ----

enum class OnError { Throw, Log };

// The one place a failed CUPTI call becomes an exception.
[[noreturn]] void throw_cupti_error(CUptiResult result, const char* call) {
  throw CuptiError(std::string("CUPTI call `") + call +
                       "` failed: " + cupti_result_name(static_cast<int>(result)),
                   static_cast<int>(result));
}

CUptiResult checked(CUptiResult result, const char* call, OnError on_error,
                    CUptiResult also_fine = CUPTI_SUCCESS) {
  if (result == CUPTI_SUCCESS || result == also_fine) return result;
  if (on_error == OnError::Throw) throw_cupti_error(result, call);
  // Teardown and best-effort calls: a failure there must not lose the events already collected.
  std::fprintf(stderr, "offtune: CUPTI call `%s` failed: %s; continuing\n", call,
               cupti_result_name(static_cast<int>(result)).c_str());
  return result;
}

// Every CUPTI call goes through this, with the call as written for the message:
//   OFFTUNE_CUPTI(Throw, cuptiActivityEnable(kind));  // throws CuptiError
//   OFFTUNE_CUPTI(Log, cuptiActivityFlushAll(0));     // logs to stderr, returns the result
// An optional third argument is a result that is an answer rather than a failure (the end of a
// record walk).
#define OFFTUNE_CUPTI(on_error, call, ...) \
  checked((call), #call, OnError::on_error __VA_OPT__(, ) __VA_ARGS__)

// ---- is there a driver and a device? ----

// Answered without CUPTI: CUPTI 13.2 (the torch wheel's) crashes on its first call when
// libcuda.so.1 cannot be loaded, so that case must never reach it. The driver stays loaded (the
// process is about to use it, and unloading libcuda is not something it supports).
std::optional<std::string> probe_driver() {
  static const std::optional<std::string> answer = []() -> std::optional<std::string> {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == nullptr) {
      const char* why = dlerror();
      return std::string("no GPU or no NVIDIA driver here (libcuda.so.1 cannot be loaded: ") +
             (why ? why : "unknown error") + ")";
    }
    using CuInit = int (*)(unsigned int);
    using CuDeviceGetCount = int (*)(int*);
    auto cu_init = reinterpret_cast<CuInit>(dlsym(cuda, "cuInit"));
    auto cu_device_count = reinterpret_cast<CuDeviceGetCount>(dlsym(cuda, "cuDeviceGetCount"));
    if (cu_init == nullptr || cu_device_count == nullptr) {
      return std::string("no usable NVIDIA driver (libcuda.so.1 lacks cuInit)");
    }
    if (const int rc = cu_init(0); rc != 0) {
      // 100: CUDA_ERROR_NO_DEVICE (none visible, e.g. CUDA_VISIBLE_DEVICES=""); others: a driver
      // that does not work (version mismatch, not loaded in the kernel, ...).
      return rc == 100 ? std::string("no GPU: the NVIDIA driver sees no CUDA device")
                       : "the NVIDIA driver failed to initialise (cuInit error " +
                             std::to_string(rc) + "); no usable GPU";
    }
    int devices = 0;
    if (cu_device_count(&devices) != 0 || devices == 0) {
      return std::string("no GPU: the NVIDIA driver sees no CUDA device");
    }
    return std::nullopt;
  }();
  return answer;
}

// ---- turning records into events ----

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CUPTI's timestamps on the engine's clock (steady_clock), so that its copies and kernels line up
// with the recorder's events without an offset estimated from two clocks.
uint64_t CUPTIAPI steady_timestamp() { return static_cast<uint64_t>(steady_now_ns()); }

// Copies a record's fixed part out of the buffer: no alignment is assumed, and when the record is
// shorter than the struct (a CUPTI older than the headers) the rest reads as zero.
template <typename Record>
Record read_record(const uint8_t* at, size_t available) {
  Record r;
  std::memset(&r, 0, sizeof r);
  std::memcpy(&r, at, std::min(sizeof r, available));
  return r;
}

std::optional<TimelineEvent> convert_record(const uint8_t* at, size_t available,
                                            int64_t clock_offset_ns, ActivityParseStats& stats) {
  CUpti_ActivityKind kind;
  std::memcpy(&kind, at, sizeof kind);
  ++stats.records;
  TimelineEvent ev;
  uint64_t start = 0;
  uint64_t end = 0;
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto r = read_record<CUpti_ActivityMemcpy6>(at, available);
      switch (r.copyKind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
          ev.kind = EventKind::CopyD2H;
          ev.pinned = r.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
          ev.name = "d2h";
          break;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
          ev.kind = EventKind::CopyH2D;
          ev.pinned = r.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
          ev.name = "h2d";
          break;
        default:  // device-to-device, host-to-host, peer: not offload traffic
          ++stats.skipped;
          return std::nullopt;
      }
      ev.bytes = static_cast<int64_t>(r.bytes);
      ev.stream = r.streamId;
      start = r.start;
      end = r.end;
      break;
    }
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto r = read_record<CUpti_ActivityKernel10>(at, available);
      ev.kind = EventKind::Compute;
      ev.stream = r.streamId;
      ev.name = r.name != nullptr ? r.name : "kernel";
      start = r.start;
      end = r.end;
      break;
    }
    default:
      ++stats.skipped;
      return std::nullopt;
  }
  // A forced flush hands over records whose work had not finished: no timestamps yet.
  if ((start == 0 && end == 0) || end < start) {
    ++stats.skipped;
    return std::nullopt;
  }
  ev.start_ns = static_cast<int64_t>(start) + clock_offset_ns;
  ev.end_ns = static_cast<int64_t>(end) + clock_offset_ns;
  ++stats.events;
  return ev;
}

// Record sizes as the headers define them; 0 for kinds this walk cannot size.
size_t header_record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    default:
      return 0;
  }
}

void sort_by_start(std::vector<TimelineEvent>& events) {
  std::stable_sort(
      events.begin(), events.end(),
      [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_ns < b.start_ns; });
}

// ---- the collectors ----

class NullCollector final : public ActivityCollector {
 public:
  explicit NullCollector(std::string reason) : status_("CUPTI collection off: " + reason) {}
  void start() override {}
  void stop() override {}
  void flush() override {}
  std::vector<TimelineEvent> take() override { return {}; }
  int64_t dropped_records() const override { return 0; }
  std::string status() const override { return status_; }
  bool active() const override { return false; }

 private:
  const std::string status_;
};

class CuptiCollector;

// CUPTI's buffer callbacks are plain functions, process-wide: they reach the one active collector
// through this pointer. Buffer size is read by the request callback, which may run on CUPTI's
// thread while start() is still enabling kinds.
std::mutex g_active_mutex;
CuptiCollector* g_active = nullptr;  // guarded by g_active_mutex
std::atomic<size_t> g_buffer_bytes{size_t{4} << 20};

constexpr size_t kBufferAlignment = ACTIVITY_RECORD_ALIGNMENT;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t size, size_t valid);
void CUPTIAPI ignore_callbacks(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

class CuptiCollector final : public ActivityCollector {
 public:
  explicit CuptiCollector(const CollectorOptions& options) : options_(options) {
    status_ = "CUPTI collector not started";
  }

  ~CuptiCollector() override {
    // stop() only logs; nothing escapes a destructor.
    stop();
  }

  void start() override {
    if (active_.load() || stepped_aside_) return;
    if (auto reason = probe_driver()) return step_aside(*reason);
    {
      std::lock_guard<std::mutex> lock(g_active_mutex);
      if (g_active != nullptr) {
        return step_aside_locked(
            "another offtune CUPTI collector is already active in this process");
      }
      g_active = this;  // claimed: buffers from here on are ours
    }
    g_buffer_bytes.store(static_cast<size_t>(options_.buffer_bytes));
    try {
      enable();
    } catch (const CuptiError& e) {
      teardown();
      if (auto reason = cupti_step_aside_reason(e.result())) {
        if (!other_subscriber_.empty()) *reason += "; CUPTI is held by: " + other_subscriber_;
        return step_aside(*reason);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      status_ = std::string("CUPTI collector failed to start: ") + e.what();
      throw;
    }
    dropped_.store(0);
    active_.store(true);
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = std::string("CUPTI collecting memcpy and ") + kernel_kind_name_ + " activity (" +
              std::to_string(options_.buffer_bytes >> 20) + " MiB buffers)";
  }

  void stop() override {
    if (!active_.exchange(false)) return;
    teardown();
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = "CUPTI collector stopped: " + std::to_string(delivered_) + " events, " +
              std::to_string(dropped_.load()) + " dropped records";
  }

  void flush() override {
    if (!active_.load()) return;
    OFFTUNE_CUPTI(Log, cuptiActivityFlushAll(0));
  }

  std::vector<TimelineEvent> take() override {
    std::vector<TimelineEvent> out;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      out.swap(events_);
    }
    sort_by_start(out);
    return out;
  }

  int64_t dropped_records() const override { return dropped_.load(); }

  std::string status() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
  }

  bool active() const override { return active_.load(); }

  // From buffer_completed, with g_active_mutex held. Walks with CUPTI (see the header on why not
  // parse_activity_buffer's fixed sizes); the driver is known to be there.
  void absorb(uint8_t* buffer, size_t valid) {
    std::vector<TimelineEvent> events;
    ActivityParseStats stats;
    CUpti_Activity* record = nullptr;
    // MAX_LIMIT_REACHED is the end of the buffer; anything else but success, a broken buffer.
    while (OFFTUNE_CUPTI(Log, cuptiActivityGetNextRecord(buffer, valid, &record),
                         CUPTI_ERROR_MAX_LIMIT_REACHED) == CUPTI_SUCCESS) {
      const auto* at = reinterpret_cast<const uint8_t*>(record);
      const size_t available = valid - static_cast<size_t>(at - buffer);
      if (auto ev = convert_record(at, available, clock_offset_ns_, stats)) {
        events.push_back(std::move(*ev));
      }
    }
    size_t dropped = 0;
    if (OFFTUNE_CUPTI(Log, cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped)) ==
        CUPTI_SUCCESS) {
      dropped_.fetch_add(static_cast<int64_t>(dropped));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    delivered_ += static_cast<int64_t>(events.size());
    events_.insert(events_.end(), std::make_move_iterator(events.begin()),
                   std::make_move_iterator(events.end()));
  }

 private:
  void enable() {
    // Claim CUPTI: up to CUDA 13.2, or with drivers older than r610, it allows one subscriber per
    // process, and Nsight Systems/Compute and torch's profiler all subscribe. Held until stop(),
    // so that a client arriving later is the one told.
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "offtune";
    params.oldSubscriberName = holder;  // who holds CUPTI, when it is not us
    params.oldSubscriberSize = sizeof holder;
    try {
      OFFTUNE_CUPTI(Throw, cuptiSubscribe_v2(&subscriber_, ignore_callbacks, nullptr, &params));
    } catch (const CuptiError&) {
      holder[sizeof holder - 1] = '\0';
      other_subscriber_ = holder;
      throw;
    }
    subscribed_ = true;
    // Our clock, before any kind is enabled (records keep the clock they were made with).
    if (OFFTUNE_CUPTI(Log, cuptiActivityRegisterTimestampCallback(steady_timestamp)) ==
        CUPTI_SUCCESS) {
      clock_offset_ns_ = 0;
    } else {
      uint64_t cupti_now = 0;
      OFFTUNE_CUPTI(Throw, cuptiGetTimestamp(&cupti_now));
      clock_offset_ns_ = steady_now_ns() - static_cast<int64_t>(cupti_now);
    }
    OFFTUNE_CUPTI(Throw, cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    OFFTUNE_CUPTI(Throw, cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    memcpy_enabled_ = true;
    kernel_kind_ = CUPTI_ACTIVITY_KIND_KERNEL;
    kernel_kind_name_ = "kernel (serialised)";
    if (options_.concurrent_kernels) {
      const CUptiResult r =
          OFFTUNE_CUPTI(Log, cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      if (r == CUPTI_SUCCESS) {
        kernel_kind_ = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        kernel_kind_name_ = "concurrent kernel";
        kernel_enabled_ = true;
        return;
      }
      // Refused (e.g. NOT_COMPATIBLE where the serialised kind is already on): fall back to it.
      // Should CUPTI not work at all, the call below says so.
    }
    OFFTUNE_CUPTI(Throw, cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL));
    kernel_enabled_ = true;
  }

  // Undoes whatever enable() got to, delivering what was recorded; logs, never throws.
  void teardown() {
    if (kernel_enabled_) OFFTUNE_CUPTI(Log, cuptiActivityDisable(kernel_kind_));
    if (memcpy_enabled_) OFFTUNE_CUPTI(Log, cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
    if (kernel_enabled_ || memcpy_enabled_) {
      // Forced: the buffers still being filled too. Not under g_active_mutex: the completion
      // callback takes it, possibly on this very thread.
      OFFTUNE_CUPTI(Log, cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      size_t dropped = 0;
      if (OFFTUNE_CUPTI(Log, cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped)) ==
          CUPTI_SUCCESS) {
        dropped_.fetch_add(static_cast<int64_t>(dropped));
      }
    }
    kernel_enabled_ = memcpy_enabled_ = false;
    if (subscribed_) OFFTUNE_CUPTI(Log, cuptiUnsubscribe(subscriber_));
    subscribed_ = false;
    std::lock_guard<std::mutex> lock(g_active_mutex);
    if (g_active == this) g_active = nullptr;
  }

  void step_aside(const std::string& reason) {
    std::lock_guard<std::mutex> lock(g_active_mutex);
    step_aside_locked(reason);
  }
  void step_aside_locked(const std::string& reason) {
    stepped_aside_ = true;
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = "CUPTI collector stepped aside: " + reason;
  }

  const CollectorOptions options_;
  std::atomic<bool> active_{false};
  std::atomic<int64_t> dropped_{0};
  // Touched by start(), stop() and the destructor only (one thread at a time by contract).
  bool stepped_aside_ = false;
  bool subscribed_ = false;
  bool memcpy_enabled_ = false;
  bool kernel_enabled_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  CUpti_ActivityKind kernel_kind_ = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  const char* kernel_kind_name_ = "concurrent kernel";
  int64_t clock_offset_ns_ = 0;   // set before the first record can arrive
  std::string other_subscriber_;  // CUPTI's name for the client that refused us, if any

  mutable std::mutex mutex_;
  std::vector<TimelineEvent> events_;  // guarded by mutex_
  int64_t delivered_ = 0;              // guarded by mutex_
  std::string status_;                 // guarded by mutex_
};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t bytes = g_buffer_bytes.load();
  // Declining (a null buffer) makes CUPTI drop records, which dropped_records() then counts.
  *buffer = static_cast<uint8_t*>(
      ::operator new (bytes, std::align_val_t{kBufferAlignment}, std::nothrow));
  *size = *buffer != nullptr ? bytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (buffer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_active_mutex);
    if (g_active != nullptr && valid > 0) g_active->absorb(buffer, valid);
  }
  ::operator delete (buffer, std::align_val_t{kBufferAlignment});
}

}  // namespace

void validate(const CollectorOptions& options) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  if (options.buffer_bytes < kMiB || options.buffer_bytes > 10 * kMiB) {
    throw std::invalid_argument(
        "buffer_bytes must be between 1 MiB and 10 MiB (1048576 and "
        "10485760), got " +
        std::to_string(options.buffer_bytes));
  }
}

std::unique_ptr<ActivityCollector> make_cupti_collector(const CollectorOptions& options) {
  validate(options);
  return std::make_unique<CuptiCollector>(options);
}

std::unique_ptr<ActivityCollector> make_null_collector(std::string reason) {
  return std::make_unique<NullCollector>(std::move(reason));
}

std::vector<TimelineEvent> parse_activity_buffer(const uint8_t* buffer, size_t valid_bytes,
                                                 int64_t clock_offset_ns,
                                                 ActivityParseStats* stats) {
  ActivityParseStats local;
  ActivityParseStats& st = stats != nullptr ? *stats : local;
  std::vector<TimelineEvent> events;
  size_t offset = 0;
  while (buffer != nullptr && offset + sizeof(CUpti_ActivityKind) <= valid_bytes) {
    CUpti_ActivityKind kind;
    std::memcpy(&kind, buffer + offset, sizeof kind);
    const size_t size = header_record_size(kind);
    // An unknown kind cannot be stepped over (records carry no length), nor can a truncated one.
    if (size == 0 || offset + size > valid_bytes) break;
    if (auto ev = convert_record(buffer + offset, size, clock_offset_ns, st)) {
      events.push_back(std::move(*ev));
    }
    offset += size;
  }
  st.unparsed_bytes = valid_bytes > offset ? valid_bytes - offset : 0;
  sort_by_start(events);
  return events;
}

std::optional<std::string> cupti_step_aside_reason(int cupti_result) {
  const std::string code = " (" + cupti_result_name(cupti_result) + ")";
  switch (cupti_result) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
      return "another CUPTI client (Nsight Systems/Compute, or torch's profiler) is active; use "
             "--collector nvtx-only" +
             code;
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_UNKNOWN:
      return "CUPTI could not initialise: no GPU, or no working NVIDIA driver" + code;
    case CUPTI_ERROR_NOT_COMPATIBLE:
      return "CUPTI and the NVIDIA driver are not compatible (driver too old for this CUPTI)" +
             code;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "not permitted to profile the GPU (see "
             "https://developer.nvidia.com/CUPTI_ERROR_INSUFFICIENT_PRIVILEGES); use "
             "--collector nvtx-only" +
             code;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return "CUPTI activity tracing is not supported on this GPU or setup" + code;
    default:
      return std::nullopt;
  }
}

std::string cupti_result_name(int cupti_result) {
  switch (cupti_result) {
#define OFFTUNE_CUPTI_NAME(code) \
  case code:                     \
    return #code;
    OFFTUNE_CUPTI_NAME(CUPTI_SUCCESS)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_INVALID_PARAMETER)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_INVALID_DEVICE)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_INVALID_CONTEXT)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_INVALID_OPERATION)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_OUT_OF_MEMORY)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_HARDWARE)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_API_NOT_IMPLEMENTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_MAX_LIMIT_REACHED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_NOT_READY)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_NOT_COMPATIBLE)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_NOT_INITIALIZED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_INVALID_KIND)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_DISABLED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_HARDWARE_BUSY)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED)
    OFFTUNE_CUPTI_NAME(CUPTI_ERROR_UNKNOWN)
#undef OFFTUNE_CUPTI_NAME
    default:
      return "CUPTI_ERROR_" + std::to_string(cupti_result);
  }
}

}  // namespace offtune::profiler
