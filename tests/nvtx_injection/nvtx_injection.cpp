// A minimal NVTX tool for tests: NVTX loads it in place of a profiler when NVTX_INJECTION64_PATH
// names it, and it records what the process emits (domains, registered strings, categories, ranges,
// marks, counters) into an in-memory log that a test reads back through offtune_nvtx_log(). This is
// how test_instrumentation checks offtune's NVTX output without Nsight Systems.
//
// The contract, from the toolkit's nvtx3 headers (nvtxDetail/nvtxInit.h, nvtxImpl.h, nvtxTypes.h,
// nvtxExtInit.h, nvtxExtImplCounters_v1.h):
//  - core: NVTX calls InitializeInjectionNvtx2(getExportTable) once per process, on the first NVTX
//    call. The tool fetches the callbacks export table, asks it for each module's function table
//    (an array of pointers to NVTX's function-pointer slots, indexed by callback id) and writes its
//    own functions into the slots it handles; NVTX turns the rest into no-ops.
//  - extensions (the counters): NVTX calls InitializeInjectionNvtxExtension(moduleInfo) once per
//    extension module; moduleInfo's segments hold function slots indexed by the extension's
//    callback ids (NVTX3EXT_CBID_*), which the tool fills the same way.
//
// Log format: one record per line, tab-separated: the record kind, then key=value fields, e.g.
//   mark<TAB>domain=offtune<TAB>message=pack<TAB>message_type=registered<TAB>category=10<TAB>
//   payload_type=int64<TAB>payload=4096
// Handles the tool hands out (domains, strings) are resolved to their names in the log. Range
// and mark records carry thread=N (threads numbered from 1 in the order they first emit one), so
// that a test can rebuild each thread's push/pop stack and find the range a mark is in; push has
// depth=D (ranges open on the thread before it), pop the depth left after it (-1: a pop without a
// push).
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <string>

namespace {

// Never destroyed: NVTX calls may still arrive from other libraries' static destructors.
struct State {
  std::mutex mutex;
  std::string log;       // everything recorded
  std::string snapshot;  // what offtune_nvtx_log() last returned
  uint64_t next_dynamic_counter = NVTX_COUNTER_ID_DYNAMIC_START;
  nvtxRangeId_t next_range = 1;
};
State& state() {
  static State* s = new State;
  return *s;
}

thread_local int range_depth = 0;  // push/pop nest per thread

std::string thread_field() {
  static std::atomic<int> next{1};
  thread_local const int id = next.fetch_add(1);
  return "\tthread=" + std::to_string(id);
}

void append(const std::string& line) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.log += line;
  st.log += '\n';
}

// Handles are pointers to strings the tool allocates and never frees: NVTX has no "string
// destroyed" event, and a domain's handle may be used until the process exits.
struct DomainRecord {
  std::string name;
};
struct StringRecord {
  std::string text;
};

std::string domain_name(nvtxDomainHandle_t domain) {
  if (domain == nullptr) return "<global>";
  return reinterpret_cast<const DomainRecord*>(domain)->name;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

std::string attributes(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return "\tattributes=null";
  std::string s;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      s += "\tmessage=";
      s += a->message.ascii ? a->message.ascii : "";
      s += "\tmessage_type=ascii";
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      s += "\tmessage=";
      if (a->message.registered) {
        s += reinterpret_cast<const StringRecord*>(a->message.registered)->text;
      }
      s += "\tmessage_type=registered";
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      s += "\tmessage_type=unicode";
      break;
    default:
      break;
  }
  if (a->category != 0) s += "\tcategory=" + std::to_string(a->category);
  if (a->colorType == NVTX_COLOR_ARGB) s += "\tcolor=" + hex32(a->color);
  switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_INT64:
      s += "\tpayload_type=int64\tpayload=" + std::to_string(a->payload.llValue);
      break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
      s += "\tpayload_type=uint64\tpayload=" + std::to_string(a->payload.ullValue);
      break;
    case NVTX_PAYLOAD_TYPE_INT32:
      s += "\tpayload_type=int32\tpayload=" + std::to_string(a->payload.iValue);
      break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
      s += "\tpayload_type=uint32\tpayload=" + std::to_string(a->payload.uiValue);
      break;
    case NVTX_PAYLOAD_TYPE_DOUBLE:
      s += "\tpayload_type=double\tpayload=" + std::to_string(a->payload.dValue);
      break;
    case NVTX_PAYLOAD_TYPE_FLOAT:
      s += "\tpayload_type=float\tpayload=" + std::to_string(a->payload.fValue);
      break;
    default:
      break;
  }
  return s;
}

