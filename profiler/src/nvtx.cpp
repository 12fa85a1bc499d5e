#include "offtune/profiler/nvtx.hpp"

#ifndef NVTX_DISABLE
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>
#include <nvtx3/nvtx3.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#endif

namespace offtune::profiler {

#ifndef NVTX_DISABLE

namespace {

using RegisteredString = nvtx3::registered_string_in<NvtxDomain>;
using NamedCategory = nvtx3::named_category_in<NvtxDomain>;

// Category ids, grouped by tens so that a new sub-kind does not renumber the others (tools key
// their filters on the ids).
constexpr uint32_t kCategoryPhase = 1;
constexpr uint32_t kCategoryPack = 10;    // + PackDecision
constexpr uint32_t kCategoryCopy = 20;    // + 0 d2h, 1 h2d, 2 h2d prefetch, 3 disk write,
                                          //   4 disk read, 5 disk read ahead
constexpr uint32_t kCategoryUnpack = 30;  // + UnpackSource
constexpr uint32_t kCategoryWait = 40;    // + WaitKind (wait ranges)
constexpr uint32_t kCategoryHook = 50;    // + 0 pack, 1 unpack (hook ranges), 2 recompute
constexpr uint32_t kCategoryLayer = 60;   // + 0 forward, 1 backward

// Layers with a registered "layer N" of their own: more than the deepest common decoders (80 or
// 126 blocks); deeper models fall back to "layer" and the payload. Registered up front so that the
// hot path is an array index, never a registration (a call into the tool) in the middle of a step.
constexpr int64_t kNamedLayers = 128;

// Pinned copies in green, pageable ones in red: a pageable copy cannot overlap compute on CUDA and
// is the first thing to spot on a timeline.
constexpr nvtx3::rgb kPinned{0x2e, 0xa0, 0x43};
constexpr nvtx3::rgb kPageable{0xd0, 0x30, 0x30};

// Counter ids are static (fed forward) so that they are valid whether or not the tool hands ids
// back, and stable across runs for the same counter.
constexpr uint64_t kCounterStashForwardBytes = NVTX_COUNTER_ID_STATIC_START + 1;
constexpr uint64_t kCounterStashBackwardBytes = NVTX_COUNTER_ID_STATIC_START + 2;
constexpr uint64_t kCounterDeviceBytes = NVTX_COUNTER_ID_STATIC_START + 3;

// Everything registered with the domain, once per process (a function-local static: the first
// NVTX call loads the tool, which must not happen during static initialisation, before a test or a
// front end had a chance to set NVTX_INJECTION64_PATH).
struct Registry {
  RegisteredString step{"step"};
  RegisteredString forward{"forward"};
  RegisteredString backward{"backward"};
  RegisteredString pack{"pack"};
  RegisteredString unpack{"unpack"};
  RegisteredString offload{"offload"};
  RegisteredString reload{"reload"};
  RegisteredString spill{"spill"};
  RegisteredString disk_read{"disk read"};
  RegisteredString wait{"wait"};
  RegisteredString recompute{"recompute"};
  RegisteredString layer{"layer"};
  // registered_string_in is neither copyable nor default-constructible: build the table in place.
  std::array<RegisteredString, kNamedLayers> layer_n =
      named_layers(std::make_index_sequence<kNamedLayers>{});

