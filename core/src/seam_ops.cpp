// The seam's second half (seam.hpp): ATen's op observer. The device model (sim_clock.cpp) times
// every ATen op; ATen tells observers about ops through record-function callbacks, the API torch's
// profiler is built on. Their signatures have changed between releases, hence the static_asserts,
// checked against the pinned torch (2.15.0).
//
// Built with NDEBUG whatever the build type (core/CMakeLists.txt): libtorch is a release build, and
// RecordFunction has a debug-only member that its inline accessors check in a debug build
// (inputs() asserts "outside the start callback" on a flag the release library never sets). This
// file must see the class as the library was built.
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "offtune/device_model.hpp"
#include "seam.hpp"

#ifndef NDEBUG
#error "seam_ops.cpp must be built with NDEBUG (see the comment above)"
#endif

namespace offtune::detail {

static_assert(std::is_same_v<at::RecordFunctionCallback::StartCallback,
                             std::unique_ptr<at::ObserverContext> (*)(const at::RecordFunction&)>,
              "torch changed RecordFunctionCallback::StartCallback; update offtune's seam");
static_assert(std::is_same_v<at::RecordFunctionCallback::EndCallback,
                             void (*)(const at::RecordFunction&, at::ObserverContext*)>,
              "torch changed RecordFunctionCallback::EndCallback; update offtune's seam");

namespace {

std::atomic<OpListener*> g_op_listener{nullptr};
std::mutex g_op_mutex;
std::optional<at::CallbackHandle> g_op_handle;

OpTensor op_tensor(const at::Tensor& t) {
  OpTensor o;
  o.sizes = t.sizes().vec();
  o.itemsize = static_cast<int64_t>(t.element_size());
  o.low_precision = t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
  if (t.has_storage()) {
    o.storage = t.storage().unsafeGetStorageImpl();
    o.storage_bytes = static_cast<int64_t>(t.storage().nbytes());
  }
  return o;
}

void add_tensors(const c10::IValue& v, std::vector<OpTensor>& out, bool* flag, bool* flag_seen) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out.push_back(op_tensor(v.toTensor()));
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) {
      if (t.defined()) out.push_back(op_tensor(t));
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) add_tensors(e, out, nullptr, nullptr);
  } else if (v.isBool() && flag != nullptr && !*flag_seen) {
    *flag = v.toBool();
    *flag_seen = true;
  }
}

OpCall describe_inputs(const at::RecordFunction& fn) {
  OpCall call;
  call.name = fn.name();
  bool seen = false;
  for (const c10::IValue& v : fn.inputs()) add_tensors(v, call.inputs, &call.flag, &seen);
  return call;
}

std::unique_ptr<at::ObserverContext> op_started(const at::RecordFunction& fn) {
  if (OpListener* l = g_op_listener.load(std::memory_order_acquire)) {
    l->op_begin(fn.name(), [&] { return describe_inputs(fn); });
  }
  return nullptr;
}

void op_ended(const at::RecordFunction& fn, at::ObserverContext*) {
  if (OpListener* l = g_op_listener.load(std::memory_order_acquire)) {
    l->op_end([&](OpCall& call) {
      for (const c10::IValue& v : fn.outputs()) add_tensors(v, call.outputs, nullptr, nullptr);
    });
  }
}

}  // namespace

void set_op_listener(OpListener* listener) {
  std::lock_guard<std::mutex> lock(g_op_mutex);
  g_op_listener.store(listener, std::memory_order_release);
  if (listener != nullptr && !g_op_handle) {
    g_op_handle = at::addGlobalCallback(at::RecordFunctionCallback(&op_started, &op_ended)
                                            .needsInputs(true)
                                            .needsOutputs(true)
                                            .scopes({at::RecordScope::FUNCTION}));
  } else if (listener == nullptr && g_op_handle) {
    at::removeCallback(*g_op_handle);
    g_op_handle.reset();
  }
}

}  // namespace offtune::detail
