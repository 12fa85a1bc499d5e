// Which saved tensors the engine offloads: the one rule that the engine (core/src/offloader.cpp,
// Context::pack_impl) applies and that the what-if predictor (profiler/src/predict.cpp) replays,
// so that a prediction offloads exactly the tensors a measured run does.
//
// A saved tensor is kept on the device for what it is (its kind: a parameter, a registered
// storage, not a device tensor, ...; Context::classify decides that from the tensor) or for its
// size: its weight below min_offload_size. Everything else is offloaded. A user may call these to
// know what the engine will do with a tensor of a given kind and size; they decide nothing by
// themselves.
#pragma once

#include <cstdint>

#include "offtune/observer.hpp"
#include "offtune/options.hpp"

namespace offtune {

// The bytes a saved tensor weighs against min_offload_size. offtune weighs it by the span its copy
// moves (`span_bytes`, the bytes from its first to its last element: a strided view weighs its
// whole span); the reference (Semantics::Trl) by its elements, numel x item size.
constexpr int64_t offload_weight(Semantics semantics, int64_t span_bytes, int64_t numel,
                                 int64_t item_bytes) {
  return semantics == Semantics::Trl ? numel * item_bytes : span_bytes;
}

// Whether `reason` keeps a tensor whatever the size knobs: every reason but None (offloadable) and
// BelowThreshold (kept for its size alone, so another min_offload_size may offload it).
constexpr bool kept_by_kind(KeepReason reason) {
  return reason != KeepReason::None && reason != KeepReason::BelowThreshold;
}

// The decision for a tensor whose kind gave `kind` (KeepReason::None when its kind may be
// offloaded) and that weighs `weight` (offload_weight): the reason it is kept, or None when it is
// offloaded. A tensor exactly min_offload_size bytes heavy is offloaded.
constexpr KeepReason offload_decision(KeepReason kind, int64_t weight, int64_t min_offload_size) {
  if (kind != KeepReason::None) return kind;
  return weight < min_offload_size ? KeepReason::BelowThreshold : KeepReason::None;
}

}  // namespace offtune