  NamedCategory phase{kCategoryPhase, "phase"};
  std::array<NamedCategory, 3> pack_decision{{{kCategoryPack + 0, "pack: offloaded"},
                                              {kCategoryPack + 1, "pack: deduplicated"},
                                              {kCategoryPack + 2, "pack: kept"}}};
  std::array<NamedCategory, 6> copy{{{kCategoryCopy + 0, "copy: d2h"},
                                     {kCategoryCopy + 1, "copy: h2d"},
                                     {kCategoryCopy + 2, "copy: h2d prefetch"},
                                     {kCategoryCopy + 3, "copy: disk write"},
                                     {kCategoryCopy + 4, "copy: disk read"},
                                     {kCategoryCopy + 5, "copy: disk read ahead"}}};
  std::array<NamedCategory, 4> unpack_source{{{kCategoryUnpack + 0, "unpack: kept"},
                                              {kCategoryUnpack + 1, "unpack: forward-stash"},
                                              {kCategoryUnpack + 2, "unpack: reloaded"},
                                              {kCategoryUnpack + 3, "unpack: prefetched"}}};
  std::array<NamedCategory, 5> wait_kind{{{kCategoryWait + 0, "wait: forward-window"},
                                          {kCategoryWait + 1, "wait: reload"},
                                          {kCategoryWait + 2, "wait: drain"},
                                          {kCategoryWait + 3, "wait: spill"},
                                          {kCategoryWait + 4, "wait: disk-read"}}};
  NamedCategory hook_pack{kCategoryHook + 0, "hook: pack"};
  NamedCategory hook_unpack{kCategoryHook + 1, "hook: unpack"};
  NamedCategory recompute_category{kCategoryHook + 2, "checkpoint: recompute"};
  NamedCategory layer_forward{kCategoryLayer + 0, "layer: forward"};
  NamedCategory layer_backward{kCategoryLayer + 1, "layer: backward"};

  uint64_t stash_forward_bytes =
      register_bytes_counter(kCounterStashForwardBytes, "stash forward bytes",
                             "device bytes held by offload copies in flight (the forward window)");
  uint64_t stash_backward_bytes =
      register_bytes_counter(kCounterStashBackwardBytes, "stash backward bytes",
                             "device bytes held by reloaded or prefetched tensors in backward");
  uint64_t device_bytes = register_bytes_counter(kCounterDeviceBytes, "device bytes",
                                                 "allocated device bytes, sampled by the runner");

  template <size_t... I>
  static std::array<RegisteredString, sizeof...(I)> named_layers(std::index_sequence<I...>) {
    // NVTX copies the text at registration: the temporaries may go.
    return {{RegisteredString{("layer " + std::to_string(I)).c_str()}...}};
  }

  const RegisteredString& layer_name(int64_t index) const {
    return index >= 0 && index < kNamedLayers ? layer_n[static_cast<size_t>(index)] : layer;
  }