// ---- core2: the domain API that nvtx3.hpp uses ----

nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  auto* d = new DomainRecord{name ? name : ""};
  append(std::string("domain_create\tname=") + d->name);
  return reinterpret_cast<nvtxDomainHandle_t>(d);
}

void NVTX_API domain_destroy(nvtxDomainHandle_t domain) {
  append("domain_destroy\tdomain=" + domain_name(domain));
}

nvtxStringHandle_t NVTX_API domain_register_string_a(nvtxDomainHandle_t domain, const char* text) {
  auto* s = new StringRecord{text ? text : ""};
  append("register_string\tdomain=" + domain_name(domain) + "\ttext=" + s->text);
  return reinterpret_cast<nvtxStringHandle_t>(s);
}

void NVTX_API domain_name_category_a(nvtxDomainHandle_t domain, uint32_t id, const char* name) {
  append("name_category\tdomain=" + domain_name(domain) + "\tid=" + std::to_string(id) +
         "\tname=" + (name ? name : ""));
}

void NVTX_API domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  append("mark\tdomain=" + domain_name(domain) + thread_field() + attributes(a));
}

int NVTX_API domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
  append("push\tdomain=" + domain_name(domain) + thread_field() +
         "\tdepth=" + std::to_string(range_depth) + attributes(a));
  return range_depth++;
}

int NVTX_API domain_range_pop(nvtxDomainHandle_t domain) {
  const int left = range_depth == 0 ? -1 : --range_depth;  // -1: unbalanced pop
  append("pop\tdomain=" + domain_name(domain) + thread_field() + "\tdepth=" + std::to_string(left));
  return left;
}

nvtxRangeId_t next_range_id() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.next_range++;
}

nvtxRangeId_t NVTX_API domain_range_start_ex(nvtxDomainHandle_t domain,
                                             const nvtxEventAttributes_t* a) {
  const nvtxRangeId_t id = next_range_id();
  append("start\tdomain=" + domain_name(domain) + thread_field() + "\tid=" + std::to_string(id) +
         attributes(a));
  return id;
}

void NVTX_API domain_range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id) {
  append("end\tdomain=" + domain_name(domain) + thread_field() + "\tid=" + std::to_string(id));
}

// ---- core: the global-domain API (nvtxMarkA, nvtxRangePushA, ...) ----

void NVTX_API mark_ex(const nvtxEventAttributes_t* a) { domain_mark_ex(nullptr, a); }
void NVTX_API mark_a(const char* message) {
  append(std::string("mark\tdomain=<global>\tmessage=") + (message ? message : "") +
         "\tmessage_type=ascii");
}
int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) {
  return domain_range_push_ex(nullptr, a);
}
int NVTX_API range_push_a(const char* message) {
  append("push\tdomain=<global>" + thread_field() + "\tdepth=" + std::to_string(range_depth) +
         "\tmessage=" + (message ? message : "") + "\tmessage_type=ascii");
  return range_depth++;
}
int NVTX_API range_pop() { return domain_range_pop(nullptr); }
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* a) {
  return domain_range_start_ex(nullptr, a);
}
void NVTX_API range_end(nvtxRangeId_t id) { domain_range_end(nullptr, id); }

// ---- the counters extension ----

uint64_t NVTX_API counter_register(nvtxDomainHandle_t domain, const nvtxCounterAttr_t* attr) {
  if (attr == nullptr) return NVTX_COUNTER_ID_NONE;
  uint64_t id = attr->counterId;
  if (id < NVTX_COUNTER_ID_STATIC_START || id >= NVTX_COUNTER_ID_DYNAMIC_START) {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    id = st.next_dynamic_counter++;
  }
  std::string line = "counter_register\tdomain=" + domain_name(domain) +
                     "\tid=" + std::to_string(id) + "\tname=" + (attr->name ? attr->name : "") +
                     "\tschema=" + std::to_string(attr->schemaId) +
                     "\tscope=" + std::to_string(attr->scopeId);
  if (attr->semantics != nullptr && attr->semantics->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1) {
    const auto* counter = reinterpret_cast<const nvtxSemanticsCounter_t*>(attr->semantics);
    line += std::string("\tunit=") + (counter->unit ? counter->unit : "");
  }
  append(line);
  return id;
}

void NVTX_API counter_sample_int64(nvtxDomainHandle_t domain, uint64_t id, int64_t value) {
  append("counter_int64\tdomain=" + domain_name(domain) + "\tid=" + std::to_string(id) +
         "\tvalue=" + std::to_string(value));
}