  static uint64_t register_bytes_counter(uint64_t id, const char* name, const char* description) {
    // A level that holds until the next sample, in bytes.
    static const nvtxSemanticsCounter_t semantics = [] {
      nvtxSemanticsCounter_t s{};
      s.header.structSize = sizeof(nvtxSemanticsCounter_t);
      s.header.semanticId = NVTX_SEMANTIC_ID_COUNTERS_V1;
      s.header.version = NVTX_COUNTER_SEMANTIC_VERSION;
      s.header.next = nullptr;
      s.flags = NVTX_COUNTER_FLAG_VALUETYPE_ABSOLUTE | NVTX_COUNTER_FLAG_INTERPOLATION_UNTIL_NEXT;
      s.unit = "bytes";
      s.unitScaleNumerator = 1;
      s.unitScaleDenominator = 1;
      s.limitType = NVTX_COUNTER_LIMIT_UNDEFINED;
      return s;
    }();
    nvtxCounterAttr_t attr{};
    attr.structSize = sizeof(attr);
    attr.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
    attr.name = name;
    attr.description = description;
    attr.scopeId = NVTX_SCOPE_CURRENT_SW_PROCESS;
    attr.semantics = &semantics.header;
    attr.counterId = id;
    const uint64_t returned = nvtxCounterRegister(nvtx3::domain::get<NvtxDomain>(), &attr);
    // 0 without a tool (the call is a no-op then, and so are the samples); a tool that accepted the
    // static id returns it.
    return returned != NVTX_COUNTER_ID_NONE ? returned : id;
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

// An enum value added later without a category of its own lands in the last one, never out of
// bounds.
template <typename Enum, size_t N>
const NamedCategory& pick(const std::array<NamedCategory, N>& table, Enum value) {
  return table[std::min(static_cast<size_t>(value), N - 1)];
}

nvtx3::payload bytes_payload(int64_t bytes) { return nvtx3::payload{bytes}; }

void sample(uint64_t counter, int64_t value) {
  nvtxCounterSampleInt64(nvtx3::domain::get<NvtxDomain>(), counter, value);
}

}  // namespace

bool nvtx_compiled_in() noexcept { return true; }

void nvtx_initialize() noexcept { (void)registry(); }

void nvtx_phase_push(NvtxPhase phase, int64_t step) noexcept {
  const Registry& reg = registry();
  const RegisteredString& message = phase == NvtxPhase::Step      ? reg.step
                                    : phase == NvtxPhase::Forward ? reg.forward
                                                                  : reg.backward;
  // The push nvtx3::scoped_range_in<NvtxDomain> makes, split from its pop so that the header stays
  // free of NVTX (see the header's opening comment).
  if (step >= 0) {
    nvtxDomainRangePushEx(nvtx3::domain::get<NvtxDomain>(),
                          nvtx3::event_attributes{message, reg.phase, nvtx3::payload{step}}.get());
  } else {
    nvtxDomainRangePushEx(nvtx3::domain::get<NvtxDomain>(),
                          nvtx3::event_attributes{message, reg.phase}.get());
  }
}

void nvtx_phase_pop() noexcept { nvtxDomainRangePop(nvtx3::domain::get<NvtxDomain>()); }

void nvtx_layer_forward_begin(int64_t layer) noexcept {
  const Registry& reg = registry();
  nvtxDomainRangePushEx(
      nvtx3::domain::get<NvtxDomain>(),
      nvtx3::event_attributes{reg.layer_name(layer), reg.layer_forward, nvtx3::payload{layer}}
          .get());
}

void nvtx_layer_forward_end() noexcept { nvtxDomainRangePop(nvtx3::domain::get<NvtxDomain>()); }

uint64_t nvtx_layer_backward_begin(int64_t layer) noexcept {
  const Registry& reg = registry();
  return nvtxDomainRangeStartEx(
      nvtx3::domain::get<NvtxDomain>(),
      nvtx3::event_attributes{reg.layer_name(layer), reg.layer_backward, nvtx3::payload{layer}}
          .get());
}

void nvtx_layer_backward_end(uint64_t range_id) noexcept {
  nvtxDomainRangeEnd(nvtx3::domain::get<NvtxDomain>(), range_id);
}

NvtxObserver::NvtxObserver() noexcept { nvtx_initialize(); }

void NvtxObserver::on_pack(const PackEvent& e) {
  const Registry& reg = registry();
  nvtx3::mark_in<NvtxDomain>(reg.pack, pick(reg.pack_decision, e.decision), bytes_payload(e.bytes));
}

void NvtxObserver::on_copy_issued(const CopyEvent& e) {
  const Registry& reg = registry();
  const bool d2h = e.direction == CopyDirection::DeviceToHost;
  if (is_disk(e.direction)) {
    // Disk traffic apart from the link's: its own messages and categories.
    const bool write = e.direction == CopyDirection::HostToDisk;
    const NamedCategory& category = write ? reg.copy[3] : (e.prefetch ? reg.copy[5] : reg.copy[4]);
    nvtx3::mark_in<NvtxDomain>(write ? reg.spill : reg.disk_read, category, bytes_payload(e.bytes));
    return;
  }
  const NamedCategory& category = d2h ? reg.copy[0] : (e.prefetch ? reg.copy[2] : reg.copy[1]);
  nvtx3::mark_in<NvtxDomain>(d2h ? reg.offload : reg.reload, category,
                             nvtx3::color{e.pinned ? kPinned : kPageable}, bytes_payload(e.bytes));
}

void NvtxObserver::on_unpack(const UnpackEvent& e) {
  const Registry& reg = registry();
  nvtx3::mark_in<NvtxDomain>(reg.unpack, pick(reg.unpack_source, e.source), bytes_payload(e.bytes));
}

void NvtxObserver::on_span_begin(Span span) {
  const Registry& reg = registry();
  const RegisteredString& message = span.kind == SpanKind::Pack        ? reg.pack
                                    : span.kind == SpanKind::Unpack    ? reg.unpack
                                    : span.kind == SpanKind::Recompute ? reg.recompute
                                                                       : reg.wait;
  const NamedCategory& category = span.kind == SpanKind::Pack     ? reg.hook_pack
                                  : span.kind == SpanKind::Unpack ? reg.hook_unpack
                                  : span.kind == SpanKind::Recompute
                                      ? reg.recompute_category
                                      : pick(reg.wait_kind, span.wait);
  // Push/pop: the engine ends each span on the thread that began it, within the same call
  // (observer.hpp), so the per-thread range stack stays balanced even on autograd's threads.
  nvtxDomainRangePushEx(nvtx3::domain::get<NvtxDomain>(),
                        nvtx3::event_attributes{message, category}.get());
}

void NvtxObserver::on_span_end(Span) { nvtxDomainRangePop(nvtx3::domain::get<NvtxDomain>()); }

void NvtxObserver::on_stash(const StashEvent& e) {
  const Registry& reg = registry();
  sample(reg.stash_forward_bytes, e.fwd_bytes);
  sample(reg.stash_backward_bytes, e.bwd_bytes);
}

void NvtxObserver::sample_device_bytes(int64_t bytes) noexcept {
  sample(registry().device_bytes, bytes);
}

#else  // NVTX_DISABLE: the same interface, compiled to nothing.

bool nvtx_compiled_in() noexcept { return false; }
void nvtx_initialize() noexcept {}
void nvtx_phase_push(NvtxPhase, int64_t) noexcept {}
void nvtx_phase_pop() noexcept {}
void nvtx_layer_forward_begin(int64_t) noexcept {}
void nvtx_layer_forward_end() noexcept {}
uint64_t nvtx_layer_backward_begin(int64_t) noexcept { return 0; }
void nvtx_layer_backward_end(uint64_t) noexcept {}
NvtxObserver::NvtxObserver() noexcept = default;
void NvtxObserver::on_pack(const PackEvent&) {}
void NvtxObserver::on_copy_issued(const CopyEvent&) {}
void NvtxObserver::on_unpack(const UnpackEvent&) {}
void NvtxObserver::on_stash(const StashEvent&) {}
void NvtxObserver::on_span_begin(Span) {}
void NvtxObserver::on_span_end(Span) {}
void NvtxObserver::sample_device_bytes(int64_t) noexcept {}

#endif

StepMarks nvtx_step_marks() {
  StepMarks marks;
  if (!nvtx_compiled_in()) return marks;
  // Push/pop like NvtxRange: StepMarks' phase begin and end pair on one thread.
  marks.phase_begin = [](StepPhase phase) {
    nvtx_phase_push(phase == StepPhase::Forward ? NvtxPhase::Forward : NvtxPhase::Backward);
  };
  marks.phase_end = [](StepPhase) { nvtx_phase_pop(); };
  marks.layer_forward_begin = [](int64_t layer) { nvtx_layer_forward_begin(layer); };
  marks.layer_forward_end = [](int64_t) { nvtx_layer_forward_end(); };
  marks.layer_backward_begin = [](int64_t layer) { return nvtx_layer_backward_begin(layer); };
  marks.layer_backward_end = [](int64_t, uint64_t range) { nvtx_layer_backward_end(range); };
  return marks;
}

}  // namespace offtune::profiler