void NVTX_API counter_sample_float64(nvtxDomainHandle_t domain, uint64_t id, double value) {
  append("counter_float64\tdomain=" + domain_name(domain) + "\tid=" + std::to_string(id) +
         "\tvalue=" + std::to_string(value));
}

void NVTX_API counter_sample(nvtxDomainHandle_t domain, uint64_t id, const void*, size_t size) {
  append("counter_sample\tdomain=" + domain_name(domain) + "\tid=" + std::to_string(id) +
         "\tsize=" + std::to_string(size));
}

void NVTX_API counter_sample_no_value(nvtxDomainHandle_t domain, uint64_t id, uint8_t reason) {
  append("counter_no_value\tdomain=" + domain_name(domain) + "\tid=" + std::to_string(id) +
         "\treason=" + std::to_string(reason));
}

void NVTX_API counter_batch_submit(nvtxDomainHandle_t domain, const nvtxCounterBatch_t* batch) {
  append("counter_batch\tdomain=" + domain_name(domain) +
         "\tid=" + std::to_string(batch ? batch->counterId : 0));
}

template <typename Fn>
void install(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn* fn) {
  // Slot 0 is unused; the table holds `size` slots after it.
  if (id == 0 || id > size || table[id] == nullptr) return;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

template <typename Fn>
void install_ext(const nvtxExtModuleSegment_t& segment, size_t id, Fn* fn) {
  if (id >= segment.slotCount) return;
  segment.functionSlots[id] = reinterpret_cast<intptr_t>(fn);
}

}  // namespace

#define OFFTUNE_NVTX_INJECTION_EXPORT extern "C" __attribute__((visibility("default")))

OFFTUNE_NVTX_INJECTION_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  if (get_table == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  const auto* version =
      static_cast<const NvtxExportTableVersionInfo*>(get_table(NVTX_ETID_VERSIONINFO));
  if (version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo)) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }

  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  install(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a);
  install(table, size, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
  install(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &domain_register_string_a);
  install(table, size, NVTX_CBID_CORE2_DomainNameCategoryA, &domain_name_category_a);
  install(table, size, NVTX_CBID_CORE2_DomainMarkEx, &domain_mark_ex);
  install(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex);
  install(table, size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
  install(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, &domain_range_start_ex);
  install(table, size, NVTX_CBID_CORE2_DomainRangeEnd, &domain_range_end);

  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table) return 0;
  install(table, size, NVTX_CBID_CORE_MarkEx, &mark_ex);
  install(table, size, NVTX_CBID_CORE_MarkA, &mark_a);
  install(table, size, NVTX_CBID_CORE_RangePushEx, &range_push_ex);
  install(table, size, NVTX_CBID_CORE_RangePushA, &range_push_a);
  install(table, size, NVTX_CBID_CORE_RangePop, &range_pop);
  install(table, size, NVTX_CBID_CORE_RangeStartEx, &range_start_ex);
  install(table, size, NVTX_CBID_CORE_RangeEnd, &range_end);

  append("init\tnvtx_version=" + std::to_string(version != nullptr ? version->version : 0u));
  return 1;
}

OFFTUNE_NVTX_INJECTION_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  if (info == nullptr) return 0;
  append("ext_init\tmodule=" + std::to_string(info->moduleId) +
         "\tcompat=" + std::to_string(info->compatId));
  // Only the counters extension, and only the layout these headers describe; any other module is
  // accepted with its slots left empty, which NVTX turns into no-ops.
  if (info->moduleId != NVTX_EXT_COUNTERS_MODULEID ||
      info->compatId != NVTX_EXT_COUNTERS_COMPATID || info->segmentsCount < 1 ||
      info->segments == nullptr) {
    return 1;
  }
  const nvtxExtModuleSegment_t& segment = info->segments[0];
  install_ext(segment, NVTX3EXT_CBID_nvtxCounterRegister, &counter_register);
  install_ext(segment, NVTX3EXT_CBID_nvtxCounterSampleInt64, &counter_sample_int64);
  install_ext(segment, NVTX3EXT_CBID_nvtxCounterSampleFloat64, &counter_sample_float64);
  install_ext(segment, NVTX3EXT_CBID_nvtxCounterSample, &counter_sample);
  install_ext(segment, NVTX3EXT_CBID_nvtxCounterSampleNoValue, &counter_sample_no_value);
  install_ext(segment, NVTX3EXT_CBID_nvtxCounterBatchSubmit, &counter_batch_submit);
  return 1;
}

// Everything logged since the library was loaded. The pointer stays valid until the next call.
OFFTUNE_NVTX_INJECTION_EXPORT const char* offtune_nvtx_log() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.snapshot = st.log;
  return st.snapshot.c_str();
}
